//! What a session costs (`usage_update.cost`, from the models' `pricing`)
//! and the ids of assistant messages (`messageId` on their chunks), live
//! and on `session/load` (issue 27 §2).

use agent_client_protocol::v1::schema::{
    SessionNotification, SessionUpdate, SetSessionConfigOptionRequest, StopReason,
};
use serde_json::json;

use crate::support::{assert_exit, TestEnv};

/// Two priced models in EUR (a cache hit a quarter of a miss).
const PRICED: &str = r#"
[[models]]
id = "priced"
pricing = { input = 2.0, input_cache_hit = 0.5, output = 8.0, currency = "EUR" }

[[models]]
id = "other"
pricing = { input = 1.0, output = 4.0, currency = "EUR" }
"#;

/// The `cost` of every `usage_update`, in order.
fn costs(updates: &[SessionNotification]) -> Vec<(f64, String)> {
    updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::UsageUpdate(usage) => {
                let cost = usage
                    .cost
                    .as_ref()
                    .expect("a priced model's usage has a cost");
                Some((cost.amount, cost.currency.clone()))
            }
            _ => None,
        })
        .collect()
}

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[tokio::test]
async fn the_cost_is_the_configured_prices_times_the_usage_of_each_model_live_and_on_load() {
    let env = TestEnv::with_config(PRICED).await;
    // Turn 1 on "priced": a tool step and an answer, both with cache hits.
    env.mock.push_json(
        json!({"chunks":[{"tool_call":{"index":0,"id":"t1","name":"todo_write",
        "arguments":"{\"todos\":[{\"content\":\"count\",\"status\":\"in_progress\"}]}"}}],
        "finish":"tool_calls",
        "usage":{"prompt_tokens":1000,"completion_tokens":100,"prompt_cache_hit_tokens":600}}),
    );
    env.mock
        .push_json(json!({"chunks":[{"text":"Counted."}],"finish":"stop",
        "usage":{"prompt_tokens":2000,"completion_tokens":50,"prompt_cache_hit_tokens":1500}}));
    // Turn 2 on "other", which prices a cache hit as any input.
    env.mock
        .push_json(json!({"chunks":[{"text":"Again."}],"finish":"stop",
        "usage":{"prompt_tokens":3000,"completion_tokens":10,"prompt_cache_hit_tokens":2000}}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    assert_eq!(
        conn.prompt(&session, "count").await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    // 400 uncached × 2 + 600 hits × 0.5 + 100 out × 8, per million; then
    // 500 × 2 + 1500 × 0.5 + 50 × 8.
    let step1 = (400.0 * 2.0 + 600.0 * 0.5 + 100.0 * 8.0) / 1e6;
    let step2 = (500.0 * 2.0 + 1500.0 * 0.5 + 50.0 * 8.0) / 1e6;
    let live = costs(&conn.updates());
    assert_eq!(live.len(), 2, "{live:?}");
    assert!(near(live[0].0, step1), "{live:?}");
    assert!(near(live[1].0, step1 + step2), "{live:?}");
    assert!(live.iter().all(|(_, currency)| currency == "EUR"));

    conn.cx
        .send_request(SetSessionConfigOptionRequest::new(
            session.clone(),
            "model",
            "other",
        ))
        .block_task()
        .await
        .unwrap();
    conn.clear_updates();
    conn.prompt(&session, "again").await.unwrap();
    let step3 = (1000.0 * 1.0 + 2000.0 * 1.0 + 10.0 * 4.0) / 1e6;
    let total = step1 + step2 + step3;
    let after = costs(&conn.updates());
    assert_eq!(after.len(), 1, "{after:?}");
    assert!(near(after[0].0, total), "{after:?} vs {total}");
    conn.finish().await;

    // A reload computes the same total from the log, shown once, at the
    // end of the replay (a usage update says what holds now).
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    let replayed = costs(&conn.updates());
    assert_eq!(replayed.len(), 1, "{replayed:?}");
    assert!(near(replayed[0].0, total), "{replayed:?}");
    // Frames are schema-valid (checked by finish).
    conn.finish().await;
}

/// `(kind, messageId, text)` of every agent message and thought chunk.
fn chunks(updates: &[SessionNotification]) -> Vec<(&'static str, String, String)> {
    updates
        .iter()
        .filter_map(|n| {
            let (kind, chunk) = match &n.update {
                SessionUpdate::AgentMessageChunk(chunk) => ("message", chunk),
                SessionUpdate::AgentThoughtChunk(chunk) => ("thought", chunk),
                _ => return None,
            };
            let agent_client_protocol::v1::schema::ContentBlock::Text(text) = &chunk.content else {
                return None;
            };
            let id = chunk
                .message_id
                .as_ref()
                .expect("a model chunk has a messageId");
            Some((kind, id.0.to_string(), text.text.clone()))
        })
        .collect()
}

#[tokio::test]
async fn every_chunk_of_a_reply_has_its_message_id_and_a_reload_gives_the_same() {
    let env = TestEnv::new().await;
    // Paced, so the reply streams as several chunks.
    env.mock.push_json(json!({"chunks":[
        {"reasoning":"Think "},{"reasoning":"twice."},
        {"text":"one "},{"text":"two "},{"text":"three"}
    ],"delay_ms":40,"finish":"stop","usage":{"prompt_tokens":10,"completion_tokens":5}}));
    env.mock
        .push_json(json!({"chunks":[{"text":"four "},{"text":"five"}],
        "delay_ms":40,"finish":"stop","usage":{"prompt_tokens":20,"completion_tokens":2}}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "count").await.unwrap();
    conn.prompt(&session, "more").await.unwrap();
    let live = chunks(&conn.updates());
    let of = |chunks: &[(&str, String, String)], text: &str| {
        chunks
            .iter()
            .filter(|(_, _, t)| text.contains(t.as_str()))
            .map(|(_, id, _)| id.clone())
            .collect::<std::collections::BTreeSet<_>>()
    };
    let first = of(&live, "Think twice.one two three");
    let second = of(&live, "four five");
    assert_eq!(first.len(), 1, "one id for the first reply: {live:?}");
    assert_eq!(second.len(), 1, "one id for the second reply: {live:?}");
    assert_ne!(first, second, "{live:?}");
    let streamed = live
        .iter()
        .filter(|(kind, id, _)| *kind == "message" && first.contains(id))
        .count();
    assert!(
        streamed >= 2,
        "the first reply streamed in chunks: {live:?}"
    );
    conn.finish().await;

    // session/load sends each reply whole, with the id it streamed under.
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    let replayed = chunks(&conn.updates());
    let ids = |chunks: &[(&'static str, String, String)]| {
        chunks
            .iter()
            .map(|(kind, id, _)| (*kind, id.clone()))
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(ids(&replayed), ids(&live), "{replayed:?} vs {live:?}");
    assert_eq!(
        replayed
            .iter()
            .map(|(kind, _, text)| format!("{kind} {text}"))
            .collect::<Vec<_>>(),
        [
            "thought Think twice.",
            "message one two three",
            "message four five"
        ]
    );
    conn.finish().await;
}

#[tokio::test]
async fn dsh_run_json_ends_with_the_session_s_cost() {
    let env = TestEnv::with_config(PRICED).await;
    env.mock
        .push_json(json!({"chunks":[{"text":"Done."}],"finish":"stop",
        "usage":{"prompt_tokens":1000,"completion_tokens":100,"prompt_cache_hit_tokens":600}}));
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        env.dsh(&["run", "--json", "do it"])
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("dsh run ends")
    .unwrap();
    assert_exit(&output, 0, "dsh run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let result: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("a result line")).unwrap();
    assert_eq!(result["type"], "result", "{result}");
    assert_eq!(result["cost"]["currency"], "EUR", "{result}");
    let amount = result["cost"]["amount"].as_f64().unwrap();
    assert!(
        near(amount, (400.0 * 2.0 + 600.0 * 0.5 + 100.0 * 8.0) / 1e6),
        "{result}"
    );
}

#[tokio::test]
async fn the_sdk_s_status_carries_the_session_s_cost() {
    let env = TestEnv::with_config(PRICED).await;
    env.mock
        .push_json(json!({"chunks":[{"text":"Done."}],"finish":"stop",
        "usage":{"prompt_tokens":1000,"completion_tokens":100,"prompt_cache_hit_tokens":600}}));
    let sdk = crate::support::sdk_client::SdkProcess::stdio(&env);
    let client = &sdk.client;
    client
        .ok("initialize", json!({"clientInfo": {"name": "test"}}))
        .await;
    let session = client.ok("session/new", json!({"cwd": env.cwd()})).await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let sub = client.subscribe(&session, None).await;
    client.prompt(&session, "do it").await;
    let idle = client.wait_idle(&sub).await;
    assert_eq!(idle["stopReason"], "end_turn", "{idle}");
    assert_eq!(idle["cost"]["currency"], "EUR", "{idle}");
    let amount = idle["cost"]["amount"].as_f64().unwrap();
    assert!(
        near(amount, (400.0 * 2.0 + 600.0 * 0.5 + 100.0 * 8.0) / 1e6),
        "{idle}"
    );
    assert!(sdk.exit().await.success());
}
