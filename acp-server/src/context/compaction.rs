//! Compaction: keeping a long conversation inside the model's window, as
//! the seeds' `compaction-basic` and `compaction-tool-result-pruner` do.
//!
//! This module decides; the turn acts ([`crate::turn`] records the events
//! and makes the summary call). Before a model request, when the last
//! request's context (the provider's usage, else an estimate) is over
//! `threshold_ratio` of the window:
//! 1. **prune**: tool results outside the retained window longer than
//!    `threshold_chars` are cut to their head and tail
//!    (`compaction/prune`, no model call); if that is enough, stop;
//! 2. **summarize**: everything before the retained window (the most
//!    recent `retain_ratio` of the window, never splitting a tool call
//!    from its result) is summarized by the model and replaced
//!    (`compaction/summary`); again once if still over.
//!
//! A provider's context-overflow error compacts and retries the step
//! (`max_overflow_retries`), and `/compact` runs step 2 on demand.

use std::sync::Arc;

use dsh_protocol::history::History;
use dsh_protocol::model::{ChatMessage, Message};
use dsh_protocol::ToolCallId;
use serde::Deserialize;

/// The summarization prompt (kept in the repository as text).
pub const SUMMARY_PROMPT: &str = include_str!("../../prompts/compaction.md");

/// `[compaction]` in config.toml (the seed's names).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompactionSettings {
    /// Compact automatically at step boundaries and on overflow.
    pub auto: bool,
    /// The default policy.
    #[serde(flatten)]
    pub policy: Policy,
    /// Per-model overrides (`[[compaction.model_policies]] model = "…"`).
    pub model_policies: Vec<ModelPolicy>,
    /// Deterministic pruning of old tool results.
    pub prune: PruneSettings,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            auto: true,
            policy: Policy::default(),
            model_policies: Vec::new(),
            prune: PruneSettings::default(),
        }
    }
}

/// When and how much to compact.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    /// Compact at this fraction of the context window.
    pub threshold_ratio: f64,
    /// Recent context kept, as a fraction of the window.
    pub retain_ratio: f64,
    /// Recent context kept, in tokens (instead of `retain_ratio`).
    pub retain_tokens: Option<u64>,
    /// The model that writes summaries (default: the session's).
    pub summarization_model: Option<String>,
    /// Generation cap for a summary.
    pub max_tokens: u64,
    /// Extra summaries when still over the threshold.
    pub compaction_retries: u32,
    /// Retries of a step after a context overflow; 0 disables.
    pub max_overflow_retries: u32,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            threshold_ratio: 0.8,
            retain_ratio: 0.16,
            retain_tokens: None,
            summarization_model: None,
            max_tokens: 8192,
            compaction_retries: 1,
            max_overflow_retries: 1,
        }
    }
}

/// A policy for one model: the fields given override the default policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPolicy {
    /// The model id it applies to.
    pub model: String,
    /// See [`Policy`].
    pub threshold_ratio: Option<f64>,
    /// See [`Policy`].
    pub retain_ratio: Option<f64>,
    /// See [`Policy`].
    pub retain_tokens: Option<u64>,
    /// See [`Policy`].
    pub summarization_model: Option<String>,
    /// See [`Policy`].
    pub max_tokens: Option<u64>,
    /// See [`Policy`].
    pub compaction_retries: Option<u32>,
    /// See [`Policy`].
    pub max_overflow_retries: Option<u32>,
}

/// `[compaction.prune]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PruneSettings {
    /// Prune results longer than this many code points.
    pub threshold_chars: usize,
    /// Code points kept from the start.
    pub head_chars: usize,
    /// Code points kept from the end.
    pub tail_chars: usize,
}

impl Default for PruneSettings {
    fn default() -> Self {
        PruneSettings {
            threshold_chars: 8192,
            head_chars: 4096,
            tail_chars: 1024,
        }
    }
}

impl CompactionSettings {
    /// The policy for `model`.
    pub fn policy(&self, model: &str) -> Policy {
        let mut policy = self.policy.clone();
        if let Some(over) = self.model_policies.iter().find(|p| p.model == model) {
            macro_rules! over {
                ($($field:ident),*) => {$(
                    if let Some(value) = over.$field.clone() {
                        policy.$field = value.into();
                    }
                )*};
            }
            over!(
                threshold_ratio,
                retain_ratio,
                max_tokens,
                compaction_retries,
                max_overflow_retries
            );
            if over.retain_tokens.is_some() {
                policy.retain_tokens = over.retain_tokens;
            }
            if over.summarization_model.is_some() {
                policy.summarization_model = over.summarization_model.clone();
            }
        }
        policy
    }

    /// Checks the numbers make sense.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        let policies = std::iter::once(self.policy.clone())
            .chain(self.model_policies.iter().map(|p| self.policy(&p.model)));
        for policy in policies {
            if !(policy.threshold_ratio > 0.0 && policy.threshold_ratio <= 1.0) {
                return Err("[compaction] threshold_ratio must be in (0, 1]".to_owned());
            }
            if !(policy.retain_ratio >= 0.0 && policy.retain_ratio < policy.threshold_ratio) {
                return Err("[compaction] retain_ratio must be in [0, threshold_ratio)".to_owned());
            }
        }
        Ok(())
    }
}

impl Policy {
    /// Tokens over which to compact, for a window.
    pub fn threshold(&self, window: u64) -> u64 {
        (window as f64 * self.threshold_ratio) as u64
    }

    /// Recent tokens to keep, for a window.
    pub fn retain(&self, window: u64) -> u64 {
        self.retain_tokens
            .unwrap_or((window as f64 * self.retain_ratio) as u64)
    }
}

/// The summary half of a plan: which messages go, and the seqs they span.
#[derive(Debug, Clone)]
pub struct Summarize {
    /// The messages the summary replaces (what the summary call reads).
    pub messages: Vec<Arc<Message>>,
    /// First replaced seq.
    pub start: u64,
    /// Last replaced seq.
    pub end: u64,
}

/// Where the retained window starts: the earliest message boundary whose
/// suffix fits in `retain` tokens — a prompt or a model reply (never a
/// tool result, so calls stay with their results), and never inside one
/// event's messages. At least one message goes; `None` when nothing can.
fn split(entries: &[(u64, Arc<Message>)], retain: u64) -> Option<usize> {
    let boundary = |at: usize| {
        at > 0
            && !matches!(entries[at].1.message(), ChatMessage::Tool { .. })
            && entries[at].0 > entries[at - 1].0
    };
    let mut suffix = 0u64;
    let mut best = None;
    for at in (1..entries.len()).rev() {
        suffix += entries[at].1.estimated_tokens();
        if boundary(at) {
            if suffix <= retain || best.is_none() {
                best = Some(at);
            }
            if suffix > retain {
                break;
            }
        }
    }
    best
}

/// The tool results before the retained window worth pruning.
pub fn prunable(history: &History, retain: u64, prune: &PruneSettings) -> Vec<ToolCallId> {
    let entries = history.entries();
    let end = split(entries, retain).unwrap_or(0);
    entries[..end]
        .iter()
        .filter(|(_, message)| {
            matches!(message.message(), ChatMessage::Tool { content, .. }
                if content.len() > prune.threshold_chars && content.chars().count() > prune.threshold_chars)
        })
        .filter_map(|(seq, _)| history.call_of_result(*seq).cloned())
        .collect()
}

/// What a summary would replace, keeping `retain` recent tokens.
pub fn summarize(history: &History, retain: u64) -> Option<Summarize> {
    let entries = history.entries();
    let end = split(entries, retain)?;
    Some(Summarize {
        messages: entries[..end].iter().map(|(_, m)| m.clone()).collect(),
        start: entries[0].0,
        end: entries[end - 1].0,
    })
}

/// The estimated size of a conversation.
pub fn estimate(messages: &[Arc<Message>]) -> u64 {
    messages.iter().map(|m| m.estimated_tokens()).sum()
}

/// The request text that asks for a summary, with the user's focus.
pub fn summary_request(focus: Option<&str>) -> String {
    match focus.map(str::trim).filter(|f| !f.is_empty()) {
        Some(focus) => {
            format!("{SUMMARY_PROMPT}\nThe user asks the summary to focus on: {focus}\n")
        }
        None => SUMMARY_PROMPT.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use dsh_protocol::log::{Event, EventData};
    use dsh_protocol::model::{FinishReason, ToolCallRequest};
    use dsh_protocol::tool::{ToolStatus, ToolView};
    use dsh_protocol::UserContent;

    use super::*;

    fn event(seq: u64, data: EventData) -> Event {
        Event {
            seq,
            time: 0,
            ignorable: false,
            data,
        }
    }

    /// A model reply.
    fn answer(turn: u64, step: u64, text: &str, tool_calls: Vec<ToolCallRequest>) -> EventData {
        let finish = if tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        EventData::AssistantMessage {
            turn,
            step,
            text: text.to_owned(),
            reasoning: String::new(),
            tool_calls,
            usage: None,
            estimated_context: None,
            finish,
            interrupted: false,
            model: String::new(),
        }
    }

    /// Turn 1: prompt, a read with a 40 KB result, reply; turn 2: prompt,
    /// reply.
    fn history() -> History {
        let mut history = History::default();
        let call = ToolCallRequest {
            id: ToolCallId::new("c1"),
            name: "read".to_owned(),
            arguments: "{}".to_owned(),
            provider_id: None,
        };
        let events = [
            EventData::UserMessage {
                turn: 1,
                content: vec![UserContent::text("read it")],
                steered: false,
                source: dsh_protocol::log::MessageSource::User,
            },
            answer(1, 1, "", vec![call]),
            EventData::ToolResult {
                turn: 1,
                call_id: ToolCallId::new("c1"),
                status: ToolStatus::Completed,
                output: "x".repeat(40_000),
                error: None,
                view: ToolView::default(),
                attachments: Vec::new(),
                live_terminal: None,
                job: None,
                usage: None,
            },
            answer(1, 2, "done", Vec::new()),
            EventData::UserMessage {
                turn: 2,
                content: vec![UserContent::text("and now?")],
                steered: false,
                source: dsh_protocol::log::MessageSource::User,
            },
            answer(2, 1, "now this", Vec::new()),
        ];
        for (at, data) in events.into_iter().enumerate() {
            history.apply(&event(at as u64 + 1, data));
        }
        history
    }

    #[test]
    fn the_retained_window_starts_at_a_boundary_and_old_results_are_pruned() {
        let history = history();
        // Retaining 100 tokens keeps the last reply of turn 1 and turn 2.
        let plan = summarize(&history, 100).unwrap();
        assert_eq!((plan.start, plan.end, plan.messages.len()), (1, 3, 3));
        assert_eq!(
            prunable(&history, 100, &PruneSettings::default()),
            [ToolCallId::new("c1")]
        );
        // The 10k-token result does not fit in 9k: it goes with its call,
        // and the window starts at the reply after it.
        let plan = summarize(&history, 9_000).unwrap();
        assert_eq!((plan.end, plan.messages.len()), (3, 3));
        // 11k keeps it: only the first prompt can go, nothing is pruned.
        let plan = summarize(&history, 11_000).unwrap();
        assert_eq!((plan.end, plan.messages.len()), (1, 1));
        assert!(prunable(&history, 11_000, &PruneSettings::default()).is_empty());
    }

    #[test]
    fn a_pruned_result_keeps_its_head_and_tail() {
        let mut history = history();
        history.apply(&event(
            7,
            EventData::CompactionPrune {
                calls: vec![ToolCallId::new("c1")],
                head_chars: 4096,
                tail_chars: 1024,
            },
        ));
        let tool = history
            .messages()
            .into_iter()
            .find_map(|m| match m.message() {
                ChatMessage::Tool { content, .. } => Some(content.clone()),
                _ => None,
            })
            .unwrap();
        assert!(tool.starts_with(&"x".repeat(4096)));
        assert!(tool.ends_with(&"x".repeat(1024)));
        assert!(
            tool.contains("34880 characters of this tool result were removed"),
            "{tool}"
        );
    }
}
