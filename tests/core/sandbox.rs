//! Where the kernel cannot sandbox commands (here: no command guard to
//! apply it), the user is told once per session and the prompt is the only
//! guard — or, with `[sandbox] required = true`, commands are refused
//! below full-access; read-only keeps refusing them.

use dsh_acp_server::update::AgentUpdate;
use dsh_protocol::log::PermissionOutcome;
use dsh_protocol::tool::ToolContent;
use serde_json::json;

use crate::{Recorder, World};

fn bash(id: &str, command: &str) -> serde_json::Value {
    json!({"chunks":[{"tool_call":{"index":0,"id":id,"name":"bash","arguments":
        json!({"command": command, "description": "run"}).to_string()}}],"finish":"tool_calls"})
}

fn reply(text: &str) -> serde_json::Value {
    json!({"chunks":[{"text":text}],"finish":"stop"})
}

/// The messages shown, and each finished tool call's text.
fn shown(recorder: &Recorder) -> (Vec<String>, Vec<String>) {
    let mut messages = Vec::new();
    let mut results = Vec::new();
    for update in recorder.take() {
        match update {
            AgentUpdate::MessageChunk(text, _) => messages.push(text),
            AgentUpdate::ToolCallUpdate { view, .. } => {
                for content in view.content {
                    if let ToolContent::Text { text } = content {
                        results.push(text);
                    }
                }
            }
            _ => {}
        }
    }
    (messages, results)
}

#[tokio::test]
async fn without_a_sandbox_the_user_is_told_once_and_the_prompt_guards() {
    let world = World::unguarded(
        "",
        &[
            bash("b1", "echo one"),
            bash("b2", "echo two"),
            reply("Done."),
        ],
    );
    let session = world.session().await;
    let recorder =
        Recorder::answering(&[PermissionOutcome::AllowOnce, PermissionOutcome::AllowOnce]);
    assert_eq!(
        world.prompt(&session, "run two", &recorder).await,
        "EndTurn"
    );
    let (messages, results) = shown(&recorder);
    let told: Vec<&String> = messages
        .iter()
        .filter(|m| m.contains("without a kernel sandbox"))
        .collect();
    assert_eq!(told.len(), 1, "{messages:?}");
    assert!(told[0].contains("[sandbox] required = true"));
    assert!(results.iter().any(|r| r.contains("one")) && results.iter().any(|r| r.contains("two")));
    // No "with network" answer: there is no sandbox to lift.
    assert!(recorder.asked.lock().unwrap().iter().all(|ask| ask
        .question
        .options()
        .iter()
        .all(|option| option.id != "allow_once_network")));
    // Logged as a notice, so a reload shows it too.
    assert_eq!(
        world
            .log_types(&session)
            .iter()
            .filter(|t| *t == "agent/notice")
            .count(),
        1
    );
}

#[tokio::test]
async fn a_required_sandbox_refuses_commands_where_there_is_none() {
    let world = World::unguarded(
        "[sandbox]\nrequired = true",
        &[bash("b1", "touch made.txt"), reply("Refused.")],
    );
    let session = world.session().await;
    let recorder = Recorder::answering(&[PermissionOutcome::AllowOnce]);
    assert_eq!(
        world.prompt(&session, "make it", &recorder).await,
        "EndTurn"
    );
    assert!(recorder.asked.lock().unwrap().is_empty(), "refused unasked");
    assert!(!world.cwd().join("made.txt").exists());
    let history = world.agent.history(&session).await.unwrap();
    let told = format!("{history:?}");
    assert!(
        told.contains("commands cannot be sandboxed on this machine"),
        "{told}"
    );
}
