//! The turn loop: prompt → model → (tools) → model … until the model stops.
//!
//! Every step is logged before it is shown: the user prompt and `turn/start`
//! first, each model reply as one `assistant/message` (the delivered prefix,
//! marked interrupted, when the stream is cut), tool calls and results, and
//! `turn/end` last. Streaming deltas go to the editor as they arrive.

use std::collections::BTreeMap;

use dsh_protocol::error::ErrorInfo;
use dsh_protocol::log::{derive_history, EventData, TurnStop};
use dsh_protocol::model::{FinishReason, StreamEvent, ToolCallRequest, Usage};
use dsh_protocol::tool::{ToolContent, ToolKind, ToolStatus, ToolView};
use dsh_protocol::{ErrorCode, UserContent};
use futures::StreamExt;

use crate::agent::{Agent, AgentUpdate, StopReason, TurnTicket, UpdateSink};
use crate::error::AgentError;
use crate::model::retry::{start_with_retry, Started};
use crate::model::{ModelError, ModelRequest};
use crate::prompt::system_prompt;

/// The model's reply to one step, assembled from deltas.
#[derive(Default)]
struct Reply {
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
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
        });
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        if let Some(name) = name {
            call.name.push_str(&name);
        }
        call.arguments.push_str(arguments);
    }

    fn tool_calls(&mut self, turn: u64, step: u64) -> Vec<ToolCallRequest> {
        std::mem::take(&mut self.calls)
            .into_iter()
            .map(|(index, mut call)| {
                if call.id.is_empty() {
                    call.id = format!("call_{turn}_{step}_{index}");
                }
                call
            })
            .collect()
    }
}

/// How one model step ended.
enum StepEnd {
    Finished(FinishReason),
    Cancelled,
    Failed(ModelError),
}

impl Agent {
    /// Runs one prompt to completion. The ticket's token cancels it.
    ///
    /// # Errors
    /// Invalid content, a log write failure, or a model failure (after the
    /// partial reply was logged and `turn/end` recorded).
    pub async fn prompt(
        &self,
        ticket: TurnTicket,
        content: Vec<UserContent>,
        sink: &dyn UpdateSink,
    ) -> Result<StopReason, AgentError> {
        self.check_prompt(&content)?;
        let session = ticket.session.clone();
        let (turn, first) = {
            let state = session.state();
            (state.turns + 1, state.title.is_none())
        };
        if first {
            if let Some(title) = UserContent::title_of(&content) {
                session.append(EventData::Title {
                    title: title.clone(),
                })?;
                sink.send(AgentUpdate::Title(title));
            }
        }
        session.append(EventData::UserMessage { turn, content })?;
        session.append(EventData::TurnStart { turn })?;
        let outcome = self.run_steps(&ticket, turn, sink).await;
        let (stop, error) = match &outcome {
            Ok(StopReason::EndTurn) => (TurnStop::EndTurn, None),
            Ok(StopReason::MaxTokens) => (TurnStop::MaxTokens, None),
            Ok(StopReason::MaxTurnRequests) => (TurnStop::MaxTurnRequests, None),
            Ok(StopReason::Refusal) => (TurnStop::Refusal, None),
            Ok(StopReason::Cancelled) => (TurnStop::Cancelled, None),
            Err(error) => (
                TurnStop::Error,
                Some(ErrorInfo {
                    code: error.code(),
                    message: error.to_string(),
                }),
            ),
        };
        let logged = session.append(EventData::TurnEnd { turn, stop, error });
        session.sync();
        let stop = outcome?;
        logged?;
        Ok(stop)
    }

    async fn run_steps(
        &self,
        ticket: &TurnTicket,
        turn: u64,
        sink: &dyn UpdateSink,
    ) -> Result<StopReason, AgentError> {
        let session = &ticket.session;
        let provider = self
            .provider
            .clone()
            .ok_or_else(|| AgentError::Internal("no model provider".to_owned()))?;
        for step in 1..=self.config.max_steps {
            if ticket.cancel.is_cancelled() {
                return Ok(StopReason::Cancelled);
            }
            // Settings are read per step, so a change applies to the next call.
            let request = {
                let state = session.state();
                let model = self.config.model(&state.model).cloned().ok_or_else(|| {
                    AgentError::Internal(format!("model {} left the catalog", state.model))
                })?;
                ModelRequest {
                    model,
                    thought_level: state.thought_level,
                    system: system_prompt(&session.header),
                    messages: derive_history(&state.events),
                    tools: Vec::new(),
                    session_id: session.id.clone(),
                }
            };
            let mut retry_log_error = None;
            let started = start_with_retry(
                &provider,
                &request,
                self.config.retry,
                &ticket.cancel,
                |attempt, delay, error| {
                    let logged = session.append(EventData::LlmRetry {
                        attempt,
                        delay_ms: delay.as_millis() as u64,
                        error: ErrorInfo {
                            code: error.code,
                            message: error.message.clone(),
                        },
                    });
                    if let Err(err) = logged {
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
                Started::Cancelled => return Ok(StopReason::Cancelled),
            };

            let mut reply = Reply::default();
            let end = loop {
                let next = tokio::select! {
                    biased;
                    () = ticket.cancel.cancelled() => break StepEnd::Cancelled,
                    next = stream.next() => next,
                };
                match next {
                    Some(Ok(StreamEvent::TextDelta(text))) => {
                        reply.text.push_str(&text);
                        sink.send(AgentUpdate::MessageChunk(text));
                    }
                    Some(Ok(StreamEvent::ReasoningDelta(text))) => {
                        reply.reasoning.push_str(&text);
                        sink.send(AgentUpdate::ThoughtChunk(text));
                    }
                    Some(Ok(StreamEvent::ToolCallDelta {
                        index,
                        id,
                        name,
                        arguments,
                    })) => {
                        reply.tool_delta(index, id, name, &arguments);
                    }
                    Some(Ok(StreamEvent::Usage(usage))) => reply.usage = Some(usage),
                    Some(Ok(StreamEvent::Finish(reason))) => break StepEnd::Finished(reason),
                    Some(Err(error)) => break StepEnd::Failed(error),
                    None => break StepEnd::Failed(ModelError::new(
                        ErrorCode::ModelStreamClosed,
                        "the model stream ended without finishing; send the prompt again to retry",
                    )),
                }
            };
            drop(stream);

            let (finish, interrupted) = match &end {
                StepEnd::Finished(reason) => (reason.clone(), false),
                StepEnd::Cancelled => (FinishReason::Cancelled, true),
                StepEnd::Failed(_) => (FinishReason::Error, true),
            };
            // Tool calls of a cut or truncated reply were never dispatched.
            let tool_calls = match finish {
                FinishReason::ToolCalls | FinishReason::Stop if !interrupted => {
                    reply.tool_calls(turn, step)
                }
                _ => Vec::new(),
            };
            session.append(EventData::AssistantMessage {
                turn,
                step,
                text: std::mem::take(&mut reply.text),
                reasoning: std::mem::take(&mut reply.reasoning),
                tool_calls: tool_calls.clone(),
                usage: reply.usage,
                finish: finish.clone(),
                interrupted,
                model: request.model.id.clone(),
            })?;
            if let Some(usage) = reply.usage {
                sink.send(AgentUpdate::Usage {
                    used: usage.context_tokens(),
                    size: request.model.context_window,
                });
            }
            match end {
                StepEnd::Cancelled => return Ok(StopReason::Cancelled),
                StepEnd::Failed(error) => return Err(error.into()),
                StepEnd::Finished(_) => {}
            }
            match finish {
                FinishReason::MaxTokens => return Ok(StopReason::MaxTokens),
                FinishReason::ContentFilter => return Ok(StopReason::Refusal),
                _ if tool_calls.is_empty() => return Ok(StopReason::EndTurn),
                _ => {}
            }
            if self.run_tools(ticket, turn, &tool_calls, sink)? {
                return Ok(StopReason::Cancelled);
            }
        }
        Ok(StopReason::MaxTurnRequests)
    }

    /// Answers the model's tool calls. No tools are registered yet, so every
    /// call is an unknown-tool error the model sees (never a failed turn).
    /// Returns true when the turn was cancelled.
    fn run_tools(
        &self,
        ticket: &TurnTicket,
        turn: u64,
        calls: &[ToolCallRequest],
        sink: &dyn UpdateSink,
    ) -> Result<bool, AgentError> {
        let session = &ticket.session;
        for call in calls {
            let view = ToolView {
                title: call.name.clone(),
                kind: Some(ToolKind::Other),
                ..ToolView::default()
            };
            session.append(EventData::ToolCall {
                turn,
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                view: view.clone(),
            })?;
            sink.send(AgentUpdate::ToolCall {
                call_id: call.id.clone(),
                arguments: call.arguments.clone(),
                view,
                status: ToolStatus::Pending,
            });
            let output = format!("Error: unknown tool {:?}. No tools are available in this session; answer without tools.", call.name);
            let view = ToolView {
                content: vec![ToolContent::Text {
                    text: output.clone(),
                }],
                ..ToolView::default()
            };
            session.append(EventData::ToolResult {
                turn,
                call_id: call.id.clone(),
                status: ToolStatus::Failed,
                output: output.clone(),
                error: Some(ErrorInfo {
                    code: ErrorCode::UnknownTool,
                    message: output,
                }),
                view: view.clone(),
            })?;
            sink.send(AgentUpdate::ToolCallUpdate {
                call_id: call.id.clone(),
                status: ToolStatus::Failed,
                view,
            });
        }
        Ok(ticket.cancel.is_cancelled())
    }
}
