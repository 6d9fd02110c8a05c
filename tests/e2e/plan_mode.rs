//! Plan mode (`exit_plan_mode`, `/plan`) and the setting commands
//! (`/mode`, `/model`, `/help`), over ACP with the scripted model.

use agent_client_protocol::v1::schema::{PermissionOptionKind, SessionUpdate};
use serde_json::json;

use crate::support::*;

const PLAN: &str = "# Greet the world\n\n1. Change hello.txt to say goodbye.\n2. Check it.";

fn mode_updates(conn: &Conn) -> Vec<String> {
    conn.updates()
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::CurrentModeUpdate(update) => Some(update.current_mode_id.0.to_string()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn plan_mode_refuses_changes_until_the_plan_is_approved_then_runs_it() {
    let env = TestEnv::new().await;
    env.mock.push_json(calls(&[
        (
            "e1",
            "edit",
            json!({"file_path": "hello.txt", "old_string": "hello", "new_string": "goodbye"}),
        ),
        (
            "b1",
            "bash",
            json!({"command": "touch x", "description": "x"}),
        ),
    ]));
    env.mock
        .push_json(call("p1", "exit_plan_mode", json!({"plan": PLAN})));
    env.mock.push_json(call(
        "e2",
        "edit",
        json!({"file_path": "hello.txt", "old_string": "hello", "new_string": "goodbye"}),
    ));
    env.mock.push_json(reply("Done."));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    sim.answer(Answer::Select(PermissionOptionKind::AllowAlways));
    let conn = env.connect_with(sim.clone()).await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "plan").await;
    let stop = conn.prompt(&session, "make it say goodbye").await.unwrap();
    assert_eq!(
        stop.stop_reason,
        agent_client_protocol::v1::schema::StopReason::EndTurn
    );
    // In plan mode the model was told, and changes were refused unasked.
    let first = &env.mock.requests()[0];
    assert!(first["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("Plan mode is on"));
    assert!(first["tools"].to_string().contains("exit_plan_mode"));
    assert!(
        tool_result(&env, "e1").contains("not allowed in plan mode"),
        "{}",
        tool_result(&env, "e1")
    );
    // The command was asked about and ran in the kernel's read-only
    // sandbox: it could not create its file.
    assert!(
        tool_result(&env, "b1").contains("[sandbox: file access denied under plan mode]"),
        "{}",
        tool_result(&env, "b1")
    );
    assert!(!env.cwd().join("x").exists());
    // Two asks: the command, and the plan with its three answers.
    assert_eq!(sim.asked(), ["b1", "p1"]);
    assert!(tool_result(&env, "p1").contains("accept-edits"));
    // Approved into accept-edits: the edit ran without asking.
    assert_eq!(
        std::fs::read_to_string(env.cwd().join("hello.txt")).unwrap(),
        "goodbye\n"
    );
    assert!(!env.cwd().join("x").exists());
    assert_eq!(mode_updates(&conn), ["plan", "accept-edits"]);
    // The mode change is logged after the decision, before the next step.
    let events = env.log_events(&session);
    let types: Vec<String> = events
        .iter()
        .map(|e| {
            let kind = e["type"].as_str().unwrap().to_owned();
            match kind.as_str() {
                "session/config" => format!("{kind}:{}", e["data"]["value"].as_str().unwrap()),
                _ => kind,
            }
        })
        .collect();
    // (The last decision: the plan's; the first was the command's.)
    let decision = types
        .iter()
        .rposition(|t| t == "permission/decision")
        .unwrap();
    assert_eq!(types[decision + 1], "session/config:accept-edits");
    // Later requests no longer carry the plan-mode section.
    let last = env.mock.requests().pop().unwrap();
    assert!(!last["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("Plan mode is on"));
    let frames = conn.finish().await;
    validate_frames(&frames);
}

#[tokio::test]
async fn keep_planning_keeps_plan_mode_and_exit_plan_mode_is_refused_outside_it() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("p1", "exit_plan_mode", json!({"plan": PLAN})));
    env.mock.push_json(reply("I will revise it."));
    env.mock
        .push_json(call("p2", "exit_plan_mode", json!({"plan": PLAN})));
    env.mock.push_json(reply("Carrying on."));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::RejectOnce));
    let conn = env.connect_with(sim.clone()).await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "/plan make it say goodbye")
        .await
        .unwrap();
    assert!(tool_result(&env, "p1").contains("keep planning"));
    assert_eq!(mode_updates(&conn), ["plan"]);
    // Still in plan mode: the next request says so.
    conn.set_mode(&session, "ask").await;
    conn.prompt(&session, "go on").await.unwrap();
    assert!(
        tool_result(&env, "p2").contains("only for plan mode"),
        "{}",
        tool_result(&env, "p2")
    );
    assert_eq!(sim.asked().len(), 1, "no ask outside plan mode");
    conn.finish().await;
}

#[tokio::test]
async fn setting_commands_answer_in_the_chat_and_help_lists_every_command() {
    let env = TestEnv::new().await;
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    let said = |conn: &Conn| chunk_text(&conn.updates(), false);
    conn.prompt(&session, "/help").await.unwrap();
    let help = said(&conn);
    for command in ["/compact", "/init", "/plan", "/mode", "/model", "/help"] {
        assert!(help.contains(command), "{command} in {help}");
    }
    conn.clear_updates();
    conn.prompt(&session, "/mode sideways").await.unwrap();
    assert!(said(&conn).contains("accept-edits"), "{}", said(&conn));
    conn.clear_updates();
    conn.prompt(&session, "/mode accept-edits").await.unwrap();
    assert!(said(&conn).contains("The mode is now `accept-edits`"));
    assert_eq!(mode_updates(&conn), ["accept-edits"]);
    conn.clear_updates();
    conn.prompt(&session, "/model deepseek-v4-pro")
        .await
        .unwrap();
    assert!(said(&conn).contains("deepseek-v4-pro"));
    // None of it reached the model, and a reload shows it again.
    assert!(env.mock.requests().is_empty());
    let frames = conn.finish().await;
    validate_frames(&frames);
    let reloaded = env.connect().await;
    reloaded.initialize().await;
    reloaded.load(&session, &env.cwd()).await;
    assert!(chunk_text(&reloaded.updates(), false).contains("The mode is now `accept-edits`"));
    reloaded.finish().await;
}
