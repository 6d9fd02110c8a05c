//! The core's [`Frontend`] over ACP for one session: updates become
//! `session/update` notifications, and permission prompts, the model's
//! questions ([`super::questions`]), file reads and writes and terminals
//! become the client requests — only those the client advertised. An error the editor returns keeps its `data` (acpx says why
//! a write was denied there).

use std::path::Path;

use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, KillTerminalRequest, PermissionOption, PermissionOptionKind,
    ReadTextFileRequest, ReleaseTerminalRequest, RequestPermissionOutcome,
    RequestPermissionRequest, SessionId, SessionNotification, Terminal, TerminalOutputRequest,
    ToolCallContent, ToolCallUpdate, ToolCallUpdateFields, WaitForTerminalExitRequest,
    WriteTextFileRequest,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::Client;
use futures::future::BoxFuture;

use super::convert;
use crate::frontend::{
    Ask, ClientCaps, CommandLive, Frontend, Output, SubagentEvent, TerminalCommand, TerminalRun,
    Transient,
};
use crate::permission::{Answer, Hint};
use crate::update::AgentUpdate;
use serde_json::json;

/// Sends a session's updates and serves the core's requests to the editor.
pub(super) struct AcpSink {
    pub(super) cx: ConnectionTo<Client>,
    pub(super) session_id: SessionId,
    pub(super) caps: ClientCaps,
    pub(super) backlog: std::sync::Arc<super::transport::Backlog>,
    /// Commands shown live in Zed's terminal convention, by call: the
    /// `terminal_exit` their final update carries, once they ended. The
    /// session's, on this connection: a background job's end may come
    /// through a later prompt's sink.
    pub(super) live_terminals: LiveTerminals,
    /// The client answered a form "method not found": the connection's
    /// questions go as permission prompts ([`AcpSink::forms`]).
    pub(super) forms_refused: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// See [`AcpSink::live_terminals`].
pub(super) type LiveTerminals =
    std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Option<serde_json::Value>>>>;

impl AcpSink {
    /// One `session/update` of this session, through the SDK's connection.
    fn send(&self, update: AgentUpdate) {
        self.notify(SessionNotification::new(
            self.session_id.clone(),
            convert::session_update(update, self.caps.boolean_config),
        ));
    }

    /// A notification through the SDK's connection, counted by the backlog.
    fn notify(&self, notification: SessionNotification) {
        match self.cx.send_notification(notification) {
            Ok(()) => self.backlog.queued(),
            Err(err) => tracing::debug!(error = ?err, "client connection gone; dropping update"),
        }
    }

    /// A fence through the SDK; resolves once the writer has passed it
    /// (everything sent before it is out), so the direct path may go.
    async fn fence(&self) {
        self.backlog
            .fence(|| {
                let sent = agent_client_protocol::UntypedMessage::new(
                    super::transport::FENCE,
                    serde_json::Value::Object(Default::default()),
                )
                .and_then(|message| self.cx.send_notification(message));
                if let Err(err) = &sent {
                    tracing::debug!(error = ?err, "client connection gone; no fence");
                }
                sent.is_ok()
            })
            .await;
    }

    /// One `session/update` of a run (once `hold` let it go): serialized
    /// here and queued straight to the writer, behind the fence.
    fn send_direct(&self, update: AgentUpdate) {
        match update_frame(
            &self.session_id,
            &convert::session_update(update, self.caps.boolean_config),
        ) {
            Ok(frame) => self.backlog.send_direct(frame),
            Err(err) => tracing::error!(%err, "cannot serialize an update; dropped"),
        }
    }

    /// A run of a replay's updates, serialized here into one piece for
    /// the writer (one queue slot and wake-up per run, not per update).
    fn send_run(&self, updates: Vec<AgentUpdate>) {
        let mut lines = Vec::with_capacity(updates.len() * 256);
        let mut frames = 0;
        for update in updates {
            let start = lines.len();
            if !lines.is_empty() {
                lines.push(b'\n');
            }
            match write_update_frame(
                &mut lines,
                &self.session_id,
                &convert::session_update(update, self.caps.boolean_config),
            ) {
                Ok(()) => frames += 1,
                Err(err) => {
                    lines.truncate(start);
                    tracing::error!(%err, "cannot serialize an update; dropped");
                }
            }
        }
        match String::from_utf8(lines) {
            Ok(lines) => self.backlog.send_run(lines, frames),
            Err(err) => tracing::error!(%err, "a replayed run is not UTF-8; dropped"),
        }
    }
}

/// A `session/update` notification's frame, as the SDK writes a
/// [`SessionNotification`] without `_meta`: the frame's fixed keys are
/// written as they are, and only the session id and the update go through
/// serde, into a buffer sized for a typical update (a replay sends one per
/// logged message).
fn update_frame(
    session_id: &SessionId,
    update: &agent_client_protocol::v1::schema::SessionUpdate,
) -> Result<String, serde_json::Error> {
    let mut frame = Vec::with_capacity(512);
    write_update_frame(&mut frame, session_id, update)?;
    String::from_utf8(frame).map_err(serde::ser::Error::custom)
}

/// [`update_frame`], appended to `frame`.
fn write_update_frame(
    frame: &mut Vec<u8>,
    session_id: &SessionId,
    update: &agent_client_protocol::v1::schema::SessionUpdate,
) -> Result<(), serde_json::Error> {
    frame
        .extend_from_slice(br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"#);
    serde_json::to_writer(&mut *frame, session_id)?;
    frame.extend_from_slice(br#","update":"#);
    serde_json::to_writer(&mut *frame, update)?;
    frame.extend_from_slice(b"}}");
    Ok(())
}

impl AcpSink {
    fn live_terminals(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Option<serde_json::Value>>>
    {
        self.live_terminals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A running command, as the client can show it: in Zed's terminal
    /// convention (`_meta.terminal_info`, then `terminal_output` or
    /// `terminal_output_delta`, and `terminal_exit` with the final
    /// status), else as a fenced block in the call's content. Only the
    /// output goes without the convention.
    fn command(&self, call_id: dsh_protocol::ToolCallId, live: CommandLive) {
        if !self.caps.terminal_output {
            if matches!(live, CommandLive::Output { .. }) {
                self.send(Transient::Command { call_id, live }.into_update());
            }
            return;
        }
        let id = call_id.as_str().to_owned();
        let (fields, meta) = match live {
            CommandLive::Started { cwd } => {
                self.live_terminals().insert(id.clone(), None);
                (
                    ToolCallUpdateFields::new()
                        .content(vec![ToolCallContent::Terminal(Terminal::new(id.clone()))]),
                    json!({"terminal_info": {"terminal_id": id, "cwd": cwd}}),
                )
            }
            CommandLive::Output { delta, tail } => {
                let meta = if self.caps.terminal_output_delta {
                    json!({"terminal_output_delta": {"terminal_id": id, "data": delta}})
                } else {
                    json!({"terminal_output": {"terminal_id": id, "data": tail}})
                };
                (ToolCallUpdateFields::new(), meta)
            }
            CommandLive::Exited { exit_code, signal } => {
                // Sent with the call's final status.
                if let Some(exit) = self.live_terminals().get_mut(&id) {
                    *exit =
                        Some(json!({"terminal_id": id, "exit_code": exit_code, "signal": signal}));
                }
                return;
            }
        };
        self.send_update(ToolCallUpdate::new(id, fields).meta(meta.as_object().cloned()));
    }

    /// An update of a recorded event; a command shown as a terminal keeps
    /// its terminal in place of the text the call's view has (which a load
    /// shows instead), and ends with its `terminal_exit` and status.
    fn send_terminal_aware(&self, update: AgentUpdate) {
        use dsh_protocol::tool::ToolStatus;
        let AgentUpdate::ToolCallUpdate {
            call_id,
            status,
            mut view,
            raw_output,
        } = update
        else {
            return self.send(update);
        };
        let exit = {
            let mut terminals = self.live_terminals();
            match (terminals.get(call_id.as_str()), status) {
                (None, _) => None,
                (Some(_), ToolStatus::Completed | ToolStatus::Failed) => {
                    terminals.remove(call_id.as_str())
                }
                // Still running (a background job's call): its terminal
                // stays.
                (Some(_), ToolStatus::Pending | ToolStatus::InProgress) => {
                    drop(terminals);
                    view.content.clear();
                    return self.send(AgentUpdate::ToolCallUpdate {
                        call_id,
                        status,
                        view,
                        raw_output,
                    });
                }
            }
        };
        let Some(exit) = exit else {
            return self.send(AgentUpdate::ToolCallUpdate {
                call_id,
                status,
                view,
                raw_output,
            });
        };
        let id = call_id.as_str().to_owned();
        let exit =
            exit.unwrap_or_else(|| json!({"terminal_id": id, "exit_code": null, "signal": null}));
        let fields = ToolCallUpdateFields::new()
            .status(convert::tool_status(status))
            .raw_output(raw_output.as_deref().and_then(convert::raw_output_value));
        self.send_update(
            ToolCallUpdate::new(id, fields)
                .meta(json!({ "terminal_exit": exit }).as_object().cloned()),
        );
    }

    /// A subagent as a session of its own (the client advertised
    /// `subagents`): announced on this session, its updates under its id.
    fn subagent(&self, child: dsh_protocol::SessionId, event: SubagentEvent) {
        use agent_client_protocol::v1::schema::{
            IdleStateUpdate, RunningStateUpdate, SessionUpdate, StateUpdate, SubagentUpdate,
        };
        if !self.caps.subagents {
            return;
        }
        let id = SessionId::new(child.as_str());
        let (session, update) = match event {
            SubagentEvent::Started { title, cwd } => (
                self.session_id.clone(),
                SessionUpdate::SubagentUpdate(
                    SubagentUpdate::new(id)
                        .title(title)
                        .cwd(std::path::PathBuf::from(cwd))
                        .state(StateUpdate::Running(RunningStateUpdate::new())),
                ),
            ),
            SubagentEvent::Update(update) => (
                id,
                convert::session_update(update, self.caps.boolean_config),
            ),
            SubagentEvent::Ended => (
                self.session_id.clone(),
                SessionUpdate::SubagentUpdate(
                    SubagentUpdate::new(id).state(StateUpdate::Idle(IdleStateUpdate::new())),
                ),
            ),
        };
        self.notify(SessionNotification::new(session, update));
    }

    fn send_update(&self, update: ToolCallUpdate) {
        self.notify(SessionNotification::new(
            self.session_id.clone(),
            agent_client_protocol::v1::schema::SessionUpdate::ToolCallUpdate(update),
        ));
    }
}

impl Frontend for AcpSink {
    fn emit(&self, output: Output<'_>) {
        match output {
            Output::Recorded { updates, .. } if !self.caps.terminal_output => {
                updates.into_iter().for_each(|u| self.send(u));
            }
            Output::Recorded { updates, .. } => {
                updates
                    .into_iter()
                    .for_each(|u| self.send_terminal_aware(u));
            }
            Output::Delta(delta) => self.send_direct(delta.into_update()),
            Output::Replayed(updates) => self.send_run(updates),
            Output::Transient(Transient::Command { call_id, live }) => self.command(call_id, live),
            Output::Transient(Transient::Subagent { session, event, .. }) => {
                self.subagent(session, event);
            }
            Output::Transient(transient) => self.send(transient.into_update()),
        }
    }

    fn hold(&self) -> Option<BoxFuture<'_, ()>> {
        let fence = self.backlog.unfenced();
        if !fence && !self.backlog.congested() {
            return None;
        }
        Some(Box::pin(async move {
            if fence {
                self.fence().await;
            }
            if self.backlog.congested() {
                self.backlog.drained().await;
            }
        }))
    }

    fn caps(&self) -> ClientCaps {
        self.caps
    }

    fn ask(&self, ask: Ask) -> BoxFuture<'_, Answer> {
        Box::pin(async move {
            if let crate::permission::Question::User(questions) = &ask.question {
                let questions = questions.clone();
                return self.ask_questions(ask, questions).await;
            }
            if matches!(ask.question, crate::permission::Question::Plan) && self.forms() {
                if let Some(answer) = self.ask_plan(&ask).await {
                    return answer;
                }
            }
            let options = permission_options(&ask.question);
            let question = ask.question;
            let mut fields = ToolCallUpdateFields::new()
                .title(ask.title)
                .kind(convert::tool_kind(ask.kind))
                .locations(convert::locations(&ask.locations))
                .raw_input(ask.raw_input);
            if !ask.content.is_empty() {
                fields = fields.content(convert::tool_content(ask.content));
            }
            let request = RequestPermissionRequest::new(
                self.session_id.clone(),
                ToolCallUpdate::new(ask.call_id.into_string(), fields),
                options,
            );
            match self.cx.send_request(request).block_task().await {
                Ok(response) => match response.outcome {
                    RequestPermissionOutcome::Selected(selected) => {
                        let id: &str = selected.option_id.0.as_ref();
                        question.answer(id).unwrap_or_else(|| {
                            tracing::warn!(
                                option = id,
                                "client chose an option dsh did not offer; denying"
                            );
                            Answer::Unavailable
                        })
                    }
                    RequestPermissionOutcome::Cancelled => Answer::Cancelled,
                    _ => Answer::Unavailable,
                },
                Err(err) => {
                    tracing::warn!(error = ?err, "permission request failed; denying");
                    Answer::Unavailable
                }
            }
        })
    }

    fn read_text_file<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            if !self.caps.read_text_file {
                return Err("the client does not offer fs/read_text_file".to_owned());
            }
            self.cx
                .send_request(ReadTextFileRequest::new(self.session_id.clone(), path))
                .block_task()
                .await
                .map(|response| response.content)
                .map_err(|err| {
                    format!(
                        "the editor could not read {}: {}",
                        path.display(),
                        error_detail(&err)
                    )
                })
        })
    }

    fn write_text_file<'a>(
        &'a self,
        path: &'a Path,
        content: String,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            if !self.caps.write_text_file {
                return Err("the client does not offer fs/write_text_file".to_owned());
            }
            self.cx
                .send_request(WriteTextFileRequest::new(
                    self.session_id.clone(),
                    path,
                    content,
                ))
                .block_task()
                .await
                .map(|_| ())
                .map_err(|err| {
                    format!(
                        "the editor could not write {}: {}",
                        path.display(),
                        error_detail(&err)
                    )
                })
        })
    }

    fn run_in_terminal<'a>(
        &'a self,
        command: TerminalCommand,
        cancel: &'a tokio_util::sync::CancellationToken,
    ) -> BoxFuture<'a, Result<TerminalRun, String>> {
        Box::pin(async move {
            if !self.caps.terminal {
                return Err("the client does not offer terminals".to_owned());
            }
            let sid = self.session_id.clone();
            let created = self
                .cx
                .send_request(
                    CreateTerminalRequest::new(sid.clone(), "bash")
                        .args(vec!["-c".to_owned(), command.command.clone()])
                        .cwd(command.cwd.clone())
                        .output_byte_limit(command.output_limit),
                )
                .block_task()
                .await
                .map_err(|err| error_detail(&err))?;
            let terminal_id = created.terminal_id;
            // Embed the terminal now, so the editor shows it while it runs
            // (and before it is released).
            // Transient: the terminal is this connection's.
            self.send(AgentUpdate::ToolCallUpdate {
                call_id: command.call_id.clone(),
                status: dsh_protocol::tool::ToolStatus::InProgress,
                view: dsh_protocol::tool::ToolView {
                    content: vec![dsh_protocol::tool::ToolContent::Terminal {
                        terminal_id: terminal_id.0.to_string(),
                    }],
                    ..Default::default()
                },
                raw_output: None,
            });
            let mut run = TerminalRun {
                terminal_id: terminal_id.0.to_string(),
                ..TerminalRun::default()
            };
            let wait = self
                .cx
                .send_request(WaitForTerminalExitRequest::new(
                    sid.clone(),
                    terminal_id.clone(),
                ))
                .block_task();
            let exited = tokio::select! {
                exited = wait => exited.ok().map(|response| response.exit_status),
                () = tokio::time::sleep(command.timeout) => { run.timed_out = true; None }
                () = cancel.cancelled() => { run.cancelled = true; None }
            };
            if exited.is_none() {
                if let Err(err) = self
                    .cx
                    .send_request(KillTerminalRequest::new(sid.clone(), terminal_id.clone()))
                    .block_task()
                    .await
                {
                    tracing::warn!(error = ?err, "terminal/kill failed");
                }
            }
            let output = self
                .cx
                .send_request(TerminalOutputRequest::new(sid.clone(), terminal_id.clone()))
                .block_task()
                .await;
            if let Err(err) = self
                .cx
                .send_request(ReleaseTerminalRequest::new(sid, terminal_id))
                .block_task()
                .await
            {
                tracing::warn!(error = ?err, "terminal/release failed");
            }
            let output = output.map_err(|err| error_detail(&err))?;
            run.output = output.output;
            run.truncated = output.truncated;
            let status = exited.or(output.exit_status);
            run.exit_code = status.as_ref().and_then(|s| s.exit_code);
            run.signal = status.and_then(|s| s.signal);
            Ok(run)
        })
    }
}

/// The options of a question, as ACP permission options (their kinds are
/// hints for the client's UI; their ids carry the meaning).
fn permission_options(question: &crate::permission::Question) -> Vec<PermissionOption> {
    question
        .options()
        .into_iter()
        .map(|option| {
            let kind = match option.hint {
                Hint::AllowOnce => PermissionOptionKind::AllowOnce,
                Hint::AllowAlways => PermissionOptionKind::AllowAlways,
                Hint::RejectOnce => PermissionOptionKind::RejectOnce,
                Hint::RejectAlways => PermissionOptionKind::RejectAlways,
            };
            PermissionOption::new(option.id, option.label, kind)
        })
        .collect()
}

/// An error from the editor as text: its message and, when it sent one, its
/// `data` (acpx: "Permission denied for fs/write_text_file").
fn error_detail(err: &agent_client_protocol::Error) -> String {
    match &err.data {
        None | Some(serde_json::Value::Null) => err.message.clone(),
        Some(serde_json::Value::String(data)) => format!("{}: {data}", err.message),
        Some(data) => format!("{}: {data}", err.message),
    }
}

#[cfg(test)]
mod tests {
    use agent_client_protocol::v1::schema::SessionUpdate;

    use super::*;

    /// The frame written by hand is the one serde writes for the whole
    /// notification.
    #[test]
    fn an_update_frame_is_the_notification_serde_writes() {
        #[derive(serde::Serialize)]
        struct Frame<'a> {
            jsonrpc: &'static str,
            method: &'static str,
            params: &'a SessionNotification,
        }
        let updates = [
            AgentUpdate::MessageChunk("It \"parses\"\nthe input ✓".into(), Some("m-1".into())),
            AgentUpdate::ThoughtChunk("Look first.".into(), None),
            AgentUpdate::UserChunk(dsh_protocol::content::UserContent::text("Question 1?")),
            AgentUpdate::Usage {
                used: 1000,
                size: 128_000,
                cost: None,
            },
            AgentUpdate::Title("A \"title\"".into(), 1),
        ];
        for update in updates {
            let update: SessionUpdate = convert::session_update(update, false);
            let id = SessionId::new("sess-\u{1}\"1");
            let expected = serde_json::to_string(&Frame {
                jsonrpc: "2.0",
                method: "session/update",
                params: &SessionNotification::new(id.clone(), update.clone()),
            })
            .unwrap();
            assert_eq!(update_frame(&id, &update).unwrap(), expected);
        }
    }
}
