//! Scripted model responses: the JSONL format the replay provider plays and
//! the mock OpenAI-compatible server in the tests serves. One line is one
//! model call. See `docs/testing.md` for the format.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One scripted model call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptEntry {
    /// Stream chunks, in order.
    #[serde(default)]
    pub chunks: Vec<ScriptChunk>,
    /// Append `count` text chunks of `text` after `chunks` (large streams).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<Repeat>,
    /// OpenAI-style usage for the final chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<serde_json::Value>,
    /// `finish_reason`: stop, length, tool_calls, content_filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<String>,
    /// Answer with this HTTP status and no stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// `Retry-After` header value with `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<String>,
    /// Error body with `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Pause before each chunk, ms.
    #[serde(default)]
    pub delay_ms: u64,
    /// After this many chunks, stop sending but keep the connection open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hang_after: Option<usize>,
    /// After this many chunks, close the connection without `[DONE]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_after: Option<usize>,
    /// Raw SSE `data:` payloads sent instead of generated ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raw: Vec<String>,
    /// Mock server only: stream the request's last user message back in
    /// this many chunks (cross-talk checks under load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub echo_chunks: Option<usize>,
    /// Mock server only: when the request ends with the user's message,
    /// call `read` on the file named by its first word; once the tool result
    /// is there, echo the user's message, `" | "` and the result (in
    /// `echo_chunks` chunks). Load tests with tools, independent of order.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub echo_read: bool,
    /// Mock server only: reset the connection without answering.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
    /// Mock server only: write every SSE event in its own TCP write, this
    /// many microseconds apart (0: back to back), as a provider streaming
    /// tokens does. The default batches large streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace_us: Option<u64>,
}

/// A run of identical text chunks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repeat {
    /// Text of each chunk.
    pub text: String,
    /// How many.
    pub count: usize,
}

/// One chunk of a scripted stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptChunk {
    /// Visible text.
    Text(String),
    /// Reasoning text.
    Reasoning(String),
    /// A tool-call fragment.
    ToolCall {
        /// Position.
        #[serde(default)]
        index: usize,
        /// Call id.
        #[serde(default)]
        id: Option<String>,
        /// Tool name.
        #[serde(default)]
        name: Option<String>,
        /// Arguments fragment.
        #[serde(default)]
        arguments: String,
    },
}

impl ScriptEntry {
    /// Parses a JSONL script (blank lines and `//` comment lines skipped).
    ///
    /// # Errors
    /// A line that is not a valid entry, with its number.
    pub fn parse_script(text: &str) -> Result<Vec<ScriptEntry>, String> {
        text.lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty() && !line.trim_start().starts_with("//"))
            .map(|(index, line)| {
                serde_json::from_str(line)
                    .map_err(|err| format!("script line {}: {err}", index + 1))
            })
            .collect()
    }

    /// All chunks, `repeat` expanded.
    pub fn all_chunks(&self) -> impl Iterator<Item = ScriptChunk> + '_ {
        let repeated = self.repeat.iter().flat_map(|repeat| {
            std::iter::repeat_n(ScriptChunk::Text(repeat.text.clone()), repeat.count)
        });
        self.chunks.iter().cloned().chain(repeated)
    }

    /// The per-chunk pause.
    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.delay_ms)
    }

    /// The SSE `data:` payloads for this entry, as an OpenAI-compatible
    /// server would send them (without the final `[DONE]`).
    pub fn sse_payloads(&self) -> Vec<String> {
        self.sse_payload_iter().collect()
    }

    /// The same payloads, made as they are taken (a large script's first
    /// event need not wait for the rest to be encoded).
    pub fn sse_payload_iter(&self) -> Box<dyn Iterator<Item = String> + Send + '_> {
        if !self.raw.is_empty() {
            return Box::new(self.raw.iter().cloned());
        }
        let chunks = self.all_chunks().map(|chunk| {
            let delta = match chunk {
                ScriptChunk::Text(text) => serde_json::json!({ "content": text }),
                ScriptChunk::Reasoning(text) => serde_json::json!({ "reasoning_content": text }),
                ScriptChunk::ToolCall { index, id, name, arguments } => {
                    let mut call = serde_json::json!({ "index": index, "function": { "arguments": arguments } });
                    if let Some(id) = id {
                        call["id"] = id.into();
                        call["type"] = "function".into();
                    }
                    if let Some(name) = name {
                        call["function"]["name"] = name.into();
                    }
                    serde_json::json!({ "tool_calls": [call] })
                }
            };
            chunk_json(delta, None)
        });
        let finish = self.finish.clone().unwrap_or_else(|| "stop".to_owned());
        let tail = std::iter::once(chunk_json(serde_json::json!({}), Some(&finish))).chain(
            self.usage.as_ref().map(|usage| {
                serde_json::json!({ "id": "mock", "object": "chat.completion.chunk", "choices": [], "usage": usage }).to_string()
            }),
        );
        Box::new(chunks.chain(tail))
    }
}

fn chunk_json(delta: serde_json::Value, finish: Option<&str>) -> String {
    serde_json::json!({
        "id": "mock",
        "object": "chat.completion.chunk",
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
    })
    .to_string()
}
