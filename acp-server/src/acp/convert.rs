//! Conversions between ACP schema types and the agent's own vocabulary.

use agent_client_protocol::v1::schema as acp;
use dsh_protocol::log::PlanEntry;
use dsh_protocol::tool::{ToolContent, ToolKind, ToolStatus};
use dsh_protocol::UserContent;

use crate::agent::{AgentUpdate, ConfigCategory, ConfigOption};
use crate::error::AgentError;

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

/// Session settings → ACP config options.
pub fn config_options(options: Vec<ConfigOption>) -> Vec<acp::SessionConfigOption> {
    options
        .into_iter()
        .map(|option| {
            let values: Vec<acp::SessionConfigSelectOption> = option
                .values
                .into_iter()
                .map(|value| {
                    acp::SessionConfigSelectOption::new(value.id, value.name)
                        .description(value.description)
                })
                .collect();
            acp::SessionConfigOption::select(option.id, option.name, option.current, values)
                .description(option.description.to_owned())
                .category(match option.category {
                    ConfigCategory::Mode => acp::SessionConfigOptionCategory::Mode,
                    ConfigCategory::Model => acp::SessionConfigOptionCategory::Model,
                    ConfigCategory::ThoughtLevel => acp::SessionConfigOptionCategory::ThoughtLevel,
                })
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

fn tool_status(status: ToolStatus) -> acp::ToolCallStatus {
    match status {
        ToolStatus::Pending => acp::ToolCallStatus::Pending,
        ToolStatus::InProgress => acp::ToolCallStatus::InProgress,
        ToolStatus::Completed => acp::ToolCallStatus::Completed,
        ToolStatus::Failed => acp::ToolCallStatus::Failed,
    }
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
    let priority = match entry.priority.as_str() {
        "high" => acp::PlanEntryPriority::High,
        "low" => acp::PlanEntryPriority::Low,
        _ => acp::PlanEntryPriority::Medium,
    };
    let status = match entry.status.as_str() {
        "in_progress" => acp::PlanEntryStatus::InProgress,
        "completed" => acp::PlanEntryStatus::Completed,
        _ => acp::PlanEntryStatus::Pending,
    };
    acp::PlanEntry::new(entry.content, priority, status)
}

/// An agent update → a `session/update` payload.
pub fn session_update(update: AgentUpdate) -> acp::SessionUpdate {
    match update {
        AgentUpdate::UserChunk(content) => {
            acp::SessionUpdate::UserMessageChunk(acp::ContentChunk::new(content_block(content)))
        }
        AgentUpdate::MessageChunk(text) => acp::SessionUpdate::AgentMessageChunk(
            acp::ContentChunk::new(acp::ContentBlock::Text(acp::TextContent::new(text))),
        ),
        AgentUpdate::ThoughtChunk(text) => acp::SessionUpdate::AgentThoughtChunk(
            acp::ContentChunk::new(acp::ContentBlock::Text(acp::TextContent::new(text))),
        ),
        AgentUpdate::Usage { used, size } => {
            acp::SessionUpdate::UsageUpdate(acp::UsageUpdate::new(used, size))
        }
        AgentUpdate::Title(title) => {
            acp::SessionUpdate::SessionInfoUpdate(acp::SessionInfoUpdate::new().title(title))
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
                acp::ToolCall::new(call_id, view.title)
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
        } => {
            let mut fields = acp::ToolCallUpdateFields::new().status(tool_status(status));
            if !view.title.is_empty() {
                fields = fields.title(view.title.clone());
            }
            if !view.locations.is_empty() {
                fields = fields.locations(locations(&view.locations));
            }
            if !view.content.is_empty() {
                fields = fields.content(tool_content(view.content));
            }
            acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(call_id, fields))
        }
        AgentUpdate::Plan(entries) => acp::SessionUpdate::Plan(acp::Plan::new(
            entries.into_iter().map(plan_entry).collect(),
        )),
    }
}
