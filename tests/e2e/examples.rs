//! The SDK examples (examples/sdk/), run as a user would run them: each
//! starts the built `dsh sdk` itself, against the scripted model, answers a
//! permission ask and interrupts a slow turn.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::DSH;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/sdk")
}

async fn run_example(program: &str, args: &[PathBuf]) -> String {
    let home = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(program)
        .args(args)
        .arg("--dsh")
        .arg(DSH)
        .env_remove("DEEPSEEK_API_KEY")
        .env("DSH_HOME", home.path())
        .env("DSH_LOG", "warn")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), output)
        .await
        .expect("the example finishes")
        .expect("the example starts");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{program} {args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for expected in [
        "[permission] Write notes.txt -> allow_once",
        "I wrote `notes.txt` with one line.",
        "notes.txt: dsh was here",
        "[done] cancelled",
        "dsh sdk exited with 0",
    ] {
        assert!(stdout.contains(expected), "no {expected:?} in:\n{stdout}");
    }
    stdout
}

#[tokio::test]
async fn the_python_example_runs_over_stdio() {
    run_example("python3", &[examples().join("python/dsh_sdk_example.py")]).await;
}

#[tokio::test]
async fn the_typescript_example_runs_over_websocket() {
    let built = examples().join("typescript/dist/example.js");
    if !built.exists() {
        // CI builds it (.ci/run sets DSH_EXAMPLES=1); elsewhere it needs
        // `npm ci && npm run build` in examples/sdk/typescript.
        assert!(
            std::env::var_os("DSH_EXAMPLES").is_none(),
            "{} is not built",
            built.display()
        );
        eprintln!("skipped: build examples/sdk/typescript first (npm ci && npm run build)");
        return;
    }
    run_example("node", &[built]).await;
}
