//! Faults: model API failures in one long session, crashes mid-tool, a full
//! disk, client EOF mid-turn, and permission bypass attempts. After each,
//! the log must load and the history derived from it must be valid.

use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    EnvVariable, McpServer, McpServerStdio, PermissionOptionKind, SessionId, StopReason,
};
use serde_json::{json, Value};

use crate::support::{
    call, calls, kinds, procs, reply, test_lsp_binary, test_mcp_binary, tool_result, Answer,
    ClientSim, Conn, TestEnv,
};

/// An OpenAI chat history a provider accepts: system first, every
/// assistant tool call answered by exactly one tool message right after it,
/// no stray tool message, no empty assistant turn.
fn assert_valid_history(messages: &[Value]) {
    assert_eq!(messages[0]["role"], "system");
    let mut open: Vec<String> = Vec::new();
    for (index, message) in messages.iter().enumerate().skip(1) {
        let role = message["role"].as_str().unwrap();
        if role == "tool" {
            let id = message["tool_call_id"].as_str().unwrap().to_owned();
            assert!(
                open.contains(&id),
                "message {index}: tool result {id} answers no open call: {messages:#?}"
            );
            open.retain(|open| *open != id);
            continue;
        }
        assert!(
            open.is_empty(),
            "message {index}: calls {open:?} were never answered: {messages:#?}"
        );
        if role == "assistant" {
            let calls: Vec<String> = message["tool_calls"]
                .as_array()
                .map(|calls| {
                    calls
                        .iter()
                        .map(|c| c["id"].as_str().unwrap().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            let text = message["content"].as_str().unwrap_or("");
            assert!(
                !calls.is_empty() || !text.is_empty(),
                "message {index}: an empty assistant message: {messages:#?}"
            );
            open = calls;
        }
    }
    assert!(open.is_empty(), "unanswered calls at the end: {open:?}");
}

fn last_history(env: &TestEnv) -> Vec<Value> {
    env.mock.requests().last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone()
}

fn log_is_clean(env: &TestEnv, session: &SessionId) {
    let text = std::fs::read_to_string(env.log_path(session)).unwrap();
    for (number, line) in text.lines().enumerate() {
        assert!(
            serde_json::from_str::<Value>(line).is_ok(),
            "line {} of the session log is not JSON: {line}",
            number + 1
        );
    }
    assert!(text.ends_with('\n'));
}

#[tokio::test]
async fn model_faults_end_turns_clearly_and_the_log_stays_valid_for_the_next_prompt() {
    let env = TestEnv::new().await;
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let code = |err: &agent_client_protocol::Error| {
        err.data.as_ref().unwrap()["code"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    // 429 without Retry-After (backoff), then a reset before the response
    // head (retried), then success.
    env.mock.push_json(json!({"status":429}));
    env.mock.push_json(json!({"reset":true}));
    env.mock.push_json(reply("after 429 and reset"));
    let stop = conn.prompt(&session, "one").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    let retries: Vec<Value> = env
        .log_events(&session)
        .into_iter()
        .filter(|e| e["type"] == "llm/retry")
        .collect();
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert_eq!(retries[0]["data"]["error"]["code"], "model.rate_limit");
    assert_eq!(retries[1]["data"]["error"]["code"], "model.transport");

    // 429 with a Retry-After beyond the retry cap (300 ms here): not
    // waited out silently, the user is told how long the provider asked.
    env.mock.push_json(json!({"status":429,"retry_after":"1"}));
    let err = conn.prompt(&session, "two").await.unwrap_err();
    assert_eq!(code(&err), "model.rate_limit");
    assert!(
        err.message.contains("asked to wait 1 s") && err.message.contains("300 ms retry cap"),
        "{}",
        err.message
    );

    // 5xx until the retries run out.
    for _ in 0..4 {
        env.mock.push_json(json!({"status":503}));
    }
    let err = conn.prompt(&session, "three").await.unwrap_err();
    assert_eq!(code(&err), "model.server");
    assert!(err.message.contains("503"), "{}", err.message);

    // Reset mid-stream: the partial reply is kept, marked interrupted.
    env.mock.push_json(
        json!({"chunks":[{"text":"half "},{"text":"way"},{"text":" gone"}],"finish":"stop","drop_after":2}),
    );
    let err = conn.prompt(&session, "four").await.unwrap_err();
    assert_eq!(code(&err), "model.stream_closed");

    // An idle stream.
    env.mock.push_json(
        json!({"chunks":[{"text":"stalled"},{"text":" never"}],"finish":"stop","hang_after":1}),
    );
    let err = conn.prompt(&session, "five").await.unwrap_err();
    assert_eq!(code(&err), "model.timeout");

    // Malformed SSE.
    env.mock
        .push_json(json!({"raw":["{\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}","{oops"]}));
    let err = conn.prompt(&session, "six").await.unwrap_err();
    assert_eq!(code(&err), "model.malformed_response");

    // A tool call with arguments that are not JSON: the call fails with a
    // reason the model can act on, the turn goes on.
    env.mock.push_json(json!({"chunks":[{"tool_call":{"index":0,"id":"bad1","name":"read","arguments":"{\"file_path\": \"hello.txt\""}}],"finish":"tool_calls"}));
    env.mock.push_json(reply("fixed it"));
    let stop = conn.prompt(&session, "seven").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    let result = tool_result(&env, "bad1");
    assert!(result.contains("JSON"), "{result}");

    // Cut off at max tokens mid tool call: the turn ends with max_tokens.
    env.mock.push_json(json!({"chunks":[{"text":"I will write"},{"tool_call":{"index":0,"id":"cut1","name":"write","arguments":"{\"file_path\": \"x.txt\", \"cont"}}],"finish":"length"}));
    let stop = conn.prompt(&session, "eight").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::MaxTokens);
    assert!(!env.cwd().join("x.txt").exists());

    // The next prompt gets a valid history with every turn so far.
    env.mock.push_json(reply("all good"));
    conn.prompt(&session, "nine").await.unwrap();
    let history = last_history(&env);
    assert_valid_history(&history);
    let users = history.iter().filter(|m| m["role"] == "user").count();
    assert_eq!(users, 9, "{history:#?}");
    conn.finish().await;
    log_is_clean(&env, &session);

    // A new process loads it and derives the same history.
    let before = history;
    env.mock.push_json(reply("loaded"));
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    conn.prompt(&session, "ten").await.unwrap();
    let after = last_history(&env);
    assert_valid_history(&after);
    assert_eq!(
        &after[..before.len() + 1],
        &[
            &before[..],
            &[json!({"role":"assistant","content":"all good"})]
        ]
        .concat()[..],
        "the reloaded history starts with what the model saw before"
    );
    conn.finish().await;
}

#[tokio::test]
async fn sigkill_mid_tool_repairs_the_call_on_load_and_the_command_dies_with_dsh() {
    let env = TestEnv::new().await;
    let marker = format!("dsh-kill-test-{}", std::process::id());
    env.mock.push_json(call(
        "k1",
        "bash",
        json!({"command": format!("exec -a {marker} sleep 30")}),
    ));
    let mut conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    let _prompt = conn.send_prompt(&session, "run it");
    let cwd = env.cwd().canonicalize().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while procs::live_pids(&marker, &cwd).is_empty() {
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    conn.child.start_kill().unwrap();
    conn.child.wait().await.unwrap();
    // The shell had PR_SET_PDEATHSIG: it goes with dsh.
    let deadline = Instant::now() + Duration::from_secs(2);
    while !procs::live_pids(&marker, &cwd).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the command outlived a SIGKILLed dsh"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    log_is_clean(&env, &session);

    env.mock.push_json(reply("checking"));
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    let replayed = kinds(&conn.updates());
    assert!(replayed.contains(&"tool_call"), "{replayed:?}");
    conn.prompt(&session, "what happened?").await.unwrap();
    let history = last_history(&env);
    assert_valid_history(&history);
    let tool = history.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("outcome of this tool call is unknown"),
        "{tool}"
    );
    conn.finish().await;
}

#[tokio::test]
async fn a_full_disk_fails_the_turn_clearly_and_the_log_stays_valid() {
    let env = TestEnv::new().await;
    // First process: a session with one turn.
    env.mock.push_json(reply("first"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "before the disk filled")
        .await
        .unwrap();
    conn.finish().await;
    let size = std::fs::metadata(env.log_path(&session)).unwrap().len();

    // Second process under a file-size limit a little above the log's size:
    // its writes fail part-way (EFBIG, as ENOSPC would on a full disk).
    let command = env.command();
    let program = command.as_std().get_program().to_owned();
    let args: Vec<_> = command.as_std().get_args().map(|a| a.to_owned()).collect();
    let mut limited = tokio::process::Command::new("prlimit");
    limited
        .arg(format!("--fsize={}", size + 300))
        .arg("--")
        .arg(program)
        .args(args)
        .env_clear()
        .envs(
            command
                .as_std()
                .get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    env.mock.push_json(
        json!({"repeat":{"text":"a long reply that will not fit ","count":40},"finish":"stop"}),
    );
    let conn = Conn::spawn(limited).await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    let err = conn
        .prompt(&session, "this turn does not fit")
        .await
        .unwrap_err();
    assert_eq!(
        err.data.as_ref().unwrap()["code"],
        "session.log_write",
        "{err:?}"
    );
    assert!(
        err.message.contains(&session.0.to_string()) && err.message.contains("too large"),
        "the user sees which file and why: {}",
        err.message
    );
    // The process is still serving.
    conn.cx
        .send_request(agent_client_protocol::v1::schema::ListSessionsRequest::new())
        .block_task()
        .await
        .expect("still serving after a failed write");
    conn.finish().await;
    // No partial line was left behind.
    log_is_clean(&env, &session);
    assert!(std::fs::metadata(env.log_path(&session)).unwrap().len() <= size + 300);

    // With space again, the session loads and continues.
    env.mock.push_json(reply("space again"));
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    conn.prompt(&session, "after").await.unwrap();
    assert_valid_history(&last_history(&env));
    conn.finish().await;
    log_is_clean(&env, &session);
}

#[tokio::test]
async fn client_eof_mid_turn_stops_shell_language_server_and_mcp_server_within_2s() {
    let env = TestEnv::with_config(&format!(
        "[lsp]\nbuiltin = false\nready_timeout_ms = 2000\n[[lsp.servers]]\nname = \"test-lsp\"\ncommand = \"{}\"\nextensions = {{ toy = \"toy\" }}\n",
        test_lsp_binary().display()
    ))
    .await;
    std::fs::write(
        env.cwd().join("main.toy"),
        "fn helper() {}\nfn main() {\n    helper();\n}\n",
    )
    .unwrap();
    let marker = format!("dsh-eof-test-{}", std::process::id());
    env.mock.push_json(call(
        "l1",
        "lsp",
        json!({"operation":"hover","file_path":"main.toy","line":1,"character":4}),
    ));
    // Calls that change things run one at a time: the shell command is the
    // one in flight when the editor goes away.
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": format!("exec -a {marker} sleep 30")}),
    ));
    let log = env.home.path().join("mcp.log");
    let conn = env.connect().await;
    let session = conn
        .start_with_mcp(
            &env.cwd(),
            vec![McpServer::Stdio(
                McpServerStdio::new("fixture", test_mcp_binary())
                    .args(vec!["stdio".to_owned()])
                    .env(vec![EnvVariable::new(
                        "MCP_FIXTURE_LOG",
                        log.display().to_string(),
                    )]),
            )],
        )
        .await;
    conn.set_mode(&session, "full-access").await;
    let _prompt = conn.send_prompt(&session, "start everything");
    let cwd = env.cwd().canonicalize().unwrap();
    let all = |cwd: &std::path::Path| {
        (
            procs::live_pids(&marker, cwd).len(),
            procs::live_pids("dsh-test-lsp", cwd).len(),
            procs::live_pids("dsh-test-mcp", cwd).len(),
        )
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    // The shell command and the MCP server run under dsh's command guard,
    // whose command line holds the marker (the server's name) too.
    while !matches!(all(&cwd), (1.., 1, 1..)) {
        assert!(
            Instant::now() < deadline,
            "not everything started: {:?}",
            all(&cwd)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // None of the children got dsh's secrets (dsh runs with
    // DEEPSEEK_API_KEY set).
    for needle in [marker.as_str(), "dsh-test-lsp", "dsh-test-mcp"] {
        for pid in procs::live_pids(needle, &cwd) {
            let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
                // Gone between the listing and the read (a short-lived
                // helper of the shell): nothing to check.
                assert!(
                    !std::path::Path::new(&format!("/proc/{pid}")).exists(),
                    "{needle}: /proc/{pid}/environ is not readable"
                );
                continue;
            };
            // An exiting process's environ reads empty (its memory is
            // gone, its /proc entry not yet): nothing to check either.
            if environ.is_empty() {
                continue;
            }
            let environ = String::from_utf8_lossy(&environ);
            assert!(
                environ.contains("PATH="),
                "{needle}: /proc/{pid}/environ is readable"
            );
            assert!(
                !environ.contains("DEEPSEEK_API_KEY") && !environ.contains("test-key-d5h"),
                "{needle} got the API key"
            );
        }
    }
    // The editor goes away mid-turn.
    let started = Instant::now();
    conn.finish().await;
    while all(&cwd) != (0, 0, 0) {
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "children left 2 s after EOF (shell, lsp, mcp): {:?}",
            all(&cwd)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("all children gone {:?} after EOF", started.elapsed());
    log_is_clean(&env, &session);
}

#[tokio::test]
async fn writes_outside_the_roots_never_happen_below_full_access() {
    let outside = tempfile::tempdir().unwrap();
    for mode in ["read-only", "ask", "accept-edits", "full-access"] {
        let env = TestEnv::new().await;
        std::os::unix::fs::symlink(outside.path(), env.cwd().join("link")).unwrap();
        let target = |name: &str| outside.path().join(format!("{mode}-{name}"));
        env.mock.push_json(calls(&[
            (
                "w1",
                "write",
                json!({"file_path": format!("../{}/{mode}-dotdot.txt", outside.path().file_name().unwrap().to_str().unwrap()), "content":"x"}),
            ),
            (
                "w2",
                "write",
                json!({"file_path": format!("link/{mode}-symlink.txt"), "content":"x"}),
            ),
            (
                "w3",
                "write",
                json!({"file_path": target("absolute.txt"), "content":"x"}),
            ),
            (
                "w4",
                "bash",
                json!({"command": format!("touch {}", target("bash.txt").display())}),
            ),
        ]));
        env.mock.push_json(reply("done"));
        let sim = ClientSim::new(false, false);
        for _ in 0..4 {
            sim.answer(Answer::Select(PermissionOptionKind::RejectOnce));
        }
        let conn = env.connect_with(sim.clone()).await;
        let session = conn.start(&env.cwd()).await;
        conn.set_mode(&session, mode).await;
        assert_eq!(
            env.cwd().parent(),
            outside.path().parent(),
            "`..` from the workspace reaches `outside`"
        );
        conn.prompt(&session, "escape").await.unwrap();
        let asked = sim.permission_requests.lock().unwrap().len();
        let landed: Vec<&str> = ["dotdot.txt", "symlink.txt", "absolute.txt", "bash.txt"]
            .into_iter()
            .filter(|name| target(name).exists())
            .collect();
        match mode {
            "full-access" => {
                assert_eq!(asked, 0);
                assert_eq!(landed.len(), 4, "full access runs them: {landed:?}");
            }
            "read-only" => {
                // Writes are denied unasked; the command is asked about (it
                // would run in the kernel's read-only sandbox).
                assert_eq!(asked, 1, "read-only asks only about the command");
                assert!(landed.is_empty(), "{mode}: {landed:?}");
            }
            _ => {
                assert_eq!(asked, 4, "{mode}: every outside write asks");
                assert!(landed.is_empty(), "{mode}: {landed:?}");
            }
        }
        conn.finish().await;
    }
}

#[tokio::test]
async fn crafted_arguments_and_always_rules_cannot_widen_permissions() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("b1", "bash", json!({"command":"ls"})));
    env.mock.push_json(calls(&[
        ("b2", "bash", json!({"command":"ls; touch pwned1"})),
        ("b3", "bash", json!({"command":"ls $(touch pwned2)"})),
        ("b4", "bash", json!({"command":"ls\ntouch pwned3"})),
        ("b5", "bash", json!({"command":"ls -la"})),
    ]));
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path":"a.txt","content":"1"}),
    ));
    env.mock.push_json(calls(&[
        ("w2", "write", json!({"file_path":"a.txt","content":"2"})),
        (
            "w3",
            "write",
            json!({"file_path":"sub/../b.txt","content":"x"}),
        ),
        (
            "w4",
            "write",
            json!({"file_path":"c.txt","content":"x","approved":true,"mode":"full-access"}),
        ),
        (
            "e1",
            "edit",
            json!({"file_path":"a.txt","old_string":"2","new_string":"3"}),
        ),
    ]));
    env.mock.push_json(reply("done"));
    std::fs::create_dir(env.cwd().join("sub")).unwrap();
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowAlways)); // b1: ls
    for _ in 0..3 {
        sim.answer(Answer::Select(PermissionOptionKind::RejectOnce)); // b2..b4
    }
    sim.answer(Answer::Select(PermissionOptionKind::AllowAlways)); // w1: a.txt
    for _ in 0..3 {
        sim.answer(Answer::Select(PermissionOptionKind::RejectOnce)); // w3, w4, e1
    }
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "try").await.unwrap();
    let asked = sim.asked();
    assert_eq!(
        asked,
        ["b1", "b2", "b3", "b4", "w1", "w3", "w4", "e1"],
        "`ls` always covers `ls -la` only; a.txt always covers writes to a.txt only"
    );
    for file in ["pwned1", "pwned2", "pwned3", "b.txt", "c.txt"] {
        assert!(!env.cwd().join(file).exists(), "{file} was created");
    }
    assert_eq!(
        std::fs::read_to_string(env.cwd().join("a.txt")).unwrap(),
        "2"
    );
    conn.finish().await;
}

#[tokio::test]
async fn a_panic_in_a_turn_fails_that_turn_only() {
    let mut env = TestEnv::new().await;
    env.extra_env.push(("DSH_TEST_FAULTS".into(), "1".into()));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let other = conn.start(&env.cwd()).await;
    let err = conn
        .prompt(&session, "please dsh-test-panic now")
        .await
        .unwrap_err();
    assert_eq!(i32::from(err.code), -32603, "{err:?}");
    assert!(err.message.contains("still usable"), "{}", err.message);
    // The same session and another one keep working.
    env.mock.push_json(reply("fine again"));
    env.mock.push_json(reply("other fine"));
    assert_eq!(
        conn.prompt(&session, "and now?").await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    assert_valid_history(&last_history(&env));
    conn.prompt(&other, "you?").await.unwrap();
    let ended = env
        .log_events(&session)
        .into_iter()
        .find(|e| e["type"] == "turn/end")
        .unwrap();
    assert_eq!(ended["data"]["error"]["code"], "internal", "{ended}");
    let stderr = std::mem::take(&mut *conn.stderr.lock().unwrap());
    assert!(stderr.contains("the turn panicked"), "logged to stderr");
    conn.finish().await;
    log_is_clean(&env, &session);
}
