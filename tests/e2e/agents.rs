//! Continuable children: a background subagent stays after its answer,
//! takes messages (each a turn of its own, its answer a job end of the
//! parent's), is listed, interrupted without being lost, and closed with
//! its parent; subagents nest to `[subagents] max_depth` (3).

use std::time::Duration;

use agent_client_protocol::v1::schema::{CloseSessionRequest, SessionId, StopReason};
use serde_json::{json, Value};

use crate::support::*;

/// Waits until the session's log holds `count` `job/end` events.
async fn job_ends(env: &TestEnv, session: &SessionId, count: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let ends: Vec<Value> = env
            .log_events(session)
            .into_iter()
            .filter(|e| e["type"] == "job/end")
            .collect();
        if ends.len() >= count {
            return ends;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{count} job ends expected, {} came: {ends:#?}",
            ends.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the mock model has received `count` requests.
async fn requests(env: &TestEnv, count: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let requests = env.mock.requests();
        if requests.len() >= count {
            return requests;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{count} model requests expected, {} came",
            requests.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The last user message's text of a model request.
fn last_user(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(message_text)
        .unwrap_or_default()
}

/// Two requests race (the child's and the parent's next step): both are
/// answered by echoing their last user message, 40 + 3 tokens each.
fn push_two_echoes(env: &TestEnv) {
    for _ in 0..2 {
        env.mock.push_json(json!({"echo_chunks": 1, "finish": "stop", "usage": {"prompt_tokens": 40, "completion_tokens": 3}}));
    }
}

/// Two racing requests that hang until their connection is let go.
fn push_two_hangs(env: &TestEnv) {
    for _ in 0..2 {
        env.mock.push_json(
            json!({"chunks": [{"text": "working"}, {"text": " on it"}], "finish": "stop", "hang_after": 1}),
        );
    }
}

#[tokio::test]
async fn a_background_child_stays_takes_messages_is_interrupted_and_closes_with_its_parent() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    env.mock.push_json(call(
        "d1",
        "subagent",
        json!({"description": "Keep watch", "prompt": "CHILD-TASK", "run_in_background": true}),
    ));
    push_two_echoes(&env);
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    conn.prompt(&session, "start a helper").await.unwrap();

    // The result names the agent: the child's session id.
    let found = env.subagent_logs();
    assert_eq!(found.len(), 1, "{found:?}");
    let child = found[0].0.clone();
    let started = tool_result(&env, "d1");
    assert!(started.contains("background job j1"), "{started}");
    assert!(started.contains(&format!("Agent id: {child}")), "{started}");
    // Its task's answer ends job j1.
    let ends = job_ends(&env, &session, 1).await;
    assert_eq!(ends[0]["data"]["call_id"], "d1", "{ends:#?}");
    assert_eq!(ends[0]["data"]["status"], "done", "{ends:#?}");
    assert!(
        ends[0]["data"].to_string().contains("CHILD-TASK"),
        "{ends:#?}"
    );
    // The parent is offered the controls; the child (no background jobs
    // of its own) may start foreground children only.
    let first = env.mock.requests();
    let parent_tools = tool_names(&first[0]);
    for tool in [
        "send_message",
        "list_agents",
        "interrupt_agent",
        "list_subagent_models",
    ] {
        assert!(parent_tools.contains(&tool.to_owned()), "{parent_tools:?}");
    }
    let child_request = first
        .iter()
        .find(|r| last_user(r).contains("CHILD-TASK"))
        .expect("the child's request");
    let child_tools = tool_names(child_request);
    assert!(
        child_tools.contains(&"subagent".to_owned()),
        "{child_tools:?}"
    );
    assert!(
        !child_tools.contains(&"send_message".to_owned()),
        "{child_tools:?}"
    );

    // Two messages: each starts a turn of the child, and each answer is a
    // job end of the parent's.
    for (n, message) in [(2, "FIRST-MESSAGE"), (3, "SECOND-MESSAGE")] {
        let call_id = format!("m{n}");
        env.mock.push_json(call(
            &call_id,
            "send_message",
            json!({"agent_id": child, "message": message}),
        ));
        push_two_echoes(&env);
        conn.prompt(&session, "tell it more").await.unwrap();
        let delivered = tool_result(&env, &call_id);
        assert!(
            delivered.contains(&format!("started its turn as background job j{n}")),
            "{delivered}"
        );
        let ends = job_ends(&env, &session, n).await;
        let end = &ends[n - 1]["data"];
        assert_eq!(end["call_id"], call_id.as_str(), "{end}");
        assert_eq!(end["status"], "done", "{end}");
        assert!(end.to_string().contains(message), "{end}");
        // The turn's tokens, counted in the parent's cost.
        assert_eq!(end["usage"]["input_tokens"], 40, "{end}");
        assert_eq!(end["usage"]["output_tokens"], 3, "{end}");
    }
    // The second message's turn carried on the child's conversation.
    let second = env
        .mock
        .requests()
        .into_iter()
        .find(|r| last_user(r).contains("SECOND-MESSAGE"))
        .expect("the child's second message");
    let conversation = second["messages"].to_string();
    assert!(
        conversation.contains("CHILD-TASK") && conversation.contains("FIRST-MESSAGE"),
        "{conversation}"
    );
    // Listed, idle, with its last answer.
    env.mock.push_json(call("l1", "list_agents", json!({})));
    env.mock.push_json(reply("It is idle."));
    conn.prompt(&session, "what runs?").await.unwrap();
    let listed = tool_result(&env, "l1");
    assert!(
        listed.contains(&format!(
            "- {child} (idle, depth 1): Keep watch — last answer: "
        )),
        "{listed}"
    );
    assert!(listed.contains("SECOND-MESSAGE"), "{listed}");

    // A third message whose turn hangs: the child is running.
    env.mock.push_json(call(
        "m4",
        "send_message",
        json!({"agent_id": child, "message": "THIRD-MESSAGE"}),
    ));
    push_two_hangs(&env);
    let before = env.mock.requests().len();
    let prompt = conn.send_prompt(&session, "one more");
    requests(&env, before + 3).await;
    conn.cancel(&session);
    let response = tokio::time::timeout(Duration::from_secs(10), prompt.block_task())
        .await
        .expect("the cancel ends the prompt")
        .unwrap();
    assert_eq!(response.stop_reason, StopReason::Cancelled);
    // The parent's cancel left the child's turn running: listed as such,
    // then interrupted; it stays, idle.
    env.mock
        .push_json(call("l2", "list_agents", json!({"scope": "descendants"})));
    env.mock
        .push_json(call("i1", "interrupt_agent", json!({"agent_id": child})));
    env.mock.push_json(reply("Stopped it."));
    conn.prompt(&session, "stop it").await.unwrap();
    let listed = tool_result(&env, "l2");
    assert!(
        listed.contains(&format!(
            "- {child} (running, depth 1, parent {}): Keep watch",
            session.0
        )),
        "{listed}"
    );
    let interrupted = tool_result(&env, "i1");
    assert!(
        interrupted.contains(&format!(
            "Asked agent {child} to stop its current turn (job j4)"
        )),
        "{interrupted}"
    );
    let ends = job_ends(&env, &session, 4).await;
    let end = &ends[3]["data"];
    assert_eq!(end["call_id"], "m4", "{end}");
    assert_eq!(end["status"], "killed", "{end}");
    assert!(
        end.to_string().contains("interrupted with interrupt_agent"),
        "{end}"
    );
    let child_ends: Vec<Value> = env
        .log_events(&SessionId::new(child.as_str()))
        .into_iter()
        .filter(|e| e["type"] == "turn/end")
        .collect();
    assert_eq!(child_ends.len(), 4, "{child_ends:#?}");
    assert_eq!(
        child_ends[3]["data"]["stop"], "cancelled",
        "{child_ends:#?}"
    );

    // Still listed, idle; a message to an id that is not a child is
    // refused with the valid ids.
    env.mock.push_json(call("l3", "list_agents", json!({})));
    env.mock.push_json(call(
        "u1",
        "send_message",
        json!({"agent_id": "not-a-child", "message": "hello"}),
    ));
    env.mock.push_json(reply("Noted."));
    conn.prompt(&session, "and now?").await.unwrap();
    let listed = tool_result(&env, "l3");
    assert!(
        listed.contains(&format!("- {child} (idle, depth 1)")),
        "{listed}"
    );
    let refused = tool_result(&env, "u1");
    assert!(
        refused.contains("\"not-a-child\" is not one of your continuable children")
            && refused.contains(&format!("the valid ids: {child}")),
        "{refused}"
    );

    // Closing the parent while the child works closes the child: its
    // turn ends cancelled, its request is let go, its log is free.
    env.mock.push_json(call(
        "m5",
        "send_message",
        json!({"agent_id": child, "message": "FOURTH-MESSAGE"}),
    ));
    push_two_hangs(&env);
    let before = env.mock.requests().len();
    let let_go = env.mock.let_go();
    let prompt = conn.send_prompt(&session, "last one");
    requests(&env, before + 3).await;
    conn.cx
        .send_request(CloseSessionRequest::new(session.clone()))
        .block_task()
        .await
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), prompt.block_task())
        .await
        .expect("the close ends the prompt")
        .unwrap();
    assert_eq!(response.stop_reason, StopReason::Cancelled);
    let ends = job_ends(&env, &session, 5).await;
    assert_eq!(ends[4]["data"]["call_id"], "m5", "{ends:#?}");
    assert_eq!(ends[4]["data"]["status"], "killed", "{ends:#?}");
    let child_ends: Vec<Value> = env
        .log_events(&SessionId::new(child.as_str()))
        .into_iter()
        .filter(|e| e["type"] == "turn/end")
        .collect();
    assert_eq!(child_ends.len(), 5, "{child_ends:#?}");
    assert_eq!(
        child_ends[4]["data"]["stop"], "cancelled",
        "{child_ends:#?}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while env.mock.let_go() < let_go + 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the hung requests were not let go"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Its log is no longer held: it loads.
    conn.load(&SessionId::new(child.as_str()), &cwd).await;
    conn.finish().await;
}

/// `[subagents] max_depth` is 3: a grandchild starts a great-grandchild,
/// which is offered no `subagent` (nor `list_subagent_models`).
#[tokio::test]
async fn subagents_nest_three_deep() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    for (id, level) in [
        ("d1", "CHILD"),
        ("d2", "GRANDCHILD"),
        ("d3", "GREAT-GRANDCHILD"),
    ] {
        env.mock.push_json(call(
            id,
            "subagent",
            json!({"description": format!("Go {level}"), "prompt": format!("{level}-TASK")}),
        ));
    }
    env.mock.push_json(reply("deepest answer"));
    env.mock.push_json(reply("grandchild answer"));
    env.mock.push_json(reply("child answer"));
    env.mock.push_json(reply("parent answer"));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    let response = conn.prompt(&session, "go deep").await.unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 7, "{requests:#?}");
    for (depth, request) in requests.iter().take(3).enumerate() {
        let tools = tool_names(request);
        assert!(
            tools.contains(&"subagent".to_owned()),
            "depth {depth}: {tools:?}"
        );
        assert!(
            tools.contains(&"list_subagent_models".to_owned()),
            "depth {depth}: {tools:?}"
        );
    }
    assert!(last_user(&requests[3]).contains("GREAT-GRANDCHILD-TASK"));
    let deepest = tool_names(&requests[3]);
    assert!(!deepest.contains(&"subagent".to_owned()), "{deepest:?}");
    assert!(
        !deepest.contains(&"list_subagent_models".to_owned()),
        "{deepest:?}"
    );
    let mut depths: Vec<u64> = env
        .subagent_logs()
        .iter()
        .map(|(_, header)| header["subagent_of"]["depth"].as_u64().unwrap())
        .collect();
    depths.sort_unstable();
    assert_eq!(depths, [1, 2, 3]);
    assert_eq!(tool_result(&env, "d1"), "child answer");
    conn.finish().await;
}

/// `max_depth = 0` turns subagents off: no `subagent`, no controls.
#[tokio::test]
async fn max_depth_zero_offers_no_subagents() {
    let env = TestEnv::with_config("[subagents]\nmax_depth = 0\n").await;
    env.mock.push_json(reply("alone"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "hi").await.unwrap();
    let tools = tool_names(&env.mock.requests()[0]);
    assert!(!tools.is_empty());
    for tool in [
        "subagent",
        "send_message",
        "list_agents",
        "list_subagent_models",
    ] {
        assert!(!tools.contains(&tool.to_owned()), "{tools:?}");
    }
    conn.finish().await;
}

/// A background child whose task's turn runs a command that waits until
/// the test opens `gate` in the workspace: the parent, its session and the
/// child's id.
async fn start_a_waiting_child(env: &TestEnv) -> (Conn, SessionId, String) {
    let cwd = env.cwd();
    let wait = json!({"command": "while [ ! -e gate ]; do sleep 0.05; done; echo through", "description": "Wait for the gate"});
    env.mock.push_json(call(
        "d1",
        "subagent",
        json!({"description": "Wait", "prompt": "CHILD-TASK", "run_in_background": true}),
    ));
    // The parent's next step and the child's first race: both wait; the
    // parent's is cancelled, the child's holds its turn open.
    env.mock.push_json(call("g1", "bash", wait.clone()));
    env.mock.push_json(call("g1", "bash", wait));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    conn.set_mode(&session, "full-access").await;
    let prompt = conn.send_prompt(&session, "start it");
    requests(env, 3).await;
    conn.cancel(&session);
    let response = tokio::time::timeout(Duration::from_secs(10), prompt.block_task())
        .await
        .expect("the cancel ends the prompt")
        .unwrap();
    assert_eq!(response.stop_reason, StopReason::Cancelled);
    let child = env.subagent_logs().pop().expect("the child").0;
    (conn, session, child)
}

/// A message to a child that works joins its running turn at its next
/// step: no new turn, no new job; that turn's job ends with the answer.
#[tokio::test]
async fn a_message_to_a_working_child_steers_its_running_turn() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    let (conn, session, child) = start_a_waiting_child(&env).await;

    env.mock.push_json(call(
        "m1",
        "send_message",
        json!({"agent_id": child, "message": "STEERED-MESSAGE"}),
    ));
    env.mock.push_json(reply("Sent."));
    conn.prompt(&session, "tell it").await.unwrap();
    let delivered = tool_result(&env, "m1");
    assert!(
        delivered
            .contains("is working; the message joins its running turn at its next step (job j1)"),
        "{delivered}"
    );
    // The gate opens: the child's step ends and it takes the message in.
    env.mock.push_json(reply("ANSWER-AFTER-STEER"));
    std::fs::write(cwd.join("gate"), "").unwrap();
    let ends = job_ends(&env, &session, 1).await;
    assert_eq!(ends.len(), 1, "{ends:#?}");
    assert_eq!(ends[0]["data"]["call_id"], "d1", "{ends:#?}");
    assert_eq!(ends[0]["data"]["status"], "done", "{ends:#?}");
    assert!(
        ends[0]["data"].to_string().contains("ANSWER-AFTER-STEER"),
        "{ends:#?}"
    );
    let child_log = env.log_events(&SessionId::new(child.as_str()));
    let steered: Vec<&Value> = child_log
        .iter()
        .filter(|e| e["type"] == "user/message" && e["data"]["steered"] == true)
        .collect();
    assert_eq!(steered.len(), 1, "{child_log:#?}");
    assert!(steered[0].to_string().contains("STEERED-MESSAGE"));
    let turns = child_log.iter().filter(|e| e["type"] == "turn/end").count();
    assert_eq!(turns, 1, "one turn took both: {child_log:#?}");
    let last = env.mock.requests().pop().unwrap();
    assert!(last_user(&last).contains("STEERED-MESSAGE"), "{last}");
    conn.finish().await;
}

/// A message queued for a child whose turn is then interrupted is held,
/// not run: it opens the turn of the next message.
#[tokio::test]
async fn a_message_queued_before_an_interrupt_waits_for_the_next_one() {
    let env = TestEnv::new().await;
    let (conn, session, child) = start_a_waiting_child(&env).await;
    env.mock.push_json(calls(&[
        (
            "m1",
            "send_message",
            json!({"agent_id": child, "message": "QUEUED-MESSAGE"}),
        ),
        ("i1", "interrupt_agent", json!({"agent_id": child})),
    ]));
    env.mock.push_json(reply("Stopped."));
    conn.prompt(&session, "queue, then stop it").await.unwrap();
    assert!(tool_result(&env, "m1").contains("joins its running turn"));
    assert!(tool_result(&env, "i1").contains("(job j1)"));
    let ends = job_ends(&env, &session, 1).await;
    assert_eq!(ends[0]["data"]["status"], "killed", "{ends:#?}");

    let queued = tool_result(&env, "m1");
    assert!(
        queued.starts_with("Queued: agent")
            && queued.contains("If it is interrupted first")
            && queued.contains("the message is held instead"),
        "{queued}"
    );
    // Held, and listed as held.
    env.mock.push_json(call("l1", "list_agents", json!({})));
    env.mock.push_json(reply("Listed."));
    conn.prompt(&session, "list them").await.unwrap();
    let listed = tool_result(&env, "l1");
    assert!(listed.contains("1 message held for it"), "{listed}");

    // The next message's turn carries both; no turn ran in between.
    env.mock.push_json(call(
        "m2",
        "send_message",
        json!({"agent_id": child, "message": "NEXT-MESSAGE"}),
    ));
    push_two_echoes(&env);
    conn.prompt(&session, "go on").await.unwrap();
    let delivered = tool_result(&env, "m2");
    assert!(
        delivered.contains("Delivered (after the message held since its interrupt): agent")
            && delivered.contains("was idle, so the message started its turn as background job j2"),
        "{delivered}"
    );
    let ends = job_ends(&env, &session, 2).await;
    let answer = ends[1]["data"].to_string();
    assert!(
        answer.contains("QUEUED-MESSAGE") && answer.contains("NEXT-MESSAGE"),
        "{answer}"
    );
    let turns = env
        .log_events(&SessionId::new(child.as_str()))
        .into_iter()
        .filter(|e| e["type"] == "turn/end")
        .count();
    assert_eq!(turns, 2);
    conn.finish().await;
}

/// Past `[subagents] max_kept` a new background child closes the oldest
/// idle one: the result says so, and it is gone from `list_agents`.
#[tokio::test]
async fn past_max_kept_a_new_child_closes_the_oldest_idle_one() {
    let env = TestEnv::with_config("[subagents]\nmax_kept = 1\n").await;
    let cwd = env.cwd();
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    for (n, task) in [(1, "CHILD-ONE"), (2, "CHILD-TWO")] {
        env.mock.push_json(call(
            &format!("d{n}"),
            "subagent",
            json!({"description": format!("Helper {n}"), "prompt": task, "run_in_background": true}),
        ));
        push_two_echoes(&env);
        conn.prompt(&session, "start a helper").await.unwrap();
        // Its answer ends its job: it is idle.
        job_ends(&env, &session, n).await;
    }
    let found = env.subagent_logs();
    let first = found
        .iter()
        .find(|(_, header)| header.to_string().contains("Helper 1"))
        .expect("the first child")
        .0
        .clone();
    let second = found
        .iter()
        .find(|(_, header)| header.to_string().contains("Helper 2"))
        .expect("the second child")
        .0
        .clone();
    let started = tool_result(&env, "d2");
    assert!(
        started.contains(&format!(
            "Agent {first} (\"Helper 1\") was closed to make room"
        )) && started.contains("max_kept"),
        "{started}"
    );
    env.mock.push_json(call("l1", "list_agents", json!({})));
    env.mock.push_json(reply("Listed."));
    conn.prompt(&session, "list them").await.unwrap();
    let listed = tool_result(&env, "l1");
    assert!(
        listed.contains(&second) && !listed.contains(&first),
        "{listed}"
    );
    conn.finish().await;
}
