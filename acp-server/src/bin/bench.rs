//! `dsh-bench`: measures the figures the issues set targets for and prints
//! a table. Not a test: nothing is asserted. Run it on a release build:
//!
//! ```text
//! cargo build --release && ./target/release/dsh-bench
//! ```
//!
//! It spawns the `dsh` binary next to itself, talks raw ACP frames over its
//! stdio, and points it at the same mock OpenAI-compatible server the tests
//! use (127.0.0.1 only).
#![allow(clippy::print_stdout)]

#[path = "../../../tests/e2e/support/mock_model.rs"]
mod mock_model;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

struct Proc {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
}

impl Proc {
    fn spawn(dsh: &Path, home: &Path, base_url: &str) -> Proc {
        let mut child = tokio::process::Command::new(dsh)
            .arg("acp")
            .env("DSH_HOME", home)
            .env("DEEPSEEK_API_KEY", "bench-key")
            .env("DEEPSEEK_BASE_URL", base_url)
            .env("DSH_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn dsh");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap()).lines();
        Proc {
            child,
            stdin,
            lines,
            next_id: 1,
        }
    }

    async fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let frame = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        self.stdin
            .write_all(format!("{frame}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
        id
    }

    /// Reads frames until the response to `id`; returns it and the number
    /// of notifications seen on the way.
    async fn response(&mut self, id: u64) -> (Value, usize) {
        let mut notifications = 0;
        loop {
            let line = self.lines.next_line().await.unwrap().expect("dsh exited");
            let value: Value = serde_json::from_str(&line).unwrap();
            if value.get("id").and_then(Value::as_u64) == Some(id) && value.get("method").is_none()
            {
                return (value, notifications);
            }
            notifications += 1;
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> (Value, usize) {
        let id = self.send(method, params).await;
        self.response(id).await
    }

    /// CPU time the process has used, all threads, nanoseconds
    /// (`/proc/<pid>/task/*/schedstat`).
    fn cpu_ns(&self) -> u64 {
        let pid = self.child.id().unwrap();
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks
                    .flatten()
                    .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
                    .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
                    .sum()
            })
            .unwrap_or(0)
    }

    fn rss_kib(&self) -> u64 {
        let pid = self.child.id().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }

    async fn close(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values[values.len() / 2]
}

fn row(what: &str, target: &str, measured: String) {
    println!("| {what:<64} | {target:<14} | {measured:<28} |");
}

/// Writes a session log with `events` events (alternating prompts and
/// replies, as a real conversation would).
fn write_session(home: &Path, cwd: &Path, id: &str, events: usize) {
    let dir = home.join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = json!({"format":"dsh-session","version":1,"id":id,"created_at":1,"cwd":cwd,"roots":[],"mcp_servers":[]}).to_string();
    text.push('\n');
    let mut seq = 0;
    let mut turn = 0;
    while seq < events {
        turn += 1;
        for data in [
            json!({"type":"user/message","data":{"turn":turn,"content":[{"type":"text","text":format!("Question {turn}: what does function number {turn} do in this module?")}]}}),
            json!({"type":"turn/start","data":{"turn":turn}}),
            json!({"type":"assistant/message","data":{"turn":turn,"step":1,"text":"It parses the input, validates every field, and returns a typed value; errors carry the line number.","reasoning":"Look at the function body first.","usage":{"input_tokens":1000,"output_tokens":40,"cache_read_tokens":900},"finish":"stop"}}),
            json!({"type":"turn/end","data":{"turn":turn,"stop":"end_turn"}}),
        ] {
            if seq >= events {
                break;
            }
            seq += 1;
            let mut event = data;
            event["seq"] = seq.into();
            event["time"] = 1.into();
            text.push_str(&event.to_string());
            text.push('\n');
        }
    }
    std::fs::write(dir.join(format!("{id}.jsonl")), text).unwrap();
}

#[tokio::main]
async fn main() {
    let dsh: PathBuf = std::env::current_exe().unwrap().with_file_name("dsh");
    assert!(dsh.exists(), "build dsh first: cargo build --release");
    let mock = mock_model::MockModel::start().await;
    let scratch = tempdir();
    let home = scratch.join("home");
    let cwd = scratch.join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    let init = json!({"protocolVersion":1,"clientCapabilities":{}});

    println!(
        "dsh-bench: {} ({} cores)",
        dsh.display(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
    println!();
    println!(
        "| {:<64} | {:<14} | {:<28} |",
        "measure", "target", "measured"
    );
    println!("|{}|{}|{}|", "-".repeat(66), "-".repeat(16), "-".repeat(30));
    // `dsh-bench stream-cost`: only the streaming-cost rows.
    if std::env::args().nth(1).as_deref() == Some("stream-cost") {
        stream_cost_rows(&dsh, &home, &cwd, &mock, &init).await;
        return;
    }

    // 1. Process start → initialize answered.
    let mut samples = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        let mut proc = Proc::spawn(&dsh, &home, &mock.url);
        proc.call("initialize", init.clone()).await;
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
        proc.close().await;
    }
    let min = samples.iter().cloned().fold(f64::MAX, f64::min);
    row(
        "start → initialize answered (median of 30)",
        "≤ 10 ms",
        format!("{:.2} ms (min {:.2})", median(samples), min),
    );

    // 2. RSS after session/new.
    let mut proc = Proc::spawn(&dsh, &home, &mock.url);
    proc.call("initialize", init.clone()).await;
    let (session, _) = proc
        .call("session/new", json!({"cwd":cwd,"mcpServers":[]}))
        .await;
    let session_id = session["result"]["sessionId"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(100)).await;
    row(
        "RSS after session/new",
        "≤ 15 MB",
        format!("{:.1} MB", proc.rss_kib() as f64 / 1024.0),
    );

    // 3. Streaming throughput: a 10,000-chunk scripted response end to end.
    let chunks = 10_000;
    let mut rates = Vec::new();
    for _ in 0..5 {
        mock.push_json(json!({"repeat":{"text":"token ","count":chunks},"finish":"stop","usage":{"prompt_tokens":10,"completion_tokens":chunks}}));
        let started = Instant::now();
        let id = proc
            .send(
                "session/prompt",
                json!({"sessionId":session_id,"prompt":[{"type":"text","text":"go"}]}),
            )
            .await;
        let mut seen = 0usize;
        loop {
            let line = proc.lines.next_line().await.unwrap().unwrap();
            if line.contains("agent_message_chunk") {
                seen += 1;
            } else if line.contains(&format!("\"id\":{id}")) && !line.contains("\"method\"") {
                break;
            }
        }
        let elapsed = started.elapsed();
        assert_eq!(seen, chunks, "every chunk arrives as its own update");
        rates.push(chunks as f64 / elapsed.as_secs_f64());
    }
    row(
        "stream 10,000 chunks end to end (median of 5)",
        "≥ 50,000 /s",
        format!("{:.0} chunks/s", median(rates)),
    );
    row(
        "RSS after 5 × 10,000-chunk turns",
        "—",
        format!("{:.1} MB", proc.rss_kib() as f64 / 1024.0),
    );

    // 3a. Streaming cost as a provider streams: 2,000 chunks of 4
    //     characters, one SSE event per TCP write, back to back and paced.
    proc.close().await;
    stream_cost_rows(&dsh, &home, &cwd, &mock, &init).await;
    let mut proc = Proc::spawn(&dsh, &home, &mock.url);
    proc.call("initialize", init.clone()).await;
    let (session, _) = proc
        .call("session/new", json!({"cwd":cwd,"mcpServers":[]}))
        .await;
    let session_id = session["result"]["sessionId"].as_str().unwrap().to_owned();

    // 3b. First SSE event written by the model → first agent_message_chunk
    //     read by the client (same clock: the mock runs in this process).
    let mut latencies = Vec::new();
    for _ in 0..30 {
        mock.push_json(json!({"chunks":[{"text":"first"},{"text":" second"}],"finish":"stop"}));
        let before = mock.first_events().len();
        let id = proc
            .send(
                "session/prompt",
                json!({"sessionId":session_id,"prompt":[{"type":"text","text":"go"}]}),
            )
            .await;
        let mut first_chunk = None;
        loop {
            let line = proc.lines.next_line().await.unwrap().unwrap();
            if first_chunk.is_none() && line.contains("agent_message_chunk") {
                first_chunk = Some(Instant::now());
            } else if line.contains(&format!("\"id\":{id}")) && !line.contains("\"method\"") {
                break;
            }
        }
        let sent = mock.first_events()[before];
        latencies.push(first_chunk.unwrap().duration_since(sent).as_secs_f64() * 1000.0);
    }
    let max = latencies.iter().cloned().fold(0.0, f64::max);
    row(
        "first SSE event → first agent_message_chunk (median of 30)",
        "—",
        format!("{:.2} ms (max {:.2})", median(latencies), max),
    );
    proc.close().await;

    // 3c. 50 sessions in one process, each running a tool and streaming.
    let mut proc = Proc::spawn(&dsh, &home, &mock.url);
    proc.call("initialize", init.clone()).await;
    let mut sessions = Vec::new();
    for i in 0..50 {
        std::fs::write(cwd.join(format!("s{i}.txt")), format!("file {i}\n")).unwrap();
        let (created, _) = proc
            .call("session/new", json!({"cwd":cwd,"mcpServers":[]}))
            .await;
        sessions.push(created["result"]["sessionId"].as_str().unwrap().to_owned());
        let (_, _) = proc
            .call(
                "session/set_config_option",
                json!({"sessionId":sessions[i],"configId":"mode","value":"full-access"}),
            )
            .await;
    }
    for _ in 0..100 {
        mock.push_json(json!({"echo_read":true,"echo_chunks":8,"finish":"stop"}));
    }
    let started = Instant::now();
    let mut pending = std::collections::HashSet::new();
    for (i, session) in sessions.iter().enumerate() {
        let text = format!("s{i}.txt hello from session {i}");
        let id = proc
            .send(
                "session/prompt",
                json!({"sessionId":session,"prompt":[{"type":"text","text":text}]}),
            )
            .await;
        pending.insert(id);
    }
    while !pending.is_empty() {
        let line = proc.lines.next_line().await.unwrap().unwrap();
        let value: Value = serde_json::from_str(&line).unwrap();
        if value.get("method").is_none() {
            if let Some(id) = value.get("id").and_then(Value::as_u64) {
                assert_eq!(value["result"]["stopReason"], "end_turn", "{value}");
                pending.remove(&id);
            }
        }
    }
    row(
        "50 sessions × (read tool + 8-chunk reply), all prompts at once",
        "—",
        format!(
            "{:.0} ms wall, RSS {:.1} MB",
            started.elapsed().as_secs_f64() * 1000.0,
            proc.rss_kib() as f64 / 1024.0
        ),
    );
    proc.close().await;

    // 4. session/load of 1k, 10k and 100k-event sessions (replay included).
    for events in [1_000usize, 10_000, 100_000] {
        let id = format!("bench-load-{events}");
        write_session(&home, &cwd, &id, events);
        let mut samples = Vec::new();
        let mut updates = 0;
        for _ in 0..3 {
            let mut proc = Proc::spawn(&dsh, &home, &mock.url);
            proc.call("initialize", init.clone()).await;
            let started = Instant::now();
            let (response, notifications) = proc
                .call(
                    "session/load",
                    json!({"sessionId":id,"cwd":cwd,"mcpServers":[]}),
                )
                .await;
            samples.push(started.elapsed().as_secs_f64() * 1000.0);
            assert!(response.get("result").is_some(), "{response}");
            updates = notifications;
            proc.close().await;
        }
        let target = if events == 10_000 {
            "≤ 150 ms"
        } else {
            "—"
        };
        row(
            &format!("session/load, {events} events ({updates} updates replayed)"),
            target,
            format!("{:.1} ms", median(samples)),
        );
    }
    // 5. Language servers: first answer, warm query through the bridge vs
    //    the same request sent straight to the server, RSS.
    lsp_rows(&scratch).await;
    let _ = std::fs::remove_dir_all(&scratch);
}

/// What one streamed turn cost.
struct StreamSample {
    cpu_us_per_chunk: f64,
    wall_ms: f64,
    mock_ms: f64,
    to_request_ms: f64,
    updates: usize,
}

/// Rows for streaming cost: CPU per chunk, the turn against the mock's own
/// emission time, updates written, prompt → request (3 processes × 5
/// prompts; medians).
async fn stream_cost_rows(
    dsh: &Path,
    home: &Path,
    cwd: &Path,
    mock: &mock_model::MockModel,
    init: &Value,
) {
    const CHUNKS: usize = 2_000;
    for (label, pace_us) in [("back to back", 0u64), ("paced ~50 µs", 50)] {
        let mut samples = Vec::new();
        for _ in 0..3 {
            let mut proc = Proc::spawn(dsh, home, &mock.url);
            proc.call("initialize", init.clone()).await;
            let (session, _) = proc
                .call("session/new", json!({"cwd":cwd,"mcpServers":[]}))
                .await;
            let session_id = session["result"]["sessionId"].as_str().unwrap().to_owned();
            for _ in 0..5 {
                mock.push_json(json!({
                    "repeat":{"text":"tok ","count":CHUNKS},
                    "finish":"stop",
                    "usage":{"prompt_tokens":10,"completion_tokens":CHUNKS},
                    "pace_us": pace_us
                }));
                let (emitted, arrived) = (mock.emissions().len(), mock.arrivals().len());
                let cpu = proc.cpu_ns();
                let started = Instant::now();
                let id = proc
                    .send(
                        "session/prompt",
                        json!({"sessionId":session_id,"prompt":[{"type":"text","text":"go"}]}),
                    )
                    .await;
                let (mut updates, mut text) = (0usize, 0usize);
                loop {
                    let line = proc.lines.next_line().await.unwrap().unwrap();
                    let value: Value = serde_json::from_str(&line).unwrap();
                    if value["method"] == "session/update" {
                        updates += 1;
                        let update = &value["params"]["update"];
                        if update["sessionUpdate"] == "agent_message_chunk" {
                            text += update["content"]["text"].as_str().unwrap().len();
                        }
                    } else if value["id"] == id {
                        break;
                    }
                }
                let wall = started.elapsed();
                let cpu = proc.cpu_ns() - cpu;
                assert_eq!(text, CHUNKS * 4, "every chunk arrives");
                let (first, last) = mock.emissions()[emitted];
                samples.push(StreamSample {
                    cpu_us_per_chunk: cpu as f64 / 1000.0 / CHUNKS as f64,
                    wall_ms: wall.as_secs_f64() * 1000.0,
                    mock_ms: last.duration_since(first).as_secs_f64() * 1000.0,
                    to_request_ms: mock.arrivals()[arrived]
                        .duration_since(started)
                        .as_secs_f64()
                        * 1000.0,
                    updates,
                });
            }
            proc.close().await;
        }
        let pick = |f: fn(&StreamSample) -> f64| median(samples.iter().map(f).collect());
        let updates = median(samples.iter().map(|s| s.updates as f64).collect());
        row(
            &format!("stream 2,000 × 4-char chunks, one SSE event per write, {label} (median of 3×5)"),
            "≤ 25 µs CPU/chunk",
            format!(
                "{:.1} µs/chunk; turn {:.0} ms vs mock {:.0} ms; {:.0} updates; prompt→request {:.2} ms",
                pick(|s| s.cpu_us_per_chunk),
                pick(|s| s.wall_ms),
                pick(|s| s.mock_ms),
                updates,
                pick(|s| s.to_request_ms),
            ),
        );
    }
}

/// (server command, workspace fixture, file, 1-based line, symbol)
const LSP_CASES: &[(&str, &str, &str, u32, &str)] = &[
    ("clangd", "c", "main.c", 5, "scale"),
    ("pyright-langserver", "python", "app/main.py", 3, "scale"),
    (
        "typescript-language-server",
        "ts",
        "src/main.ts",
        3,
        "scale",
    ),
];

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn utf16_position(text: &str, line: u32, symbol: &str) -> dsh_lsp_bridge::Position {
    let content = text.lines().nth(line as usize - 1).unwrap();
    let byte = content.find(symbol).unwrap();
    dsh_lsp_bridge::Position {
        line: line - 1,
        character: content[..byte].encode_utf16().count() as u32,
    }
}

/// RSS of the server's processes: those running in `root` (the scratch root
/// is unique to one server) or named after the command (pyright changes
/// its working directory).
fn tree_rss_kib(root: &Path, command: &str) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let named = String::from_utf8_lossy(&cmdline).contains(command);
        if (cwd == root || named) && pid != std::process::id() {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            total += status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    total
}

async fn lsp_rows(scratch: &Path) {
    use dsh_lsp_bridge::{Answer, Bridge, BridgeSettings, Operation, Query};
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/workspaces");
    for (command, fixture, file, line, symbol) in LSP_CASES {
        let Ok(program) = which_program(command) else {
            row(
                &format!("LSP {command}"),
                "—",
                "not installed (.ci/install-lsp)".into(),
            );
            continue;
        };
        let root = scratch.join(format!("lsp-{fixture}"));
        copy_dir(&fixtures.join(fixture), &root);
        let root = root.canonicalize().unwrap();
        let path = root.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let position = utf16_position(&text, *line, symbol);
        let query = Query {
            file: path.clone(),
            text: text.clone(),
            position: Some(position),
            operation: Operation::Definition,
        };
        let settings = BridgeSettings {
            ready_timeout_ms: 60_000,
            request_timeout_ms: 30_000,
            ..BridgeSettings::default()
        };
        let bridge = Bridge::new(
            settings,
            vec![root.clone()],
            dsh_process::Spawner::default(),
            std::sync::Arc::new(|_: &std::path::Path| true),
        );
        let started = Instant::now();
        loop {
            match bridge.query(&query).await {
                Ok(Answer::Locations(found)) if !found.is_empty() => break,
                _ if started.elapsed() > Duration::from_secs(60) => break,
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        let first = started.elapsed();
        let mut warm = Vec::new();
        for _ in 0..50 {
            let t = Instant::now();
            let _ = bridge.query(&query).await;
            warm.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let rss = tree_rss_kib(&root, command);
        bridge.shutdown().await;
        let direct = direct_definition_ms(&program, command, &root, &path, &text, position).await;
        let bridged = median(warm);
        row(
            &format!("LSP {command}: first definition"),
            "—",
            format!("{:.0} ms", first.as_secs_f64() * 1000.0),
        );
        row(
            &format!("LSP {command}: warm definition, bridge vs direct"),
            "≤ 2 ms added",
            match direct {
                Some(direct) => {
                    format!("{bridged:.2} vs {direct:.2} ms (+{:.2})", bridged - direct)
                }
                None => format!("{bridged:.2} ms (direct failed)"),
            },
        );
        row(
            &format!("LSP {command}: RSS"),
            "—",
            format!("{:.0} MB", rss as f64 / 1024.0),
        );
    }
}

fn which_program(command: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(command))
                .find(|p| p.is_file())
        })
        .ok_or(())
}

/// The same definition request over a minimal hand-written LSP client, for
/// the overhead comparison: median of 50 warm requests.
async fn direct_definition_ms(
    program: &Path,
    command: &str,
    root: &Path,
    file: &Path,
    text: &str,
    position: dsh_lsp_bridge::Position,
) -> Option<f64> {
    use tokio::io::{AsyncReadExt, BufReader as TokioBufReader};
    let args: Vec<&str> = match command {
        "clangd" => vec![],
        _ => vec!["--stdio"],
    };
    let mut child = tokio::process::Command::new(program)
        .args(&args)
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let mut stdout = TokioBufReader::new(child.stdout.take()?);
    let root_uri = format!("file://{}", root.display());
    let file_uri = format!("file://{}", file.display());
    let init_options = if command == "typescript-language-server" {
        json!({"tsserver":{"useSyntaxServer":"never"}})
    } else {
        Value::Null
    };
    async fn send(stdin: &mut tokio::process::ChildStdin, value: Value) {
        let body = value.to_string();
        stdin
            .write_all(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }
    async fn recv(stdout: &mut TokioBufReader<tokio::process::ChildStdout>) -> Option<Value> {
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            stdout.read_line(&mut line).await.ok()?;
            if line.is_empty() {
                return None;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("Content-Length:") {
                length = value.trim().parse().ok()?;
            }
        }
        let mut body = vec![0u8; length];
        stdout.read_exact(&mut body).await.ok()?;
        serde_json::from_slice(&body).ok()
    }
    /// Sends a request and answers server requests until its response.
    async fn call(
        stdin: &mut tokio::process::ChildStdin,
        stdout: &mut TokioBufReader<tokio::process::ChildStdout>,
        id: u64,
        method: &str,
        params: Value,
    ) -> Option<Value> {
        send(
            stdin,
            json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}),
        )
        .await;
        loop {
            let message = recv(stdout).await?;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return Some(message);
            }
            if let (Some(request_id), Some(method)) = (
                message.get("id"),
                message.get("method").and_then(|m| m.as_str()),
            ) {
                let result = if method == "workspace/configuration" {
                    Value::Array(vec![
                        Value::Null;
                        message["params"]["items"]
                            .as_array()
                            .map(|a| a.len())
                            .unwrap_or(1)
                    ])
                } else {
                    Value::Null
                };
                send(
                    stdin,
                    json!({"jsonrpc":"2.0","id":request_id,"result":result}),
                )
                .await;
            }
        }
    }
    call(&mut stdin, &mut stdout, 1, "initialize", json!({"processId":std::process::id(),"rootUri":root_uri,"capabilities":{"window":{"workDoneProgress":true}},"initializationOptions":init_options})).await?;
    send(
        &mut stdin,
        json!({"jsonrpc":"2.0","method":"initialized","params":{}}),
    )
    .await;
    let language = match command {
        "clangd" => "c",
        "pyright-langserver" => "python",
        _ => "typescript",
    };
    send(&mut stdin, json!({"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":file_uri,"languageId":language,"version":1,"text":text}}})).await;
    let params = json!({"textDocument":{"uri":file_uri},"position":{"line":position.line,"character":position.character}});
    let mut id = 2;
    let started = Instant::now();
    loop {
        let response = call(
            &mut stdin,
            &mut stdout,
            id,
            "textDocument/definition",
            params.clone(),
        )
        .await?;
        id += 1;
        let result = &response["result"];
        if !(result.is_null() || result.as_array().is_some_and(|a| a.is_empty()))
            || started.elapsed() > Duration::from_secs(60)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut samples = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        call(
            &mut stdin,
            &mut stdout,
            id,
            "textDocument/definition",
            params.clone(),
        )
        .await?;
        id += 1;
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let _ = child.start_kill();
    Some(median(samples))
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dsh-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
