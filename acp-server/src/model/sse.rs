//! Server-sent events and OpenAI-compatible stream chunks.
//!
//! Hand-written rather than a crate: the decoder is forty lines, and owning
//! it lets the HTTP client apply the idle timeout per read and map every
//! malformed input to a stable error code.

use dsh_protocol::model::{FinishReason, StreamEvent, Usage};
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use super::ModelError;

/// Splits a byte stream into SSE `data` payloads, one at a time: bytes
/// are buffered as they arrive and decoded only as far as the consumer
/// asks, so the first event of a large read goes out before the rest is
/// parsed.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Where the undecoded bytes start.
    pos: usize,
    data: String,
    has_data: bool,
}

impl SseDecoder {
    /// Buffers bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        // Drop what was decoded before the buffer grows again.
        if self.pos > 0 && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete event's payload, if the buffer holds one.
    ///
    /// # Errors
    /// A line that is not UTF-8.
    pub fn next_payload(&mut self) -> Result<Option<String>, ModelError> {
        while let Some(at) = self.buf[self.pos..].iter().position(|b| *b == b'\n') {
            let end = self.pos + at;
            let mut line = &self.buf[self.pos..end];
            self.pos = end + 1;
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            let line = std::str::from_utf8(line).map_err(|_| {
                ModelError::new(
                    ErrorCode::ModelMalformedResponse,
                    "the model stream contained invalid UTF-8",
                )
            })?;
            if line.is_empty() {
                if self.has_data {
                    self.has_data = false;
                    return Ok(Some(std::mem::take(&mut self.data)));
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                let value = value.strip_prefix(' ').unwrap_or(value);
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // `event:`, `id:`, `retry:` and `:` comments carry nothing we use.
        }
        Ok(None)
    }

    /// Feeds bytes; every complete event payload is pushed to `out`.
    ///
    /// # Errors
    /// A line that is not UTF-8.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<String>) -> Result<(), ModelError> {
        self.push(bytes);
        while let Some(payload) = self.next_payload()? {
            out.push(payload);
        }
        Ok(())
    }

    /// Flushes a final event that had no trailing blank line.
    pub fn finish(&mut self, out: &mut Vec<String>) {
        if self.has_data {
            out.push(std::mem::take(&mut self.data));
            self.has_data = false;
        }
    }
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<CachedDetails>,
    #[serde(default)]
    completion_tokens_details: Option<ReasoningDetails>,
}

#[derive(Deserialize)]
struct CachedDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ReasoningDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// Turns chunk payloads into [`StreamEvent`]s. Usage and finish are held
/// until the end so that usage always precedes finish and nothing follows it.
#[derive(Debug, Default)]
pub struct ChunkParser {
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    done: bool,
}

impl ChunkParser {
    /// Whether `[DONE]` was seen.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Parses one payload.
    ///
    /// # Errors
    /// Malformed JSON, an in-band provider error, an unusable finish reason.
    pub fn parse(&mut self, data: &str, out: &mut Vec<StreamEvent>) -> Result<(), ModelError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|err| {
            ModelError::new(
                ErrorCode::ModelMalformedResponse,
                format!("the model stream sent a chunk that is not valid JSON ({err}); is the base URL an OpenAI-compatible endpoint?"),
            )
        })?;
        if let Some(error) = chunk.error {
            return Err(ModelError::from_stream(&error));
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.reasoning_content.filter(|t| !t.is_empty()) {
                    out.push(StreamEvent::ReasoningDelta(text));
                }
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    out.push(StreamEvent::TextDelta(text));
                }
                for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
                    let function = call.function.unwrap_or(WireFunction {
                        name: None,
                        arguments: None,
                    });
                    out.push(StreamEvent::ToolCallDelta {
                        index: call.index.unwrap_or(position),
                        id: call.id,
                        name: function.name,
                        arguments: function.arguments.unwrap_or_default(),
                    });
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish =
                    Some(match reason.as_str() {
                        "stop" => FinishReason::Stop,
                        "length" => FinishReason::MaxTokens,
                        "tool_calls" | "function_call" => FinishReason::ToolCalls,
                        "content_filter" => FinishReason::ContentFilter,
                        "insufficient_system_resource" => return Err(ModelError::new(
                            ErrorCode::ModelServer,
                            "the provider ran out of capacity for this request; try again shortly",
                        )),
                        other => {
                            return Err(ModelError::new(
                                ErrorCode::ModelMalformedResponse,
                                format!(
                            "the provider ended the stream with an unknown finish reason {other:?}"
                        ),
                            ))
                        }
                    });
            }
        }
        if let Some(usage) = chunk.usage {
            let cached = usage
                .prompt_cache_hit_tokens
                .or(usage.prompt_tokens_details.and_then(|d| d.cached_tokens))
                .unwrap_or(0)
                .min(usage.prompt_tokens);
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens - cached,
                output_tokens: usage.completion_tokens,
                cache_read_tokens: cached,
                reasoning_tokens: usage
                    .completion_tokens_details
                    .and_then(|d| d.reasoning_tokens)
                    .unwrap_or(0),
            });
        }
        Ok(())
    }

    /// Ends the stream: emits usage then finish.
    ///
    /// # Errors
    /// The stream ended without a finish reason (`model.stream_closed`).
    pub fn end(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ModelError> {
        let Some(finish) = self.finish.take() else {
            return Err(ModelError::new(
                ErrorCode::ModelStreamClosed,
                "the model stream ended before the reply was complete (connection dropped); send the prompt again to retry",
            ));
        };
        if let Some(usage) = self.usage.take() {
            out.push(StreamEvent::Usage(usage));
        }
        out.push(StreamEvent::Finish(finish));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoder_handles_split_lines_crlf_and_comments() {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        decoder
            .feed(b": keep-alive\r\ndata: {\"a\"", &mut out)
            .unwrap();
        assert!(out.is_empty());
        decoder
            .feed(b":1}\r\n\r\ndata: x\ndata: y\n\n", &mut out)
            .unwrap();
        assert_eq!(out, vec!["{\"a\":1}".to_owned(), "x\ny".to_owned()]);
    }

    #[test]
    fn parser_orders_usage_before_finish_and_subtracts_cache() {
        let mut parser = ChunkParser::default();
        let mut out = Vec::new();
        parser.parse(r#"{"choices":[{"delta":{"reasoning_content":"","content":"hi"},"finish_reason":"stop"}]}"#, &mut out).unwrap();
        parser.parse(r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":4,"prompt_cache_hit_tokens":6,"completion_tokens_details":{"reasoning_tokens":2}}}"#, &mut out).unwrap();
        parser.parse("[DONE]", &mut out).unwrap();
        parser.end(&mut out).unwrap();
        assert_eq!(
            out,
            vec![
                StreamEvent::TextDelta("hi".into()),
                StreamEvent::Usage(Usage {
                    input_tokens: 4,
                    output_tokens: 4,
                    cache_read_tokens: 6,
                    reasoning_tokens: 2
                }),
                StreamEvent::Finish(FinishReason::Stop),
            ]
        );
    }

    #[test]
    fn missing_finish_is_stream_closed() {
        let mut parser = ChunkParser::default();
        let mut out = Vec::new();
        parser
            .parse(r#"{"choices":[{"delta":{"content":"par"}}]}"#, &mut out)
            .unwrap();
        assert_eq!(
            parser.end(&mut out).unwrap_err().code,
            ErrorCode::ModelStreamClosed
        );
    }
}
