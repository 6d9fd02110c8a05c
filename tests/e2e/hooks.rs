//! Hooks (Claude Code's format) over ACP with the scripted model: a
//! `PreToolUse` hook that blocks `bash`, a `UserPromptSubmit` hook that
//! adds context or refuses the prompt, a project's hooks asked about once
//! per content, and a hook that runs out of time.

use agent_client_protocol::v1::schema::{PermissionOptionKind, SessionId};
use serde_json::json;

use crate::support::*;

/// An environment whose `[hooks] config` is `$DSH_HOME/hooks.json`, with
/// these hooks.
async fn with_hooks(hooks: serde_json::Value) -> TestEnv {
    let env = TestEnv::with_config("[hooks]\nconfig = \"hooks.json\"").await;
    std::fs::write(
        env.home.path().join("hooks.json"),
        json!({ "hooks": hooks }).to_string(),
    )
    .unwrap();
    env
}

fn command_hook(command: &str) -> serde_json::Value {
    json!({"type": "command", "command": command})
}

fn hook_results(env: &TestEnv, session: &SessionId) -> Vec<serde_json::Value> {
    env.log_events(session)
        .into_iter()
        .filter(|e| e["type"] == "hook/result")
        .map(|e| e["data"].clone())
        .collect()
}

#[tokio::test]
async fn a_pre_tool_use_hook_blocks_bash_and_its_stderr_is_the_result() {
    let env = TestEnv::with_config("[hooks]\nconfig = \"hooks.json\"").await;
    let home = env.home.path().display().to_string();
    let hook = format!(
        "cat > '{home}/input.json'; env > '{home}/env.txt'; echo 'No shell commands today.' >&2; exit 2"
    );
    std::fs::write(
        env.home.path().join("hooks.json"),
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [command_hook(&hook)]}]}})
            .to_string(),
    )
    .unwrap();
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": "touch created.txt", "description": "make a file"}),
    ));
    env.mock.push_json(reply("Understood."));
    let sim = ClientSim::new(false, false);
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "make a file").await.unwrap();
    // The command did not run, and nobody was asked about it.
    assert!(!env.cwd().join("created.txt").exists());
    assert!(sim.asked().is_empty(), "{:?}", sim.asked());
    let result = tool_result(&env, "b1");
    assert!(result.contains("No shell commands today."), "{result}");
    // The model's next request carries it.
    let requests = env.mock.requests();
    assert!(requests[1].to_string().contains("No shell commands today."));
    // The hook got the event on stdin, in the project root's terms.
    let input: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.home.path().join("input.json")).unwrap())
            .unwrap();
    assert_eq!(input["hook_event_name"], "PreToolUse");
    assert_eq!(input["tool_name"], "bash");
    assert_eq!(input["tool_input"]["command"], "touch created.txt");
    assert_eq!(input["session_id"], session.0.as_ref());
    // Its environment is scrubbed: no API key; the project dir is set.
    let hook_env = std::fs::read_to_string(env.home.path().join("env.txt")).unwrap();
    assert!(!hook_env.contains("test-key-d5h"));
    assert!(hook_env.contains("CLAUDE_PROJECT_DIR=") && hook_env.contains("DSH_PROJECT_DIR="));
    // Logged, and shown as a notice.
    let runs = hook_results(&env, &session);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["event"], "PreToolUse");
    assert_eq!(runs[0]["exit_code"], 2);
    assert_eq!(runs[0]["blocked"], true);
    assert_eq!(runs[0]["call_id"], "b1");
    assert!(runs[0]["stderr"]
        .as_str()
        .unwrap()
        .contains("No shell commands today."));
    let shown = chunk_text(&conn.updates(), false);
    assert!(shown.contains("PreToolUse hook"), "{shown}");
    let frames = conn.finish().await;
    validate_frames(&frames);
}

#[tokio::test]
async fn a_user_prompt_submit_hook_adds_context_or_refuses_the_prompt() {
    let hook = r#"input=$(cat); case "$input" in *forbidden*) echo 'That prompt is refused.' >&2; exit 2;; esac; printf '{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "The build is green today."}}'"#;
    let env = with_hooks(json!({"UserPromptSubmit": [{"hooks": [command_hook(hook)]}]})).await;
    env.mock.push_json(reply("Noted."));
    env.mock.push_json(reply("Again."));
    let conn = env.connect_with(ClientSim::new(false, false)).await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "how is the build?").await.unwrap();
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 1);
    let request = requests[0]["messages"].to_string();
    assert!(request.contains("The build is green today."), "{request}");
    assert!(request.contains("how is the build?"));
    // A quiet success is not shown.
    assert!(!chunk_text(&conn.updates(), false).contains("hook"));
    // Refused: no model call, the reason shown.
    conn.clear_updates();
    let stop = conn.prompt(&session, "something forbidden").await.unwrap();
    assert_eq!(
        stop.stop_reason,
        agent_client_protocol::v1::schema::StopReason::EndTurn
    );
    assert_eq!(env.mock.requests().len(), 1);
    let shown = chunk_text(&conn.updates(), false);
    assert!(shown.contains("That prompt is refused."), "{shown}");
    // The refused prompt is not in the conversation.
    conn.prompt(&session, "and now?").await.unwrap();
    let last = env.mock.requests().pop().unwrap()["messages"].to_string();
    assert!(!last.contains("something forbidden"), "{last}");
    let runs = hook_results(&env, &session);
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[1]["blocked"], true);
    let frames = conn.finish().await;
    validate_frames(&frames);
}

/// A repository's `.dsh/hooks.json` with one `event` hook that appends a
/// line to the returned file each time it runs.
fn plant_project_hook(env: &TestEnv, event: &str) -> std::path::PathBuf {
    let marker = env.home.path().join("project-ran");
    std::fs::create_dir(env.cwd().join(".dsh")).unwrap();
    std::fs::write(
        env.cwd().join(".dsh/hooks.json"),
        json!({"hooks": {event: [{"hooks": [command_hook(&format!(
            "echo ran >> '{}'",
            marker.display()
        ))]}]}})
        .to_string(),
    )
    .unwrap();
    marker
}

#[tokio::test]
async fn a_project_hook_runs_only_once_allowed_and_the_answer_survives_a_reload() {
    let env = TestEnv::new().await;
    let marker = plant_project_hook(&env, "UserPromptSubmit");
    let lines = || {
        std::fs::read_to_string(&marker)
            .map(|text| text.lines().count())
            .unwrap_or(0)
    };
    for text in ["one", "two", "three"] {
        env.mock.push_json(reply(text));
    }
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowAlways));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "first").await.unwrap();
    // Asked on first use, naming the file and its hash; then it ran.
    let asked = sim.permission_requests.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    let title = asked[0].tool_call.fields.title.clone().unwrap_or_default();
    assert!(title.contains("Run this project's hooks?"), "{title}");
    assert!(
        title.contains(".dsh/hooks.json") && title.contains("sha256"),
        "{title}"
    );
    assert_eq!(lines(), 1);
    conn.prompt(&session, "second").await.unwrap();
    assert_eq!(sim.asked().len(), 1, "not asked again");
    assert_eq!(lines(), 2);
    let consent: Vec<_> = env
        .log_events(&session)
        .into_iter()
        .filter(|e| e["type"] == "hook/consent")
        .collect();
    assert_eq!(consent.len(), 1);
    assert_eq!(consent[0]["data"]["allow"], true);
    assert_eq!(consent[0]["ignorable"], true);
    conn.finish().await;
    // Another process loads the session: the answer holds.
    let sim = ClientSim::new(false, false);
    let conn = env.connect_with(sim.clone()).await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    conn.prompt(&session, "third").await.unwrap();
    assert!(sim.asked().is_empty());
    assert_eq!(lines(), 3);
    conn.finish().await;
}

#[tokio::test]
async fn a_project_hook_the_user_refuses_does_not_run() {
    let env = TestEnv::new().await;
    let marker = plant_project_hook(&env, "PreToolUse");
    env.mock.push_json(calls(&[
        ("r1", "read", json!({"file_path": "hello.txt"})),
        ("r2", "read", json!({"file_path": "hello.txt"})),
    ]));
    env.mock.push_json(reply("Read it."));
    // The scripted editor rejects (once) what it has no answer for.
    let sim = ClientSim::new(false, false);
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "read it twice").await.unwrap();
    assert!(!marker.exists(), "refused hooks do not run");
    // Asked once for the turn; both reads ran.
    assert_eq!(sim.asked().len(), 1, "{:?}", sim.asked());
    assert!(tool_result(&env, "r2").contains("hello"));
    assert!(hook_results(&env, &session).is_empty());
    conn.finish().await;
}

#[tokio::test]
async fn a_hook_that_runs_out_of_time_is_stopped_reported_and_ignored() {
    let env = with_hooks(json!({"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": "sleep 30", "timeout": 1}
    ]}]}))
    .await;
    env.mock.push_json(reply("Still here."));
    let conn = env.connect_with(ClientSim::new(false, false)).await;
    let session = conn.start(&env.cwd()).await;
    let started = std::time::Instant::now();
    conn.prompt(&session, "hello").await.unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // The prompt went on to the model.
    assert_eq!(env.mock.requests().len(), 1);
    let runs = hook_results(&env, &session);
    assert_eq!(runs.len(), 1);
    assert!(runs[0]["exit_code"].is_null());
    assert!(
        runs[0]["failure"].as_str().unwrap().contains("timed out"),
        "{runs:?}"
    );
    let shown = chunk_text(&conn.updates(), false);
    assert!(shown.contains("timed out"), "{shown}");
    conn.finish().await;
}

#[tokio::test]
async fn session_start_post_tool_use_and_stop_hooks_reach_the_model() {
    let env = TestEnv::with_config("[hooks]\nconfig = \"hooks.json\"").await;
    let home = env.home.path().display().to_string();
    let stop = format!(
        "cat > '{home}/stop-input.json'; if [ ! -e '{home}/stopped' ]; then touch '{home}/stopped'; echo 'Also run the tests.' >&2; exit 2; fi"
    );
    std::fs::write(
        env.home.path().join("hooks.json"),
        json!({"hooks": {
            "SessionStart": [{"matcher": "startup", "hooks": [command_hook("echo 'Session context: monorepo.'")]}],
            "PostToolUse": [{"matcher": "Read", "hooks": [command_hook(
                r#"printf '{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "Checked by a hook."}}'"#
            )]}],
            "Stop": [{"hooks": [command_hook(&stop)]}]
        }})
        .to_string(),
    )
    .unwrap();
    env.mock
        .push_json(call("r1", "read", json!({"file_path": "hello.txt"})));
    env.mock.push_json(reply("Done."));
    env.mock.push_json(reply("Tests run."));
    let conn = env.connect_with(ClientSim::new(false, false)).await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "read hello").await.unwrap();
    let requests = env.mock.requests();
    assert!(requests[0]["messages"]
        .to_string()
        .contains("Session context: monorepo."));
    // The read's result carries the hook's context.
    let result = tool_result(&env, "r1");
    assert!(result.contains("Checked by a hook."), "{result}");
    // The Stop hook blocked once: the model was asked to go on, then it
    // let the turn end (and said so on stdin).
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(requests[2]["messages"]
        .to_string()
        .contains("Also run the tests."));
    let input: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.home.path().join("stop-input.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(input["hook_event_name"], "Stop");
    assert_eq!(input["stop_hook_active"], true);
    let events: Vec<String> = hook_results(&env, &session)
        .iter()
        .map(|run| run["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events, ["SessionStart", "PostToolUse", "Stop", "Stop"]);
    let frames = conn.finish().await;
    validate_frames(&frames);
}

/// A repository's hooks need a person: `dsh run --approve all` (answers
/// that stand for no one) never runs them, though it allows the tools.
#[tokio::test]
async fn dsh_run_never_runs_a_projects_hooks_unattended() {
    let env = TestEnv::new().await;
    let marker = plant_project_hook(&env, "PreToolUse");
    env.mock
        .push_json(call("r1", "read", json!({"file_path": "hello.txt"})));
    env.mock.push_json(reply("Read it."));
    let output = env
        .dsh(&["run", "--approve", "all", "read it"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_exit(&output, 0, "dsh run");
    assert!(!marker.exists(), "the project's hook did not run");
    assert!(tool_result(&env, "r1").contains("hello"), "the tool did");
}

#[tokio::test]
async fn a_once_allowed_project_hook_is_asked_again_when_the_turn_turns_read_only() {
    let env = TestEnv::new().await;
    let marker = plant_project_hook(&env, "PreToolUse");
    let lines = || {
        std::fs::read_to_string(&marker)
            .map(|text| text.lines().count())
            .unwrap_or(0)
    };
    env.mock
        .push_json(call("r1", "read", json!({"file_path": "hello.txt"})));
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": "true", "description": "Do nothing"}),
    ));
    env.mock
        .push_json(call("r2", "read", json!({"file_path": "hello.txt"})));
    env.mock.push_json(reply("Done."));
    let sim = ClientSim::new(false, false);
    // The hooks: run them this time (in ask mode).
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    // The command: the user switches the session to read-only and says no.
    sim.answer(Answer::SwitchModeThenSelect(
        "read-only".into(),
        PermissionOptionKind::RejectOnce,
    ));
    // Asked again about the hooks, now in read-only: rejected (the
    // scripted editor's default).
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "read, run, read").await.unwrap();
    let asked = sim.permission_requests.lock().unwrap().clone();
    let titles: Vec<String> = asked
        .iter()
        .map(|r| r.tool_call.fields.title.clone().unwrap_or_default())
        .collect();
    assert_eq!(titles.len(), 3, "{titles:?}");
    assert!(
        titles[2].contains("Run this project's hooks?"),
        "{titles:?}"
    );
    // Ran before r1 and b1, not before r2.
    assert_eq!(lines(), 2);
    conn.finish().await;
}
