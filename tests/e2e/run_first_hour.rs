//! `dsh run` as a new user first meets it (issue 38, items 7 and 9): a
//! slash command's answer is the run's text on stdout, a bad `/mode` is a
//! usage error naming the choices, and a run that fails before its turn
//! leaves no session behind.

use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

/// `dsh run ARGS` (the task among them; stdin closed).
async fn dsh_run(env: &TestEnv, args: &[&str]) -> Output {
    let mut full = vec!["run"];
    full.extend_from_slice(args);
    let child = env.dsh(&full).spawn().expect("spawn dsh run");
    tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("dsh run ends")
        .unwrap()
}

/// The session logs in the sessions directory.
fn stored_logs(env: &TestEnv) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(env.sessions_dir()) else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".jsonl"))
        .collect()
}

/// `dsh sessions list`'s stdout.
async fn sessions_list(env: &TestEnv) -> String {
    let output = env
        .dsh(&["sessions", "list"])
        .output()
        .await
        .expect("dsh sessions list");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    text(&output.stdout)
}

/// Issue 38, item 7: `/help`, `/skills` and a setting changed answer on
/// stdout (the notice is the run's text, in `--json`'s result too), with
/// no model call.
#[tokio::test]
async fn a_slash_commands_answer_is_the_runs_text() {
    let env = TestEnv::new().await;
    let help = dsh_run(&env, &["/help"]).await;
    assert_eq!(help.status.code(), Some(0), "{}", text(&help.stderr));
    let stdout = text(&help.stdout);
    assert!(stdout.starts_with("Commands:\n"), "{stdout}");
    for command in ["`/compact", "`/mode <mode>`", "`/skills`", "`/help`"] {
        assert!(stdout.contains(command), "{command} in {stdout}");
    }

    let skills = dsh_run(&env, &["/skills"]).await;
    assert_eq!(skills.status.code(), Some(0), "{}", text(&skills.stderr));
    assert!(
        text(&skills.stdout).starts_with("No skills found."),
        "{}",
        text(&skills.stdout)
    );

    let mode = dsh_run(&env, &["/mode plan"]).await;
    assert_eq!(mode.status.code(), Some(0), "{}", text(&mode.stderr));
    assert_eq!(text(&mode.stdout), "The mode is now `plan`.\n");

    let json = dsh_run(&env, &["--json", "/help"]).await;
    assert_eq!(json.status.code(), Some(0), "{}", text(&json.stderr));
    let result = last_json(&json);
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    assert_eq!(
        result["text"].as_str().unwrap().trim_end(),
        stdout.trim_end()
    );
    assert!(env.mock.requests().is_empty(), "no model call");
}

/// Issue 38, item 7: unattended, a bad `/mode` (or `/model`) value is a
/// usage error (exit 2) that names the choices, before any session opens.
#[tokio::test]
async fn a_bad_mode_is_a_usage_error_naming_the_choices() {
    let env = TestEnv::new().await;
    let output = dsh_run(&env, &["/mode bogus"]).await;
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("\"bogus\""), "{stderr}");
    for mode in ["read-only", "plan", "ask", "accept-edits", "full-access"] {
        assert!(stderr.contains(mode), "{mode} in {stderr}");
    }
    assert_eq!(text(&output.stdout), "");

    let output = dsh_run(&env, &["/model nope"]).await;
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("\"nope\"") && stderr.contains("deepseek-v4-flash"),
        "{stderr}"
    );
    assert_eq!(stored_logs(&env), Vec::<String>::new());
    assert!(env.mock.requests().is_empty(), "no model call");
}

/// Issue 38, item 9: a run that fails before its turn (a bad `--model`
/// or `--thought-level`) leaves no "(untitled)" session — neither in the
/// sessions directory nor in `dsh sessions list` — and names none.
#[tokio::test]
async fn a_run_that_fails_before_its_turn_leaves_no_session() {
    let env = TestEnv::new().await;
    for args in [
        &["--model", "nope", "x"][..],
        &["--thought-level", "sideways", "x"][..],
    ] {
        let output = dsh_run(&env, args).await;
        assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
        let stderr = text(&output.stderr);
        assert!(!stderr.contains("session:"), "{stderr}");
    }
    let json = dsh_run(&env, &["--json", "--model", "nope", "x"]).await;
    assert_eq!(json.status.code(), Some(2), "{}", text(&json.stderr));
    assert_eq!(last_json(&json)["sessionId"], Value::Null);
    assert_eq!(stored_logs(&env), Vec::<String>::new());
    let listed = sessions_list(&env).await;
    assert!(!listed.contains("(untitled)"), "{listed}");
    assert!(env.mock.requests().is_empty(), "no model call");

    // A run that gets to its turn keeps its session.
    env.mock.push_json(reply("Done."));
    let output = dsh_run(&env, &["do it"]).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(stored_logs(&env).len(), 1);
    assert!(sessions_list(&env).await.contains("do it"));
}
