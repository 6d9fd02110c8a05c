//! Tests that cannot run here (no Neovim, an unbuilt extension, a missing
//! language server) skip visibly: a `SKIPPED: <test>: <reason>` line on
//! stderr, written past libtest's capture (`cargo test` shows it without
//! `--nocapture`), and the same `<test>: <reason>` line in
//! `target/test-skips.txt`, which `.ci/run` prints after the tests. The
//! reason ends with the one command that installs what is missing. Where a
//! run must not skip — `DSH_CI=1`, set by `.ci/run`, or the skip's own
//! variable (`DSH_REAL_LSP`, `DSH_EXAMPLES`, `DSH_VSCODE`) — a skip is a
//! failure instead. `CI` (GitHub Actions and GitLab set it for every job)
//! means nothing here: `cargo test --workspace` in a CI job without the
//! editors installed skips, and says so.
//!
//! The file lists what the last run skipped, not every skip ever: a test
//! that can skip reports each time it runs — [`skip`] or [`note`] when it
//! cannot run (or a part of it cannot), [`ran`] when it can — and a report
//! replaces that test's line from before. The first report of a new run
//! drops every line an earlier run wrote: a run is the test binaries'
//! parent process (`cargo test`, or nextest), by pid and start time, named
//! in the file's first line (`# run …`). The test binaries of one run, and
//! the tests in each, may report at once: each report reads and rewrites
//! the file under an exclusive lock on it.

use std::io::{Read, Seek, Write};
use std::path::PathBuf;

/// The file the skips are listed in (`CARGO_TARGET_DIR`, else the
/// workspace's `target/`).
pub fn skips_file() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("test-skips.txt")
}

/// Whether `.ci/run` (or whoever set `DSH_CI=1`) wants no skips at all.
pub fn must_not_skip() -> bool {
    std::env::var("DSH_CI").is_ok_and(|value| value == "1")
}

/// The running test's name (`module::test`): libtest names each test's
/// thread so, and a `#[tokio::test]` body runs on that thread.
pub fn this_test() -> String {
    std::thread::current()
        .name()
        .unwrap_or("(an unnamed thread)")
        .to_owned()
}

/// `test` cannot run here because of `reason` (which ends with the command
/// that installs what is missing): says so and records it; panics instead
/// when skips are not allowed (`DSH_CI=1`, or `required`: the skip's own
/// variable asked for the test).
pub fn skip(test: &str, reason: &str, required: bool) {
    assert!(
        !(required || must_not_skip()),
        "{test} must run here (DSH_CI=1 or its own variable is set), but: {reason}"
    );
    note(test, reason);
}

/// A part of `test` that cannot run here and never has to (it needs root,
/// say): said and recorded like a skip, never a failure.
pub fn note(test: &str, reason: &str) {
    let line = format!("{test}: {reason}");
    // Straight to the file descriptor: libtest captures `eprintln!`, not
    // this, so the line is seen without `--nocapture`.
    let _ = writeln!(std::io::stderr(), "SKIPPED: {line}");
    record(test, Some(&line));
}

/// `test`, which skips where its tool is missing, runs here: a line an
/// earlier run left for it goes.
pub fn ran(test: &str) {
    record(test, None);
}

/// This run's id on Windows (see the Unix one below).
#[cfg(windows)]
fn run_id() -> String {
    // No parent pid in std here: the test binary itself is the run.
    format!("{}", std::process::id())
}

/// This run's id: the parent process (cargo, which runs the test binaries
/// one after another, or nextest) by pid and start time, so a pid used
/// again is another run.
#[cfg(unix)]
fn run_id() -> String {
    let parent = std::os::unix::process::parent_id();
    let started = std::fs::read_to_string(format!("/proc/{parent}/stat"))
        .ok()
        .and_then(|stat| {
            // Field 22, counted after the command name's closing paren.
            let rest = stat.rsplit_once(')')?.1.to_owned();
            rest.split_whitespace().nth(19).map(str::to_owned)
        })
        .unwrap_or_default();
    format!("{parent}@{started}")
}

/// Under the file's lock: drops the lines of other runs and `test`'s own,
/// then adds `line`.
fn record(test: &str, line: Option<&str>) {
    let file = skips_file();
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let Ok(mut out) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&file)
    else {
        return;
    };
    if out.lock().is_err() {
        return;
    }
    let mut old = String::new();
    let _ = out.read_to_string(&mut old);
    let header = format!("# run {}", run_id());
    let mut lines: Vec<&str> = Vec::new();
    let mut old_lines = old.lines();
    if old_lines.next() == Some(header.as_str()) {
        let own = format!("{test}: ");
        lines.extend(old_lines.filter(|kept| !kept.starts_with(&own)));
    }
    lines.extend(line);
    let mut text = format!("{header}\n");
    for kept in lines {
        text.push_str(kept);
        text.push('\n');
    }
    let _ = out.set_len(0);
    let _ = out.rewind();
    let _ = out.write_all(text.as_bytes());
    // The lock goes with the file.
}
