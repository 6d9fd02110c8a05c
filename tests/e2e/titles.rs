//! Session titles from the model: one side request beside the first turn.

use agent_client_protocol::v1::schema::{SessionInfoUpdate, SessionUpdate, StopReason};
use serde_json::json;

use crate::support::*;

fn titles(conn: &Conn) -> Vec<String> {
    conn.updates()
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::SessionInfoUpdate(SessionInfoUpdate {
                title: agent_client_protocol::schema::MaybeUndefined::Value(title),
                ..
            }) => Some(title.clone()),
            _ => None,
        })
        .collect()
}

async fn env() -> TestEnv {
    TestEnv::with_config("[titles]\nfrom_model = true\nmax_title_bytes = 40").await
}

#[tokio::test]
async fn the_model_names_the_session_without_holding_up_the_turn() {
    let env = env().await;
    env.mock.push_title(json!({"chunks":[{"text":"\"Fix the flaky login test.\""}],"finish":"stop","usage":{"prompt_tokens":60,"completion_tokens":7}}));
    env.mock
        .push_json(json!({"chunks":[{"text":"On it."}],"finish":"stop","delay_ms":300}));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    let done = conn
        .prompt(&session, "please fix the login test that fails sometimes")
        .await
        .unwrap();
    assert_eq!(done.stop_reason, StopReason::EndTurn);
    assert_eq!(
        titles(&conn),
        [
            "please fix the login test that fails sometimes",
            "Fix the flaky login test"
        ]
    );
    let asked = env.mock.title_requests();
    assert_eq!(asked.len(), 1);
    assert!(asked[0]["messages"].to_string().contains("fails sometimes"));
    assert!(asked[0]["tools"].is_null() || asked[0]["tools"] == json!([]));
    let logged: Vec<serde_json::Value> = env
        .log_events(&session)
        .into_iter()
        .filter(|e| e["type"] == "session/title")
        .collect();
    assert_eq!(logged.len(), 2);
    assert_eq!(
        logged[1]["data"]["usage"]["output_tokens"], 7,
        "counted in usage"
    );
    // Only the first turn asks.
    env.mock.push_json(reply("Again."));
    conn.prompt(&session, "and again").await.unwrap();
    assert_eq!(env.mock.title_requests().len(), 1);
    let frames = conn.finish().await;
    validate_frames(&frames);
    // session/list shows the model's title.
    let conn = env.connect().await;
    conn.initialize().await;
    let listed = conn
        .cx
        .send_request(agent_client_protocol::v1::schema::ListSessionsRequest::new())
        .block_task()
        .await
        .unwrap();
    assert_eq!(
        listed.sessions[0].title.as_deref(),
        Some("Fix the flaky login test")
    );
    conn.finish().await;
}

#[tokio::test]
async fn a_failed_or_unfit_title_leaves_the_first_prompt_as_the_title() {
    for answer in [
        json!({"status": 500}),
        json!({"chunks":[{"text":"   "}],"finish":"stop"}),
        json!({"chunks":[{"text":"A title that is far too long to be accepted by this session's settings"}],"finish":"stop"}),
    ] {
        let env = env().await;
        env.mock.push_title(answer.clone());
        env.mock
            .push_json(json!({"chunks":[{"text":"Done."}],"finish":"stop","delay_ms":300}));
        let conn = env.connect().await;
        conn.initialize().await;
        let session = conn.start(&env.cwd()).await;
        let done = conn.prompt(&session, "tidy the imports").await.unwrap();
        assert_eq!(done.stop_reason, StopReason::EndTurn, "{answer}");
        assert_eq!(titles(&conn), ["tidy the imports"], "{answer}");
        assert_eq!(
            chunk_text(&conn.updates(), false),
            "Done.",
            "no error shown: {answer}"
        );
        conn.finish().await;
    }
}
