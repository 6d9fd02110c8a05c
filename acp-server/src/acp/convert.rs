//! Conversions between ACP schema types and the agent's own vocabulary, each
//! in one place.

use agent_client_protocol::v1::schema as acp;
use dsh_protocol::log::{ConfigKey, PlanEntry, PlanPriority, PlanStatus, StopReason};
use dsh_protocol::tool::{ToolContent, ToolKind, ToolStatus};
use dsh_protocol::UserContent;

use crate::error::AgentError;
use crate::mcp::{McpServerConfig, McpTransport};
use crate::update::{AgentUpdate, ConfigOption};
use dsh_protocol::Mode;

/// The session an ACP request names, as the core's id.
pub fn session_id(id: &acp::SessionId) -> dsh_protocol::SessionId {
    dsh_protocol::SessionId::new(&*id.0)
}

/// Prompt blocks → user content.
///
/// # Errors
/// Audio (not advertised) and binary embedded resources.
pub fn prompt_content(blocks: Vec<acp::ContentBlock>) -> Result<Vec<UserContent>, AgentError> {
    blocks
        .into_iter()
        .map(|block| match block {
            acp::ContentBlock::Text(text) => Ok(UserContent::Text { text: text.text }),
            acp::ContentBlock::Image(image) => Ok(UserContent::Image { mime_type: image.mime_type, data: image.data }),
            acp::ContentBlock::ResourceLink(link) => Ok(UserContent::ResourceLink { uri: link.uri, name: link.name }),
            acp::ContentBlock::Resource(resource) => match resource.resource {
                acp::EmbeddedResourceResource::TextResourceContents(text) => Ok(UserContent::Resource {
                    uri: text.uri,
                    text: text.text,
                    mime_type: text.mime_type,
                }),
                acp::EmbeddedResourceResource::BlobResourceContents(blob) => Err(AgentError::InvalidParams(format!(
                    "embedded binary resource {} is not supported; attach it as a file link or an image",
                    blob.uri
                ))),
                _ => Err(AgentError::InvalidParams("unsupported embedded resource".to_owned())),
            },
            acp::ContentBlock::Audio(_) => Err(AgentError::InvalidParams(
                "audio prompts are not supported (promptCapabilities.audio is false)".to_owned(),
            )),
            _ => Err(AgentError::InvalidParams("unsupported content block type".to_owned())),
        })
        .collect()
}

/// User content → an ACP content block (for replay).
pub fn content_block(content: UserContent) -> acp::ContentBlock {
    match content {
        UserContent::Text { text } => acp::ContentBlock::Text(acp::TextContent::new(text)),
        UserContent::Image { mime_type, data } => {
            acp::ContentBlock::Image(acp::ImageContent::new(data, mime_type))
        }
        UserContent::ResourceLink { uri, name } => {
            acp::ContentBlock::ResourceLink(acp::ResourceLink::new(name, uri))
        }
        UserContent::Resource {
            uri,
            text,
            mime_type,
        } => acp::ContentBlock::Resource(acp::EmbeddedResource::new(
            acp::EmbeddedResourceResource::TextResourceContents(
                acp::TextResourceContents::new(text, uri).mime_type(mime_type),
            ),
        )),
        _ => acp::ContentBlock::Text(acp::TextContent::new("[unsupported content]")),
    }
}

/// Session settings → ACP config options. An on/off switch is a boolean
/// option for a client that advertised them
/// (`clientCapabilities.session.configOptions.boolean`), else a select of
/// `on` and `off`.
pub fn config_options(options: Vec<ConfigOption>, booleans: bool) -> Vec<acp::SessionConfigOption> {
    options
        .into_iter()
        .map(|option| {
            let category = match option.key {
                ConfigKey::Mode => Some(acp::SessionConfigOptionCategory::Mode),
                ConfigKey::Model => Some(acp::SessionConfigOptionCategory::Model),
                ConfigKey::ThoughtLevel => Some(acp::SessionConfigOptionCategory::ThoughtLevel),
                ConfigKey::Web | ConfigKey::Unknown => None,
            };
            let built = if option.toggle && booleans {
                acp::SessionConfigOption::boolean(
                    option.key.as_str(),
                    option.name,
                    crate::settings::switch(&option.current) == Some(true),
                )
            } else {
                let values: Vec<acp::SessionConfigSelectOption> = option
                    .values
                    .into_iter()
                    .map(|value| {
                        acp::SessionConfigSelectOption::new(value.id, value.name)
                            .description(value.description)
                    })
                    .collect();
                acp::SessionConfigOption::select(
                    option.key.as_str(),
                    option.name,
                    option.current,
                    values,
                )
            };
            built
                .description(option.description.to_owned())
                .category(category)
        })
        .collect()
}

/// Tool kind → ACP tool kind.
pub fn tool_kind(kind: ToolKind) -> acp::ToolKind {
    match kind {
        ToolKind::Read => acp::ToolKind::Read,
        ToolKind::Edit => acp::ToolKind::Edit,
        ToolKind::Delete => acp::ToolKind::Delete,
        ToolKind::Move => acp::ToolKind::Move,
        ToolKind::Search => acp::ToolKind::Search,
        ToolKind::Execute => acp::ToolKind::Execute,
        ToolKind::Fetch => acp::ToolKind::Fetch,
        ToolKind::Think => acp::ToolKind::Think,
        _ => acp::ToolKind::Other,
    }
}

pub(super) fn tool_status(status: ToolStatus) -> acp::ToolCallStatus {
    match status {
        ToolStatus::Pending => acp::ToolCallStatus::Pending,
        ToolStatus::InProgress => acp::ToolCallStatus::InProgress,
        ToolStatus::Completed => acp::ToolCallStatus::Completed,
        ToolStatus::Failed => acp::ToolCallStatus::Failed,
    }
}

/// A finished call's result → ACP `rawOutput` (`{output, error?, jobId?,
/// jobStatus?}`, [`crate::update::RawOutput`]).
pub(super) fn raw_output_value(raw: &crate::update::RawOutput) -> Option<serde_json::Value> {
    serde_json::to_value(raw)
        .inspect_err(|err| tracing::error!(%err, "cannot serialize a rawOutput; left out"))
        .ok()
}

/// Tool-call content → ACP content.
pub fn tool_content(content: Vec<ToolContent>) -> Vec<acp::ToolCallContent> {
    content
        .into_iter()
        .map(|block| match block {
            ToolContent::Text { text } => acp::ToolCallContent::Content(acp::Content::new(
                acp::ContentBlock::Text(acp::TextContent::new(text)),
            )),
            ToolContent::Diff(diff) => acp::ToolCallContent::Diff(
                acp::Diff::new(diff.path, diff.new_text).old_text(diff.old_text),
            ),
            ToolContent::Terminal { terminal_id } => {
                acp::ToolCallContent::Terminal(acp::Terminal::new(terminal_id))
            }
            ToolContent::Image { mime_type, data } => {
                acp::ToolCallContent::Content(acp::Content::new(acp::ContentBlock::Image(
                    acp::ImageContent::new(data, mime_type),
                )))
            }
            ToolContent::Resource {
                uri,
                text: Some(text),
            } => acp::ToolCallContent::Content(acp::Content::new(acp::ContentBlock::Resource(
                acp::EmbeddedResource::new(acp::EmbeddedResourceResource::TextResourceContents(
                    acp::TextResourceContents::new(text, uri),
                )),
            ))),
            ToolContent::Resource { uri, text: None } => {
                let name = uri.rsplit('/').next().unwrap_or(&uri).to_owned();
                acp::ToolCallContent::Content(acp::Content::new(acp::ContentBlock::ResourceLink(
                    acp::ResourceLink::new(name, uri),
                )))
            }
            _ => acp::ToolCallContent::Content(acp::Content::new(acp::ContentBlock::Text(
                acp::TextContent::new(""),
            ))),
        })
        .collect()
}

/// File locations → ACP tool-call locations.
pub fn locations(locations: &[dsh_protocol::tool::FileLocation]) -> Vec<acp::ToolCallLocation> {
    locations
        .iter()
        .map(|location| acp::ToolCallLocation::new(&location.path).line(location.line))
        .collect()
}

fn plan_entry(entry: PlanEntry) -> acp::PlanEntry {
    let priority = match entry.priority {
        PlanPriority::High => acp::PlanEntryPriority::High,
        PlanPriority::Medium => acp::PlanEntryPriority::Medium,
        PlanPriority::Low => acp::PlanEntryPriority::Low,
    };
    let status = match entry.status {
        PlanStatus::Pending => acp::PlanEntryStatus::Pending,
        PlanStatus::InProgress => acp::PlanEntryStatus::InProgress,
        PlanStatus::Completed => acp::PlanEntryStatus::Completed,
    };
    acp::PlanEntry::new(entry.content, priority, status)
}

/// The one stop vocabulary → ACP's.
pub fn stop_reason(stop: StopReason) -> acp::StopReason {
    match stop {
        StopReason::EndTurn => acp::StopReason::EndTurn,
        StopReason::MaxTokens => acp::StopReason::MaxTokens,
        StopReason::MaxTurnRequests => acp::StopReason::MaxTurnRequests,
        StopReason::Refusal => acp::StopReason::Refusal,
        StopReason::Cancelled => acp::StopReason::Cancelled,
    }
}

/// The legacy modes view of the `mode` option, for clients that only know
/// `session/set_mode` (clients with config options use those).
pub fn mode_state(mode: Mode) -> acp::SessionModeState {
    acp::SessionModeState::new(
        mode.as_str(),
        Mode::ALL
            .iter()
            .map(|mode| {
                acp::SessionMode::new(mode.as_str(), mode.name())
                    .description(mode.description().to_owned())
            })
            .collect(),
    )
}

/// The client's MCP servers in the core's terms. SSE servers are refused
/// (not supported, as `mcpCapabilities` says); stdio and HTTP are served.
///
/// # Errors
/// An SSE server, or a transport this version does not know.
pub fn mcp_servers(servers: &[acp::McpServer]) -> Result<Vec<McpServerConfig>, AgentError> {
    servers
        .iter()
        .map(|server| match server {
            acp::McpServer::Stdio(stdio) => Ok(McpServerConfig {
                name: stdio.name.clone(),
                transport: McpTransport::Stdio {
                    command: stdio.command.display().to_string(),
                    args: stdio.args.clone(),
                    env: stdio.env.iter().map(|var| (var.name.clone(), var.value.clone())).collect(),
                    cwd: None,
                },
            }),
            acp::McpServer::Http(http) => Ok(McpServerConfig {
                name: http.name.clone(),
                transport: McpTransport::Http {
                    url: http.url.clone(),
                    headers: http.headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect(),
                },
            }),
            acp::McpServer::Sse(sse) => Err(AgentError::InvalidParams(format!(
                "MCP server \"{}\" uses the SSE transport, which dsh does not support (deprecated in MCP); use its Streamable HTTP endpoint or a stdio server",
                sse.name
            ))),
            _ => Err(AgentError::InvalidParams("unsupported MCP server transport".to_owned())),
        })
        .collect()
}

/// An agent update → a `session/update` payload.
/// `booleans`: the client shows boolean config options
/// ([`config_options`]).
pub fn session_update(update: AgentUpdate, booleans: bool) -> acp::SessionUpdate {
    match update {
        AgentUpdate::UserChunk(content) => {
            acp::SessionUpdate::UserMessageChunk(acp::ContentChunk::new(content_block(content)))
        }
        AgentUpdate::MessageChunk(text, id) => acp::SessionUpdate::AgentMessageChunk(
            acp::ContentChunk::new(acp::ContentBlock::Text(acp::TextContent::new(text)))
                .message_id(id.map(acp::MessageId::new)),
        ),
        AgentUpdate::ThoughtChunk(text, id) => acp::SessionUpdate::AgentThoughtChunk(
            acp::ContentChunk::new(acp::ContentBlock::Text(acp::TextContent::new(text)))
                .message_id(id.map(acp::MessageId::new)),
        ),
        AgentUpdate::Usage { used, size, cost } => acp::SessionUpdate::UsageUpdate(
            acp::UsageUpdate::new(used, size)
                .cost(cost.map(|cost| acp::Cost::new(cost.amount, cost.currency))),
        ),
        AgentUpdate::Title(title, at_ms) => {
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms);
            acp::SessionUpdate::SessionInfoUpdate(
                acp::SessionInfoUpdate::new()
                    .title(title)
                    .updated_at(humantime::format_rfc3339_millis(at).to_string()),
            )
        }
        AgentUpdate::ToolCall {
            call_id,
            arguments,
            view,
            status,
        } => {
            let raw_input = serde_json::from_str::<serde_json::Value>(&arguments)
                .unwrap_or(serde_json::Value::String(arguments));
            let locations = locations(&view.locations);
            acp::SessionUpdate::ToolCall(
                acp::ToolCall::new(call_id.into_string(), view.title)
                    .kind(tool_kind(view.kind.unwrap_or(ToolKind::Other)))
                    .status(tool_status(status))
                    .locations(locations)
                    .content(tool_content(view.content))
                    .raw_input(raw_input),
            )
        }
        AgentUpdate::ToolCallUpdate {
            call_id,
            status,
            view,
            raw_output,
        } => {
            let mut fields = acp::ToolCallUpdateFields::new()
                .status(tool_status(status))
                .raw_output(raw_output.as_deref().and_then(raw_output_value));
            if !view.title.is_empty() {
                fields = fields.title(view.title.clone());
            }
            if !view.locations.is_empty() {
                fields = fields.locations(locations(&view.locations));
            }
            if !view.content.is_empty() {
                fields = fields.content(tool_content(view.content));
            }
            acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(
                call_id.into_string(),
                fields,
            ))
        }
        AgentUpdate::Plan(entries) => acp::SessionUpdate::Plan(acp::Plan::new(
            entries.into_iter().map(plan_entry).collect(),
        )),
        AgentUpdate::ConfigOptions(options) => acp::SessionUpdate::ConfigOptionUpdate(
            acp::ConfigOptionUpdate::new(config_options(options, booleans)),
        ),
        AgentUpdate::Mode(mode) => {
            acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(mode.as_str()))
        }
        AgentUpdate::Commands(commands) => {
            acp::SessionUpdate::AvailableCommandsUpdate(acp::AvailableCommandsUpdate::new(
                commands
                    .into_iter()
                    .map(|command| {
                        acp::AvailableCommand::new(command.name, command.description).input(
                            command.hint.map(|hint| {
                                acp::AvailableCommandInput::Unstructured(
                                    acp::UnstructuredCommandInput::new(hint),
                                )
                            }),
                        )
                    })
                    .collect(),
            ))
        }
    }
}

/// How a prompt is delivered when a turn runs: `_meta.dsh.delivery`
/// (`"queue"`, the default, or `"steer"`).
///
/// # Errors
/// A `delivery` that is not one of those words.
pub(super) fn prompt_delivery(
    meta: Option<&acp::Meta>,
) -> Result<crate::session::PromptDelivery, AgentError> {
    let word = meta
        .and_then(|meta| meta.get("dsh"))
        .and_then(|dsh| dsh.get("delivery"));
    match word {
        None | Some(serde_json::Value::Null) => Ok(crate::session::PromptDelivery::Queue),
        Some(serde_json::Value::String(word)) => crate::session::PromptDelivery::parse(word),
        Some(other) => Err(AgentError::InvalidParams(format!(
            "_meta.dsh.delivery must be \"queue\" or \"steer\", got {other}"
        ))),
    }
}
