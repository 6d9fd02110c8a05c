//! A `tools/call` result made into an outcome: text and resources for the
//! model (whole: the tool run caps it and spills the rest, see
//! `tools::spill::cap_output`), each block shown in the editor as its own
//! content (capped), images attached for image-capable models.

use dsh_protocol::tool::{ToolContent, ToolOutcome, ToolView};
use dsh_protocol::{ErrorCode, UserContent};

/// A text block the editor shows.
const MAX_RESULT_BYTES: usize = 64 * 1024;
/// Images shown in the editor per result (base64 bytes); the model still
/// gets every image.
const MAX_SHOWN_IMAGE_BYTES: usize = 4 * 1024 * 1024;

/// Turns a `CallToolResult` (as JSON) into an outcome: text and resources
/// for the model (whole), images attached for image-capable models.
pub fn render(result: serde_json::Value) -> ToolOutcome {
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
    let is_error = result["isError"].as_bool().unwrap_or(false);
    let mut outcome = if is_error {
        ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            if text.is_empty() {
                "The MCP tool reported an error.".to_owned()
            } else {
                text
            },
        )
    } else {
        if shown.is_empty() {
            shown.push(ToolContent::Text { text: text.clone() });
        }
        // Long text blocks are capped (the model's copy is capped and
        // spilled by the run).
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
