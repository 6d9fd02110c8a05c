//! Background jobs: `bash` with `run_in_background`, `job_output`,
//! `job_kill`, `job_list` — in the sandbox, shown as tool calls that stay
//! in progress until the job ends, killed with the session, reported to the
//! model, and "outcome unknown" after dsh died under them.

use std::time::Duration;

use agent_client_protocol::v1::schema::{PermissionOptionKind, SessionUpdate, ToolCallStatus};
use serde_json::json;

use crate::support::{
    call, pid_alive, reply, tool_result, validate_frames, Answer, ClientSim, Conn, TestEnv,
};

fn statuses(conn: &Conn, call_id: &str) -> Vec<ToolCallStatus> {
    conn.updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::ToolCallUpdate(update) if update.tool_call_id.0.as_ref() == call_id => {
                update.fields.status
            }
            _ => None,
        })
        .collect()
}

fn update_text(conn: &Conn, call_id: &str) -> String {
    conn.updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::ToolCallUpdate(update) if update.tool_call_id.0.as_ref() == call_id => {
                Some(serde_json::to_string(&update.fields.content).unwrap())
            }
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The pid a job's command wrote to `path` (waits for the whole line).
async fn pid_in(path: &std::path::Path) -> u32 {
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text.trim().parse().unwrap();
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{} never appeared", path.display());
}

#[tokio::test]
async fn a_background_job_streams_its_output_and_the_model_hears_when_it_ends() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": "echo first; sleep 0.3; echo second > made.txt; cat made.txt; exit 4", "description": "a job", "run_in_background": true}),
    ));
    env.mock.push_json(call(
        "o1",
        "job_output",
        json!({"job_id": "j1", "wait": true}),
    ));
    env.mock
        .push_json(call("o2", "job_output", json!({"job_id": "j1"})));
    env.mock.push_json(call("l1", "job_list", json!({})));
    env.mock
        .push_json(call("x1", "job_output", json!({"job_id": "j9"})));
    env.mock.push_json(reply("done"));
    // Ask mode: the command is allowed once, and runs in the sandbox.
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim.clone()).await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "run it in the background")
        .await
        .unwrap();
    let started = tool_result(&env, "b1");
    assert!(
        started.contains("Started background job j1") && started.ends_with("[status: running]"),
        "{started}"
    );
    // Only the start was asked about: reading a job is not a new command.
    assert_eq!(sim.asked(), ["b1"]);
    let waited = tool_result(&env, "o1");
    assert!(
        waited.contains("first\nsecond\n") && waited.ends_with("[status: exited 4]"),
        "{waited}"
    );
    // Read once: the next read has only the status.
    assert_eq!(tool_result(&env, "o2"), "[status: exited 4]");
    let listed = tool_result(&env, "l1");
    assert!(listed.contains("j1\tbash\texited 4"), "{listed}");
    assert!(
        tool_result(&env, "x1").contains("No background job \"j9\""),
        "{}",
        tool_result(&env, "x1")
    );
    // The editor saw the call stay in progress, then fail (exit 4) with
    // the output's tail.
    let seen = statuses(&conn, "b1");
    assert_eq!(
        seen.last(),
        Some(&ToolCallStatus::Failed),
        "{seen:?}: {}",
        update_text(&conn, "b1")
    );
    assert!(seen.contains(&ToolCallStatus::InProgress));
    assert!(update_text(&conn, "b1").contains("[status: exited 4]"));
    // Logged, and the model was told at its next step.
    let events = env.log_events(&session);
    let end = events
        .iter()
        .find(|e| e["type"] == "job/end")
        .expect("job/end");
    assert_eq!(end["data"]["status"], "exited 4");
    // The call's last update carries what the model is told of the end.
    let raw_outputs: Vec<serde_json::Value> = conn
        .updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::ToolCallUpdate(update) if update.tool_call_id.0.as_ref() == "b1" => {
                update.fields.raw_output
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        raw_outputs,
        [json!({
            "output": end["data"]["summary"],
            "jobId": "j1",
            "jobStatus": "exited 4",
        })]
    );
    let requests = env.mock.requests();
    assert!(
        requests[2].to_string().contains("background job j1"),
        "{}",
        requests[2]
    );
    validate_frames(&conn.finish().await);
}

#[tokio::test]
async fn job_kill_stops_a_job_and_closing_the_session_stops_the_rest() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": "echo $$ > one.pid; exec sleep 30", "description": "sleeper", "run_in_background": true}),
    ));
    env.mock.push_json(call(
        "b2",
        "bash",
        json!({"command": "sleep 30 & echo $! > two.pid; wait", "description": "sleeper", "run_in_background": true}),
    ));
    env.mock.push_json(reply("started"));
    env.mock.push_json(call(
        "k1",
        "job_kill",
        json!({"job_id": "j1", "reason": "no longer needed"}),
    ));
    env.mock.push_json(call(
        "o1",
        "job_output",
        json!({"job_id": "j1", "wait": true}),
    ));
    env.mock.push_json(reply("killed"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "start two").await.unwrap();
    let one = pid_in(&env.cwd().join("one.pid")).await;
    let two = pid_in(&env.cwd().join("two.pid")).await;
    assert!(pid_alive(one) && pid_alive(two));
    conn.prompt(&session, "stop the first").await.unwrap();
    assert!(tool_result(&env, "k1").contains("Asked job j1 to stop"));
    assert!(
        tool_result(&env, "o1").ends_with("[status: killed]"),
        "{}",
        tool_result(&env, "o1")
    );
    assert!(!pid_alive(one));
    assert!(pid_alive(two), "the other job still runs");
    // The connection closes: the session's jobs die with it, and their
    // end is logged.
    validate_frames(&conn.finish().await);
    for _ in 0..100 {
        if !pid_alive(two) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!pid_alive(two), "a job outlived its session");
    let ends: Vec<serde_json::Value> = env
        .log_events(&session)
        .into_iter()
        .filter(|e| e["type"] == "job/end")
        .collect();
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert!(ends[0]["data"]["summary"]
        .as_str()
        .unwrap()
        .contains("no longer needed"));
    assert!(ends[1]["data"]["summary"]
        .as_str()
        .unwrap()
        .contains("the session closed"));
}

#[tokio::test]
async fn a_job_dsh_died_under_shows_as_outcome_unknown_on_reload() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": "echo $$ > job.pid; exec sleep 30", "description": "sleeper", "run_in_background": true}),
    ));
    env.mock.push_json(reply("started"));
    let mut conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "start").await.unwrap();
    let pid = pid_in(&env.cwd().join("job.pid")).await;
    // dsh is killed outright: no job/end is written.
    conn.child.start_kill().unwrap();
    conn.child.wait().await.unwrap();
    for _ in 0..100 {
        if !pid_alive(pid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!pid_alive(pid), "the job died with dsh");
    assert!(!env
        .log_events(&session)
        .iter()
        .any(|e| e["type"] == "job/end"));
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    assert_eq!(statuses(&conn, "b1").last(), Some(&ToolCallStatus::Failed));
    assert!(update_text(&conn, "b1").contains("outcome unknown"));
    validate_frames(&conn.finish().await);
}

/// The size of `path` now (0 when it does not exist yet).
fn size_of(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |meta| meta.len())
}

/// Waits until the session log holds `count` `job/end` events; them.
async fn job_ends(
    env: &crate::support::TestEnv,
    session: &agent_client_protocol::v1::schema::SessionId,
    count: usize,
) -> Vec<serde_json::Value> {
    for _ in 0..400 {
        let ends: Vec<serde_json::Value> = env
            .log_events(session)
            .into_iter()
            .filter(|e| e["type"] == "job/end")
            .collect();
        if ends.len() >= count {
            return ends;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("fewer than {count} job/end events after 10 s");
}

/// Issue 23, item 17: a job keeps the sandbox of the mode it started in,
/// so when the mode becomes stricter than that, the job is killed and the
/// user and the model are told why. A job started in ask survives a
/// switch to accept-edits (not stricter than ask).
#[tokio::test]
async fn a_stricter_mode_kills_the_jobs_started_in_a_looser_one() {
    let env = TestEnv::new().await;
    let outside = tempfile::tempdir().unwrap();
    let grow = outside.path().join("grow.txt");
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": "echo $$ > ask.pid; exec sleep 30", "description": "asked", "run_in_background": true}),
    ));
    env.mock.push_json(reply("started in ask"));
    env.mock.push_json(call(
        "b2",
        "bash",
        json!({"command": format!("echo $$ > writer.pid; while true; do echo x >> {}; sleep 0.05; done", grow.display()), "description": "writes outside", "run_in_background": true}),
    ));
    env.mock.push_json(reply("started in full-access"));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "start one in ask").await.unwrap();
    let asked = pid_in(&env.cwd().join("ask.pid")).await;
    // Ask → accept-edits is not stricter: the job runs on. Which jobs a
    // mode change stops is decided as the change is recorded, and said
    // (a notice) before the mode's answer: nothing was said. (Its end,
    // below, names the later change to read-only.)
    conn.set_mode(&session, "accept-edits").await;
    assert!(
        pid_alive(asked),
        "a job started in ask was killed by accept-edits"
    );
    assert!(!env
        .log_events(&session)
        .iter()
        .any(|e| e["type"] == "job/end"
            || (e["type"] == "agent/notice"
                && e["data"]["text"]
                    .as_str()
                    .unwrap()
                    .contains("stopped the background"))));
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "start one in full-access")
        .await
        .unwrap();
    let writer = pid_in(&env.cwd().join("writer.pid")).await;
    for _ in 0..200 {
        if size_of(&grow) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        size_of(&grow) > 0,
        "the full-access job never wrote outside"
    );
    conn.clear_updates();
    conn.set_mode(&session, "read-only").await;
    let ends = job_ends(&env, &session, 2).await;
    // Both, the ask job too, by this change.
    for end in &ends {
        assert_eq!(end["data"]["status"], "killed", "{end}");
        assert!(
            end["data"]["summary"]
                .as_str()
                .unwrap()
                .contains("killed: the session's mode changed from full-access to read-only"),
            "{end}"
        );
    }
    assert!(!pid_alive(asked), "the ask job outlived read-only");
    // The file stops growing: the shell that writes it is gone.
    assert!(!pid_alive(writer), "the job still writes outside");
    // The user was told, naming both jobs.
    let said = crate::support::chunk_text(&conn.updates(), false);
    assert!(
        said.contains("j1")
            && said.contains("j2")
            && said.contains("from full-access to read-only"),
        "{said}"
    );
    // And the model hears of it at its next step.
    env.mock.push_json(reply("noted"));
    conn.prompt(&session, "what happened?").await.unwrap();
    let last = env.mock.requests().pop().unwrap()["messages"].to_string();
    assert!(
        last.contains("the session's mode changed from full-access to read-only"),
        "{last}"
    );
    validate_frames(&conn.finish().await);
}
