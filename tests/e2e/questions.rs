//! `ask_user_question`, with the scripted model: over ACP as one form
//! (`elicitation/create`) or, without forms, one permission prompt per
//! question; over the SDK as a `question` notice answered with
//! `session/answer`; in `dsh run` from `--answers`, or told no one is
//! there; and replayed after a reload.

use std::time::Duration;

use agent_client_protocol::v1::schema::{
    SessionId, SessionNotification, SessionUpdate, StopReason, ToolCallStatus, ToolKind,
};
use serde_json::{json, Value};

use crate::support::sdk_client::SdkProcess;
use crate::support::*;

/// One choice (with descriptions) and one free-text question.
fn two_questions() -> Value {
    json!({"questions": [
        {"id": "db", "header": "Database", "question": "Which database should the app use?",
         "options": [
            {"label": "Postgres (Recommended)", "description": "Scales past one machine."},
            {"label": "SQLite", "description": "One file, no server."}
         ]},
        {"id": "name", "question": "What should the project be called?"}
    ]})
}

/// What the model is told when the user chose SQLite and typed "acme".
const ANSWERED: &str =
    "The user's answers:\n- db: chose \"SQLite\"\n- name: answered in their own words: \"acme\"";

/// The `tool_call` and the last `tool_call_update` of `call`, as JSON.
fn shown(updates: &[SessionNotification], call: &str) -> (Value, Value) {
    let mut first = Value::Null;
    let mut last = Value::Null;
    for notification in updates {
        match &notification.update {
            SessionUpdate::ToolCall(tool_call) if tool_call.tool_call_id.0.as_ref() == call => {
                assert_eq!(tool_call.kind, ToolKind::Other);
                first = serde_json::to_value(tool_call).unwrap();
            }
            SessionUpdate::ToolCallUpdate(update)
                if update.tool_call_id.0.as_ref() == call
                    && update.fields.status == Some(ToolCallStatus::Completed) =>
            {
                last = serde_json::to_value(update).unwrap();
            }
            _ => {}
        }
    }
    (first, last)
}

/// A session in which the model asked the two questions and the user
/// answered them in a form; the last model request is the one after the
/// answers.
async fn answered_in_a_form(env: &TestEnv) -> (SessionId, std::sync::Arc<ClientSim>, Conn) {
    env.mock
        .push_json(call("q1", "ask_user_question", two_questions()));
    env.mock.push_json(reply("SQLite it is, as acme."));
    let sim = ClientSim::with_forms();
    sim.elicit(Elicit::Accept(
        json!({"db": "SQLite", "db_other": "", "name": "acme"}),
    ));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    let stop = conn.prompt(&session, "set up the app").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    (session, sim, conn)
}

#[tokio::test]
async fn a_form_asks_a_choice_and_free_text_and_the_model_gets_both_answers() {
    let env = TestEnv::new().await;
    let (session, sim, conn) = answered_in_a_form(&env).await;
    // Offered with the seeds' schema, in every mode.
    let first = &env.mock.requests()[0];
    let tool = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "ask_user_question")
        .expect("the tool is offered");
    assert_eq!(
        tool["function"]["parameters"]["properties"]["questions"]["items"]["required"],
        json!(["id", "question"])
    );
    // One form, scoped to the session and the call; no permission prompt.
    assert!(sim.asked().is_empty());
    let forms = sim.elicitations.lock().unwrap().clone();
    assert_eq!(forms.len(), 1);
    let form = serde_json::to_value(&forms[0]).unwrap();
    assert_eq!(form["mode"], "form");
    assert_eq!(form["sessionId"], session.0.as_ref());
    assert_eq!(form["toolCallId"], "q1");
    assert_eq!(
        form["message"],
        "Which database should the app use?\nWhat should the project be called?"
    );
    let fields = &form["requestedSchema"]["properties"];
    assert_eq!(fields["db"]["type"], "string");
    assert_eq!(fields["db"]["title"], "Database");
    assert_eq!(fields["db"]["oneOf"][1]["const"], "SQLite");
    assert_eq!(
        fields["db"]["oneOf"][1]["description"],
        "One file, no server."
    );
    assert_eq!(fields["db_other"]["type"], "string");
    assert_eq!(
        fields["name"],
        json!({"type": "string", "title": "What should the project be called?"})
    );
    assert!(fields.get("name_other").is_none());
    assert!(form["requestedSchema"].get("required").is_none());
    // On the wire the fields come in the questions' order.
    let frame = conn
        .recorded
        .lock()
        .unwrap()
        .frames
        .iter()
        .find(|f| f.contains("\"elicitation/create\""))
        .cloned()
        .unwrap();
    let at = |key: &str| frame.find(&format!("\"{key}\":{{")).unwrap();
    assert!(
        at("db") < at("db_other") && at("db_other") < at("name"),
        "{frame}"
    );
    // The model's next request carries the answers as the call's result.
    assert_eq!(tool_result(&env, "q1"), ANSWERED);
    // The editor saw the questions while it waited, then the answers.
    let (pending, completed) = shown(&conn.updates(), "q1");
    assert_eq!(pending["title"], "Database");
    let pending = pending["content"].to_string();
    assert!(
        pending.contains("Which database should the app use?")
            && pending.contains("SQLite — One file, no server.")
            && pending.contains("What should the project be called?"),
        "{pending}"
    );
    let completed = completed["content"].to_string();
    assert!(
        completed.contains("→ chose \\\"SQLite\\\"")
            && completed.contains("→ answered in their own words: \\\"acme\\\""),
        "{completed}"
    );
    // The answers are logged with the call.
    let events = env.log_events(&session);
    let decision = events
        .iter()
        .find(|e| e["type"] == "question/decision")
        .unwrap();
    assert_eq!(decision["ignorable"], true);
    assert_eq!(
        decision["data"],
        json!({"call_id": "q1", "outcome": "answered", "answers": [
            {"id": "db", "selected": ["SQLite"]},
            {"id": "name", "selected": [], "custom": "acme"}
        ]})
    );
    conn.finish().await;
}

#[tokio::test]
async fn a_reloaded_session_shows_the_answered_call_and_the_model_sees_the_same_history() {
    let env = TestEnv::new().await;
    let (session, _sim, conn) = answered_in_a_form(&env).await;
    let live = env.mock.requests()[1]["messages"].clone();
    conn.finish().await;
    let reloaded = env.connect().await;
    reloaded.initialize().await;
    reloaded.load(&session, &env.cwd()).await;
    let (pending, completed) = shown(&reloaded.updates(), "q1");
    assert_eq!(pending["title"], "Database");
    assert!(pending["content"]
        .to_string()
        .contains("One file, no server."));
    assert!(
        completed["content"]
            .to_string()
            .contains("→ answered in their own words: \\\"acme\\\""),
        "{completed}"
    );
    // The model's history after the reload is the live one.
    env.mock.push_json(reply("Carrying on."));
    reloaded.prompt(&session, "go on").await.unwrap();
    let after = env.mock.requests().pop().unwrap()["messages"].clone();
    let (live, after) = (live.as_array().unwrap(), after.as_array().unwrap());
    assert_eq!(after[..live.len()], live[..]);
    assert!(after[live.len()]
        .to_string()
        .contains("SQLite it is, as acme."));
    assert_eq!(after.len(), live.len() + 2);
    reloaded.finish().await;
}

#[tokio::test]
async fn without_forms_each_question_with_options_is_a_permission_prompt() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "q1",
        "ask_user_question",
        json!({"questions": [
            {"id": "db", "header": "Database", "question": "Which database?",
             "options": [{"label": "Postgres"}, {"label": "SQLite"}]},
            {"id": "extras", "question": "What else should be set up?",
             "options": [{"label": "tests"}, {"label": "docs"}], "multi_select": true},
            {"id": "style", "question": "Which style?", "options": [{"label": "terse"}]},
            {"id": "name", "question": "What should the project be called?"}
        ]}),
    ));
    env.mock.push_json(reply("Noted."));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::SelectId("option-1"));
    sim.answer(Answer::SelectId("option-0"));
    sim.answer(Answer::SelectId("skip"));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    let stop = conn.prompt(&session, "set up the app").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    // One prompt per question with options, in order; none for free text.
    assert_eq!(sim.asked(), ["q1", "q1", "q1"]);
    let requests = sim.permission_requests.lock().unwrap().clone();
    let options: Vec<String> = requests[0]
        .options
        .iter()
        .map(|o| format!("{}={}:{:?}", o.option_id.0, o.name, o.kind))
        .collect();
    assert_eq!(
        options,
        [
            "option-0=Postgres:AllowOnce",
            "option-1=SQLite:AllowOnce",
            "skip=Skip:RejectOnce"
        ]
    );
    assert_eq!(
        requests[0].tool_call.fields.title.as_deref(),
        Some("Database")
    );
    assert_eq!(
        requests[1].tool_call.fields.title.as_deref(),
        Some("What else should be set up?")
    );
    assert_eq!(
        tool_result(&env, "q1"),
        "The user's answers:\n\
         - db: chose \"SQLite\"\n\
         - extras: chose \"tests\" (asked as a single choice: the editor cannot offer several)\n\
         - style: skipped (no answer)\n\
         - name: not asked: the editor cannot ask free-text questions; ask it in your reply instead"
    );
    // The call ends titled by its first question again.
    let (_, completed) = shown(&conn.updates(), "q1");
    assert_eq!(completed["title"], "Database");
    conn.finish().await;
}

#[tokio::test]
async fn a_client_that_advertised_forms_but_has_none_gets_permission_prompts_for_good() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("q1", "ask_user_question", two_questions()));
    env.mock.push_json(reply("SQLite it is."));
    env.mock
        .push_json(call("q2", "ask_user_question", two_questions()));
    env.mock.push_json(reply("Postgres then."));
    // It advertises `elicitation.form` but answers the form -32601.
    let sim = ClientSim::with_forms();
    sim.elicit(Elicit::MethodNotFound);
    sim.answer(Answer::SelectId("option-1"));
    sim.answer(Answer::SelectId("option-0"));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    let stop = conn.prompt(&session, "set up the app").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    // That call is asked again as a permission prompt.
    let not_asked = "- name: not asked: the editor cannot ask free-text questions; ask it in your reply instead";
    assert_eq!(
        tool_result(&env, "q1"),
        format!("The user's answers:\n- db: chose \"SQLite\"\n{not_asked}")
    );
    // And the rest of the connection's: no second form.
    let stop = conn.prompt(&session, "again").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    assert_eq!(
        tool_result(&env, "q2"),
        format!("The user's answers:\n- db: chose \"Postgres (Recommended)\"\n{not_asked}")
    );
    assert_eq!(sim.elicitations.lock().unwrap().len(), 1);
    assert_eq!(sim.asked(), ["q1", "q2"]);
    conn.finish().await;
}

#[tokio::test]
async fn a_declined_form_is_told_to_the_model_and_a_cancelled_one_cancels_the_turn() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("q1", "ask_user_question", two_questions()));
    env.mock.push_json(reply("I will assume Postgres."));
    env.mock
        .push_json(call("q2", "ask_user_question", two_questions()));
    let sim = ClientSim::with_forms();
    sim.elicit(Elicit::Decline);
    sim.elicit(Elicit::Cancel);
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    let stop = conn.prompt(&session, "set up the app").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    assert!(
        tool_result(&env, "q1").starts_with("The user declined to answer."),
        "{}",
        tool_result(&env, "q1")
    );
    let stop = conn.prompt(&session, "again").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::Cancelled);
    // No model call after the cancel; the call failed as a cancelled
    // permission does, and both answers are logged.
    assert_eq!(env.mock.requests().len(), 3);
    let events = env.log_events(&session);
    let outcomes: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "question/decision")
        .map(|e| &e["data"]["outcome"])
        .collect();
    assert_eq!(outcomes, [&json!("declined"), &json!("cancelled")]);
    let result = events
        .iter()
        .find(|e| e["type"] == "tool/result" && e["data"]["call_id"] == "q2")
        .unwrap();
    assert_eq!(result["data"]["status"], "failed");
    assert_eq!(result["data"]["error"]["code"], "permission.cancelled");
    conn.finish().await;
}

#[tokio::test]
async fn a_cancel_while_the_form_is_open_withdraws_it_and_cancels_the_turn() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("q1", "ask_user_question", two_questions()));
    let sim = ClientSim::with_forms();
    sim.elicit(Elicit::Hold);
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    let prompt = conn.send_prompt(&session, "set up the app");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while sim.elicitations.lock().unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no form");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    conn.cancel(&session);
    let stop = prompt.block_task().await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::Cancelled);
    // The open form is withdrawn: `$/cancel_request` for its request.
    let frames = |conn: &Conn| conn.recorded.lock().unwrap().frames.clone();
    let form_id = frames(&conn)
        .iter()
        .filter_map(|f| serde_json::from_str::<Value>(f).ok())
        .find(|f| f["method"] == "elicitation/create")
        .unwrap()["id"]
        .clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !frames(&conn)
        .iter()
        .filter_map(|f| serde_json::from_str::<Value>(f).ok())
        .any(|f| f["method"] == "$/cancel_request" && f["params"]["requestId"] == form_id)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no $/cancel_request for the form: {:?}",
            frames(&conn)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let events = env.log_events(&session);
    let decision = events
        .iter()
        .find(|e| e["type"] == "question/decision")
        .unwrap();
    assert_eq!(decision["data"]["outcome"], "cancelled");
    assert_eq!(env.mock.requests().len(), 1);
    conn.finish().await;
}

#[tokio::test]
async fn an_sdk_client_answers_a_question_with_session_answer() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("q1", "ask_user_question", two_questions()));
    env.mock.push_json(reply("SQLite it is."));
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    let session = client
        .ok(
            "session/new",
            json!({"cwd": env.cwd(), "approvals": "client"}),
        )
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let sub = client.subscribe(&session, None).await;
    client.prompt(&session, "set up the app").await;
    let items = client
        .wait_items(&sub, "the question", |items| {
            items.iter().any(|i| i["kind"] == "question")
        })
        .await;
    let asked = items.iter().find(|i| i["kind"] == "question").unwrap();
    let request = asked["requestId"].as_str().unwrap().to_owned();
    assert!(request.starts_with("question-"), "{request}");
    assert_eq!(asked["toolCall"]["callId"], "q1");
    assert_eq!(asked["toolCall"]["kind"], "other");
    assert_eq!(asked["toolCall"]["title"], "Database");
    assert_eq!(asked["questions"][0]["id"], "db");
    assert_eq!(asked["questions"][0]["options"][1]["label"], "SQLite");
    assert_eq!(
        asked["questions"][1],
        json!({"id": "name", "question": "What should the project be called?"})
    );
    // A question is not a permission, and answers must fit it.
    let wrong = client
        .call(
            "session/respond",
            json!({"sessionId": session, "requestId": request, "optionId": "allow_once"}),
        )
        .await;
    assert_eq!(wrong["error"]["code"], -32602);
    assert!(wrong["error"]["message"]
        .as_str()
        .unwrap()
        .contains("session/answer"));
    let wrong = client
        .call(
            "session/answer",
            json!({"sessionId": session, "requestId": request, "answers": [{"id": "db", "selected": ["MySQL"]}]}),
        )
        .await;
    assert_eq!(wrong["error"]["data"]["code"], "request.invalid_params");
    client
        .ok(
            "session/answer",
            json!({"sessionId": session, "requestId": request, "answers": [
                {"id": "db", "selected": ["SQLite"]},
                {"id": "name", "custom": "acme"}
            ]}),
        )
        .await;
    assert_eq!(client.wait_idle(&sub).await["stopReason"], "end_turn");
    assert_eq!(tool_result(&env, "q1"), ANSWERED);
    let decision = client
        .events(&sub)
        .into_iter()
        .find(|e| e["type"] == "question/decision")
        .unwrap();
    assert_eq!(decision["data"]["answers"][1]["custom"], "acme");

    // Without a client answering (approvals `never`), no one is there.
    env.mock
        .push_json(call("q2", "ask_user_question", two_questions()));
    env.mock.push_json(reply("Assuming."));
    let alone = client.ok("session/new", json!({"cwd": env.cwd()})).await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let sub = client.subscribe(&alone, None).await;
    client.prompt(&alone, "set up the app").await;
    assert_eq!(client.wait_idle(&sub).await["stopReason"], "end_turn");
    assert!(!client.items(&sub).iter().any(|i| i["kind"] == "question"));
    assert!(tool_result(&env, "q2").contains(
        "- db: no user is present; proceed with your best judgement and state your assumptions"
    ));
    assert!(sdk.exit().await.success());
}

/// Runs `dsh run ARGS` (stdin closed).
async fn dsh_run(env: &TestEnv, args: &[&str]) -> std::process::Output {
    let mut full = vec!["run"];
    full.extend_from_slice(args);
    let mut command = env.dsh(&full);
    command.stdin(std::process::Stdio::null());
    tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .expect("dsh run ends")
        .unwrap()
}

#[tokio::test]
async fn dsh_run_answers_from_answers_or_says_no_one_is_there() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("q1", "ask_user_question", two_questions()));
    env.mock.push_json(reply("Done."));
    let output = dsh_run(
        &env,
        &[
            "--answers",
            r#"{"db": "SQLite", "name": {"custom": "acme"}}"#,
            "set up the app",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(tool_result(&env, "q1"), ANSWERED);
    assert!(
        stderr.contains("question db: Which database should the app use?\n  answer: SQLite\n"),
        "{stderr}"
    );

    // From a file, a label list and free text.
    let file = env.home.path().join("answers.json");
    std::fs::write(
        &file,
        r#"{"db": ["Postgres (Recommended)"], "name": "acme"}"#,
    )
    .unwrap();
    env.mock
        .push_json(call("q2", "ask_user_question", two_questions()));
    env.mock.push_json(reply("Done."));
    let answers = format!("@{}", file.display());
    let output = dsh_run(&env, &["--answers", &answers, "set up the app"]).await;
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        tool_result(&env, "q2"),
        "The user's answers:\n- db: chose \"Postgres (Recommended)\"\n- name: answered in their own words: \"acme\""
    );

    // Without --answers every question is told no one is there, and
    // stderr shows it.
    env.mock
        .push_json(call("q3", "ask_user_question", two_questions()));
    env.mock.push_json(reply("Assumed Postgres."));
    let output = dsh_run(&env, &["set up the app"]).await;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let no_user = "no user is present; proceed with your best judgement and state your assumptions";
    assert_eq!(
        tool_result(&env, "q3"),
        format!("The user's answers:\n- db: {no_user}\n- name: {no_user}")
    );
    assert!(
        stderr.contains(&format!(
            "question name: What should the project be called?\n  answer: ({no_user})"
        )),
        "{stderr}"
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "Assumed Postgres.\n"
    );
}

/// Timed questions (`[questions] timeout_s`): unanswered within the wait,
/// the call returns and the turn goes on; the question stays open, and the
/// answer given later is logged and reaches the model as a user message
/// before its next step.
#[tokio::test]
async fn a_timed_question_answered_late_reaches_the_model_before_its_next_step() {
    let env = TestEnv::with_config("[questions]\ntimeout_s = 1").await;
    env.mock
        .push_json(call("q1", "ask_user_question", two_questions()));
    env.mock.push_json(reply("Going on with Postgres for now."));
    env.mock.push_json(reply("Switching to SQLite, as acme."));
    let sim = ClientSim::with_forms();
    sim.elicit(Elicit::Hold);
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    let started = std::time::Instant::now();
    let stop = conn.prompt(&session, "set up the app").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let offered = env.mock.requests()[0]["tools"].to_string();
    assert!(
        !offered.contains("Seconds to wait for the answers"),
        "the catalog's schema: the wait is the configuration's, not a parameter"
    );
    assert!(
        env.mock.tool_result("q1").starts_with("No answer yet"),
        "{}",
        env.mock.tool_result("q1")
    );
    assert_eq!(sim.held_forms(), 1, "the question is still open");

    sim.answer_held(json!({"db": "SQLite", "name": "acme"}));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !env
        .log_events(&session)
        .iter()
        .any(|event| event["type"] == "question/decision" && event["data"]["outcome"] == "answered")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the late answer is logged"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    conn.prompt(&session, "go on").await.unwrap();
    let last = env.mock.requests().pop().unwrap();
    let messages = last["messages"].as_array().unwrap();
    let user = messages.last().unwrap().to_string();
    assert!(user.contains("go on"), "{user}");
    assert!(
        user.contains("answered your earlier questions") && user.contains("acme"),
        "the late answer comes with the next prompt: {user}"
    );
    conn.finish().await;
}
