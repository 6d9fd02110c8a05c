//! MCP servers that misbehave: processes they leave behind, tool lists
//! that never end or carry huge descriptions, a `list_changed` whose list
//! never comes, and tool names that two servers would share.

use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    CloseSessionRequest, EnvVariable, McpServer, McpServerStdio, NewSessionRequest, StopReason,
};
use serde_json::json;

use crate::mcp::{logged, offered, stdio_server, wait_until};
use crate::support::{
    call, chunk_text, peak_rss, procs, reply, test_mcp_binary, tool_result, TestEnv,
};

/// A launcher like `npx`: a shell that starts a detached `setsid sleep
/// <mark>` (in a session of its own) and then becomes the fixture server.
fn launcher(name: &str, log: &std::path::Path, mark: &str) -> McpServer {
    launcher_that(name, log, mark, "")
}

/// [`launcher`], running `then` (shell) between the sleep and the exec.
fn launcher_that(name: &str, log: &std::path::Path, mark: &str, then: &str) -> McpServer {
    McpServer::Stdio(
        McpServerStdio::new(name, "/bin/sh")
            .args(vec![
                "-c".to_owned(),
                format!(
                    "setsid sleep \"$MARK\" </dev/null >/dev/null 2>&1 & {then}exec \"$FIXTURE\" stdio"
                ),
            ])
            .env(vec![
                EnvVariable::new("MCP_FIXTURE_LOG", log.display().to_string()),
                EnvVariable::new("MARK", mark),
                EnvVariable::new("FIXTURE", test_mcp_binary().display().to_string()),
            ]),
    )
}

/// A `sleep` argument no other process has.
fn mark(phase: u32) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("9{:06}{phase}.{nanos:09}", std::process::id() % 1_000_000)
}

/// Live processes whose command line holds `mark`.
fn marked(mark: &str) -> usize {
    procs::holding(mark).len()
}

async fn new_session(
    conn: &crate::support::Conn,
    env: &TestEnv,
    servers: Vec<McpServer>,
) -> agent_client_protocol::v1::schema::SessionId {
    conn.cx
        .send_request(NewSessionRequest::new(env.cwd()).mcp_servers(servers))
        .block_task()
        .await
        .expect("session/new with MCP servers")
        .session_id
}

/// `session/close`, then the daemon holding `mark` is gone within `bound`.
async fn close_and_wait(
    conn: &crate::support::Conn,
    session: agent_client_protocol::v1::schema::SessionId,
    mark: &str,
    bound: Duration,
) {
    conn.cx
        .send_request(CloseSessionRequest::new(session))
        .block_task()
        .await
        .unwrap();
    wait_until("the daemon to die with session/close", bound, || {
        marked(mark) == 0
    })
    .await;
}

/// Nothing a stdio server started outlives it: not after `session/close`,
/// not after dsh's exit on EOF, not after a crash and the restart.
#[tokio::test]
async fn nothing_an_mcp_server_started_outlives_it() {
    let env = TestEnv::new().await;
    let log = env.home.path().join("mcp.log");
    let bound = Duration::from_secs(10);

    // session/close.
    let conn = env.connect().await;
    conn.initialize().await;
    let closed = mark(1);
    let session = new_session(&conn, &env, vec![launcher("launched", &log, &closed)]).await;
    wait_until("the launcher's daemon", bound, || marked(&closed) == 1).await;
    close_and_wait(&conn, session, &closed, bound).await;

    // dsh's exit (EOF on its stdin).
    let exited = mark(2);
    new_session(&conn, &env, vec![launcher("launched", &log, &exited)]).await;
    wait_until("the launcher's daemon", bound, || marked(&exited) == 1).await;
    conn.finish().await;
    wait_until("the daemon to die with dsh", bound, || marked(&exited) == 0).await;

    // A crash, then the restart: the first daemon goes, the second lives.
    let restarted = mark(3);
    env.mock
        .push_json(call("m1", "mcp__launched__crash", json!({})));
    env.mock.push_json(call(
        "m2",
        "mcp__launched__echo",
        json!({"text": "restarted"}),
    ));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn
        .start_with_mcp(&env.cwd(), vec![launcher("launched", &log, &restarted)])
        .await;
    conn.set_mode(&session, "full-access").await;
    wait_until("the launcher's daemon", bound, || marked(&restarted) == 1).await;
    conn.prompt(&session, "crash it").await.unwrap();
    assert_eq!(tool_result(&env, "m2"), "restarted\n");
    assert_eq!(logged(&log).matches("start stdio").count(), 4);
    wait_until(
        "the first daemon to die with its server, the second to live",
        bound,
        || marked(&restarted) == 1,
    )
    .await;
    conn.finish().await;
    wait_until("the second daemon to die with dsh", bound, || {
        marked(&restarted) == 0
    })
    .await;
}

/// A server that kills its guard (`kill -9 $PPID`) before it starts
/// cannot: it is contained like a hook, and what it started still dies
/// with `session/close`.
#[tokio::test]
async fn an_mcp_server_cannot_kill_its_guard_to_leave_its_children() {
    let env = TestEnv::new().await;
    let log = env.home.path().join("mcp.log");
    let bound = Duration::from_secs(10);
    let conn = env.connect().await;
    conn.initialize().await;
    let mark = mark(4);
    let server = launcher_that("killer", &log, &mark, "kill -9 $PPID; ");
    let session = new_session(&conn, &env, vec![server]).await;
    wait_until("the server's daemon", bound, || marked(&mark) == 1).await;
    close_and_wait(&conn, session, &mark, bound).await;
    conn.finish().await;
}

/// A server whose `tools/list` never ends fails at a bound, with a notice,
/// quickly and in bounded memory; a huge description is cut and said so;
/// the other servers work.
#[tokio::test]
async fn tool_lists_are_collected_within_bounds() {
    let env = TestEnv::new().await;
    let log = env.home.path().join("mcp.log");
    env.mock
        .push_json(call("m1", "mcp__fixture__huge", json!({})));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    conn.initialize().await;
    let started = Instant::now();
    let session = new_session(
        &conn,
        &env,
        vec![
            stdio_server(
                "endless",
                &log,
                &[
                    ("MCP_FIXTURE_PAGES", "endless"),
                    ("MCP_FIXTURE_DESCRIPTION_BYTES", "16384"),
                ],
            ),
            stdio_server(
                "fixture",
                &log,
                &[("MCP_FIXTURE_DESCRIPTION_BYTES", "1000000")],
            ),
        ],
    )
    .await;
    let answered = started.elapsed();
    conn.wait_for("the notices", |u| {
        let text = chunk_text(u, false);
        text.contains("MCP server \"endless\" is unavailable: its tool list did not end within 50 pages")
            && text.contains("The description of MCP tool \"huge\" of server \"fixture\" is cut to 8 KiB (it has 1000000 bytes)")
    })
    .await;
    let pages = logged(&log).matches("list ").count();
    assert!(pages <= 51, "{pages} pages listed");
    assert!(
        answered < Duration::from_secs(10),
        "session/new took {answered:?}"
    );
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "go").await.unwrap();
    let request = &env.mock.requests()[0];
    let names = offered(request);
    assert!(
        !names.iter().any(|name| name.starts_with("mcp__endless__")),
        "{names:?}"
    );
    let huge = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["function"]["name"] == "mcp__fixture__huge")
        .expect("the huge tool is offered")["function"]["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(huge.len() < 9 * 1024, "{} bytes", huge.len());
    assert!(
        huge.ends_with("[description cut: 1000000 bytes in all]"),
        "{}",
        &huge[huge.len() - 60..]
    );
    assert!(request.to_string().len() < 256 * 1024);
    let peak = peak_rss(conn.child.id().unwrap());
    eprintln!(
        "dsh's peak RSS {} MiB; session/new answered in {answered:?}",
        peak >> 20
    );
    assert!(peak < 120 << 20, "dsh's peak RSS was {} MiB", peak >> 20);
    conn.finish().await;
}

/// A `list_changed` whose `tools/list` is never answered: the next step
/// goes on with the last known tools, and a cancel is answered at once.
#[tokio::test]
async fn an_unanswered_list_changed_holds_no_step_and_no_cancel() {
    let env = TestEnv::new().await;
    let conn = env.connect().await;
    conn.initialize().await;
    let hanging = |log: &std::path::Path| {
        vec![stdio_server(
            "fixture",
            log,
            &[("MCP_FIXTURE_HANG_LIST", "1")],
        )]
    };

    // The next step.
    let first = env.home.path().join("first.log");
    env.mock
        .push_json(call("m1", "mcp__fixture__grow", json!({})));
    env.mock.push_json(reply("grown"));
    let session = new_session(&conn, &env, hanging(&first)).await;
    conn.set_mode(&session, "full-access").await;
    let started = Instant::now();
    conn.prompt(&session, "grow").await.unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "the turn took {took:?}");
    let requests = env.mock.requests();
    let next = offered(&requests[1]);
    assert!(next.contains(&"mcp__fixture__echo".to_owned()), "{next:?}");
    assert!(
        logged(&first).matches("list ").count() >= 2,
        "{}",
        logged(&first)
    );

    // A cancel while the list is awaited.
    let second = env.home.path().join("second.log");
    env.mock
        .push_json(call("m2", "mcp__fixture__grow", json!({})));
    env.mock
        .push_json(json!({"chunks": [{"text": "late"}], "delay_ms": 20000, "finish": "stop"}));
    let session = new_session(&conn, &env, hanging(&second)).await;
    conn.set_mode(&session, "full-access").await;
    let prompt = conn.send_prompt(&session, "grow again");
    wait_until("the unanswered tools/list", Duration::from_secs(10), || {
        logged(&second).matches("list ").count() >= 2
    })
    .await;
    let sent = Instant::now();
    conn.cancel(&session);
    assert_eq!(
        prompt.block_task().await.unwrap().stop_reason,
        StopReason::Cancelled
    );
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(2), "the cancel took {took:?}");
    conn.finish().await;
}

/// Server `a` with tool `b__c` and server `a__b` with tool `c` would both
/// be `mcp__a__b__c`: the second server is renamed, with a notice, and
/// each name calls its own tool.
#[tokio::test]
async fn two_servers_tools_never_share_a_name() {
    let env = TestEnv::new().await;
    let (log_a, log_ab) = (
        env.home.path().join("a.log"),
        env.home.path().join("ab.log"),
    );
    env.mock.push_json(call("m1", "mcp__a__b__c", json!({})));
    env.mock.push_json(call("m2", "mcp__a_b__c", json!({})));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn
        .start_with_mcp(
            &env.cwd(),
            vec![
                stdio_server(
                    "a",
                    &log_a,
                    &[
                        ("MCP_FIXTURE_TOOLS_ALSO", "b__c"),
                        ("MCP_FIXTURE_LABEL", "a"),
                    ],
                ),
                stdio_server(
                    "a__b",
                    &log_ab,
                    &[
                        ("MCP_FIXTURE_TOOLS_ALSO", "c"),
                        ("MCP_FIXTURE_LABEL", "a__b"),
                    ],
                ),
            ],
        )
        .await;
    conn.wait_for("the notice of the rename", |u| {
        chunk_text(u, false).contains("MCP server \"a__b\" is offered as \"a_b\"")
    })
    .await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "call both").await.unwrap();
    let names = offered(&env.mock.requests()[0]);
    for name in ["mcp__a__b__c", "mcp__a_b__c"] {
        assert_eq!(
            names.iter().filter(|n| *n == name).count(),
            1,
            "{name}: {names:?}"
        );
    }
    assert_eq!(tool_result(&env, "m1"), "b__c from a\n");
    assert_eq!(tool_result(&env, "m2"), "c from a__b\n");
    assert!(logged(&log_a).contains("call b__c"));
    assert!(logged(&log_ab).contains("call c"));
    conn.finish().await;
}
