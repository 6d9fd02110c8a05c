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
