//! MCP servers from the editor become agent tools (stdio).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    CancelNotification, CloseSessionRequest, ContentBlock, EnvVariable, McpServer, McpServerSse,
    McpServerStdio, NewSessionRequest, PermissionOptionKind, PromptRequest, SessionId, StopReason,
    TextContent,
};
use serde_json::json;

use crate::support::{call, kinds, procs, reply, tool_result, Answer, ClientSim, Conn, TestEnv};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp/fixture_server.py")
}

fn servers(log: &std::path::Path) -> Vec<McpServer> {
    vec![
        McpServer::Stdio(
            McpServerStdio::new("fixture", "python3")
                .args(vec![fixture().display().to_string()])
                .env(vec![EnvVariable::new(
                    "MCP_FIXTURE_LOG",
                    log.display().to_string(),
                )]),
        ),
        McpServer::Stdio(McpServerStdio::new("broken", "/nonexistent/mcp-server")),
    ]
}

async fn session_with_servers(conn: &Conn, env: &TestEnv, log: &std::path::Path) -> SessionId {
    conn.initialize().await;
    conn.cx
        .send_request(NewSessionRequest::new(env.cwd()).mcp_servers(servers(log)))
        .block_task()
        .await
        .expect("session/new with MCP servers")
        .session_id
}

fn logged(log: &std::path::Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

#[tokio::test]
async fn mcp_tools_are_offered_asked_for_and_called() {
    let env = TestEnv::new().await;
    let log = env.home.path().join("mcp.log");
    env.mock.push_json(call(
        "m1",
        "mcp__fixture__echo",
        json!({"text":"hello mcp"}),
    ));
    env.mock
        .push_json(call("m2", "mcp__fixture__echo", json!({"text":"again"})));
    env.mock
        .push_json(call("m3", "mcp__fixture__fail", json!({})));
    env.mock
        .push_json(call("m4", "mcp__fixture__picture", json!({})));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowAlways));
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim.clone()).await;
    let session = session_with_servers(&conn, &env, &log).await;
    // The server that cannot start is reported, the other one works.
    conn.wait_for("a notice about the broken server", |u| {
        crate::support::chunk_text(u, false).contains("MCP server \"broken\" is unavailable")
    })
    .await;
    conn.prompt(&session, "use the tools").await.unwrap();

    let offered: Vec<String> = env.mock.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    for name in [
        "mcp__fixture__echo",
        "mcp__fixture__slow",
        "mcp__fixture__picture",
        "mcp__fixture__fail",
    ] {
        assert!(
            offered.contains(&name.to_owned()),
            "{name} missing from {offered:?}"
        );
    }
    assert!(
        !offered.iter().any(|n| n.contains("bad")),
        "a tool with an unusable schema is skipped: {offered:?}"
    );

    assert_eq!(tool_result(&env, "m1"), "hello mcp\n");
    assert_eq!(tool_result(&env, "m2"), "again\n");
    let asked: Vec<String> = sim
        .permission_requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.tool_call.tool_call_id.0.to_string())
        .collect();
    assert_eq!(
        asked,
        ["m1", "m3", "m4"],
        "allow_always for echo is remembered; other tools still ask"
    );
    assert_eq!(
        sim.permission_requests.lock().unwrap()[0]
            .tool_call
            .fields
            .title
            .as_deref(),
        Some("fixture: echo")
    );
    assert!(tool_result(&env, "m3").contains("failed on purpose"));
    assert!(tool_result(&env, "m4").contains("a pixel:"));
    let last = env.mock.requests().last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    let after_tools = last.last().unwrap()["content"].to_string();
    assert!(
        after_tools.contains("[image omitted: image/png"),
        "the image follows the tool results: {after_tools}"
    );
    assert!(
        logged(&log).contains("call echo {\"text\": \"hello mcp\"}"),
        "{}",
        logged(&log)
    );
    assert!(kinds(&conn.updates()).contains(&"tool_call"));

    // Closing the session stops the server process.
    let cwd = env.cwd().canonicalize().unwrap();
    assert_eq!(procs::live_pids("fixture_server.py", &cwd).len(), 1);
    conn.cx
        .send_request(CloseSessionRequest::new(session.clone()))
        .block_task()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while !procs::live_pids("fixture_server.py", &cwd).is_empty() {
        assert!(
            Instant::now() < deadline,
            "MCP server still running after session/close"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    conn.finish().await;
}

#[tokio::test]
async fn a_rejected_mcp_call_never_reaches_the_server() {
    let env = TestEnv::new().await;
    let log = env.home.path().join("mcp.log");
    env.mock
        .push_json(call("m1", "mcp__fixture__echo", json!({"text":"secret"})));
    env.mock.push_json(reply("ok"));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::RejectOnce));
    let conn = env.connect_with(sim.clone()).await;
    let session = session_with_servers(&conn, &env, &log).await;
    conn.prompt(&session, "go").await.unwrap();
    assert!(tool_result(&env, "m1").contains("rejected"));
    assert!(!logged(&log).contains("call echo"), "{}", logged(&log));
    conn.finish().await;
    // Client EOF: no server left behind.
    let cwd = env.cwd().canonicalize().unwrap();
    assert!(procs::live_pids("fixture_server.py", &cwd).is_empty());
}

#[tokio::test]
async fn a_slow_mcp_call_is_cancelled_with_the_turn() {
    let env = TestEnv::new().await;
    let log = env.home.path().join("mcp.log");
    env.mock
        .push_json(call("m1", "mcp__fixture__slow", json!({"seconds": 20})));
    let conn = env.connect().await;
    let session = session_with_servers(&conn, &env, &log).await;
    conn.cx
        .send_request(
            agent_client_protocol::v1::schema::SetSessionConfigOptionRequest::new(
                session.clone(),
                "mode",
                "full-access",
            ),
        )
        .block_task()
        .await
        .unwrap();
    let prompt = conn.cx.send_request(PromptRequest::new(
        session.clone(),
        vec![ContentBlock::Text(TextContent::new("wait"))],
    ));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !logged(&log).contains("call slow") {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sent = Instant::now();
    conn.cx
        .send_notification(CancelNotification::new(session.clone()))
        .unwrap();
    assert_eq!(
        prompt.block_task().await.unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert!(sent.elapsed() < Duration::from_secs(2));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !logged(&log).contains("cancel-notification") {
        assert!(
            Instant::now() < deadline,
            "the server was not told: {}",
            logged(&log)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    conn.finish().await;
}

#[tokio::test]
async fn sse_servers_are_refused_at_session_new() {
    let env = TestEnv::new().await;
    let conn = env.connect().await;
    conn.initialize().await;
    let err =
        conn.cx
            .send_request(
                NewSessionRequest::new(env.cwd()).mcp_servers(vec![McpServer::Sse(
                    McpServerSse::new("events", "http://127.0.0.1:9/sse"),
                )]),
            )
            .block_task()
            .await
            .unwrap_err();
    assert_eq!(i32::from(err.code), -32602);
    assert!(
        err.message.contains("SSE") && err.message.contains("events"),
        "{}",
        err.message
    );
    conn.finish().await;
}
