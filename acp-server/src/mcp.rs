//! MCP servers the editor passes in `session/new` / `session/load`, as agent
//! tools, through `rmcp`'s client. Each server's tools become model tools
//! named `mcp__<server>__<tool>`; calls go through the same permission
//! policy and presentation as built-in tools.
//!
//! This first cut serves stdio servers (started in parallel with a timeout,
//! in their own process group with a scrubbed environment plus the env the
//! client gave, reaped on close); HTTP servers are reported as not yet
//! supported.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use dsh_protocol::tool::{ToolContent, ToolView};
use dsh_protocol::{ErrorCode, UserContent};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use tokio_util::sync::CancellationToken;

use crate::model::ToolSchema;
use crate::tools::Outcome;

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
    },
    /// Streamable HTTP.
    Http {
        /// Endpoint.
        url: String,
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

struct Connection {
    name: String,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, ()>>>,
}

/// A session's MCP servers and their tools.
#[derive(Default)]
pub struct McpHub {
    connections: Vec<Connection>,
    tools: Vec<McpTool>,
}

const START_TIMEOUT: Duration = Duration::from_secs(15);
const CALL_TIMEOUT: Duration = Duration::from_secs(120);
const MAX_RESULT_BYTES: usize = 64 * 1024;

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

async fn connect(
    config: &McpServerConfig,
    cwd: &std::path::Path,
) -> Result<RunningService<RoleClient, ()>, String> {
    match &config.transport {
        McpTransport::Http { url } => {
            Err(format!("HTTP MCP servers are not supported yet ({url})"))
        }
        McpTransport::Stdio { command, args, env } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args)
                .current_dir(cwd)
                .env_clear()
                .envs(dsh_lsp_bridge::process::scrubbed_env())
                .envs(env.iter().cloned())
                .process_group(0)
                .kill_on_drop(true);
            let (transport, _stderr) = TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|err| format!("cannot start {command}: {err}"))?;
            ().serve(transport)
                .await
                .map_err(|err| format!("the MCP handshake failed: {err}"))
        }
    }
}

impl McpHub {
    /// Starts every server in parallel (each bounded by a timeout) and lists
    /// their tools. Returns the hub and one message per server that failed.
    pub async fn start(
        configs: Vec<McpServerConfig>,
        cwd: &std::path::Path,
    ) -> (Arc<McpHub>, Vec<String>) {
        let mut names: BTreeMap<String, usize> = BTreeMap::new();
        let unique: Vec<String> = configs
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
            .collect();
        let started = futures::future::join_all(configs.iter().map(|config| async move {
            match tokio::time::timeout(START_TIMEOUT, connect(config, cwd)).await {
                Ok(result) => result,
                Err(_) => Err(format!(
                    "it did not start within {} s",
                    START_TIMEOUT.as_secs()
                )),
            }
        }))
        .await;
        let mut hub = McpHub::default();
        let mut failures = Vec::new();
        for ((config, name), result) in configs.iter().zip(unique).zip(started) {
            let service = match result {
                Ok(service) => service,
                Err(reason) => {
                    failures.push(format!(
                        "MCP server \"{}\" is unavailable: {reason}",
                        config.name
                    ));
                    continue;
                }
            };
            let listed = tokio::time::timeout(START_TIMEOUT, service.list_all_tools()).await;
            let tools = match listed {
                Ok(Ok(tools)) => tools,
                Ok(Err(err)) => {
                    failures.push(format!(
                        "MCP server \"{}\" did not list its tools: {err}",
                        config.name
                    ));
                    Vec::new()
                }
                Err(_) => {
                    failures.push(format!(
                        "MCP server \"{}\" did not list its tools in time",
                        config.name
                    ));
                    Vec::new()
                }
            };
            let index = hub.connections.len();
            for tool in tools {
                let schema = serde_json::Value::Object((*tool.input_schema).clone());
                if schema.get("type").and_then(|t| t.as_str()) != Some("object") {
                    tracing::warn!(server = %name, tool = %tool.name, "skipping MCP tool: its input schema is not an object");
                    continue;
                }
                let tool_name = sanitize(&tool.name);
                hub.tools.push(McpTool {
                    model_name: format!("mcp__{name}__{tool_name}"),
                    server: name.clone(),
                    tool: tool.name.to_string(),
                    description: tool.description.as_deref().unwrap_or("").to_owned(),
                    schema,
                    index,
                });
            }
            hub.connections.push(Connection {
                name,
                service: tokio::sync::Mutex::new(Some(service)),
            });
        }
        (Arc::new(hub), failures)
    }

    /// Schemas for the model.
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.tools
            .iter()
            .map(|tool| ToolSchema {
                name: tool.model_name.clone(),
                description: format!("[MCP server {}] {}", tool.server, tool.description),
                parameters: tool.schema.clone(),
            })
            .collect()
    }

    /// A tool by its model name.
    pub fn tool(&self, model_name: &str) -> Option<McpTool> {
        self.tools
            .iter()
            .find(|tool| tool.model_name == model_name)
            .cloned()
    }

    /// Calls a tool; cancellation drops the request (the client side sends
    /// the MCP cancel notification) and a timeout bounds it.
    pub async fn call(
        &self,
        tool: &McpTool,
        arguments: &str,
        cancel: &CancellationToken,
    ) -> Outcome {
        let Some(connection) = self.connections.get(tool.index) else {
            return Outcome::failed(ErrorCode::Internal, "unknown MCP server");
        };
        let arguments =
            match serde_json::from_str::<serde_json::Value>(if arguments.trim().is_empty() {
                "{}"
            } else {
                arguments
            }) {
                Ok(serde_json::Value::Object(map)) => map,
                _ => {
                    return Outcome::failed(
                        ErrorCode::InvalidToolArgs,
                        format!("Arguments for {} must be a JSON object.", tool.model_name),
                    )
                }
            };
        let mut request = CallToolRequestParams::new(tool.tool.clone());
        request.arguments = Some(arguments);
        let guard = connection.service.lock().await;
        let Some(service) = guard.as_ref() else {
            return Outcome::failed(
                ErrorCode::Internal,
                format!("MCP server {} is stopped.", connection.name),
            );
        };
        let result = tokio::select! {
            result = tokio::time::timeout(CALL_TIMEOUT, service.call_tool(request)) => result,
            () = cancel.cancelled() => return Outcome::failed(ErrorCode::ToolAborted, "Cancelled by the user while it ran; its effect is unknown."),
        };
        let result = match result {
            Err(_) => {
                return Outcome::failed(
                    ErrorCode::Internal,
                    format!(
                        "{} did not answer within {} s.",
                        tool.model_name,
                        CALL_TIMEOUT.as_secs()
                    ),
                )
            }
            Ok(Err(err)) => {
                return Outcome::failed(
                    ErrorCode::Internal,
                    format!("MCP server {} failed the call: {err}", connection.name),
                )
            }
            Ok(Ok(result)) => result,
        };
        let value = serde_json::to_value(&result).unwrap_or_default();
        render(value)
    }

    /// Stops every server (children are killed with their transports).
    pub async fn shutdown(&self) {
        for connection in &self.connections {
            if let Some(service) = connection.service.lock().await.take() {
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
fn render(result: serde_json::Value) -> Outcome {
    let mut text = String::new();
    let mut attachments = Vec::new();
    for block in result["content"].as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or("")),
            Some("image") => {
                let mime = block["mimeType"].as_str().unwrap_or("image/png").to_owned();
                text.push_str(&format!("[image: {mime}, attached after the tool results]"));
                attachments.push(UserContent::Image {
                    mime_type: mime,
                    data: block["data"].as_str().unwrap_or("").to_owned(),
                });
            }
            Some("resource") => {
                let resource = &block["resource"];
                text.push_str(&format!(
                    "<resource uri=\"{}\">\n{}\n</resource>",
                    resource["uri"].as_str().unwrap_or(""),
                    resource["text"].as_str().unwrap_or("[binary]")
                ));
            }
            Some("resource_link") => text.push_str(&format!(
                "[resource_link uri={}]",
                block["uri"].as_str().unwrap_or("")
            )),
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
        Outcome::failed(
            ErrorCode::InvalidToolArgs,
            if text.is_empty() {
                "The MCP tool reported an error.".to_owned()
            } else {
                text.clone()
            },
        )
    } else {
        Outcome::ok(
            text.clone(),
            ToolView {
                content: vec![ToolContent::Text { text }],
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
}
