//! MCP servers the editor passes in `session/new` / `session/load`, as agent
//! tools, through `rmcp`'s client. Each server's tools become model tools
//! named `mcp__<server>__<tool>`; calls go through the same permission
//! policy and presentation as built-in tools.
//!
//! Transports: stdio (a child under the command guard with a scrubbed
//! environment plus the env the client gave; everything it starts is
//! killed when it exits or is stopped, `stdio.rs`) and Streamable HTTP
//! (`url` plus `headers`). Servers start in parallel with a timeout; a
//! server that fails is reported and the rest work. Tool lists are
//! collected within bounds and named without collisions (`list.rs`).
//! `tools/list_changed` marks a server's tool list stale; it is listed
//! again in the background before the next model call, which waits for it
//! at most [`REFRESH_WAIT`] (never past a cancel) and otherwise offers the
//! last known list. A stdio server that exits is restarted with backoff,
//! at most [`MAX_RESTARTS`] times per session.

mod list;
mod render;
mod settings;
mod stdio;

pub use list::sanitize;
pub use settings::{ConfiguredServers, RawMcpServer};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_protocol::model::ToolSchema;
use dsh_protocol::tool::ToolOutcome;
use dsh_protocol::ErrorCode;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{NotificationContext, Peer, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio_util::sync::CancellationToken;

use list::ListError;

/// How to reach one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking MCP on stdio.
    Stdio {
        /// Program.
        command: String,
        /// Arguments.
        args: Vec<String>,
        /// Environment the client asked for (over a scrubbed copy of dsh's).
        env: Vec<(String, String)>,
        /// Working directory (default: the session's).
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// Endpoint.
        url: String,
        /// Headers sent with every request.
        headers: Vec<(String, String)>,
    },
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// The name the client gave.
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
}

/// The servers as the session log records them: names, commands and
/// URLs, never the values of `env` or `headers` (they may hold secrets).
pub fn recorded(servers: &[McpServerConfig]) -> serde_json::Value {
    let names = |pairs: &[(String, String)]| -> Vec<serde_json::Value> {
        pairs
            .iter()
            .map(|(name, _)| serde_json::json!({ "name": name }))
            .collect()
    };
    servers
        .iter()
        .map(|server| match &server.transport {
            McpTransport::Stdio {
                command, args, env, ..
            } => serde_json::json!({
                "name": server.name,
                "command": command,
                "args": args,
                "env": names(env),
            }),
            McpTransport::Http { url, headers } => serde_json::json!({
                "type": "http",
                "name": server.name,
                "url": url,
                "headers": names(headers),
            }),
        })
        .collect()
}

/// A tool offered to the model.
#[derive(Debug, Clone)]
pub struct McpTool {
    /// `mcp__<server>__<tool>`.
    pub model_name: String,
    /// The server's (sanitized) name.
    pub server: String,
    /// The tool's own name.
    pub tool: String,
    /// Description (cut past [`list::MAX_DESCRIPTION_BYTES`]).
    pub description: String,
    /// Input schema.
    pub schema: serde_json::Value,
    index: usize,
}

/// Receives server notifications; `tools/list_changed` marks the list stale.
#[derive(Clone, Default)]
struct Watcher {
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }
}

type Service = RunningService<RoleClient, Watcher>;

#[derive(Default)]
struct Live {
    service: Option<Service>,
    /// A stdio server's process: the guard and everything under it.
    process: Option<stdio::Process>,
    /// Restarts used so far.
    restarts: u32,
    /// When the next restart may happen (backoff after an exit).
    restart_at: Option<Instant>,
    /// Set by [`McpHub::shutdown`]: never restart.
    stopped: bool,
    /// Why the server was failed (its tool list went past a bound): it is
    /// stopped, offers nothing and is never restarted.
    failed: Option<String>,
}

/// What stopping a server takes down.
type Parts = (Option<Service>, Option<stdio::Process>);

impl Live {
    /// The service and the process, taken to be stopped.
    fn take_parts(&mut self) -> Parts {
        (self.service.take(), self.process.take())
    }
}

struct Connection {
    config: McpServerConfig,
    name: String,
    cwd: PathBuf,
    spawner: dsh_process::Spawner,
    watcher: Watcher,
    live: tokio::sync::Mutex<Live>,
    tools: std::sync::RwLock<Vec<McpTool>>,
    /// A background refresh is under way (one at a time).
    refreshing: AtomicBool,
}

/// A session's MCP servers and their tools.
#[derive(Default)]
pub struct McpHub {
    connections: Vec<Arc<Connection>>,
    /// Background refreshes and restarts, aborted by [`McpHub::shutdown`].
    background: std::sync::Mutex<tokio::task::JoinSet<()>>,
}

const START_TIMEOUT: Duration = Duration::from_secs(15);
const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a model call waits for the refreshes it started; past it (or
/// a cancel) the step goes on with the last known lists.
pub const REFRESH_WAIT: Duration = Duration::from_millis(500);
/// How long a server's transport may take to close when it is stopped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How many times a session restarts a stdio server that exited.
pub const MAX_RESTARTS: u32 = 3;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);

fn backoff(restart: u32) -> Duration {
    FIRST_BACKOFF * 2u32.saturating_pow(restart.min(6))
}

fn is_down(service: &Service) -> bool {
    service.is_closed() || service.peer().is_transport_closed()
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Connects to a server: its service and, for stdio, its process.
async fn connect(
    config: &McpServerConfig,
    cwd: &Path,
    spawner: &dsh_process::Spawner,
    watcher: Watcher,
) -> Result<(Service, Option<stdio::Process>), String> {
    let handshake = async {
        match &config.transport {
            McpTransport::Http { url, headers } => {
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| format!("the header name {name:?} is not valid"))?;
                    let value = reqwest::header::HeaderValue::from_str(value)
                        .map_err(|_| format!("the value of header {name} is not valid"))?;
                    custom.insert(name, value);
                }
                let transport = StreamableHttpClientTransport::from_config(
                    StreamableHttpClientTransportConfig::with_uri(url.as_str())
                        .custom_headers(custom),
                );
                let service = watcher
                    .serve(transport)
                    .await
                    .map_err(|err| format!("the MCP handshake with {url} failed: {err}"))?;
                Ok((service, None))
            }
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd: own_cwd,
            } => {
                let stdio::Started {
                    process,
                    stdout,
                    stdin,
                } = stdio::start(
                    spawner,
                    command,
                    args,
                    env,
                    own_cwd.as_deref().unwrap_or(cwd),
                )?;
                // Dropped on a timeout below, the process's guard sweeps.
                match watcher.serve((stdout, stdin)).await {
                    Ok(service) => Ok((service, Some(process))),
                    Err(err) => {
                        process.stop().await;
                        Err(format!("the MCP handshake failed: {err}"))
                    }
                }
            }
        }
    };
    match tokio::time::timeout(START_TIMEOUT, handshake).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "it did not start within {} s",
            START_TIMEOUT.as_secs()
        )),
    }
}

/// Stops a server: its transport closed (a stdio server's stdin), then its
/// process and everything under it.
async fn stop((service, process): Parts, name: &str) {
    if let Some(service) = service {
        if tokio::time::timeout(CLOSE_TIMEOUT, service.cancel())
            .await
            .is_err()
        {
            tracing::warn!(server = %name, "MCP server did not close in {} s", CLOSE_TIMEOUT.as_secs());
        }
    }
    if let Some(process) = process {
        process.stop().await;
    }
}

impl Connection {
    /// Lists the server's tools and installs them, clearing the stale mark
    /// first (a change announced meanwhile marks it again). Returns what
    /// was cut or skipped. Past a bound the known list is emptied; the
    /// caller fails the server ([`Connection::fail`]).
    async fn list(&self, index: usize, peer: &Peer<RoleClient>) -> Result<Vec<String>, ListError> {
        self.watcher.tools_changed.store(false, Ordering::SeqCst);
        let listed = list::list(peer, &self.name, index).await;
        let mut tools = self.tools.write().unwrap_or_else(|p| p.into_inner());
        match listed {
            Ok(listed) => {
                *tools = listed.tools;
                for note in &listed.notes {
                    tracing::warn!(server = %self.name, "{note}");
                }
                Ok(listed.notes)
            }
            // Past a bound the caller fails the server, which clears them.
            Err(err) => Err(err),
        }
    }

    /// Marks the server failed for `reason`; returns what to stop.
    fn fail(&self, live: &mut Live, reason: &str) -> Parts {
        tracing::warn!(server = %self.name, "MCP server failed: {reason}");
        live.failed = Some(reason.to_owned());
        self.tools
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        live.take_parts()
    }

    /// [`Connection::fail`], then stops the server once `live` is let go.
    async fn fail_and_stop(&self, mut live: tokio::sync::MutexGuard<'_, Live>, reason: &str) {
        let parts = self.fail(&mut live, reason);
        drop(live);
        stop(parts, &self.name).await;
    }

    /// Whether a background refresh has something to do: the list is
    /// stale, or the server is down and may be restarted.
    fn due(&self) -> bool {
        if self.watcher.tools_changed.load(Ordering::SeqCst) {
            return true;
        }
        let Ok(live) = self.live.try_lock() else {
            return false;
        };
        !live.stopped
            && live.failed.is_none()
            && live.service.as_ref().is_none_or(is_down)
            && live.restart_at.is_none_or(|due| due <= Instant::now())
    }

    /// A background refresh: restarts the server if it is down and its
    /// backoff has passed, lists its tools if they are stale.
    async fn bring_up_to_date(&self, index: usize) {
        let peer = match self.peer(index, false).await {
            Ok(peer) => peer,
            Err(reason) => {
                tracing::debug!(server = %self.name, "no refresh: {reason}");
                return;
            }
        };
        if !self.watcher.tools_changed.load(Ordering::SeqCst) {
            return;
        }
        match self.list(index, &peer).await {
            Ok(_) => tracing::info!(server = %self.name, "MCP tool list refreshed"),
            Err(ListError::Failed(reason)) => {
                tracing::warn!(server = %self.name, "{reason}; the last known tools stay offered")
            }
            Err(ListError::Bound(over)) => {
                self.fail_and_stop(self.live.lock().await, &over.0).await;
            }
        }
    }

    /// A running service's peer, restarting an exited stdio server when its
    /// backoff allows (`wait`: sleep until it does).
    async fn peer(&self, index: usize, wait: bool) -> Result<Peer<RoleClient>, String> {
        let mut live = self.live.lock().await;
        if live.stopped {
            return Err(format!("MCP server {} is stopped", self.name));
        }
        if let Some(reason) = &live.failed {
            return Err(format!("MCP server {} failed: {reason}", self.name));
        }
        if let Some(service) = live.service.as_ref() {
            if !is_down(service) {
                return Ok(service.peer().clone());
            }
            tracing::warn!(server = %self.name, "MCP server exited");
            // Its guard has swept (or is sweeping) what it left: reap it.
            let parts = live.take_parts();
            let name = self.name.clone();
            tokio::spawn(async move { stop(parts, &name).await });
            live.restart_at = Some(Instant::now() + backoff(live.restarts));
        }
        let restartable = matches!(self.config.transport, McpTransport::Stdio { .. });
        if !restartable || live.restarts >= MAX_RESTARTS {
            return Err(if restartable {
                format!(
                    "MCP server {} exited and was already restarted {MAX_RESTARTS} times",
                    self.name
                )
            } else {
                format!("MCP server {} is not reachable", self.name)
            });
        }
        let due = live.restart_at.unwrap_or_else(Instant::now);
        if due > Instant::now() {
            if !wait {
                return Err(format!("MCP server {} is restarting", self.name));
            }
            tokio::time::sleep_until(due.into()).await;
        }
        live.restarts += 1;
        let attempt = live.restarts;
        match connect(&self.config, &self.cwd, &self.spawner, self.watcher.clone()).await {
            Ok((service, process)) => {
                tracing::info!(server = %self.name, attempt, "MCP server restarted");
                let peer = service.peer().clone();
                live.service = Some(service);
                live.process = process;
                live.restart_at = None;
                match self.list(index, &peer).await {
                    Ok(_) => Ok(peer),
                    Err(ListError::Failed(reason)) => {
                        tracing::warn!(server = %self.name, "{reason}");
                        Ok(peer)
                    }
                    Err(ListError::Bound(over)) => {
                        self.fail_and_stop(live, &over.0).await;
                        Err(format!("MCP server {} failed: {}", self.name, over.0))
                    }
                }
            }
            Err(reason) => {
                live.restart_at = Some(Instant::now() + backoff(attempt));
                Err(format!(
                    "MCP server {} exited and restart {attempt} of {MAX_RESTARTS} failed: {reason}",
                    self.name
                ))
            }
        }
    }
}

impl McpHub {
    /// Starts every server in parallel (each bounded by a timeout) and lists
    /// their tools. Returns the hub and the notices for the user: servers
    /// that failed, servers renamed, tools cut or skipped.
    pub async fn start(
        configs: Vec<McpServerConfig>,
        cwd: &Path,
        spawner: &dsh_process::Spawner,
    ) -> (Arc<McpHub>, Vec<String>) {
        crate::install_tls();
        let (names, mut notices) = list::server_names(&configs);
        let connections: Vec<Arc<Connection>> = configs
            .into_iter()
            .zip(names)
            .map(|(config, name)| {
                Arc::new(Connection {
                    config,
                    name,
                    cwd: cwd.to_path_buf(),
                    spawner: spawner.clone(),
                    watcher: Watcher::default(),
                    live: tokio::sync::Mutex::new(Live::default()),
                    tools: std::sync::RwLock::new(Vec::new()),
                    refreshing: AtomicBool::new(false),
                })
            })
            .collect();
        let started = futures::future::join_all(connections.iter().enumerate().map(
            |(index, connection)| async move {
                let (service, process) = connect(
                    &connection.config,
                    cwd,
                    &connection.spawner,
                    connection.watcher.clone(),
                )
                .await?;
                let peer = service.peer().clone();
                let mut live = connection.live.lock().await;
                live.service = Some(service);
                live.process = process;
                match connection.list(index, &peer).await {
                    Ok(notes) => Ok(notes),
                    Err(ListError::Failed(reason)) => Err(reason),
                    Err(ListError::Bound(over)) => {
                        connection.fail_and_stop(live, &over.0).await;
                        Err(over.0)
                    }
                }
            },
        ))
        .await;
        for (connection, result) in connections.iter().zip(started) {
            match result {
                Ok(notes) => notices.extend(notes),
                Err(reason) => notices.push(format!(
                    "MCP server \"{}\" is unavailable: {reason}",
                    connection.config.name
                )),
            }
        }
        let hub = McpHub {
            connections,
            background: std::sync::Mutex::default(),
        };
        (Arc::new(hub), notices)
    }

    /// Brings the tool lists up to date before a model call, in the
    /// background: lists again the servers that sent `tools/list_changed`
    /// and restarts exited stdio servers whose backoff has passed. Waits
    /// for the refreshes it started at most [`REFRESH_WAIT`] and never past
    /// `cancel`; a refresh still running keeps going, and until it ends the
    /// last known list is offered (and no second one starts).
    pub async fn refresh(&self, cancel: &CancellationToken) {
        let mut started = Vec::new();
        {
            let mut background = lock(&self.background);
            while background.try_join_next().is_some() {}
            for (index, connection) in self.connections.iter().enumerate() {
                if !connection.due() || connection.refreshing.swap(true, Ordering::SeqCst) {
                    continue;
                }
                let (done, finished) = tokio::sync::oneshot::channel::<()>();
                let connection = connection.clone();
                background.spawn(async move {
                    connection.bring_up_to_date(index).await;
                    connection.refreshing.store(false, Ordering::SeqCst);
                    let _ = done.send(());
                });
                started.push(finished);
            }
        }
        if started.is_empty() {
            return;
        }
        tokio::select! {
            _ = tokio::time::timeout(REFRESH_WAIT, futures::future::join_all(started)) => {}
            () = cancel.cancelled() => {}
        }
    }

    /// Schemas for the model.
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.all_tools()
            .into_iter()
            .map(|tool| ToolSchema {
                name: tool.model_name.clone(),
                description: format!("[MCP server {}] {}", tool.server, tool.description),
                parameters: tool.schema,
            })
            .collect()
    }

    fn all_tools(&self) -> Vec<McpTool> {
        self.connections
            .iter()
            .flat_map(|connection| {
                connection
                    .tools
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
            })
            .collect()
    }

    /// A tool by its model name.
    pub fn tool(&self, model_name: &str) -> Option<McpTool> {
        self.all_tools()
            .into_iter()
            .find(|tool| tool.model_name == model_name)
    }

    /// Calls a tool; cancellation drops the request (the client side sends
    /// the MCP cancel notification) and a timeout bounds it.
    pub async fn call(
        &self,
        tool: &McpTool,
        arguments: &str,
        cancel: &CancellationToken,
    ) -> ToolOutcome {
        let Some(connection) = self.connections.get(tool.index) else {
            return ToolOutcome::failed(ErrorCode::Internal, "unknown MCP server");
        };
        let arguments =
            match serde_json::from_str::<serde_json::Value>(if arguments.trim().is_empty() {
                "{}"
            } else {
                arguments
            }) {
                Ok(serde_json::Value::Object(map)) => map,
                _ => {
                    return ToolOutcome::failed(
                        ErrorCode::InvalidToolArgs,
                        format!("Arguments for {} must be a JSON object.", tool.model_name),
                    )
                }
            };
        let mut request = CallToolRequestParams::new(tool.tool.clone());
        request.arguments = Some(arguments);
        let peer = tokio::select! {
            peer = connection.peer(tool.index, true) => peer,
            () = cancel.cancelled() => return ToolOutcome::failed(ErrorCode::ToolAborted, "Cancelled by the user before it ran."),
        };
        let peer = match peer {
            Ok(peer) => peer,
            Err(reason) => return ToolOutcome::failed(ErrorCode::Internal, format!("{reason}.")),
        };
        let result = tokio::select! {
            result = tokio::time::timeout(CALL_TIMEOUT, peer.call_tool(request)) => result,
            () = cancel.cancelled() => return ToolOutcome::failed(ErrorCode::ToolAborted, "Cancelled by the user while it ran; its effect is unknown."),
        };
        let result = match result {
            Err(_) => {
                return ToolOutcome::failed(
                    ErrorCode::Internal,
                    format!(
                        "{} did not answer within {} s.",
                        tool.model_name,
                        CALL_TIMEOUT.as_secs()
                    ),
                )
            }
            Ok(Err(err)) => {
                // The transport closes just after the pending calls fail.
                for _ in 0..20 {
                    if peer.is_transport_closed() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let message = if peer.is_transport_closed() {
                    let live = connection.live.lock().await;
                    let left = MAX_RESTARTS.saturating_sub(live.restarts);
                    format!(
                        "MCP server {} exited during the call, so its effect is unknown ({err}). {}",
                        connection.name,
                        if left > 0 && matches!(connection.config.transport, McpTransport::Stdio { .. }) {
                            format!("It is restarted for the next call ({left} restarts left).")
                        } else {
                            "It is not restarted.".to_owned()
                        }
                    )
                } else {
                    format!("MCP server {} failed the call: {err}", connection.name)
                };
                return ToolOutcome::failed(ErrorCode::Internal, message);
            }
            Ok(Ok(result)) => result,
        };
        // A call may change the tool list. The server's `list_changed`
        // notification reaches the handler on another task and can land
        // after this result, so a server that announces such notifications
        // is listed again before the next model call either way.
        let announces = peer.peer_info().is_some_and(|info| {
            info.capabilities
                .tools
                .as_ref()
                .is_some_and(|tools| tools.list_changed == Some(true))
        });
        if announces {
            connection
                .watcher
                .tools_changed
                .store(true, Ordering::SeqCst);
        }
        let value = serde_json::to_value(&result).unwrap_or_default();
        render::render(value)
    }

    /// Stops every server (with everything their processes started) and
    /// prevents restarts; background refreshes are aborted first (one may
    /// hold a server while it starts).
    pub async fn shutdown(&self) {
        lock(&self.background).abort_all();
        futures::future::join_all(self.connections.iter().map(|connection| async move {
            let parts = {
                let mut live = connection.live.lock().await;
                live.stopped = true;
                live.take_parts()
            };
            stop(parts, &connection.name).await;
        }))
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_backoff_doubles() {
        assert_eq!(backoff(0), Duration::from_millis(250));
        assert_eq!(backoff(2), Duration::from_millis(1000));
    }
}
