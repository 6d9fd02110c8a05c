//! The turn's side of [`crate::context::compaction`]: compaction before a
//! model call, after an overflow, and for `/compact`.

use std::sync::Arc;

use dsh_protocol::log::EventData;
use dsh_protocol::model::{ChatMessage, Message, ThoughtLevel};
use dsh_protocol::{ToolCallId, UserContent};

use super::Turn;
use crate::context::compaction;
use crate::error::AgentError;
use crate::model::ModelRequest;

/// Why a compaction runs (logged with its start).
pub(super) use dsh_protocol::log::CompactionReason as Why;

impl Turn<'_> {
    /// Before a model call: compacts when the context is over the
    /// threshold (pruning first, then summaries).
    pub(super) async fn compact_if_needed(&self) -> Result<(), AgentError> {
        if !self.config.compaction.auto {
            return Ok(());
        }
        let (policy, window, used) = self.pressure().await?;
        if used <= policy.threshold(window) {
            return Ok(());
        }
        tracing::info!(used, window, "context over the compaction threshold");
        self.compact(Why::Pressure, None).await.map(drop)
    }

    /// The policy for the session's model, its window, and the tokens in
    /// the context now (the last call's, else an estimate).
    async fn pressure(&self) -> Result<(compaction::Policy, u64, u64), AgentError> {
        let locked = self.session.resident().await?;
        let settings = &locked.state.settings;
        let policy = self.config.compaction.policy(&settings.model);
        let window = settings.context_window(&self.config.choices);
        let used = locked
            .state
            .last_context
            .unwrap_or_else(|| locked.state.history.estimated_tokens());
        Ok((policy, window, used))
    }

    /// Compacts the conversation: prunes old tool results (unless asked),
    /// then summarizes what precedes the retained window — again while it
    /// stays over the threshold, up to the policy's retries. Whether the
    /// conversation got shorter.
    pub(super) async fn compact(&self, why: Why, focus: Option<&str>) -> Result<bool, AgentError> {
        let (policy, window, _) = self.pressure().await?;
        let retain = policy.retain(window);
        let mut changed = false;
        if why != Why::Asked {
            let calls = {
                let locked = self.session.resident().await?;
                compaction::prunable(&locked.state.history, retain, &self.config.compaction.prune)
            };
            if !calls.is_empty() {
                let prune = &self.config.compaction.prune;
                self.record(EventData::CompactionPrune {
                    calls,
                    head_chars: prune.head_chars,
                    tail_chars: prune.tail_chars,
                })?;
                changed = true;
                let (_, _, used) = self.pressure().await?;
                if why == Why::Pressure && used <= policy.threshold(window) {
                    return Ok(true);
                }
            }
        }
        for _ in 0..=policy.compaction_retries {
            if !self.summarize(why, &policy, retain, focus).await? {
                break;
            }
            changed = true;
            let (_, _, used) = self.pressure().await?;
            if why == Why::Asked || used <= policy.threshold(window) {
                break;
            }
        }
        Ok(changed)
    }

    /// One summary, shown as a "Compact conversation" tool call: its start
    /// is recorded, then its summary or why it replaced nothing (nothing to
    /// summarize, a cancel, a failed call). Whether a summary was recorded.
    async fn summarize(
        &self,
        why: Why,
        policy: &compaction::Policy,
        retain: u64,
        focus: Option<&str>,
    ) -> Result<bool, AgentError> {
        let (plan, before, model) = {
            let locked = self.session.resident().await?;
            let history = &locked.state.history;
            (
                compaction::summarize(history, retain),
                history.estimated_tokens(),
                locked.state.settings.model.clone(),
            )
        };
        let call_id = ToolCallId::new(format!("compact_{}", uuid::Uuid::new_v4().simple()));
        self.record(EventData::CompactionStart {
            call_id: call_id.clone(),
            reason: why,
        })?;
        let Some(mut plan) = plan else {
            self.compaction_failed(
                &call_id,
                "Nothing to compact yet: the conversation is already short.",
            )?;
            return Ok(false);
        };
        let model_id = policy.summarization_model.clone().unwrap_or(model);
        let Some(mut model) = self.config.choices.model(&model_id).cloned() else {
            self.compaction_failed(
                &call_id,
                &format!("The summarization model {model_id} is not in the catalog."),
            )?;
            return Ok(false);
        };
        model.max_tokens = Some(policy.max_tokens);
        // What the summary replaces, measured now: the request takes the
        // messages (and lets them go once it is ready, so the history may
        // leave memory while the summary streams).
        let (replaced, count) = (compaction::estimate(&plan.messages), plan.messages.len());
        let mut messages = std::mem::take(&mut plan.messages);
        messages.push(Arc::new(Message::new(ChatMessage::User(vec![
            UserContent::text(compaction::summary_request(focus)),
        ]))));
        let request = ModelRequest {
            model,
            thought_level: ThoughtLevel::Off,
            system: "You write precise handover summaries of coding sessions.".to_owned(),
            messages,
            tools: Vec::new(),
            session_id: self.session.id.to_string(),
            spool: Some(self.session.spool()),
        };
        let summary = match self.generate(request).await {
            Ok(Some((summary, _))) if !summary.trim().is_empty() => summary,
            Ok(Some(_)) => {
                self.compaction_failed(
                    &call_id,
                    "The model returned an empty summary; nothing was replaced.",
                )?;
                return Ok(false);
            }
            Ok(None) => {
                self.compaction_failed(&call_id, "Cancelled; nothing was replaced.")?;
                return Ok(false);
            }
            Err(error) => {
                tracing::warn!(code = %error.code, "summary call failed");
                self.compaction_failed(
                    &call_id,
                    &format!("The summary call failed: {}", error.message),
                )?;
                return Ok(false);
            }
        };
        let after = before.saturating_sub(replaced) + (summary.len() / 4) as u64;
        self.record(EventData::CompactionSummary {
            start: plan.start,
            end: plan.end,
            summary,
            call_id: Some(call_id),
            messages: count as u64,
            tokens_before: before,
            tokens_after: after,
        })?;
        Ok(true)
    }

    /// Records that the compaction `call_id` replaced nothing, and why.
    fn compaction_failed(&self, call_id: &ToolCallId, why: &str) -> Result<(), AgentError> {
        self.record(EventData::CompactionFailed {
            call_id: call_id.clone(),
            message: why.to_owned(),
        })
        .map(drop)
    }
}
