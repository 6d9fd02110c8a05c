//! One function per ACP method: translate the request into a call on the
//! [`Agent`], and its answer back. Handlers run inside the SDK's dispatch
//! loop, so anything that waits (the disk, the model, MCP servers, closing a
//! turn) is spawned with `cx.spawn`; only quick in-memory calls answer
//! inline.

use std::sync::{Arc, RwLock};

use agent_client_protocol::v1::schema::{
    AuthenticateRequest, AuthenticateResponse, CancelNotification, CloseSessionRequest,
    CloseSessionResponse, DeleteSessionRequest, DeleteSessionResponse, ForkSessionRequest,
    ForkSessionResponse, InitializeRequest, InitializeResponse, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, LogoutRequest, LogoutResponse,
    NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse, ResumeSessionRequest,
    ResumeSessionResponse, SessionId, SessionInfo, SessionNotification,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, Error, Responder, V1};
use dsh_protocol::log::ConfigKey;

use super::error::{invalid_params, to_acp};
use super::sink::AcpSink;
use super::{convert, AUTH_METHOD_ENV, AUTH_METHOD_LOGIN};
use crate::agent::{Agent, Opened};
use crate::error::AgentError;
use crate::frontend::{ClientCaps, Frontend};
use crate::update::AgentUpdate;

/// What every handler shares: the agent and what the client advertised.
#[derive(Clone)]
pub(super) struct Ctx {
    pub(super) agent: Arc<Agent>,
    pub(super) caps: Arc<RwLock<ClientCaps>>,
    pub(super) backlog: Arc<super::transport::Backlog>,
    /// Each session's commands shown as terminals ([`AcpSink`]).
    pub(super) live_terminals:
        Arc<std::sync::Mutex<std::collections::HashMap<String, super::sink::LiveTerminals>>>,
    /// The client answered a form "method not found" ([`AcpSink::forms`]).
    pub(super) forms_refused: Arc<std::sync::atomic::AtomicBool>,
}

impl Ctx {
    fn caps(&self) -> ClientCaps {
        *self.caps.read().unwrap_or_else(|p| p.into_inner())
    }

    fn sink(&self, cx: &ConnectionTo<Client>, session_id: &SessionId) -> AcpSink {
        AcpSink {
            cx: cx.clone(),
            session_id: session_id.clone(),
            caps: self.caps(),
            backlog: self.backlog.clone(),
            live_terminals: self
                .live_terminals
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(session_id.0.to_string())
                .or_default()
                .clone(),
            forms_refused: self.forms_refused.clone(),
        }
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

/// Runs an agent call that waits, on its own task: a panic in it is an
/// internal error, not a dead connection.
async fn spawned<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T, AgentError>> + Send + 'static,
) -> Result<T, AgentError> {
    tokio::spawn(work)
        .await
        .unwrap_or_else(|error| Err(AgentError::bug("request", &error)))
}

/// What answering a request that opens a session (new, fork, load,
/// resume) needs of the connection.
struct Opening {
    ctx: Ctx,
    cx: ConnectionTo<Client>,
    backlog: Arc<super::transport::Backlog>,
    /// The client shows boolean config options.
    booleans: bool,
}

impl Ctx {
    fn opening(&self, cx: &ConnectionTo<Client>) -> Opening {
        Opening {
            ctx: self.clone(),
            cx: cx.clone(),
            backlog: self.backlog.clone(),
            booleans: self.caps().boolean_config,
        }
    }
}

impl Opening {
    /// The session's settings as this client shows them.
    fn options(
        &self,
        options: Vec<crate::update::ConfigOption>,
    ) -> Vec<agent_client_protocol::v1::schema::SessionConfigOption> {
        convert::config_options(options, self.booleans)
    }

    /// After a session opened (after the answer): the slash commands it
    /// offers, and which MCP servers failed to start (transient notices).
    fn notify(
        &self,
        session_id: &SessionId,
        notices: Vec<String>,
        commands: Vec<crate::context::commands::Offered>,
    ) {
        let commands = AgentUpdate::Commands(commands);
        let notices = notices
            .into_iter()
            .map(|notice| AgentUpdate::MessageChunk(format!("⚠ {notice}\n"), None));
        for update in std::iter::once(commands).chain(notices) {
            let update = convert::session_update(update, self.booleans);
            let notification = SessionNotification::new(session_id.clone(), update);
            match self.cx.send_notification(notification) {
                // Counted like every update sent through the SDK.
                Ok(()) => self.backlog.queued(),
                Err(err) => {
                    tracing::debug!(error = ?err, "cannot send an update after opening a session")
                }
            }
        }
    }
}

pub(super) fn initialize(
    ctx: &Ctx,
    request: InitializeRequest,
    responder: Responder<InitializeResponse, V1>,
) -> Result<(), Error> {
    let client = &request.client_capabilities;
    *ctx.caps.write().unwrap_or_else(|p| p.into_inner()) = ClientCaps {
        read_text_file: client.fs.read_text_file,
        write_text_file: client.fs.write_text_file,
        terminal: client.terminal,
        elicitation_form: client
            .elicitation
            .as_ref()
            .is_some_and(|elicitation| elicitation.supports_form()),
        // Zed's convention for live command output (`_meta`, not the
        // schema's capabilities).
        terminal_output: meta_flag(client.meta.as_ref(), "terminal_output"),
        terminal_output_delta: meta_flag(client.meta.as_ref(), "terminal_output_delta"),
        subagents: client.subagents.is_some(),
        boolean_config: client
            .session
            .as_ref()
            .and_then(|session| session.config_options.as_ref())
            .is_some_and(|options| options.boolean.is_some()),
    };
    responder.respond(super::initialize_response(&request, &ctx.agent))
}

/// A `true` flag in a client's `_meta`.
fn meta_flag(meta: Option<&serde_json::Map<String, serde_json::Value>>, key: &str) -> bool {
    meta.and_then(|meta| meta.get(key))
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

pub(super) fn authenticate(
    ctx: &Ctx,
    request: AuthenticateRequest,
    responder: Responder<AuthenticateResponse, V1>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let method: &str = request.method_id.0.as_ref();
    if method != AUTH_METHOD_ENV && method != AUTH_METHOD_LOGIN {
        return responder.respond_with_error(invalid_params(format!(
            "unknown auth method {method:?}; dsh offers {AUTH_METHOD_LOGIN:?} and {AUTH_METHOD_ENV:?}"
        )));
    }
    // Resolving the key may read files: off the dispatch loop.
    let agent = ctx.agent.clone();
    cx.spawn(async move {
        match spawned(async move { agent.authenticate().await }).await {
            Ok(()) => responder.respond(AuthenticateResponse::new()),
            Err(error) => responder.respond_with_error(to_acp(&error)),
        }
    })
}

pub(super) fn logout(
    ctx: &Ctx,
    _request: LogoutRequest,
    responder: Responder<LogoutResponse, V1>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    // Forgets the key `dsh login` stored (a key in the editor's
    // environment is the editor's to remove).
    let agent = ctx.agent.clone();
    cx.spawn(async move {
        match spawned(async move { agent.logout().await }).await {
            Ok(()) => responder.respond(LogoutResponse::new()),
            Err(error) => responder.respond_with_error(to_acp(&error)),
        }
    })
}

pub(super) fn new_session(
    ctx: &Ctx,
    request: NewSessionRequest,
    responder: Responder<NewSessionResponse, V1>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let mcp = match convert::mcp_servers(&request.mcp_servers) {
        Ok(mcp) => mcp,
        Err(error) => return responder.respond_with_error(to_acp(&error)),
    };
    let agent = ctx.agent.clone();
    let opening = ctx.opening(&cx);
    cx.spawn(async move {
        let opened = spawned(async move {
            agent
                .new_session(&request.cwd, &request.additional_directories, mcp)
                .await
        })
        .await;
        answer_opened(opened, responder, &opening, |id, modes, options| {
            NewSessionResponse::new(id)
                .modes(modes)
                .config_options(options)
        })
    })
}

/// Answers a request that opened a session (`session/new`, `session/fork`,
/// `session/load`, `session/resume`) with `answer(id, modes, options)`,
/// then sends the editor what it should know of it (notices, commands).
fn answer_opened<T: agent_client_protocol::JsonRpcResponse>(
    opened: Result<Opened, AgentError>,
    responder: Responder<T, V1>,
    opening: &Opening,
    answer: impl FnOnce(
        SessionId,
        agent_client_protocol::v1::schema::SessionModeState,
        Vec<agent_client_protocol::v1::schema::SessionConfigOption>,
    ) -> T,
) -> Result<(), Error> {
    match opened {
        Ok(Opened {
            session,
            options,
            mode,
            notices,
            commands,
        }) => {
            let id = SessionId::new(session.id.as_str());
            // This connection shows the session from now on: what happens
            // between its turns comes here too.
            let sink = opening.ctx.sink(&opening.cx, &id);
            session.subscribe(crate::session::Subscriber::new(Arc::new(sink)));
            responder.respond(answer(
                id.clone(),
                convert::mode_state(mode),
                opening.options(options),
            ))?;
            opening.notify(&id, notices, commands);
            Ok(())
        }
        Err(error) => responder.respond_with_error(to_acp(&error)),
    }
}

/// `session/fork` (ACP's unstable fork): a new session with the parent's
/// history up to its last completed turn.
pub(super) fn fork_session(
    ctx: &Ctx,
    request: ForkSessionRequest,
    responder: Responder<ForkSessionResponse, V1>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let mcp = match convert::mcp_servers(&request.mcp_servers) {
        Ok(mcp) => mcp,
        Err(error) => return responder.respond_with_error(to_acp(&error)),
    };
    let agent = ctx.agent.clone();
    let opening = ctx.opening(&cx);
    cx.spawn(async move {
        let opened = spawned(async move {
            agent
                .fork_session(
                    &convert::session_id(&request.session_id),
                    &request.cwd,
                    &request.additional_directories,
                    mcp,
                )
                .await
        })
        .await;
        answer_opened(opened, responder, &opening, |id, modes, options| {
            ForkSessionResponse::new(id)
                .modes(modes)
                .config_options(options)
        })
    })
}

pub(super) fn load_session(
    ctx: &Ctx,
    request: LoadSessionRequest,
    responder: Responder<LoadSessionResponse, V1>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let mcp = match convert::mcp_servers(&request.mcp_servers) {
        Ok(mcp) => mcp,
        Err(error) => return responder.respond_with_error(to_acp(&error)),
    };
    let agent = ctx.agent.clone();
    let opening = ctx.opening(&cx);
    let sink: Arc<dyn Frontend> = Arc::new(ctx.sink(&cx, &request.session_id));
    cx.spawn(async move {
        let id = convert::session_id(&request.session_id);
        let loaded = spawned(async move { agent.load_session(&id, mcp, sink).await }).await;
        answer_opened(loaded, responder, &opening, |_, modes, options| {
            LoadSessionResponse::new()
                .modes(modes)
                .config_options(options)
        })
    })
}

pub(super) fn resume_session(
    ctx: &Ctx,
    request: ResumeSessionRequest,
    responder: Responder<ResumeSessionResponse, V1>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let mcp = match convert::mcp_servers(&request.mcp_servers) {
        Ok(mcp) => mcp,
        Err(error) => return responder.respond_with_error(to_acp(&error)),
    };
    let agent = ctx.agent.clone();
    let opening = ctx.opening(&cx);
    cx.spawn(async move {
        let id = convert::session_id(&request.session_id);
        let resumed = spawned(async move { agent.resume_session(&id, mcp).await }).await;
        answer_opened(resumed, responder, &opening, |_, modes, options| {
            ResumeSessionResponse::new()
                .modes(modes)
                .config_options(options)
        })
    })
}

pub(super) fn list_sessions(
    ctx: &Ctx,
    request: ListSessionsRequest,
    responder: Responder<ListSessionsResponse, V1>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let agent = ctx.agent.clone();
    cx.spawn(async move {
        let listed = spawned(async move {
            agent
                .list_sessions(request.cwd.as_deref(), request.cursor.as_deref(), false)
                .await
        })
        .await;
        match listed {
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
                            .meta(listing.goal.map(|goal| {
                                // The session's unfinished goal (`_meta.dsh.goal`).
                                let goal = serde_json::to_value(goal).unwrap_or_default();
                                let mut meta = serde_json::Map::new();
                                meta.insert("dsh".to_owned(), serde_json::json!({ "goal": goal }));
                                meta
                            }))
                    })
                    .collect();
                responder.respond(ListSessionsResponse::new(sessions).next_cursor(page.next_cursor))
            }
            Err(error) => responder.respond_with_error(to_acp(&error)),
        }
    })
}

pub(super) fn close_session(
    ctx: &Ctx,
    request: CloseSessionRequest,
    responder: Responder<CloseSessionResponse, V1>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let agent = ctx.agent.clone();
    cx.spawn(async move {
        let id = convert::session_id(&request.session_id);
        match spawned(async move { agent.close_session(&id).await }).await {
            Ok(()) => responder.respond(CloseSessionResponse::new()),
            Err(error) => responder.respond_with_error(to_acp(&error)),
        }
    })
}

pub(super) fn delete_session(
    ctx: &Ctx,
    request: DeleteSessionRequest,
    responder: Responder<DeleteSessionResponse, V1>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let agent = ctx.agent.clone();
    cx.spawn(async move {
        let id = convert::session_id(&request.session_id);
        match spawned(async move { agent.delete_session(&id).await }).await {
            Ok(()) => responder.respond(DeleteSessionResponse::new()),
            Err(error) => responder.respond_with_error(to_acp(&error)),
        }
    })
}

pub(super) fn set_config_option(
    ctx: &Ctx,
    request: SetSessionConfigOptionRequest,
    responder: Responder<SetSessionConfigOptionResponse, V1>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    // A boolean is an on/off switch's `on` or `off` (an option that is
    // not a switch refuses those values like any other unknown one).
    let value = match (request.value.as_value_id(), request.value.as_bool()) {
        (Some(value), _) => value.0.to_string(),
        (None, Some(on)) => crate::settings::switch_value(on).to_owned(),
        (None, None) => {
            return responder.respond_with_error(invalid_params(format!(
                "config option {:?}: a value of an unknown type",
                request.config_id.0
            )))
        }
    };
    let sink = ctx.sink(&cx, &request.session_id);
    match guard(|| {
        // An unknown session is said first, whatever the option.
        let id = convert::session_id(&request.session_id);
        ctx.agent.session(&id)?;
        let key = ctx.agent.config_key(&request.config_id.0)?;
        ctx.agent.set_config_option(&id, key, &value, &sink)
    }) {
        Ok(options) => responder.respond(SetSessionConfigOptionResponse::new(
            convert::config_options(options, ctx.caps().boolean_config),
        )),
        Err(error) => responder.respond_with_error(to_acp(&error)),
    }
}

pub(super) fn set_mode(
    ctx: &Ctx,
    request: SetSessionModeRequest,
    responder: Responder<SetSessionModeResponse, V1>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let sink = ctx.sink(&cx, &request.session_id);
    match guard(|| {
        ctx.agent.set_config_option(
            &convert::session_id(&request.session_id),
            ConfigKey::Mode,
            &request.mode_id.0,
            &sink,
        )
    }) {
        Ok(_) => responder.respond(SetSessionModeResponse::new()),
        Err(error) => responder.respond_with_error(to_acp(&error)),
    }
}

pub(super) fn prompt(
    ctx: &Ctx,
    request: PromptRequest,
    responder: Responder<PromptResponse, V1>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let content = match convert::prompt_content(request.prompt) {
        Ok(content) => content,
        Err(error) => return responder.respond_with_error(to_acp(&error)),
    };
    let delivery = match convert::prompt_delivery(request.meta.as_ref()) {
        Ok(delivery) => delivery,
        Err(error) => return responder.respond_with_error(to_acp(&error)),
    };
    // Sent to the session's owner now, inside the dispatch loop, so a
    // session/cancel right behind this request finds it (running, queued
    // or steered).
    let sink = ctx.sink(&cx, &request.session_id);
    let submitted = match ctx.agent.submit(
        &convert::session_id(&request.session_id),
        content,
        delivery,
        crate::session::Subscriber::new(std::sync::Arc::new(sink)),
        Box::new(|| {}),
    ) {
        Ok(submitted) => submitted,
        Err(error) => return responder.respond_with_error(to_acp(&error)),
    };
    let cancel = submitted.cancel.clone();
    let request_cancelled = responder.cancellation();
    let mut work = tokio::spawn(submitted.run());
    cx.spawn(async move {
        let joined = tokio::select! {
            joined = &mut work => joined,
            () = request_cancelled.cancelled() => {
                cancel.cancel();
                work.await
            }
        };
        match joined {
            Ok(Ok(stop)) => responder.respond(PromptResponse::new(convert::stop_reason(stop))),
            Ok(Err(error)) => responder.respond_with_error(to_acp(&error)),
            Err(join_error) => {
                responder.respond_with_error(to_acp(&AgentError::bug("turn", &join_error)))
            }
        }
    })
}

pub(super) fn cancel(ctx: &Ctx, notification: CancelNotification) -> Result<(), Error> {
    ctx.agent
        .cancel(&convert::session_id(&notification.session_id));
    Ok(())
}
