//! An SDK session's waker: a job's end that wakes the session
//! ([`crate::session::wakeups`]) runs a turn of its own, streamed to the
//! session's subscribers like any turn — its `running` and `idle` status
//! carry `wakeup: {jobs, count}` and a `messageId` of its own
//! (`wakeup-…`), and its `user/message` event has `source: "wakeup"`.

use std::sync::{Arc, Weak};

use crate::agent::Agent;
use crate::session::wakeups::{Wake, Waker};
use crate::session::{Session, Subscriber};

use super::{SdkSession, WakeMark};

/// Runs an SDK session's wake-up turns.
struct SdkWaker {
    agent: Weak<Agent>,
    session: Weak<SdkSession>,
    tasks: tokio_util::task::TaskTracker,
}

/// Installs the waker of the SDK's `session` in its core session.
pub(super) fn install(
    agent: Weak<Agent>,
    tasks: tokio_util::task::TaskTracker,
    core: &Session,
    session: &Arc<SdkSession>,
) {
    core.wakeups.install(Arc::new(SdkWaker {
        agent,
        session: Arc::downgrade(session),
        tasks,
    }));
}

impl Waker for SdkWaker {
    fn wake(&self, wake: Wake) {
        let (Some(agent), Some(session)) = (self.agent.upgrade(), self.session.upgrade()) else {
            return;
        };
        let message_id = format!("wakeup-{}", uuid::Uuid::new_v4());
        let mark = WakeMark {
            jobs: wake.jobs,
            count: wake.count,
        };
        // Nobody's connection sent it: its asks go to whoever answers.
        session.started(&message_id, 0, Some(mark.clone()));
        self.tasks.spawn(async move {
            let core = wake.ticket.session.clone();
            let outcome = agent
                .wake(wake.ticket, wake.content, Subscriber::new(session.clone()))
                .await;
            if let Err(error) = &outcome {
                tracing::warn!(session = %session.id, code = error.code().as_str(), "wake-up turn failed: {error}");
            }
            session.finished(&message_id, &outcome, Some(&mark));
            if matches!(outcome, Ok(dsh_protocol::log::StopReason::EndTurn)) {
                core.wakeups.after_turn(&core);
            }
        });
    }
}
