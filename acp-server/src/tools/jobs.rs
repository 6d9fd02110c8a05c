//! `job_output`, `job_kill`, `job_list` (seeds: `dsh-tool-jobs`): read,
//! stop and list the session's background jobs (see [`crate::jobs`]).

use std::time::Duration;

use dsh_protocol::tool::{ToolOutcome, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use super::ToolEnv;

pub const OUTPUT_DESCRIPTION: &str = "Read a background job. A streaming job returns only the output since the last read; a final-output job returns its result once it has settled. Every response ends with [status: ...]. Reads do not block by default; with wait: true, it waits up to the configured limit.";
pub const KILL_DESCRIPTION: &str = "Request cancellation of a running background job by its job id. The call returns at once; the job settles as killed once its work has actually stopped.";
pub const LIST_DESCRIPTION: &str =
    "List your background jobs (running and finished) with their ids, kinds and statuses.";

#[derive(Debug, Deserialize)]
pub struct OutputArgs {
    pub job_id: String,
    #[serde(default)]
    pub wait: bool,
    #[serde(default)]
    pub timeout_ms: Option<f64>,
}

#[derive(Debug, Deserialize)]
pub struct KillArgs {
    pub job_id: String,
    #[serde(default)]
    pub reason: Option<String>,
}

fn view(text: &str) -> ToolView {
    ToolView::text(dsh_protocol::content::fenced(
        dsh_protocol::content::tail_bytes(text, 8000),
        "",
    ))
}

fn unknown(id: &str, env: &ToolEnv<'_>) -> ToolOutcome {
    let known: Vec<String> = env.jobs.list().iter().map(|job| job.id.clone()).collect();
    ToolOutcome::failed(
        ErrorCode::InvalidToolArgs,
        format!(
            "No background job {id:?} in this session{}. Jobs do not survive a restart of dsh.",
            if known.is_empty() {
                String::new()
            } else {
                format!(" (its jobs: {})", known.join(", "))
            }
        ),
    )
}

pub async fn output(args: &OutputArgs, env: &ToolEnv<'_>) -> ToolOutcome {
    let Some(job) = env.jobs.get(&args.job_id) else {
        return unknown(&args.job_id, env);
    };
    if args.wait && !job.has_ended() {
        let settings = env.jobs.settings();
        let wanted = args
            .timeout_ms
            .filter(|ms| ms.is_finite() && *ms > 0.0)
            .map_or(settings.wait_timeout_ms, |ms| ms as u64);
        let timeout = Duration::from_millis(wanted.min(settings.max_wait_timeout_ms));
        job.wait(timeout, env.cancel).await;
    }
    let text = job.read();
    ToolOutcome::ok(text.clone(), view(&text))
}

/// What the model is told when `job` started: `what` ("background job")
/// with its id, and how to read `reads` ("its output").
pub fn started(job: &crate::jobs::Job, what: &str, reads: &str) -> ToolOutcome {
    let output = format!(
        "Started {what} {id}. Read {reads} with job_output {{\"job_id\": \"{id}\"}} (wait: true blocks until it ends) and stop it with job_kill. You will be told when it ends.\n[status: running]",
        id = job.id
    );
    ToolOutcome {
        job: Some(job.id.clone()),
        ..ToolOutcome::ok(
            output,
            ToolView::text(format!("Running in the background as job {}", job.id)),
        )
    }
}

pub fn kill(args: &KillArgs, env: &ToolEnv<'_>) -> ToolOutcome {
    let Some(job) = env.jobs.get(&args.job_id) else {
        return unknown(&args.job_id, env);
    };
    let text = if job.has_ended() {
        format!("Job {} has already ended.\n{}", job.id, job.status_line())
    } else {
        job.kill(args.reason.clone());
        format!(
            "Asked job {} to stop; it settles as killed once its processes are gone.\n[status: running]",
            job.id
        )
    };
    ToolOutcome::ok(text.clone(), view(&text))
}

pub fn list(env: &ToolEnv<'_>) -> ToolOutcome {
    let jobs = env.jobs.list();
    let text = if jobs.is_empty() {
        "No background jobs in this session.".to_owned()
    } else {
        let mut text = "id\tkind\tstatus\truntime\tcommand\n".to_owned();
        for job in jobs {
            text.push_str(&job.line());
            text.push('\n');
        }
        text
    };
    ToolOutcome::ok(text.clone(), view(&text))
}
