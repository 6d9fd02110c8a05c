//! Session search (issue 42): the full-text index of stored sessions over
//! 10,000 generated logs of 100 events each (`--sessions N
//! --events-per-session M` for other sizes): building it from scratch,
//! a `session_search`-like query warm in this process and in a fresh
//! process, the cost of indexing appended events, its size on disk, and
//! the memory of a process that has searched.
//!
//! The logs are valid dsh logs (a header and `user/message`,
//! `session/title`, `assistant/message`, `tool/call`, `tool/result`,
//! `turn/*` events, 150–400 bytes each but the `turn/*` ones) written by a
//! fixed-seed generator: words drawn log-uniformly from a vocabulary of
//! common English and code words followed by 20,000 made-up ones (so a few
//! words are in most events and most words in few), spread over ten
//! workspaces, with a rare word planted in a known set of sessions.
//! Writing them is not timed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use dsh_acp_server::search::{Filter, Query, Scope, SearchIndex};
use dsh_acp_server::store::SessionStore;
use serde_json::Value;

mod logs;

use crate::proc::{median, row};
use crate::Bench;
use logs::{conversation_turn, generate, Log, Text, Written};

/// Workspaces the sessions are spread over (session `i` is in `i % 10`);
/// the queries look in the first.
const WORKSPACES: usize = 10;
/// A word no generated text contains, planted in every session whose
/// number is a multiple of [`RARE_EVERY`].
const RARE: &str = "quetzalcoatlus";
const RARE_EVERY: usize = 97;
/// Planted in the appended events of [`APPEND_RARE_SESSIONS`] sessions of
/// the first workspace: what a catch-up that indexed them finds.
const APPENDED: &str = "zygomorphic";
const APPEND_RARE_SESSIONS: usize = 7;
/// The common word of the queries: near the top of the vocabulary, in
/// about one event in five.
const COMMON: &str = "parser";
/// Sessions appended to, and rounds of appending.
const APPEND_SESSIONS: usize = 100;
const APPEND_ROUNDS: usize = 3;

/// The sizes, from `--sessions N --events-per-session M`.
pub struct Sizes {
    sessions: usize,
    events: usize,
}

impl Sizes {
    pub fn parse(args: &[String]) -> Sizes {
        let mut sizes = Sizes {
            sessions: 10_000,
            events: 100,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = || -> usize {
                args.next()
                    .and_then(|n| n.replace(['_', ','], "").parse().ok())
                    .unwrap_or_else(|| panic!("{arg} takes a number"))
            };
            match arg.as_str() {
                "--sessions" => sizes.sessions = value(),
                "--events-per-session" => sizes.events = value(),
                other => panic!(
                    "unknown option {other:?}: search [--sessions N] [--events-per-session M]"
                ),
            }
        }
        assert!(sizes.sessions >= WORKSPACES && sizes.events >= 10);
        sizes
    }
}

pub async fn rows(bench: &Bench, args: &[String]) {
    let sizes = Sizes::parse(args);
    let dsh = bench.dsh.clone();
    let scratch = bench.scratch.clone();
    tokio::task::spawn_blocking(move || run(&dsh, &scratch, &sizes))
        .await
        .unwrap();
}

fn run(dsh: &Path, scratch: &Path, sizes: &Sizes) {
    let home = scratch.join("search-home");
    let sessions = home.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    // Headers name canonical directories, as dsh writes them: `dsh
    // sessions search` finds the workspace of the directory it runs in.
    let workspaces: Vec<PathBuf> = (0..WORKSPACES)
        .map(|w| {
            let dir = scratch.join(format!("ws-{w}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::canonicalize(dir).unwrap()
        })
        .collect();

    let started = Instant::now();
    let written = generate(&sessions, &workspaces, sizes);
    let logs_bytes = logs_size(&sessions);
    let total_events = sizes.sessions * sizes.events;
    row(
        &format!(
            "logs: {} sessions × {} events, {WORKSPACES} workspaces (written in {:.0} s)",
            thousands(sizes.sessions),
            sizes.events,
            started.elapsed().as_secs_f64()
        ),
        "—",
        format!(
            "{:.1} MB, {:.0} bytes an event; {RARE:?} in {} sessions ({} in the queried workspace), {COMMON:?} in {} events",
            logs_bytes as f64 / 1e6,
            logs_bytes as f64 / total_events as f64,
            written.rare_sessions,
            written.rare_in_ws0,
            thousands(written.common_events),
        ),
    );
    validate(&sessions, &written.ids[0], sizes.events);

    let store = SessionStore::new(sessions.clone());
    let index = store.search().clone();
    let ws0 = workspaces[0].display().to_string();
    // As `session_search` asks: newest first (`by_relevance` is a
    // person's search, `dsh sessions search`).
    let by = |text: &str, by_relevance: bool| Query {
        text: text.to_owned(),
        scope: Scope::Workspaces(vec![ws0.clone()]),
        filter: Filter::default(),
        best_per_session: true,
        by_relevance,
        limit: 20,
    };
    let query = |text: &str| by(text, false);
    let rss_before = status_kib("VmRSS:");

    // (1) From scratch: the first search builds the index.
    let started = Instant::now();
    let hits = index.search(&query(RARE)).expect("search");
    let build = started.elapsed().as_secs_f64();
    row(
        &format!(
            "index {} sessions / {} events from scratch (first search)",
            thousands(sizes.sessions),
            thousands(total_events)
        ),
        "—",
        format!("{build:.1} s ({:.0} events/s)", total_events as f64 / build),
    );
    check_hits("build", RARE, hits.len(), written.rare_in_ws0);

    // (5) Size on disk, right after the build.
    let (db, wal) = index_size(index.file());
    row(
        "index on disk (sqlite + wal/shm) vs the logs",
        "—",
        format!(
            "{:.1} MB (+{:.1} MB wal/shm) vs {:.1} MB of logs: {:.0} %",
            db as f64 / 1e6,
            wal as f64 / 1e6,
            logs_bytes as f64 / 1e6,
            (db + wal) as f64 * 100.0 / logs_bytes as f64
        ),
    );

    // (2) Warm, in this process.
    for (label, word, expected, by_relevance) in [
        ("rare word", RARE, Some(written.rare_in_ws0.min(20)), false),
        ("common word", COMMON, None, false),
        (
            "common word, best first (a person's search)",
            COMMON,
            None,
            true,
        ),
        // What every search pays to check the index is up to date.
        ("a word in no event", "nosuchwordanywhere", Some(0), false),
    ] {
        let mut samples = Vec::new();
        let mut found = 0;
        for _ in 0..20 {
            let started = Instant::now();
            found = index.search(&by(word, by_relevance)).expect("search").len();
            samples.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        if let Some(expected) = expected {
            check_hits("warm", word, found, expected);
        }
        let (med, p95) = (median(samples.clone()), p95(samples));
        row(
            &format!("warm, one workspace, best event per session, limit 20: {label}"),
            // The target is `session_search`'s (newest first).
            if by_relevance || expected == Some(0) {
                "—"
            } else {
                "≤ 50 ms"
            },
            format!("median {med:.1} ms, p95 {p95:.1} ms ({found} hits)"),
        );
    }
    let rss_after = status_kib("VmRSS:");
    row(
        "this process's RSS: before the build → after the searches",
        "—",
        format!(
            "{:.1} → {:.1} MB (+{:.1}; peak {:.1} MB)",
            rss_before as f64 / 1024.0,
            rss_after as f64 / 1024.0,
            (rss_after as f64 - rss_before as f64) / 1024.0,
            status_kib("VmHWM:") as f64 / 1024.0
        ),
    );

    // (3) and (6) A fresh process.
    fresh_process(dsh, &home, &workspaces[0], &sessions, written.rare_in_ws0);

    // (4) Appended events, caught up by the next search.
    append_rows(&index, &query, &sessions, &written, sizes);

    drop(index);
    let _ = std::fs::remove_dir_all(&home);
}

/// Reads one generated log back through dsh's own reader: the bench
/// measures valid logs.
fn validate(dir: &Path, id: &str, events: usize) {
    let store = SessionStore::new(dir.to_path_buf());
    let mut reader = store.read(id, None).expect("a valid log");
    let mut count = 0;
    while reader.next_event().expect("a valid event").is_some() {
        count += 1;
    }
    assert_eq!(count, events, "events read back from {id}");
}

/// Appends 10,000 events (100 to each of 100 sessions of every
/// workspace) and times the search that catches up with them, minus a
/// warm search of the same query; three rounds.
fn append_rows(
    index: &SearchIndex,
    query: &dyn Fn(&str) -> Query,
    dir: &Path,
    written: &Written,
    sizes: &Sizes,
) {
    let per = sizes.events.min(100);
    let count = APPEND_SESSIONS.min(sizes.sessions);
    let appended = per * count;
    let mut text = Text::new(0xa99e_0042);
    let mut ends = written.ends.clone();
    let (mut per_event, mut catch_up) = (Vec::new(), Vec::new());
    let mut found = 0;
    for round in 0..APPEND_ROUNDS {
        // The sessions appended to: spread over the list, the first
        // APPEND_RARE_SESSIONS of the first workspace get the word.
        let mut ws0_planted = 0;
        for k in 0..count {
            // (k more than an even spread: every workspace gets some.)
            let i = (k * sizes.sessions / count + k + round) % sizes.sessions;
            let (ws, seq, turn) = ends[i];
            let mut log = Log::append(dir, &written.ids[i], seq, 1_796_100_000_000 + seq * 1_500);
            let mut plant =
                (round == 0 && ws == 0 && ws0_planted < APPEND_RARE_SESSIONS).then(|| {
                    ws0_planted += 1;
                    (seq + 1 + text.rng.below(per - 5) as u64, APPENDED)
                });
            let mut turn = turn;
            let max = seq + per as u64;
            while log.seq < max {
                turn += 1;
                conversation_turn(&mut log, &mut text, turn, max, Path::new("/"), &mut plant);
            }
            log.file.flush().unwrap();
            ends[i] = (ws, log.seq, turn);
        }
        // Logs written within the same second as the index looked.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let started = Instant::now();
        found = index.search(&query(APPENDED)).expect("search").len();
        let elapsed = started.elapsed().as_secs_f64() * 1000.0;
        let mut warm = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            index.search(&query(APPENDED)).expect("search");
            warm.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        let warm = median(warm);
        catch_up.push(elapsed);
        per_event.push((elapsed - warm) * 1000.0 / appended as f64);
        if round == 0 {
            check_hits("catch-up", APPENDED, found, ws0_planted);
        }
    }
    row(
        &format!(
            "indexing appended events: {} to {count} sessions, then a search",
            thousands(appended)
        ),
        "—",
        format!(
            "{:.1} µs an event (search {:.0} ms; rounds {}) ({found} hits)",
            median(per_event.clone()),
            median(catch_up),
            per_event
                .iter()
                .map(|us| format!("{us:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
}

/// `dsh sessions search WORD --json` in the first workspace, ten runs
/// each word, wall time; its peak RSS from the kernel's account of
/// waited-for children. Without that command (another part of issue 42),
/// `dsh-bench search-once`, which opens the index and searches once.
fn fresh_process(dsh: &Path, home: &Path, cwd: &Path, sessions: &Path, rare_in_ws0: usize) {
    let has_command = Command::new(dsh)
        .args(["sessions", "search", "--help"])
        .env("DSH_HOME", home)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    let command = |word: &str| {
        let mut command = if has_command {
            let mut command = Command::new(dsh);
            command.args(["sessions", "search", word, "--json"]);
            command
        } else {
            let mut command = Command::new(std::env::current_exe().unwrap());
            command.arg("search-once").arg(sessions).arg(cwd).arg(word);
            command
        };
        command
            .current_dir(cwd)
            .env("DSH_HOME", home)
            .env("DEEPSEEK_API_KEY", "bench-key")
            .env("DSH_LOG", "error")
            .stdin(Stdio::null())
            .stderr(Stdio::inherit());
        command
    };
    let what = if has_command {
        "`dsh sessions search W --json`"
    } else {
        "`dsh-bench search-once` (no `dsh sessions search` yet)"
    };
    let mut rss = Vec::new();
    for (label, word, expected) in [
        ("rare word", RARE, Some(rare_in_ws0.min(20))),
        ("common word", COMMON, None),
    ] {
        let mut samples = Vec::new();
        let mut found = 0;
        for _ in 0..10 {
            let started = Instant::now();
            let output = command(word).output().expect("spawn the search");
            samples.push(started.elapsed().as_secs_f64() * 1000.0);
            assert!(
                output.status.success(),
                "{what} {word}: {}",
                String::from_utf8_lossy(&output.stdout)
            );
            found = count_hits(&output.stdout);
        }
        if let Some(expected) = expected {
            check_hits("fresh process", word, found, expected);
        }
        row(
            &format!("fresh process, {label}: {what}"),
            "≤ 200 ms",
            format!("median {:.1} ms ({found} hits)", median(samples)),
        );
        // Its peak RSS, through a `dsh-bench search-rss` whose only child
        // it is (the kernel keeps the largest of a process's children).
        let inner = command(word);
        let mut wrapper = Command::new(std::env::current_exe().unwrap());
        wrapper
            .arg("search-rss")
            .arg(inner.get_program())
            .args(inner.get_args())
            .current_dir(cwd)
            .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .stderr(Stdio::inherit());
        let output = wrapper.output().expect("spawn search-rss");
        let kib: Option<u64> = String::from_utf8_lossy(&output.stdout).trim().parse().ok();
        rss.push(kib.map_or("?".to_owned(), |kib| format!("{:.1}", kib as f64 / 1024.0)));
    }
    row(
        "peak RSS of that fresh process: rare word / common word",
        "—",
        format!("{} MB", rss.join(" / ")),
    );
}

/// How many hits a search printed: a JSON array, an object with an
/// array, or one JSON value a line.
fn count_hits(stdout: &[u8]) -> usize {
    let text = String::from_utf8_lossy(stdout);
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(hits)) => hits.len(),
        Ok(Value::Object(object)) => object
            .values()
            .find_map(Value::as_array)
            .map_or(1, Vec::len),
        _ => text.lines().filter(|line| !line.trim().is_empty()).count(),
    }
}

/// The helper modes, each a fresh process: `search-once SESSIONS CWD
/// WORD`, `search-rss PROGRAM ARGS...`.
pub fn helper(args: &[String]) {
    match args.first().map(String::as_str) {
        Some("search-once") => once(&args[1..]),
        Some("search-rss") => {
            let status = Command::new(&args[1])
                .args(&args[2..])
                .stdout(Stdio::null())
                .status()
                .expect("spawn");
            assert!(status.success(), "{args:?}: {status}");
            println!("{}", children_max_rss_kib().unwrap_or(0));
        }
        other => panic!("unknown helper {other:?}"),
    }
}

/// `dsh-bench search-once SESSIONS CWD WORD`: a fresh process that opens
/// the index, searches once, and prints its hits as JSON.
fn once(args: &[String]) {
    let [sessions, cwd, word] = args else {
        panic!("search-once SESSIONS_DIR CWD WORD");
    };
    let store = SessionStore::new(PathBuf::from(sessions));
    let hits = store
        .search()
        .search(&Query {
            text: word.clone(),
            scope: Scope::Workspaces(vec![cwd.clone()]),
            filter: Filter::default(),
            best_per_session: true,
            by_relevance: true,
            limit: 20,
        })
        .expect("search");
    println!("{}", serde_json::to_string(&hits).unwrap());
}

/// The largest RSS of the children waited for so far, KiB.
#[cfg(unix)]
fn children_max_rss_kib() -> Option<u64> {
    use nix::sys::resource::{getrusage, UsageWho};
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).ok()?;
    u64::try_from(usage.max_rss()).ok()
}

#[cfg(not(unix))]
fn children_max_rss_kib() -> Option<u64> {
    None
}

fn check_hits(when: &str, word: &str, found: usize, expected: usize) {
    if found != expected {
        println!("(!) {when}: {found} hits for {word:?}, {expected} expected");
    }
}

fn p95(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values[(values.len() * 95).div_ceil(100) - 1]
}

fn logs_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "jsonl"))
        .filter_map(|entry| entry.metadata().ok())
        .map(|meta| meta.len())
        .sum()
}

/// The index file, and its `-wal` and `-shm` beside it, bytes.
fn index_size(file: &Path) -> (u64, u64) {
    let size = |suffix: &str| {
        let mut name = file.as_os_str().to_owned();
        name.push(suffix);
        std::fs::metadata(PathBuf::from(name)).map_or(0, |meta| meta.len())
    };
    (size(""), size("-wal") + size("-shm"))
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
