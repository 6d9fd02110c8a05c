//! Context the turn adds for the model on its own account, recorded as
//! turn-only context (`context/instructions` with no files, like a hook's)
//! so the log keeps it for history, replay and later requests:
//!
//! - the repeat-tool reminder ([`crate::tools::Repeats`]), after the tool
//!   results of the step whose calls brought a chain of identical calls to
//!   a threshold. The chain is the turn's: a prompt from the user is a new
//!   direction, so a new turn starts counting afresh (and a turn never
//!   outlives its process, so nothing needs deriving from the log);
//! - the time context ([`crate::context::time`]), at the start of a turn
//!   when the session's last one is older than `[time]
//!   refresh_interval_ms` (that one's time is the log's).

use dsh_protocol::log::EventData;
use dsh_protocol::model::ToolCallRequest;

use super::Turn;
use crate::error::AgentError;

impl Turn<'_> {
    /// Folds the step's calls into the turn's chain: the reminder to give
    /// after their results, if one reached a threshold (the last, when
    /// several did).
    pub(super) fn repeated(&self, calls: &[ToolCallRequest]) -> Option<String> {
        let settings = &self.config.tools.repeat_reminder;
        let mut repeats = self.repeats.lock().unwrap_or_else(|e| e.into_inner());
        calls
            .iter()
            .filter_map(|call| repeats.observe(settings, &call.name, &call.arguments))
            .last()
    }

    /// Records a reminder [`Self::repeated`] returned.
    pub(super) fn remind(&self, reminder: Option<String>) -> Result<(), AgentError> {
        let Some(text) = reminder else {
            return Ok(());
        };
        tracing::info!("repeat-tool reminder");
        self.record(EventData::Instructions {
            text,
            files: Vec::new(),
        })
    }

    /// The time context, when it is due.
    pub(super) fn time_context(&self) -> Result<(), AgentError> {
        let last = self.session.locked().state.time_context;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
            });
        let clock = &self.config.time;
        if !clock.due(last, now_ms) {
            return Ok(());
        }
        self.record(EventData::Instructions {
            text: clock.context(clock.now()),
            files: Vec::new(),
        })
    }
}
