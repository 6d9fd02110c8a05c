//! A local command's output, live on its call while it runs: in Zed's
//! terminal convention (`_meta.terminal_info`, `terminal_output` or
//! `terminal_output_delta`, `terminal_exit` with the final status) where
//! the client advertises it, else as a fenced block in the call's content.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{SessionNotification, SessionUpdate, StopReason};
use serde_json::{json, Value};

use crate::support::client_sim::ClientSim;
use crate::support::*;

const COMMAND: &str = "for i in 1 2 3; do echo line$i; sleep 0.3; done";

/// Runs the three-line command in a session of `sim`'s; the updates of its
/// call, as JSON (status, content, `_meta`), in order.
async fn run(sim: Arc<ClientSim>) -> Vec<Value> {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "c1",
        "bash",
        json!({"command": COMMAND, "description": "Print three lines slowly"}),
    ));
    env.mock.push_json(reply("done"));
    let conn = env.connect_with(sim).await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    let response = conn.prompt(&session, "print three lines").await.unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let updates: Vec<Value> = conn
        .updates()
        .iter()
        .filter_map(|n: &SessionNotification| match &n.update {
            SessionUpdate::ToolCallUpdate(update) if update.tool_call_id.0.as_ref() == "c1" => {
                Some(serde_json::to_value(update).unwrap())
            }
            _ => None,
        })
        .collect();
    let output = tool_result(&env, "c1");
    assert!(output.contains("line1\nline2\nline3"), "{output}");
    conn.finish().await;
    updates
}

/// The updates before the one that completes the call.
fn before_completion(updates: &[Value]) -> &[Value] {
    let end = updates
        .iter()
        .position(|u| u["status"] == "completed")
        .unwrap_or_else(|| panic!("no completion: {updates:#?}"));
    &updates[..end]
}

#[tokio::test]
async fn command_output_streams_as_a_terminal_where_the_client_takes_it() {
    let sim = ClientSim::with_terminal_output(false);
    let updates = run(sim).await;
    let running = before_completion(&updates);
    let info = running
        .iter()
        .find(|u| u["_meta"]["terminal_info"].is_object())
        .unwrap_or_else(|| panic!("terminal_info: {updates:#?}"));
    assert_eq!(info["_meta"]["terminal_info"]["terminal_id"], "c1");
    assert_eq!(info["content"][0]["type"], "terminal");
    assert_eq!(info["content"][0]["terminalId"], "c1");
    let outputs: Vec<&str> = running
        .iter()
        .filter_map(|u| u["_meta"]["terminal_output"]["data"].as_str())
        .collect();
    assert!(outputs.len() >= 2, "{updates:#?}");
    // The output so far, each time.
    assert!(outputs[0].starts_with("line1\n"), "{outputs:?}");
    assert!(
        outputs.last().unwrap().contains("line1\nline2\n"),
        "{outputs:?}"
    );
    let end = updates.iter().find(|u| u["status"] == "completed").unwrap();
    assert_eq!(end["_meta"]["terminal_exit"]["terminal_id"], "c1", "{end}");
    assert_eq!(end["_meta"]["terminal_exit"]["exit_code"], 0, "{end}");
    // The terminal stays in place of the text.
    assert!(end.get("content").is_none(), "{end}");
}

#[tokio::test]
async fn command_output_streams_as_deltas_where_the_client_asks_for_them() {
    let sim = ClientSim::with_terminal_output(true);
    let updates = run(sim).await;
    let running = before_completion(&updates);
    let deltas: Vec<&str> = running
        .iter()
        .filter_map(|u| u["_meta"]["terminal_output_delta"]["data"].as_str())
        .collect();
    assert!(deltas.len() >= 2, "{updates:#?}");
    assert!(
        running
            .iter()
            .all(|u| u["_meta"].get("terminal_output").is_none()),
        "{updates:#?}"
    );
    // Each delta is only the new bytes: together, the output once.
    assert_eq!(deltas.concat(), "line1\nline2\nline3\n", "{deltas:?}");
    let end = updates.iter().find(|u| u["status"] == "completed").unwrap();
    assert_eq!(end["_meta"]["terminal_exit"]["exit_code"], 0, "{end}");
}

#[tokio::test]
async fn command_output_streams_as_content_without_the_convention() {
    let updates = run(ClientSim::new(false, false)).await;
    let running = before_completion(&updates);
    let shown: Vec<String> = running
        .iter()
        .filter_map(|u| {
            u["content"][0]["content"]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .filter(|text| text.starts_with("```console\n"))
        .collect();
    assert!(shown.len() >= 2, "{updates:#?}");
    assert!(shown[0].contains("line1"), "{shown:?}");
    assert!(
        running.iter().all(|u| u.get("_meta").is_none()),
        "no _meta without the capability: {updates:#?}"
    );
}

#[tokio::test]
async fn a_background_jobs_output_streams_on_its_call_until_it_ends() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "c1",
        "bash",
        json!({"command": COMMAND, "description": "Print three lines slowly", "run_in_background": true}),
    ));
    env.mock.push_json(reply("started"));
    env.mock.push_json(reply("Still running."));
    let conn = env
        .connect_with(ClientSim::with_terminal_output(true))
        .await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "print three lines in the background")
        .await
        .unwrap();
    // Another prompt while it runs: its end comes through that prompt's
    // front end, and still carries the terminal's exit.
    conn.prompt(&session, "how is it going?").await.unwrap();
    conn.wait_for("the job's end", |updates| {
        updates.iter().any(|n| {
            matches!(&n.update, SessionUpdate::ToolCallUpdate(update)
                if update.tool_call_id.0.as_ref() == "c1"
                    && update.fields.status == Some(agent_client_protocol::v1::schema::ToolCallStatus::Completed))
        })
    })
    .await;
    let updates: Vec<Value> = conn
        .updates()
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(update) if update.tool_call_id.0.as_ref() == "c1" => {
                Some(serde_json::to_value(update).unwrap())
            }
            _ => None,
        })
        .collect();
    let running = before_completion(&updates);
    let deltas: Vec<&str> = running
        .iter()
        .filter_map(|u| u["_meta"]["terminal_output_delta"]["data"].as_str())
        .collect();
    assert!(deltas.len() >= 2, "{updates:#?}");
    assert_eq!(deltas.concat(), "line1\nline2\nline3\n", "{deltas:?}");
    // The call's "running in the background" update keeps the terminal.
    assert!(
        running
            .iter()
            .filter(|u| u["_meta"].get("terminal_info").is_none())
            .all(|u| u.get("content").is_none()),
        "{updates:#?}"
    );
    let end = updates.iter().find(|u| u["status"] == "completed").unwrap();
    assert_eq!(end["_meta"]["terminal_exit"]["exit_code"], 0, "{end}");
    conn.finish().await;
}
