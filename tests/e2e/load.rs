//! Many sessions in one process at once: no cross-talk, all prompts complete.

use std::collections::HashMap;

use agent_client_protocol::v1::schema::{
    ContentBlock, PromptRequest, SessionUpdate, StopReason, TextContent,
};
use serde_json::json;

use crate::support::TestEnv;

#[tokio::test]
async fn fifty_concurrent_sessions_stream_and_run_tools_without_cross_talk() {
    let env = TestEnv::relaxed().await;
    // Two model calls per session: a `read` of the session's own file, then
    // an echo of the prompt and what the tool returned.
    for _ in 0..100 {
        env.mock.push_json(
            json!({"echo_read": true, "echo_chunks": 8, "finish": "stop", "delay_ms": 5}),
        );
    }
    for i in 0..50 {
        std::fs::write(
            env.cwd().join(format!("s{i}.txt")),
            format!("content of file {i}\n"),
        )
        .unwrap();
    }
    let conn = env.connect().await;
    conn.initialize().await;
    let mut sessions = Vec::new();
    for _ in 0..50 {
        sessions.push(conn.new_session(&env.cwd()).await.session_id);
    }
    let prompts: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(i, session)| {
            let text = format!("s{i}.txt session number {i} says hello {i}");
            conn.cx.send_request(PromptRequest::new(
                session.clone(),
                vec![ContentBlock::Text(TextContent::new(text))],
            ))
        })
        .collect();
    for prompt in prompts {
        assert_eq!(
            prompt.block_task().await.unwrap().stop_reason,
            StopReason::EndTurn
        );
    }
    let mut streamed: HashMap<String, String> = HashMap::new();
    for notification in conn.updates() {
        if let SessionUpdate::AgentMessageChunk(chunk) = notification.update {
            if let ContentBlock::Text(text) = chunk.content {
                streamed
                    .entry(notification.session_id.0.to_string())
                    .or_default()
                    .push_str(&text.text);
            }
        }
    }
    assert_eq!(streamed.len(), 50);
    let mut tool_sessions: HashMap<String, String> = HashMap::new();
    for notification in conn.updates() {
        if let SessionUpdate::ToolCall(call) = notification.update {
            tool_sessions.insert(
                call.tool_call_id.0.to_string(),
                notification.session_id.0.to_string(),
            );
        }
    }
    for (i, session) in sessions.iter().enumerate() {
        let expected_start = format!("s{i}.txt session number {i} says hello {i} | ");
        let text = &streamed[session.0.as_ref()];
        assert!(
            text.starts_with(&expected_start) && text.contains(&format!("content of file {i}")),
            "session {i} got another session's stream or tool result: {text}"
        );
        assert_eq!(
            tool_sessions[&format!("read-s{i}.txt")],
            session.0.as_ref(),
            "session {i}'s tool call was reported on another session"
        );
        let logged = env.log_events(session);
        let result = logged.iter().find(|e| e["type"] == "tool/result").unwrap();
        assert_eq!(result["data"]["call_id"], format!("read-s{i}.txt"));
        let reply = logged
            .iter()
            .rev()
            .find(|e| e["type"] == "assistant/message")
            .unwrap();
        assert_eq!(&reply["data"]["text"], text.as_str());
    }
    let rss_kib = crate::support::rss(conn.child.id().unwrap()) / 1024;
    eprintln!(
        "RSS with 50 sessions after their prompts: {} MB",
        rss_kib / 1024
    );
    assert!(rss_kib < 200 * 1024, "memory stays bounded: {rss_kib} KiB");
    conn.finish().await;
}
