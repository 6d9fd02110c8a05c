//! Wake-ups: a background job's end (a command's, a background subagent's
//! answer) reaching an idle session as a turn of its own — the one place
//! where that is decided (seeds: `dsh-tool-jobs`'s `completionDelivery`
//! and `maxConsecutiveWakes`).
//!
//! Every job's end is recorded as `job/end` first (the session's job-end
//! path), which the model's history places at the running turn's next step
//! or, between turns, at the opening of the next prompt. Then
//! [`Wakeups::job_ended`] is told. A session whose front end can show a
//! turn nobody prompted (an SDK session, `dsh run`) has a [`Waker`]
//! installed; with `[jobs] completion_delivery = "wakeup"` (the default)
//! an end the model has not been given yet starts a wake-up turn as soon
//! as the session is idle: its `user/message` (source `wakeup`) is the
//! notice, and the `job/end` opens it. A session that is busy hears of the
//! end inside its turn; if that turn ends before the model was given it,
//! the front end's [`Wakeups::after_turn`] wakes the session then.
//!
//! At most `max_consecutive_wakes` wake-up turns follow one another
//! without the user's input (a woken turn may start the job whose end wakes
//! it again); past them an end is only noticed, and the user's next prompt
//! ([`Wakeups::user_input`]) starts the count again. With `quiet`, or with
//! no waker (ACP: a turn starts only from a prompt), an end is only
//! noticed, and it opens the next prompt's context.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use dsh_protocol::model::ChatMessage;
use dsh_protocol::UserContent;

use super::{Session, TurnTicket};
use crate::jobs::{CompletionDelivery, JobKind, JobReport};

/// What a front end that can show a turn nobody prompted installs in a
/// session ([`Wakeups::install`]).
pub(crate) trait Waker: Send + Sync {
    /// Runs the wake-up turn (with `Agent::wake`); it holds the
    /// session's turn already. Called from the job-end path: it spawns,
    /// never waits.
    fn wake(&self, wake: Wake);
}

/// A wake-up turn to run.
pub(crate) struct Wake {
    /// The session's turn, held for it.
    pub(crate) ticket: TurnTicket,
    /// Its prompt: the notice of the jobs that ended.
    pub(crate) content: Vec<UserContent>,
    /// Those jobs' ids.
    pub(crate) jobs: Vec<String>,
    /// Its place among the wake-ups since the user's last input (1-based).
    pub(crate) count: u32,
}

/// A job's end the model may not have been given yet.
pub(crate) struct Ended {
    job_id: String,
    /// The notice's line for it.
    line: String,
    /// What `job/end` tells the model (how to find it in the history).
    summary: String,
}

/// A session's wake-ups: its waker, the ends waiting for one, the count.
#[derive(Default)]
pub(crate) struct Wakeups {
    waker: Mutex<Option<Arc<dyn Waker>>>,
    pending: Mutex<Vec<Ended>>,
    /// Wake-up turns since the user's last input.
    consecutive: AtomicU32,
    /// Jobs whose end was reported here.
    reported: AtomicUsize,
    /// Told after each end is reported and each wake-up is decided.
    pub(crate) changed: tokio::sync::Notify,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Wakeups {
    /// The session's front end can show wake-up turns: `waker` runs them.
    pub(crate) fn install(&self, waker: Arc<dyn Waker>) {
        *lock(&self.waker) = Some(waker);
    }

    /// The user's input (a prompt, a steer): wake-ups may follow again.
    pub(crate) fn user_input(&self) {
        self.consecutive.store(0, Ordering::Relaxed);
    }

    /// A job of `session` ended (its `job/end` is recorded): the session
    /// is woken if it is idle and may be, else when its turn ends.
    pub(crate) fn job_ended(&self, session: &Arc<Session>, ended: Ended) {
        let waking = session.jobs.settings().completion_delivery == CompletionDelivery::Wakeup
            && lock(&self.waker).is_some();
        if waking {
            lock(&self.pending).push(ended);
        }
        self.reported.fetch_add(1, Ordering::AcqRel);
        if !waking {
            self.changed.notify_one();
            return;
        }
        self.after_turn(session);
    }

    /// A turn of `session` ended: ends it did not give the model wake
    /// the session now.
    pub(crate) fn after_turn(&self, session: &Arc<Session>) {
        if lock(&self.pending).is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let session = session.clone();
        runtime.spawn(async move { session.wakeups.try_wake(&session).await });
    }

    /// Starts a wake-up turn for the ends the model has not been given,
    /// if the session is idle (else its turn's end tries again) and fewer
    /// than `max_consecutive_wakes` came since the user's last input.
    async fn try_wake(&self, session: &Arc<Session>) {
        self.decide(session).await;
        self.changed.notify_one();
    }

    /// [`Self::try_wake`]'s decision.
    async fn decide(&self, session: &Arc<Session>) {
        let waker = lock(&self.waker).clone();
        let Some(waker) = waker else {
            return;
        };
        // Held from here: no turn starts while this is decided.
        let Ok(ticket) = session.begin_turn().await else {
            return;
        };
        if session.closing().is_cancelled() {
            return;
        }
        let conversation = match session.history().await {
            Ok(conversation) => conversation,
            Err(err) => {
                tracing::debug!(session = %session.id, %err, "no wake-up: the history cannot be read");
                return;
            }
        };
        let unseen: Vec<Ended> = std::mem::take(&mut *lock(&self.pending))
            .into_iter()
            .filter(|ended| !given(&conversation, &ended.summary))
            .collect();
        let wake = if unseen.is_empty() {
            None
        } else if self.consecutive.load(Ordering::Relaxed)
            >= session.jobs.settings().max_consecutive_wakes
        {
            tracing::info!(session = %session.id, jobs = ?unseen.iter().map(|e| &e.job_id).collect::<Vec<_>>(), "no wake-up: [jobs] max_consecutive_wakes reached; the end opens the next prompt");
            None
        } else {
            let count = self.consecutive.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::info!(session = %session.id, count, "a job's end wakes the session");
            Some(Wake {
                ticket,
                content: vec![UserContent::text(notice(&unseen))],
                jobs: unseen.into_iter().map(|ended| ended.job_id).collect(),
                count,
            })
        };
        if let Some(wake) = wake {
            waker.wake(wake);
        }
    }

    /// Whether more wake-ups may come before the user's next input.
    pub(crate) fn may_wake(&self, session: &Session) -> bool {
        self.consecutive.load(Ordering::Relaxed) < session.jobs.settings().max_consecutive_wakes
    }

    /// Whether a job of `session` runs, or ended and was not reported yet,
    /// or an end waits for a wake-up.
    pub(crate) fn outstanding(&self, session: &Session) -> bool {
        session.jobs.list().len() > self.reported.load(Ordering::Acquire)
            || !lock(&self.pending).is_empty()
    }
}

impl Ended {
    /// What a wake-up needs of a job's end (taken before it is recorded).
    pub(crate) fn of(session: &Session, report: &JobReport) -> Ended {
        Ended {
            job_id: report.job_id.clone(),
            line: notice_line(session, report),
            summary: report.summary.clone(),
        }
    }
}

/// Whether `summary` (a `job/end`'s) is in the conversation the model was
/// given: placed after a step's tool results, or opening a prompt.
fn given(conversation: &[ChatMessage], summary: &str) -> bool {
    conversation.iter().any(|message| match message {
        ChatMessage::User(blocks) => blocks
            .iter()
            .any(|block| matches!(block, UserContent::Text { text } if text.contains(summary))),
        _ => false,
    })
}

/// `Background job j1 (`make test`) finished: exited 0.`
fn notice_line(session: &Session, report: &JobReport) -> String {
    let job = session.jobs.get(&report.job_id);
    let (what, title, reads) = match job.as_deref() {
        Some(job) if job.kind == JobKind::Subagent => ("agent job", &job.command, "answer"),
        Some(job) => ("job", &job.command, "output"),
        None => ("job", &report.job_id, "output"),
    };
    format!(
        "Background {what} {} (`{}`) finished: {}. Read its {reads} with job_output {{\"job_id\": \"{}\"}}.",
        report.job_id,
        dsh_protocol::content::visible_title(title.lines().next().unwrap_or(""), 120),
        report.status,
        report.job_id,
    )
}

/// A wake-up turn's prompt.
fn notice(ended: &[Ended]) -> String {
    let lines: Vec<&str> = ended.iter().map(|ended| ended.line.as_str()).collect();
    format!(
        "{}\n[dsh: the user did not write this; dsh started this turn because background work ended while you were idle. Go on with the task it was for, or tell the user what came of it.]",
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests;
