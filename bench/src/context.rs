//! Agent context: what a 64 KiB AGENTS.md adds to the first request, and
//! what a compaction does to a long session on a 32k-token model.

use std::time::Instant;

use serde_json::json;

use crate::proc::{median, row};
use crate::Bench;

pub async fn rows(bench: &Bench) {
    first_request(bench).await;
    compacted(bench).await;
}

/// Prompt → model request of a session's first prompt, without and with a
/// 64 KiB AGENTS.md (each a fresh process and session, median of 15).
async fn first_request(bench: &Bench) {
    let agents = bench.cwd.join("AGENTS.md");
    let mut figures = Vec::new();
    for with in [false, true] {
        if with {
            let text: String = (0..1200)
                .map(|i| {
                    format!("- Rule {i:04}: keep functions short and named for what they do.\n")
                })
                .collect();
            std::fs::write(&agents, &text[..64 * 1024 - 200]).unwrap();
        } else {
            let _ = std::fs::remove_file(&agents);
        }
        let mut samples = Vec::new();
        for _ in 0..15 {
            bench
                .mock
                .push_json(json!({"chunks":[{"text":"ok"}],"finish":"stop"}));
            let mut proc = bench.spawn().await;
            let session = bench.session(&mut proc).await;
            let before = bench.mock.arrivals().len();
            let sent = Instant::now();
            let id = Bench::send_prompt(&mut proc, &session, "hello").await;
            proc.response(id).await;
            let arrived = bench.mock.arrivals()[before];
            samples.push(arrived.duration_since(sent).as_secs_f64() * 1000.0);
            proc.close().await;
        }
        figures.push(median(samples));
    }
    let _ = std::fs::remove_file(&agents);
    row(
        "first prompt → model request: no AGENTS.md / 64 KiB AGENTS.md",
        "—",
        format!(
            "{:.2} / {:.2} ms (+{:.2} ms)",
            figures[0],
            figures[1],
            figures[1] - figures[0]
        ),
    );
}

/// Twenty turns of 1,925-token replies on a 32,768-token model whose usage
/// reports the real size: the session compacts once it passes 80 %.
async fn compacted(bench: &Bench) {
    let home = bench.scratch.join("context-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        "[[models]]\nid = \"local-32k\"\ncontext_window = 32768\n",
    )
    .unwrap();
    let mut proc = crate::proc::Proc::spawn(&bench.dsh, &home, &bench.mock.url);
    proc.call(
        "initialize",
        json!({"protocolVersion":1,"clientCapabilities":{}}),
    )
    .await;
    let (session, _) = proc
        .call("session/new", json!({"cwd":bench.cwd,"mcpServers":[]}))
        .await;
    let session = session["result"]["sessionId"].as_str().unwrap().to_owned();
    let reply =
        "The module parses its input line by line and reports errors with positions. ".repeat(100);
    let tokens = (reply.len() / 4) as u64;
    // The usage the mock reports follows the conversation: it grows by a
    // reply per turn and falls to the retained window after a summary.
    let threshold = 32_768 * 8 / 10;
    let mut context = 0u64;
    let mut bodies = Vec::new();
    for turn in 1..=20 {
        if context > threshold {
            bench.mock.push_json(json!({
                "chunks":[{"text":"Summary: the user asked about the parser; it reads lines and reports positioned errors."}],
                "finish":"stop"
            }));
            context = 32_768 * 16 / 100;
        }
        context += tokens + 20;
        bench.mock.push_json(json!({
            "chunks":[{"text":reply}], "finish":"stop",
            "usage":{"prompt_tokens":context - tokens,"completion_tokens":tokens}
        }));
        let id = Bench::send_prompt(
            &mut proc,
            &session,
            &format!("Question {turn} about the parser?"),
        )
        .await;
        proc.response(id).await;
        let requests = bench.mock.requests();
        bodies.push(requests.last().unwrap().to_string().len());
    }
    proc.close().await;
    let log =
        std::fs::read_to_string(home.join("sessions").join(format!("{session}.jsonl"))).unwrap();
    let summaries: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["type"] == "compaction/summary")
        .collect();
    let figures: Vec<String> = summaries
        .iter()
        .map(|s| {
            format!(
                "{} → {} tokens ({} messages)",
                s["data"]["tokens_before"], s["data"]["tokens_after"], s["data"]["messages"]
            )
        })
        .collect();
    row(
        "20 turns × 1,925-token replies, 32k model: compactions",
        "—",
        format!(
            "{}; request body {} → {} KB",
            figures.join(", "),
            bodies.iter().max().unwrap_or(&0) / 1024,
            bodies.last().unwrap_or(&0) / 1024
        ),
    );
}
