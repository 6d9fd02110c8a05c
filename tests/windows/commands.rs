//! Commands, jobs and `/undo` under Wine. Wine's `powershell.exe` is a
//! stub that runs nothing, so these sessions turn `pwsh` off and `bash`
//! on: without Git Bash, `bash` is `cmd.exe /D /S /C LINE`
//! (`acp-server/src/tools/shell.rs`), run under the guard's kill-on-close
//! Job Object (`process/src/guard/windows.rs`).

use std::time::{Duration, Instant};

use dsh_test_support::mock_model::{call, reply};
use dsh_test_support::procs;
use dsh_test_support::raw::Raw;
use dsh_test_support::skip;
use serde_json::{json, Value};

use super::{allow, prompt, until_answer, windows_path, wine, write_turn, Session};

/// The shell tool as cmd: `pwsh` off (Wine's PowerShell runs nothing).
pub(crate) const CMD: &str = "[tools]\nenable = [\"bash\"]\ndisable = [\"pwsh\"]\n";

/// A turn (request `request`) on `text` that ends; its frames.
async fn turn(raw: &mut Raw, id: &Value, request: u64, text: &str) -> Vec<Value> {
    raw.send(prompt(request, id, text)).await;
    let (done, frames) = until_answer(raw, request).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    frames
}

/// The `tool_call_update`s among `frames`, as one JSON text.
fn updates(frames: &[Value]) -> String {
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|frame| frame["params"]["update"]["sessionUpdate"] == "tool_call_update")
        .collect();
    serde_json::to_string(&updates).unwrap()
}

/// Whether a tool call among `frames` ended `completed` (and none failed).
fn completed(frames: &[Value]) -> bool {
    let statuses: Vec<&Value> = frames
        .iter()
        .map(|frame| &frame["params"]["update"]["status"])
        .collect();
    !statuses.iter().any(|status| *status == "failed")
        && statuses.iter().any(|status| *status == "completed")
}

/// `bash` as cmd in ask mode: asked, run in the workspace, its output
/// shown to the editor and told to the model; a line with quotes reaches
/// cmd as it is.
#[tokio::test]
async fn cmd_runs_the_shell_tool_under_wine() {
    let Some(wine) = wine(&skip::this_test()) else {
        return;
    };
    let session = Session::with_config(wine, CMD).await;
    let (mut raw, id) = session.start().await;
    session.mock.push_json(call(
        "c1",
        "bash",
        json!({"command": "echo made by cmd & echo %CD%", "description": "Print a line and the directory"}),
    ));
    session.mock.push_json(call(
        "c2",
        "bash",
        json!({"command": "echo \"quoted\" & echo a^&b", "description": "Print quotes"}),
    ));
    session.mock.push_json(reply("Ran."));
    let frames = turn(&mut raw, &id, 3, "run cmd").await;
    let asked = frames
        .iter()
        .filter(|frame| frame["method"] == "session/request_permission")
        .count();
    assert_eq!(asked, 2, "ask mode asks before each command: {frames:#?}");
    assert!(completed(&frames), "{frames:#?}");
    let shown = updates(&frames);
    assert!(shown.contains("made by cmd"), "{shown}");

    let told = session.mock.tool_result("c1");
    assert!(told.contains("made by cmd"), "{told}");
    let cwd = windows_path(&session.workspace());
    assert!(
        told.to_lowercase().contains(&cwd.to_lowercase()),
        "%CD% is the workspace {cwd}: {told}"
    );
    let told = session.mock.tool_result("c2");
    assert!(told.contains("\"quoted\""), "the quotes reach cmd: {told}");
    assert!(told.contains("a&b"), "cmd's own escape works: {told}");
    raw.finish().await;
}

/// A marker no other process's command line holds: a loopback address
/// of this test's own (all of 127/8 is the loopback on Linux).
fn unique_loopback() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let pid = std::process::id();
    format!(
        "127.{}.{}.{}",
        1 + pid % 250,
        1 + (nanos / 1000) % 250,
        2 + nanos % 250
    )
}

/// Live ping processes whose command line holds `marker` (Wine shows a
/// Windows program's command line in `/proc`: `ping -n 60 ADDRESS` or
/// `C:\windows\system32\ping.exe …`), not the cmd or guard that started
/// them.
fn pings(marker: &str) -> Vec<u32> {
    procs::holding(marker)
        .into_iter()
        .filter(|pid| {
            let line = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let line = String::from_utf8_lossy(&line).to_lowercase();
            let program = line.split([' ', '\0']).next().unwrap_or("");
            program == "ping" || program.ends_with("\\ping.exe")
        })
        .collect()
}

/// A command that leaves a child running in the background (`start /b`)
/// ends with it: the guard's kill-on-close Job Object ends the child when
/// the command returns. The child is seen running while the command runs
/// (else the test would prove nothing), then is gone.
#[tokio::test]
async fn a_commands_background_child_ends_with_it_under_wine() {
    let Some(wine) = wine(&skip::this_test()) else {
        return;
    };
    let session = Session::with_config(wine, CMD).await;
    let (mut raw, id) = session.start().await;
    let marker = unique_loopback();
    session.mock.push_json(call(
        "t1",
        "bash",
        json!({"command": format!("start /b ping -n 60 {marker} >nul & ping -n 3 127.0.0.1 >nul & echo started"),
            "description": "Start a child in the background"}),
    ));
    session.mock.push_json(reply("Started."));
    // Watches for the background ping while the turn runs.
    let watch = {
        let marker = marker.clone();
        tokio::spawn(async move { ping_seen(&marker, 60).await })
    };
    let frames = turn(&mut raw, &id, 3, "start a child").await;
    assert!(completed(&frames), "{frames:#?}");
    let told = session.mock.tool_result("t1");
    assert!(told.contains("started"), "{told}");
    tokio::time::timeout(Duration::from_secs(5), watch)
        .await
        .expect("the watch ends")
        .expect("the background ping was seen running");
    pings_gone(&marker, 10, "the background child outlived its command").await;
    raw.finish().await;
}

/// `bash` with `run_in_background`: a job id at once, then `job_output`
/// waits for the job's end and holds what it printed.
#[tokio::test]
async fn a_background_job_runs_under_wine() {
    let Some(wine) = wine(&skip::this_test()) else {
        return;
    };
    let session = Session::with_config(wine, CMD).await;
    let (mut raw, id) = session.start().await;
    session.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": "ping -n 3 127.0.0.1 >nul & echo finished",
            "description": "A job", "run_in_background": true}),
    ));
    session.mock.push_json(call(
        "o1",
        "job_output",
        json!({"job_id": "j1", "wait": true, "timeout_ms": 30000}),
    ));
    session.mock.push_json(reply("Done."));
    let frames = turn(&mut raw, &id, 3, "run it in the background").await;
    assert!(completed(&frames), "{frames:#?}");
    let job = session.mock.tool_result("b1");
    assert!(job.contains("j1"), "a job id: {job}");
    assert!(!job.contains("finished"), "returned before the end: {job}");
    let output = session.mock.tool_result("o1");
    assert!(output.contains("finished"), "{output}");
    raw.finish().await;
}

/// `/undo` after writes: each puts back what its turn changed on disk (a
/// new file removed, a rewritten file's old text).
#[tokio::test]
async fn undo_puts_back_writes_under_wine() {
    let Some(wine) = wine(&skip::this_test()) else {
        return;
    };
    let session = Session::new(wine).await;
    let (mut raw, id) = session.start().await;
    write_turn(&session, &mut raw, &id, 3, "hello.txt").await;
    write_turn(&session, &mut raw, &id, 4, "made.txt").await;
    let hello = session.workspace().join("hello.txt");
    let made = session.workspace().join("made.txt");

    turn(&mut raw, &id, 5, "/undo").await;
    assert!(!made.exists(), "the new file is removed");
    assert_eq!(
        std::fs::read_to_string(&hello).unwrap(),
        "made on Windows\n"
    );

    turn(&mut raw, &id, 6, "/undo").await;
    assert_eq!(std::fs::read_to_string(&hello).unwrap(), "hello\n");
    raw.finish().await;
}

/// Waits (up to `secs`) until a ping holding `marker` runs; its pids.
async fn ping_seen(marker: &str, secs: u64) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let pids = pings(marker);
        if !pids.is_empty() {
            return pids;
        }
        assert!(
            Instant::now() < deadline,
            "`ping {marker}` never ran within {secs} s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (up to `secs`) until no ping holding `marker` is left.
async fn pings_gone(marker: &str, secs: u64, why: &str) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let left = pings(marker);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{why}: `ping {marker}` still runs after {secs} s, pids {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A cmd session whose model's first call is `bash` (as `call_id`) on a
/// minute-long ping to a loopback address of the test's own, with
/// `extra` arguments, then replies `then`: the session, its connection,
/// the session id and the ping's address (its marker). `None` after a
/// skip.
async fn a_minute_long_ping(
    test: &str,
    call_id: &str,
    extra: Value,
    then: &str,
) -> Option<(Session, Raw, Value, String)> {
    let session = Session::with_config(wine(test)?, CMD).await;
    let (raw, id) = session.start().await;
    let marker = unique_loopback();
    let mut args =
        json!({"command": format!("ping -n 60 {marker} >nul"), "description": "Wait a minute"});
    for (key, value) in extra.as_object().into_iter().flatten() {
        args[key] = value.clone();
    }
    session.mock.push_json(call(call_id, "bash", args));
    session.mock.push_json(reply(then));
    Some((session, raw, id, marker))
}

/// A turn cancelled while its command runs: the turn ends `cancelled`
/// and the command's process tree is ended.
#[tokio::test]
async fn a_cancelled_turn_ends_its_running_command_under_wine() {
    let Some((_session, mut raw, id, marker)) =
        a_minute_long_ping(&skip::this_test(), "k1", json!({}), "Never.").await
    else {
        return;
    };
    raw.send(prompt(3, &id, "wait")).await;
    loop {
        let frame = raw.recv().await;
        if frame["method"] == "session/request_permission" {
            allow(&mut raw, &frame).await;
            break;
        }
    }
    ping_seen(&marker, 30).await;
    raw.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": id}}))
        .await;
    let (done, _) = until_answer(&mut raw, 3).await;
    assert_eq!(done["result"]["stopReason"], "cancelled", "{done}");
    pings_gone(&marker, 10, "cancel ends the command").await;
    raw.finish().await;
}

/// A command past its `timeoutMs` is killed with its tree, and the model
/// is told so.
#[tokio::test]
async fn a_command_past_its_timeout_is_killed_under_wine() {
    let Some((session, mut raw, id, marker)) = a_minute_long_ping(
        &skip::this_test(),
        "t1",
        json!({"timeoutMs": 3000}),
        "It timed out.",
    )
    .await
    else {
        return;
    };
    let watch = {
        let marker = marker.clone();
        tokio::spawn(async move { ping_seen(&marker, 30).await })
    };
    turn(&mut raw, &id, 3, "wait").await;
    watch.await.expect("the ping ran");
    let told = session.mock.tool_result("t1");
    assert!(told.contains("timed out"), "{told}");
    pings_gone(&marker, 10, "the timeout kills the command").await;
    raw.finish().await;
}

/// `job_kill` ends a background job's whole tree.
#[tokio::test]
async fn job_kill_ends_a_background_job_under_wine() {
    let Some((session, mut raw, id, marker)) = a_minute_long_ping(
        &skip::this_test(),
        "b1",
        json!({"run_in_background": true}),
        "Started.",
    )
    .await
    else {
        return;
    };
    turn(&mut raw, &id, 3, "start a job").await;
    ping_seen(&marker, 30).await;

    session
        .mock
        .push_json(call("x1", "job_kill", json!({"job_id": "j1"})));
    session.mock.push_json(reply("Killed."));
    let frames = turn(&mut raw, &id, 4, "kill it").await;
    // The job's own call ends `failed` (killed), maybe in this turn.
    let asked = frames
        .iter()
        .filter(|frame| frame["params"]["update"]["toolCallId"] == "x1")
        .filter_map(|frame| frame["params"]["update"]["status"].as_str())
        .next_back();
    assert_eq!(asked, Some("completed"), "{frames:#?}");
    pings_gone(&marker, 10, "job_kill ends the job").await;
    raw.finish().await;
}
