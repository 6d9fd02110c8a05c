//! Wake-ups: a background job's end while the session is idle starts a
//! turn of its own in the SDK and in `dsh run` (at most
//! `max_consecutive_wakes` in a row without the user's input; `quiet`
//! never), and over ACP is a notice at once that opens the next prompt.
//! Each job waits for a file the test creates: its end comes when the
//! test says.

use std::path::Path;
use std::time::Duration;

use agent_client_protocol::v1::schema::{PermissionOptionKind, SessionUpdate, ToolCallStatus};
use serde_json::{json, Value};

use crate::support::sdk_client::{SdkClient, SdkProcess};
use crate::support::*;

/// A `bash` call that starts background job `n`: it waits for file
/// `go{n}` in the workspace, then says `done-{n}`.
fn job(n: u32) -> Value {
    call(
        &format!("b{n}"),
        "bash",
        json!({
            "command": format!("while [ ! -e go{n} ]; do sleep 0.05; done; echo done-{n}"),
            "description": format!("wait for go{n}"),
            "run_in_background": true,
        }),
    )
}

/// Lets job `n` end.
fn release(cwd: &Path, n: u32) {
    std::fs::write(cwd.join(format!("go{n}")), "").unwrap();
}

/// The last user message of a model request, as text.
fn last_user(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    let last = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .expect("a user message");
    message_text(last)
}

/// The subscription's status items of wake-up turns that ended (`idle`).
fn woken(items: &[Value]) -> Vec<Value> {
    items
        .iter()
        .filter(|i| i["kind"] == "status" && i["status"] == "idle" && i.get("wakeup").is_some())
        .cloned()
        .collect()
}

async fn wait_woken(client: &SdkClient, sub: &Value, count: usize) -> Vec<Value> {
    let items = client
        .wait_items(sub, &format!("{count} wake-up turns"), |items| {
            woken(items).len() >= count
        })
        .await;
    woken(&items)
}

async fn wait_idle_of(client: &SdkClient, sub: &Value, message_id: &str) {
    client
        .wait_items(sub, "the prompt's end", |items| {
            items.iter().any(|i| {
                i["kind"] == "status" && i["status"] == "idle" && i["messageId"] == message_id
            })
        })
        .await;
}

async fn wait_job_end(client: &SdkClient, sub: &Value, job: &str) -> Value {
    let items = client
        .wait_items(sub, &format!("{job}'s end"), |items| {
            items.iter().any(|i| {
                i["kind"] == "event"
                    && i["event"]["type"] == "job/end"
                    && i["event"]["data"]["job_id"] == job
            })
        })
        .await;
    items
        .into_iter()
        .find(|i| i["event"]["data"]["job_id"] == job)
        .unwrap()["event"]
        .clone()
}

async fn sdk_session(client: &SdkClient, env: &TestEnv) -> String {
    let opened = client
        .ok("session/new", json!({"cwd": env.cwd(), "approvals": "all"}))
        .await;
    opened["sessionId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_jobs_end_wakes_an_idle_sdk_session_at_most_three_times_in_a_row() {
    let env = TestEnv::new().await;
    // The prompt starts j1; each wake-up turn starts the next job, until
    // the third; the user's next prompt starts j5, whose end wakes again.
    for n in 1..=4 {
        env.mock.push_json(job(n));
        env.mock.push_json(reply(&format!("Started job {n}.")));
    }
    env.mock.push_json(job(5));
    env.mock.push_json(reply("Started job 5."));
    env.mock.push_json(reply("Job 5 said done-5."));
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    let session = sdk_session(client, &env).await;
    let sub = client.subscribe(&session, None).await;
    let first = client.prompt(&session, "start job 1").await;
    wait_idle_of(client, &sub, &first).await;
    assert_eq!(env.mock.requests().len(), 2);

    // Idle: j1's end starts a turn whose prompt is the notice.
    release(&env.cwd(), 1);
    let ended = wait_woken(client, &sub, 1).await;
    assert_eq!(ended[0]["wakeup"], json!({"jobs": ["j1"], "count": 1}));
    assert_eq!(ended[0]["stopReason"], "end_turn");
    let wake_id = ended[0]["messageId"].as_str().unwrap().to_owned();
    assert!(wake_id.starts_with("wakeup-"), "{wake_id}");
    let items = client.items(&sub);
    assert!(
        items.iter().any(|i| i["kind"] == "status"
            && i["status"] == "running"
            && i["messageId"] == wake_id.as_str()
            && i["wakeup"]["jobs"] == json!(["j1"])),
        "{items:#?}"
    );
    let requests = env.mock.requests();
    let notice = last_user(&requests[2]);
    assert!(
        notice.contains("background job j1")
            && notice.contains("Background job j1 (`while [ ! -e go1 ]")
            && notice.contains("finished: exited 0")
            && notice.contains("job_output"),
        "{notice}"
    );
    // The job's end (its `job/end` summary) comes before the notice.
    assert!(
        notice.find("[dsh: background job j1") < notice.find("Background job j1"),
        "{notice}"
    );
    let events = client.events(&sub);
    let wake_message = events
        .iter()
        .filter(|e| e["type"] == "user/message")
        .nth(1)
        .expect("the wake-up's user/message");
    assert_eq!(wake_message["data"]["source"], "wakeup");
    let said = wake_message["data"]["content"][0]["text"].as_str().unwrap();
    assert!(notice.ends_with(said), "{said}");

    // Two more wake-ups in a row…
    release(&env.cwd(), 2);
    wait_woken(client, &sub, 2).await;
    release(&env.cwd(), 3);
    let ended = wait_woken(client, &sub, 3).await;
    assert_eq!(ended[2]["wakeup"], json!({"jobs": ["j3"], "count": 3}));
    assert_eq!(env.mock.requests().len(), 8);
    // …and the fourth end is only noticed: no turn, no model request.
    release(&env.cwd(), 4);
    let end = wait_job_end(client, &sub, "j4").await;
    let summary = end["data"]["summary"].as_str().unwrap().to_owned();

    // The user's next prompt opens with it, and starts the count again.
    let second = client.prompt(&session, "and now?").await;
    wait_idle_of(client, &sub, &second).await;
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 10, "only the prompt's requests came");
    let opened = last_user(&requests[8]);
    assert!(
        opened.find(&summary).is_some() && opened.find(&summary) < opened.find("and now?"),
        "{opened}"
    );
    assert_eq!(woken(&client.items(&sub)).len(), 3);
    release(&env.cwd(), 5);
    let ended = wait_woken(client, &sub, 4).await;
    assert_eq!(ended[3]["wakeup"], json!({"jobs": ["j5"], "count": 1}));
    assert!(last_user(&env.mock.requests()[10]).contains("Background job j5"));
    assert_eq!(env.mock.pending(), 0);
    assert!(sdk.exit().await.success());
}

#[tokio::test]
async fn quiet_delivery_starts_no_turn_and_the_end_opens_the_next_prompt() {
    let env = TestEnv::with_config("[jobs]\ncompletion_delivery = \"quiet\"").await;
    env.mock.push_json(job(1));
    env.mock.push_json(reply("Started."));
    env.mock.push_json(reply("It is done."));
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    let session = sdk_session(client, &env).await;
    let sub = client.subscribe(&session, None).await;
    let first = client.prompt(&session, "start it").await;
    wait_idle_of(client, &sub, &first).await;
    release(&env.cwd(), 1);
    let end = wait_job_end(client, &sub, "j1").await;
    let second = client.prompt(&session, "is it done?").await;
    wait_idle_of(client, &sub, &second).await;
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 3, "no wake-up turn");
    let opened = last_user(&requests[2]);
    let summary = end["data"]["summary"].as_str().unwrap();
    assert!(
        opened.find(summary).is_some() && opened.find(summary) < opened.find("is it done?"),
        "{opened}"
    );
    assert!(woken(&client.items(&sub)).is_empty());
    assert!(sdk.exit().await.success());
}

#[tokio::test]
async fn over_acp_a_jobs_end_is_a_notice_at_once_and_opens_the_next_prompt() {
    let env = TestEnv::new().await;
    env.mock.push_json(job(1));
    env.mock.push_json(reply("Started."));
    env.mock.push_json(reply("It is done."));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim).await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "start it").await.unwrap();
    release(&env.cwd(), 1);
    // Shown at once, between prompts: the call completes.
    conn.wait_for("the job's end", |updates| {
        updates.iter().any(|n| {
            matches!(&n.update, SessionUpdate::ToolCallUpdate(update)
                if update.tool_call_id.0.as_ref() == "b1"
                    && update.fields.status == Some(ToolCallStatus::Completed))
        })
    })
    .await;
    // No turn started: the model was not asked.
    assert_eq!(env.mock.requests().len(), 2);
    conn.prompt(&session, "is it done?").await.unwrap();
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 3);
    let opened = last_user(&requests[2]);
    let at = opened.find("[dsh: background job j1");
    assert!(at.is_some() && at < opened.find("is it done?"), "{opened}");
    validate_frames(&conn.finish().await);
}

/// Runs `dsh run ARGS`, calling `meanwhile` once it runs.
async fn dsh_run(
    env: &TestEnv,
    args: &[&str],
    meanwhile: impl std::future::Future<Output = ()>,
) -> std::process::Output {
    let mut full = vec!["run"];
    full.extend_from_slice(args);
    let child = env.dsh(&full).spawn().expect("spawn dsh run");
    let (output, ()) = tokio::join!(
        async {
            tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
                .await
                .expect("dsh run ends")
                .unwrap()
        },
        meanwhile
    );
    output
}

/// Waits until no process of the job waiting for `file` is left (the
/// run's guard may still be sweeping them as `dsh run` exits).
async fn jobs_gone(env: &TestEnv, file: &str) {
    let cwd = env.cwd().canonicalize().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let pids = procs::live_pids(file, &cwd);
        if pids.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the job outlived the run: {pids:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the run's session logged its first `turn/end`.
async fn turn_ended(env: &TestEnv) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let logged = std::fs::read_dir(env.sessions_dir())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
            .any(|log| log.contains("\"type\":\"turn/end\""));
        if logged {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "no turn/end logged");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn dsh_run_waits_for_its_background_job_and_runs_the_wake_up_turn() {
    let env = TestEnv::new().await;
    env.mock.push_json(job(1));
    env.mock.push_json(reply("Started."));
    env.mock.push_json(reply("The job said done-1."));
    let output = dsh_run(&env, &["--approve", "all", "start it"], async {
        // The task's turn ended, the job runs: the run waits for it.
        turn_ended(&env).await;
        release(&env.cwd(), 1);
    })
    .await;
    assert_exit(&output, 0, "dsh run");
    assert_eq!(text(&output.stdout).trim(), "The job said done-1.");
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 3);
    let notice = last_user(&requests[2]);
    assert!(
        notice.contains("Background job j1") && notice.contains("finished: exited 0"),
        "{notice}"
    );
}

#[tokio::test]
async fn dsh_run_with_quiet_delivery_ends_with_its_turn() {
    let env = TestEnv::with_config("[jobs]\ncompletion_delivery = \"quiet\"").await;
    env.mock.push_json(job(1));
    env.mock.push_json(reply("Started."));
    // go1 never comes: the run ends with its turn, and the job with it.
    let output = dsh_run(&env, &["--approve", "all", "start it"], async {}).await;
    assert_exit(&output, 0, "dsh run");
    assert_eq!(text(&output.stdout).trim(), "Started.");
    assert_eq!(env.mock.requests().len(), 2);
    jobs_gone(&env, "go1").await;
}

#[tokio::test]
async fn dsh_run_waits_for_a_job_that_never_ends_only_until_its_timeout() {
    let env = TestEnv::new().await;
    env.mock.push_json(job(1));
    env.mock.push_json(reply("Started."));
    // go1 never comes: --timeout ends the wait, and the job with the run.
    let output = dsh_run(
        &env,
        &["--approve", "all", "--timeout", "2", "start it"],
        async {},
    )
    .await;
    assert_exit(&output, 1, "dsh run");
    assert!(
        text(&output.stderr).contains("run.timeout"),
        "{}",
        text(&output.stderr)
    );
    assert_eq!(env.mock.requests().len(), 2);
    jobs_gone(&env, "go1").await;
}

#[tokio::test]
async fn dsh_run_waits_for_a_job_that_never_ends_only_for_run_wait_ms() {
    let env = TestEnv::with_config("[jobs]\nrun_wait_ms = 300").await;
    env.mock.push_json(job(1));
    env.mock.push_json(reply("Started."));
    // go1 never comes and there is no --timeout: the wait's bound ends the
    // run as the task's turn ended, and the job is named and stopped.
    let output = dsh_run(&env, &["--approve", "all", "start it"], async {}).await;
    assert_exit(&output, 0, "dsh run");
    assert_eq!(text(&output.stdout).trim(), "Started.");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("run_wait_ms") && stderr.contains("stopping them: j1 (`while [ ! -e go1 ]"),
        "{stderr}"
    );
    assert_eq!(env.mock.requests().len(), 2);
    jobs_gone(&env, "go1").await;
}
