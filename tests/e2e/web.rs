//! `web_fetch` and `web_search` against local HTTP servers: HTML becomes
//! markdown, private addresses are refused (directly and after a redirect),
//! the size cap, the timeout, schemes other than HTTP(S), binaries, the
//! search provider (a mocked SearXNG), and what is offered when.

use std::time::Duration;

use agent_client_protocol::v1::schema::{PermissionOptionKind, ToolKind};
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::support::{
    call, chunk_text, reply, tool_result, validate_frames, Answer, ClientSim, TestEnv,
};

/// A tiny HTTP/1.1 server: each request's path picks a canned answer.
/// Returns its port and the paths (with query) it was asked for.
async fn serve() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let Some(path) = crate::support::http_request_path(&mut socket).await else {
                    return;
                };
                log.lock().unwrap().push(path.clone());
                let (status, kind, body, extra): (&str, &str, Vec<u8>, String) =
                    match path.split('?').next().unwrap() {
                        "/page" => (
                            "200 OK",
                            "text/html; charset=utf-8",
                            b"<html><head><title>t</title><script>stealCookies()</script></head><body><h1>Tokio guide</h1><p>Read the <a href=\"https://tokio.rs/docs\">docs</a> first.</p><ul><li>one</li><li>two</li></ul></body></html>".to_vec(),
                            String::new(),
                        ),
                        "/plain" => ("200 OK", "text/plain", b"just text\n".to_vec(), String::new()),
                        "/div-20000" => ("200 OK", "text/html", deep("div", 20_000, "deep text"), String::new()),
                        "/deep-div" => ("200 OK", "text/html", deep("div", 100_000, "deep text"), String::new()),
                        "/deep-quote" => ("200 OK", "text/html", deep("blockquote", 100_000, "quoted text"), String::new()),
                        "/deep-quote-long" => ("200 OK", "text/html", deep("blockquote", 100_000, &"line<br>".repeat(500_000)), String::new()),
                        "/big" => ("200 OK", "text/plain", vec![b'a'; 6 * 1024 * 1024], String::new()),
                        "/bin" => ("200 OK", "application/octet-stream", vec![0u8; 64], String::new()),
                        "/to-metadata" => (
                            "302 Found",
                            "text/plain",
                            Vec::new(),
                            "Location: http://169.254.169.254/latest/meta-data/\r\n".to_owned(),
                        ),
                        "/to-page" => (
                            "301 Moved Permanently",
                            "text/plain",
                            Vec::new(),
                            "Location: /page\r\n".to_owned(),
                        ),
                        "/slow" => {
                            tokio::time::sleep(Duration::from_secs(5)).await;
                            ("200 OK", "text/plain", b"late".to_vec(), String::new())
                        }
                        "/search" => (
                            "200 OK",
                            "application/json",
                            serde_json::to_vec(&json!({
                                "answers": ["Tokio is an async runtime."],
                                "results": [
                                    {"title": "Tokio", "url": "https://tokio.rs/", "content": "An asynchronous runtime for Rust"},
                                    {"title": "docs.rs tokio", "url": "https://docs.rs/tokio", "content": "API docs"}
                                ]
                            }))
                            .unwrap(),
                            String::new(),
                        ),
                        _ => ("404 Not Found", "text/plain", b"no".to_vec(), String::new()),
                    };
                let response = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.write_all(&body).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (port, seen)
}

/// A hostile page: a heading, then `depth` `tag` elements nested in one
/// another around `inner`, then a paragraph.
fn deep(tag: &str, depth: usize, inner: &str) -> Vec<u8> {
    format!(
        "<html><body><h1>Deep</h1>{}{inner}{}<p>after the nesting</p></body></html>",
        format!("<{tag}>").repeat(depth),
        format!("</{tag}>").repeat(depth)
    )
    .into_bytes()
}

async fn run(env: &TestEnv, mode: &str, sim: std::sync::Arc<ClientSim>) {
    env.mock.push_json(reply("done"));
    let conn = env.connect_with(sim).await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, mode).await;
    conn.prompt(&session, "fetch").await.unwrap();
    validate_frames(&conn.finish().await);
}

#[tokio::test]
async fn web_fetch_converts_html_and_keeps_to_its_limits() {
    let (port, seen) = serve().await;
    let env = TestEnv::with_config(
        "[web]\nallow_private = [\"127.0.0.1\"]\ntimeout_ms = 1000\nmax_output_bytes = 4096",
    )
    .await;
    let url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    for (id, path) in [
        ("f1", "/page"),
        ("f2", "/plain"),
        ("f3", "/big"),
        ("f4", "/bin"),
        ("f5", "/to-metadata"),
        ("f6", "/slow"),
        ("f7", "/to-page"),
    ] {
        env.mock
            .push_json(call(id, "web_fetch", json!({"url": url(path)})));
    }
    env.mock.push_json(call(
        "f8",
        "web_fetch",
        json!({"url": "file:///etc/passwd"}),
    ));
    run(&env, "full-access", ClientSim::new(false, false)).await;

    let page = tool_result(&env, "f1");
    assert!(page.contains("# Tokio guide"), "{page}");
    assert!(page.contains("[docs](https://tokio.rs/docs)"), "{page}");
    assert!(page.contains("one") && page.contains("two"), "{page}");
    assert!(!page.contains("stealCookies"), "{page}");
    assert!(page.contains("Content-Type: text/html"), "{page}");
    assert!(tool_result(&env, "f2").contains("just text"));
    let big = tool_result(&env, "f3");
    assert!(
        big.contains("[truncated: showing the first 4096 of"),
        "{}",
        &big[big.len() - 200..]
    );
    assert!(big.contains("the download stopped at 5242880 bytes"));
    assert!(big.len() < 5000);
    // The page past the cap is in the session's spill store.
    let saved = big
        .split("is saved in ")
        .nth(1)
        .and_then(|rest| rest.split("; read or grep").next())
        .unwrap_or_else(|| panic!("no spill locator: {}", &big[big.len() - 300..]));
    let spilled = std::fs::read_to_string(saved).unwrap();
    assert!(spilled.len() > 4096 && big.contains(&spilled[..4000]));
    let bin = tool_result(&env, "f4");
    assert!(bin.contains("application/octet-stream, not text"), "{bin}");
    let redirect = tool_result(&env, "f5");
    assert!(
        redirect.contains("169.254.169.254") && redirect.contains("private address"),
        "{redirect}"
    );
    assert!(
        tool_result(&env, "f6").contains("timed out"),
        "{}",
        tool_result(&env, "f6")
    );
    assert!(tool_result(&env, "f7").contains("# Tokio guide"));
    let scheme = tool_result(&env, "f8");
    assert!(scheme.contains("only http and https"), "{scheme}");
    // Nothing but the served paths was asked for: the metadata address
    // was never contacted, the file URL never fetched.
    let asked = seen.lock().unwrap().clone();
    assert_eq!(
        asked,
        [
            "/page",
            "/plain",
            "/big",
            "/bin",
            "/to-metadata",
            "/slow",
            "/to-page",
            "/page"
        ]
    );
}

#[tokio::test]
async fn private_addresses_are_refused_unless_configured_and_fetching_asks_per_host() {
    let (port, seen) = serve().await;
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "f1",
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/page")}),
    ));
    env.mock.push_json(call(
        "f2",
        "web_fetch",
        json!({"url": format!("http://localhost:{port}/page")}),
    ));
    // Ask mode: each fetch is asked about, as kind fetch.
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    run(&env, "ask", sim.clone()).await;
    let direct = tool_result(&env, "f1");
    assert!(
        direct.contains("127.0.0.1 is a private address"),
        "{direct}"
    );
    let named = tool_result(&env, "f2");
    assert!(named.contains("resolves to a private address"), "{named}");
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the server"
    );
    let asks = sim.permission_requests.lock().unwrap().clone();
    assert_eq!(asks.len(), 2);
    assert_eq!(asks[0].tool_call.fields.kind, Some(ToolKind::Fetch));
    let labels: Vec<String> = asks[0].options.iter().map(|o| o.name.clone()).collect();
    assert!(
        labels.iter().any(|label| label.contains("127.0.0.1")),
        "always allow is scoped to the host: {labels:?}"
    );
}

#[tokio::test]
async fn web_search_asks_its_provider_and_is_offered_only_with_one() {
    let (port, seen) = serve().await;
    let env = TestEnv::with_config(&format!(
        "[web.search]\nprovider = \"searxng\"\nurl = \"http://127.0.0.1:{port}\""
    ))
    .await;
    env.mock.push_json(call(
        "s1",
        "web_search",
        json!({"queries": ["tokio runtime", "tokio docs"]}),
    ));
    env.mock
        .push_json(call("s2", "web_search", json!({"queries": []})));
    run(&env, "full-access", ClientSim::new(false, false)).await;
    let found = tool_result(&env, "s1");
    assert!(
        found.contains("Answer: Tokio is an async runtime."),
        "{found}"
    );
    assert!(found.contains("1. [Tokio](https://tokio.rs/)"), "{found}");
    assert!(
        found.contains("2. [docs.rs tokio](https://docs.rs/tokio)"),
        "{found}"
    );
    // Both queries were sent; their results merged without duplicates.
    assert_eq!(found.matches("https://tokio.rs/").count(), 1);
    let asked = seen.lock().unwrap().clone();
    assert_eq!(asked.len(), 2);
    assert!(
        asked[0].starts_with("/search?q=tokio+runtime&format=json"),
        "{asked:?}"
    );
    assert!(tool_result(&env, "s2").contains("1–4"));
    let tools = env.mock.requests()[0]["tools"].to_string();
    assert!(tools.contains("\"web_search\"") && tools.contains("\"web_fetch\""));

    // Without a provider: not offered, and a call is an unknown tool.
    let env = TestEnv::with_config("[web]\nfetch = false").await;
    env.mock
        .push_json(call("s1", "web_search", json!({"queries": ["x"]})));
    run(&env, "full-access", ClientSim::new(false, false)).await;
    let tools = env.mock.requests()[0]["tools"].to_string();
    assert!(!tools.contains("\"web_search\"") && !tools.contains("\"web_fetch\""));
    assert!(tool_result(&env, "s1").contains("Unknown tool"));
}

/// Pages nested 20,000 deep (100 KB) used to overflow the stack of the
/// HTML → markdown walk and abort dsh, every session with it; 10^5 deep
/// (divs: 1 MB; blockquotes: 2.5 MB) took minutes of parsing first. Now the
/// nesting is capped before conversion: the text survives, flattened, the
/// model is told, and dsh goes on serving this session and new ones.
#[tokio::test]
async fn web_fetch_of_pages_nested_100_000_deep_answers_and_dsh_survives() {
    let (port, _) = serve().await;
    let env = TestEnv::with_config("[web]\nallow_private = [\"127.0.0.1\"]").await;
    let url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    env.mock
        .push_json(call("f0", "web_fetch", json!({"url": url("/div-20000")})));
    env.mock
        .push_json(call("f1", "web_fetch", json!({"url": url("/deep-div")})));
    env.mock
        .push_json(call("f2", "web_fetch", json!({"url": url("/deep-quote")})));
    env.mock.push_json(reply("done"));
    let conn = env.connect_with(ClientSim::new(false, false)).await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    let answered = tokio::time::timeout(Duration::from_secs(60), conn.prompt(&session, "fetch"))
        .await
        .expect("dsh answers within a minute")
        .unwrap_or_else(|err| {
            panic!(
                "the prompt failed: {err:?}; stderr:\n{}",
                conn.stderr.lock().unwrap()
            )
        });
    assert_eq!(
        answered.stop_reason,
        agent_client_protocol::v1::schema::StopReason::EndTurn
    );
    for (id, inner) in [
        ("f0", "deep text"),
        ("f1", "deep text"),
        ("f2", "quoted text"),
    ] {
        let page = tool_result(&env, id);
        assert!(
            page.contains("Content-Type: text/html"),
            "{id}: {page:.300}"
        );
        assert!(page.contains("# Deep"), "{id}: {page:.300}");
        assert!(page.contains(inner), "{id}: the text survives: {page:.300}");
        assert!(page.contains("after the nesting"), "{id}: {page:.300}");
        assert!(
            page.contains("nested deeper than"),
            "{id}: the model is told: {page:.300}"
        );
        assert!(page.len() < 70_000, "{id}: {} bytes", page.len());
    }
    // The same session and a new one still work.
    env.mock.push_json(reply("still here"));
    conn.prompt(&session, "again").await.unwrap();
    let other = conn.start(&env.cwd()).await;
    env.mock.push_json(reply("a new session"));
    conn.prompt(&other, "hello").await.unwrap();
    assert!(chunk_text(&conn.updates(), false).contains("a new session"));
    validate_frames(&conn.finish().await);
}

/// CPU time (user + system) a process has used, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Cancelling a turn whose `web_fetch` is converting a hostile page (10^5
/// nested blockquotes around 500,000 lines, cut at the 5 MiB download cap)
/// answers at once and leaves no worker burning a core: it used to go on
/// parsing for minutes. The session takes the next prompt.
#[tokio::test]
async fn cancel_during_a_hostile_conversion_answers_at_once_and_frees_the_cpu() {
    let (port, seen) = serve().await;
    let env = TestEnv::relaxed().await;
    let config = env.home.path().join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[web]\nallow_private = [\"127.0.0.1\"]\n");
    std::fs::write(&config, text).unwrap();
    env.mock.push_json(call(
        "f1",
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/deep-quote-long")}),
    ));
    let conn = env.connect_with(ClientSim::new(false, false)).await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    let prompt = conn.send_prompt(&session, "fetch");
    let started = std::time::Instant::now();
    while seen.lock().unwrap().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(20), "no fetch");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The page is in (5 MiB over loopback); its conversion has begun and
    // takes seconds even in a release build.
    tokio::time::sleep(Duration::from_millis(500)).await;
    conn.cancel(&session);
    let cancelled_at = std::time::Instant::now();
    let answered = tokio::time::timeout(Duration::from_secs(5), prompt.block_task())
        .await
        .expect("the cancelled prompt answers within 5 s")
        .unwrap();
    assert_eq!(
        answered.stop_reason,
        agent_client_protocol::v1::schema::StopReason::Cancelled
    );
    assert!(cancelled_at.elapsed() < Duration::from_secs(2));
    // No worker goes on converting: dsh is idle.
    let pid = conn.child.id().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = cpu_ticks(pid) - before;
    assert!(
        used < 50,
        "dsh used {used} ticks of CPU in the 2 s after the cancel"
    );
    env.mock.push_json(reply("ready"));
    let next = conn.prompt(&session, "next").await.unwrap();
    assert_eq!(
        next.stop_reason,
        agent_client_protocol::v1::schema::StopReason::EndTurn
    );
    validate_frames(&conn.finish().await);
}
