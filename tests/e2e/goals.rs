//! Goals: `create_goal`/`update_goal` and `/goal`, and the goal rounds
//! that run inside the prompt that created or resumed the goal — over ACP
//! and in `dsh run` — with the scripted model.

use std::time::Duration;

use agent_client_protocol::v1::schema::{ListSessionsRequest, StopReason};
use serde_json::{json, Value};

use crate::support::*;

/// `[goals]` with this default cap.
fn goals(max: u32) -> String {
    format!("[goals]\nmax_goal_rounds = {max}\n")
}

/// The log's events of this type.
fn of_type(events: &[Value], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|event| event["type"] == kind)
        .cloned()
        .collect()
}

/// The user messages dsh sent for goal rounds.
fn round_messages(events: &[Value]) -> Vec<Value> {
    of_type(events, "user/message")
        .into_iter()
        .filter(|event| event["data"]["source"] == "goal")
        .collect()
}

/// The `goal/change`s' kinds, in order.
fn changes(events: &[Value]) -> Vec<String> {
    of_type(events, "goal/change")
        .iter()
        .map(|event| event["data"]["change"].as_str().unwrap().to_owned())
        .collect()
}

/// The last user message of a model request.
fn last_user(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .map(message_text)
        .unwrap_or_default()
}

#[tokio::test]
async fn a_goal_runs_at_most_its_rounds_inside_the_prompt_that_created_it() {
    let env = TestEnv::with_config(&goals(2)).await;
    env.mock.push_json(call(
        "g1",
        "create_goal",
        json!({"objective": "make the README shine"}),
    ));
    env.mock.push_json(reply("I set the goal."));
    env.mock.push_json(reply("Round one done."));
    env.mock.push_json(reply("Round two done."));
    // Never asked for: the cap is two rounds.
    env.mock.push_json(reply("A third round."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    let stop = conn
        .prompt(&session, "keep polishing the README until it shines")
        .await
        .unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    // The creating turn (two calls) and two rounds, one request each.
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    assert_eq!(env.mock.pending(), 1);
    assert!(tool_names(&requests[0]).contains(&"create_goal".to_owned()));
    assert!(
        last_user(&requests[2]).starts_with("[Goal round 1 of 2]"),
        "{}",
        last_user(&requests[2])
    );
    assert!(last_user(&requests[3]).starts_with("[Goal round 2 of 2]"));
    assert!(last_user(&requests[3]).contains("make the README shine"));
    let events = env.log_events(&session);
    assert_eq!(round_messages(&events).len(), 2);
    assert_eq!(changes(&events), ["created", "round", "round"]);
    let last = of_type(&events, "goal/change").pop().unwrap();
    assert_eq!(last["data"]["goal"]["rounds_used"], 2);
    assert_eq!(last["data"]["goal"]["phase"], "active");
    // Each round is marked where the editor sees it, and why they stopped.
    let text = chunk_text(&conn.updates(), false);
    let one = text.find("Goal round 1/2").expect(&text);
    let two = text.find("Goal round 2/2").expect(&text);
    assert!(one < two && text.contains("Round two done."), "{text}");
    assert!(text.contains("all its 2 rounds were used"), "{text}");
    // The continuation is not shown as if the person typed it.
    assert!(!text.contains("[Goal round"), "{text}");
    conn.finish().await;
}

#[tokio::test]
async fn completing_the_goal_in_a_round_stops_the_rounds() {
    let env = TestEnv::with_config(&goals(5)).await;
    env.mock.push_json(call(
        "g1",
        "create_goal",
        json!({"objective": "fix the bug"}),
    ));
    env.mock.push_json(reply("Goal set."));
    // Round 1 (revision 2: created, then counted).
    env.mock.push_json(call(
        "u1",
        "update_goal",
        json!({"goal_id": "goal-1", "revision": 2, "action": "complete"}),
    ));
    env.mock.push_json(reply("Fixed and checked."));
    env.mock.push_json(reply("Never asked for."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    let stop = conn.prompt(&session, "fix the bug for good").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    assert_eq!(env.mock.requests().len(), 4);
    assert_eq!(env.mock.pending(), 1);
    let result = tool_result(&env, "u1");
    assert!(result.contains("marked complete"), "{result}");
    let events = env.log_events(&session);
    assert_eq!(changes(&events), ["created", "round", "completed"]);
    assert_eq!(round_messages(&events).len(), 1);
    assert!(chunk_text(&conn.updates(), false).contains("Goal complete"));
    conn.finish().await;
}

#[tokio::test]
async fn a_round_may_not_block_before_three_rounds_nor_pause_the_goal() {
    let env = TestEnv::with_config(&goals(2)).await;
    env.mock
        .push_json(call("g1", "create_goal", json!({"objective": "ship 1.0"})));
    env.mock.push_json(reply("Goal set."));
    env.mock.push_json(calls(&[
        (
            "b1",
            "update_goal",
            json!({"goal_id": "goal-1", "revision": 2, "action": "blocked", "blocked_reason": "CI is down"}),
        ),
        (
            "p1",
            "update_goal",
            json!({"goal_id": "goal-1", "revision": 2, "action": "pause"}),
        ),
        (
            "s1",
            "update_goal",
            json!({"goal_id": "goal-1", "revision": 1, "action": "complete"}),
        ),
    ]));
    env.mock.push_json(reply("Still on it."));
    env.mock.push_json(reply("Round two."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    let stop = conn.prompt(&session, "ship 1.0").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    let blocked = tool_result(&env, "b1");
    assert!(
        blocked.contains("after 3 goal rounds") && blocked.contains("1 ran"),
        "{blocked}"
    );
    assert!(tool_result(&env, "p1").contains("Only the person"));
    let stale = tool_result(&env, "s1");
    assert!(stale.contains("goal-1 at revision 2"), "{stale}");
    // Nothing changed the goal but the rounds; both ran.
    let events = env.log_events(&session);
    assert_eq!(changes(&events), ["created", "round", "round"]);
    assert_eq!(env.mock.requests().len(), 5);
    conn.finish().await;
}

#[tokio::test]
async fn cancel_stops_the_rounds_at_once_and_goal_pause_and_resume_drive_them() {
    let env = TestEnv::with_config(&goals(3)).await;
    env.mock.push_json(call(
        "g1",
        "create_goal",
        json!({"objective": "tidy the repo"}),
    ));
    env.mock.push_json(reply("Goal set."));
    // Round 1 hangs mid-reply.
    env.mock.push_json(
        json!({"chunks":[{"text":"tidying"},{"text":" more"}],"finish":"stop","hang_after":1}),
    );
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    let prompt = conn.send_prompt(&session, "tidy the repo, all of it");
    conn.wait_for("round 1 streaming", |updates| {
        chunk_text(updates, false).contains("tidying")
    })
    .await;
    conn.cancel(&session);
    let response = prompt.block_task().await.unwrap();
    assert_eq!(response.stop_reason, StopReason::Cancelled);
    // The rounds stopped: no request after the one cancelled.
    assert_eq!(env.mock.requests().len(), 3);
    let events = env.log_events(&session);
    assert_eq!(changes(&events), ["created", "round"]);
    assert!(
        chunk_text(&conn.updates(), false).contains("Goal rounds stopped: the turn was cancelled")
    );

    // A prompt of the person's own: no round follows a cancel.
    env.mock.push_json(reply("Hello."));
    let stop = conn.prompt(&session, "hello").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    assert_eq!(env.mock.requests().len(), 4);

    // `/goal pause`, `/goal` shows it; then `/goal resume` runs the two
    // rounds left inside its own prompt.
    conn.clear_updates();
    conn.prompt(&session, "/goal pause").await.unwrap();
    conn.prompt(&session, "/goal").await.unwrap();
    let text = chunk_text(&conn.updates(), false);
    assert!(
        text.contains("Goal paused") && text.contains("Phase: paused; rounds used: 1 of 3"),
        "{text}"
    );
    assert_eq!(env.mock.requests().len(), 4);
    env.mock.push_json(reply("Round two."));
    env.mock.push_json(reply("Round three."));
    let stop = conn.prompt(&session, "/goal resume").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    assert_eq!(env.mock.requests().len(), 6);
    let events = env.log_events(&session);
    assert_eq!(
        changes(&events),
        ["created", "round", "paused", "resumed", "round", "round"]
    );
    assert_eq!(round_messages(&events).len(), 3);
    // `/goal clear` leaves a tombstone; `/goal` then says there is none.
    conn.clear_updates();
    conn.prompt(&session, "/goal clear").await.unwrap();
    conn.prompt(&session, "/goal").await.unwrap();
    assert!(chunk_text(&conn.updates(), false).contains("no goal"));
    assert_eq!(
        changes(&env.log_events(&session)).last().unwrap(),
        "cleared"
    );
    conn.finish().await;
}

#[tokio::test]
async fn a_loaded_session_shows_its_goal_and_waits_for_the_persons_resume() {
    let env = TestEnv::with_config(&goals(3)).await;
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    // `/goal <objective>` sets it as the person; round 1 follows at once.
    env.mock.push_json(
        json!({"chunks":[{"text":"first"},{"text":" pass"}],"finish":"stop","hang_after":1}),
    );
    let prompt = conn.send_prompt(&session, "/goal translate the docs");
    conn.wait_for("round 1", |u| chunk_text(u, false).contains("first"))
        .await;
    conn.cancel(&session);
    prompt.block_task().await.unwrap();
    conn.finish().await;
    let before = env.mock.requests().len();
    assert_eq!(before, 1);

    // Another process: the goal is listed and replayed, and no round runs
    // until the person resumes it.
    let conn = env.connect().await;
    conn.initialize().await;
    let listed = conn
        .cx
        .send_request(ListSessionsRequest::new())
        .block_task()
        .await
        .unwrap();
    let info = listed
        .sessions
        .iter()
        .find(|info| info.session_id == session)
        .unwrap();
    let goal = &info.meta.as_ref().expect("_meta")["dsh"]["goal"];
    assert_eq!(goal["objective"], "translate the docs");
    assert_eq!(goal["phase"], "active");
    assert_eq!(goal["rounds_used"], 1);
    conn.load(&session, &env.cwd()).await;
    let replayed = chunk_text(&conn.updates(), false);
    assert!(
        replayed.contains("Goal set") && replayed.contains("Goal round 1/3"),
        "{replayed}"
    );
    assert!(!replayed.contains("[Goal round"), "{replayed}");
    env.mock.push_json(reply("Hi."));
    conn.prompt(&session, "hi").await.unwrap();
    assert_eq!(env.mock.requests().len(), before + 1);
    conn.clear_updates();
    conn.prompt(&session, "/goal").await.unwrap();
    assert!(chunk_text(&conn.updates(), false).contains("until you `/goal resume` it"));
    env.mock.push_json(reply("Second pass."));
    env.mock.push_json(reply("Third pass."));
    conn.prompt(&session, "/goal resume").await.unwrap();
    assert_eq!(env.mock.requests().len(), before + 3);
    conn.finish().await;

    // `dsh sessions list` names it too.
    let output = env.dsh(&["sessions", "list"]).output().await.unwrap();
    let listed = text(&output.stdout);
    assert!(
        listed.contains("goal active 3/3: translate the docs"),
        "{listed}"
    );
}

#[tokio::test]
async fn dsh_run_runs_its_goal_to_the_end_within_max_goal_rounds() {
    let env = TestEnv::new().await;
    // The model asks for nine rounds; the run allows two.
    env.mock.push_json(call(
        "g1",
        "create_goal",
        json!({"objective": "write the changelog", "max_goal_rounds": 9}),
    ));
    env.mock.push_json(reply("Goal set."));
    env.mock.push_json(reply("Round one."));
    env.mock.push_json(reply("Round two."));
    env.mock.push_json(reply("Never asked for."));
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        env.dsh(&[
            "run",
            "--max-goal-rounds",
            "2",
            "--json",
            "write the changelog",
        ])
        .output(),
    )
    .await
    .unwrap()
    .unwrap();
    // Its rounds used, the goal is not complete: exit status 3, said on
    // stderr and in the result's `goal`.
    assert_eq!(output.status.code(), Some(3), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("the goal is not complete (active, 2 of 2 rounds used)"));
    let goal = &last_json(&output)["goal"];
    assert_eq!(
        (&goal["phase"], &goal["rounds_used"], &goal["max_rounds"]),
        (&json!("active"), &json!(2), &json!(2))
    );
    assert_eq!(env.mock.requests().len(), 4);
    let events: Vec<Value> = text(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .filter(|event: &Value| event.get("type").is_some())
        .collect();
    assert_eq!(round_messages(&events).len(), 2);
    let created = &of_type(&events, "goal/change")[0];
    assert_eq!(created["data"]["goal"]["max_rounds"], 2);
    assert_eq!(last_json(&output)["text"], "Round two.");
    // Each round is marked on stderr.
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("Goal round 1/2: write the changelog") && stderr.contains("Goal round 2/2"),
        "{stderr}"
    );
    // A zero cap is a usage error.
    let output = env
        .dsh(&["run", "--max-goal-rounds", "0", "x"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[tokio::test]
async fn the_sdk_gets_a_goal_status_per_round_and_one_idle_when_they_stop() {
    use crate::support::sdk_client::SdkProcess;
    let env = TestEnv::with_config(&goals(2)).await;
    env.mock.push_json(call(
        "g1",
        "create_goal",
        json!({"objective": "port the tests"}),
    ));
    env.mock.push_json(reply("Goal set."));
    env.mock.push_json(reply("Round one."));
    env.mock.push_json(reply("Round two."));
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    client
        .ok("initialize", json!({"clientInfo": {"name": "test"}}))
        .await;
    let session = client.ok("session/new", json!({"cwd": env.cwd()})).await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let sub = client.subscribe(&session, None).await;
    let message_id = client.prompt(&session, "port the tests").await;
    let idle = client.wait_idle(&sub).await;
    assert_eq!(idle["stopReason"], "end_turn");
    assert_eq!(idle["messageId"], message_id.as_str());
    let items = client.items(&sub);
    let goal_items: Vec<(String, Value)> = items
        .iter()
        .filter(|item| item["kind"] == "goal")
        .map(|item| {
            (
                item["change"].as_str().unwrap().to_owned(),
                item["goal"]["rounds_used"].clone(),
            )
        })
        .collect();
    assert_eq!(
        goal_items,
        [
            ("created".to_owned(), json!(0)),
            ("round".to_owned(), json!(1)),
            ("round".to_owned(), json!(2))
        ]
    );
    // One prompt, one idle: the rounds ran inside it.
    let idles = items
        .iter()
        .filter(|item| {
            item["kind"] == "status" && item["status"] == "idle" && item.get("messageId").is_some()
        })
        .count();
    assert_eq!(idles, 1);
    assert_eq!(env.mock.requests().len(), 4);
    // A replay from the start has the same goal items, each after its
    // event, as the live subscriber had.
    let replay = client.subscribe(&session, Some(1)).await;
    let replayed = client
        .wait_items(&replay, "the replay", |items| {
            items.iter().any(|item| item["kind"] == "status")
        })
        .await;
    let goals_of = |items: &[Value]| -> Vec<Value> {
        items
            .iter()
            .filter(|item| item["kind"] == "goal")
            .cloned()
            .collect()
    };
    assert_eq!(goals_of(&replayed), goals_of(&items));
    assert!(sdk.exit().await.success());
}

/// A round's reply that streams its first words, then takes a while
/// (long enough for a prompt sent on seeing them to arrive meanwhile).
/// (Ten chunks 300 ms apart: under the tests' 600 ms stream idle limit.)
fn slow_reply(text: &str) -> Value {
    let mut chunks = vec![json!({"text": text})];
    chunks.extend((0..9).map(|_| json!({"text": "."})));
    json!({"chunks": chunks, "finish": "stop", "delay_ms": 300})
}

#[tokio::test]
async fn a_prompt_queued_during_the_rounds_is_answered_first_and_the_rounds_go_on_in_it() {
    let env = TestEnv::with_config(&goals(2)).await;
    env.mock.push_json(call(
        "g1",
        "create_goal",
        json!({"objective": "sort the imports"}),
    ));
    env.mock.push_json(reply("Goal set."));
    env.mock.push_json(slow_reply("Round one."));
    env.mock.push_json(reply("Hello to you."));
    env.mock.push_json(reply("Round two."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    let first = conn.send_prompt(&session, "sort the imports everywhere");
    conn.wait_for("round 1 streaming", |updates| {
        chunk_text(updates, false).contains("Round one.")
    })
    .await;
    let second = conn.send_prompt(&session, "hello there");
    // The first request is answered when its rounds give way.
    let first = first.block_task().await.unwrap();
    assert_eq!(first.stop_reason, StopReason::EndTurn);
    let second = second.block_task().await.unwrap();
    assert_eq!(second.stop_reason, StopReason::EndTurn);
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 5, "{requests:#?}");
    assert_eq!(last_user(&requests[3]), "hello there");
    assert!(last_user(&requests[4]).starts_with("[Goal round 2 of 2]"));
    let events = env.log_events(&session);
    assert_eq!(changes(&events), ["created", "round", "round"]);
    conn.finish().await;
}

#[tokio::test]
async fn the_persons_steer_during_a_round_may_pause_the_goal() {
    let env = TestEnv::with_config(&goals(3)).await;
    env.mock.push_json(call(
        "g1",
        "create_goal",
        json!({"objective": "rename the crate"}),
    ));
    env.mock.push_json(reply("Goal set."));
    env.mock.push_json(slow_reply("Renaming."));
    // After the steer, in the same round: the person asked for a pause.
    env.mock.push_json(call(
        "p1",
        "update_goal",
        json!({"goal_id": "goal-1", "revision": 2, "action": "pause"}),
    ));
    env.mock.push_json(reply("Paused."));
    env.mock.push_json(reply("Never asked for."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    let first = conn.send_prompt(&session, "rename the crate");
    conn.wait_for("round 1 streaming", |updates| {
        chunk_text(updates, false).contains("Renaming.")
    })
    .await;
    let steered = conn.steer(&session, "stop the goal for now");
    assert_eq!(
        steered.block_task().await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    first.block_task().await.unwrap();
    let result = tool_result(&env, "p1");
    assert!(result.contains("Goal paused"), "{result}");
    assert_eq!(
        changes(&env.log_events(&session)),
        ["created", "round", "paused"]
    );
    assert_eq!(env.mock.requests().len(), 5);
    assert_eq!(env.mock.pending(), 1);
    conn.finish().await;
}

#[tokio::test]
async fn goal_subcommands_ignore_case_refuse_extra_words_and_a_new_goal_replaces_an_idle_one() {
    let env = TestEnv::with_config(&goals(1)).await;
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "/goal pause the build")
        .await
        .unwrap();
    conn.prompt(&session, "/goal PAUSE").await.unwrap();
    let text = chunk_text(&conn.updates(), false);
    assert!(
        text.contains("`/goal pause` takes nothing after it"),
        "{text}"
    );
    assert!(text.contains("The session has no goal."), "{text}");
    assert!(changes(&env.log_events(&session)).is_empty());
    assert_eq!(env.mock.requests().len(), 0);
    // One round, the cap: the goal stays active, its rounds over.
    env.mock.push_json(reply("First pass."));
    conn.prompt(&session, "/goal translate the docs")
        .await
        .unwrap();
    // A new goal from the person replaces it.
    env.mock.push_json(reply("Other pass."));
    conn.prompt(&session, "/goal fix the typos").await.unwrap();
    assert_eq!(
        changes(&env.log_events(&session)),
        ["created", "round", "cleared", "created", "round"]
    );
    assert!(last_user(&env.mock.requests()[1]).contains("fix the typos"));
    conn.finish().await;
}

#[tokio::test]
async fn dsh_run_exits_0_when_its_goal_is_complete() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "g1",
        "create_goal",
        json!({"objective": "bump the version"}),
    ));
    env.mock.push_json(reply("Goal set."));
    env.mock.push_json(call(
        "u1",
        "update_goal",
        json!({"goal_id": "goal-1", "revision": 2, "action": "complete"}),
    ));
    env.mock.push_json(reply("Bumped."));
    let output = env
        .dsh(&["run", "--json", "bump the version"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(last_json(&output)["goal"]["phase"], "complete");
    // A run that sets no goal has no `goal` in its result.
    env.mock.push_json(reply("Hi."));
    let output = env.dsh(&["run", "--json", "hi"]).output().await.unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(last_json(&output).get("goal").is_none());
}

#[tokio::test]
async fn a_new_goal_is_refused_while_the_goal_runs_its_rounds_and_they_go_on() {
    let env = TestEnv::with_config(&goals(2)).await;
    env.mock.push_json(slow_reply("Round one."));
    env.mock.push_json(reply("Round two."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    let first = conn.send_prompt(&session, "/goal translate the docs");
    conn.wait_for("round 1 streaming", |updates| {
        chunk_text(updates, false).contains("Round one.")
    })
    .await;
    let second = conn.send_prompt(&session, "/goal fix the typos");
    first.block_task().await.unwrap();
    second.block_task().await.unwrap();
    let text = chunk_text(&conn.updates(), false);
    assert!(
        text.contains("still running its rounds: `/goal pause` or `/goal clear` it first"),
        "{text}"
    );
    // The refused `/goal` ran the rounds left inside its request.
    assert_eq!(
        changes(&env.log_events(&session)),
        ["created", "round", "round"]
    );
    assert_eq!(env.mock.requests().len(), 2);
    conn.finish().await;
}
