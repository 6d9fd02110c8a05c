//! Unit tests of [`super`]: jobs against the session's mode.

use std::time::Duration;

use super::*;

/// A plain `bash -c` in its own process group (no guard: a unit test).
pub(super) fn bash(script: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("bash");
    command.args(["-c", script]).process_group(0);
    command
}

pub(super) fn spec(mode: Mode) -> JobSpec {
    JobSpec {
        call_id: ToolCallId::new("c"),
        command: "test".to_owned(),
        description: String::new(),
        mode,
        kind: JobKind::Bash,
        tool: "test-tool",
    }
}

/// Starts `script` as a job of `jobs`; its report arrives on the receiver.
pub(super) fn start(
    jobs: &Jobs,
    mode: Mode,
    script: &str,
) -> (
    Result<Arc<Job>, String>,
    tokio::sync::oneshot::Receiver<JobReport>,
) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let started = jobs.start(
        spec(mode),
        bash(script),
        Box::new(move |report| {
            let _ = tx.send(report);
        }),
        None,
    );
    (started, rx)
}

#[tokio::test]
async fn a_job_is_killed_by_a_stricter_mode_and_not_started_under_a_looser_one() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(JobSettings::default(), dir.path().to_path_buf());
    let (ask, ask_end) = start(&jobs, Mode::Ask, "exec sleep 30");
    let (full, full_end) = start(&jobs, Mode::FullAccess, "exec sleep 30");
    let (ask, full) = (ask.unwrap(), full.unwrap());
    // Not stricter than ask: only the full-access job goes.
    let killed = jobs.mode_changed(Mode::FullAccess, Mode::AcceptEdits);
    assert_eq!(
        killed.iter().map(|job| job.id.as_str()).collect::<Vec<_>>(),
        [full.id.as_str()]
    );
    let report = tokio::time::timeout(Duration::from_secs(10), full_end)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.status, "killed");
    assert!(
        report
            .summary
            .contains("killed: the session's mode changed from full-access to accept-edits"),
        "{}",
        report.summary
    );
    assert!(!ask.has_ended());
    // A command allowed under full-access before the change does not start
    // after it.
    let (refused, _) = start(&jobs, Mode::FullAccess, "exit 0");
    assert!(refused.err().unwrap().contains("not started"));
    // Plan ranks with read-only: the ask job goes.
    assert_eq!(jobs.mode_changed(Mode::AcceptEdits, Mode::Plan).len(), 1);
    let report = tokio::time::timeout(Duration::from_secs(10), ask_end)
        .await
        .unwrap()
        .unwrap();
    assert!(report.summary.contains("from accept-edits to plan"));
    jobs.shutdown("test over").await;
}

/// Runs `script` as a job to its end.
async fn run_to_end(jobs: &Jobs, script: &str) -> Arc<Job> {
    let (job, end) = start(jobs, Mode::FullAccess, script);
    let job = job.unwrap();
    tokio::time::timeout(Duration::from_secs(20), end)
        .await
        .expect("the job ends")
        .unwrap();
    job
}

/// The bytes of output `MILLION_X` wrote that `text` holds.
fn xs(text: &str) -> usize {
    text.lines()
        .filter(|line| !line.is_empty() && line.bytes().all(|b| b == b'x'))
        .map(str::len)
        .sum()
}

const MILLION_X: &str = "head -c 1000000 /dev/zero | tr '\\0' x";

/// Issue 23, item 16: finished jobs kept up to 1 MiB of unread output
/// each for the session's life; now all of a session's jobs share one
/// budget, and the oldest finished jobs' output goes first.
#[tokio::test]
async fn unread_output_of_finished_jobs_stays_within_the_session_budget() {
    let dir = tempfile::tempdir().unwrap();
    let settings = JobSettings {
        max_unread_bytes_per_session: 4 * 1024 * 1024,
        ..JobSettings::default()
    };
    let jobs = Jobs::new(settings, dir.path().join("spill"));
    let mut all = Vec::new();
    for _ in 0..10 {
        all.push(run_to_end(&jobs, MILLION_X).await);
    }
    let texts: Vec<String> = all.iter().map(|job| job.read()).collect();
    let kept: usize = texts.iter().map(|text| xs(text)).sum();
    assert!(
        (3_000_000..=4 * 1024 * 1024).contains(&kept),
        "10 MB printed, {kept} bytes kept in memory"
    );
    // The newest job's output is whole; the oldest job's was dropped, and
    // job_output says so with the byte count.
    assert_eq!(xs(&texts[9]), 1_000_000);
    assert!(
        texts[0].contains("1000000 bytes") && texts[0].contains("budget"),
        "{}",
        &texts[0][..texts[0].len().min(400)]
    );
    jobs.shutdown("test over").await;
}

/// The spill files of a session's jobs share one budget: the oldest
/// finished jobs' files are deleted first, and a running job stops
/// spilling at the budget.
#[tokio::test]
async fn spill_files_stay_within_the_session_budget() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("spill");
    let settings = JobSettings {
        max_spill_bytes_per_session: 3_000_000,
        ..JobSettings::default()
    };
    let jobs = Jobs::new(settings, spill.clone());
    let mut all = Vec::new();
    for _ in 0..10 {
        all.push(run_to_end(&jobs, MILLION_X).await);
    }
    let on_disk = |dir: &std::path::Path| -> (usize, u64) {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().metadata().unwrap().len())
            .fold((0, 0), |(n, total), len| (n + 1, total + len))
    };
    let (files, bytes) = on_disk(&spill);
    assert!(
        files <= 3 && bytes <= 3_000_000,
        "{files} spill files, {bytes} bytes"
    );
    let newest = spill.join(format!("job-{}.log", &all[9].id[1..]));
    assert_eq!(std::fs::metadata(&newest).unwrap().len(), 1_000_000);
    assert!(!spill.join(format!("job-{}.log", &all[0].id[1..])).exists());
    // One job alone over the budget keeps what fits.
    let big = run_to_end(&jobs, "head -c 5000000 /dev/zero | tr '\\0' y").await;
    let (_, bytes) = on_disk(&spill);
    assert!(bytes <= 3_000_000, "{bytes} bytes spilled");
    let text = big.read();
    assert!(text.contains("earlier bytes"), "{}", &text[..200]);
    jobs.shutdown("test over").await;
}

/// What the jobs hold in memory for output: the capacity of their unread
/// and tail buffers.
fn retained(jobs: &Jobs) -> usize {
    jobs.list()
        .iter()
        .map(|job| {
            let state = lock(&job.state);
            state.unread.capacity() + state.tail.capacity()
        })
        .sum()
}

/// The case with the default budget: many finished jobs, each over
/// its 1 MiB share, hold at most the 8 MiB budget (and an 8 KiB tail each)
/// — not 1 MiB each — and the accounting agrees with the buffers.
#[tokio::test]
async fn many_finished_jobs_hold_at_most_the_default_budget() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(JobSettings::default(), dir.path().join("spill"));
    let count = 30;
    for _ in 0..count {
        run_to_end(&jobs, "head -c 1100000 /dev/zero | tr '\\0' z").await;
    }
    let held = retained(&jobs);
    assert!(
        held <= 8 * 1024 * 1024 + count * TAIL_BYTES,
        "{count} jobs of 1.1 MB hold {held} bytes"
    );
    let unread: usize = jobs
        .list()
        .iter()
        .map(|job| lock(&job.state).unread.len())
        .sum();
    assert_eq!(jobs.shared.budget.unread(), unread as u64);
    assert!(unread as u64 <= 8 * 1024 * 1024);
    // Reading gives it all back.
    for job in jobs.list() {
        job.read();
    }
    assert_eq!(jobs.shared.budget.unread(), 0);
    let on_disk: u64 = std::fs::read_dir(dir.path().join("spill"))
        .unwrap()
        .map(|entry| entry.unwrap().metadata().unwrap().len())
        .sum();
    assert_eq!(jobs.shared.spilled(), on_disk);
    jobs.shutdown("test over").await;
}
