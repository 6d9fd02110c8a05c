//! Bad input on stdin: every request-shaped frame gets a JSON-RPC error, the
//! process keeps serving, and stdout carries nothing but valid ACP frames.

use serde_json::json;

use crate::support::{Raw, TestEnv};

#[tokio::test]
async fn malformed_frames_are_answered_and_the_process_keeps_serving() {
    let mut env = TestEnv::new().await;
    env.extra_env
        .push(("DSH_MAX_FRAME_BYTES".into(), "4096".into()));
    let mut raw = Raw::spawn(env.command());

    raw.send_bytes(b"this is not json\n").await;
    let reply = raw.recv().await;
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    assert_eq!(reply["id"], serde_json::Value::Null);

    // Invalid UTF-8 inside a string: the id is recovered.
    let mut bytes =
        br#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":1,"x":""#
            .to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe]);
    bytes.extend_from_slice(b"\"}}\n");
    raw.send_bytes(&bytes).await;
    let reply = raw.recv().await;
    assert_eq!(reply["id"], 5, "{reply}");
    assert_eq!(reply["error"]["code"], -32700);
    assert!(reply["error"]["data"]["detail"]
        .as_str()
        .unwrap()
        .contains("UTF-8"));

    // Oversized frame.
    let big = json!({"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":1,"pad":"x".repeat(10_000)}});
    raw.send(big).await;
    let reply = raw.recv().await;
    assert_eq!(reply["id"], 6, "{reply}");
    assert_eq!(reply["error"]["code"], -32600);
    assert!(reply["error"]["data"]["detail"]
        .as_str()
        .unwrap()
        .contains("4096"));

    // Before initialize, other methods are refused with a reason.
    raw.send(json!({"jsonrpc":"2.0","id":70,"method":"session/list","params":{}}))
        .await;
    let reply = raw.recv().await;
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    raw.send(json!({"jsonrpc":"2.0","id":71,"method":"initialize","params":{"protocolVersion":1}}))
        .await;
    assert_eq!(raw.recv().await["result"]["protocolVersion"], 1);

    // Unknown method, wrong parameter types, a batch.
    raw.send(json!({"jsonrpc":"2.0","id":7,"method":"session/teleport","params":{}}))
        .await;
    assert_eq!(raw.recv().await["error"]["code"], -32601);
    raw.send(
        json!({"jsonrpc":"2.0","id":8,"method":"session/new","params":{"cwd":5,"mcpServers":[]}}),
    )
    .await;
    let reply = raw.recv().await;
    assert_eq!(reply["id"], 8);
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    raw.send(json!([{"jsonrpc":"2.0","id":9,"method":"initialize"}]))
        .await;
    assert_eq!(raw.recv().await["error"]["code"], -32600);

    // Noise that must not be answered: blank lines, a response to nothing,
    // a notification for an unknown session.
    raw.send_bytes(b"\n   \n").await;
    raw.send(json!({"jsonrpc":"2.0","id":999,"result":{}}))
        .await;
    raw.send(json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nope"}}))
        .await;

    // A valid conversation still works.
    let cwd = env.cwd().display().to_string();
    raw.send(json!({"jsonrpc":"2.0","id":11,"method":"session/new","params":{"cwd":cwd,"mcpServers":[]}})).await;
    let reply = raw.recv().await;
    assert!(reply["result"]["sessionId"].is_string(), "{reply}");
    raw.finish().await;
}

#[tokio::test]
async fn stdout_carries_only_protocol_even_with_debug_logging() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(json!({"chunks":[{"text":"hi"}],"finish":"stop"}));
    let conn = env.connect().await; // DSH_LOG=debug
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "hello").await.unwrap();
    let stderr = conn.stderr.clone();
    let frames = conn.finish().await; // validates every frame against the schema
    assert!(frames.len() >= 4);
    let stderr = stderr.lock().unwrap().clone();
    assert!(
        stderr.contains("DEBUG") || stderr.contains("INFO"),
        "logs go to stderr"
    );
    assert!(
        !stderr.contains("test-key-d5h"),
        "the API key never reaches the logs"
    );
    let log = std::fs::read_to_string(env.log_path(&session)).unwrap();
    assert!(
        !log.contains("test-key-d5h"),
        "the API key never reaches the session log"
    );
}

#[tokio::test]
async fn invalid_config_is_reported_on_session_requests() {
    let env = TestEnv::new().await;
    std::fs::write(
        env.home.path().join("config.toml"),
        "[provider]\nkind = \"carrier-pigeon\"\n",
    )
    .unwrap();
    let conn = env.connect().await;
    conn.initialize().await;
    let err = conn
        .cx
        .send_request(agent_client_protocol::v1::schema::NewSessionRequest::new(
            env.cwd(),
        ))
        .block_task()
        .await
        .unwrap_err();
    assert!(err.message.contains("config.toml"), "{}", err.message);
    conn.finish().await;
}

#[test]
fn the_schema_check_rejects_frames_that_break_the_schema() {
    // Guards against a vacuous validator: these must fail.
    let sent = vec![r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}"#.to_owned()];
    for bad in [
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"stopReason":"bored"}}"#,
        r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","method":"_dsh/private","params":{}}"#,
    ] {
        let frames = vec![bad.to_owned()];
        assert!(
            std::panic::catch_unwind(|| crate::support::validate_exchange(&sent, &frames)).is_err(),
            "accepted: {bad}"
        );
    }
    crate::support::validate_exchange(
        &sent,
        &[r#"{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}"#.to_owned()],
    );
}
