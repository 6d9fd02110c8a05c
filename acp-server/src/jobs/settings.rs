//! `[jobs]`: whether background jobs are offered, how long `job_output`
//! waits, the per-session limits, and how a job's end reaches an idle
//! session ([`CompletionDelivery`], seeds: `dsh-tool-jobs`'s
//! `completionDelivery` and `maxConsecutiveWakes`).

use serde::Deserialize;

/// `[jobs]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSettings {
    /// Offer `run_in_background` and the job tools.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// How long `job_output` with `wait` waits by default.
    #[serde(default = "wait_default")]
    pub wait_timeout_ms: u64,
    /// The longest it may wait.
    #[serde(default = "wait_max")]
    pub max_wait_timeout_ms: u64,
    /// Jobs running at once per session.
    #[serde(default = "max_jobs")]
    pub max_jobs: usize,
    /// Output not yet read by the model, kept in memory across all of a
    /// session's jobs; past it, the oldest finished jobs' unread output is
    /// dropped first (their spill files keep it).
    #[serde(default = "max_unread")]
    pub max_unread_bytes_per_session: u64,
    /// Spill files of all of a session's jobs and tool calls, in bytes;
    /// past it, the oldest finished jobs' and calls' spill files are
    /// deleted first.
    #[serde(default = "max_spill")]
    pub max_spill_bytes_per_session: u64,
    /// Whether a job's end starts a turn of its own in an idle session
    /// (where the front end can show one: the SDK, `dsh run`).
    #[serde(default)]
    pub completion_delivery: CompletionDelivery,
    /// Wake-up turns in a row without the user's input; past them, a
    /// job's end is only noticed (it opens the next prompt). The user's
    /// next prompt starts the count again.
    #[serde(default = "max_wakes")]
    pub max_consecutive_wakes: u32,
    /// How long `dsh run` waits, after its last turn ended, for background
    /// jobs still running (and the wake-up turns their ends start); past
    /// it the run ends and its jobs are killed with the session. Without
    /// it a job that never ends (a dev server) would hold the run forever.
    #[serde(default = "run_wait")]
    pub run_wait_ms: u64,
}

/// How a job's end reaches a session that is idle (a busy one hears of it
/// at its turn's next step either way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompletionDelivery {
    /// It starts a wake-up turn whose prompt is the notice.
    #[default]
    Wakeup,
    /// It waits, noticed, for the next prompt, which it opens.
    Quiet,
}

fn yes() -> bool {
    true
}
fn wait_default() -> u64 {
    30_000
}
fn wait_max() -> u64 {
    600_000
}
fn max_jobs() -> usize {
    10
}
fn max_unread() -> u64 {
    8 * 1024 * 1024
}
fn max_spill() -> u64 {
    256 * 1024 * 1024
}
fn max_wakes() -> u32 {
    3
}
fn run_wait() -> u64 {
    600_000
}

impl Default for JobSettings {
    fn default() -> Self {
        JobSettings {
            enabled: true,
            wait_timeout_ms: wait_default(),
            max_wait_timeout_ms: wait_max(),
            max_jobs: max_jobs(),
            max_unread_bytes_per_session: max_unread(),
            max_spill_bytes_per_session: max_spill(),
            completion_delivery: CompletionDelivery::default(),
            max_consecutive_wakes: max_wakes(),
            run_wait_ms: run_wait(),
        }
    }
}
