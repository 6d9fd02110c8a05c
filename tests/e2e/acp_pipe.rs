//! JSON-RPC piped into `dsh acp` (what CI automation over stdio does
//! first): requests written at once, without waiting for their answers,
//! then stdin closed. Each is handled in the order it came, and every one
//! is answered before dsh exits 0 — a prompt that cannot finish within the
//! grace is cancelled and answered `cancelled`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{Raw, TestEnv};

/// Writes `requests` at once, closes stdin, and reads everything dsh
/// writes until it exits (0, every frame valid ACP: [`Raw::finish`]).
async fn pipe(env: &TestEnv, requests: &[Value]) -> Vec<Value> {
    let mut raw = Raw::spawn(env.command());
    for request in requests {
        raw.send(request.clone()).await;
    }
    raw.finish()
        .await
        .iter()
        .map(|frame| serde_json::from_str(frame).expect("JSON"))
        .collect()
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn initialize() -> Value {
    request(1, "initialize", json!({"protocolVersion": 1}))
}

/// `initialize` (1), `session/new` (2), `session/resume` of `session` (3)
/// and a prompt to it (4), to be written at once.
fn opening_and_prompt(cwd: &str, session: &str) -> [Value; 4] {
    [
        initialize(),
        request(2, "session/new", json!({"cwd": cwd, "mcpServers": []})),
        request(
            3,
            "session/resume",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        ),
        request(
            4,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}),
        ),
    ]
}

/// The answers to requests, in the order they were written.
fn answers(frames: &[Value]) -> Vec<&Value> {
    frames
        .iter()
        .filter(|frame| frame.get("method").is_none())
        .collect()
}

/// The answer to request `id`, which must have come exactly once.
fn answer(frames: &[Value], id: u64) -> &Value {
    let found: Vec<&Value> = answers(frames)
        .into_iter()
        .filter(|frame| frame["id"] == id)
        .collect();
    assert_eq!(found.len(), 1, "one answer to request {id}: {frames:#?}");
    found[0]
}

/// Where the answer to `id` came among the answers.
fn position(frames: &[Value], id: u64) -> usize {
    answers(frames)
        .iter()
        .position(|frame| frame["id"] == id)
        .unwrap_or_else(|| panic!("no answer to request {id}: {frames:#?}"))
}

/// A stored session's id (made by an editor that waits for each answer).
async fn stored_session(env: &TestEnv) -> String {
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.finish().await;
    session.0.to_string()
}

/// `initialize` and `session/new` written together: the initialize is
/// answered first, and the session/new (in flight when stdin ends) with a
/// session.
#[tokio::test]
async fn requests_written_at_once_are_answered_in_order() {
    let env = TestEnv::new().await;
    let cwd = env.cwd().display().to_string();
    let frames = pipe(
        &env,
        &[
            initialize(),
            request(2, "session/new", json!({"cwd": cwd, "mcpServers": []})),
            request(3, "session/list", json!({})),
        ],
    )
    .await;
    assert_eq!(position(&frames, 1), 0, "initialize answered first");
    assert_eq!(answer(&frames, 1)["result"]["protocolVersion"], 1);
    let new = answer(&frames, 2);
    assert!(new["result"]["sessionId"].is_string(), "{new}");
    let list = answer(&frames, 3);
    assert!(list["result"]["sessions"].is_array(), "{list}");
    assert_eq!(answers(&frames).len(), 3, "{frames:#?}");
}

/// A prompt piped behind the `session/resume` that opens its session
/// runs after it (not refused for a session not yet open), and a client
/// that reads the answers before closing stdin gets the turn whole.
#[tokio::test]
async fn a_prompt_piped_behind_its_session_runs_after_it() {
    let env = TestEnv::relaxed().await;
    let session = stored_session(&env).await;
    env.mock
        .push_json(json!({"chunks":[{"text":"piped "},{"text":"answer"}],"finish":"stop"}));
    let cwd = env.cwd().display().to_string();
    let mut raw = Raw::spawn(env.command());
    for line in opening_and_prompt(&cwd, &session) {
        raw.send(line).await;
    }
    while raw.recv().await["id"] != 4 {}
    let frames: Vec<Value> = raw
        .finish()
        .await
        .iter()
        .map(|frame| serde_json::from_str(frame).expect("JSON"))
        .collect();
    assert_eq!(position(&frames, 1), 0, "initialize answered first");
    assert!(answer(&frames, 2)["result"]["sessionId"].is_string());
    assert!(answer(&frames, 3)["result"].is_object(), "{frames:#?}");
    assert!(position(&frames, 3) < position(&frames, 4));
    let prompt = answer(&frames, 4);
    assert_eq!(prompt["result"]["stopReason"], "end_turn", "{prompt}");
    let text: String = frames
        .iter()
        .filter(|frame| frame["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|frame| frame["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "piped answer");
}

/// Everything written at once and stdin closed: each request read before
/// the end is answered, in order — the resume before the prompt behind
/// it, which stdin's end cancels before it runs.
#[tokio::test]
async fn every_request_read_before_eof_is_answered() {
    let env = TestEnv::new().await;
    let session = stored_session(&env).await;
    let cwd = env.cwd().display().to_string();
    let frames = pipe(&env, &opening_and_prompt(&cwd, &session)).await;
    assert_eq!(position(&frames, 1), 0, "initialize answered first");
    assert!(
        answer(&frames, 2)["result"]["sessionId"].is_string(),
        "{frames:#?}"
    );
    assert!(answer(&frames, 3)["result"].is_object(), "{frames:#?}");
    assert!(position(&frames, 3) < position(&frames, 4));
    let prompt = answer(&frames, 4);
    assert_eq!(prompt["result"]["stopReason"], "cancelled", "{prompt}");
    assert_eq!(answers(&frames).len(), 4, "{frames:#?}");
}

/// A prompt running when stdin ends (its model never finishes) is
/// cancelled at once and answered `cancelled`, as is a request written
/// just before the end; dsh exits 0. (The client here waits for each
/// answer before the prompt, as an editor does.)
#[tokio::test]
async fn a_running_prompt_is_answered_cancelled_at_eof() {
    let env = TestEnv::relaxed().await;
    let session = stored_session(&env).await;
    env.mock.push_json(
        json!({"chunks":[{"text":"stalled"},{"text":" never"}],"finish":"stop","hang_after":1}),
    );
    let cwd = env.cwd().display().to_string();
    let mut raw = Raw::spawn(env.command());
    raw.send(initialize()).await;
    while raw.recv().await["id"] != 1 {}
    raw.send(request(
        2,
        "session/resume",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    ))
    .await;
    while raw.recv().await["id"] != 2 {}
    raw.send(request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}),
    ))
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while env.mock.requests().is_empty() {
        assert!(Instant::now() < deadline, "the prompt reached the model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    raw.send(request(4, "session/list", json!({}))).await;
    let closed = Instant::now();
    let frames: Vec<Value> = raw
        .finish()
        .await
        .iter()
        .map(|frame| serde_json::from_str(frame).expect("JSON"))
        .collect();
    // Cancelled, not timed out: the model's stream would be given 30 s.
    assert!(
        closed.elapsed() < Duration::from_secs(5),
        "took {:?}",
        closed.elapsed()
    );
    assert!(answer(&frames, 2)["result"].is_object(), "{frames:#?}");
    let prompt = answer(&frames, 3);
    assert_eq!(prompt["result"]["stopReason"], "cancelled", "{prompt}");
    assert!(
        answer(&frames, 4)["result"]["sessions"].is_array(),
        "{frames:#?}"
    );
    let events = env.log_events(&agent_client_protocol::v1::schema::SessionId::new(session));
    assert!(
        events
            .iter()
            .any(|event| event["type"] == "turn/end" && event["data"]["stop"] == "cancelled"),
        "the turn was closed in the log: {events:#?}"
    );
}
