//! Tools, the permission policy and editor-native presentation, end to end.

use std::time::Duration;

use agent_client_protocol::v1::schema::{
    PermissionOptionKind, SessionUpdate, StopReason, ToolCallContent, ToolCallStatus, ToolKind,
};
use serde_json::{json, Value};

use crate::support::{
    call, calls, kinds, pid_alive, reply, tool_result, Answer, ClientSim, Conn, TestEnv,
};

fn tool_calls(conn: &Conn) -> Vec<agent_client_protocol::v1::schema::ToolCall> {
    conn.updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::ToolCall(call) => Some(call),
            _ => None,
        })
        .collect()
}

fn final_update(conn: &Conn, call_id: &str) -> agent_client_protocol::v1::schema::ToolCallUpdate {
    conn.updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::ToolCallUpdate(update)
                if update.tool_call_id.0.as_ref() == call_id
                    && matches!(
                        update.fields.status,
                        Some(ToolCallStatus::Completed | ToolCallStatus::Failed)
                    ) =>
            {
                Some(update)
            }
            _ => None,
        })
        .last()
        .unwrap_or_else(|| panic!("no final update for {call_id}"))
}

#[tokio::test]
async fn reads_and_searches_run_without_prompts_with_locations_and_caps() {
    let env = TestEnv::new().await;
    let root = env.cwd().canonicalize().unwrap();
    std::fs::write(root.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(root.join("b.bin"), [0u8, 1, 2, 0xff, 0]).unwrap();
    std::fs::create_dir(root.join("ignored")).unwrap();
    std::fs::write(root.join("ignored/two.txt"), "two\n").unwrap();
    std::fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
    env.mock.push_json(calls(&[
        ("r1", "read", json!({"file_path":"a.txt","offset":2})),
        ("r2", "read", json!({"file_path":"b.bin"})),
        ("g1", "glob", json!({"pattern":"*.txt"})),
        ("g2", "grep", json!({"pattern":"tw.","include":"*.txt"})),
    ]));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    assert_eq!(
        conn.prompt(&session, "look").await.unwrap().stop_reason,
        StopReason::EndTurn
    );

    assert!(
        conn.sim.permission_requests.lock().unwrap().is_empty(),
        "reads inside the roots never ask"
    );
    assert_eq!(tool_result(&env, "r1"), "     2\ttwo\n     3\tthree\n");
    assert!(
        tool_result(&env, "r2").contains("not a text file"),
        "{}",
        tool_result(&env, "r2")
    );
    let globbed = tool_result(&env, "g1");
    // The catalog's glob lists ignored files too.
    assert!(
        globbed.contains("a.txt")
            && globbed.contains("hello.txt")
            && globbed.contains("ignored/two.txt"),
        "{globbed}"
    );
    assert_eq!(tool_result(&env, "g2"), "a.txt\n     2: two\n");

    let calls = tool_calls(&conn);
    assert_eq!(calls[0].title, "Read a.txt (from line 2)");
    assert_eq!(calls[0].kind, ToolKind::Read);
    assert_eq!(calls[0].locations[0].path, root.join("a.txt"));
    assert_eq!(calls[0].locations[0].line, Some(2));
    assert_eq!(calls[3].kind, ToolKind::Search);
    let grep = final_update(&conn, "g2");
    let locations = grep.fields.locations.unwrap();
    assert_eq!(
        (locations[0].path.clone(), locations[0].line),
        (root.join("a.txt"), Some(2))
    );
    assert_eq!(
        final_update(&conn, "r2").fields.status,
        Some(ToolCallStatus::Failed)
    );
    // The finished call's rawOutput is what the model got, with the error
    // when it failed.
    assert_eq!(
        final_update(&conn, "r1").fields.raw_output,
        Some(json!({"output": tool_result(&env, "r1")}))
    );
    let failed = final_update(&conn, "r2").fields.raw_output.unwrap();
    assert_eq!(failed["output"], tool_result(&env, "r2"));
    assert!(
        failed["error"]["code"].is_string() && failed["error"]["message"].is_string(),
        "{failed}"
    );

    // Results are logged in model order even though they ran concurrently.
    let results: Vec<String> = env
        .log_events(&session)
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .map(|e| e["data"]["call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(results, ["r1", "r2", "g1", "g2"]);
    conn.finish().await;
}

#[tokio::test]
async fn edits_show_diffs_equal_to_disk_and_ambiguous_matches_explain_themselves() {
    let env = TestEnv::new().await;
    let root = env.cwd().canonicalize().unwrap();
    let file = root.join("lib.rs");
    let before = "fn a() {}\nfn b() {}\nfn b() {}\n";
    std::fs::write(&file, before).unwrap();
    env.mock.push_json(call(
        "e2",
        "edit",
        json!({"file_path":"lib.rs","old_string":"fn b() {}","new_string":"fn x() {}"}),
    ));
    env.mock.push_json(call("e1", "edit", json!({"file_path":"lib.rs","old_string":"fn b() {}\nfn b() {}","new_string":"fn b() {}\nfn c() {}"})));
    env.mock.push_json(call(
        "e3",
        "edit",
        json!({"file_path":"lib.rs","old_string":"fn   a() {}","new_string":"fn z() {}"}),
    ));
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path":"new/file.txt","content":"fresh\n"}),
    ));
    env.mock.push_json(reply("edited"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "accept-edits").await;
    assert_eq!(
        conn.prompt(&session, "edit").await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    assert!(
        conn.sim.permission_requests.lock().unwrap().is_empty(),
        "accept-edits writes inside the roots without asking"
    );

    let after = std::fs::read_to_string(&file).unwrap();
    assert_eq!(after, "fn a() {}\nfn b() {}\nfn c() {}\n");
    let update = final_update(&conn, "e1");
    assert_eq!(update.fields.status, Some(ToolCallStatus::Completed));
    match &update.fields.content.as_ref().unwrap()[0] {
        ToolCallContent::Diff(diff) => {
            assert_eq!(diff.path, file);
            assert_eq!(diff.old_text.as_deref(), Some(before));
            assert_eq!(
                diff.new_text, after,
                "the diff's new text is what is on disk"
            );
        }
        other => panic!("expected a diff, got {other:?}"),
    }
    assert_eq!(
        update.fields.locations.unwrap()[0].line,
        Some(3),
        "first changed line"
    );
    assert_eq!(tool_calls(&conn)[1].title, "Edit lib.rs");

    let ambiguous = tool_result(&env, "e2");
    assert!(
        ambiguous.contains("matches 2 places") && ambiguous.contains("lines 2, 3"),
        "{ambiguous}"
    );
    let missing = tool_result(&env, "e3");
    assert!(missing.contains("0 matches"), "{missing}");
    match &final_update(&conn, "w1").fields.content.as_ref().unwrap()[0] {
        ToolCallContent::Diff(diff) => assert_eq!(
            (diff.old_text.clone(), diff.new_text.as_str()),
            (None, "fresh\n")
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(root.join("new/file.txt")).unwrap(),
        "fresh\n"
    );
    conn.finish().await;

    // session/load replays the tool calls with their diffs.
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    match &final_update(&conn, "e1").fields.content.as_ref().unwrap()[0] {
        ToolCallContent::Diff(diff) => assert_eq!(diff.new_text, after),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        kinds(&conn.updates())
            .iter()
            .filter(|k| **k == "tool_call")
            .count(),
        4
    );
    conn.finish().await;
}

#[tokio::test]
async fn permission_answers_once_always_and_rules_survive_load() {
    let env = TestEnv::new().await;
    let root = env.cwd().canonicalize().unwrap();
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path":"allowed.txt","content":"yes"}),
    ));
    env.mock.push_json(call(
        "w2",
        "write",
        json!({"file_path":"rejected.txt","content":"no"}),
    ));
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command":"echo first","description":"print"}),
    ));
    env.mock.push_json(call(
        "b2",
        "bash",
        json!({"command":"echo second time","description":"print"}),
    ));
    env.mock.push_json(call(
        "b3",
        "bash",
        json!({"command":"echo x; touch pwned","description":"sneaky"}),
    ));
    env.mock.push_json(call(
        "b4",
        "bash",
        json!({"command":"rm -f a","description":"remove"}),
    ));
    env.mock.push_json(call(
        "b5",
        "bash",
        json!({"command":"rm -f b","description":"remove"}),
    ));
    env.mock.push_json(reply("ok"));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    sim.answer(Answer::Select(PermissionOptionKind::RejectOnce));
    sim.answer(Answer::Select(PermissionOptionKind::AllowAlways));
    sim.answer(Answer::Select(PermissionOptionKind::RejectOnce)); // b3: the rule must not cover it
    sim.answer(Answer::Select(PermissionOptionKind::RejectAlways));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    assert_eq!(
        conn.prompt(&session, "go").await.unwrap().stop_reason,
        StopReason::EndTurn
    );

    let requests = sim.permission_requests.lock().unwrap().clone();
    let asked: Vec<&str> = requests
        .iter()
        .map(|r| r.tool_call.tool_call_id.0.as_ref())
        .collect();
    assert_eq!(
        asked,
        ["w1", "w2", "b1", "b3", "b4"],
        "b2 matched the 'echo' rule, b5 the 'rm' reject rule"
    );
    let offered: Vec<PermissionOptionKind> = requests[0].options.iter().map(|o| o.kind).collect();
    assert_eq!(
        offered,
        [
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways
        ]
    );
    assert_eq!(
        requests[0].tool_call.fields.title.as_deref(),
        Some("Write allowed.txt")
    );

    assert_eq!(
        std::fs::read_to_string(root.join("allowed.txt")).unwrap(),
        "yes"
    );
    assert!(!root.join("rejected.txt").exists());
    assert!(!root.join("pwned").exists());
    assert!(
        tool_result(&env, "w2").contains("rejected"),
        "{}",
        tool_result(&env, "w2")
    );
    assert!(tool_result(&env, "w2").contains("Do not retry"));
    assert!(
        tool_result(&env, "b2").contains("second time\n[exit code: 0]"),
        "{}",
        tool_result(&env, "b2")
    );
    assert!(
        tool_result(&env, "b5").contains("always reject"),
        "{}",
        tool_result(&env, "b5")
    );
    let events = env.log_events(&session);
    let rules: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "permission/rule")
        .map(|e| &e["data"])
        .collect();
    assert_eq!(
        rules,
        [
            &json!({"tool":"bash","scope":"echo","allow":true}),
            &json!({"tool":"bash","scope":"rm","allow":false})
        ]
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "permission/decision")
            .count(),
        5
    );
    conn.finish().await;

    // A new process: the rules come back with the session.
    env.mock.push_json(call(
        "b6",
        "bash",
        json!({"command":"echo after load","description":"print"}),
    ));
    env.mock.push_json(reply("ok"));
    let sim = ClientSim::new(false, false);
    let conn = env.connect_with(sim.clone()).await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    conn.prompt(&session, "again").await.unwrap();
    assert!(sim.permission_requests.lock().unwrap().is_empty());
    assert!(tool_result(&env, "b6").contains("after load"));
    conn.finish().await;
}

#[tokio::test]
async fn a_cancelled_permission_prompt_cancels_the_turn() {
    let env = TestEnv::new().await;
    env.mock.push_json(calls(&[
        ("w1", "write", json!({"file_path":"a.txt","content":"x"})),
        ("w2", "write", json!({"file_path":"b.txt","content":"y"})),
    ]));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Cancelled);
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    assert_eq!(
        conn.prompt(&session, "go").await.unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert!(!env.cwd().join("a.txt").exists() && !env.cwd().join("b.txt").exists());
    let results: Vec<Value> = env
        .log_events(&session)
        .into_iter()
        .filter(|e| e["type"] == "tool/result")
        .collect();
    assert_eq!(results[0]["data"]["error"]["code"], "permission.cancelled");
    assert_eq!(results[1]["data"]["error"]["code"], "tool.aborted");
    assert_eq!(sim.permission_requests.lock().unwrap().len(), 1);
    // The session goes on, and its history is valid.
    env.mock.push_json(reply("fine"));
    assert_eq!(
        conn.prompt(&session, "next").await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    conn.finish().await;
}

#[tokio::test]
async fn modes_read_only_and_full_access() {
    let env = TestEnv::new().await;
    let root = env.cwd().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let outside_file = outside.path().canonicalize().unwrap().join("out.txt");
    env.mock.push_json(calls(&[
        ("r1", "read", json!({"file_path":"hello.txt"})),
        ("w1", "write", json!({"file_path":"x.txt","content":"x"})),
        (
            "b1",
            "bash",
            json!({"command":"touch y.txt","description":"touch"}),
        ),
        (
            "r2",
            "read",
            json!({"file_path": outside_file.display().to_string()}),
        ),
    ]));
    env.mock.push_json(reply("read-only done"));
    env.mock.push_json(calls(&[
        (
            "w2",
            "write",
            json!({"file_path": outside_file.display().to_string(),"content":"far"}),
        ),
        (
            "b2",
            "bash",
            json!({"command":"touch z.txt","description":"touch"}),
        ),
    ]));
    env.mock.push_json(reply("full done"));
    let sim = ClientSim::new(false, false);
    // The command is asked about: it runs in the read-only sandbox.
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "read-only").await;
    conn.prompt(&session, "try").await.unwrap();
    assert!(tool_result(&env, "r1").contains("hello"));
    for id in ["w1", "r2"] {
        let result = tool_result(&env, id);
        assert!(
            result.contains("read-only mode") && result.contains("do not retry"),
            "{id}: {result}"
        );
    }
    assert!(
        tool_result(&env, "b1").contains("[sandbox: file access denied under read-only mode]"),
        "{}",
        tool_result(&env, "b1")
    );
    assert!(!root.join("x.txt").exists() && !root.join("y.txt").exists());

    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "now").await.unwrap();
    assert_eq!(
        sim.asked(),
        ["b1"],
        "only read-only's command prompts; full access never does"
    );
    assert_eq!(std::fs::read_to_string(&outside_file).unwrap(), "far");
    assert!(root.join("z.txt").exists());
    conn.finish().await;
}

#[tokio::test]
async fn a_mode_change_applies_to_the_next_tool_call() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path":"first.txt","content":"1"}),
    ));
    env.mock.push_json(call(
        "w2",
        "write",
        json!({"file_path":"second.txt","content":"2"}),
    ));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, false);
    // While the first prompt is open, the user switches to read-only, then
    // allows: the mode at the moment of the answer decides (issue 10, item 8).
    sim.answer(Answer::SwitchModeThenSelect(
        "read-only".into(),
        PermissionOptionKind::AllowOnce,
    ));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "go").await.unwrap();
    assert!(!env.cwd().join("first.txt").exists());
    assert!(tool_result(&env, "w1").contains("read-only mode"));
    assert!(!env.cwd().join("second.txt").exists());
    assert!(tool_result(&env, "w2").contains("read-only mode"));
    assert_eq!(sim.permission_requests.lock().unwrap().len(), 1);
    conn.finish().await;
}

#[tokio::test]
async fn paths_escaping_the_roots_are_never_automatic() {
    let env = TestEnv::new().await;
    let outside = tempfile::tempdir().unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path(), env.cwd().join("link")).unwrap();
    env.mock.push_json(calls(&[
        (
            "w1",
            "write",
            json!({"file_path":"../escape.txt","content":"x"}),
        ),
        (
            "w2",
            "write",
            json!({"file_path":"link/through-symlink.txt","content":"x"}),
        ),
        (
            "e1",
            "edit",
            json!({"file_path":"sub/../../escape2.txt","old_string":"a","new_string":"b"}),
        ),
    ]));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, false);
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "accept-edits").await;
    conn.prompt(&session, "go").await.unwrap();
    let asked = sim.asked();
    assert_eq!(
        asked,
        ["w1", "w2"],
        "outside writes ask even in accept-edits; e1's path cannot be resolved"
    );
    assert!(!env.cwd().parent().unwrap().join("escape.txt").exists());
    assert!(!outside.path().join("through-symlink.txt").exists());
    let locations = tool_calls(&conn)[1].locations.clone();
    assert!(
        locations[0]
            .path
            .starts_with(outside.path().canonicalize().unwrap()),
        "the location is where it really lands: {locations:?}"
    );
    conn.finish().await;
}

#[tokio::test]
async fn a_client_with_fs_gets_reads_and_writes_through_the_protocol() {
    let env = TestEnv::new().await;
    let root = env.cwd().canonicalize().unwrap();
    env.mock
        .push_json(call("r1", "read", json!({"file_path":"hello.txt"})));
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path":"new.txt","content":"via client\n"}),
    ));
    env.mock.push_json(call(
        "e1",
        "edit",
        json!({"file_path":"hello.txt","old_string":"unsaved","new_string":"edited"}),
    ));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(true, false);
    sim.buffers
        .lock()
        .unwrap()
        .insert(root.join("hello.txt"), "unsaved buffer\n".into());
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "accept-edits").await;
    conn.prompt(&session, "go").await.unwrap();
    assert_eq!(
        tool_result(&env, "r1"),
        "     1\tunsaved buffer\n",
        "reads see the editor's buffer"
    );
    let writes = sim.writes.lock().unwrap().clone();
    assert_eq!(
        writes,
        [
            (root.join("new.txt"), "via client\n".to_owned()),
            (root.join("hello.txt"), "edited buffer\n".to_owned())
        ]
    );
    assert!(
        !root.join("new.txt").exists(),
        "writes go to the editor, not the disk"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("hello.txt")).unwrap(),
        "hello\n"
    );
    conn.finish().await;
}

#[tokio::test]
async fn a_client_with_a_terminal_runs_bash_there() {
    // The sandbox cannot reach the editor's terminal: it is used only when
    // the configuration prefers it.
    let env = TestEnv::with_config("[sandbox]\nprefer_local = false").await;
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command":"echo from-terminal; exit 3","description":"terminal run"}),
    ));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, true);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "go").await.unwrap();
    assert_eq!(
        *sim.terminal_calls.lock().unwrap(),
        ["create", "wait_for_exit", "output", "release"]
    );
    let result = tool_result(&env, "b1");
    assert!(
        result.contains("from-terminal") && result.contains("[exit code: 3]"),
        "{result}"
    );
    let update = final_update(&conn, "b1");
    assert!(
        matches!(&update.fields.content.as_ref().unwrap()[0], ToolCallContent::Terminal(t) if t.terminal_id.0.starts_with("term-"))
    );
    assert_eq!(tool_calls(&conn)[0].kind, ToolKind::Execute);
    conn.finish().await;
}

#[tokio::test]
async fn without_a_client_terminal_bash_runs_locally_with_a_scrubbed_env() {
    let mut env = TestEnv::new().await;
    env.extra_env
        .push(("MY_SECRET_TOKEN".into(), "hunter2".into()));
    env.mock.push_json(call("b1", "bash", json!({"command":"echo out; echo err >&2; env | grep -c hunter2; exit 3","description":"local run"})));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "go").await.unwrap();
    let result = tool_result(&env, "b1");
    // stdout and stderr are two pipes: their lines may interleave
    // either way under load.
    let lines: Vec<&str> = result.lines().collect();
    assert!(
        lines.contains(&"out")
            && lines.contains(&"err")
            && lines.contains(&"0")
            && result.ends_with("[exit code: 3]"),
        "{result}"
    );
    assert!(!result.contains("test-key-d5h"));
    conn.finish().await;
}

#[tokio::test]
async fn bash_timeout_and_cancel_leave_no_process_behind() {
    let env = TestEnv::new().await;
    env.mock.push_json(call("b1", "bash", json!({"command":"sleep 30 & echo $! > bg1.pid; sleep 30","description":"slow","timeoutMs":500})));
    env.mock.push_json(reply("timed out"));
    env.mock.push_json(call(
        "b2",
        "bash",
        json!({"command":"sleep 30 & echo $! > bg2.pid; sleep 30","description":"slow"}),
    ));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "one").await.unwrap();
    assert!(
        tool_result(&env, "b1").contains("timed out after 0.5 s"),
        "{}",
        tool_result(&env, "b1")
    );
    let pid: u32 = std::fs::read_to_string(env.cwd().join("bg1.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !pid_alive(pid),
        "the background child of a timed-out command is killed"
    );

    let prompt = conn.send_prompt(&session, "two");
    let pid_file = env.cwd().join("bg2.pid");
    for _ in 0..100 {
        if std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n')) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(pid_alive(pid));
    conn.cancel(&session);
    assert_eq!(
        prompt.block_task().await.unwrap().stop_reason,
        StopReason::Cancelled
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!pid_alive(pid), "cancel kills the whole process group");
    let result = env
        .log_events(&session)
        .into_iter()
        .rfind(|e| e["type"] == "tool/result")
        .unwrap();
    assert!(result["data"]["output"]
        .as_str()
        .unwrap()
        .contains("cancelled by the user"));
    conn.finish().await;
}

#[tokio::test]
async fn todo_write_sends_plans_and_load_replays_them() {
    let env = TestEnv::new().await;
    env.mock.push_json(call("t1", "todo_write", json!({"todos":[{"content":"Read code","status":"in_progress"},{"content":"Fix bug","status":"pending"}]})));
    env.mock.push_json(call("t2", "todo_write", json!({"todos":[{"content":"Read code","status":"completed"},{"content":"Fix bug","status":"in_progress"}]})));
    env.mock.push_json(call(
        "t3",
        "todo_write",
        json!({"todos":[{"content":"Bad","status":"done"}]}),
    ));
    env.mock.push_json(reply("planned"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "plan").await.unwrap();
    let plans: Vec<Value> = conn
        .updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::Plan(plan) => Some(serde_json::to_value(plan).unwrap()),
            _ => None,
        })
        .collect();
    assert_eq!(plans.len(), 2);
    assert_eq!(plans[1]["entries"][0]["status"], "completed");
    assert_eq!(plans[1]["entries"][1]["content"], "Fix bug");
    assert!(tool_result(&env, "t3").contains("use pending, in_progress or completed"));
    conn.finish().await;

    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    let replayed: Vec<Value> = conn
        .updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::Plan(plan) => Some(serde_json::to_value(plan).unwrap()),
            _ => None,
        })
        .collect();
    assert_eq!(replayed, plans, "replay shows every plan, as live did");
    conn.finish().await;
}

#[tokio::test]
async fn read_hands_images_to_image_capable_models_after_the_tool_results() {
    let env = TestEnv::new().await;
    let png = base64_decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==");
    std::fs::write(env.cwd().join("pixel.dat"), &png).unwrap();
    env.mock.push_json(calls(&[
        ("i1", "read", json!({"file_path":"pixel.dat"})),
        ("r1", "read", json!({"file_path":"hello.txt"})),
    ]));
    env.mock.push_json(reply("a single pixel"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_option(&session, "model", "deepseek-v4-flash-vision-exp")
        .await;
    conn.prompt(&session, "what is in pixel.dat?")
        .await
        .unwrap();
    assert!(
        tool_result(&env, "i1").contains("PNG image"),
        "sniffed from content, not the extension"
    );
    let messages = env.mock.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .clone();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "user"],
        "the image follows the tool results"
    );
    let image = &messages[5]["content"][0];
    assert_eq!(image["type"], "image_url");
    assert!(image["image_url"]["url"]
        .as_str()
        .unwrap()
        .starts_with("data:image/png;base64,iVBOR"));
    conn.finish().await;
}

#[tokio::test]
async fn legacy_set_mode_is_honoured_and_reported_as_a_config_update() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path":"x.txt","content":"x"}),
    ));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, false);
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.cx
        .send_request(
            agent_client_protocol::v1::schema::SetSessionModeRequest::new(
                session.clone(),
                "read-only",
            ),
        )
        .block_task()
        .await
        .unwrap();
    conn.wait_for("config_option_update", |u| kinds(u).contains(&"config"))
        .await;
    conn.prompt(&session, "write").await.unwrap();
    assert!(tool_result(&env, "w1").contains("read-only mode"));
    assert!(sim.permission_requests.lock().unwrap().is_empty());
    let err = conn
        .cx
        .send_request(
            agent_client_protocol::v1::schema::SetSessionModeRequest::new(session.clone(), "yolo"),
        )
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(i32::from(err.code), -32602);
    conn.finish().await;
}

#[tokio::test]
async fn a_tool_call_cut_off_by_a_crash_is_repaired_on_load() {
    let env = TestEnv::new().await;
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.finish().await;
    // What a SIGKILL mid-tool leaves: the call is logged, its result is not.
    let mut log = std::fs::read_to_string(env.log_path(&session)).unwrap();
    for line in [
        json!({"seq":1,"time":1,"type":"user/message","data":{"turn":1,"content":[{"type":"text","text":"run it"}]}}),
        json!({"seq":2,"time":1,"type":"turn/start","data":{"turn":1}}),
        json!({"seq":3,"time":1,"type":"assistant/message","data":{"turn":1,"step":1,"text":"","reasoning":"","tool_calls":[{"id":"c9","name":"bash","arguments":"{\"command\":\"make\"}"}],"finish":"tool_calls"}}),
        json!({"seq":4,"time":1,"type":"tool/call","data":{"turn":1,"call_id":"c9","name":"bash","arguments":"{\"command\":\"make\"}","view":{"title":"Run make","kind":"execute"}}}),
    ] {
        log.push_str(&format!("{line}\n"));
    }
    std::fs::write(env.log_path(&session), log).unwrap();

    env.mock.push_json(reply("checking state"));
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    let update = final_update(&conn, "c9");
    assert_eq!(update.fields.status, Some(ToolCallStatus::Failed));
    conn.prompt(&session, "continue").await.unwrap();
    let messages = env.mock.requests()[0]["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(messages[3]["role"], "tool");
    assert!(messages[3]["content"]
        .as_str()
        .unwrap()
        .contains("outcome of this tool call is unknown"));
    conn.finish().await;
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

#[tokio::test]
async fn outputs_are_capped_with_visible_markers_and_spill_files() {
    let env = TestEnv::new().await;
    let root = env.cwd().canonicalize().unwrap();
    std::fs::write(
        root.join("long.txt"),
        format!("short\n{}\n", "x".repeat(5000)),
    )
    .unwrap();
    std::fs::create_dir(root.join("many")).unwrap();
    for i in 0..120 {
        std::fs::write(
            root.join(format!("many/f{i:03}.log")),
            "needle\nneedle\nneedle\n",
        )
        .unwrap();
    }
    env.mock.push_json(calls(&[
        ("r1", "read", json!({"file_path":"long.txt"})),
        ("g1", "glob", json!({"pattern":"*.log","path":"many"})),
        ("g2", "grep", json!({"pattern":"needle","path":"many"})),
        ("b1", "bash", json!({"command":"for i in $(seq 1 5000); do echo line-$i-padding-padding; done","description":"noisy"})),
    ]));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "go").await.unwrap();

    let read = tool_result(&env, "r1");
    assert!(
        read.contains("[line truncated: 5000 characters]"),
        "{}",
        &read[..200]
    );
    let globbed = tool_result(&env, "g1");
    assert_eq!(globbed.lines().filter(|l| l.ends_with(".log")).count(), 100);
    assert!(
        globbed.contains("This is a sample of 100 of 120 matching files"),
        "{globbed}"
    );
    let grepped = tool_result(&env, "g2");
    assert_eq!(
        grepped.lines().filter(|l| l.contains(": needle")).count(),
        250
    );
    assert!(
        grepped.contains("the first 250 of 360 matches are shown"),
        "{}",
        grepped.lines().last().unwrap()
    );
    assert_eq!(
        final_update(&conn, "g2").fields.locations.unwrap().len(),
        50,
        "locations are capped too"
    );

    let bash = tool_result(&env, "b1");
    assert!(
        bash.starts_with("[output truncated: showing the last"),
        "{}",
        &bash[..200]
    );
    assert!(bash.contains("line-5000-padding-padding\n[exit code: 0]"));
    let spill = bash
        .split("the full output is in ")
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap();
    let saved = std::fs::read_to_string(spill).unwrap();
    assert!(saved.starts_with("line-1-padding") && saved.contains("line-5000-"));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(spill).unwrap().permissions().mode() & 0o777,
        0o600
    );
    conn.finish().await;
}

#[tokio::test]
async fn a_broken_permission_channel_denies() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path":"x.txt","content":"x"}),
    ));
    env.mock.push_json(reply("ok"));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Error);
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    assert_eq!(
        conn.prompt(&session, "go").await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    assert!(!env.cwd().join("x.txt").exists());
    assert!(tool_result(&env, "w1").contains("could not be requested"));
    let decision = env
        .log_events(&session)
        .into_iter()
        .find(|e| e["type"] == "permission/decision")
        .unwrap();
    assert_eq!(decision["data"]["outcome"], "unavailable");
    conn.finish().await;
}
