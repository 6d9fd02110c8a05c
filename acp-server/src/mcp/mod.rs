//! MCP servers the editor passes in `session/new` / `session/load`, as agent
//! tools, through `rmcp`'s client. Each server's tools become model tools
//! named `mcp__<server>__<tool>`; calls go through the same permission
//! policy and presentation as built-in tools.
//!
//! Transports: stdio (a child in its own process group with a scrubbed
//! environment plus the env the client gave, reaped on close) and Streamable
//! HTTP (`url` plus `headers`). Servers start in parallel with a timeout; a
//! server that fails is reported and the rest work. `tools/list_changed`
//! marks a server's tool list stale and it is listed again before the next
//! model call. A stdio server that exits is restarted with backoff, at most
//! [`MAX_RESTARTS`] times per session.

mod settings;

pub use settings::{ConfiguredServers, RawMcpServer};

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_protocol::tool::{ToolContent, ToolOutcome, ToolView};
use dsh_protocol::{ErrorCode, UserContent};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio_util::sync::CancellationToken;

use dsh_protocol::model::ToolSchema;

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
    /// Description.
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
    /// Restarts used so far.
    restarts: u32,
    /// When the next restart may happen (backoff after an exit).
    restart_at: Option<Instant>,
    /// Set by [`McpHub::shutdown`]: never restart.
    stopped: bool,
}

struct Connection {
    config: McpServerConfig,
    name: String,
    cwd: PathBuf,
    spawner: dsh_process::Spawner,
    watcher: Watcher,
    live: tokio::sync::Mutex<Live>,
    tools: std::sync::RwLock<Vec<McpTool>>,
}

/// A session's MCP servers and their tools.
#[derive(Default)]
pub struct McpHub {
    connections: Vec<Connection>,
}

const START_TIMEOUT: Duration = Duration::from_secs(15);
const CALL_TIMEOUT: Duration = Duration::from_secs(120);
const MAX_RESULT_BYTES: usize = 64 * 1024;
/// Images shown in the editor per result (base64 bytes); the model still
/// gets every image.
const MAX_SHOWN_IMAGE_BYTES: usize = 4 * 1024 * 1024;
/// How many times a session restarts a stdio server that exited.
pub const MAX_RESTARTS: u32 = 3;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);

/// `[A-Za-z0-9_-]{1,32}`: other characters become `_`, long names are cut.
pub fn sanitize(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(32)
        .collect();
    if cleaned.is_empty() {
        "server".to_owned()
    } else {
        cleaned
    }
}

/// Unique sanitized names: a repeated name gets `_2`, `_3`… in order.
fn unique_names(configs: &[McpServerConfig]) -> Vec<String> {
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    configs
        .iter()
        .map(|config| {
            let base = sanitize(&config.name);
            let count = names.entry(base.clone()).or_insert(0);
            *count += 1;
            if *count == 1 {
                base
            } else {
                let suffix = format!("_{count}");
                format!("{}{suffix}", &base[..base.len().min(32 - suffix.len())])
            }
        })
        .collect()
}

fn backoff(restart: u32) -> Duration {
    FIRST_BACKOFF * 2u32.saturating_pow(restart.min(6))
}

fn is_down(service: &Service) -> bool {
    service.is_closed() || service.peer().is_transport_closed()
}

async fn connect(
    config: &McpServerConfig,
    cwd: &Path,
    spawner: &dsh_process::Spawner,
    watcher: Watcher,
) -> Result<Service, String> {
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
                watcher
                    .serve(transport)
                    .await
                    .map_err(|err| format!("the MCP handshake with {url} failed: {err}"))
            }
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd: own_cwd,
            } => {
                let mut cmd = spawner.command(command);
                cmd.args(args)
                    .current_dir(own_cwd.as_deref().unwrap_or(cwd))
                    .envs(env.iter().cloned());
                let (transport, _stderr) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .map_err(|err| format!("cannot start {command}: {err}"))?;
                watcher
                    .serve(transport)
                    .await
                    .map_err(|err| format!("the MCP handshake failed: {err}"))
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

impl Connection {
    /// Lists the server's tools (replacing the known list) and clears the
    /// stale mark. Tools with unusable schemas are skipped with a log line.
    async fn list(&self, index: usize, service: &Service) -> Result<(), String> {
        self.watcher.tools_changed.store(false, Ordering::SeqCst);
        let tools = match tokio::time::timeout(START_TIMEOUT, service.list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(err)) => return Err(format!("it did not list its tools: {err}")),
            Err(_) => return Err("it did not list its tools in time".to_owned()),
        };
        let mut seen = std::collections::BTreeSet::new();
        let mut listed = Vec::new();
        for tool in tools {
            let schema = serde_json::Value::Object((*tool.input_schema).clone());
            if schema.get("type").and_then(|t| t.as_str()) != Some("object") {
                tracing::warn!(server = %self.name, tool = %tool.name, "skipping MCP tool: its input schema is not an object");
                continue;
            }
            let model_name = format!("mcp__{}__{}", self.name, sanitize(&tool.name));
            if !seen.insert(model_name.clone()) {
                tracing::warn!(server = %self.name, tool = %tool.name, "skipping MCP tool: its sanitized name collides with an earlier tool");
                continue;
            }
            listed.push(McpTool {
                model_name,
                server: self.name.clone(),
                tool: tool.name.to_string(),
                description: tool.description.as_deref().unwrap_or("").to_owned(),
                schema,
                index,
            });
        }
        *self.tools.write().unwrap_or_else(|p| p.into_inner()) = listed;
        Ok(())
    }

    /// A running service's peer, restarting an exited stdio server when its
    /// backoff allows (`wait`: sleep until it does).
    async fn peer(
        &self,
        index: usize,
        wait: bool,
    ) -> Result<rmcp::service::Peer<RoleClient>, String> {
        let mut live = self.live.lock().await;
        if live.stopped {
            return Err(format!("MCP server {} is stopped", self.name));
        }
        if let Some(service) = live.service.as_ref() {
            if !is_down(service) {
                return Ok(service.peer().clone());
            }
            tracing::warn!(server = %self.name, "MCP server exited");
            live.service = None;
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
            Ok(service) => {
                tracing::info!(server = %self.name, attempt, "MCP server restarted");
                let listed = self.list(index, &service).await;
                if let Err(reason) = listed {
                    tracing::warn!(server = %self.name, "{reason}");
                }
                let peer = service.peer().clone();
                live.service = Some(service);
                live.restart_at = None;
                Ok(peer)
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
    /// their tools. Returns the hub and one message per server that failed.
    pub async fn start(
        configs: Vec<McpServerConfig>,
        cwd: &Path,
        spawner: &dsh_process::Spawner,
    ) -> (Arc<McpHub>, Vec<String>) {
        crate::install_tls();
        let names = unique_names(&configs);
        let connections: Vec<Connection> = configs
            .into_iter()
            .zip(names)
            .map(|(config, name)| Connection {
                config,
                name,
                cwd: cwd.to_path_buf(),
                spawner: spawner.clone(),
                watcher: Watcher::default(),
                live: tokio::sync::Mutex::new(Live::default()),
                tools: std::sync::RwLock::new(Vec::new()),
            })
            .collect();
        let started = futures::future::join_all(connections.iter().enumerate().map(
            |(index, connection)| async move {
                let service = connect(
                    &connection.config,
                    cwd,
                    &connection.spawner,
                    connection.watcher.clone(),
                )
                .await?;
                let listed = connection.list(index, &service).await;
                connection.live.lock().await.service = Some(service);
                listed
            },
        ))
        .await;
        let failures = connections
            .iter()
            .zip(started)
            .filter_map(|(connection, result)| {
                result.err().map(|reason| {
                    format!(
                        "MCP server \"{}\" is unavailable: {reason}",
                        connection.config.name
                    )
                })
            })
            .collect();
        (Arc::new(McpHub { connections }), failures)
    }

    /// Brings the tool lists up to date before a model call: lists again the
    /// servers that sent `tools/list_changed`, and restarts exited stdio
    /// servers whose backoff has passed.
    pub async fn refresh(&self) {
        for (index, connection) in self.connections.iter().enumerate() {
            let peer = connection.peer(index, false).await;
            if peer.is_ok() && connection.watcher.tools_changed.load(Ordering::SeqCst) {
                let live = connection.live.lock().await;
                if let Some(service) = live.service.as_ref() {
                    match connection.list(index, service).await {
                        Ok(()) => {
                            tracing::info!(server = %connection.name, "MCP tool list refreshed")
                        }
                        Err(reason) => tracing::warn!(server = %connection.name, "{reason}"),
                    }
                }
            }
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
        render(value)
    }

    /// Stops every server (children are killed with their transports) and
    /// prevents restarts.
    pub async fn shutdown(&self) {
        for connection in &self.connections {
            let service = {
                let mut live = connection.live.lock().await;
                live.stopped = true;
                live.service.take()
            };
            if let Some(service) = service {
                if tokio::time::timeout(Duration::from_secs(2), service.cancel())
                    .await
                    .is_err()
                {
                    tracing::warn!(server = %connection.name, "MCP server did not stop in 2 s");
                }
            }
        }
    }
}

/// Turns a `CallToolResult` (as JSON) into an outcome: text and resources
/// for the model (capped), images attached for image-capable models.
fn render(result: serde_json::Value) -> ToolOutcome {
    let mut text = String::new();
    let mut attachments = Vec::new();
    // What the editor shows: each block as its own kind of content.
    let mut shown = Vec::new();
    let mut shown_bytes = 0usize;
    for block in result["content"].as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("text") => {
                let piece = block["text"].as_str().unwrap_or("");
                text.push_str(piece);
                shown.push(ToolContent::Text {
                    text: piece.to_owned(),
                });
            }
            Some("image") => {
                let mime = block["mimeType"].as_str().unwrap_or("image/png").to_owned();
                let data = block["data"].as_str().unwrap_or("").to_owned();
                text.push_str(&format!("[image: {mime}, attached after the tool results]"));
                shown_bytes += data.len();
                shown.push(if shown_bytes <= MAX_SHOWN_IMAGE_BYTES {
                    ToolContent::Image {
                        mime_type: mime.clone(),
                        data: data.clone(),
                    }
                } else {
                    ToolContent::Text {
                        text: format!("[image: {mime}, {} bytes, too large to show]", data.len()),
                    }
                });
                attachments.push(UserContent::Image {
                    mime_type: mime,
                    data,
                });
            }
            Some("resource") => {
                let resource = &block["resource"];
                let uri = resource["uri"].as_str().unwrap_or("").to_owned();
                let body = resource["text"].as_str();
                text.push_str(&format!(
                    "<resource uri=\"{uri}\">\n{}\n</resource>",
                    body.unwrap_or("[binary]")
                ));
                shown.push(ToolContent::Resource {
                    uri,
                    text: body
                        .map(|b| dsh_protocol::content::head_bytes(b, MAX_RESULT_BYTES).to_owned()),
                });
            }
            Some("resource_link") => {
                let uri = block["uri"].as_str().unwrap_or("").to_owned();
                text.push_str(&format!("[resource_link uri={uri}]"));
                shown.push(ToolContent::Resource { uri, text: None });
            }
            other => text.push_str(&format!("[{} content]", other.unwrap_or("unknown"))),
        }
        text.push('\n');
    }
    if text.is_empty() {
        if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
            text = structured.to_string();
        }
    }
    if text.len() > MAX_RESULT_BYTES {
        text = format!(
            "{}\n[result truncated: {} bytes in all]",
            dsh_protocol::content::head_bytes(&text, MAX_RESULT_BYTES),
            text.len()
        );
    }
    let is_error = result["isError"].as_bool().unwrap_or(false);
    let mut outcome = if is_error {
        ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            if text.is_empty() {
                "The MCP tool reported an error.".to_owned()
            } else {
                text.clone()
            },
        )
    } else {
        if shown.is_empty() {
            shown.push(ToolContent::Text { text: text.clone() });
        }
        // Long text blocks are capped like the model's copy.
        for block in &mut shown {
            if let ToolContent::Text { text } = block {
                if text.len() > MAX_RESULT_BYTES {
                    *text = format!(
                        "{}\n[truncated: {} bytes in all]",
                        dsh_protocol::content::head_bytes(text, MAX_RESULT_BYTES),
                        text.len()
                    );
                }
            }
        }
        ToolOutcome::ok(
            text,
            ToolView {
                content: shown,
                ..ToolView::default()
            },
        )
    };
    outcome.attachments = attachments;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized() {
        assert_eq!(sanitize("my server.v2"), "my_server_v2");
        assert_eq!(sanitize(&"x".repeat(40)).len(), 32);
        assert_eq!(sanitize(""), "server");
    }

    #[test]
    fn repeated_names_get_deterministic_suffixes() {
        let config = |name: &str| McpServerConfig {
            name: name.to_owned(),
            transport: McpTransport::Http {
                url: "http://127.0.0.1:1/mcp".to_owned(),
                headers: Vec::new(),
            },
        };
        let names = unique_names(&[
            config("docs"),
            config("docs"),
            config("do cs"),
            config(&"y".repeat(40)),
            config(&"y".repeat(40)),
        ]);
        assert_eq!(
            names,
            [
                "docs",
                "docs_2",
                "do_cs",
                &"y".repeat(32),
                &format!("{}_2", "y".repeat(30))
            ]
        );
    }

    #[test]
    fn restart_backoff_doubles() {
        assert_eq!(backoff(0), Duration::from_millis(250));
        assert_eq!(backoff(2), Duration::from_millis(1000));
    }
}
