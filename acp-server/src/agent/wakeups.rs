//! Wake-up turns: what runs them ([`Agent::wake`]). Whether a job's end
//! wakes a session is decided in one place, [`crate::session::wakeups`];
//! a front end that can show a turn nobody prompted installs a waker there
//! (the SDK's `sdk/hub/wakeup.rs`, `dsh run`'s `run/wakeups.rs`), which
//! runs the turn with [`Agent::wake`].

use dsh_protocol::log::StopReason;
use dsh_protocol::UserContent;

use super::Agent;
use crate::error::AgentError;
use crate::session::{Subscriber, TurnTicket};

impl Agent {
    /// Runs a wake-up turn (its `user/message` has source `wakeup`)
    /// reporting to `frontend`, which becomes the session's prompter.
    ///
    /// # Errors
    /// As [`Agent::prompt`]'s.
    pub(crate) async fn wake(
        &self,
        ticket: TurnTicket,
        content: Vec<UserContent>,
        frontend: Subscriber,
    ) -> Result<StopReason, AgentError> {
        ticket.session.set_prompter(frontend.clone());
        let frontend = frontend.frontend();
        self.require_credential().await?;
        let provider = self
            .provider
            .clone()
            .ok_or_else(|| AgentError::Internal("no model provider".to_owned()))?;
        let stop = crate::turn::run_from(
            &ticket,
            provider,
            content,
            &**frontend,
            dsh_protocol::log::MessageSource::Wakeup,
        )
        .await;
        self.give_back_memory(false);
        stop
    }
}
