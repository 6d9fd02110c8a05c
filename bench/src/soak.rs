//! `dsh-bench soak SESSIONS MINUTES [REST]`: one `dsh acp` process,
//! SESSIONS sessions turning continuously for MINUTES — tool turns, long
//! streams, model faults, cut streams and cancels — with RSS, open
//! descriptors and children sampled as it goes; then every session is
//! closed and sampled again. At the end each session's log must hold one
//! `turn/end` per answered prompt (nothing lost).
//!
//! With REST (seconds), each session works in spells: 30 s of turns, then
//! REST s idle, the sessions' spells staggered over the cycle — twenty open
//! sessions of which a few are in use at a time, as an editor has them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::proc::Proc;
use crate::Bench;

/// A small deterministic generator (xorshift), so runs are comparable.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

struct Sample {
    at: Duration,
    turns: usize,
    rss_mb: f64,
    /// Of it, dsh's own memory (not its binary's pages).
    anon_mb: f64,
    /// CPU seconds dsh used so far.
    cpu_s: f64,
    fds: usize,
    children: usize,
}

fn sample(proc: &Proc, started: Instant, turns: usize) -> Sample {
    let pid = proc.child.id().unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count);
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .map_or(0, |text| text.split_whitespace().count());
    Sample {
        at: started.elapsed(),
        turns,
        rss_mb: proc.rss_kib() as f64 / 1024.0,
        anon_mb: proc.rss_anon_kib() as f64 / 1024.0,
        cpu_s: proc.cpu_ns() as f64 / 1e9,
        fds,
        children,
    }
}

/// How long a session turns before it rests (with REST).
const SPELL: Duration = Duration::from_secs(30);

/// When session `index` may next prompt, with `rest` between spells: now
/// (`None`) in its spell, else when its next spell starts.
fn next_spell(index: usize, sessions: usize, rest: Duration, started: Instant) -> Option<Instant> {
    if rest.is_zero() {
        return None;
    }
    let cycle = SPELL + rest;
    let first = started + cycle * index as u32 / sessions as u32;
    let now = Instant::now();
    if now < first {
        return Some(first);
    }
    let into = (now - first).as_nanos() % cycle.as_nanos();
    let into = Duration::from_nanos(into as u64);
    (into >= SPELL).then(|| now + (cycle - into))
}

pub async fn run(bench: &Bench, sessions: usize, minutes: u64, rest: u64) {
    let rest = Duration::from_secs(rest);
    bench.mock.forget_requests();
    let mut proc = bench.spawn().await;
    let mut ids = Vec::new();
    for i in 0..sessions {
        std::fs::write(
            bench.cwd.join(format!("soak{i}.txt")),
            format!("soak file {i}\n"),
        )
        .unwrap();
        let session = bench.session(&mut proc).await;
        proc.call(
            "session/set_config_option",
            json!({"sessionId":session,"configId":"mode","value":"full-access"}),
        )
        .await;
        ids.push(session);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(minutes * 60);
    // request id → (session index, cancel at)
    let mut waiting: HashMap<u64, (usize, Option<Instant>)> = HashMap::new();
    let mut answered = vec![0usize; sessions];
    let mut stops: HashMap<String, usize> = HashMap::new();
    let mut turns = 0usize;
    let mut samples = vec![sample(&proc, started, 0)];
    let mut next_sample = started + Duration::from_secs(15);
    // Sessions resting, and when they start again.
    let mut resting: Vec<Option<Instant>> = vec![None; sessions];
    for (index, session) in ids.iter().enumerate() {
        resting[index] = next_spell(index, sessions, rest, started);
        if resting[index].is_none() {
            let (id, cancel) = prompt(bench, &mut proc, &mut rng, index, session).await;
            waiting.insert(id, (index, cancel));
        }
    }
    loop {
        let next_spell_at = resting
            .iter()
            .flatten()
            .filter(|at| **at < deadline)
            .min()
            .copied();
        if waiting.is_empty() && next_spell_at.is_none() {
            break;
        }
        let next_cancel = waiting.values().filter_map(|(_, at)| *at).min();
        let wake = [next_cancel, next_spell_at]
            .into_iter()
            .flatten()
            .fold(next_sample, Instant::min);
        let line = tokio::select! {
            line = proc.lines.next_line() => line.unwrap().expect("dsh exited"),
            () = tokio::time::sleep_until(wake.into()) => {
                let now = Instant::now();
                for index in 0..sessions {
                    if resting[index].is_some_and(|at| at <= now) {
                        resting[index] = None;
                        if now < deadline {
                            let (id, cancel) = prompt(bench, &mut proc, &mut rng, index, &ids[index]).await;
                            waiting.insert(id, (index, cancel));
                        }
                    }
                }
                for (index, at) in waiting.values_mut() {
                    if at.is_some_and(|at| at <= now) {
                        *at = None;
                        let session = &ids[*index];
                        let frame = json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":session}});
                        tokio::io::AsyncWriteExt::write_all(&mut proc.stdin, format!("{frame}\n").as_bytes()).await.unwrap();
                    }
                }
                if now >= next_sample {
                    samples.push(sample(&proc, started, turns));
                    next_sample += Duration::from_secs(15);
                }
                continue;
            }
        };
        let frame: Value = serde_json::from_str(&line).unwrap();
        let Some(id) = frame.get("id").and_then(Value::as_u64) else {
            continue;
        };
        if frame.get("method").is_some() {
            continue;
        }
        let Some((index, _)) = waiting.remove(&id) else {
            continue;
        };
        turns += 1;
        answered[index] += 1;
        let stop = frame["result"]["stopReason"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| frame["error"]["data"]["code"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "?".to_owned());
        *stops.entry(stop).or_default() += 1;
        if Instant::now() < deadline {
            resting[index] = next_spell(index, sessions, rest, started);
            if resting[index].is_none() {
                let (id, cancel) = prompt(bench, &mut proc, &mut rng, index, &ids[index]).await;
                waiting.insert(id, (index, cancel));
            }
        }
    }
    samples.push(sample(&proc, started, turns));
    for session in &ids {
        proc.call("session/close", json!({"sessionId":session}))
            .await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let closed = sample(&proc, started, turns);
    let logs_agree = ids.iter().zip(&answered).all(|(session, answered)| {
        let log =
            std::fs::read_to_string(bench.home.join("sessions").join(format!("{session}.jsonl")))
                .unwrap_or_default();
        log.matches("\"type\":\"turn/end\"").count() == *answered
    });
    let log_bytes: u64 = ids
        .iter()
        .filter_map(|session| {
            std::fs::metadata(bench.home.join("sessions").join(format!("{session}.jsonl"))).ok()
        })
        .map(|meta| meta.len())
        .sum();
    proc.close().await;

    println!("| minute | turns | RSS MB | anonymous MB | CPU s | fds | children |");
    println!("|---|---|---|---|---|---|---|");
    for s in &samples {
        println!(
            "| {:.1} | {} | {:.1} | {:.1} | {:.1} | {} | {} |",
            s.at.as_secs_f64() / 60.0,
            s.turns,
            s.rss_mb,
            s.anon_mb,
            s.cpu_s,
            s.fds,
            s.children
        );
    }
    println!(
        "| closed all | {} | {:.1} | {:.1} | {:.1} | {} | {} |",
        closed.turns, closed.rss_mb, closed.anon_mb, closed.cpu_s, closed.fds, closed.children
    );
    println!();
    let mut stops: Vec<_> = stops.into_iter().collect();
    stops.sort();
    let spells = if rest.is_zero() {
        String::new()
    } else {
        format!(
            " (spells of {} s, {} s rest)",
            SPELL.as_secs(),
            rest.as_secs()
        )
    };
    println!(
        "{turns} turns in {sessions} sessions over {minutes} min{spells}; stops {stops:?}; logs {:.1} MB; every answered prompt logged its turn/end: {logs_agree}",
        log_bytes as f64 / 1e6
    );
}

/// Queues a reply of a random kind and sends a prompt; returns its request
/// id and when to cancel it (for the cancel kind).
async fn prompt(
    bench: &Bench,
    proc: &mut Proc,
    rng: &mut Rng,
    index: usize,
    session: &str,
) -> (u64, Option<Instant>) {
    let mock = &bench.mock;
    let mut cancel = None;
    match rng.below(100) {
        // A tool turn: read a file, then answer with it.
        0..=54 => {
            for _ in 0..2 {
                mock.push_json(json!({"echo_read":true,"echo_chunks":40,"finish":"stop"}));
            }
        }
        // A long reply.
        55..=79 => mock.push_json(
            json!({"repeat":{"text":"streamed token ","count":2000},"finish":"stop","usage":{"prompt_tokens":1000,"completion_tokens":2000}}),
        ),
        // A server fault, retried.
        80..=89 => {
            mock.push_json(json!({"status":500}));
            mock.push_json(json!({"echo_read":true,"echo_chunks":4,"finish":"stop"}));
            mock.push_json(json!({"echo_read":true,"echo_chunks":4,"finish":"stop"}));
        }
        // A stream cut mid-reply.
        90..=94 => mock.push_json(
            json!({"repeat":{"text":"cut ","count":500},"drop_after":100,"finish":"stop"}),
        ),
        // A slow reply, cancelled.
        _ => {
            mock.push_json(json!({"repeat":{"text":"slow ","count":400},"delay_ms":1,"finish":"stop"}));
            cancel = Some(Instant::now() + Duration::from_millis(40 + rng.below(60)));
        }
    }
    let text = format!("soak{index}.txt turn of session {index}");
    (Bench::send_prompt(proc, session, &text).await, cancel)
}
