//! MCP servers from the editor become agent tools: stdio and Streamable
//! HTTP fixture servers built on rmcp's server side (`fixtures/test-mcp`).

use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    CloseSessionRequest, EnvVariable, HttpHeader, McpServer, McpServerHttp, McpServerSse,
    McpServerStdio, NewSessionRequest, PermissionOptionKind, SessionId, StopReason,
};
use agent_client_protocol::v1::schema::{ContentBlock as AcpBlock, SessionUpdate, ToolCallContent};
use serde_json::json;

use crate::support::{
    call, kinds, procs, reply, test_mcp_binary, tool_result, Answer, ClientSim, Conn, TestEnv,
};

const FIXTURE: &str = "dsh-test-mcp";

pub(crate) fn stdio_server(name: &str, log: &std::path::Path, extra: &[(&str, &str)]) -> McpServer {
    let mut env = vec![
        EnvVariable::new("MCP_FIXTURE_LOG", log.display().to_string()),
        EnvVariable::new(
            "MCP_FIXTURE_ENV",
            "DEEPSEEK_API_KEY,HOME,PATH,GIVEN_BY_EDITOR",
        ),
        EnvVariable::new("GIVEN_BY_EDITOR", "1"),
    ];
    env.extend(extra.iter().map(|(k, v)| EnvVariable::new(*k, *v)));
    McpServer::Stdio(
        McpServerStdio::new(name, test_mcp_binary())
            .args(vec!["stdio".to_owned()])
            .env(env),
    )
}

fn servers(log: &std::path::Path) -> Vec<McpServer> {
    vec![
        stdio_server("fixture", log, &[]),
        // Starts, then exits before the handshake.
        stdio_server("broken", log, &[("MCP_FIXTURE_FAIL_START", "1")]),
        McpServer::Stdio(McpServerStdio::new("missing", "/nonexistent/mcp-server")),
    ]
}

pub(crate) async fn wait_until(what: &str, timeout: Duration, mut pred: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !pred() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn offered(request: &serde_json::Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

async fn session_with_servers(conn: &Conn, env: &TestEnv, log: &std::path::Path) -> SessionId {
    conn.initialize().await;
    conn.cx
        .send_request(NewSessionRequest::new(env.cwd()).mcp_servers(servers(log)))
        .block_task()
        .await
        .expect("session/new with MCP servers")
        .session_id
}

/// Fixture MCP server processes running in the test's workspace (not the
/// command guards above them, whose command lines name them too).
fn fixtures_running(env: &TestEnv) -> usize {
    procs::live_pids(FIXTURE, &env.cwd().canonicalize().unwrap())
        .into_iter()
        .filter(|pid| {
            !std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("__guard"))
        })
        .count()
}

pub(crate) fn logged(log: &std::path::Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

#[tokio::test]
async fn mcp_tools_are_offered_asked_for_and_called() {
    let env = TestEnv::new().await;
    let log = env.home.path().join("mcp.log");
    env.mock.push_json(call(
        "m1",
        "mcp__fixture__echo",
        json!({"text":"hello mcp"}),
    ));
    env.mock
        .push_json(call("m2", "mcp__fixture__echo", json!({"text":"again"})));
    env.mock
        .push_json(call("m3", "mcp__fixture__fail", json!({})));
    env.mock
        .push_json(call("m4", "mcp__fixture__picture", json!({})));
    env.mock
        .push_json(call("m5", "mcp__fixture__document", json!({})));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowAlways));
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim.clone()).await;
    let session = session_with_servers(&conn, &env, &log).await;
    // The servers that cannot start are reported, the other one works.
    conn.wait_for("notices about the broken servers", |u| {
        let text = crate::support::chunk_text(u, false);
        text.contains("MCP server \"broken\" is unavailable")
            && text.contains("MCP server \"missing\" is unavailable")
    })
    .await;
    conn.prompt(&session, "use the tools").await.unwrap();

    let offered = offered(&env.mock.requests()[0]);
    for name in [
        "mcp__fixture__echo",
        "mcp__fixture__slow",
        "mcp__fixture__picture",
        "mcp__fixture__fail",
    ] {
        assert!(
            offered.contains(&name.to_owned()),
            "{name} missing from {offered:?}"
        );
    }
    assert!(
        !offered.iter().any(|n| n.contains("bad")),
        "a tool with an unusable schema is skipped: {offered:?}"
    );

    assert_eq!(tool_result(&env, "m1"), "hello mcp\n");
    assert_eq!(tool_result(&env, "m2"), "again\n");
    let asked = sim.asked();
    assert_eq!(
        asked,
        ["m1", "m3", "m4", "m5"],
        "allow_always for echo is remembered; other tools still ask"
    );
    assert_eq!(
        sim.permission_requests.lock().unwrap()[0]
            .tool_call
            .fields
            .title
            .as_deref(),
        Some("fixture: echo")
    );
    assert!(tool_result(&env, "m3").contains("failed on purpose"));
    assert!(tool_result(&env, "m4").contains("a pixel:"));
    assert!(tool_result(&env, "m5").contains("<resource uri=\"file:///fixture/notes.md\">"));
    // The editor sees each result block as what it is.
    let shown = |id: &str| -> Vec<ToolCallContent> {
        conn.updates()
            .into_iter()
            .filter_map(|n| match n.update {
                SessionUpdate::ToolCallUpdate(update) if update.tool_call_id.0.as_ref() == id => {
                    update.fields.content
                }
                _ => None,
            })
            .last()
            .unwrap_or_default()
    };
    let picture = shown("m4");
    assert!(
        matches!(&picture[1], ToolCallContent::Content(c) if matches!(&c.content, AcpBlock::Image(image) if image.mime_type == "image/png")),
        "{picture:?}"
    );
    let document = shown("m5");
    assert!(
        matches!(&document[0], ToolCallContent::Content(c) if matches!(&c.content, AcpBlock::Resource(_))),
        "{document:?}"
    );
    // The request right after the picture call.
    let last = env.mock.requests()[4]["messages"]
        .as_array()
        .unwrap()
        .clone();
    let after_tools = last.last().unwrap()["content"].to_string();
    assert!(
        after_tools.contains("[image omitted: image/png"),
        "the image follows the tool results: {after_tools}"
    );
    assert!(
        logged(&log).contains("call echo {\"text\":\"hello mcp\"}"),
        "{}",
        logged(&log)
    );
    // The child got the editor's env over a scrubbed copy of dsh's: no key.
    for line in [
        "env DEEPSEEK_API_KEY=unset",
        "env PATH=set",
        "env GIVEN_BY_EDITOR=set",
    ] {
        assert!(logged(&log).contains(line), "{line}: {}", logged(&log));
    }
    assert!(kinds(&conn.updates()).contains(&"tool_call"));

    // Closing the session stops the server process.
    assert_eq!(fixtures_running(&env), 1);
    conn.cx
        .send_request(CloseSessionRequest::new(session.clone()))
        .block_task()
        .await
        .unwrap();
    wait_until(
        "the MCP server to stop after session/close",
        Duration::from_secs(3),
        || fixtures_running(&env) == 0,
    )
    .await;
    conn.finish().await;
}

#[tokio::test]
async fn a_rejected_mcp_call_never_reaches_the_server() {
    let env = TestEnv::new().await;
    let log = env.home.path().join("mcp.log");
    env.mock
        .push_json(call("m1", "mcp__fixture__echo", json!({"text":"secret"})));
    env.mock.push_json(reply("ok"));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::RejectOnce));
    let conn = env.connect_with(sim.clone()).await;
    let session = session_with_servers(&conn, &env, &log).await;
    conn.prompt(&session, "go").await.unwrap();
    assert!(tool_result(&env, "m1").contains("rejected"));
    assert!(!logged(&log).contains("call echo"), "{}", logged(&log));
    conn.finish().await;
    // Client EOF: no server left behind.
    assert_eq!(fixtures_running(&env), 0, "no MCP server left behind");
}

#[tokio::test]
async fn a_slow_mcp_call_is_cancelled_with_the_turn() {
    let env = TestEnv::new().await;
    let log = env.home.path().join("mcp.log");
    env.mock
        .push_json(call("m1", "mcp__fixture__slow", json!({"seconds": 20})));
    let conn = env.connect().await;
    let session = session_with_servers(&conn, &env, &log).await;
    conn.cx
        .send_request(
            agent_client_protocol::v1::schema::SetSessionConfigOptionRequest::new(
                session.clone(),
                "mode",
                "full-access",
            ),
        )
        .block_task()
        .await
        .unwrap();
    let prompt = conn.send_prompt(&session, "wait");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !logged(&log).contains("call slow") {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sent = Instant::now();
    conn.cancel(&session);
    assert_eq!(
        prompt.block_task().await.unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert!(sent.elapsed() < Duration::from_secs(2));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !logged(&log).contains("cancelled ") {
        assert!(
            Instant::now() < deadline,
            "the server was not told: {}",
            logged(&log)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    conn.finish().await;
}

#[tokio::test]
async fn sse_servers_are_refused_at_session_new() {
    let env = TestEnv::new().await;
    let conn = env.connect().await;
    conn.initialize().await;
    let err =
        conn.cx
            .send_request(
                NewSessionRequest::new(env.cwd()).mcp_servers(vec![McpServer::Sse(
                    McpServerSse::new("events", "http://127.0.0.1:9/sse"),
                )]),
            )
            .block_task()
            .await
            .unwrap_err();
    assert_eq!(i32::from(err.code), -32602);
    assert!(
        err.message.contains("SSE") && err.message.contains("events"),
        "{}",
        err.message
    );
    conn.finish().await;
}

#[tokio::test]
async fn a_crashed_server_is_restarted_with_backoff_a_bounded_number_of_times() {
    let env = TestEnv::new().await;
    let log = env.home.path().join("mcp.log");
    // m1 crashes the first process; m2 runs on the restarted one; m3..m5
    // crash the next three; m6 finds the restarts used up.
    env.mock
        .push_json(call("m1", "mcp__fixture__crash", json!({})));
    env.mock.push_json(call(
        "m2",
        "mcp__fixture__echo",
        json!({"text":"after crash"}),
    ));
    for id in ["m3", "m4", "m5"] {
        env.mock
            .push_json(call(id, "mcp__fixture__crash", json!({})));
    }
    env.mock
        .push_json(call("m6", "mcp__fixture__echo", json!({"text":"too late"})));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn
        .start_with_mcp(&env.cwd(), vec![stdio_server("fixture", &log, &[])])
        .await;
    conn.set_mode(&session, "full-access").await;
    let started = Instant::now();
    let stop = conn.prompt(&session, "crash it").await.unwrap();
    assert_eq!(stop.stop_reason, StopReason::EndTurn);
    let m1 = tool_result(&env, "m1");
    assert!(
        m1.contains("exited during the call") && m1.contains("restarted for the next call"),
        "{m1}"
    );
    assert_eq!(tool_result(&env, "m2"), "after crash\n");
    let m6 = tool_result(&env, "m6");
    assert!(m6.contains("already restarted 3 times"), "{m6}");
    let starts = logged(&log).matches("start stdio").count();
    assert_eq!(starts, 4, "first start + 3 restarts: {}", logged(&log));
    // Backoff 250 + 500 + 1000 ms between the restarts.
    assert!(
        started.elapsed() >= Duration::from_millis(1750),
        "{:?}",
        started.elapsed()
    );
    // The log stays valid for the next prompt.
    env.mock.push_json(reply("still here"));
    conn.prompt(&session, "again").await.unwrap();
    conn.finish().await;
    assert_eq!(fixtures_running(&env), 0, "no MCP server left behind");
}

#[tokio::test]
async fn tools_list_changed_refreshes_the_tools_for_the_next_model_call() {
    let env = TestEnv::new().await;
    let log = env.home.path().join("mcp.log");
    env.mock
        .push_json(call("m1", "mcp__fixture__grow", json!({})));
    env.mock
        .push_json(call("m2", "mcp__fixture__extra", json!({})));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn
        .start_with_mcp(&env.cwd(), vec![stdio_server("fixture", &log, &[])])
        .await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "grow").await.unwrap();
    let requests = env.mock.requests();
    assert!(!offered(&requests[0]).contains(&"mcp__fixture__extra".to_owned()));
    assert!(
        offered(&requests[1]).contains(&"mcp__fixture__extra".to_owned()),
        "{:?}",
        offered(&requests[1])
    );
    assert_eq!(tool_result(&env, "m2"), "extra tool here\n");
    conn.finish().await;
}

/// A Streamable HTTP fixture on 127.0.0.1, killed on drop.
struct HttpFixture {
    child: tokio::process::Child,
    url: String,
}

impl HttpFixture {
    async fn start(log: &std::path::Path) -> HttpFixture {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(test_mcp_binary())
            .arg("http")
            .env("MCP_FIXTURE_LOG", log)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the HTTP fixture");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let url = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("the fixture prints its URL")
            .unwrap()
            .expect("a URL line");
        HttpFixture { child, url }
    }
}

#[tokio::test]
async fn http_servers_get_headers_permission_prompts_and_cancellation() {
    let env = TestEnv::new().await;
    let log = env.home.path().join("mcp-http.log");
    let mut fixture = HttpFixture::start(&log).await;
    env.mock
        .push_json(call("h1", "mcp__web__echo", json!({"text":"over http"})));
    env.mock
        .push_json(call("h2", "mcp__web__picture", json!({})));
    env.mock.push_json(reply("done"));
    env.mock
        .push_json(call("h3", "mcp__web__slow", json!({"seconds": 20})));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    sim.answer(Answer::Select(PermissionOptionKind::RejectOnce));
    let conn = env.connect_with(sim.clone()).await;
    let init = conn.initialize().await;
    assert!(init.agent_capabilities.mcp_capabilities.http);
    assert!(!init.agent_capabilities.mcp_capabilities.sse);
    let session = conn
        .cx
        .send_request(NewSessionRequest::new(env.cwd()).mcp_servers(vec![
            McpServer::Http(
                McpServerHttp::new("web", &fixture.url)
                    .headers(vec![HttpHeader::new("x-fixture-token", "tok-123")]),
            ),
            McpServer::Http(McpServerHttp::new("nowhere", "http://127.0.0.1:9/mcp")),
        ]))
        .block_task()
        .await
        .unwrap()
        .session_id;
    conn.wait_for("a notice about the unreachable server", |u| {
        crate::support::chunk_text(u, false).contains("MCP server \"nowhere\" is unavailable")
    })
    .await;
    conn.prompt(&session, "use http").await.unwrap();
    assert_eq!(tool_result(&env, "h1"), "over http\n");
    assert!(tool_result(&env, "h2").contains("rejected"));
    assert!(logged(&log).contains("header tok-123"), "{}", logged(&log));
    assert!(!logged(&log).contains("call picture"), "{}", logged(&log));
    // The headers' values never reach the session log.
    let session_log = std::fs::read_to_string(env.log_path(&session)).unwrap();
    assert!(!session_log.contains("tok-123"));

    // A slow HTTP call is cancelled with the turn and the server is told.
    conn.set_mode(&session, "full-access").await;
    let prompt = conn.send_prompt(&session, "wait");
    wait_until("the slow call", Duration::from_secs(10), || {
        logged(&log).contains("call slow")
    })
    .await;
    conn.cancel(&session);
    assert_eq!(
        prompt.block_task().await.unwrap().stop_reason,
        StopReason::Cancelled
    );
    wait_until("the cancel notification", Duration::from_secs(5), || {
        logged(&log).contains("cancelled ")
    })
    .await;
    conn.finish().await;
    fixture.child.kill().await.unwrap();
}

#[tokio::test]
async fn servers_start_again_on_session_load_and_resume() {
    let env = TestEnv::new().await;
    let log = env.home.path().join("mcp.log");
    let conn = env.connect().await;
    let session = conn
        .start_with_mcp(&env.cwd(), vec![stdio_server("fixture", &log, &[])])
        .await;
    conn.set_mode(&session, "full-access").await;
    conn.finish().await;
    assert_eq!(fixtures_running(&env), 0, "no MCP server left behind");

    for (round, id) in ["after-load", "after-resume"].into_iter().enumerate() {
        env.mock
            .push_json(call(id, "mcp__fixture__echo", json!({"text": id})));
        env.mock.push_json(reply("ok"));
        let conn = env.connect().await;
        conn.initialize().await;
        let servers = vec![stdio_server("fixture", &log, &[])];
        if round == 0 {
            conn.cx
                .send_request(
                    agent_client_protocol::v1::schema::LoadSessionRequest::new(
                        session.clone(),
                        env.cwd(),
                    )
                    .mcp_servers(servers),
                )
                .block_task()
                .await
                .unwrap();
        } else {
            conn.cx
                .send_request(
                    agent_client_protocol::v1::schema::ResumeSessionRequest::new(
                        session.clone(),
                        env.cwd(),
                    )
                    .mcp_servers(servers),
                )
                .block_task()
                .await
                .unwrap();
        }
        assert_eq!(fixtures_running(&env), 1);
        conn.prompt(&session, "echo").await.unwrap();
        assert_eq!(tool_result(&env, id), format!("{id}\n"));
        conn.finish().await;
    }
    assert_eq!(logged(&log).matches("start stdio").count(), 3);
}

/// `[mcp_servers.<name>]` in config.toml: started for `dsh run` too, with
/// `${VAR}` in its environment taken from dsh's.
#[tokio::test]
async fn a_server_from_the_config_file_serves_dsh_run() {
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("mcp.log");
    let mut env = TestEnv::with_config(&format!(
        "[mcp_servers.fixture]\ncommand = {command:?}\nargs = [\"stdio\"]\nenv = {{ MCP_FIXTURE_LOG = \"${{DSH_TEST_MCP_LOG}}\" }}\n[mcp_servers.off]\ncommand = \"/nonexistent/never\"\nenabled = false\n",
        command = test_mcp_binary().display().to_string(),
    ))
    .await;
    env.extra_env
        .push(("DSH_TEST_MCP_LOG".into(), log.display().to_string()));
    env.mock.push_json(call(
        "m1",
        "mcp__fixture__echo",
        json!({"text": "from config"}),
    ));
    env.mock.push_json(reply("Echoed."));
    let output = env
        .dsh(&["run", "--approve", "all", "echo it"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Echoed.\n");
    let offered = env.mock.requests()[0]["tools"].to_string();
    assert!(offered.contains("mcp__fixture__echo"), "{offered}");
    assert!(
        !stderr.contains("never"),
        "a disabled server is not started: {stderr}"
    );
    assert!(tool_result(&env, "m1").contains("from config"));
    // Its environment came through: it logged where ${DSH_TEST_MCP_LOG} said.
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(logged.contains("echo"), "{logged}");
}
