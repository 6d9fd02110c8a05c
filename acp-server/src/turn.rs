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
use dsh_protocol::tool::{ToolKind, ToolStatus, ToolView};
use dsh_protocol::{ErrorCode, UserContent};
use futures::StreamExt;

use std::path::{Path, PathBuf};

use dsh_protocol::log::PermissionRule;

use crate::agent::{Agent, AgentUpdate, Session, StopReason, TurnTicket};
use crate::client::{Frontend, PermissionAnswer, PermissionAsk};
use crate::error::AgentError;
use crate::model::retry::{start_with_retry, Started};
use crate::model::{ModelError, ModelRequest};
use crate::permission::{self, Decision};
use crate::prompt::system_prompt;
use crate::tools::{self, Outcome, ToolEnv};

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
            provider_id: None,
        });
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            call.id = id;
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
        used: &std::collections::HashSet<String>,
    ) -> Vec<ToolCallRequest> {
        let mut taken = std::collections::HashSet::new();
        std::mem::take(&mut self.calls)
            .into_iter()
            .map(|(index, mut call)| {
                let model_id = std::mem::take(&mut call.id);
                let base = if model_id.is_empty() {
                    format!("call_{turn}_{step}_{index}")
                } else {
                    model_id.clone()
                };
                let mut id = base.clone();
                let mut copy = 1;
                while used.contains(&id) || taken.contains(&id) {
                    copy += 1;
                    id = format!("{base}~{copy}");
                }
                taken.insert(id.clone());
                call.provider_id = (!model_id.is_empty() && model_id != id).then_some(model_id);
                call.id = id;
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
        sink: &dyn Frontend,
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
        // A panic in the turn (a bug) fails this turn, is logged like any
        // other failure, and leaves the session usable.
        let outcome = {
            use futures::FutureExt as _;
            std::panic::AssertUnwindSafe(self.run_steps(&ticket, turn, sink))
                .catch_unwind()
                .await
                .unwrap_or_else(|payload| {
                    let detail = format!(
                        "session {} turn {turn}: {}",
                        session.id,
                        AgentError::panic_message(payload.as_ref())
                    );
                    Err(AgentError::bug("turn", &detail))
                })
        };
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
        sink: &dyn Frontend,
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
            #[cfg(debug_assertions)]
            injected_panic(session);
            // MCP tool lists changed by the servers apply to the next call.
            if let Some(hub) = session.mcp() {
                hub.refresh().await;
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
                    tools: {
                        let mut schemas = tools::schemas();
                        if let Some(hub) = session.mcp() {
                            schemas.extend(hub.schemas());
                        }
                        schemas
                    },
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
                    reply.tool_calls(turn, step, &session.state().call_ids)
                }
                _ => Vec::new(),
            };
            // A provider that reports no usage still gets a context meter.
            let estimated_context = (reply.usage.is_none() && !interrupted).then(|| {
                request.estimated_tokens() + ((reply.text.len() + reply.reasoning.len()) / 4) as u64
            });
            match &end {
                StepEnd::Failed(error) => {
                    tracing::debug!(model = %request.model.id, code = %error.code, "model call failed")
                }
                _ => {
                    tracing::debug!(model = %request.model.id, ?finish, usage = ?reply.usage, ?estimated_context, "model reply")
                }
            }
            session.append(EventData::AssistantMessage {
                turn,
                step,
                text: std::mem::take(&mut reply.text),
                reasoning: std::mem::take(&mut reply.reasoning),
                tool_calls: tool_calls.clone(),
                usage: reply.usage,
                estimated_context,
                finish: finish.clone(),
                interrupted,
                model: request.model.id.clone(),
            })?;
            if let Some(used) = reply
                .usage
                .map(|usage| usage.context_tokens())
                .or(estimated_context)
            {
                sink.send(AgentUpdate::Usage {
                    used,
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
            if self.run_tools(ticket, turn, &tool_calls, sink).await? {
                return Ok(StopReason::Cancelled);
            }
        }
        Ok(StopReason::MaxTurnRequests)
    }

    /// Runs the model's tool calls through the pipeline: log `tool/call`,
    /// present it (pending), ask the permission policy (and the user when it
    /// says ask), execute, log `tool/result`, update the editor. Runs of
    /// parallel-safe calls the policy allows without asking execute together
    /// (at most 4 at once), their results logged and shown in model order.
    /// Returns true when the turn was cancelled.
    async fn run_tools(
        &self,
        ticket: &TurnTicket,
        turn: u64,
        calls: &[ToolCallRequest],
        frontend: &dyn Frontend,
    ) -> Result<bool, AgentError> {
        let session = &ticket.session;
        let cwd = PathBuf::from(&session.header.cwd);
        let plan_env = tools::PlanEnv {
            cwd: &cwd,
            roots: &session.roots,
            lsp: &self.config.lsp,
        };
        let mut batch: Vec<(&ToolCallRequest, tools::Planned)> = Vec::new();
        for call in calls {
            // A call that never runs is still logged and answered, so the
            // history stays valid and the editor sees why.
            let refused = if ticket.cancel.is_cancelled() {
                Err(Outcome::failed(
                    ErrorCode::ToolAborted,
                    "Not run: the user cancelled the turn.",
                ))
            } else {
                match session.mcp().and_then(|hub| hub.tool(&call.name)) {
                    Some(tool) => Ok(tools::plan_mcp(tool, &call.arguments)),
                    None => {
                        tools::plan(&call.name, &call.arguments, &plan_env).map_err(Outcome::from)
                    }
                }
            };
            let planned = match refused {
                Ok(planned) => planned,
                Err(outcome) => {
                    self.flush_batch(ticket, turn, &cwd, &mut batch, frontend)
                        .await?;
                    self.log_call(
                        session,
                        turn,
                        call,
                        tools::fallback_view(&call.name),
                        frontend,
                    )?;
                    self.log_result(session, turn, call, outcome, frontend)?;
                    continue;
                }
            };
            // The mode and rules are read per call: a change applies to the
            // very next one.
            let decision = session.decide(&self.config, &planned.name, &planned.access);
            if planned.parallel && decision == Decision::Allow {
                self.log_call(session, turn, call, planned.view.clone(), frontend)?;
                batch.push((call, planned));
                continue;
            }
            self.flush_batch(ticket, turn, &cwd, &mut batch, frontend)
                .await?;
            self.log_call(session, turn, call, planned.view.clone(), frontend)?;
            let outcome = match decision {
                Decision::Allow => Some(self.execute(ticket, &cwd, call, &planned, frontend).await),
                Decision::Deny(reason) => {
                    Some(Outcome::failed(ErrorCode::PermissionDenied, reason))
                }
                Decision::Ask(_) => match self.ask(ticket, call, &planned, frontend).await? {
                    Some(refusal) => Some(refusal),
                    None => Some(self.execute(ticket, &cwd, call, &planned, frontend).await),
                },
            };
            if let Some(outcome) = outcome {
                self.log_result(session, turn, call, outcome, frontend)?;
            }
        }
        self.flush_batch(ticket, turn, &cwd, &mut batch, frontend)
            .await?;
        Ok(ticket.cancel.is_cancelled())
    }

    async fn flush_batch(
        &self,
        ticket: &TurnTicket,
        turn: u64,
        cwd: &Path,
        batch: &mut Vec<(&ToolCallRequest, tools::Planned)>,
        frontend: &dyn Frontend,
    ) -> Result<(), AgentError> {
        if batch.is_empty() {
            return Ok(());
        }
        let items = std::mem::take(batch);
        let runs: Vec<futures::future::BoxFuture<'_, Outcome>> = items
            .iter()
            .map(|(call, planned)| {
                Box::pin(self.execute(ticket, cwd, call, planned, frontend)) as _
            })
            .collect();
        let mut results = futures::stream::iter(runs).buffered(4);
        let mut index = 0;
        while let Some(outcome) = results.next().await {
            self.log_result(&ticket.session, turn, items[index].0, outcome, frontend)?;
            index += 1;
        }
        Ok(())
    }

    /// Asks the user. `Ok(None)` means run it; `Ok(Some(outcome))` is the
    /// refusal to record. Everything but an allow denies (fail closed), and
    /// an allow is checked against the policy again: the mode and rules at
    /// the moment of the answer decide (a switch to read-only while the
    /// prompt was open voids it).
    async fn ask(
        &self,
        ticket: &TurnTicket,
        call: &ToolCallRequest,
        planned: &tools::Planned,
        frontend: &dyn Frontend,
    ) -> Result<Option<Outcome>, AgentError> {
        let session = &ticket.session;
        let choices = permission::choices(&planned.access, &session.policy(&self.config));
        let question = PermissionAsk {
            call_id: call.id.clone(),
            title: planned.view.title.clone(),
            kind: planned.view.kind.unwrap_or(ToolKind::Other),
            raw_input: serde_json::from_str(&call.arguments)
                .unwrap_or(serde_json::Value::String(call.arguments.clone())),
            locations: planned.view.locations.clone(),
            content: planned.view.content.clone(),
            choices: choices.clone(),
        };
        let answer = tokio::select! {
            biased;
            () = ticket.cancel.cancelled() => PermissionAnswer::Cancelled,
            answer = frontend.request_permission(question) => answer,
        };
        session.append(EventData::PermissionDecision {
            call_id: call.id.clone(),
            outcome: answer.as_str().to_owned(),
        })?;
        let remember = |allow: bool| -> Result<(), AgentError> {
            // Only what the prompt offered to remember is remembered.
            if let Some(scope) =
                permission::rule_scope(&planned.access, &session.policy(&self.config))
            {
                session.append(EventData::PermissionRule(PermissionRule {
                    tool: planned.name.clone(),
                    scope,
                    allow,
                }))?;
            }
            Ok(())
        };
        Ok(match answer {
            PermissionAnswer::AllowOnce | PermissionAnswer::AllowAlways => {
                // Starting a workspace program is allowed for the session
                // (it keeps running): there is no "once" for it.
                if answer == PermissionAnswer::AllowAlways || !choices.once {
                    remember(true)?;
                }
                match session.decide(&self.config, &planned.name, &planned.access) {
                    Decision::Deny(reason) => {
                        Some(Outcome::failed(ErrorCode::PermissionDenied, reason))
                    }
                    Decision::Allow | Decision::Ask(_) => None,
                }
            }
            PermissionAnswer::RejectOnce | PermissionAnswer::RejectAlways => {
                if answer == PermissionAnswer::RejectAlways {
                    remember(false)?;
                }
                Some(Outcome::failed(
                    ErrorCode::PermissionRejected,
                    "The user rejected this tool call. Do not retry it or do the same thing another way; ask the user how to proceed if it is still needed.",
                ))
            }
            PermissionAnswer::Cancelled => {
                ticket.cancel.cancel();
                Some(Outcome::failed(ErrorCode::PermissionCancelled, "The permission prompt was cancelled, so the call did not run and the turn was cancelled."))
            }
            PermissionAnswer::Unavailable => Some(Outcome::failed(
                ErrorCode::PermissionUnavailable,
                "Permission could not be requested (the editor did not answer), so the call was denied. Do not retry it another way.",
            )),
        })
    }

    async fn execute(
        &self,
        ticket: &TurnTicket,
        cwd: &Path,
        call: &ToolCallRequest,
        planned: &tools::Planned,
        frontend: &dyn Frontend,
    ) -> Outcome {
        let session = &ticket.session;
        frontend.send(AgentUpdate::ToolCallUpdate {
            call_id: call.id.clone(),
            status: ToolStatus::InProgress,
            view: ToolView::default(),
        });
        let env = ToolEnv {
            cwd,
            roots: &session.roots,
            frontend,
            cancel: &ticket.cancel,
            spill_dir: &session.spill_dir,
            call_id: &call.id,
            mcp: session.mcp(),
            lsp: &|| session.bridge(&self.config),
            spawner: &self.config.spawner,
        };
        // `bash` handles cancellation itself (it kills its process group and
        // reports what ran); other tools are abandoned at once.
        let stops_itself = planned.name == "bash";
        let mut outcome = tokio::select! {
            biased;
            outcome = tools::run(planned, &env) => outcome,
            () = ticket.cancel.cancelled(), if !stops_itself => {
                Outcome::failed(ErrorCode::ToolAborted, "Cancelled by the user while it ran; its effect is unknown.")
            }
        };
        if outcome.error.is_none() && matches!(planned.name.as_str(), "edit" | "write") {
            self.append_new_errors(session, planned, &mut outcome).await;
        }
        outcome
    }

    /// After an edit, a language server already running for the file is
    /// asked for fresh diagnostics (bounded wait); new errors are appended so
    /// the model sees what it broke.
    async fn append_new_errors(
        &self,
        session: &Session,
        planned: &tools::Planned,
        outcome: &mut Outcome,
    ) {
        let (Some(bridge), permission::Access::Write(paths)) =
            (session.existing_bridge(), &planned.access)
        else {
            return;
        };
        let Some(path) = paths.first() else { return };
        let new_text = outcome
            .view
            .content
            .iter()
            .find_map(|content| match content {
                dsh_protocol::tool::ToolContent::Diff(diff) => Some(diff.new_text.clone()),
                _ => None,
            });
        let Some(new_text) = new_text else { return };
        let Some((server, diagnostics)) = bridge.diagnostics_if_running(path, &new_text).await
        else {
            return;
        };
        let errors: Vec<_> = diagnostics
            .iter()
            .filter(|d| d.severity == "error")
            .collect();
        if errors.is_empty() {
            return;
        }
        outcome.output.push_str(&format!(
            "\n\n{server} now reports {} error(s) in this file:\n",
            errors.len()
        ));
        for error in errors.iter().take(20) {
            outcome.output.push_str(&format!(
                "  {}:{}  {}\n",
                error.location.line + 1,
                error.location.character + 1,
                error.message
            ));
        }
        if errors.len() > 20 {
            outcome
                .output
                .push_str(&format!("  ({} more)\n", errors.len() - 20));
        }
    }

    fn log_call(
        &self,
        session: &Session,
        turn: u64,
        call: &ToolCallRequest,
        view: ToolView,
        frontend: &dyn Frontend,
    ) -> Result<(), AgentError> {
        session.append(EventData::ToolCall {
            turn,
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            view: view.clone(),
        })?;
        frontend.send(AgentUpdate::ToolCall {
            call_id: call.id.clone(),
            arguments: call.arguments.clone(),
            view,
            status: ToolStatus::Pending,
        });
        Ok(())
    }

    fn log_result(
        &self,
        session: &Session,
        turn: u64,
        call: &ToolCallRequest,
        outcome: Outcome,
        frontend: &dyn Frontend,
    ) -> Result<(), AgentError> {
        if let Some(entries) = &outcome.plan {
            session.append(EventData::Plan {
                entries: entries.clone(),
            })?;
            frontend.send(AgentUpdate::Plan(entries.clone()));
        }
        let status = if outcome.error.is_some() {
            ToolStatus::Failed
        } else {
            ToolStatus::Completed
        };
        session.append(EventData::ToolResult {
            turn,
            call_id: call.id.clone(),
            status,
            output: outcome.output,
            error: outcome.error,
            view: outcome.view.clone(),
            attachments: outcome.attachments,
        })?;
        frontend.send(AgentUpdate::ToolCallUpdate {
            call_id: call.id.clone(),
            status,
            view: outcome.view,
        });
        Ok(())
    }
}

/// Debug builds only, for the fault tests: with `DSH_TEST_FAULTS=1`, a turn
/// whose last user message contains `dsh-test-panic` panics in its step.
#[cfg(debug_assertions)]
fn injected_panic(session: &Session) {
    if std::env::var_os("DSH_TEST_FAULTS").is_none() {
        return;
    }
    let state = session.state();
    let asked = state
        .events
        .iter()
        .rev()
        .find_map(|event| match &event.data {
            EventData::UserMessage { content, .. } => Some(content.iter().any(
                |c| matches!(c, UserContent::Text { text } if text.contains("dsh-test-panic")),
            )),
            _ => None,
        });
    if asked == Some(true) {
        drop(state);
        panic!("injected test panic");
    }
}
