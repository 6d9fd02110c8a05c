//! One step of a turn: a model request built from the session's history and
//! settings, started with retries (each recorded), its stream delivered to
//! the editor as it arrives, and the reply recorded as one
//! `assistant/message`.

use std::collections::{BTreeMap, HashSet};

use dsh_protocol::error::ErrorInfo;
use dsh_protocol::log::{EventData, StopReason};
use dsh_protocol::model::{FinishReason, StreamEvent, ToolCallRequest, Usage};
use dsh_protocol::{ErrorCode, ToolCallId};
use futures::{FutureExt, StreamExt};

use super::{Next, Turn};
use crate::error::AgentError;
use crate::frontend::Delta;
use crate::model::retry::{start_with_retry, Started};
use crate::model::{ModelError, ModelRequest};
use crate::prompt::system_prompt;

/// Events already received that one update may merge.
const MERGE_AT_MOST: usize = 64;

/// The model's reply to one step, assembled from deltas.
#[derive(Default)]
struct Reply {
    /// The id its chunks carry ([`crate::update::message_id`]).
    id: String,
    text: String,
    reasoning: String,
    calls: BTreeMap<usize, ToolCallRequest>,
    usage: Option<Usage>,
}

impl Reply {
    fn tool_delta(
        &mut self,
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: &str,
    ) {
        let call = self.calls.entry(index).or_insert_with(|| ToolCallRequest {
            id: ToolCallId::new(""),
            name: String::new(),
            arguments: String::new(),
            provider_id: None,
        });
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            call.id = ToolCallId::new(id);
        }
        if let Some(name) = name {
            call.name.push_str(&name);
        }
        call.arguments.push_str(arguments);
    }

    /// The reply's calls with ids unique in the session (`used`): editors
    /// key tool calls by id, and models repeat ids (`call_0` every step, or
    /// twice in one reply). A changed id keeps the model's in
    /// `provider_id` for the provider's history.
    fn tool_calls(
        &mut self,
        turn: u64,
        step: u64,
        used: &HashSet<ToolCallId>,
    ) -> Vec<ToolCallRequest> {
        let mut taken: HashSet<String> = HashSet::new();
        std::mem::take(&mut self.calls)
            .into_iter()
            .map(|(index, mut call)| {
                let model_id = std::mem::replace(&mut call.id, ToolCallId::new("")).into_string();
                let base = if model_id.is_empty() {
                    format!("call_{turn}_{step}_{index}")
                } else {
                    model_id.clone()
                };
                let mut id = base.clone();
                let mut copy = 1;
                while used.contains(id.as_str()) || taken.contains(&id) {
                    copy += 1;
                    id = format!("{base}~{copy}");
                }
                taken.insert(id.clone());
                call.provider_id = (!model_id.is_empty() && model_id != id).then_some(model_id);
                call.id = ToolCallId::new(id);
                call
            })
            .collect()
    }
}

impl Reply {
    /// Takes one item of the stream: text and reasoning into the reply and
    /// the unsent deltas, the rest into the reply; the end of the stream
    /// ends the step.
    fn take(
        &mut self,
        next: Option<Result<StreamEvent, ModelError>>,
        unsent: &mut Unsent,
    ) -> Option<StepEnd> {
        match next {
            Some(Ok(StreamEvent::TextDelta(text))) => {
                self.text.push_str(&text);
                unsent.push(text, false, &self.id);
            }
            Some(Ok(StreamEvent::ReasoningDelta(text))) => {
                self.reasoning.push_str(&text);
                unsent.push(text, true, &self.id);
            }
            Some(Ok(StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            })) => self.tool_delta(index, id, name, &arguments),
            Some(Ok(StreamEvent::Usage(usage))) => self.usage = Some(usage),
            Some(Ok(StreamEvent::Finish(reason))) => return Some(StepEnd::Finished(reason)),
            Some(Err(error)) => return Some(StepEnd::Failed(error)),
            None => {
                return Some(StepEnd::Failed(ModelError::new(
                    ErrorCode::ModelStreamClosed,
                    "the model stream ended without finishing; send the prompt again to retry",
                )))
            }
        }
        None
    }
}

/// Deltas received and not yet sent, in the model's order; neighbours of
/// one kind are merged.
#[derive(Default)]
struct Unsent(Vec<Delta>);

impl Unsent {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A text (`thought`: reasoning) delta of message `id`: merged into
    /// the last one when it is of the same kind, so the id is copied once
    /// per run of a kind, not once per chunk.
    fn push(&mut self, text: String, thought: bool, id: &str) {
        match (self.0.last_mut(), thought) {
            (Some(Delta::Message(merged, _)), false) | (Some(Delta::Thought(merged, _)), true) => {
                merged.push_str(&text);
            }
            (_, false) => self.0.push(Delta::Message(text, id.to_owned())),
            (_, true) => self.0.push(Delta::Thought(text, id.to_owned())),
        }
    }

    fn send(&mut self, out: &dyn crate::frontend::Frontend) {
        for delta in self.0.drain(..) {
            out.emit(crate::frontend::Output::Delta(delta));
        }
    }
}

/// How the stream of one step ended.
enum StepEnd {
    Finished(FinishReason),
    Cancelled,
    Failed(ModelError),
}

impl Turn<'_> {
    /// The request for the next model call: settings and history are read
    /// now, so a change applies from the next call.
    async fn request(&self) -> Result<ModelRequest, AgentError> {
        let session = self.session;
        let mcp = session.mcp();
        let locked = session.resident().await?;
        let settings = &locked.state.settings;
        let model = self
            .config
            .choices
            .model(&settings.model)
            .cloned()
            .ok_or_else(|| {
                AgentError::Internal(format!("model {} left the catalog", settings.model))
            })?;
        let mut tools = crate::tools::schemas(self.offer_in(&locked.state));
        if let Some(hub) = &mcp {
            tools.extend(hub.schemas());
        }
        // `[tools] order`: here only, so every request has the same order.
        self.config.tools.arrange(&mut tools);
        Ok(ModelRequest {
            model,
            thought_level: settings.thought_level,
            system: system_prompt(&session.header, settings.mode),
            messages: locked.state.history.messages(),
            tools,
            session_id: session.id.to_string(),
            spool: Some(session.spool()),
        })
    }

    /// One model call and what follows it: the tools it asked for, or the
    /// end of the turn.
    pub(super) async fn step(&self, step: u64) -> Result<Next, AgentError> {
        // MCP tool lists changed by the servers apply to the next call.
        if let Some(hub) = self.session.mcp() {
            hub.refresh(self.cancel).await;
        }
        let request = self.request().await?;
        let (model_id, sent_tokens) = (request.model.id.clone(), request.estimated_tokens());
        // Ready to send: the conversation it carries is not held while it
        // waits for the provider and the reply streams (the history may
        // leave memory meanwhile).
        let request = self.provider.prepare(request).await?;
        let mut retry_log_error = None;
        let started = start_with_retry(
            &self.provider,
            &request,
            self.config.model.retry,
            self.cancel,
            |attempt, delay, error| {
                tracing::info!(attempt, delay_ms = delay.as_millis() as u64, code = %error.code, "retrying model request: {}", error.message);
                let recorded = self.record(EventData::LlmRetry {
                    attempt,
                    delay_ms: delay.as_millis() as u64,
                    error: ErrorInfo {
                        code: error.code,
                        message: error.message.clone(),
                    },
                });
                if let Err(err) = recorded {
                    retry_log_error.get_or_insert(err);
                }
            },
        )
        .await;
        if let Some(err) = retry_log_error {
            return Err(err);
        }
        let mut stream = match started? {
            Started::Stream(stream) => stream,
            Started::Cancelled => return Ok(Next::Stop(StopReason::Cancelled)),
        };
        drop(request);

        let mut reply = Reply {
            id: crate::update::message_id(self.number, step),
            ..Reply::default()
        };
        let mut unsent = Unsent::default();
        // Whether the stream made the turn wait since it last sent: a
        // stream that is always ready would otherwise keep this task
        // running, and what it sent would not reach the editor until the
        // reply ends.
        let waited = std::sync::atomic::AtomicBool::new(true);
        // Deltas go out when the front end lets them (`Frontend::hold`:
        // behind what it was sent before, not past an editor that reads
        // slowly). The hold is awaited alongside the stream, so a stalled
        // editor never keeps the model's stream unread (its idle timer
        // would count the wait); what arrives meanwhile is merged.
        let mut held: Option<futures::future::BoxFuture<'_, ()>> = None;
        let end = loop {
            if !unsent.is_empty() && held.is_none() {
                // Let the writer run first when the stream never made
                // this task wait; then ask (what ran meanwhile may need a
                // fence).
                if !waited.swap(false, std::sync::atomic::Ordering::Relaxed) {
                    tokio::task::yield_now().await;
                }
                match self.frontend.hold() {
                    Some(hold) => held = Some(hold),
                    // Deltas go out as soon as nothing more is ready.
                    None => unsent.send(self.frontend),
                }
            }
            let next = tokio::select! {
                biased;
                () = self.cancel.cancelled() => break StepEnd::Cancelled,
                () = async { if let Some(hold) = held.as_mut() { hold.await } }, if held.is_some() => None,
                next = futures::future::poll_fn(|cx| {
                    let next = stream.poll_next_unpin(cx);
                    if next.is_pending() {
                        waited.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    next
                }) => Some(next),
            };
            let Some(next) = next else {
                // The hold is over: what is unsent may go (next round).
                held = None;
                continue;
            };
            if let Some(end) = reply.take(next, &mut unsent) {
                break end;
            }
            // What has already arrived joins this update (a bounded number
            // of events, so a fast stream still goes out as it comes).
            let mut ended = None;
            for next in std::iter::from_fn(|| stream.next().now_or_never()).take(MERGE_AT_MOST) {
                if let Some(end) = reply.take(next, &mut unsent) {
                    ended = Some(end);
                    break;
                }
            }
            if let Some(end) = ended {
                break end;
            }
        };
        // The rest goes out when the front end lets it (behind what was
        // sent before) — unless the turn is cancelled: a cancel is answered
        // at once, even past an editor that stopped reading.
        if !unsent.is_empty() {
            while let Some(hold) = held.take().or_else(|| self.frontend.hold()) {
                tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => break,
                    () = hold => {}
                }
            }
        }
        unsent.send(self.frontend);
        drop(stream);

        let (finish, interrupted) = match &end {
            StepEnd::Finished(reason) => (reason.clone(), false),
            StepEnd::Cancelled => (FinishReason::Cancelled, true),
            StepEnd::Failed(_) => (FinishReason::Error, true),
        };
        // Tool calls of a cut or truncated reply were never dispatched.
        let tool_calls = match finish {
            FinishReason::ToolCalls | FinishReason::Stop if !interrupted => {
                reply.tool_calls(self.number, step, &self.session.locked().state.call_ids)
            }
            _ => Vec::new(),
        };
        // A provider that reports no usage still gets a context meter.
        let estimated_context = (reply.usage.is_none() && !interrupted)
            .then(|| sent_tokens + ((reply.text.len() + reply.reasoning.len()) / 4) as u64);
        match &end {
            StepEnd::Failed(error) => {
                tracing::debug!(model = %model_id, code = %error.code, "model call failed")
            }
            _ => {
                tracing::debug!(model = %model_id, ?finish, usage = ?reply.usage, ?estimated_context, "model reply")
            }
        }
        self.record(EventData::AssistantMessage {
            turn: self.number,
            step,
            text: std::mem::take(&mut reply.text),
            reasoning: std::mem::take(&mut reply.reasoning),
            tool_calls: tool_calls.clone(),
            usage: reply.usage,
            estimated_context,
            finish: finish.clone(),
            interrupted,
            model: model_id,
        })?;
        match end {
            StepEnd::Cancelled => return Ok(Next::Stop(StopReason::Cancelled)),
            StepEnd::Failed(error) => return Err(error.into()),
            StepEnd::Finished(_) => {}
        }
        match finish {
            FinishReason::MaxTokens => return Ok(Next::Stop(StopReason::MaxTokens)),
            FinishReason::ContentFilter => return Ok(Next::Stop(StopReason::Refusal)),
            _ if tool_calls.is_empty() => return Ok(Next::Stop(StopReason::EndTurn)),
            _ => {}
        }
        if self.run_tools(&tool_calls).await? {
            return Ok(Next::Stop(StopReason::Cancelled));
        }
        Ok(Next::Continue)
    }

    /// One model call whose text is the answer (not streamed to the
    /// editor), with its usage. `None` when the turn is cancelled.
    pub(super) async fn generate(
        &self,
        request: ModelRequest,
    ) -> Result<Option<(String, Option<dsh_protocol::model::Usage>)>, ModelError> {
        generate(
            &self.provider,
            self.config.model.retry,
            self.cancel,
            request,
        )
        .await
    }
}

/// One model call whose text is the answer (not streamed to the editor),
/// with its usage, retried by `retry`. `None` when `cancel` fires.
pub(super) async fn generate(
    provider: &crate::model::Provider,
    retry: crate::model::retry::RetryPolicy,
    cancel: &tokio_util::sync::CancellationToken,
    request: ModelRequest,
) -> Result<Option<(String, Option<dsh_protocol::model::Usage>)>, ModelError> {
    let request = provider.prepare(request).await?;
    let started = start_with_retry(provider, &request, retry, cancel, |attempt, delay, error| {
        tracing::debug!(attempt, delay_ms = delay.as_millis() as u64, code = %error.code, "retrying a side model request");
    })
    .await?;
    let Started::Stream(mut stream) = started else {
        return Ok(None);
    };
    let (mut text, mut usage) = (String::new(), None);
    loop {
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(None),
            next = stream.next() => next,
        };
        match next {
            Some(Ok(StreamEvent::TextDelta(delta))) => text.push_str(&delta),
            Some(Ok(StreamEvent::Usage(used))) => usage = Some(used),
            Some(Ok(StreamEvent::Finish(_))) => return Ok(Some((text, usage))),
            Some(Ok(_)) => {}
            Some(Err(error)) => return Err(error),
            None => {
                return Err(ModelError::new(
                    ErrorCode::ModelStreamClosed,
                    "the summary stream ended without finishing",
                ))
            }
        }
    }
}
