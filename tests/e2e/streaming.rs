//! Prompt turns: streaming order and content, usage, stop reasons, cancel,
//! retries and model faults, prompt content (busy sessions: queue.rs).

use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    ContentBlock, EmbeddedResource, EmbeddedResourceResource, ImageContent, PromptRequest,
    ResourceLink, SessionUpdate, StopReason, TextContent, TextResourceContents,
};
use serde_json::json;

use crate::support::{chunk_text, kinds, runs, TestEnv};

#[tokio::test]
async fn streams_thoughts_then_message_with_usage_and_logs_the_turn() {
    let env = TestEnv::new().await;
    env.mock.push_fixture("stream-basic.jsonl");
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let response = conn
        .prompt(&session, "Explain the project\nin detail")
        .await
        .unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);

    let updates = conn.updates();
    assert_eq!(
        runs(&kinds(&updates)),
        ["session_info", "thought", "message", "usage"]
    );
    assert_eq!(
        chunk_text(&updates, true),
        "Let me look. The README says enough."
    );
    assert_eq!(
        chunk_text(&updates, false),
        "It is a **word counter**.\nIt reads stdin."
    );
    assert!(
        kinds(&updates).iter().filter(|k| **k == "message").count() >= 2,
        "deltas that arrive apart are not buffered into one chunk"
    );
    let usage = updates.iter().find_map(|n| match &n.update {
        SessionUpdate::UsageUpdate(usage) => Some(usage.clone()),
        _ => None,
    });
    let usage = usage.unwrap();
    assert_eq!(
        usage.used,
        120 + 30,
        "prompt (cached and uncached) plus completion"
    );
    assert_eq!(usage.size, 1_000_000);
    match &updates[0].update {
        SessionUpdate::SessionInfoUpdate(info) => {
            assert_eq!(
                serde_json::to_value(info).unwrap()["title"],
                "Explain the project"
            )
        }
        other => panic!("{other:?}"),
    }

    // The request carried DeepSeek's fields, the system prompt and the prompt.
    let request = &env.mock.requests()[0];
    assert_eq!(request["stream"], true);
    assert_eq!(request["thinking"]["type"], "enabled");
    assert_eq!(request["reasoning_effort"], "high");
    assert_eq!(request["messages"][0]["role"], "system");
    assert!(request["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains(&env.cwd().display().to_string()));
    assert_eq!(
        request["messages"][1]["content"],
        "Explain the project\nin detail"
    );
    let head = &env.mock.heads()[0];
    assert!(head
        .to_ascii_lowercase()
        .contains("authorization: bearer test-key-d5h"));

    // The log has the turn, with usage including the cache hits.
    let events = env.log_events(&session);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "user/message",
            "session/title",
            "turn/start",
            "assistant/message",
            "turn/end"
        ]
    );
    let message = &events[3]["data"];
    assert_eq!(
        message["text"],
        "It is a **word counter**.\nIt reads stdin."
    );
    assert_eq!(message["reasoning"], "Let me look. The README says enough.");
    assert_eq!(message["usage"]["cache_read_tokens"], 100);
    assert_eq!(message["usage"]["input_tokens"], 20);
    assert_eq!(events[4]["data"]["stop"], "end_turn");
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    // Idle after a streamed turn, dsh exits at once on EOF (nothing keeps
    // its stdout writer waiting).
    let started = Instant::now();
    conn.finish().await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "dsh took {:?} to exit after EOF",
        started.elapsed()
    );
}

#[tokio::test]
async fn second_turn_history_is_derived_from_the_log() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(json!({"chunks":[{"reasoning":"hmm"},{"text":"first answer"}],"finish":"stop"}));
    env.mock
        .push_json(json!({"chunks":[{"text":"second answer"}],"finish":"stop"}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "one").await.unwrap();
    conn.prompt(&session, "two").await.unwrap();
    let second = &env.mock.requests()[1]["messages"];
    let roles: Vec<&str> = second
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(second[2]["content"], "first answer");
    assert!(
        second[2].get("reasoning_content").is_none(),
        "reasoning is only passed back on tool-call turns"
    );
    assert_eq!(second[3]["content"], "two");
    conn.finish().await;
}

#[tokio::test]
async fn stop_reasons_max_tokens_and_refusal() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(json!({"chunks":[{"text":"trunc"}],"finish":"length"}));
    env.mock
        .push_json(json!({"chunks":[],"finish":"content_filter"}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    assert_eq!(
        conn.prompt(&session, "a").await.unwrap().stop_reason,
        StopReason::MaxTokens
    );
    assert_eq!(
        conn.prompt(&session, "b").await.unwrap().stop_reason,
        StopReason::Refusal
    );
    let ends: Vec<String> = env
        .log_events(&session)
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["stop"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ends, ["max_tokens", "refusal"]);
    conn.finish().await;
}

#[tokio::test]
async fn cancel_mid_stream_answers_cancelled_quickly_and_session_stays_usable() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(json!({"repeat":{"text":"tick ","count":400},"finish":"stop","delay_ms":25}));
    env.mock
        .push_json(json!({"chunks":[{"text":"after cancel"}],"finish":"stop"}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;

    // Cancelling an idle session is harmless.
    conn.cancel(&session);

    let prompt = conn.send_prompt(&session, "count");
    conn.wait_for("three message chunks", |u| {
        kinds(u).iter().filter(|k| **k == "message").count() >= 3
    })
    .await;
    let sent = Instant::now();
    conn.cancel(&session);
    conn.cancel(&session); // idempotent
    let response = prompt.block_task().await.unwrap();
    let elapsed = sent.elapsed();
    assert_eq!(response.stop_reason, StopReason::Cancelled);
    eprintln!("cancel → cancelled response: {elapsed:?}");
    assert!(
        elapsed < Duration::from_millis(1000),
        "cancel took {elapsed:?} (goal 200 ms)"
    );

    let streamed = chunk_text(&conn.updates(), false);
    let events = env.log_events(&session);
    let message = events
        .iter()
        .find(|e| e["type"] == "assistant/message")
        .unwrap();
    assert_eq!(message["data"]["interrupted"], true);
    assert_eq!(message["data"]["finish"], "cancelled");
    assert_eq!(
        message["data"]["text"].as_str().unwrap(),
        streamed,
        "the delivered prefix is kept"
    );
    assert!(events
        .iter()
        .any(|e| e["type"] == "turn/end" && e["data"]["stop"] == "cancelled"));

    conn.clear_updates();
    let response = conn.prompt(&session, "again").await.unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(chunk_text(&conn.updates(), false), "after cancel");
    // The interrupted prefix stays in the history the model sees.
    let second = &env.mock.requests()[1]["messages"];
    assert_eq!(second[2]["role"], "assistant");
    assert_eq!(second[2]["content"].as_str().unwrap(), streamed);
    conn.finish().await;
}

#[tokio::test]
async fn cancel_request_for_the_prompt_is_honoured() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(json!({"repeat":{"text":"x","count":400},"finish":"stop","delay_ms":25}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let prompt = conn.send_prompt(&session, "go");
    conn.wait_for("a message chunk", |u| kinds(u).contains(&"message"))
        .await;
    prompt.cancel().unwrap();
    match prompt.block_task().await {
        Ok(response) => assert_eq!(response.stop_reason, StopReason::Cancelled),
        Err(err) => assert_eq!(i32::from(err.code), -32800, "{err:?}"),
    }
    let events = env.log_events(&session);
    assert!(events
        .iter()
        .any(|e| e["type"] == "turn/end" && e["data"]["stop"] == "cancelled"));
    conn.finish().await;
}

#[tokio::test]
async fn rate_limit_then_success_is_retried_and_logged() {
    let env = TestEnv::new().await;
    env.mock.push_json(json!({"status":429,"retry_after":"0"}));
    env.mock.push_json(json!({"status":503}));
    env.mock
        .push_json(json!({"chunks":[{"text":"made it"}],"finish":"stop"}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let response = conn.prompt(&session, "hi").await.unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(chunk_text(&conn.updates(), false), "made it");
    assert_eq!(env.mock.requests().len(), 3);
    let retries: Vec<serde_json::Value> = env
        .log_events(&session)
        .into_iter()
        .filter(|e| e["type"] == "llm/retry")
        .collect();
    assert_eq!(retries.len(), 2);
    assert_eq!(retries[0]["ignorable"], true);
    assert_eq!(retries[0]["data"]["error"]["code"], "model.rate_limit");
    assert_eq!(retries[1]["data"]["error"]["code"], "model.server");
    conn.finish().await;
}

#[tokio::test]
async fn server_errors_exhaust_retries_with_a_clear_error() {
    let env = TestEnv::new().await;
    for _ in 0..4 {
        env.mock.push_json(json!({"status":500}));
    }
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let err = conn.prompt(&session, "hi").await.unwrap_err();
    assert_eq!(i32::from(err.code), -32603);
    assert!(
        err.message.contains("HTTP 500") && err.message.contains("gave up after 3 retries"),
        "{}",
        err.message
    );
    assert_eq!(err.data.as_ref().unwrap()["code"], "model.server");
    assert_eq!(
        env.mock.requests().len(),
        4,
        "one attempt plus max_retries = 3"
    );
    let events = env.log_events(&session);
    let end = events.iter().find(|e| e["type"] == "turn/end").unwrap();
    assert_eq!(end["data"]["stop"], "error");
    assert_eq!(end["data"]["error"]["code"], "model.server");
    // The session is still usable.
    env.mock
        .push_json(json!({"chunks":[{"text":"fine now"}],"finish":"stop"}));
    assert_eq!(
        conn.prompt(&session, "again").await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    conn.finish().await;
}

#[tokio::test]
async fn auth_rejection_is_not_retried() {
    let env = TestEnv::new().await;
    env.mock.push_json(
        json!({"status":401,"body":"{\"error\":{\"message\":\"Authentication Fails\"}}"}),
    );
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let err = conn.prompt(&session, "hi").await.unwrap_err();
    assert!(
        err.message.contains("rejected") && err.message.contains("Authentication Fails"),
        "{}",
        err.message
    );
    assert_eq!(env.mock.requests().len(), 1);
    conn.finish().await;
}

#[tokio::test]
async fn idle_stream_times_out_and_keeps_the_partial_reply() {
    let env = TestEnv::new().await;
    env.mock.push_json(json!({"chunks":[{"text":"partial "},{"text":"reply"},{"text":" never"}],"finish":"stop","hang_after":2}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let started = Instant::now();
    let err = conn.prompt(&session, "hi").await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        err.data.as_ref().unwrap()["code"],
        "model.timeout",
        "{err:?}"
    );
    assert!(err.message.contains("sent nothing"), "{}", err.message);
    let message = env
        .log_events(&session)
        .into_iter()
        .find(|e| e["type"] == "assistant/message")
        .unwrap();
    assert_eq!(message["data"]["text"], "partial reply");
    assert_eq!(message["data"]["interrupted"], true);
    conn.finish().await;
}

#[tokio::test]
async fn dropped_stream_ends_the_turn_with_stream_closed() {
    let env = TestEnv::new().await;
    env.mock.push_json(json!({"chunks":[{"reasoning":"think"},{"text":"half"},{"text":" more"}],"finish":"stop","drop_after":2}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let err = conn.prompt(&session, "hi").await.unwrap_err();
    assert_eq!(
        err.data.as_ref().unwrap()["code"],
        "model.stream_closed",
        "{err:?}"
    );
    let message = env
        .log_events(&session)
        .into_iter()
        .find(|e| e["type"] == "assistant/message")
        .unwrap();
    assert_eq!(message["data"]["text"], "half");
    assert_eq!(message["data"]["reasoning"], "think");
    assert_eq!(message["data"]["interrupted"], true);
    conn.finish().await;
}

#[tokio::test]
async fn malformed_sse_is_a_clear_error() {
    let env = TestEnv::new().await;
    env.mock.push_json(
        json!({"raw":["{\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}", "{not json"]}),
    );
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let err = conn.prompt(&session, "hi").await.unwrap_err();
    assert_eq!(
        err.data.as_ref().unwrap()["code"],
        "model.malformed_response",
        "{err:?}"
    );
    conn.finish().await;
}

#[tokio::test]
async fn prompt_content_links_resources_and_images() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(json!({"chunks":[{"text":"a"}],"finish":"stop"}));
    env.mock
        .push_json(json!({"chunks":[{"text":"b"}],"finish":"stop"}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
    let prompt = vec![
        ContentBlock::Text(TextContent::new("look")),
        ContentBlock::ResourceLink(ResourceLink::new("main.rs", "file:///w/src/main.rs")),
        ContentBlock::Resource(EmbeddedResource::new(
            EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                "fn main() {}",
                "file:///w/a.rs",
            )),
        )),
        ContentBlock::Image(ImageContent::new(png, "image/png")),
    ];
    conn.cx
        .send_request(PromptRequest::new(session.clone(), prompt.clone()))
        .block_task()
        .await
        .unwrap();
    let user = &env.mock.requests()[0]["messages"][1]["content"];
    let text = user.as_str().expect("text-only model gets a string");
    assert!(
        text.contains("[resource_link name=main.rs uri=file:///w/src/main.rs]"),
        "{text}"
    );
    assert!(
        text.contains("<resource uri=\"file:///w/a.rs\">\nfn main() {}\n</resource>"),
        "{text}"
    );
    assert!(text.contains("[image omitted: image/png"), "{text}");

    conn.set_option(&session, "model", "deepseek-v4-flash-vision-exp")
        .await;
    conn.cx
        .send_request(PromptRequest::new(session.clone(), prompt))
        .block_task()
        .await
        .unwrap();
    let parts = env.mock.requests()[1]["messages"][3]["content"]
        .as_array()
        .cloned()
        .expect("content parts");
    assert!(parts.iter().any(|p| p["type"] == "image_url"
        && p["image_url"]["url"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,iVBOR")));

    let bad = vec![ContentBlock::Image(ImageContent::new("AAAA", "image/tiff"))];
    let err = conn
        .cx
        .send_request(PromptRequest::new(session.clone(), bad))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(i32::from(err.code), -32602);
    assert!(err.message.contains("image/tiff"));
    conn.finish().await;
}

#[tokio::test]
async fn tool_call_deltas_are_assembled_and_answered_without_failing_the_turn() {
    let env = TestEnv::new().await;
    // The model calls a tool that does not exist, in fragments, then answers.
    env.mock.push_json(json!({"chunks":[
        {"reasoning":"I should read it."},
        {"tool_call":{"index":0,"id":"call_a","name":"read_","arguments":"{\"file_"}},
        {"tool_call":{"index":0,"name":"image","arguments":"path\":\"hello.txt\"}"}}
    ],"finish":"tool_calls"}));
    env.mock
        .push_json(json!({"chunks":[{"text":"I cannot read files yet."}],"finish":"stop"}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let response = conn.prompt(&session, "read hello.txt").await.unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);

    let updates = conn.updates();
    // The mock reports no usage: each step still ends with an estimated
    // usage_update (issue 10, item 19b).
    assert_eq!(
        runs(&kinds(&updates)),
        [
            "session_info",
            "thought",
            "usage",
            "tool_call",
            "tool_call_update",
            "message",
            "usage"
        ]
    );
    let call = updates.iter().find_map(|n| match &n.update {
        SessionUpdate::ToolCall(call) => Some(call.clone()),
        _ => None,
    });
    let call = call.unwrap();
    assert_eq!(call.tool_call_id.0.as_ref(), "call_a");
    assert_eq!(call.raw_input, Some(json!({"file_path":"hello.txt"})));

    // The follow-up request carries the call (with reasoning passed back,
    // as DeepSeek requires) and the tool's error result.
    let messages = env.mock.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .clone();
    let assistant = &messages[2];
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "read_image");
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        "{\"file_path\":\"hello.txt\"}"
    );
    assert_eq!(assistant["reasoning_content"], "I should read it.");
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], "call_a");
    let content = messages[3]["content"].as_str().unwrap();
    assert!(content.contains("Unknown tool \"read_image\""), "{content}");

    let types: Vec<String> = env
        .log_events(&session)
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        types,
        [
            "user/message",
            "session/title",
            "turn/start",
            "assistant/message",
            "tool/call",
            "tool/result",
            "assistant/message",
            "turn/end"
        ]
    );

    // Replay shows the tool call with its final status.
    conn.finish().await;
    let conn = env.connect().await;
    conn.initialize().await;
    conn.cx
        .send_request(agent_client_protocol::v1::schema::LoadSessionRequest::new(
            session.clone(),
            env.cwd(),
        ))
        .block_task()
        .await
        .unwrap();
    let replayed = conn.updates();
    assert_eq!(
        runs(&kinds(&replayed)),
        [
            "user",
            "session_info",
            "thought",
            "tool_call",
            "tool_call_update",
            "message",
            "usage"
        ]
    );
    conn.finish().await;
}

/// A connection that breaks before the response is retried, then
/// reported; a refused connection to this machine is reported at once
/// (nothing listens there: waiting would not start the server).
#[tokio::test]
async fn unreachable_provider_is_retried_then_reported() {
    let env = TestEnv::new().await;
    for _ in 0..4 {
        env.mock.push_json(json!({"reset":true}));
    }
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let err = conn.prompt(&session, "hi").await.unwrap_err();
    assert_eq!(
        err.data.as_ref().unwrap()["code"],
        "model.transport",
        "{err:?}"
    );
    assert!(
        err.message.contains("cannot reach") && err.message.contains("gave up after 3 retries"),
        "{}",
        err.message
    );
    let retries = |session| {
        env.log_events(session)
            .iter()
            .filter(|e| e["type"] == "llm/retry")
            .count()
    };
    assert_eq!(retries(&session), 3);
    conn.finish().await;

    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut command = env.command();
    command.env("DEEPSEEK_BASE_URL", format!("http://127.0.0.1:{port}"));
    let conn = crate::support::Conn::spawn(command).await;
    let session = conn.start(&env.cwd()).await;
    let err = conn.prompt(&session, "hi").await.unwrap_err();
    assert_eq!(
        err.data.as_ref().unwrap()["code"],
        "model.transport",
        "{err:?}"
    );
    assert!(
        err.message.contains(&format!(
            "is the server running at http://127.0.0.1:{port}?"
        )),
        "{}",
        err.message
    );
    assert_eq!(retries(&session), 0);
    conn.finish().await;
}
