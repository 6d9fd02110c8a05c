//! Session titles from the model: one side request beside the first turn.

use agent_client_protocol::v1::schema::{SessionInfoUpdate, SessionUpdate, StopReason};
use serde_json::json;

use crate::support::*;

fn titles(conn: &Conn) -> Vec<String> {
    titles_in(&conn.updates())
}

fn titles_in(updates: &[agent_client_protocol::v1::schema::SessionNotification]) -> Vec<String> {
    updates
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

/// The sessions `session/list` gives a new dsh process, with their titles.
async fn listed_titles(env: &TestEnv) -> Vec<Option<String>> {
    let conn = env.connect().await;
    conn.initialize().await;
    let listed = conn
        .cx
        .send_request(agent_client_protocol::v1::schema::ListSessionsRequest::new())
        .block_task()
        .await
        .unwrap();
    conn.finish().await;
    listed.sessions.into_iter().map(|s| s.title).collect()
}

#[tokio::test]
async fn a_title_that_comes_after_the_first_turn_is_recorded_shown_and_listed() {
    let env = env().await;
    // The turn's answer is instant; the title comes 1.5 s later (in
    // chunks 0.5 s apart: a stream silent for longer is abandoned).
    env.mock.push_title(json!({
        "chunks": [{"text": "Rename "}, {"text": "the config "}, {"text": "loader"}],
        "finish": "stop",
        "delay_ms": 500
    }));
    env.mock.push_json(reply("Done."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    let done = conn
        .prompt(&session, "rename the config loader to settings")
        .await
        .unwrap();
    assert_eq!(done.stop_reason, StopReason::EndTurn);
    assert_eq!(titles(&conn), ["rename the config loader to settings"]);
    conn.wait_for("the model's title", |updates| titles_in(updates).len() == 2)
        .await;
    assert_eq!(
        titles(&conn),
        [
            "rename the config loader to settings",
            "Rename the config loader"
        ]
    );
    let logged: Vec<serde_json::Value> = env
        .log_events(&session)
        .into_iter()
        .filter(|e| e["type"] == "session/title")
        .collect();
    assert_eq!(logged.len(), 2, "{logged:?}");
    assert_eq!(logged[1]["data"]["title"], "Rename the config loader");
    validate_frames(&conn.finish().await);
    assert_eq!(
        listed_titles(&env).await,
        [Some("Rename the config loader".to_owned())]
    );
}

#[tokio::test]
async fn closing_the_session_cancels_a_pending_title_request() {
    let env = env().await;
    // The title request never finishes on its own.
    env.mock
        .push_title(json!({"chunks":[{"text":"Never named"}],"finish":"stop","hang_after":0}));
    env.mock.push_json(reply("Done."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "look at the build script")
        .await
        .unwrap();
    assert_eq!(env.mock.title_requests().len(), 1);
    assert_eq!(env.mock.let_go(), 0, "the request outlives the turn");
    conn.cx
        .send_request(agent_client_protocol::v1::schema::CloseSessionRequest::new(
            session.clone(),
        ))
        .block_task()
        .await
        .unwrap();
    let written = std::fs::read(env.log_path(&session)).unwrap();
    // The request is let go of: its connection closed by dsh.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while env.mock.let_go() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the title request was not cancelled by session/close"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(titles(&conn), ["look at the build script"]);
    assert_eq!(
        std::fs::read(env.log_path(&session)).unwrap(),
        written,
        "nothing written after session/close"
    );
    let logged = env.log_events(&session);
    assert_eq!(
        logged
            .iter()
            .filter(|e| e["type"] == "session/title")
            .count(),
        1
    );
    validate_frames(&conn.finish().await);
    assert_eq!(
        listed_titles(&env).await,
        [Some("look at the build script".to_owned())]
    );
}
