//! `dsh sdk`: the JSON-RPC API for programs, defined once as a jsonrpsee
//! [`RpcModule`] and served over newline-delimited JSON on stdio
//! ([`stdio`]) and over WebSocket ([`ws`]). The methods translate to the
//! agent core's calls; what subscribers hear is the session log
//! ([`hub`], [`subscribe`]). docs/sdk.md is the protocol's reference.

pub mod hub;
mod item;
mod search;
mod stdio;
mod subscribe;
pub mod ws;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use dsh_protocol::{SessionId, UserContent};
use jsonrpsee::server::ConnectionId;
use jsonrpsee::types::{ErrorObjectOwned, Params};
use jsonrpsee::{Extensions, RpcModule};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::AgentError;
use crate::mcp::{McpServerConfig, McpTransport};
use crate::permission::Approvals;
use hub::{ConnId, Hub, Opening};

pub use stdio::serve as serve_stdio;

/// The SDK protocol's version (`initialize`'s `protocolVersion`; 3 added
/// `session/search`).
pub const PROTOCOL_VERSION: u32 = 3;

/// `dsh sdk`'s flags.
#[derive(Debug, Clone, Default)]
pub struct SdkArgs {
    /// Serve WebSocket here instead of stdio.
    pub listen: Option<SocketAddr>,
    /// The bearer token every WebSocket connection must send.
    pub token: Option<String>,
}

/// `dsh sdk`'s command line as written (clap parses it).
/// [`SdkFlags::into_args`] makes the [`SdkArgs`].
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SdkFlags {
    /// Serve the API over WebSocket at this address instead of stdio
    /// (`localhost:PORT` is 127.0.0.1; port 0 picks a free one)
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen)]
    pub listen: Option<SocketAddr>,
    /// Every WebSocket connection must send `Authorization: Bearer $VAR`
    /// (needed off loopback; the variable is removed from dsh's
    /// environment)
    #[arg(long, value_name = "VAR")]
    pub token_env: Option<String>,
}

impl SdkFlags {
    /// The server these flags ask for, reading the token from the named
    /// environment variable (and removing it: call this before any thread
    /// starts).
    ///
    /// # Errors
    /// A usage error, as a message: a missing token, or a non-loopback
    /// address without one.
    pub fn into_args(self) -> Result<SdkArgs, String> {
        let mut parsed = SdkArgs {
            listen: self.listen,
            token: None,
        };
        if let Some(name) = self.token_env {
            let token = std::env::var(&name).ok().filter(|token| !token.is_empty());
            parsed.token =
                Some(token.ok_or_else(|| {
                    format!("--token-env {name}: the variable {name} is not set")
                })?);
            // Read once, before any thread starts: no child (a command, a
            // language server, an MCP server) inherits it, whatever its
            // name.
            std::env::remove_var(&name);
        }
        match (parsed.listen, &parsed.token) {
            (Some(addr), None) if !addr.ip().is_loopback() => Err(format!(
                "--listen {addr} is not a loopback address: anyone who can reach it could run commands as you; add --token-env VAR (every connection must then send `Authorization: Bearer <token>`)"
            )),
            (None, Some(_)) => Err("--token-env needs --listen".to_owned()),
            _ => Ok(parsed),
        }
    }
}

/// `--listen`'s value: an IP address and port, or `localhost:PORT`
/// (127.0.0.1; no other name is looked up).
fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    text.rsplit_once(':')
        .filter(|(host, _)| host.eq_ignore_ascii_case("localhost"))
        .and_then(|(_, port)| port.parse::<u16>().ok())
        .map(|port| SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port)))
        .ok_or_else(|| {
            "give an address and port, such as 127.0.0.1:7777 or localhost:7777".to_owned()
        })
}

/// An agent error as a JSON-RPC error: dsh's code and message in `data`.
pub(crate) fn rpc_error(error: &AgentError) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(error.rpc_code(), error.to_string(), Some(error.rpc_data()))
}

fn invalid(message: String) -> ErrorObjectOwned {
    rpc_error(&AgentError::InvalidParams(message))
}

/// The params as `T`; absent params are `{}`.
fn parse<T: DeserializeOwned>(params: &Params<'_>) -> Result<T, ErrorObjectOwned> {
    serde_json::from_str(params.as_str().unwrap_or("{}"))
        .map_err(|err| invalid(format!("invalid params: {err}")))
}

fn conn(ext: &Extensions) -> ConnId {
    ext.get::<ConnectionId>().map_or(0, |id| id.0)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InitializeParams {
    #[serde(default)]
    client_info: Option<Value>,
}

/// `session/new`'s, `session/resume`'s and `session/fork`'s settings.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct OpenParams {
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    session_id: Option<SessionId>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    thought_level: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    approvals: Option<String>,
    #[serde(default)]
    mcp_servers: Vec<McpServerParam>,
}

/// An MCP server: a command, or a URL.
#[derive(Deserialize)]
#[serde(untagged, deny_unknown_fields)]
enum McpServerParam {
    Stdio {
        name: String,
        command: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
    Http {
        name: String,
        url: String,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
}

impl OpenParams {
    fn opening(self) -> Result<Opening, ErrorObjectOwned> {
        let approvals = match self.approvals.as_deref() {
            None => Approvals::Never,
            // `sandboxed` is `dsh run`'s, which refuses it where the kernel
            // cannot sandbox commands.
            Some(text) => Approvals::parse(text)
                .filter(|approvals| *approvals != Approvals::Sandboxed)
                .ok_or_else(|| {
                    invalid(format!(
                        "approvals {text:?}: use never, edits, all or client"
                    ))
                })?,
        };
        let mcp_servers = self
            .mcp_servers
            .into_iter()
            .map(|server| match server {
                McpServerParam::Stdio {
                    name,
                    command,
                    args,
                    env,
                } => McpServerConfig {
                    name,
                    transport: McpTransport::Stdio {
                        command,
                        args,
                        env: env.into_iter().collect(),
                        cwd: None,
                    },
                },
                McpServerParam::Http { name, url, headers } => McpServerConfig {
                    name,
                    transport: McpTransport::Http {
                        url,
                        headers: headers.into_iter().collect(),
                    },
                },
            })
            .collect();
        Ok(Opening {
            approvals,
            model: self.model,
            thought_level: self.thought_level,
            mode: self.mode,
            mcp_servers,
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SessionParams {
    session_id: SessionId,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SubscribeParams {
    session_id: SessionId,
    #[serde(default)]
    from_seq: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PromptParams {
    session_id: SessionId,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    content: Option<Vec<UserContent>>,
    /// `queue` (the default) or `steer`, when a turn runs.
    #[serde(default)]
    delivery: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RespondParams {
    session_id: SessionId,
    request_id: String,
    option_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AnswerParams {
    session_id: SessionId,
    request_id: String,
    answers: Vec<AnswerItem>,
}

/// One question's answer: the labels chosen, and free text.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerItem {
    id: String,
    #[serde(default)]
    selected: Vec<String>,
    #[serde(default)]
    custom: Option<String>,
}

impl From<AnswerItem> for dsh_protocol::question::QuestionAnswer {
    fn from(item: AnswerItem) -> Self {
        dsh_protocol::question::QuestionAnswer {
            id: item.id,
            selected: item.selected,
            custom: item.custom,
            note: None,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListParams {
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    cursor: Option<String>,
    /// List subagents' sessions too.
    #[serde(default)]
    include_subagents: bool,
}

type Answer = Result<Value, ErrorObjectOwned>;

fn answer(result: Result<Value, AgentError>) -> Answer {
    result.map_err(|error| rpc_error(&error))
}

/// The API: every method, once, for every transport.
///
/// # Panics
/// Never: the method names are distinct constants.
pub fn module(hub: Arc<Hub>) -> RpcModule<Hub> {
    let mut module = RpcModule::from_arc(hub);
    let registered = register(&mut module);
    // The names are constants; a clash is a bug caught by every test.
    registered.unwrap_or_else(|err| unreachable!("SDK method registration: {err}"));
    module
}

fn register(module: &mut RpcModule<Hub>) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    module.register_method("initialize", |params, _hub, _ext| -> Answer {
        let params: InitializeParams = parse(&params)?;
        if let Some(client) = params.client_info {
            tracing::info!(%client, "SDK client");
        }
        Ok(json!({
            "serverInfo": { "name": "dsh", "version": crate::VERSION },
            "protocolVersion": PROTOCOL_VERSION,
        }))
    })?;
    module.register_async_method("session/new", |params, hub, ext| async move {
        let params: OpenParams = parse(&params)?;
        if params.session_id.is_some() {
            return Err(invalid(
                "session/new takes no sessionId; use session/resume".to_owned(),
            ));
        }
        let cwd = params
            .cwd
            .clone()
            .ok_or_else(|| invalid("missing field `cwd`".to_owned()))?;
        let opening = params.opening()?;
        answer(
            hub.new_session(cwd, opening, conn(&ext))
                .await
                .map(|session| json!({ "sessionId": session.id })),
        )
    })?;
    module.register_async_method("session/fork", |params, hub, ext| async move {
        let params: OpenParams = parse(&params)?;
        let id = params
            .session_id
            .clone()
            .ok_or_else(|| invalid("missing field `sessionId`".to_owned()))?;
        let cwd = params.cwd.clone();
        let opening = params.opening()?;
        answer(
            hub.fork(&id, cwd, opening, conn(&ext))
                .await
                .map(|session| json!({ "sessionId": session.id })),
        )
    })?;
    module.register_async_method("session/resume", |params, hub, ext| async move {
        let params: OpenParams = parse(&params)?;
        if params.cwd.is_some() {
            return Err(invalid(
                "session/resume takes no cwd: the session keeps its own".to_owned(),
            ));
        }
        let id = params
            .session_id
            .clone()
            .ok_or_else(|| invalid("missing field `sessionId`".to_owned()))?;
        let opening = params.opening()?;
        answer(
            hub.resume(&id, opening, conn(&ext))
                .await
                .map(|session| json!({ "sessionId": session.id })),
        )
    })?;
    module.register_subscription(
        "session/subscribe",
        "session.event",
        "session/unsubscribe",
        |params, pending, hub, ext| async move {
            match parse::<SubscribeParams>(&params) {
                Ok(params) => {
                    subscribe::serve(hub, params.session_id, params.from_seq, pending, conn(&ext))
                        .await;
                }
                Err(err) => pending.reject(err).await,
            }
        },
    )?;
    module.register_async_method("session/prompt", |params, hub, ext| async move {
        let params: PromptParams = parse(&params)?;
        let content = match (params.text, params.content) {
            (Some(text), None) => vec![UserContent::text(text)],
            (None, Some(content)) => content,
            _ => return Err(invalid("give either `text` or `content`".to_owned())),
        };
        let delivery = match params.delivery.as_deref() {
            None => crate::session::PromptDelivery::Queue,
            Some(word) => {
                crate::session::PromptDelivery::parse(word).map_err(|e| invalid(e.to_string()))?
            }
        };
        answer(
            hub.prompt(&params.session_id, content, delivery, conn(&ext))
                .await
                .map(|message_id| json!({ "messageId": message_id })),
        )
    })?;
    module.register_method("session/interrupt", |params, hub, _ext| -> Answer {
        let params: SessionParams = parse(&params)?;
        hub.interrupt(&params.session_id);
        Ok(json!({}))
    })?;
    module.register_method("session/respond", |params, hub, _ext| -> Answer {
        let params: RespondParams = parse(&params)?;
        answer(
            hub.respond(&params.session_id, &params.request_id, &params.option_id)
                .map(|()| json!({})),
        )
    })?;
    module.register_method("session/answer", |params, hub, _ext| -> Answer {
        let params: AnswerParams = parse(&params)?;
        let answers = params.answers.into_iter().map(Into::into).collect();
        answer(
            hub.answer(&params.session_id, &params.request_id, answers)
                .map(|()| json!({})),
        )
    })?;
    module.register_async_method("session/list", |params, hub, _ext| async move {
        let params: ListParams = parse(&params)?;
        let page = hub
            .agent
            .list_sessions(
                params.cwd.as_deref(),
                params.cursor.as_deref(),
                params.include_subagents,
            )
            .await
            .map_err(|error| rpc_error(&error))?;
        let sessions: Vec<Value> = page
            .sessions
            .into_iter()
            .map(|session| {
                let mut listed = json!({
                    "sessionId": session.id,
                    "cwd": session.cwd,
                    "roots": session.roots,
                    "title": session.title,
                    "updatedAt": session.updated_at,
                });
                // Its unfinished goal, when it has one.
                if let Some(goal) = session.goal {
                    listed["goal"] = json!(goal);
                }
                listed
            })
            .collect();
        Ok::<_, ErrorObjectOwned>(json!({ "sessions": sessions, "nextCursor": page.next_cursor }))
    })?;
    search::register(module)?;
    module.register_async_method("session/close", |params, hub, _ext| async move {
        let params: SessionParams = parse(&params)?;
        answer(hub.close(&params.session_id).await.map(|()| json!({})))
    })?;
    module.register_async_method("session/delete", |params, hub, _ext| async move {
        let params: SessionParams = parse(&params)?;
        answer(hub.delete(&params.session_id).await.map(|()| json!({})))
    })?;
    module.register_method("shutdown", |_params, hub, _ext| -> Answer {
        tracing::info!("shutdown requested");
        hub.stop.cancel();
        Ok(json!({}))
    })?;
    Ok(())
}
