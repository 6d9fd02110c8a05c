//! Persistent terminals (`terminal_*`, opt-in): a real bash on a
//! pseudo-terminal under the command guard, state kept across sends,
//! output read back, `^C` to the foreground job, every process gone on
//! `terminal_close` and when the session closes, and the sent text judged
//! like a command line.

use std::path::Path;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::PermissionOptionKind;
use serde_json::json;

use crate::support::{call, pid_alive, reply, tool_result, Answer, ClientSim, TestEnv};

const ENABLE: &str = "[tools]\nenable = [\"terminal\"]";

/// The pid a shell wrote to `path` (waits for the whole line).
async fn pid_in(path: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text.trim().parse().unwrap();
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{} never appeared", path.display());
}

/// Waits (up to 10 s) until none of `pids` is alive.
async fn all_gone(pids: &[u32]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if pids.iter().all(|pid| !pid_alive(*pid)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn send(id: &str, text: &str) -> serde_json::Value {
    call(
        id,
        "terminal_send",
        json!({"sessionId": "t1", "text": text}),
    )
}

/// A line for the shell that starts a background `sleep` and writes the
/// shell's and the sleeper's pids to `path`.
fn record_pids(path: &Path) -> String {
    format!("sleep 300 & echo $$ $! > {}", path.display())
}

/// The shell's and the sleeper's pids [`record_pids`] wrote.
fn shell_and_sleeper(path: &Path) -> [u32; 2] {
    let text = std::fs::read_to_string(path).unwrap();
    let pids: Vec<u32> = text
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{text}");
    [pids[0], pids[1]]
}

#[tokio::test]
async fn a_terminal_keeps_its_state_across_sends_and_close_leaves_nothing() {
    let env = TestEnv::with_config(ENABLE).await;
    let cwd = env.cwd();
    let pids = cwd.join("pids");
    env.mock.push_json(call(
        "o1",
        "terminal_open",
        json!({"type": "shell", "name": "main"}),
    ));
    env.mock
        .push_json(send("s1", "GREETING=persisted; mkdir -p sub && cd sub"));
    env.mock
        .push_json(send("s2", &format!("{}; echo started", record_pids(&pids))));
    env.mock
        .push_json(send("s3", "echo \"$GREETING in ${PWD##*/}\""));
    env.mock.push_json(call(
        "r1",
        "terminal_read",
        json!({"sessionId": "t1", "count": 2}),
    ));
    env.mock.push_json(call(
        "r0",
        "terminal_read",
        json!({"sessionId": "t1", "offset": 100000}),
    ));
    env.mock.push_json(send("s4", "echo sleeping; sleep 100"));
    env.mock.push_json(call(
        "g1",
        "terminal_signal",
        json!({"sessionId": "t1", "signal": "SIGINT"}),
    ));
    env.mock.push_json(send("s5", "echo \"alive after $?\""));
    env.mock.push_json(call(
        "k1",
        "terminal_signal",
        json!({"sessionId": "t1", "signal": "SIGKILL"}),
    ));
    env.mock.push_json(call("l1", "terminal_list", json!({})));
    env.mock
        .push_json(call("x1", "terminal_open", json!({"type": "gdb"})));
    env.mock
        .push_json(call("c1", "terminal_close", json!({"sessionId": "t1"})));
    env.mock
        .push_json(call("r2", "terminal_read", json!({"sessionId": "t1"})));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "use a terminal").await.unwrap();

    assert!(
        tool_result(&env, "o1").contains("Opened terminal t1"),
        "{}",
        tool_result(&env, "o1")
    );
    let started = tool_result(&env, "s2");
    assert!(started.contains("started"), "{started}");
    let [shell, sleeper] = shell_and_sleeper(&pids);
    // The variable set by the first send and the directory it entered are
    // still there at the third.
    let third = tool_result(&env, "s3");
    assert!(third.contains("persisted in sub"), "{third}");
    assert!(
        third.contains("[settled: the shell is back at its prompt]"),
        "{third}"
    );
    assert!(!third.contains('\u{1b}'), "escapes are stripped: {third:?}");
    let read = tool_result(&env, "r1");
    assert!(read.contains("persisted in sub"), "{read}");
    let (header, _) = read.split_once('\n').unwrap();
    let numbers: Vec<u64> = header
        .trim_start_matches("[lines ")
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    assert!(
        numbers.len() == 3 && numbers[0] + 1 == numbers[1] && numbers[1] == numbers[2],
        "{header}"
    );
    // Past the start: what is kept, numbered from 1 as pages are.
    let none = tool_result(&env, "r0");
    assert!(
        none.starts_with("[no lines there: the terminal keeps lines 1–"),
        "{none}"
    );
    // A foreground command that keeps running: the send settles when its
    // output goes quiet, and says what runs.
    let running = tool_result(&env, "s4");
    assert!(running.contains("running sleep 100"), "{running}");
    // ^C stops it; the shell survives and saw it end by SIGINT.
    assert!(
        tool_result(&env, "g1").contains("Sent SIGINT"),
        "{}",
        tool_result(&env, "g1")
    );
    let after = tool_result(&env, "s5");
    assert!(after.contains("alive after 130"), "{after}");
    assert!(
        tool_result(&env, "k1").contains("use terminal_close"),
        "{}",
        tool_result(&env, "k1")
    );
    let listed = tool_result(&env, "l1");
    assert!(
        listed.contains("t1\tmain\t") && listed.contains("alive"),
        "{listed}"
    );
    assert!(
        tool_result(&env, "x1").contains("\"shell\""),
        "{}",
        tool_result(&env, "x1")
    );
    assert!(
        tool_result(&env, "c1").contains("Closed terminal t1"),
        "{}",
        tool_result(&env, "c1")
    );
    // Close returned once the tree was gone: the shell and its
    // background job are no more.
    assert!(
        !pid_alive(shell) && !pid_alive(sleeper),
        "close left processes"
    );
    assert!(
        tool_result(&env, "r2").contains("No terminal"),
        "{}",
        tool_result(&env, "r2")
    );
    conn.finish().await;
}

#[tokio::test]
async fn closing_the_session_reaps_an_open_terminal() {
    let env = TestEnv::with_config(ENABLE).await;
    let cwd = env.cwd();
    let pids = cwd.join("pids");
    env.mock
        .push_json(call("o1", "terminal_open", json!({"type": "shell"})));
    env.mock.push_json(send("s1", &record_pids(&pids)));
    env.mock
        .push_json(send("s2", "echo \"history in $HISTFILE\""));
    env.mock.push_json(reply("left open"));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "open one").await.unwrap();
    // The user's ~/.bash_history is neither read nor written.
    let history = tool_result(&env, "s2");
    assert!(history.contains("history in /dev/null"), "{history}");
    let all = shell_and_sleeper(&pids);
    assert!(all.iter().all(|pid| pid_alive(*pid)));
    conn.finish().await;
    assert!(all_gone(&all).await, "a terminal outlived its session");
}

#[tokio::test]
async fn in_ask_mode_opening_and_each_sent_line_are_asked_and_run_sandboxed() {
    let env = TestEnv::with_config(ENABLE).await;
    let cwd = env.cwd();
    env.mock
        .push_json(call("o1", "terminal_open", json!({"type": "shell"})));
    env.mock.push_json(send("s1", "echo sandbox=$DSH_SANDBOX"));
    env.mock
        .push_json(send("s2", "echo $$ > shell.pid; sleep 100"));
    env.mock.push_json(call(
        "g1",
        "terminal_signal",
        json!({"sessionId": "t1", "signal": "SIGINT"}),
    ));
    env.mock.push_json(send("s3", "echo \"back $?\""));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, false);
    for _ in 0..4 {
        sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    }
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&cwd).await;
    conn.prompt(&session, "use a terminal").await.unwrap();
    // Opening the shell and every line typed into it were asked about;
    // reading and signalling were not.
    assert_eq!(sim.asked(), ["o1", "s1", "s2", "s3"]);
    let first = tool_result(&env, "s1");
    assert!(first.contains("sandbox=files"), "{first}");
    // Job control works in the sandbox too: ^C reaches the foreground job.
    let shell = pid_in(&cwd.join("shell.pid")).await;
    assert!(
        tool_result(&env, "s3").contains("back 130"),
        "{}",
        tool_result(&env, "s3")
    );
    conn.finish().await;
    assert!(all_gone(&[shell]).await, "the shell outlived its session");
}

#[tokio::test]
async fn terminals_are_offered_only_when_enabled() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("o1", "terminal_open", json!({"type": "shell"})));
    env.mock.push_json(reply("no"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "try").await.unwrap();
    assert!(
        tool_result(&env, "o1").contains("Unknown tool"),
        "{}",
        tool_result(&env, "o1")
    );
    conn.finish().await;
}

/// The updates of call `id`, as JSON, in order.
fn updates_of(conn: &crate::support::Conn, id: &str) -> Vec<serde_json::Value> {
    use agent_client_protocol::v1::schema::SessionUpdate;
    conn.updates()
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(update) if update.tool_call_id.0.as_ref() == id => {
                Some(serde_json::to_value(update).unwrap())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_send_shows_its_output_live_and_runs_in_the_background_as_a_job() {
    let env = TestEnv::with_config(ENABLE).await;
    env.mock
        .push_json(call("o1", "terminal_open", json!({"type": "shell"})));
    // Runs until the test, having seen tick1 live, makes the gate (the
    // line itself does not say "tick1").
    env.mock.push_json(send(
        "s1",
        "i=1; echo tick$i; while [ ! -e gate ]; do sleep 0.05; done; echo tick$((i+1)); echo tick$((i+2))",
    ));
    // Two lines: settled at the second's prompt, not the first's.
    env.mock
        .push_json(send("s2", "true\nsleep 1.5; echo lines-done"));
    // Nothing but the echo for longer than a busy program's silence.
    env.mock.push_json(send("s3", "sleep 2.5; echo quiet-done"));
    env.mock.push_json(call(
        "b1",
        "terminal_send",
        json!({"sessionId": "t1", "text": "sleep 2.5; echo bg-done", "run_in_background": true}),
    ));
    env.mock.push_json(call(
        "j1",
        "job_output",
        json!({"job_id": "j1", "wait": true}),
    ));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    let gate = env.cwd().join("gate");
    let (done, ()) = tokio::join!(conn.prompt(&session, "watch it"), async {
        conn.wait_for("tick1 shown live", |updates| {
            updates
                .iter()
                .any(|u| serde_json::to_string(u).unwrap().contains("tick1"))
        })
        .await;
        std::fs::write(&gate, "").unwrap();
    });
    done.unwrap();
    let output = tool_result(&env, "s1");
    assert!(output.contains("tick1\ntick2\ntick3\n"), "{output}");
    assert!(output.contains("back at its prompt"), "{output}");
    for (id, done) in [("s2", "lines-done"), ("s3", "quiet-done")] {
        let output = tool_result(&env, id);
        assert!(
            output.contains(done) && output.contains("back at its prompt"),
            "{output}"
        );
    }
    // While it ran, the call showed the output so far (a console block:
    // this client has no terminal convention).
    let updates = updates_of(&conn, "s1");
    let end = updates
        .iter()
        .position(|u| u["status"] == "completed")
        .unwrap_or_else(|| panic!("{updates:#?}"));
    let live: Vec<String> = updates[..end]
        .iter()
        .map(|u| u["content"].to_string())
        .filter(|c| c.contains("tick1"))
        .collect();
    assert!(
        live.iter().any(|c| !c.contains("tick3")),
        "no sample before the end: {updates:#?}"
    );
    assert!(
        tool_result(&env, "b1").contains("Started background job j1"),
        "{}",
        tool_result(&env, "b1")
    );
    let job = tool_result(&env, "j1");
    assert!(
        job.contains("bg-done") && job.contains("[status: done]"),
        "{job}"
    );
    conn.finish().await;
}

#[tokio::test]
async fn a_stricter_mode_closes_the_terminals_opened_in_a_looser_one() {
    let env = TestEnv::with_config(ENABLE).await;
    let pids = env.cwd().join("pids");
    env.mock
        .push_json(call("o1", "terminal_open", json!({"type": "shell"})));
    env.mock.push_json(send("s1", &record_pids(&pids)));
    env.mock.push_json(reply("open"));
    env.mock.push_json(send("s2", "echo hi"));
    env.mock.push_json(reply("refused"));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "open").await.unwrap();
    let all = shell_and_sleeper(&pids);
    // Full-access → accept-edits: the terminal (no sandbox, the agent's
    // environment) and what runs in it are gone, and that is said.
    conn.set_mode(&session, "accept-edits").await;
    assert!(
        all_gone(&all).await,
        "a full-access terminal outlived the mode"
    );
    assert!(env
        .log_events(&session)
        .iter()
        .any(|e| e["type"] == "agent/notice"
            && e["data"]["text"]
                .as_str()
                .unwrap()
                .contains("looser mode's sandbox: terminal t1 (opened in full-access)")));
    conn.prompt(&session, "send").await.unwrap();
    let refused = tool_result(&env, "s2");
    assert!(refused.contains("No terminal \"t1\""), "{refused}");
    conn.finish().await;
}

#[tokio::test]
async fn a_terminal_dies_with_a_killed_dsh() {
    let env = TestEnv::with_config(ENABLE).await;
    let pids = env.cwd().join("pids");
    env.mock
        .push_json(call("o1", "terminal_open", json!({"type": "shell"})));
    env.mock.push_json(send("s1", &record_pids(&pids)));
    env.mock.push_json(reply("left open"));
    let mut conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "open one").await.unwrap();
    let all = shell_and_sleeper(&pids);
    // dsh is killed outright: the guard's death signal sweeps the tree.
    conn.child.start_kill().unwrap();
    conn.child.wait().await.unwrap();
    assert!(all_gone(&all).await, "a terminal outlived a killed dsh");
}

#[tokio::test]
async fn a_program_started_in_a_terminal_is_fed_input_across_calls() {
    let env = TestEnv::with_config(ENABLE).await;
    env.mock
        .push_json(call("o1", "terminal_open", json!({"type": "shell"})));
    // A plain `sh` in the terminal: no prompt mark, so each send settles
    // when the output goes quiet.
    env.mock.push_json(send("s1", "sh"));
    env.mock.push_json(send("s2", "answer=42; cd /"));
    env.mock.push_json(send("s3", "echo \"$answer from $PWD\""));
    env.mock.push_json(send("s4", "exit"));
    env.mock
        .push_json(send("s5", "echo \"bash again ${answer:-unset}\""));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "use sh").await.unwrap();
    let listed = tool_result(&env, "s1");
    assert!(listed.contains("[terminal t1: running sh]"), "{listed}");
    let third = tool_result(&env, "s3");
    assert!(third.contains("42 from /"), "{third}");
    assert!(
        third.contains("[settled: the output went quiet]"),
        "{third}"
    );
    let back = tool_result(&env, "s5");
    assert!(back.contains("bash again unset"), "{back}");
    assert!(back.contains("back at its prompt"), "{back}");
    conn.finish().await;
}

#[tokio::test]
async fn a_client_with_the_terminal_convention_gets_a_sends_output_as_a_terminal() {
    let env = TestEnv::with_config(ENABLE).await;
    env.mock
        .push_json(call("o1", "terminal_open", json!({"type": "shell"})));
    env.mock.push_json(send(
        "s1",
        "for i in 1 2 3; do echo tick$i; sleep 0.2; done",
    ));
    env.mock.push_json(reply("done"));
    let conn = env
        .connect_with(ClientSim::with_terminal_output(false))
        .await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "watch it").await.unwrap();
    let updates = updates_of(&conn, "s1");
    let info = updates
        .iter()
        .find(|u| u["_meta"]["terminal_info"].is_object())
        .unwrap_or_else(|| panic!("terminal_info: {updates:#?}"));
    assert_eq!(info["_meta"]["terminal_info"]["terminal_id"], "s1");
    let outputs: Vec<&str> = updates
        .iter()
        .filter_map(|u| u["_meta"]["terminal_output"]["data"].as_str())
        .collect();
    assert!(outputs.iter().any(|o| o.contains("tick1")), "{updates:#?}");
    conn.finish().await;
}

#[tokio::test]
async fn every_send_is_asked_and_no_allow_rule_covers_it() {
    let env = TestEnv::with_config(ENABLE).await;
    let cwd = env.cwd();
    // An "always" for `echo` as a command of the bash tool…
    let bash = |id: &str, command: &str| {
        call(
            id,
            "bash",
            json!({"command": command, "description": "Print"}),
        )
    };
    env.mock.push_json(bash("b1", "echo one"));
    env.mock
        .push_json(call("o1", "terminal_open", json!({"type": "shell"})));
    // …covers no send: a terminal keeps state (aliases, functions,
    // `exec`, a program in the foreground) a rule cannot see.
    env.mock.push_json(send("s1", "echo two"));
    env.mock.push_json(send("s2", "echo three"));
    env.mock.push_json(bash("b2", "echo four"));
    // Keys to the terminal or to readline: refused unasked.
    env.mock.push_json(send("s8", "echo five #\rtouch evil"));
    env.mock.push_json(send("s9", "cat .ss\tid"));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowAlways));
    for _ in 0..3 {
        sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    }
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&cwd).await;
    conn.prompt(&session, "use a terminal").await.unwrap();
    assert_eq!(sim.asked(), ["b1", "o1", "s1", "s2"]);
    assert!(tool_result(&env, "s1").contains("two"));
    assert!(tool_result(&env, "s2").contains("three"));
    assert!(tool_result(&env, "b2").contains("four"));
    for id in ["s8", "s9"] {
        let refused = tool_result(&env, id);
        assert!(refused.contains("control character"), "{refused}");
    }
    assert!(!cwd.join("evil").exists() && !Path::new("/evil").exists());
    conn.finish().await;
}
