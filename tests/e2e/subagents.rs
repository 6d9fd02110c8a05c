//! Subagents: the `subagent` tool runs a child session in the same
//! process — its own log and a fresh conversation, its steps shown on the
//! parent's one call, its answer the call's result, its asks on the
//! parent's editor, cancelled with the parent, or run as a background job.

use std::time::Duration;

use agent_client_protocol::v1::schema::{
    ListSessionsRequest, SessionNotification, SessionUpdate, StopReason, ToolCallContent,
    ToolCallStatus, ToolKind,
};
use serde_json::{json, Value};

use crate::support::*;

/// Every user message's text in a request.
fn user_texts(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(message_text)
        .collect()
}

/// The text content of every update of `call`'s tool call, in order.
fn call_texts(
    updates: &[SessionNotification],
    call: &str,
) -> Vec<(Option<ToolCallStatus>, String)> {
    let text = |content: &[ToolCallContent]| -> String {
        content
            .iter()
            .filter_map(|content| match content {
                ToolCallContent::Content(block) => match &block.content {
                    agent_client_protocol::v1::schema::ContentBlock::Text(text) => {
                        Some(text.text.clone())
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    updates
        .iter()
        .filter_map(|update| match &update.update {
            SessionUpdate::ToolCall(tool) if tool.tool_call_id.0.as_ref() == call => {
                Some((Some(tool.status), text(&tool.content)))
            }
            SessionUpdate::ToolCallUpdate(tool) if tool.tool_call_id.0.as_ref() == call => Some((
                tool.fields.status,
                tool.fields.content.as_deref().map(text).unwrap_or_default(),
            )),
            _ => None,
        })
        .collect()
}

fn child_events(env: &TestEnv, id: &str) -> Vec<Value> {
    env.log_events(&agent_client_protocol::v1::schema::SessionId::new(id))
}

#[tokio::test]
async fn a_subagent_works_in_its_own_session_and_its_answer_is_the_result() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    std::fs::write(cwd.join("notes.txt"), "the launch moved to friday\n").unwrap();
    env.mock.push_json(call(
        "d1",
        "subagent",
        json!({"description": "Summarize the notes", "prompt": "Read notes.txt and say what it says in one line."}),
    ));
    env.mock
        .push_json(call("r1", "read", json!({"file_path": "notes.txt"})));
    env.mock.push_json(json!({
        "chunks": [{"text": "The launch moved to Friday."}],
        "finish": "stop",
        "usage": {"prompt_tokens": 100, "completion_tokens": 7}
    }));
    env.mock
        .push_json(reply("Your notes: the launch moved to Friday."));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    let response = conn
        .prompt(
            &session,
            "PARENT-SECRET: what do my notes say? use a subagent",
        )
        .await
        .unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);

    let requests = env.mock.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    // The parent is offered the tool, and so is the child: `max_depth`
    // is 3 (tests/e2e/agents.rs tests the limit).
    assert!(tool_names(&requests[0]).contains(&"subagent".to_owned()));
    assert!(tool_names(&requests[1]).contains(&"subagent".to_owned()));
    assert!(tool_names(&requests[1]).contains(&"read".to_owned()));
    // The child's conversation is its prompt alone.
    let child_users = user_texts(&requests[1]);
    assert!(
        child_users
            .last()
            .unwrap()
            .ends_with("Read notes.txt and say what it says in one line."),
        "{child_users:?}"
    );
    let everything = requests[1]["messages"].to_string();
    assert!(!everything.contains("PARENT-SECRET"), "{everything}");
    // Its tool ran in its own conversation.
    assert!(requests[2]["messages"]
        .to_string()
        .contains("the launch moved to friday"));
    // The parent's next request carries the child's answer as the result.
    assert_eq!(tool_result(&env, "d1"), "The launch moved to Friday.");

    // The editor saw one `think` call titled with the description, in
    // progress with the child's steps, then completed with the answer.
    let updates = conn.updates();
    let opened = updates
        .iter()
        .find_map(|update| match &update.update {
            SessionUpdate::ToolCall(tool) if tool.tool_call_id.0.as_ref() == "d1" => Some(tool),
            _ => None,
        })
        .expect("the subagent's call");
    assert_eq!(opened.title, "Summarize the notes");
    assert_eq!(opened.kind, ToolKind::Think);
    assert!(
        !updates.iter().any(|update| matches!(&update.update,
            SessionUpdate::ToolCall(tool) if tool.tool_call_id.0.as_ref() == "r1")),
        "the child's calls are lines on the parent's call, not calls of their own"
    );
    let texts = call_texts(&updates, "d1");
    let progress = texts
        .iter()
        .position(|(status, text)| {
            *status == Some(ToolCallStatus::InProgress) && text.contains("Read notes.txt")
        })
        .unwrap_or_else(|| panic!("a progress line: {texts:#?}"));
    let (status, last) = texts.last().unwrap();
    assert_eq!(*status, Some(ToolCallStatus::Completed), "{texts:#?}");
    assert!(texts.len() > progress + 1);
    assert!(last.contains("Read notes.txt"), "{last}");
    assert!(last.contains("The launch moved to Friday."), "{last}");

    // The child has its own log, named in the parent's, and is not listed.
    let found = env.subagent_logs();
    assert_eq!(found.len(), 1, "{found:?}");
    let (child, header) = &found[0];
    assert_eq!(header["subagent_of"]["session"], session.0.as_ref());
    assert_eq!(header["subagent_of"]["call_id"], "d1");
    assert_eq!(header["subagent_of"]["depth"], 1);
    assert!(last.contains(child.as_str()), "{last}");
    let child_log = child_events(&env, child);
    let kinds: Vec<&str> = child_log
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"tool/call") && kinds.contains(&"turn/end"),
        "{kinds:?}"
    );
    let page = conn
        .cx
        .send_request(ListSessionsRequest::new())
        .block_task()
        .await
        .unwrap();
    let listed: Vec<&str> = page
        .sessions
        .iter()
        .map(|s| s.session_id.0.as_ref())
        .collect();
    assert_eq!(listed, [session.0.as_ref()]);
    // The parent's result carries the child's tokens.
    let result = env
        .log_events(&session)
        .into_iter()
        .find(|e| e["type"] == "tool/result" && e["data"]["call_id"] == "d1")
        .unwrap();
    assert_eq!(result["data"]["usage"]["input_tokens"], 100, "{result}");
    assert_eq!(result["data"]["usage"]["output_tokens"], 7, "{result}");
    conn.finish().await;

    // A load replays the parent's call with the child's summary; the
    // child's own log loads by id.
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &cwd).await;
    let replayed = call_texts(&conn.updates(), "d1");
    assert!(
        replayed
            .iter()
            .any(|(_, text)| text.contains("The launch moved to Friday.")),
        "{replayed:#?}"
    );
    conn.clear_updates();
    conn.load(
        &agent_client_protocol::v1::schema::SessionId::new(child.as_str()),
        &cwd,
    )
    .await;
    let child_replay = chunk_text(&conn.updates(), false);
    assert!(
        child_replay.contains("The launch moved to Friday."),
        "{child_replay}"
    );
    conn.finish().await;

    // Deleting the parent deletes the child's log too.
    let conn = env.connect().await;
    conn.initialize().await;
    conn.cx
        .send_request(agent_client_protocol::v1::schema::DeleteSessionRequest::new(session.clone()))
        .block_task()
        .await
        .unwrap();
    assert!(!env.log_path(&session).exists());
    assert!(env.subagent_logs().is_empty());
    conn.finish().await;
}

#[tokio::test]
async fn a_subagents_changes_are_undone_with_the_parent_turn() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    std::fs::write(cwd.join("config.txt"), "mode = slow\n").unwrap();
    env.mock.push_json(call(
        "d1",
        "subagent",
        json!({"description": "Speed it up", "prompt": "Set mode = fast in config.txt."}),
    ));
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path": "config.txt", "content": "mode = fast\n"}),
    ));
    // A reply that calls tools is not the answer: only the last one is.
    env.mock.push_json(reply("Done: mode = fast."));
    env.mock.push_json(reply("The subagent set it."));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    conn.set_mode(&session, "accept-edits").await;
    conn.prompt(&session, "speed it up").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(cwd.join("config.txt")).unwrap(),
        "mode = fast\n"
    );
    assert_eq!(tool_result(&env, "d1"), "Done: mode = fast.");
    // The parent's turn recorded the child's change; the child none.
    let checkpoints = env
        .log_events(&session)
        .into_iter()
        .filter(|e| e["type"] == "checkpoint")
        .count();
    assert_eq!(checkpoints, 1);
    conn.prompt(&session, "/undo").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(cwd.join("config.txt")).unwrap(),
        "mode = slow\n"
    );
    conn.finish().await;
}

#[tokio::test]
async fn a_childs_permission_ask_reaches_the_editor_labelled_and_a_cancel_stops_both() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    env.mock.push_json(call(
        "d1",
        "subagent",
        json!({"description": "Run the tests", "prompt": "Run the test suite."}),
    ));
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": "echo child-ran > ran.txt"}),
    ));
    // After the rejection the child's next request hangs until cancelled.
    env.mock.push_json(
        json!({"chunks":[{"text":"still"},{"text":" going"}],"finish":"stop","hang_after":1}),
    );
    let sim = client_sim::ClientSim::new(false, false);
    // The user makes the parent read-only while the child's prompt is
    // open, then allows: the child follows the parent's mode, so the
    // command runs in the read-only sandbox.
    sim.answer(client_sim::Answer::SwitchModeThenSelect(
        "read-only".into(),
        agent_client_protocol::v1::schema::PermissionOptionKind::AllowOnce,
    ));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&cwd).await;
    let prompt = conn.send_prompt(&session, "run the tests in a subagent");

    // The child's command is asked about on the parent's call, labelled.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while sim.asked().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no permission prompt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    {
        let asked = sim.permission_requests.lock().unwrap();
        let request = &asked[0];
        assert_eq!(request.tool_call.tool_call_id.0.as_ref(), "d1");
        let title = request.tool_call.fields.title.clone().unwrap_or_default();
        assert!(title.starts_with("Subagent: Run echo child-ran"), "{title}");
        let content = serde_json::to_string(&request.tool_call.fields.content).unwrap();
        assert!(
            content.contains("Asked for the subagent's task: Run the tests"),
            "{content}"
        );
    }
    // Allowed after the switch: confined by the new mode, it wrote nothing.
    while env.mock.requests().len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the child did not go on"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!cwd.join("ran.txt").exists());
    // Cancelling the parent's turn cancels the child's.
    conn.cancel(&session);
    let response = tokio::time::timeout(Duration::from_secs(10), prompt.block_task())
        .await
        .expect("the cancel ends the prompt")
        .unwrap();
    assert_eq!(response.stop_reason, StopReason::Cancelled);
    let found = env.subagent_logs();
    assert_eq!(found.len(), 1);
    let child_log = child_events(&env, &found[0].0);
    let modes: Vec<&Value> = child_log
        .iter()
        .filter(|e| e["type"] == "session/config" && e["data"]["key"] == "mode")
        .map(|e| &e["data"]["value"])
        .collect();
    assert_eq!(
        modes.last().unwrap().as_str(),
        Some("read-only"),
        "{modes:?}"
    );
    let confined = child_log
        .iter()
        .find(|e| e["type"] == "tool/result" && e["data"]["call_id"] == "b1")
        .unwrap();
    let output = confined["data"]["output"].as_str().unwrap();
    assert!(
        output.contains("file access denied under read-only mode") || output.contains("denied"),
        "{confined}"
    );
    let ends: Vec<Value> = child_log
        .into_iter()
        .filter(|e| e["type"] == "turn/end")
        .collect();
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["data"]["stop"], "cancelled", "{ends:?}");
    let result = env
        .log_events(&session)
        .into_iter()
        .find(|e| e["type"] == "tool/result" && e["data"]["call_id"] == "d1")
        .expect("the subagent's call is answered");
    assert_eq!(result["data"]["status"], "failed", "{result}");
    assert_eq!(result["data"]["error"]["code"], "tool.aborted", "{result}");
    conn.finish().await;
}

#[tokio::test]
async fn a_background_subagent_is_a_job_read_with_job_output() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    env.mock.push_json(call(
        "d1",
        "subagent",
        json!({"description": "Look around", "prompt": "CHILD-TASK", "run_in_background": true}),
    ));
    // The child's request and the parent's next one race: both are
    // answered by echoing their last user message.
    env.mock
        .push_json(json!({"echo_chunks": 1, "finish": "stop"}));
    env.mock
        .push_json(json!({"echo_chunks": 1, "finish": "stop"}));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    let response = conn
        .prompt(&session, "look around in the background")
        .await
        .unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let started = tool_result(&env, "d1");
    assert!(started.contains("background job j1"), "{started}");

    // The job ends; its end is logged with the child's tokens.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let end = loop {
        if let Some(end) = env
            .log_events(&session)
            .into_iter()
            .find(|e| e["type"] == "job/end")
        {
            break end;
        }
        assert!(std::time::Instant::now() < deadline, "no job/end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(end["data"]["status"], "done", "{end}");
    assert_eq!(end["data"]["call_id"], "d1", "{end}");

    // job_output returns its answer.
    env.mock.push_json(call(
        "o1",
        "job_output",
        json!({"job_id": "j1", "wait": true}),
    ));
    env.mock.push_json(reply("The child said CHILD-TASK."));
    conn.prompt(&session, "what did it find?").await.unwrap();
    let output = tool_result(&env, "o1");
    assert!(output.contains("CHILD-TASK"), "{output}");
    assert!(output.contains("[status: done]"), "{output}");
    conn.finish().await;
}

#[tokio::test]
async fn a_client_with_subagent_sessions_gets_the_child_as_a_session_of_its_own() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    env.mock.push_json(call(
        "d1",
        "subagent",
        json!({"description": "Check hello", "prompt": "Read hello.txt."}),
    ));
    env.mock
        .push_json(call("r1", "read", json!({"file_path": "hello.txt"})));
    env.mock.push_json(reply("It says hello."));
    env.mock
        .push_json(reply("It says hello, says the subagent."));
    let conn = env
        .connect_with(client_sim::ClientSim::with_subagents())
        .await;
    let session = conn.start(&cwd).await;
    conn.prompt(&session, "what does hello.txt say?")
        .await
        .unwrap();
    let (child, _) = env.subagent_logs().pop().expect("a child log");
    let updates = conn.updates();
    // Announced on the parent, running, then idle.
    let announced: Vec<Value> = updates
        .iter()
        .filter(|n| n.session_id == session)
        .filter_map(|n| match &n.update {
            SessionUpdate::SubagentUpdate(update) => Some(serde_json::to_value(update).unwrap()),
            _ => None,
        })
        .collect();
    assert_eq!(announced.len(), 2, "{announced:#?}");
    assert_eq!(announced[0]["sessionId"], child.as_str());
    assert_eq!(announced[0]["title"], "Check hello");
    assert_eq!(announced[0]["state"]["state"], "running", "{announced:#?}");
    assert_eq!(announced[1]["state"]["state"], "idle", "{announced:#?}");
    // Its own updates under its own id: its call and its reply.
    let own: Vec<&SessionNotification> = updates
        .iter()
        .filter(|n| n.session_id.0.as_ref() == child.as_str())
        .collect();
    assert!(
        own.iter().any(|n| matches!(&n.update,
            SessionUpdate::ToolCall(tool) if tool.tool_call_id.0.as_ref() == "r1")),
        "{own:#?}"
    );
    let owned: Vec<SessionNotification> = own.into_iter().cloned().collect();
    assert!(chunk_text(&owned, false).contains("It says hello."));
    // While it runs, the parent's call carries no lines of the child's
    // steps (its final view, which a load replays, sums them up); its
    // result is the answer.
    let texts = call_texts(&updates, "d1");
    assert!(
        !texts.iter().any(|(status, text)| {
            *status == Some(ToolCallStatus::InProgress) && text.contains("- Read hello.txt")
        }),
        "{texts:#?}"
    );
    assert_eq!(tool_result(&env, "d1"), "It says hello.");
    conn.finish().await;
}

/// The parent's web switch turned off while its subagent runs reaches the
/// child: the child's next request has no web tools.
#[tokio::test]
async fn a_running_childs_web_follows_its_parents_switch() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    std::fs::write(cwd.join("a.txt"), "A\n").unwrap();
    env.mock.push_json(call(
        "d1",
        "subagent",
        json!({"description": "Look", "prompt": "Read a.txt."}),
    ));
    // The child's first step streams slowly, then reads the file.
    env.mock.push_json(json!({"chunks":[
        {"text":"Reading"},{"text":" it"},{"text":" now."},
        {"tool_call":{"index":0,"id":"r1","name":"read","arguments":"{\"file_path\":\"a.txt\"}"}}
    ],"finish":"tool_calls","delay_ms":300}));
    env.mock.push_json(reply("It says A."));
    env.mock.push_json(reply("Done."));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    let prompt = conn.send_prompt(&session, "look in a subagent");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while env.mock.requests().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the child did not ask"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    conn.cx
        .send_request(
            agent_client_protocol::v1::schema::SetSessionConfigOptionRequest::new(
                session.clone(),
                "web",
                "off",
            ),
        )
        .block_task()
        .await
        .unwrap();
    prompt.block_task().await.unwrap();
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 4);
    assert!(tool_names(&requests[1]).contains(&"web_fetch".to_owned()));
    let after = tool_names(&requests[2]);
    assert!(after.contains(&"read".to_owned()), "{after:?}");
    assert!(
        !after.iter().any(|name| name.starts_with("web_")),
        "{after:?}"
    );
    conn.finish().await;
}
