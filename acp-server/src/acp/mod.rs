//! The ACP adapter: the only module that speaks ACP. Each handler translates
//! a request into a call on [`Agent`] and the answer back. Handlers never
//! await long work inline (the SDK's dispatch loop would stall): prompts,
//! loads, closes and deletes run in spawned tasks.

pub mod convert;
pub mod error;
pub mod transport;

use std::sync::Arc;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentAuthCapabilities, AgentCapabilities, AuthMethod, AuthMethodAgent, AuthenticateRequest,
    AuthenticateResponse, CancelNotification, CloseSessionRequest, CloseSessionResponse,
    DeleteSessionRequest, DeleteSessionResponse, Implementation, InitializeRequest,
    InitializeResponse, ListSessionsRequest, ListSessionsResponse, LoadSessionRequest,
    LoadSessionResponse, LogoutCapabilities, LogoutRequest, LogoutResponse, McpCapabilities,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    ResumeSessionRequest, ResumeSessionResponse, SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities, SessionCloseCapabilities, SessionDeleteCapabilities, SessionId,
    SessionInfo, SessionListCapabilities, SessionNotification, SessionResumeCapabilities,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, StopReason as AcpStopReason,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent as AgentRole, Client, ConnectTo};

use std::path::Path;
use std::sync::RwLock;

use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, KillTerminalRequest, PermissionOption, PermissionOptionKind,
    ReadTextFileRequest, ReleaseTerminalRequest, RequestPermissionOutcome,
    RequestPermissionRequest, TerminalOutputRequest, ToolCallUpdate, ToolCallUpdateFields,
    WaitForTerminalExitRequest, WriteTextFileRequest,
};
use futures::future::BoxFuture;

use crate::agent::{Agent, AgentUpdate, StopReason, UpdateSink};
use crate::client::{
    ClientCaps, Frontend, PermissionAnswer, PermissionAsk, TerminalCommand, TerminalRun,
};
use crate::error::AgentError;
use crate::permission::Mode;
use agent_client_protocol::v1::schema::{
    ConfigOptionUpdate, CurrentModeUpdate, SessionMode, SessionModeState, SessionUpdate,
    SetSessionModeRequest, SetSessionModeResponse,
};
use error::{invalid_params, to_acp};

/// The id of the environment-variable auth method.
pub const AUTH_METHOD_ENV: &str = "deepseek-api-key";

/// Sends a session's updates as `session/update` notifications, and serves
/// the core's requests to the editor (permission, fs, terminal) — only those
/// the client advertised.
struct AcpSink {
    cx: ConnectionTo<Client>,
    session_id: SessionId,
    caps: ClientCaps,
}

impl Frontend for AcpSink {
    fn caps(&self) -> ClientCaps {
        self.caps
    }

    fn request_permission(&self, ask: PermissionAsk) -> BoxFuture<'_, PermissionAnswer> {
        Box::pin(async move {
            let options = permission_options(&ask.choices);
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
                ToolCallUpdate::new(ask.call_id, fields),
                options,
            );
            match self.cx.send_request(request).block_task().await {
                Ok(response) => match response.outcome {
                    RequestPermissionOutcome::Selected(selected) => {
                        match selected.option_id.0.as_ref() {
                            "allow_once" => PermissionAnswer::AllowOnce,
                            "allow_always" => PermissionAnswer::AllowAlways,
                            "reject_once" => PermissionAnswer::RejectOnce,
                            "reject_always" => PermissionAnswer::RejectAlways,
                            other => {
                                tracing::warn!(
                                    option = other,
                                    "client chose an option dsh did not offer; denying"
                                );
                                PermissionAnswer::Unavailable
                            }
                        }
                    }
                    RequestPermissionOutcome::Cancelled => PermissionAnswer::Cancelled,
                    _ => PermissionAnswer::Unavailable,
                },
                Err(err) => {
                    tracing::warn!(error = ?err, "permission request failed; denying");
                    PermissionAnswer::Unavailable
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
            self.send(AgentUpdate::ToolCallUpdate {
                call_id: command.call_id.clone(),
                status: dsh_protocol::tool::ToolStatus::InProgress,
                view: dsh_protocol::tool::ToolView {
                    content: vec![dsh_protocol::tool::ToolContent::Terminal {
                        terminal_id: terminal_id.0.to_string(),
                    }],
                    ..Default::default()
                },
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

impl UpdateSink for AcpSink {
    fn send(&self, update: AgentUpdate) {
        let notification =
            SessionNotification::new(self.session_id.clone(), convert::session_update(update));
        if let Err(err) = self.cx.send_notification(notification) {
            tracing::debug!(error = ?err, "client connection gone; dropping update");
        }
    }
}

/// The options of a permission prompt: what the policy says may be offered
/// (no "always" where a rule could not match again; no "once" for starting
/// a workspace program, whose approval lasts the session).
fn permission_options(choices: &crate::permission::Choices) -> Vec<PermissionOption> {
    use crate::permission::Remember;
    let scope = match &choices.remember {
        Remember::Scope(scope) => {
            format!(" ({})", dsh_protocol::content::visible_title(scope, 120))
        }
        _ => String::new(),
    };
    let mut options = Vec::new();
    if choices.once {
        options.push(PermissionOption::new(
            "allow_once",
            "Allow once",
            PermissionOptionKind::AllowOnce,
        ));
    }
    if choices.remember != Remember::Never {
        let label = if choices.once {
            format!("Always allow{scope}")
        } else {
            format!("Allow for this session{scope}")
        };
        options.push(PermissionOption::new(
            "allow_always",
            label,
            PermissionOptionKind::AllowAlways,
        ));
    }
    options.push(PermissionOption::new(
        "reject_once",
        "Reject",
        PermissionOptionKind::RejectOnce,
    ));
    if choices.remember != Remember::Never {
        options.push(PermissionOption::new(
            "reject_always",
            format!("Always reject{scope}"),
            PermissionOptionKind::RejectAlways,
        ));
    }
    options
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

/// Tells the editor the mode changed, in both shapes clients track: the
/// `mode` config option and the legacy current mode.
fn announce_mode(
    cx: &ConnectionTo<Client>,
    session_id: &SessionId,
    mode: &str,
    options: Vec<crate::agent::ConfigOption>,
) {
    for update in [
        SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.to_owned())),
        SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(convert::config_options(
            options,
        ))),
    ] {
        if let Err(err) = cx.send_notification(SessionNotification::new(session_id.clone(), update))
        {
            tracing::debug!(error = ?err, "cannot announce the mode change");
        }
    }
}

fn stop_reason(stop: StopReason) -> AcpStopReason {
    match stop {
        StopReason::EndTurn => AcpStopReason::EndTurn,
        StopReason::MaxTokens => AcpStopReason::MaxTokens,
        StopReason::MaxTurnRequests => AcpStopReason::MaxTurnRequests,
        StopReason::Refusal => AcpStopReason::Refusal,
        StopReason::Cancelled => AcpStopReason::Cancelled,
    }
}

fn mcp_servers_json<T: serde::Serialize>(servers: &[T]) -> serde_json::Value {
    // Recorded for the MCP issue; values of `env`/`headers` may hold secrets,
    // so only names and commands are kept.
    let value = serde_json::to_value(servers).unwrap_or_default();
    let scrub = |mut server: serde_json::Value| {
        for key in ["env", "headers"] {
            if let Some(list) = server.get_mut(key).and_then(|v| v.as_array_mut()) {
                for item in list {
                    if let Some(object) = item.as_object_mut() {
                        object.remove("value");
                    }
                }
            }
        }
        server
    };
    match value {
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(scrub).collect())
        }
        other => other,
    }
}

/// Runs a synchronous agent call inside the dispatch loop, turning a panic
/// (a bug) into an internal error instead of taking the connection down.
fn guard<T>(call: impl FnOnce() -> Result<T, AgentError>) -> Result<T, AgentError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).unwrap_or_else(|payload| {
        Err(AgentError::bug(
            "request",
            &AgentError::panic_message(payload.as_ref()),
        ))
    })
}

/// Maps a panicked task to an internal error.
fn panicked<T>(error: tokio::task::JoinError) -> Result<T, AgentError> {
    Err(AgentError::bug("request", &error))
}

/// The client's MCP servers in the core's terms. SSE servers are refused
/// (not supported, as `mcpCapabilities` says); stdio and HTTP are served.
fn mcp_configs(
    servers: &[agent_client_protocol::v1::schema::McpServer],
) -> Result<Vec<crate::mcp::McpServerConfig>, AgentError> {
    use crate::mcp::{McpServerConfig, McpTransport};
    use agent_client_protocol::v1::schema::McpServer;
    servers
        .iter()
        .map(|server| match server {
            McpServer::Stdio(stdio) => Ok(McpServerConfig {
                name: stdio.name.clone(),
                transport: McpTransport::Stdio {
                    command: stdio.command.display().to_string(),
                    args: stdio.args.clone(),
                    env: stdio.env.iter().map(|var| (var.name.clone(), var.value.clone())).collect(),
                },
            }),
            McpServer::Http(http) => Ok(McpServerConfig {
                name: http.name.clone(),
                transport: McpTransport::Http {
                    url: http.url.clone(),
                    headers: http.headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect(),
                },
            }),
            McpServer::Sse(sse) => Err(AgentError::InvalidParams(format!(
                "MCP server \"{}\" uses the SSE transport, which dsh does not support (deprecated in MCP); use its Streamable HTTP endpoint or a stdio server",
                sse.name
            ))),
            _ => Err(AgentError::InvalidParams("unsupported MCP server transport".to_owned())),
        })
        .collect()
}

/// Starts a session's MCP servers; returns the failure messages.
async fn start_mcp(
    agent: &Agent,
    session: &crate::agent::Session,
    configs: Vec<crate::mcp::McpServerConfig>,
) -> Vec<String> {
    let cwd = std::path::PathBuf::from(&session.header.cwd);
    let (hub, failures) = crate::mcp::McpHub::start(configs, &cwd, &agent.config().spawner).await;
    session.set_mcp(hub).await;
    for failure in &failures {
        tracing::warn!(session = %session.id, "{failure}");
    }
    failures
}

/// Tells the user which MCP servers failed, as agent messages.
fn notify_failures(cx: &ConnectionTo<Client>, session_id: &str, failures: Vec<String>) {
    for failure in failures {
        let update = convert::session_update(AgentUpdate::MessageChunk(format!("⚠ {failure}\n")));
        if let Err(err) =
            cx.send_notification(SessionNotification::new(session_id.to_owned(), update))
        {
            tracing::debug!(error = ?err, "cannot send MCP notice");
        }
    }
}

/// The legacy modes view of the `mode` option, for clients that only know
/// `session/set_mode` (clients with config options use those).
fn mode_state(mode: Mode) -> SessionModeState {
    SessionModeState::new(
        mode.as_str(),
        Mode::ALL
            .iter()
            .map(|mode| {
                SessionMode::new(mode.as_str(), mode.name())
                    .description(mode.description().to_owned())
            })
            .collect(),
    )
}

/// The `initialize` answer.
pub fn initialize_response(request: &InitializeRequest, agent: &Agent) -> InitializeResponse {
    if request.protocol_version != ProtocolVersion::V1 {
        tracing::info!(client = ?request.protocol_version, "client asked for another protocol version; answering 1");
    }
    let env = &agent.config().api_key_env;
    let key = agent.config().key_name();
    let mut methods = Vec::new();
    if agent.config().needs_key() {
        methods.push(AuthMethod::Agent(
            AuthMethodAgent::new(AUTH_METHOD_ENV, format!("{env} environment variable")).description(format!(
                "dsh reads the {key} from {env}. Set it in the environment the editor launches dsh with (Zed: agent_servers.<name>.env in settings.json), then restart the agent."
            )),
        ));
    }
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_info(Implementation::new("dsh", crate::VERSION).title("dsh".to_owned()))
        .auth_methods(methods)
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(
                    PromptCapabilities::new()
                        .image(true)
                        .embedded_context(true)
                        .audio(false),
                )
                .mcp_capabilities(McpCapabilities::new().http(true).sse(false))
                .auth(AgentAuthCapabilities::new().logout(LogoutCapabilities::new()))
                .session_capabilities(
                    SessionCapabilities::new()
                        .list(SessionListCapabilities::new())
                        .delete(SessionDeleteCapabilities::new())
                        .additional_directories(SessionAdditionalDirectoriesCapabilities::new())
                        .resume(SessionResumeCapabilities::new())
                        .close(SessionCloseCapabilities::new()),
                ),
        )
}

/// Serves ACP on `transport` until the client disconnects.
///
/// # Errors
/// The connection failed fatally.
pub async fn serve(
    agent: Arc<Agent>,
    transport: impl ConnectTo<AgentRole>,
) -> Result<(), agent_client_protocol::Error> {
    let caps = Arc::new(RwLock::new(ClientCaps::default()));
    let caps_init = caps.clone();
    let caps_load = caps.clone();
    let caps_prompt = caps.clone();
    let a_mode = agent.clone();
    let a_init = agent.clone();
    let a_auth = agent.clone();
    let a_new = agent.clone();
    let a_load = agent.clone();
    let a_resume = agent.clone();
    let a_list = agent.clone();
    let a_close = agent.clone();
    let a_delete = agent.clone();
    let a_config = agent.clone();
    let a_prompt = agent.clone();
    let a_cancel = agent.clone();
    AgentRole
        .v1()
        .name("dsh")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                let client = &request.client_capabilities;
                *caps_init.write().unwrap_or_else(|p| p.into_inner()) = ClientCaps {
                    read_text_file: client.fs.read_text_file,
                    write_text_file: client.fs.write_text_file,
                    terminal: client.terminal,
                };
                responder.respond(initialize_response(&request, &a_init))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: AuthenticateRequest, responder, _cx| {
                if request.method_id.0.as_ref() != AUTH_METHOD_ENV {
                    return responder.respond_with_error(invalid_params(format!(
                        "unknown auth method {:?}; dsh offers {AUTH_METHOD_ENV:?}",
                        request.method_id.0
                    )));
                }
                match guard(|| a_auth.authenticate()) {
                    Ok(()) => responder.respond(AuthenticateResponse::new()),
                    Err(error) => responder.respond_with_error(to_acp(&error)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_request: LogoutRequest, responder, _cx| {
                // The key lives in the editor's environment; nothing is stored to forget.
                responder.respond(LogoutResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, cx: ConnectionTo<Client>| {
                let configs = match mcp_configs(&request.mcp_servers) {
                    Ok(configs) => configs,
                    Err(error) => return responder.respond_with_error(to_acp(&error)),
                };
                let mcp = mcp_servers_json(&request.mcp_servers);
                match guard(|| {
                    a_new.new_session(&request.cwd, &request.additional_directories, mcp)
                }) {
                    Ok((session, options)) => {
                        let mode = session.mode();
                        let response = NewSessionResponse::new(session.id.clone())
                            .modes(mode_state(mode))
                            .config_options(convert::config_options(options));
                        if configs.is_empty() {
                            return responder.respond(response);
                        }
                        // MCP servers start before the answer, so their tools are
                        // there for the first prompt; failures are told after it.
                        let agent = a_new.clone();
                        cx.clone().spawn(async move {
                            let failures = start_mcp(&agent, &session, configs).await;
                            responder.respond(response)?;
                            notify_failures(&cx, &session.id, failures);
                            Ok(())
                        })
                    }
                    Err(error) => responder.respond_with_error(to_acp(&error)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx: ConnectionTo<Client>| {
                let agent = a_load.clone();
                let caps = *caps_load.read().unwrap_or_else(|p| p.into_inner());
                let configs = match mcp_configs(&request.mcp_servers) {
                    Ok(configs) => configs,
                    Err(error) => return responder.respond_with_error(to_acp(&error)),
                };
                cx.clone().spawn(async move {
                    let id = request.session_id.0.to_string();
                    let loading = agent.clone();
                    let loaded = tokio::task::spawn_blocking(move || loading.load_session(&id))
                        .await
                        .unwrap_or_else(panicked);
                    match loaded {
                        Ok((session, updates, options)) => {
                            let mode = session.mode();
                            let failures = if configs.is_empty() {
                                Vec::new()
                            } else {
                                start_mcp(&agent, &session, configs).await
                            };
                            let sink = AcpSink {
                                cx: cx.clone(),
                                session_id: request.session_id.clone(),
                                caps,
                            };
                            for update in updates {
                                sink.send(update);
                            }
                            responder.respond(
                                LoadSessionResponse::new()
                                    .modes(mode_state(mode))
                                    .config_options(convert::config_options(options)),
                            )?;
                            notify_failures(&cx, &session.id, failures);
                            Ok(())
                        }
                        Err(error) => responder.respond_with_error(to_acp(&error)),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ResumeSessionRequest, responder, cx: ConnectionTo<Client>| {
                let agent = a_resume.clone();
                let configs = match mcp_configs(&request.mcp_servers) {
                    Ok(configs) => configs,
                    Err(error) => return responder.respond_with_error(to_acp(&error)),
                };
                cx.clone().spawn(async move {
                    let id = request.session_id.0.to_string();
                    let resuming = agent.clone();
                    let resumed = tokio::task::spawn_blocking(move || resuming.resume_session(&id))
                        .await
                        .unwrap_or_else(panicked);
                    match resumed {
                        Ok((session, options)) => {
                            let failures = if configs.is_empty() {
                                Vec::new()
                            } else {
                                start_mcp(&agent, &session, configs).await
                            };
                            responder.respond(
                                ResumeSessionResponse::new()
                                    .modes(mode_state(session.mode()))
                                    .config_options(convert::config_options(options)),
                            )?;
                            notify_failures(&cx, &session.id, failures);
                            Ok(())
                        }
                        Err(error) => responder.respond_with_error(to_acp(&error)),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ListSessionsRequest, responder, _cx| match guard(|| {
                a_list.list_sessions(request.cwd.as_deref(), request.cursor.as_deref())
            }) {
                Ok(page) => {
                    let sessions = page
                        .sessions
                        .into_iter()
                        .map(|listing| {
                            SessionInfo::new(listing.id, listing.cwd)
                                .additional_directories(
                                    listing.roots.into_iter().map(Into::into).collect(),
                                )
                                .title(listing.title)
                                .updated_at(listing.updated_at)
                        })
                        .collect();
                    responder
                        .respond(ListSessionsResponse::new(sessions).next_cursor(page.next_cursor))
                }
                Err(error) => responder.respond_with_error(to_acp(&error)),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CloseSessionRequest, responder, cx: ConnectionTo<Client>| {
                let agent = a_close.clone();
                cx.spawn(async move {
                    let id = request.session_id.0.to_string();
                    let closed = tokio::spawn(async move { agent.close_session(&id).await })
                        .await
                        .unwrap_or_else(panicked);
                    match closed {
                        Ok(()) => responder.respond(CloseSessionResponse::new()),
                        Err(error) => responder.respond_with_error(to_acp(&error)),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: DeleteSessionRequest, responder, cx: ConnectionTo<Client>| {
                let agent = a_delete.clone();
                cx.spawn(async move {
                    let id = request.session_id.0.to_string();
                    let deleted = tokio::spawn(async move { agent.delete_session(&id).await })
                        .await
                        .unwrap_or_else(panicked);
                    match deleted {
                        Ok(()) => responder.respond(DeleteSessionResponse::new()),
                        Err(error) => responder.respond_with_error(to_acp(&error)),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionConfigOptionRequest,
                        responder,
                        cx: ConnectionTo<Client>| {
                let Some(value) = request.value.as_value_id() else {
                    return responder.respond_with_error(invalid_params(format!(
                        "config option {:?} takes a value id, not a boolean",
                        request.config_id.0
                    )));
                };
                match guard(|| {
                    a_config.set_config_option(
                        &request.session_id.0,
                        &request.config_id.0,
                        &value.0,
                    )
                }) {
                    Ok(options) => {
                        if request.config_id.0.as_ref() == "mode" {
                            announce_mode(&cx, &request.session_id, &value.0, options.clone());
                        }
                        responder.respond(SetSessionConfigOptionResponse::new(
                            convert::config_options(options),
                        ))
                    }
                    Err(error) => responder.respond_with_error(to_acp(&error)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest, responder, cx: ConnectionTo<Client>| {
                match guard(|| {
                    a_mode.set_config_option(&request.session_id.0, "mode", &request.mode_id.0)
                }) {
                    Ok(options) => {
                        announce_mode(&cx, &request.session_id, &request.mode_id.0, options);
                        responder.respond(SetSessionModeResponse::new())
                    }
                    Err(error) => responder.respond_with_error(to_acp(&error)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx: ConnectionTo<Client>| {
                let content = match convert::prompt_content(request.prompt) {
                    Ok(content) => content,
                    Err(error) => return responder.respond_with_error(to_acp(&error)),
                };
                // Reserve the session now, inside the dispatch loop, so a
                // session/cancel right behind this request finds the turn.
                let ticket = match a_prompt.begin_prompt(&request.session_id.0) {
                    Ok(ticket) => ticket,
                    Err(error) => return responder.respond_with_error(to_acp(&error)),
                };
                let cancel = ticket.cancel_token();
                let request_cancelled = responder.cancellation();
                let agent = a_prompt.clone();
                let caps = *caps_prompt.read().unwrap_or_else(|p| p.into_inner());
                let sink = AcpSink {
                    cx: cx.clone(),
                    session_id: request.session_id.clone(),
                    caps,
                };
                let mut work =
                    tokio::spawn(async move { agent.prompt(ticket, content, &sink).await });
                cx.spawn(async move {
                    let joined = tokio::select! {
                        joined = &mut work => joined,
                        () = request_cancelled.cancelled() => {
                            cancel.cancel();
                            work.await
                        }
                    };
                    match joined {
                        Ok(Ok(stop)) => responder.respond(PromptResponse::new(stop_reason(stop))),
                        Ok(Err(error)) => responder.respond_with_error(to_acp(&error)),
                        Err(join_error) => responder
                            .respond_with_error(to_acp(&AgentError::bug("turn", &join_error))),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                a_cancel.cancel(&notification.session_id.0);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}
