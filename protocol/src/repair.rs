//! The one place that decides which tool calls a log announced and never
//! answered (dsh died while they ran), for the model's history and the
//! editor's view alike: [`Repair`] answers them with a failed "outcome
//! unknown" result.

use crate::error::{ErrorCode, ErrorInfo};
use crate::ids::ToolCallId;
use crate::log::{Event, EventData};
use crate::tool::{ToolStatus, ToolView};

/// Text the model sees for a tool call whose outcome was never logged
/// (the process died while it ran).
pub const OUTCOME_UNKNOWN: &str = "The outcome of this tool call is unknown: dsh stopped while it was running. Check the current state before relying on it.";

/// Finds the tool calls a log announced but never answered, and answers
/// them with a failed "outcome unknown" result: before the next step,
/// prompt, turn end or summary, and at the end of the log.
#[derive(Debug, Clone, Default)]
pub struct Repair {
    /// Calls announced and not yet answered: (id, turn).
    open: Vec<(ToolCallId, u64)>,
    /// The last event seen (synthetic results take its seq).
    last_seq: u64,
}

impl Repair {
    /// The synthetic results due before `event`; then notes what `event`
    /// opens or closes. Feed every event through it, in order, and apply
    /// what it returns before the event itself.
    pub fn before(&mut self, event: &Event) -> Vec<Event> {
        // One decision per event type: whether it closes the open calls
        // (they are answered before it), and what it opens or answers.
        let closed = match &event.data {
            EventData::AssistantMessage {
                turn,
                tool_calls,
                interrupted,
                ..
            } => {
                let closed = self.finish();
                // A cut reply's calls were never dispatched: nothing opens.
                if !interrupted {
                    self.open
                        .extend(tool_calls.iter().map(|call| (call.id.clone(), *turn)));
                }
                closed
            }
            EventData::UserMessage { .. }
            | EventData::TurnEnd { .. }
            | EventData::CompactionSummary { .. } => self.finish(),
            EventData::ToolResult { call_id, .. } => {
                self.open.retain(|(id, _)| id != call_id);
                Vec::new()
            }
            EventData::Config { .. }
            | EventData::Title { .. }
            | EventData::TurnStart { .. }
            | EventData::ToolCall { .. }
            | EventData::JobEnd { .. }
            | EventData::PermissionDecision { .. }
            | EventData::PermissionRule(_)
            | EventData::Plan { .. }
            | EventData::CompactionPrune { .. }
            | EventData::CompactionStart { .. }
            | EventData::CompactionFailed { .. }
            | EventData::PlanDecision { .. }
            | EventData::QuestionDecision { .. }
            | EventData::Instructions { .. }
            | EventData::Skills { .. }
            | EventData::Checkpoint { .. }
            | EventData::Undo { .. }
            | EventData::Notice { .. }
            | EventData::LlmRetry { .. }
            | EventData::HookResult(_)
            | EventData::HookConsent(_)
            | EventData::GoalChange { .. } => Vec::new(),
        };
        self.last_seq = event.seq;
        closed
    }

    /// Synthetic results for the calls still open (the end of a log).
    pub fn finish(&mut self) -> Vec<Event> {
        let seq = self.last_seq;
        self.open
            .drain(..)
            .map(|(call_id, turn)| Event {
                seq,
                time: 0,
                ignorable: false,
                data: EventData::ToolResult {
                    turn,
                    call_id,
                    status: ToolStatus::Failed,
                    output: OUTCOME_UNKNOWN.to_owned(),
                    error: Some(ErrorInfo {
                        code: ErrorCode::ToolOutcomeUnknown,
                        message: OUTCOME_UNKNOWN.to_owned(),
                    }),
                    view: ToolView::text(OUTCOME_UNKNOWN),
                    attachments: Vec::new(),
                    live_terminal: None,
                    job: None,
                    usage: None,
                },
            })
            .collect()
    }
}
