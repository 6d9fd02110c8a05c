//! `dsh run`'s wake-ups ([`crate::session::wakeups`]): with `[jobs]
//! completion_delivery = "wakeup"` the run does not end while a job its
//! turn started still runs. Its waker hands each wake-up turn to the run,
//! which runs it after the task's turn, and again while jobs are left and
//! wake-ups may follow ([`go_on`]); then the run ends as before, its jobs
//! killed with the session. It waits at most `[jobs] run_wait_ms` after
//! each turn: a job that never ends (a dev server) does not hold the run
//! forever; the jobs still running are named on stderr and stopped.

use std::sync::Arc;

use dsh_protocol::log::StopReason;
use tokio::sync::mpsc;

use super::{shutdown_signal, RunArgs, RunFrontend};
use crate::agent::Agent;
use crate::error::AgentError;
use crate::jobs::CompletionDelivery;
use crate::session::wakeups::{Wake, Waker};
use crate::session::Session;

/// The run's wake-ups.
pub(super) struct RunWakeups {
    /// `None` when the jobs' ends are `quiet`.
    waking: Option<(Arc<Session>, mpsc::UnboundedReceiver<Wake>)>,
    frontend: Arc<RunFrontend>,
    /// `--timeout`'s end.
    deadline: Option<tokio::time::Instant>,
}

struct RunWaker(mpsc::UnboundedSender<Wake>);

impl Waker for RunWaker {
    fn wake(&self, wake: Wake) {
        // The run went: the ticket is let go with it.
        let _ = self.0.send(wake);
    }
}

impl RunWakeups {
    /// Installs the run's waker in session `id`, unless its jobs' ends are
    /// `quiet` (then the run ends with its task's turn, as without jobs);
    /// `--timeout` runs from now.
    ///
    /// # Errors
    /// The session is not open.
    pub(super) fn install(
        agent: &Agent,
        id: &dsh_protocol::SessionId,
        frontend: &Arc<RunFrontend>,
        args: &RunArgs,
    ) -> Result<RunWakeups, AgentError> {
        let session = agent.session(id)?;
        let deadline = args
            .timeout
            .map(|timeout| tokio::time::Instant::now() + timeout);
        let waking = (session.jobs.settings().completion_delivery == CompletionDelivery::Wakeup)
            .then(|| {
                let (tx, turns) = mpsc::unbounded_channel();
                session.wakeups.install(Arc::new(RunWaker(tx)));
                (session, turns)
            });
        Ok(RunWakeups {
            waking,
            frontend: frontend.clone(),
            deadline,
        })
    }
}

/// After the task's turn ended with `outcome`: if it ended well and a job
/// it started still runs (and wake-ups may follow), waits for the job's
/// end and runs the wake-up turn it starts, again while jobs are left; the
/// last turn's outcome. SIGINT or SIGTERM (`interrupted`) or `--timeout`
/// (`timed_out`) cancels the running turn, or ends the wait as cancelled.
pub(super) async fn go_on(
    run: RunWakeups,
    agent: &Agent,
    outcome: Result<StopReason, AgentError>,
    [interrupted, timed_out]: [&mut bool; 2],
) -> Result<StopReason, AgentError> {
    let Some((session, mut turns)) = run.waking else {
        return outcome;
    };
    if !matches!(outcome, Ok(StopReason::EndTurn)) || *interrupted || *timed_out {
        return outcome;
    }
    let mut outcome = outcome;
    let wakeups = &session.wakeups;
    wakeups.after_turn(&session);
    let run_wait = std::time::Duration::from_millis(session.jobs.settings().run_wait_ms);
    // The wait after each turn is bounded; a wake-up turn starts it again.
    let mut waited_out = tokio::time::Instant::now() + run_wait;
    loop {
        let wake = match turns.try_recv() {
            Ok(wake) => wake,
            Err(_) if !wakeups.outstanding(&session) || !wakeups.may_wake(&session) => break,
            Err(_) => {
                let changed = wakeups.changed.notified();
                tokio::select! {
                    wake = turns.recv() => match wake {
                        Some(wake) => wake,
                        None => break,
                    },
                    () = changed => continue,
                    // The wait is cancelled: the run did not finish.
                    signal = shutdown_signal() => {
                        tracing::info!(signal, "interrupted while background jobs run");
                        *interrupted = true;
                        outcome = Ok(StopReason::Cancelled);
                        break;
                    }
                    () = until(run.deadline) => {
                        *timed_out = true;
                        outcome = Ok(StopReason::Cancelled);
                        break;
                    }
                    // The task's turn ended: the run ends as it did
                    // before wake-ups, with its outcome.
                    () = tokio::time::sleep_until(waited_out) => {
                        super::stderr_line(&left_running(&session, run_wait));
                        break;
                    }
                }
            }
        };
        let cancel = wake.ticket.cancel_token();
        let turn = agent.wake(
            wake.ticket,
            wake.content,
            crate::session::Subscriber::new(run.frontend.clone()),
        );
        tokio::pin!(turn);
        outcome = tokio::select! {
            outcome = &mut turn => outcome,
            signal = shutdown_signal() => {
                tracing::info!(signal, "interrupted: cancelling the wake-up turn");
                *interrupted = true;
                cancel.cancel();
                turn.await
            }
            () = until(run.deadline) => {
                *timed_out = true;
                cancel.cancel();
                turn.await
            }
        };
        if !matches!(outcome, Ok(StopReason::EndTurn)) || *interrupted || *timed_out {
            break;
        }
        wakeups.after_turn(&session);
        waited_out = tokio::time::Instant::now() + run_wait;
    }
    outcome
}

/// `dsh run: background jobs still running after [jobs] run_wait_ms …`,
/// naming them: they are stopped with the session.
fn left_running(session: &Session, waited: std::time::Duration) -> String {
    let jobs: Vec<String> = session
        .jobs
        .list()
        .iter()
        .filter(|job| !job.has_ended())
        .map(|job| {
            let title = job.command.lines().next().unwrap_or("");
            format!(
                "{} (`{}`)",
                job.id,
                dsh_protocol::content::visible_title(title, 80)
            )
        })
        .collect();
    format!(
        "dsh run: background jobs still running {} s after the last turn ended ([jobs] run_wait_ms); stopping them: {}",
        waited.as_secs_f64(),
        if jobs.is_empty() { "(none left)".to_owned() } else { jobs.join(", ") }
    )
}

/// Resolves at `deadline`, never without one.
async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
