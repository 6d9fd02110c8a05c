//! Streaming: throughput, CPU per streamed chunk as a provider streams,
//! first-chunk latency, many sessions at once.

use std::time::Instant;

use serde_json::{json, Value};

use crate::proc::{median, row, Proc};
use crate::{message_text, Bench};

pub async fn rows(bench: &Bench) {
    throughput(bench).await;
    cost(bench).await;
    first_chunk(bench).await;
    many_sessions(bench).await;
}

/// Reads frames until the response to `id`: the message text's length and
/// the number of updates.
async fn until_answered(proc: &mut Proc, id: u64) -> (usize, usize) {
    let (mut text, mut updates) = (0, 0);
    loop {
        let line = proc.lines.next_line().await.unwrap().unwrap();
        let frame: Value = serde_json::from_str(&line).unwrap();
        if frame["method"] == "session/update" {
            updates += 1;
            text += message_text(&frame).map_or(0, str::len);
        } else if frame["id"] == id {
            return (text, updates);
        }
    }
}

/// A 10,000-chunk scripted reply, delivered by the mock in large writes.
async fn throughput(bench: &Bench) {
    let mut proc = bench.spawn().await;
    let session = bench.session(&mut proc).await;
    let chunks = 10_000;
    let (mut rates, mut sent) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        bench.mock.push_json(json!({"repeat":{"text":"token ","count":chunks},"finish":"stop","usage":{"prompt_tokens":10,"completion_tokens":chunks}}));
        let started = Instant::now();
        let id = Bench::send_prompt(&mut proc, &session, "go").await;
        let (text, updates) = until_answered(&mut proc, id).await;
        assert_eq!(text, chunks * 6, "every chunk arrives");
        rates.push(chunks as f64 / started.elapsed().as_secs_f64());
        sent.push(updates as f64);
    }
    row(
        "stream 10,000 chunks end to end, mock writes in bursts (median of 5)",
        "≥ 50,000 /s",
        format!(
            "{:.0} chunks/s in {:.0} updates",
            median(rates),
            median(sent)
        ),
    );
    row(
        "RSS after 5 × 10,000-chunk turns",
        "—",
        format!("{:.1} MB", proc.rss_kib() as f64 / 1024.0),
    );
    proc.close().await;
}

/// What one streamed turn cost.
struct Sample {
    cpu_us_per_chunk: f64,
    wall_ms: f64,
    mock_ms: f64,
    to_request_ms: f64,
    first_chunk_ms: f64,
    updates: f64,
    rss_mb: f64,
}

/// 2,000 chunks of 4 characters, one SSE event per TCP write, back to back
/// and paced ~50 µs apart: CPU per chunk (the process's user+sys time over
/// the turn), the turn against the mock's own emission time, updates
/// written, prompt → model request, mock's first event → first chunk read.
/// 3 processes × 5 prompts; medians.
pub async fn cost(bench: &Bench) {
    const CHUNKS: usize = 2_000;
    for (label, pace_us) in [("back to back", 0u64), ("paced ~50 µs", 50)] {
        let mut samples = Vec::new();
        for _ in 0..3 {
            let mut proc = bench.spawn().await;
            let session = bench.session(&mut proc).await;
            for _ in 0..5 {
                samples.push(streamed_turn(bench, &mut proc, &session, CHUNKS, pace_us).await);
            }
            proc.close().await;
        }
        let pick = |f: fn(&Sample) -> f64| median(samples.iter().map(f).collect());
        row(
            &format!("stream 2,000 × 4-char chunks, one SSE event per write, {label} (3×5)"),
            "≤ 25 µs CPU/chunk",
            format!(
                "{:.1} µs/chunk; turn {:.0} ms vs mock {:.0} ms; {:.0} updates; prompt→request {:.2} ms; first chunk {:.2} ms; RSS {:.1} MB",
                pick(|s| s.cpu_us_per_chunk),
                pick(|s| s.wall_ms),
                pick(|s| s.mock_ms),
                pick(|s| s.updates),
                pick(|s| s.to_request_ms),
                pick(|s| s.first_chunk_ms),
                pick(|s| s.rss_mb),
            ),
        );
    }
}

async fn streamed_turn(
    bench: &Bench,
    proc: &mut Proc,
    session: &str,
    chunks: usize,
    pace_us: u64,
) -> Sample {
    let mock = &bench.mock;
    mock.push_json(json!({
        "repeat":{"text":"tok ","count":chunks},
        "finish":"stop",
        "usage":{"prompt_tokens":10,"completion_tokens":chunks},
        "pace_us": pace_us
    }));
    let (emitted, arrived) = (mock.emissions().len(), mock.arrivals().len());
    let cpu = proc.cpu_ns();
    let started = Instant::now();
    let id = Bench::send_prompt(proc, session, "go").await;
    let (mut updates, mut text, mut first_chunk) = (0usize, 0usize, None);
    loop {
        let line = proc.lines.next_line().await.unwrap().unwrap();
        let frame: Value = serde_json::from_str(&line).unwrap();
        if frame["method"] == "session/update" {
            updates += 1;
            if let Some(chunk) = message_text(&frame) {
                first_chunk.get_or_insert_with(Instant::now);
                text += chunk.len();
            }
        } else if frame["id"] == id {
            break;
        }
    }
    let wall = started.elapsed();
    let cpu = proc.cpu_ns() - cpu;
    assert_eq!(text, chunks * 4, "every chunk arrives");
    let (first, last) = mock.emissions()[emitted];
    Sample {
        cpu_us_per_chunk: cpu as f64 / 1000.0 / chunks as f64,
        wall_ms: wall.as_secs_f64() * 1000.0,
        mock_ms: last.duration_since(first).as_secs_f64() * 1000.0,
        to_request_ms: mock.arrivals()[arrived]
            .duration_since(started)
            .as_secs_f64()
            * 1000.0,
        first_chunk_ms: first_chunk
            .unwrap()
            .saturating_duration_since(first)
            .as_secs_f64()
            * 1000.0,
        updates: updates as f64,
        rss_mb: proc.rss_kib() as f64 / 1024.0,
    }
}

/// First SSE event written by the model → first `agent_message_chunk` read
/// by the client (one clock: the mock runs in this process).
async fn first_chunk(bench: &Bench) {
    let mut proc = bench.spawn().await;
    let session = bench.session(&mut proc).await;
    let mut latencies = Vec::new();
    for _ in 0..30 {
        bench.mock.push_json(
            json!({"chunks":[{"text":"first"},{"text":" second"}],"finish":"stop","delay_ms":5}),
        );
        let before = bench.mock.first_events().len();
        let id = Bench::send_prompt(&mut proc, &session, "go").await;
        let mut first_chunk = None;
        loop {
            let line = proc.lines.next_line().await.unwrap().unwrap();
            let frame: Value = serde_json::from_str(&line).unwrap();
            if first_chunk.is_none() && message_text(&frame).is_some() {
                first_chunk = Some(Instant::now());
            } else if frame["id"] == id {
                break;
            }
        }
        let sent = bench.mock.first_events()[before];
        latencies.push(first_chunk.unwrap().duration_since(sent).as_secs_f64() * 1000.0);
    }
    let max = latencies.iter().cloned().fold(0.0, f64::max);
    row(
        "first SSE event → first agent_message_chunk (median of 30)",
        "≤ 2 ms",
        format!("{:.2} ms (max {:.2})", median(latencies), max),
    );
    proc.close().await;
}

/// 50 sessions in one process, each running a tool and streaming.
async fn many_sessions(bench: &Bench) {
    let mut proc = bench.spawn().await;
    let mut sessions = Vec::new();
    for i in 0..50 {
        std::fs::write(bench.cwd.join(format!("s{i}.txt")), format!("file {i}\n")).unwrap();
        let session = bench.session(&mut proc).await;
        proc.call(
            "session/set_config_option",
            json!({"sessionId":session,"configId":"mode","value":"full-access"}),
        )
        .await;
        sessions.push(session);
    }
    for _ in 0..100 {
        bench
            .mock
            .push_json(json!({"echo_read":true,"echo_chunks":8,"finish":"stop"}));
    }
    let started = Instant::now();
    let mut pending = std::collections::HashSet::new();
    for (i, session) in sessions.iter().enumerate() {
        let text = format!("s{i}.txt hello from session {i}");
        pending.insert(Bench::send_prompt(&mut proc, session, &text).await);
    }
    while !pending.is_empty() {
        let line = proc.lines.next_line().await.unwrap().unwrap();
        let frame: Value = serde_json::from_str(&line).unwrap();
        if frame.get("method").is_none() {
            if let Some(id) = frame.get("id").and_then(Value::as_u64) {
                assert_eq!(frame["result"]["stopReason"], "end_turn", "{frame}");
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
}
