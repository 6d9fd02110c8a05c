//! `dsh-bench`: measures the figures the issues set targets for and prints
//! a table. Not a test: nothing is asserted. Run it on a release build:
//!
//! ```text
//! cargo build --release
//! ./target/release/dsh-bench            # every row
//! ./target/release/dsh-bench stream     # streaming cost and latency
//! ./target/release/dsh-bench scale      # session/list, session/load, eviction, long turns
//! ./target/release/dsh-bench soak [SESSIONS] [MINUTES] [REST]   # default 20 × 8, no rest
//! ./target/release/dsh-bench lsp        # language servers
//! ./target/release/dsh-bench checkpoint # the workspace scan and file copies of /undo
//! ./target/release/dsh-bench sandbox    # what the kernel sandbox adds to starting a command
//! ./target/release/dsh-bench sdk        # dsh sdk latency and cost, dsh run start to exit
//! ./target/release/dsh-bench search [--sessions N] [--events-per-session M]
//!                                       # the session search index, default 10,000 × 100
//!                                       # (about 30 s, 450 MB of scratch files)
//! ```
//!
//! It spawns the `dsh` binary next to itself, talks raw ACP frames over its
//! stdio, and points it at the same mock OpenAI-compatible server the tests
//! use (`dsh-test-support`'s `mock_model`, 127.0.0.1 only).
// The bench runs on Linux, where std's canonicalize is the one (clippy.toml).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::print_stdout)]

mod checkpoint;
mod context;
mod lsp;
mod proc;
mod sandbox;
mod scale;
mod sdk;
mod search;
mod soak;
mod stream;

use std::path::PathBuf;
use std::time::Instant;

use dsh_test_support::mock_model::MockModel;
use serde_json::{json, Value};

use proc::{median, row, Proc};

/// What every row needs: the binary, the mock model, a scratch home.
pub struct Bench {
    pub dsh: PathBuf,
    pub mock: MockModel,
    pub scratch: PathBuf,
    pub home: PathBuf,
    pub cwd: PathBuf,
}

impl Bench {
    /// A `dsh acp` process, initialized.
    pub async fn spawn(&self) -> Proc {
        let mut proc = Proc::spawn(&self.dsh, &self.home, &self.mock.url);
        proc.call(
            "initialize",
            json!({"protocolVersion":1,"clientCapabilities":{}}),
        )
        .await;
        proc
    }

    /// A new session in the scratch workspace.
    pub async fn session(&self, proc: &mut Proc) -> String {
        let (session, _) = proc
            .call("session/new", json!({"cwd":self.cwd,"mcpServers":[]}))
            .await;
        session["result"]["sessionId"].as_str().unwrap().to_owned()
    }

    /// Sends one text prompt; returns its request id.
    pub async fn send_prompt(proc: &mut Proc, session: &str, text: &str) -> u64 {
        proc.send(
            "session/prompt",
            json!({"sessionId":session,"prompt":[{"type":"text","text":text}]}),
        )
        .await
    }
}

#[tokio::main]
async fn main() {
    // The `search` rows' helper processes (a search without `dsh
    // sessions search`, a child's peak RSS).
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|mode| mode.starts_with("search-")) {
        return search::helper(&args);
    }
    let dsh: PathBuf = std::env::current_exe().unwrap().with_file_name("dsh");
    assert!(dsh.exists(), "build dsh first: cargo build --release");
    let scratch = proc::tempdir();
    let bench = Bench {
        dsh,
        mock: MockModel::start().await,
        home: scratch.join("home"),
        cwd: scratch.join("work"),
        scratch,
    };
    std::fs::create_dir_all(&bench.cwd).unwrap();
    let mode = args.first().map(String::as_str).unwrap_or("all");

    println!(
        "dsh-bench {mode}: {} ({} cores)",
        bench.dsh.display(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
    println!();
    if mode == "soak" {
        let number = |at: usize, default: u64| {
            args.get(at)
                .map(|n| n.parse().expect("a number"))
                .unwrap_or(default)
        };
        soak::run(&bench, number(1, 20) as usize, number(2, 8), number(3, 0)).await;
    } else {
        println!(
            "| {:<64} | {:<14} | {:<28} |",
            "measure", "target", "measured"
        );
        println!("|{}|{}|{}|", "-".repeat(66), "-".repeat(16), "-".repeat(30));
        match mode {
            "start" => start_rows(&bench).await,
            "stream" => stream::rows(&bench).await,
            // The streaming-cost rows alone (for profiling).
            "stream-cost" => stream::cost(&bench).await,
            "scale" => scale::rows(&bench).await,
            // The session/list rows alone.
            "list" => scale::list(&bench).await,
            "context" => context::rows(&bench).await,
            // The session/load rows alone (for profiling).
            "load" => scale::load(&bench).await,
            // The first prompt after an eviction alone.
            "evict" => scale::after_eviction(&bench).await,
            "lsp" => lsp::lsp_rows(&bench.scratch).await,
            "sdk" => sdk::rows(&bench).await,
            "checkpoint" => checkpoint::rows(&bench).await,
            "sandbox" => sandbox::rows(&bench).await,
            "search" => search::rows(&bench, &args[1..]).await,
            "all" => {
                start_rows(&bench).await;
                stream::rows(&bench).await;
                scale::rows(&bench).await;
                context::rows(&bench).await;
                sdk::rows(&bench).await;
                checkpoint::rows(&bench).await;
                sandbox::rows(&bench).await;
                lsp::lsp_rows(&bench.scratch).await;
                search::rows(&bench, &[]).await;
            }
            other => {
                panic!("unknown mode {other:?}: all, start, stream, stream-cost, scale, list, load, evict, context, sdk, checkpoint, sandbox, search, soak, lsp")
            }
        }
    }
    let _ = std::fs::remove_dir_all(&bench.scratch);
}

/// Process start and the memory of an idle session.
async fn start_rows(bench: &Bench) {
    let mut samples = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        let proc = bench.spawn().await;
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
        proc.close().await;
    }
    let min = samples.iter().cloned().fold(f64::MAX, f64::min);
    row(
        "start → initialize answered (median of 30)",
        "≤ 10 ms",
        format!("{:.2} ms (min {:.2})", median(samples), min),
    );

    let mut proc = bench.spawn().await;
    let session = bench.session(&mut proc).await;
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    row(
        "RSS after session/new",
        "≤ 15 MB",
        format!(
            "{:.1} MB (anonymous {:.1} MB)",
            proc.rss_kib() as f64 / 1024.0,
            proc.rss_anon_kib() as f64 / 1024.0
        ),
    );

    // What a turn's first request carries: the system prompt, the prompt
    // and the tools (their schemas are the catalog's).
    bench
        .mock
        .push_json(json!({"chunks":[{"text":"ok"}],"finish":"stop"}));
    let before = bench.mock.requests().len();
    let id = Bench::send_prompt(&mut proc, &session, "hello").await;
    loop {
        let line = proc.lines.next_line().await.unwrap().unwrap();
        let frame: Value = serde_json::from_str(&line).unwrap();
        if frame["id"] == id {
            break;
        }
    }
    let request = bench.mock.requests().swap_remove(before);
    let tools = request["tools"].as_array().map_or(0, Vec::len);
    row(
        "first request of a turn: body (of it: tools)",
        "—",
        format!(
            "{} bytes ({} tools: {} bytes)",
            request.to_string().len(),
            tools,
            request["tools"].to_string().len()
        ),
    );
    proc.close().await;
}

/// The text of an `agent_message_chunk` frame, if it is one.
pub fn message_text(frame: &Value) -> Option<&str> {
    let update = &frame["params"]["update"];
    (frame["method"] == "session/update" && update["sessionUpdate"] == "agent_message_chunk")
        .then(|| update["content"]["text"].as_str())
        .flatten()
}
