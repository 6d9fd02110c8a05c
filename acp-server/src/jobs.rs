//! Background jobs: commands the model started with `bash`'s
//! `run_in_background` (seeds: `dsh-tool-jobs`). Each runs under the
//! command guard, in its sandbox and its own process group; its output is
//! kept in memory up to a cap (what the model has not read yet, and a tail
//! for the editor) and in full, up to 64 MiB, in a private spill file —
//! both within per-session budgets ([`budget`]). A
//! session's jobs are killed when it closes (and with dsh: the guard dies
//! with it). When a job ends, the session is told ([`JobReport`]): it logs
//! `job/end`, the editor's tool call finishes, and the model hears of it at
//! its next step.
//!
//! A job keeps the sandbox of the mode it started in. When the session's
//! mode becomes stricter than that ([`rank`]: read-only and plan < ask <
//! accept-edits < full-access), the job is killed ([`Jobs::mode_changed`]),
//! and one started after the change under the earlier mode's sandbox is
//! not started at all.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use dsh_protocol::tool::ToolView;
use dsh_protocol::ToolCallId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use dsh_protocol::Mode;

mod budget;
mod settings;
pub mod spill_file;

pub use budget::SpillBudget;
pub use settings::{CompletionDelivery, JobSettings};

/// What the model has not read yet is kept up to this much (the oldest is
/// dropped first, and the reader is told how much).
const UNREAD_CAP: usize = 1024 * 1024;
/// The tail the editor shows when a job ends.
const TAIL_BYTES: usize = 8 * 1024;
/// How much of a job's output its spill file keeps.
const SPILL_BYTES: u64 = 64 * 1024 * 1024;

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// It exited with this code.
    Exited(i32),
    /// A signal killed it.
    Signal(i32),
    /// It was killed: by `job_kill`, or because the session closed.
    Killed(String),
    /// Work that is not a process (a subagent) finished.
    Done,
    /// Work that is not a process failed, for this reason.
    Failed(String),
}

impl End {
    /// `exited N`, `signal N`, `killed`, `done` or `failed`.
    pub fn status(&self) -> String {
        match self {
            End::Exited(code) => format!("exited {code}"),
            End::Signal(signal) => format!("signal {signal}"),
            End::Killed(_) => "killed".to_owned(),
            End::Done => "done".to_owned(),
            End::Failed(_) => "failed".to_owned(),
        }
    }

    fn failed(&self) -> bool {
        !matches!(self, End::Exited(0) | End::Done)
    }

    /// As a command's exit, for a live view.
    fn as_exit(&self) -> dsh_protocol::tool::CommandLive {
        let (exit_code, signal) = match self {
            End::Exited(code) => (Some(*code), None),
            End::Signal(signal) => (None, Some(signal.to_string())),
            End::Killed(_) | End::Done | End::Failed(_) => (None, None),
        };
        dsh_protocol::tool::CommandLive::Exited { exit_code, signal }
    }
}

/// What a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// A `bash` command.
    Bash,
    /// A subagent.
    Subagent,
}

/// How permissive a mode's sandbox is: read-only and plan 0, ask 1,
/// accept-edits 2, full-access 3. A job whose mode ranks above the
/// session's is killed.
pub fn rank(mode: Mode) -> u8 {
    match mode {
        Mode::ReadOnly | Mode::Plan => 0,
        Mode::Ask => 1,
        Mode::AcceptEdits => 2,
        Mode::FullAccess => 3,
    }
}

/// How every job reply ends.
fn status_line(end: &Option<End>) -> String {
    match end {
        None => "[status: running]".to_owned(),
        Some(end) => format!("[status: {}]", end.status()),
    }
}

/// What the session logs when a job ends (`job/end`).
#[derive(Debug, Clone)]
pub struct JobReport {
    /// The job.
    pub job_id: String,
    /// The call that started it.
    pub call_id: ToolCallId,
    /// `exited N`, `signal N` or `killed`.
    pub status: String,
    /// Not a zero exit.
    pub failed: bool,
    /// What the model is told.
    pub summary: String,
    /// The call's final view: the tail of the output and the status.
    pub view: ToolView,
    /// Tokens it spent on model requests (a subagent's).
    pub usage: Option<dsh_protocol::model::Usage>,
}

/// Called once when a job ends.
pub type OnEnd = Box<dyn FnOnce(JobReport) + Send>;

/// Told a running command job's output as it comes (sampled at most every
/// [`LIVE_EVERY`]), then how it exited, before its end is reported.
pub type OnLive = Box<dyn Fn(dsh_protocol::tool::CommandLive) + Send + Sync>;

/// How often a running job's output is sampled for [`OnLive`], at most.
const LIVE_EVERY: Duration = Duration::from_millis(100);

/// A job's output and state.
#[derive(Default)]
struct State {
    unread: Vec<u8>,
    /// Unread bytes not kept: over the job's cap, or the oldest ones of a
    /// running job over the session's budget.
    dropped: u64,
    /// Unread bytes of the finished job dropped for the session's budget.
    evicted: u64,
    tail: Vec<u8>,
    total: u64,
    end: Option<End>,
    kill_reason: Option<String>,
    spill: Option<PathBuf>,
    /// Bytes in (or reserved for) the spill file.
    spilled: u64,
    /// The spill file was deleted for the session's budget.
    spill_deleted: bool,
}

/// One background job.
pub struct Job {
    /// `j1`, `j2`, …
    pub id: String,
    /// The call that started it.
    pub call_id: ToolCallId,
    /// The command line (a subagent: its description).
    pub command: String,
    /// What it does (the model's description).
    pub description: String,
    /// The mode whose sandbox it runs in.
    pub mode: Mode,
    /// What it runs.
    pub kind: JobKind,
    /// The tool that started it (`job_list` shows it).
    tool: &'static str,
    started: Instant,
    state: Mutex<State>,
    ended: tokio::sync::watch::Sender<bool>,
    kill: CancellationToken,
    budget: Arc<budget::Budget>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Job {
    /// Keeps a chunk of output; whether the session is now over its
    /// budget for unread output.
    fn take(&self, chunk: &[u8]) -> bool {
        let mut state = lock(&self.state);
        state.total += chunk.len() as u64;
        state.unread.extend_from_slice(chunk);
        let cap = self.budget.unread_cap();
        let mut cut = 0;
        if state.unread.len() > cap {
            cut = state.unread.len() - cap;
            state.unread.drain(..cut);
            state.dropped += cut as u64;
        }
        state.tail.extend_from_slice(chunk);
        if state.tail.len() > 2 * TAIL_BYTES {
            let cut = state.tail.len() - TAIL_BYTES;
            state.tail.drain(..cut);
        }
        self.budget.count(chunk.len(), cut)
    }

    /// It ended: its buffers shrink to what they hold.
    fn settle_buffers(&self) {
        let mut state = lock(&self.state);
        state.unread.shrink_to_fit();
        if state.tail.len() > TAIL_BYTES {
            let cut = state.tail.len() - TAIL_BYTES;
            state.tail.drain(..cut);
        }
        state.tail.shrink_to_fit();
    }

    /// `[status: running]`, `[status: exited N]`, `[status: killed]`, …
    pub fn status_line(&self) -> String {
        status_line(&lock(&self.state).end)
    }

    /// Tells `on_live` the output since the last sample, if any came.
    fn show(&self, sampler: &mut dsh_protocol::tool::OutputSampler, on_live: Option<&OnLive>) {
        let Some(on_live) = on_live else {
            return;
        };
        let sampled = {
            let state = lock(&self.state);
            sampler.sample(state.total, &state.tail, TAIL_BYTES)
        };
        if let Some(output) = sampled {
            on_live(output);
        }
    }

    /// Keeps output of work that is not a process (a subagent's progress).
    /// (A few lines per step: within the job's own cap, not the
    /// session's shedding, which is for floods of command output.)
    pub fn feed(&self, text: &str) {
        let _over = self.take(text.as_bytes());
    }

    /// Cancelled when it is asked to stop.
    pub fn killed(&self) -> &CancellationToken {
        &self.kill
    }

    /// Why it was asked to stop, if it was.
    pub fn kill_reason(&self) -> Option<String> {
        lock(&self.state).kill_reason.clone()
    }

    /// Whether it has ended.
    pub fn has_ended(&self) -> bool {
        lock(&self.state).end.is_some()
    }

    /// Waits until it ends or `timeout` passes (or `cancel` fires).
    pub async fn wait(&self, timeout: Duration, cancel: &CancellationToken) {
        let mut ended = self.ended.subscribe();
        tokio::select! {
            _ = ended.wait_for(|ended| *ended) => {}
            () = tokio::time::sleep(timeout) => {}
            () = cancel.cancelled() => {}
        }
    }

    /// The output since the last read, then the status line.
    pub fn read(&self) -> String {
        let mut state = lock(&self.state);
        let unread = std::mem::take(&mut state.unread);
        self.budget.count(0, unread.len());
        let dropped = std::mem::take(&mut state.dropped);
        let evicted = std::mem::take(&mut state.evicted);
        let mut text = String::new();
        let mut notes = Vec::new();
        if evicted > 0 {
            notes.push(format!(
                "{evicted} bytes of its output were dropped unread to keep this session's background jobs within their memory budget ({} bytes in all, [jobs] max_unread_bytes_per_session)",
                self.budget.max_unread
            ));
        }
        if dropped > 0 {
            notes.push(format!("{dropped} earlier bytes were not kept in memory"));
        }
        if !notes.is_empty() {
            match (&state.spill, state.spill_deleted) {
                (Some(path), _) if state.spilled < state.total => notes.push(format!(
                    "the first {} bytes of its output are in {}",
                    state.spilled,
                    path.display()
                )),
                (Some(path), _) => {
                    notes.push(format!("the full output is in {}", path.display()));
                }
                (None, true) => notes.push(format!(
                    "its spill file was deleted to keep this session's background jobs within their disk budget ({} bytes, [jobs] max_spill_bytes_per_session)",
                    self.budget.max_spill
                )),
                (None, false) => {}
            }
            text.push_str(&format!("[{}]\n", notes.join("; ")));
        }
        text.push_str(&String::from_utf8_lossy(&unread));
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&status_line(&state.end));
        text
    }

    /// Asks it to stop; it ends as killed once its processes are gone.
    /// The first reason given is the one reported.
    pub fn kill(&self, reason: Option<String>) {
        let mut state = lock(&self.state);
        if !self.kill.is_cancelled() || state.kill_reason.is_none() {
            state.kill_reason = reason;
        }
        drop(state);
        self.kill.cancel();
    }

    /// One line for `job_list`.
    pub fn line(&self) -> String {
        let state = lock(&self.state);
        let status = state
            .end
            .as_ref()
            .map_or_else(|| "running".to_owned(), End::status);
        let first = self.command.lines().next().unwrap_or("");
        format!(
            "{}\t{}\t{status}\t{} s\t{}{}",
            self.id,
            self.tool,
            self.started.elapsed().as_secs(),
            dsh_protocol::content::visible_title(first, 80),
            if self.description.is_empty() {
                String::new()
            } else {
                format!(
                    " — {}",
                    dsh_protocol::content::visible_title(&self.description, 80)
                )
            }
        )
    }

    fn report(&self, end: &End, usage: Option<dsh_protocol::model::Usage>) -> JobReport {
        let state = lock(&self.state);
        let elapsed = self.started.elapsed().as_secs_f64();
        let how = match end {
            End::Exited(code) => format!("exited with code {code}"),
            End::Signal(signal) => format!("was killed by signal {signal}"),
            End::Killed(reason) => format!("was stopped (killed: {reason})"),
            End::Done => "finished".to_owned(),
            End::Failed(reason) => format!("failed ({reason})"),
        };
        let unread = state.unread.len() as u64 + state.dropped + state.evicted;
        let summary = format!(
            "[dsh: background {} {} (`{}`) {how} after {elapsed:.1} s; {} unread bytes of output — read them with job_output {{\"job_id\": \"{}\"}}.]",
            if self.kind == JobKind::Bash { "job" } else { "agent job" },
            self.id,
            dsh_protocol::content::visible_title(self.command.lines().next().unwrap_or(""), 120),
            unread,
            self.id,
        );
        let text = String::from_utf8_lossy(&state.tail);
        let tail = dsh_protocol::content::tail_bytes(&text, TAIL_BYTES);
        let why = match end {
            End::Killed(reason) => format!("\nKilled: {reason}."),
            End::Failed(reason) => format!("\nFailed: {reason}."),
            End::Exited(_) | End::Signal(_) | End::Done => String::new(),
        };
        let shown = format!(
            "{}{tail}\n[status: {}]",
            if state.total as usize > tail.len() {
                "…"
            } else {
                ""
            },
            end.status()
        );
        let view = ToolView::text(format!(
            "{}{why}",
            dsh_protocol::content::fenced(&shown, "")
        ));
        JobReport {
            job_id: self.id.clone(),
            call_id: self.call_id.clone(),
            status: end.status(),
            failed: end.failed(),
            summary,
            view,
            usage,
        }
    }
}

/// A session's jobs.
pub struct Jobs {
    settings: JobSettings,
    next: AtomicU64,
    shared: Arc<budget::Shared>,
    tracker: TaskTracker,
    spill_dir: PathBuf,
}

/// The jobs and the session's mode, under one lock: a job starts, or is
/// killed by a change of mode, never both at once.
#[derive(Default)]
struct Registry {
    jobs: BTreeMap<u64, Arc<Job>>,
    /// The session's mode since its last change (`None` before one).
    mode: Option<Mode>,
    /// The bytes in all of the jobs' and tool calls' spill files.
    spilled: u64,
    /// Tool calls' spill files, by key.
    tools: BTreeMap<u64, budget::ToolSpill>,
    /// The last tool spill key given.
    next_tool: u64,
}

/// Why a job whose mode is looser than `to` is killed.
fn mode_reason(from: Mode, to: Mode) -> String {
    format!(
        "the session's mode changed from {} to {}",
        from.as_str(),
        to.as_str()
    )
}

/// What starts a job.
pub struct JobSpec {
    /// The call that starts it.
    pub call_id: ToolCallId,
    /// The command line.
    pub command: String,
    /// The model's description.
    pub description: String,
    /// The mode whose sandbox it runs in (the session's when the call ran).
    pub mode: Mode,
    /// What it runs.
    pub kind: JobKind,
    /// The tool that started it.
    pub tool: &'static str,
}

impl Jobs {
    /// No jobs yet; spill files go to `spill_dir`.
    pub fn new(settings: JobSettings, spill_dir: PathBuf) -> Jobs {
        Jobs {
            shared: Arc::new(budget::Shared::new(&settings)),
            settings,
            next: AtomicU64::new(1),
            tracker: TaskTracker::new(),
            spill_dir,
        }
    }

    /// The session's disk budget for spill files, for tool calls'.
    pub fn spill_budget(&self) -> SpillBudget {
        SpillBudget(self.shared.clone())
    }

    /// The settings.
    pub fn settings(&self) -> &JobSettings {
        &self.settings
    }

    /// Whether a job of `spec` may start now: the session's mode has not
    /// become stricter than the job's, and fewer than the most run.
    fn admit(&self, spec: &JobSpec) -> Result<(), String> {
        let (running, now) = {
            let registry = lock(&self.shared.registry);
            let running = registry
                .jobs
                .values()
                .filter(|job| !job.has_ended())
                .count();
            (running, registry.mode)
        };
        if let Some(now) = now.filter(|now| rank(*now) < rank(spec.mode)) {
            return Err(format!(
                "The session's mode changed to {} after this {} was allowed, and it would run with {}'s sandbox: it was not started.",
                now.as_str(),
                if spec.kind == JobKind::Bash { "command" } else { "agent" },
                spec.mode.as_str()
            ));
        }
        if running >= self.settings.max_jobs {
            return Err(format!(
                "{running} background jobs are running, the most a session may have; stop one with job_kill or wait for one to end."
            ));
        }
        Ok(())
    }

    /// A new job of `spec`, registered: its number and the job.
    fn register(&self, spec: JobSpec) -> (u64, Arc<Job>) {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let job = Arc::new(Job {
            id: format!("j{number}"),
            call_id: spec.call_id,
            command: spec.command,
            description: spec.description,
            mode: spec.mode,
            kind: spec.kind,
            tool: spec.tool,
            started: Instant::now(),
            state: Mutex::new(State::default()),
            ended: tokio::sync::watch::channel(false).0,
            kill: CancellationToken::new(),
            budget: self.shared.budget.clone(),
        });
        // The mode may have changed since the check: then the job goes at
        // once, as it would have gone had it started before the change.
        let stricter = {
            let mut registry = lock(&self.shared.registry);
            registry.jobs.insert(number, job.clone());
            registry.mode.filter(|now| rank(*now) < rank(job.mode))
        };
        if let Some(now) = stricter {
            job.kill(Some(mode_reason(job.mode, now)));
        }
        (number, job)
    }

    /// Starts work that is not a process (a subagent) as a job: `work`
    /// gets the job, feeds it output ([`Job::feed`]), stops when it is
    /// killed ([`Job::killed`]), and returns how it ended and the tokens
    /// it spent.
    ///
    /// # Errors
    /// Too many jobs run, or the mode became stricter.
    pub fn start_task<F>(
        &self,
        spec: JobSpec,
        work: impl FnOnce(Arc<Job>) -> F,
        on_end: OnEnd,
    ) -> Result<Arc<Job>, String>
    where
        F: std::future::Future<Output = (End, Option<dsh_protocol::model::Usage>)> + Send + 'static,
    {
        self.admit(&spec)?;
        let (_, job) = self.register(spec);
        let running = work(job.clone());
        let watched = job.clone();
        self.tracker.spawn(async move {
            let (end, usage) = running.await;
            watched.settle_buffers();
            lock(&watched.state).end = Some(end.clone());
            watched.ended.send_replace(true);
            on_end(watched.report(&end, usage));
        });
        Ok(job)
    }

    /// Starts `command` (a guarded, sandboxed `bash -c`) as a job; its
    /// output goes to `on_live` as it comes, if given.
    ///
    /// # Errors
    /// Too many jobs run, or the command cannot start.
    pub fn start(
        &self,
        spec: JobSpec,
        mut command: tokio::process::Command,
        on_end: OnEnd,
        on_live: Option<OnLive>,
    ) -> Result<Arc<Job>, String> {
        self.admit(&spec)?;
        command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|err| format!("Cannot start bash: {err}"))?;
        let (number, job) = self.register(spec);
        let spill = spill_file::job_path(&self.spill_dir, number);
        let pgid = child.id().unwrap_or(0);
        let streams: Vec<Box<dyn tokio::io::AsyncRead + Unpin + Send>> = [
            child.stdout.take().map(|s| Box::new(s) as _),
            child.stderr.take().map(|s| Box::new(s) as _),
        ]
        .into_iter()
        .flatten()
        .collect();
        let (watched, shared) = (job.clone(), self.shared.clone());
        self.tracker.spawn(async move {
            let job = watched;
            let spill = spill_file::open(&spill).await.ok().map(|(file, spill)| {
                lock(&job.state).spill = Some(spill);
                Arc::new(tokio::sync::Mutex::new(file))
            });
            let mut readers = Vec::new();
            for mut stream in streams {
                let (job, spill, shared) = (job.clone(), spill.clone(), shared.clone());
                readers.push(tokio::spawn(async move {
                    let mut chunk = vec![0u8; 16 * 1024];
                    loop {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if job.take(&chunk[..n]) {
                                    shared.shed_unread();
                                }
                                if let Some(spill) = &spill {
                                    let mut file = spill.lock().await;
                                    spill_chunk(&shared, &job, &mut file, &chunk[..n]).await;
                                }
                            }
                        }
                    }
                }));
            }
            let mut sampler = dsh_protocol::tool::OutputSampler::default();
            let mut sample = tokio::time::interval(LIVE_EVERY);
            sample.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let end = loop {
                tokio::select! {
                    // Cancel-safe: waiting again picks up where it was.
                    status = child.wait() => {
                        break match status {
                            Ok(status) => match (status.code(), dsh_process::exit_signal(&status)) {
                                (Some(code), _) => End::Exited(code),
                                (None, Some(signal)) => End::Signal(signal),
                                (None, None) => End::Exited(-1),
                            },
                            Err(_) => End::Exited(-1),
                        };
                    }
                    () = job.kill.cancelled() => {
                        dsh_process::stop_guarded(&mut child, pgid, Duration::from_millis(1000)).await;
                        let reason = lock(&job.state).kill_reason.clone();
                        break End::Killed(reason.unwrap_or_else(|| "by request".to_owned()));
                    }
                    _ = sample.tick(), if on_live.is_some() => job.show(&mut sampler, on_live.as_ref()),
                }
            };
            dsh_process::settle(pgid, &mut readers, Duration::from_millis(500)).await;
            job.show(&mut sampler, on_live.as_ref());
            if let Some(on_live) = &on_live {
                on_live(end.as_exit());
            }
            if let Some(spill) = &spill {
                let _ = spill.lock().await.flush().await;
            }
            job.settle_buffers();
            lock(&job.state).end = Some(end.clone());
            job.ended.send_replace(true);
            on_end(job.report(&end, None));
        });
        Ok(job)
    }

    /// The job with this id.
    pub fn get(&self, id: &str) -> Option<Arc<Job>> {
        let number: u64 = id.strip_prefix('j')?.parse().ok()?;
        lock(&self.shared.registry).jobs.get(&number).cloned()
    }

    /// Every job, oldest first.
    pub fn list(&self) -> Vec<Arc<Job>> {
        lock(&self.shared.registry).jobs.values().cloned().collect()
    }

    /// Whether the job started by `call` still runs.
    pub fn runs_for(&self, call: &ToolCallId) -> bool {
        lock(&self.shared.registry)
            .jobs
            .values()
            .any(|job| &job.call_id == call && !job.has_ended())
    }

    /// The session's mode changed from `from` to `to`: the running jobs
    /// whose mode is looser than `to` are killed (they end as killed, the
    /// change named as the reason); them, for the user's notice.
    pub fn mode_changed(&self, from: Mode, to: Mode) -> Vec<Arc<Job>> {
        let doomed: Vec<Arc<Job>> = {
            let mut registry = lock(&self.shared.registry);
            registry.mode = Some(to);
            registry
                .jobs
                .values()
                .filter(|job| rank(job.mode) > rank(to) && !job.has_ended())
                .cloned()
                .collect()
        };
        for job in &doomed {
            job.kill(Some(mode_reason(from, to)));
        }
        doomed
    }

    /// Kills every job and waits until each has ended and been reported.
    pub async fn shutdown(&self, reason: &str) {
        for job in self.list() {
            if !job.has_ended() {
                job.kill(Some(reason.to_owned()));
            }
        }
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// Writes what the session's disk budget leaves room for of `chunk` to
/// the job's spill file, deleting older finished jobs' files first.
async fn spill_chunk(shared: &budget::Shared, job: &Job, file: &mut tokio::fs::File, chunk: &[u8]) {
    let (granted, doomed) = shared.reserve_spill(job, chunk.len() as u64);
    for path in doomed {
        if let Err(err) = tokio::fs::remove_file(&path).await {
            tracing::debug!(path = %path.display(), %err, "cannot delete a job's spill file");
        }
    }
    let part = &chunk[..usize::try_from(granted).unwrap_or(0)];
    if !part.is_empty() && file.write_all(part).await.is_err() {
        shared.unspill(job, granted);
    }
}

// The tests run their jobs with `bash` in process groups of their own.
#[cfg(all(test, unix))]
mod tests;
