//! Hooks under attack (issue 37): a one-time consent to a project's hooks
//! file is bound to the content it was given for and to its turn — a file
//! the model rewrites during the turn runs nothing in a subagent, in the
//! foreground or the background, until a new question — and a hook that
//! kills its guard leaves nothing running.

use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{PermissionOptionKind, SessionId};
use serde_json::{json, Value};

use crate::support::*;

/// The hooks file a repository starts with (v1: a `PostToolUse` hook) and
/// the one the model writes during the turn (v2: `PreToolUse` and
/// `PostToolUse` hooks). Each hook appends its version to the returned
/// file, outside the workspace. v1 is planted.
fn plant_v1(env: &TestEnv) -> (std::path::PathBuf, String) {
    let ran = env.home.path().join("ran");
    let hook = |version: &str| json!({"type": "command", "command": format!("echo {version} >> '{}'", ran.display())});
    let v1 = json!({"hooks": {"PostToolUse": [{"hooks": [hook("v1")]}]}});
    let v2 = json!({"hooks": {
        "PreToolUse": [{"hooks": [hook("v2")]}],
        "PostToolUse": [{"hooks": [hook("v2")]}]
    }});
    std::fs::create_dir(env.cwd().join(".dsh")).unwrap();
    std::fs::write(env.cwd().join(".dsh/hooks.json"), v1.to_string()).unwrap();
    (ran, v2.to_string())
}

/// What ran, one version a line.
fn ran_lines(ran: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(ran)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The titles of every "Run this project's hooks?" question so far.
fn hook_questions(sim: &ClientSim) -> Vec<String> {
    sim.permission_requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.tool_call.fields.title.clone().unwrap_or_default())
        .filter(|title| title.contains("Run this project's hooks?"))
        .collect()
}

/// The short hash a question names (`sha256 <12 hex>`).
fn short_hash(title: &str) -> String {
    let at = title.find("sha256 ").expect("a hash in the title") + "sha256 ".len();
    title[at..at + 12].to_owned()
}

/// The model's first three steps: read (v1's `PostToolUse` asks, "Run
/// them this time"), rewrite the hooks file to v2, then `subagent`.
fn push_rewrite_then_delegate(env: &TestEnv, v2: &str, background: bool) {
    env.mock
        .push_json(call("r1", "read", json!({"file_path": "hello.txt"})));
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path": ".dsh/hooks.json", "content": v2}),
    ));
    env.mock.push_json(call(
        "d1",
        "subagent",
        json!({"description": "Read hello", "prompt": "hello.txt", "run_in_background": background}),
    ));
}

/// Item 1: "Run them this time" given for v1, the model rewrites the file
/// to v2 in the same turn and starts a foreground subagent: the child
/// runs v1 (this turn's read, this turn's answer) and never v2; the next
/// turn asks about v2 before anything of it runs.
#[tokio::test]
async fn issue37_item1_a_foreground_subagent_never_runs_a_hooks_file_rewritten_after_a_one_time_consent(
) {
    let env = TestEnv::new().await;
    let (ran, v2) = plant_v1(&env);
    push_rewrite_then_delegate(&env, &v2, false);
    // The child: one read, then its answer; then the parent ends.
    env.mock
        .push_json(call("r2", "read", json!({"file_path": "hello.txt"})));
    env.mock.push_json(reply("It says hello."));
    env.mock.push_json(reply("Done."));
    // The next turn.
    env.mock
        .push_json(call("r3", "read", json!({"file_path": "hello.txt"})));
    env.mock.push_json(reply("Read again."));
    let sim = ClientSim::new(false, false);
    // The hooks, v1: run them this time. Anything after: refused (the
    // scripted editor's default).
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    // No prompt for the write: only the hooks are asked about.
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "read, rewrite the hooks, delegate")
        .await
        .unwrap();
    assert!(
        std::fs::read_to_string(env.cwd().join(".dsh/hooks.json"))
            .unwrap()
            .contains("PreToolUse"),
        "the model rewrote the file"
    );
    assert!(tool_result(&env, "d1").contains("It says hello."));
    let lines = ran_lines(&ran);
    assert!(!lines.iter().any(|line| line == "v2"), "v2 ran: {lines:?}");
    // v1 after r1, w1, the child's r2 and d1.
    assert_eq!(lines, ["v1"; 4], "{lines:?}");
    let asked = hook_questions(&sim);
    assert_eq!(asked.len(), 1, "{asked:?}");
    // The next turn reads v2 and asks about it (refused: nothing runs).
    conn.prompt(&session, "read it again").await.unwrap();
    let asked = hook_questions(&sim);
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_ne!(short_hash(&asked[0]), short_hash(&asked[1]), "{asked:?}");
    let lines = ran_lines(&ran);
    assert!(!lines.iter().any(|line| line == "v2"), "v2 ran: {lines:?}");
    conn.finish().await;
}

/// How many hooks ran in `session` (its `hook/result` events).
fn hook_results(env: &TestEnv, session: &SessionId) -> usize {
    env.log_events(session)
        .iter()
        .filter(|e| e["type"] == "hook/result")
        .count()
}

/// The subagent sessions in the store.
fn child_sessions(env: &TestEnv) -> Vec<SessionId> {
    env.subagent_logs()
        .into_iter()
        .map(|(id, _)| SessionId::new(id))
        .collect()
}

/// Waits for the parent's `job/end`.
async fn job_end(env: &TestEnv, session: &SessionId) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(end) = env
            .log_events(session)
            .into_iter()
            .find(|e| e["type"] == "job/end")
        {
            return end;
        }
        assert!(Instant::now() < deadline, "no job/end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Item 1, in the background: the child outlives the turn, so the turn's
/// one-time answer is not its: it uses the turn's read (v1, never the
/// rewritten v2) and asks again.
#[tokio::test]
async fn issue37_item1_a_background_subagent_never_runs_a_hooks_file_rewritten_after_a_one_time_consent(
) {
    let env = TestEnv::new().await;
    let (ran, v2) = plant_v1(&env);
    push_rewrite_then_delegate(&env, &v2, true);
    // The parent's next step and the child's race: each is answered by
    // its own conversation (a read of the file its task names, then an
    // echo), whichever comes first. A child that ends first is told to the
    // parent as a message after the results, which reads it as a task too:
    // one more step.
    for _ in 0..4 {
        env.mock
            .push_json(json!({"echo_read": true, "echo_chunks": 1, "finish": "stop"}));
    }
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(
        &session,
        "read, rewrite the hooks, delegate in the background",
    )
    .await
    .unwrap();
    let end = job_end(&env, &session).await;
    assert_eq!(end["data"]["status"], "done", "{end}");
    let lines = ran_lines(&ran);
    assert!(!lines.iter().any(|line| line == "v2"), "v2 ran: {lines:?}");
    // The child asked about the hooks the turn read (v1), and was refused.
    let asked = hook_questions(&sim);
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[1].starts_with("Subagent: "), "{asked:?}");
    assert_eq!(short_hash(&asked[0]), short_hash(&asked[1]), "{asked:?}");
    // v1 ran in the parent alone (after r1, w1, d1, and its extra read if
    // the child ended first); none in the child.
    assert_eq!(lines.len(), hook_results(&env, &session), "{lines:?}");
    let children = child_sessions(&env);
    assert_eq!(children.len(), 1, "{children:?}");
    assert_eq!(hook_results(&env, &children[0]), 0, "{lines:?}");
    conn.finish().await;
}

/// Item 3: a hook that starts `setsid sleep` in the background and then
/// kills its guard (`kill -9 $PPID`) cannot: the guard sweeps the sleep
/// when the hook ends.
#[tokio::test]
async fn issue37_item3_a_hook_that_kills_its_guard_leaves_nothing_running() {
    let env = TestEnv::with_config("[hooks]\nconfig = \"hooks.json\"").await;
    let home = env.home.path().display().to_string();
    // A sleep no other process holds: its duration is the marker.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let marker = format!("999.{}{nanos:09}", std::process::id());
    let hook = format!("setsid sleep {marker} & kill -9 $PPID; echo kill=$? > '{home}/killed'");
    std::fs::write(
        env.home.path().join("hooks.json"),
        json!({"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": hook}]}]}})
            .to_string(),
    )
    .unwrap();
    env.mock.push_json(reply("Hello."));
    let conn = env.connect_with(ClientSim::new(false, false)).await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "hello").await.unwrap();
    let runs: Vec<Value> = env
        .log_events(&session)
        .into_iter()
        .filter(|e| e["type"] == "hook/result")
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    // The hook has ended: within a bounded wait, its sleep is gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = procs::holding(&marker);
        if left.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            for pid in &left {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            panic!("the hook's sleep outlived it: {left:?}; {runs:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The guard was out of the hook's reach.
    let killed = std::fs::read_to_string(env.home.path().join("killed")).unwrap_or_default();
    assert_eq!(killed.trim(), "kill=1", "{runs:?}");
    conn.finish().await;
}
