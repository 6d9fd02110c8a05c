//! `dsh run --answers @FILE`: the file is read as a workspace file (no
//! link out of the workspace, a regular file, at most 1 MiB), and what it
//! holds for questions the model did not ask is never shown.

use std::process::Output;
use std::time::Duration;

use serde_json::json;

use crate::support::*;

const SECRET: &str = "-----BEGIN PRIVATE KEY----- d5h-secret";

/// Runs `dsh run ARGS` in the workspace (stdin closed); `None` when it has
/// not ended within `limit`.
async fn dsh_run(env: &TestEnv, args: &[&str], limit: Duration) -> Option<Output> {
    let mut full = vec!["run"];
    full.extend_from_slice(args);
    let mut command = env.dsh(&full);
    command.stdin(std::process::Stdio::null());
    tokio::time::timeout(limit, command.output())
        .await
        .ok()
        .map(Result::unwrap)
}

/// A model that asks one question, `id`, then ends.
fn asks(env: &TestEnv, id: &str) {
    env.mock.push_json(call(
        "q1",
        "ask_user_question",
        json!({"questions": [{"id": id, "question": "Which one?"}]}),
    ));
    env.mock.push_json(reply("Done."));
}

/// A key file outside the workspace, shaped like answers (a service
/// account's JSON is all strings).
fn key_file(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("service-account.json");
    std::fs::write(
        &path,
        json!({"type": "service_account", "private_key": SECRET}).to_string(),
    )
    .unwrap();
    path
}

/// Stops the test when dsh ran or leaked the key: a usage error (2), the
/// message `expected` on stderr, the file's text nowhere, no model call.
fn assert_refused(env: &TestEnv, output: &Output, expected: &str) {
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(expected), "{stderr}");
    assert!(!stderr.contains("d5h-secret"), "{stderr}");
    assert!(output.stdout.is_empty());
    assert!(env.mock.requests().is_empty());
}

#[tokio::test]
async fn an_answers_file_linked_out_of_the_workspace_is_refused() {
    let env = TestEnv::new().await;
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(key_file(outside.path()), env.cwd().join("answers.json")).unwrap();
    asks(&env, "private_key");
    let limit = Duration::from_secs(30);
    let output = dsh_run(&env, &["--answers", "@answers.json", "go"], limit)
        .await
        .expect("dsh run ends");
    assert_refused(
        &env,
        &output,
        "--answers @answers.json: a symbolic link leads it out of the workspace",
    );
    // A directory linked out of the workspace, too.
    std::os::unix::fs::symlink(outside.path(), env.cwd().join("ci")).unwrap();
    let output = dsh_run(
        &env,
        &["--answers", "@ci/service-account.json", "go"],
        limit,
    )
    .await
    .expect("dsh run ends");
    assert_refused(
        &env,
        &output,
        "a symbolic link leads it out of the workspace",
    );

    // The user's own path outside the workspace is theirs to name; a link
    // that stays inside the workspace is followed.
    std::fs::write(
        env.cwd().join("real.json"),
        r#"{"private_key": "from the workspace"}"#,
    )
    .unwrap();
    std::os::unix::fs::symlink("real.json", env.cwd().join("inside.json")).unwrap();
    let output = dsh_run(&env, &["--answers", "@inside.json", "go"], limit)
        .await
        .expect("dsh run ends");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(tool_result(&env, "q1").contains("from the workspace"));
}

#[tokio::test]
async fn an_answers_file_that_is_a_device_or_too_large_is_refused_at_once() {
    let env = TestEnv::new().await;
    asks(&env, "db");
    // /dev/zero never ends: refused before a byte is read.
    let output = dsh_run(
        &env,
        &["--answers", "@/dev/zero", "go"],
        Duration::from_secs(10),
    )
    .await
    .expect("dsh run refuses /dev/zero at once");
    assert_refused(
        &env,
        &output,
        "--answers @/dev/zero: a device; only a regular file can be read",
    );
    // A FIFO in the workspace is not waited on.
    nix_mkfifo(&env.cwd().join("answers.fifo"));
    let output = dsh_run(
        &env,
        &["--answers", "@answers.fifo", "go"],
        Duration::from_secs(10),
    )
    .await
    .expect("dsh run refuses a FIFO at once");
    assert_refused(&env, &output, "a named pipe (FIFO); only a regular file");
    // A regular file over 1 MiB.
    let big = format!("{{\"db\": \"{}\"}}", "x".repeat(1 << 20));
    std::fs::write(env.cwd().join("big.json"), big).unwrap();
    let output = dsh_run(
        &env,
        &["--answers", "@big.json", "go"],
        Duration::from_secs(30),
    )
    .await
    .expect("dsh run ends");
    assert_refused(&env, &output, "larger than 1 MiB, the most --answers reads");
}

fn nix_mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn answers_the_model_did_not_ask_for_are_never_shown() {
    let env = TestEnv::new().await;
    // The user names a file outside the workspace: read, but only the
    // asked id's answer goes anywhere.
    let key = key_file(env.home.path());
    let answers = std::fs::read_to_string(&key)
        .unwrap()
        .replace('{', "{\"db\": \"SQLite\", ");
    std::fs::write(&key, answers).unwrap();
    asks(&env, "db");
    let given = format!("@{}", key.display());
    let output = dsh_run(
        &env,
        &["--json", "--answers", &given, "go"],
        Duration::from_secs(30),
    )
    .await
    .expect("dsh run ends");
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("question db: Which one?\n  answer: SQLite\n"),
        "{stderr}"
    );
    for shown in [&stdout, &stderr] {
        assert!(
            !shown.contains("d5h-secret") && !shown.contains("private_key"),
            "{shown}"
        );
    }
    let requests = serde_json::to_string(&env.mock.requests()).unwrap();
    assert!(!requests.contains("d5h-secret"));

    // A file that is not answers: the error says where, never what.
    std::fs::write(&key, format!("\"{SECRET}\"")).unwrap();
    let output = dsh_run(&env, &["--answers", &given, "go"], Duration::from_secs(30))
        .await
        .expect("dsh run ends");
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("give an object of question ids") && stderr.contains("line 1, column"),
        "{stderr}"
    );
    assert!(!stderr.contains("d5h-secret"), "{stderr}");
}
