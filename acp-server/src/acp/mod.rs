//! The ACP adapter: the only module that speaks ACP. [`handlers`] has one
//! function per method, translating requests into calls on the [`Agent`]
//! and answers back; [`sink`] is the core's `Frontend` over ACP;
//! [`convert`] maps the two vocabularies; [`transport`] is the stdio framing
//! that survives bad input. [`demo_client`] is `dsh demo`'s ACP *client*
//! (the editor side), which [`crate::demo`] drives.

pub mod convert;
pub mod demo_client;
pub mod error;
mod handlers;
mod inflight;
mod questions;
mod sink;
pub mod transport;

use std::sync::{Arc, RwLock};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::AuthMethodTerminal;
use agent_client_protocol::v1::schema::{
    AgentAuthCapabilities, AgentCapabilities, AuthMethod, AuthMethodAgent, AuthenticateRequest,
    CancelNotification, CloseSessionRequest, DeleteSessionRequest, ForkSessionRequest,
    Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest, LoadSessionRequest,
    LogoutCapabilities, LogoutRequest, McpCapabilities, NewSessionRequest, PromptCapabilities,
    PromptRequest, ResumeSessionRequest, SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities, SessionCloseCapabilities, SessionDeleteCapabilities,
    SessionForkCapabilities, SessionListCapabilities, SessionResumeCapabilities,
    SetSessionConfigOptionRequest, SetSessionModeRequest,
};
use agent_client_protocol::{Agent as AgentRole, ConnectTo};

use crate::agent::Agent;
use crate::frontend::ClientCaps;
use handlers::Ctx;

/// The id of the environment-variable auth method.
pub const AUTH_METHOD_ENV: &str = "deepseek-api-key";
/// The id of the terminal login (`dsh login`).
pub const AUTH_METHOD_LOGIN: &str = "dsh-login";

/// The `initialize` answer.
pub fn initialize_response(request: &InitializeRequest, agent: &Agent) -> InitializeResponse {
    if request.protocol_version != ProtocolVersion::V1 {
        tracing::info!(client = ?request.protocol_version, "client asked for another protocol version; answering 1");
    }
    let env = &agent.config().model.key.name;
    let key = agent.config().model.key_name();
    let mut methods = Vec::new();
    // Offered where a key is needed: not for a keyless endpoint nor one
    // on this machine (asked without a key unless one is found), where an
    // editor's "Authenticate" button would ask for a key nothing needs.
    // The default endpoint (DeepSeek's API) always needs one: the ACP
    // registry's verifier wants a method there.
    if agent.config().model.needs_key() {
        // The terminal login, in both shapes clients read: `type:
        // "terminal"` with `args` (the auth-methods RFD; the registry's
        // verifier), and `_meta["terminal-auth"]` with the command (Zed's
        // "Authenticate" button runs it in a terminal).
        let command = std::env::current_exe()
            .map(|path| path.display().to_string())
            .unwrap_or_else(|_| "dsh".to_owned());
        let mut meta = serde_json::Map::new();
        meta.insert(
            "terminal-auth".to_owned(),
            serde_json::json!({"command": command, "args": ["login"], "label": "dsh login"}),
        );
        methods.push(AuthMethod::Terminal(
            AuthMethodTerminal::new(AUTH_METHOD_LOGIN, "Log in with an API key")
                .description(format!(
                    "Runs `dsh login` in a terminal: paste the {key}; dsh stores it in $DSH_HOME/.credentials.yaml (readable only by you)."
                ))
                .args(vec!["login".to_owned()])
                .meta(meta),
        ));
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
                        .close(SessionCloseCapabilities::new())
                        .fork(SessionForkCapabilities::new()),
                ),
        )
}

/// How long after stdin's end the requests read before it may take to
/// reach their handlers and be answered; dsh answers what is left itself.
const EOF_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves ACP on `transport` until the client disconnects; `backlog` is the
/// transport's count of updates not yet written and of requests not yet
/// answered.
///
/// When stdin ends, every request read before the end still reaches its
/// handler, in the order it came; then the agent shuts down (turns are
/// cancelled, as `dsh sdk` does: prompts are answered `cancelled`), and
/// every request is answered before this returns — what is unanswered
/// [`EOF_GRACE`] after the end gets -32800 from the transport.
///
/// # Errors
/// The connection failed fatally.
pub async fn serve(
    agent: Arc<Agent>,
    transport: impl ConnectTo<AgentRole>,
    backlog: Arc<transport::Backlog>,
) -> Result<(), agent_client_protocol::Error> {
    let at_eof = at_eof(agent.clone(), backlog.clone());
    let ctx = Ctx {
        agent,
        caps: Arc::new(RwLock::new(ClientCaps::default())),
        backlog: backlog.clone(),
        live_terminals: Arc::default(),
        forms_refused: Arc::default(),
    };
    let [c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14] =
        std::array::from_fn(|_| ctx.clone());
    let served = AgentRole
        .v1()
        .name("dsh")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                handlers::initialize(&c1, request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: AuthenticateRequest, responder, cx| {
                handlers::authenticate(&c2, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LogoutRequest, responder, cx| {
                handlers::logout(&c13, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, cx| {
                handlers::new_session(&c3, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx| {
                handlers::load_session(&c4, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ResumeSessionRequest, responder, cx| {
                handlers::resume_session(&c5, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ForkSessionRequest, responder, cx| {
                handlers::fork_session(&c14, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ListSessionsRequest, responder, cx| {
                handlers::list_sessions(&c6, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CloseSessionRequest, responder, cx| {
                handlers::close_session(&c7, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: DeleteSessionRequest, responder, cx| {
                handlers::delete_session(&c8, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionConfigOptionRequest, responder, cx| {
                handlers::set_config_option(&c9, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest, responder, cx| {
                handlers::set_mode(&c10, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| {
                handlers::prompt(&c11, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| handlers::cancel(&c12, notification),
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_notification(
            {
                let backlog = backlog.clone();
                async move |marker: transport::EndOfInput, _cx| {
                    backlog.reached(&marker);
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport);
    tokio::pin!(served, at_eof);
    let served = tokio::select! {
        served = &mut served => served,
        () = &mut at_eof => served.await,
    };
    backlog.disconnect();
    served
}

/// stdin's end: the requests read get their answers (see [`serve`]), then
/// the SDK reads the end of its input.
async fn at_eof(agent: Arc<Agent>, backlog: Arc<transport::Backlog>) {
    backlog.input_closed().await;
    let deadline = tokio::time::Instant::now() + EOF_GRACE;
    let _ = tokio::time::timeout_at(deadline, backlog.dispatched()).await;
    tracing::info!("stdin closed; stopping");
    let settled = tokio::time::timeout_at(deadline, backlog.settled());
    let _ = futures::join!(agent.shutdown(), settled);
    backlog.end_input();
}
