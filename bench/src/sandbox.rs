//! What the kernel sandbox costs a command: `bash -c true` started the way
//! dsh starts commands — under the guard alone, and under the guard with
//! the sandbox of `ask` mode (Landlock rules around the hidden paths, the
//! seccomp filter and bounding set, a user + mount namespace, and without
//! network a network namespace) — against bash started directly.

use std::process::Command;
use std::time::Instant;

use dsh_process::sandbox::Sandbox;

use crate::proc::{median, row};
use crate::Bench;

fn time(mut make: impl FnMut() -> Command, runs: usize) -> f64 {
    let mut times = Vec::new();
    for _ in 0..runs {
        let mut command = make();
        let started = Instant::now();
        let status = command.status().expect("start");
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(status.success(), "{command:?}: {status}");
    }
    median(times)
}

pub async fn rows(bench: &Bench) {
    let runs = 41;
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned());
    let sandbox = Sandbox {
        writable: vec![bench.cwd.clone(), bench.scratch.clone()],
        hidden: dsh_acp_server::sandbox::DEFAULT_HIDDEN
            .iter()
            .map(|path| std::path::Path::new(&home).join(path))
            .chain([bench.home.clone()])
            .collect(),
        read_only: Vec::new(),
        network: false,
    };
    let direct = time(
        || {
            let mut command = Command::new("bash");
            command.args(["-c", "true"]);
            command
        },
        runs,
    );
    // `bash -c true` under the guard, with these sandbox arguments.
    let under_guard = |sandbox: Option<&Sandbox>| {
        time(
            || {
                let mut command = Command::new(&bench.dsh);
                command
                    .arg("__guard")
                    .args(sandbox.map(Sandbox::to_args).unwrap_or_default())
                    .args(["--", "bash", "-c", "true"]);
                command
            },
            runs,
        )
    };
    let guarded = under_guard(None);
    let sandboxed = under_guard(Some(&sandbox));
    let files_only = under_guard(Some(&Sandbox {
        network: true,
        ..sandbox.clone()
    }));
    let support = dsh_process::sandbox::probe();
    row(
        "sandbox: `bash -c true` started directly (median of 41)",
        "—",
        format!("{direct:.2} ms"),
    );
    row(
        "sandbox: under the command guard, no sandbox (full-access)",
        "—",
        format!("{guarded:.2} ms"),
    );
    row(
        "sandbox: guard + sandbox with network (Landlock, seccomp, user + mount namespaces)",
        "—",
        format!(
            "{files_only:.2} ms (+{:.2} ms over the guard)",
            files_only - guarded
        ),
    );
    row(
        "sandbox: guard + sandbox + network namespace (ask mode's default)",
        "—",
        format!(
            "{sandboxed:.2} ms (+{:.2} ms over the guard); kernel support: {}",
            sandboxed - guarded,
            support.describe()
        ),
    );
}
