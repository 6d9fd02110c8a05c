//! Sessions at scale: `session/list` over 10,000 stored sessions,
//! `session/load` of long sessions, memory after long turns.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use crate::proc::{median, row, Proc};
use crate::Bench;

pub async fn rows(bench: &Bench) {
    list(bench).await;
    load(bench).await;
    after_eviction(bench).await;
    long_turns(bench).await;
}

/// Writes a session log with `events` events (alternating prompts and
/// replies, as a real conversation would); `pad` bytes of reply text each.
fn write_session(home: &Path, cwd: &Path, id: &str, events: usize, pad: usize) {
    let dir = home.join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = json!({"format":"dsh-session","version":1,"id":id,"created_at":1,"cwd":cwd,"roots":[],"mcp_servers":[]}).to_string();
    text.push('\n');
    let reply = format!(
        "It parses the input, validates every field, and returns a typed value; errors carry the line number.{}",
        " ".repeat(pad)
    );
    let mut seq = 0;
    let mut turn = 0;
    while seq < events {
        turn += 1;
        let mut data = vec![
            json!({"type":"user/message","data":{"turn":turn,"content":[{"type":"text","text":format!("Question {turn}: what does function number {turn} do in this module?")}]}}),
        ];
        if turn == 1 {
            data.push(
                json!({"type":"session/title","data":{"title":"What does function number 1 do?"}}),
            );
        }
        data.extend([
            json!({"type":"turn/start","data":{"turn":turn}}),
            json!({"type":"assistant/message","data":{"turn":turn,"step":1,"text":reply,"reasoning":"Look at the function body first.","usage":{"input_tokens":1000,"output_tokens":40,"cache_read_tokens":900},"finish":"stop"}}),
            json!({"type":"turn/end","data":{"turn":turn,"stop":"end_turn"}}),
        ]);
        for mut event in data {
            if seq >= events {
                break;
            }
            seq += 1;
            event["seq"] = seq.into();
            event["time"] = 1.into();
            text.push_str(&event.to_string());
            text.push('\n');
        }
    }
    std::fs::write(dir.join(format!("{id}.jsonl")), text).unwrap();
}

/// `session/list` over 10,000 sessions, with small logs and with 64 KiB
/// logs: the first page in a process that builds the index, in a new
/// process that reads it (nothing written for a while, as at an editor's
/// start; and right after a write), and again in the same process
/// (medians of 5).
pub async fn list(bench: &Bench) {
    for (label, pad) in [("small logs", 0usize), ("64 KiB logs", 64 * 1024)] {
        let home = bench.scratch.join(format!("list-{pad}"));
        for i in 0..10_000 {
            write_session(&home, &bench.cwd, &format!("list-{i:05}"), 5, pad);
        }
        // Built from the logs (no index file: a first start, or an index
        // removed).
        let mut cold = Vec::new();
        for _ in 0..5 {
            let _ = std::fs::remove_file(home.join("sessions/index/sessions.v4.tsv"));
            let mut proc = Proc::spawn(&bench.dsh, &home, &bench.mock.url);
            proc.call("initialize", json!({"protocolVersion":1})).await;
            cold.push(page(&mut proc).await);
            proc.close().await;
        }
        let cold = median(cold);
        // A new process whose index is up to date: right after a log was
        // written (the directory changed less than 2 s ago, so every log
        // is `stat`ed), and at an editor's start, when nothing was written
        // for a while (the index alone is read).
        let sessions = home.join("sessions");
        let touched = sessions.join(format!("list-{:05}.jsonl", 0));
        let write = || {
            let mut log = std::fs::OpenOptions::new()
                .append(true)
                .open(&touched)
                .unwrap();
            std::io::Write::write_all(&mut log, b"\n").unwrap();
            std::fs::File::open(&sessions)
                .unwrap()
                .set_modified(std::time::SystemTime::now())
                .unwrap();
        };
        let (mut fresh, mut warm) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            write();
            let mut proc = Proc::spawn(&bench.dsh, &home, &bench.mock.url);
            proc.call("initialize", json!({"protocolVersion":1})).await;
            fresh.push(page(&mut proc).await);
            write();
            warm.push(page(&mut proc).await);
            proc.close().await;
        }
        let warm = median(warm);
        tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
        let (mut settled, mut settled_warm) = (Vec::new(), Vec::new());
        for _ in 0..6 {
            let mut proc = Proc::spawn(&bench.dsh, &home, &bench.mock.url);
            proc.call("initialize", json!({"protocolVersion":1})).await;
            settled.push(page(&mut proc).await);
            settled_warm.push(page(&mut proc).await);
            proc.close().await;
        }
        // The first saved the directory's stamp.
        settled.remove(0);
        settled_warm.remove(0);
        row(
            &format!("session/list, 10,000 sessions, {label}: first page"),
            "≤ 20 ms",
            format!(
                "new process {:.1} ms (after a write {:.1}); same process {:.1} ms (after a write {warm:.1}); building the index {cold:.1} ms",
                median(settled),
                median(fresh),
                median(settled_warm),
            ),
        );
        let _ = std::fs::remove_dir_all(&home);
    }
}

/// The first page of `session/list`, ms.
async fn page(proc: &mut Proc) -> f64 {
    let started = Instant::now();
    let (response, _) = proc.call("session/list", json!({})).await;
    assert_eq!(
        response["result"]["sessions"].as_array().map(Vec::len),
        Some(50),
        "{response}"
    );
    started.elapsed().as_secs_f64() * 1000.0
}

/// `session/load` of 1k, 10k and 100k-event sessions, answered as the
/// client sees it (replay included), and dsh's memory after it.
pub async fn load(bench: &Bench) {
    for events in [1_000usize, 10_000, 100_000] {
        let id = format!("bench-load-{events}");
        write_session(&bench.home, &bench.cwd, &id, events, 0);
        let (mut samples, mut rss) = (Vec::new(), Vec::new());
        let mut updates = 0;
        for _ in 0..3 {
            let mut proc = bench.spawn().await;
            let started = Instant::now();
            let (response, notifications) = proc
                .call(
                    "session/load",
                    json!({"sessionId":id,"cwd":bench.cwd,"mcpServers":[]}),
                )
                .await;
            samples.push(started.elapsed().as_secs_f64() * 1000.0);
            rss.push(proc.rss_kib() as f64 / 1024.0);
            assert!(response.get("result").is_some(), "{response}");
            updates = notifications;
            proc.close().await;
        }
        let target = match events {
            10_000 => "≤ 150 ms",
            100_000 => "≤ 400 ms, 60 MB",
            _ => "—",
        };
        row(
            &format!("session/load, {events} events ({updates} updates replayed)"),
            target,
            format!("{:.1} ms; RSS after {:.1} MB", median(samples), median(rss)),
        );
    }
}

/// What the first prompt after an idle session's history was evicted
/// (`[session] idle_evict_s = 1`) waits for the rebuild from a
/// 10,000-event log: prompt → model request with the history in memory
/// (right after the previous turn) and after the eviction (2.5 s idle),
/// median of 5 each.
pub async fn after_eviction(bench: &Bench) {
    let home = bench.scratch.join("evict-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("config.toml"), "[session]\nidle_evict_s = 1\n").unwrap();
    let id = "bench-evict-10000";
    write_session(&home, &bench.cwd, id, 10_000, 0);
    let mut proc = Proc::spawn(&bench.dsh, &home, &bench.mock.url);
    proc.call("initialize", json!({"protocolVersion":1})).await;
    let (response, _) = proc
        .call(
            "session/load",
            json!({"sessionId":id,"cwd":bench.cwd,"mcpServers":[]}),
        )
        .await;
    assert!(response.get("result").is_some(), "{response}");
    let request = async |proc: &mut Proc| {
        bench
            .mock
            .push_json(json!({"chunks":[{"text":"ok"}],"finish":"stop"}));
        let before = bench.mock.arrivals().len();
        let sent = Instant::now();
        let prompt = Bench::send_prompt(proc, id, "and this one?").await;
        let (response, _) = proc.response(prompt).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        let arrived = bench.mock.arrivals()[before];
        arrived.duration_since(sent).as_secs_f64() * 1000.0
    };
    let (mut resident, mut evicted) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        resident.push(request(&mut proc).await);
        tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
        evicted.push(request(&mut proc).await);
    }
    proc.close().await;
    let _ = std::fs::remove_dir_all(&home);
    let (resident, evicted) = (median(resident), median(evicted));
    row(
        "prompt → model request at 10,000 events: in memory / evicted",
        "+≤ 30 ms",
        format!(
            "{resident:.1} / {evicted:.1} ms (+{:.1} ms)",
            evicted - resident
        ),
    );
}

/// Memory after 20 turns of 10,000 chunks each in one session.
async fn long_turns(bench: &Bench) {
    let mut proc = bench.spawn().await;
    let session = bench.session(&mut proc).await;
    let mut curve = Vec::new();
    for turn in 1..=20 {
        bench.mock.push_json(json!({"repeat":{"text":"token ","count":10_000},"finish":"stop","usage":{"prompt_tokens":10,"completion_tokens":10_000}}));
        let id = Bench::send_prompt(&mut proc, &session, "go").await;
        proc.response(id).await;
        if turn % 5 == 0 {
            curve.push(format!("{:.1}", proc.rss_kib() as f64 / 1024.0));
        }
    }
    row(
        "RSS after 5/10/15/20 turns of 10,000 chunks (one session)",
        "≤ 25 MB",
        format!("{} MB", curve.join(" / ")),
    );
    proc.close().await;
}
