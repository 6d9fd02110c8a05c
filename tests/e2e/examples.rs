//! The SDK examples (examples/sdk/), run as a user would run them: each
//! starts the built `dsh sdk` itself, against the scripted model, answers a
//! permission ask and interrupts a slow turn.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::DSH;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .join("examples/sdk")
}

async fn run_example(program: &str, args: &[PathBuf]) -> String {
    use tokio::io::AsyncReadExt;
    let home = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .arg("--dsh")
        .arg(DSH)
        .env_remove("DEEPSEEK_API_KEY")
        .env("DSH_HOME", home.path())
        .env("DSH_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the example starts");
    let read = |mut pipe: Box<dyn tokio::io::AsyncRead + Unpin + Send>| {
        let text = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = text.clone();
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        (text, task)
    };
    let (out, out_task) = read(Box::new(child.stdout.take().unwrap()));
    let (err, err_task) = read(Box::new(child.stderr.take().unwrap()));
    let text = |buf: &std::sync::Arc<std::sync::Mutex<Vec<u8>>>| {
        String::from_utf8_lossy(&buf.lock().unwrap()).into_owned()
    };
    let Ok(status) = tokio::time::timeout(Duration::from_secs(90), child.wait()).await else {
        let _ = child.kill().await;
        panic!(
            "{program} {args:?} did not finish in 90 s\nstdout:\n{}\nstderr:\n{}",
            text(&out),
            text(&err)
        );
    };
    let status = status.unwrap();
    // The pipes end with the process (and the dsh it started).
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let _ = out_task.await;
        let _ = err_task.await;
    })
    .await;
    let output = std::process::Output {
        status,
        stdout: out.lock().unwrap().clone(),
        stderr: err.lock().unwrap().clone(),
    };
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
    let test = "examples::the_typescript_example_runs_over_websocket";
    let dir = examples().join("typescript");
    let built = dir.join("dist/example.js");
    if !built.exists() {
        // CI builds it (.ci/run sets DSH_EXAMPLES=1).
        dsh_test_support::skip::skip(
            test,
            &format!(
                "{} is not built; build it: (cd {} && npm ci && npm run build)",
                built.display(),
                dir.display()
            ),
            std::env::var_os("DSH_EXAMPLES").is_some(),
        );
        return;
    }
    dsh_test_support::skip::ran(test);
    run_example("node", &[built]).await;
}
