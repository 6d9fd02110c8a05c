//! `dsh sessions search` (issue 42, "For people too"): sessions `dsh run`
//! made with the scripted model, found by a word only one of them holds;
//! the current directory's workspace unless `--all`; `--json`; escape
//! sequences from a log escaped on a terminal, raw in a pipe.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

/// Runs `dsh ARGS` in `dir` (None: the test's workspace) to its end.
async fn dsh_in(env: &TestEnv, dir: Option<&std::path::Path>, args: &[&str]) -> (i32, String) {
    let mut command = env.dsh(args);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("dsh ends")
        .unwrap();
    let out = text(&output.stdout);
    assert!(
        output.stderr.is_empty() || args[0] == "run",
        "{args:?}: {}",
        text(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), out)
}

/// `dsh run TASK` in `dir` with a one-reply model; the session's id.
async fn run(env: &TestEnv, dir: Option<&std::path::Path>, task: &str, answer: &str) -> String {
    env.mock.push_json(reply(answer));
    let mut command = env.dsh(&["run", task]);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("dsh run ends")
        .unwrap();
    let err = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{err}");
    err.lines()
        .find_map(|line| line.strip_prefix("session: "))
        .unwrap_or_else(|| panic!("no session line in {err}"))
        .to_owned()
}

#[tokio::test]
async fn sessions_search_finds_the_session_with_the_word_in_this_workspace_unless_all() {
    let env = TestEnv::new().await;
    let (code, out) = dsh_in(&env, None, &["sessions", "search", "zebrafish"]).await;
    assert_eq!((code, out.as_str()), (0, "no matching sessions\n"));

    let first = run(
        &env,
        None,
        "Why does the zebrafish parser test flake?",
        "The zebrafish fixture races the clock.",
    )
    .await;
    let second = run(&env, None, "Rename the quokka module", "Renamed.").await;
    let other_dir = tempfile::tempdir().unwrap();
    let elsewhere = run(
        &env,
        Some(other_dir.path()),
        "Count the zebrafish here",
        "Three.",
    )
    .await;

    // This workspace: the first session alone, with its title and a line
    // holding the word.
    let (code, out) = dsh_in(&env, None, &["sessions", "search", "zebrafish"]).await;
    assert_eq!(code, 0, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "one block of two lines: {out}");
    assert!(lines[0].starts_with(&format!("{first}  ")), "{out}");
    assert!(
        lines[0].ends_with("  Why does the zebrafish parser test flake?"),
        "{out}"
    );
    // The time, as `sessions list` prints it: `YYYY-MM-DD HH:MM:SS`.
    let time = &lines[0][first.len() + 2..first.len() + 21];
    assert!(
        time.len() == 19 && time.as_bytes()[10] == b' ' && time.as_bytes()[4] == b'-',
        "{out}"
    );
    assert!(
        lines[1].starts_with("    ") && lines[1].contains("zebrafish"),
        "{out}"
    );
    assert!(!out.contains(&second) && !out.contains(&elsewhere), "{out}");

    // Every word must occur.
    let (code, out) = dsh_in(&env, None, &["sessions", "search", "zebrafish", "quokka"]).await;
    assert_eq!((code, out.as_str()), (0, "no matching sessions\n"));

    // --json: one document; the other directory's session only with --all.
    let (code, out) = dsh_in(&env, None, &["sessions", "search", "--json", "zebrafish"]).await;
    assert_eq!(code, 0, "{out}");
    let hits: Vec<Value> = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(hits.len(), 1, "{out}");
    let hit = &hits[0];
    assert_eq!(hit["id"], first.as_str());
    assert_eq!(hit["title"], "Why does the zebrafish parser test flake?");
    assert_eq!(
        hit["cwd"],
        env.cwd().canonicalize().unwrap().to_string_lossy().as_ref()
    );
    assert!(
        hit["snippet"].as_str().unwrap().contains("zebrafish"),
        "{hit}"
    );
    for field in ["created_at", "seq", "time"] {
        assert!(hit[field].is_u64(), "{field}: {hit}");
    }
    for field in ["event_type", "surface"] {
        assert!(hit[field].is_string(), "{field}: {hit}");
    }

    let (code, out) = dsh_in(
        &env,
        None,
        &["sessions", "search", "--json", "--all", "zebrafish"],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    let hits: Vec<Value> = serde_json::from_str(&out).unwrap();
    let mut ids: Vec<&str> = hits.iter().map(|h| h["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    let mut expected = vec![first.as_str(), elsewhere.as_str()];
    expected.sort_unstable();
    assert_eq!(ids, expected, "{out}");

    // From the other directory, its own session.
    let (code, out) = dsh_in(
        &env,
        Some(other_dir.path()),
        &["sessions", "search", "zebrafish"],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with(&elsewhere) && !out.contains(&first),
        "{out}"
    );

    // --limit.
    let (_, out) = dsh_in(
        &env,
        None,
        &[
            "sessions",
            "search",
            "--json",
            "--all",
            "--limit",
            "1",
            "zebrafish",
        ],
    )
    .await;
    assert_eq!(serde_json::from_str::<Vec<Value>>(&out).unwrap().len(), 1);
    let output = env
        .dsh(&["sessions", "search", "--limit", "0", "zebrafish"])
        .output()
        .await
        .unwrap();
    assert_exit(&output, 2, "--limit 0 is a usage error");
}

/// What the log holds is shown as it is in a pipe, and escaped on a
/// terminal: a title or a reply cannot drive the user's terminal.
#[tokio::test]
async fn sessions_search_escapes_a_logs_escape_sequences_on_a_terminal() {
    let env = TestEnv::new().await;
    let id = run(
        &env,
        None,
        "\x1b]0;pwned\x07 the narwhal task",
        "narwhal \x1b[2J cleared",
    )
    .await;

    let (code, out) = dsh_in(&env, None, &["sessions", "search", "narwhal"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with(&id), "{out}");
    assert!(out.contains('\x1b'), "raw in a pipe: {out:?}");

    let pty = nix::pty::openpty(None, None).expect("openpty");
    let mut command = env.dsh(&["sessions", "search", "narwhal"]);
    command.stdout(Stdio::from(std::fs::File::from(pty.slave)));
    let child = command.spawn().expect("spawn dsh");
    drop(command);
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("dsh ends")
        .unwrap();
    assert!(status.status.success(), "{}", text(&status.stderr));
    let master = std::fs::File::from(pty.master);
    let shown = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut master = master;
        let mut shown = Vec::new();
        let mut buf = [0u8; 4096];
        // The child is gone: reading stops at the end of what it wrote
        // (EIO once the slave has no holder).
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            shown.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&shown).into_owned()
    })
    .await
    .unwrap();
    assert!(shown.contains(&id), "{shown:?}");
    assert!(
        !shown.contains('\x1b') && !shown.contains('\x07'),
        "escaped on a terminal: {shown:?}"
    );
    assert!(
        shown.contains("\\u{1b}") && shown.contains("narwhal"),
        "{shown:?}"
    );
}
