//! Prompts while a turn runs (queued, steered, cancelled in line) and
//! `session/fork`, over ACP with the scripted model.

use agent_client_protocol::v1::schema::{
    ContentBlock, PromptRequest, SessionUpdate, StopReason, TextContent,
};
use serde_json::json;

use crate::support::*;

/// The role and text of each message of a model request.
fn messages(request: &serde_json::Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| {
            (
                message["role"].as_str().unwrap_or("").to_owned(),
                message_text(message),
            )
        })
        .collect()
}

/// Waits until the mock has received `count` model requests.
async fn requests(env: &TestEnv, count: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while env.mock.requests().len() < count {
        assert!(
            std::time::Instant::now() < deadline,
            "the model got {} requests, not {count}",
            env.mock.requests().len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn prompts_sent_while_a_turn_runs_are_queued_and_answered_in_order() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(json!({"repeat":{"text":"one ","count":20},"finish":"stop","delay_ms":20}));
    env.mock.push_json(reply("two"));
    env.mock.push_json(reply("three"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let first = conn.send_prompt(&session, "first");
    conn.wait_for("streaming", |u| kinds(u).contains(&"message"))
        .await;
    let second = conn.send_prompt(&session, "second");
    let third = conn.send_prompt(&session, "third");
    let (first, second, third) = (
        first.block_task().await.unwrap(),
        second.block_task().await.unwrap(),
        third.block_task().await.unwrap(),
    );
    for response in [&first, &second, &third] {
        assert_eq!(response.stop_reason, StopReason::EndTurn);
    }
    // In order, each its own turn, each seeing the ones before.
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 3);
    let last: Vec<(String, String)> = messages(&requests[2])
        .into_iter()
        .filter(|(role, _)| role != "system")
        .collect();
    let texts: Vec<&str> = last.iter().map(|(_, text)| text.as_str()).collect();
    assert!(texts[0].ends_with("first"), "{last:?}");
    assert!(texts[1].starts_with("one one"), "{last:?}");
    assert!(texts[2].ends_with("second"), "{last:?}");
    assert_eq!(texts[3], "two", "{last:?}");
    assert!(texts[4].ends_with("third"), "{last:?}");
    let turns: Vec<u64> = env
        .log_events(&session)
        .iter()
        .filter(|event| event["type"] == "turn/end")
        .map(|event| event["data"]["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [1, 2, 3]);
    conn.finish().await;
}

#[tokio::test]
async fn a_steered_prompt_joins_the_running_turn_after_its_tool_results() {
    let env = TestEnv::new().await;
    // The tool call streams slowly, so the steer arrives while it runs.
    env.mock.push_json(json!({
        "chunks":[{"text":"Reading."},{"tool_call":{"index":0,"id":"r1","name":"read","arguments":"{\"file_path\":\"hello.txt\"}"}}],
        "finish":"tool_calls","delay_ms":300
    }));
    env.mock.push_json(reply("Done, in French."));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let first = conn.send_prompt(&session, "read hello.txt");
    requests(&env, 1).await;
    let steered = conn.steer(&session, "answer in French");
    let (first, steered) = (
        first.block_task().await.unwrap(),
        steered.block_task().await.unwrap(),
    );
    assert_eq!(first.stop_reason, StopReason::EndTurn);
    assert_eq!(
        steered.stop_reason,
        StopReason::EndTurn,
        "answered with the turn it joined"
    );
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 2, "one turn, two steps");
    let second = messages(&requests[1]);
    let roles: Vec<&str> = second.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
    assert!(second[4].1.contains("answer in French"), "{second:?}");
    // The editor was shown the steered prompt where it landed.
    let shown = conn.updates().iter().any(|n| {
        matches!(&n.update, SessionUpdate::UserMessageChunk(chunk)
            if matches!(&chunk.content, ContentBlock::Text(t) if t.text == "answer in French"))
    });
    assert!(shown, "a user_message_chunk for the steered prompt");
    let steered_events: Vec<serde_json::Value> = env
        .log_events(&session)
        .into_iter()
        .filter(|event| event["type"] == "user/message" && event["data"]["steered"] == true)
        .collect();
    assert_eq!(steered_events.len(), 1);
    assert_eq!(steered_events[0]["data"]["turn"], 1);

    // Reloaded, the history is the same: the next request carries it.
    env.mock.push_json(reply("ok"));
    let conn2 = {
        conn.finish().await;
        let conn = env.connect().await;
        conn.initialize().await;
        conn.load(&session, &env.cwd()).await;
        conn
    };
    conn2.prompt(&session, "thanks").await.unwrap();
    let after = messages(&env.mock.requests()[2]);
    assert_eq!(after[..5], second[..5]);
    conn2.finish().await;
}

#[tokio::test]
async fn a_steer_that_finds_no_turn_is_an_ordinary_prompt() {
    let env = TestEnv::new().await;
    env.mock.push_json(reply("hello"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let response = conn.steer(&session, "hi").block_task().await.unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(chunk_text(&conn.updates(), false), "hello");
    conn.finish().await;
}

#[tokio::test]
async fn cancel_ends_the_running_turn_and_every_queued_prompt() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(json!({"repeat":{"text":"x","count":400},"finish":"stop","delay_ms":25}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let first = conn.send_prompt(&session, "1");
    conn.wait_for("streaming", |u| kinds(u).contains(&"message"))
        .await;
    let queued = conn.send_prompt(&session, "2");
    let steered = conn.steer(&session, "3");
    conn.cancel(&session);
    for response in [first, queued, steered] {
        assert_eq!(
            response.block_task().await.unwrap().stop_reason,
            StopReason::Cancelled
        );
    }
    assert_eq!(env.mock.requests().len(), 1, "nothing in line ran");
    // The session takes prompts again.
    env.mock.push_json(reply("again"));
    let response = conn.prompt(&session, "4").await.unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    conn.finish().await;
}

#[tokio::test]
async fn prompts_beyond_the_line_are_refused_busy() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(json!({"repeat":{"text":"x","count":400},"finish":"stop","delay_ms":25}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let first = conn.send_prompt(&session, "running");
    conn.wait_for("streaming", |u| kinds(u).contains(&"message"))
        .await;
    let waiting: Vec<_> = (0..16)
        .map(|n| conn.send_prompt(&session, &format!("queued {n}")))
        .collect();
    let err = conn.prompt(&session, "one too many").await.unwrap_err();
    assert_eq!(err.data.as_ref().unwrap()["code"], "session.busy");
    assert!(err.message.contains("16 prompts"), "{}", err.message);
    conn.cancel(&session);
    assert_eq!(
        first.block_task().await.unwrap().stop_reason,
        StopReason::Cancelled
    );
    for response in waiting {
        assert_eq!(
            response.block_task().await.unwrap().stop_reason,
            StopReason::Cancelled
        );
    }
    conn.finish().await;
}

#[tokio::test]
async fn a_bad_delivery_is_refused() {
    let env = TestEnv::new().await;
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let meta = json!({"dsh": {"delivery": "sideways"}});
    let serde_json::Value::Object(meta) = meta else {
        unreachable!()
    };
    let err = conn
        .cx
        .send_request(
            PromptRequest::new(
                session.clone(),
                vec![ContentBlock::Text(TextContent::new("x"))],
            )
            .meta(meta),
        )
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(err.data.as_ref().unwrap()["code"], "request.invalid_params");
    conn.finish().await;
}

#[tokio::test]
async fn a_fork_carries_the_parents_completed_turns_and_leaves_the_parent_alone() {
    use agent_client_protocol::v1::schema::{ForkSessionRequest, ListSessionsRequest};
    let env = TestEnv::new().await;
    env.mock.push_json(reply("The answer is 42."));
    let conn = env.connect().await;
    let init = conn.initialize().await;
    assert!(
        init.agent_capabilities.session_capabilities.fork.is_some(),
        "session/fork is advertised"
    );
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "What is the answer?").await.unwrap();
    let parent_log = std::fs::read_to_string(env.log_path(&session)).unwrap();

    let forked = conn
        .cx
        .send_request(ForkSessionRequest::new(session.clone(), env.cwd()))
        .block_task()
        .await
        .unwrap();
    assert_ne!(forked.session_id, session);
    env.mock.push_json(reply("Still 42."));
    conn.prompt(&forked.session_id, "Are you sure?")
        .await
        .unwrap();
    // The fork's first request carries the parent's conversation.
    let request = messages(&env.mock.requests()[1]);
    let texts: Vec<&str> = request
        .iter()
        .filter(|(role, _)| role != "system")
        .map(|(_, text)| text.as_str())
        .collect();
    assert!(texts[0].ends_with("What is the answer?"), "{texts:?}");
    assert_eq!(texts[1], "The answer is 42.");
    assert!(texts[2].ends_with("Are you sure?"), "{texts:?}");
    // The parent's log is byte for byte what it was; the fork's header
    // names it.
    assert_eq!(
        std::fs::read_to_string(env.log_path(&session)).unwrap(),
        parent_log
    );
    let fork_log = std::fs::read_to_string(env.log_path(&forked.session_id)).unwrap();
    let header: serde_json::Value = serde_json::from_str(fork_log.lines().next().unwrap()).unwrap();
    assert_eq!(header["forked_from"]["session"], session.0.as_ref());
    assert!(header["forked_from"]["seq"].as_u64().unwrap() > 0);
    // Both are listed; the fork under the parent's title.
    let listed = conn
        .cx
        .send_request(ListSessionsRequest::new())
        .block_task()
        .await
        .unwrap();
    let title = |id: &agent_client_protocol::v1::schema::SessionId| {
        listed
            .sessions
            .iter()
            .find(|info| &info.session_id == id)
            .and_then(|info| info.title.clone())
    };
    let parent_title = title(&session).expect("the parent is listed with a title");
    assert_eq!(
        title(&forked.session_id),
        Some(format!("{parent_title} (fork)"))
    );

    // Into another workspace, the parent's mode stays behind.
    conn.set_mode(&session, "full-access").await;
    let elsewhere = tempfile::tempdir().unwrap();
    let moved = conn
        .cx
        .send_request(ForkSessionRequest::new(
            session.clone(),
            elsewhere.path().to_path_buf(),
        ))
        .block_task()
        .await
        .unwrap();
    assert_eq!(
        moved.modes.unwrap().current_mode_id.0.as_ref(),
        "ask",
        "not the parent's full-access"
    );
    let here = conn
        .cx
        .send_request(ForkSessionRequest::new(session.clone(), env.cwd()))
        .block_task()
        .await
        .unwrap();
    assert_eq!(
        here.modes.unwrap().current_mode_id.0.as_ref(),
        "full-access"
    );
    conn.finish().await;
}

#[tokio::test]
async fn slash_fork_copies_the_conversation_into_a_new_session() {
    let env = TestEnv::new().await;
    env.mock.push_json(reply("Noted."));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "Remember the number 7.")
        .await
        .unwrap();
    conn.prompt(&session, "/fork").await.unwrap();
    let said = chunk_text(&conn.updates(), false);
    let id = said
        .split('`')
        .nth(1)
        .expect("the notice names the fork")
        .to_owned();
    assert_eq!(env.mock.requests().len(), 1, "/fork asks no model");
    conn.finish().await;

    env.mock.push_json(reply("7."));
    let conn = env.connect().await;
    conn.initialize().await;
    let fork = agent_client_protocol::v1::schema::SessionId::new(id);
    conn.load(&fork, &env.cwd()).await;
    conn.prompt(&fork, "Which number?").await.unwrap();
    let request = messages(&env.mock.requests()[1]);
    assert!(
        request
            .iter()
            .any(|(_, text)| text.ends_with("Remember the number 7.")),
        "{request:?}"
    );
    conn.finish().await;
}
