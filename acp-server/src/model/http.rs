//! `POST {base}/chat/completions` with `stream: true` for DeepSeek and other
//! OpenAI-compatible endpoints. DeepSeek gets its `thinking` and
//! `reasoning_effort` fields and `reasoning_content` passback on assistant
//! turns that carried tool calls (its API rejects the history otherwise).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use dsh_protocol::model::{ChatMessage, StreamEvent};
use dsh_protocol::{ErrorCode, UserContent};
use futures::StreamExt;
use serde_json::{json, Value};

use super::sse::{ChunkParser, SseDecoder};
use super::{EventStream, ModelError, ModelRequest};
use crate::config::{Config, ProviderKind, ThoughtLevel};

/// The HTTP provider.
pub struct HttpProvider {
    /// Built on the first request: loading the system's root certificates
    /// takes ~8 ms and ~2 MB, which an editor should not pay at every spawn.
    client: std::sync::OnceLock<reqwest::Client>,
    config: Arc<Config>,
}

const USER_AGENT: &str = concat!(
    "dsh/",
    env!("CARGO_PKG_VERSION"),
    " (+https://github.com/dsh-agent/dsh)"
);

impl HttpProvider {
    /// A provider with its own connection pool (created on first use).
    ///
    /// # Errors
    /// None today; kept so a provider that cannot work is refused early.
    pub fn new(config: Arc<Config>) -> Result<Self, String> {
        Ok(HttpProvider {
            client: std::sync::OnceLock::new(),
            config,
        })
    }

    fn client(&self) -> Result<&reqwest::Client, ModelError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        crate::install_tls();
        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .connect_timeout(Duration::from_secs(30))
            .build()
            .map_err(|err| {
                ModelError::new(
                    ErrorCode::ModelTransport,
                    format!("cannot set up HTTPS (the system's root certificates?): {err}"),
                )
            })?;
        Ok(self.client.get_or_init(|| client))
    }

    pub(super) async fn start(&self, request: &ModelRequest) -> Result<EventStream, ModelError> {
        let key = self.config.api_key().ok_or_else(|| {
            ModelError::new(
                ErrorCode::MissingCredential,
                format!(
                    "{} is not set: set it in the environment your editor starts dsh with (for Zed: agent_servers.dsh.env in settings.json)",
                    self.config.api_key_env
                ),
            )
        })?;
        let url = format!("{}/chat/completions", self.config.base_url);
        let body = request_body(request, self.config.provider);
        let mut post = self.client()?.post(&url).bearer_auth(&key);
        if self.config.session_header {
            post = post.header("x-deepseek-harness-session-id", &request.session_id);
        }
        tracing::debug!(%url, model = %request.model.id, messages = request.messages.len(), tools = request.tools.len(), "model request");
        let send = post.json(&body).send();
        let response = match tokio::time::timeout(self.config.request_timeout, send).await {
            Err(_) => {
                return Err(ModelError::new(
                    ErrorCode::ModelTimeout,
                    format!(
                        "the model provider at {} did not answer within {} s; check the network or the base URL",
                        self.config.base_url,
                        self.config.request_timeout.as_secs()
                    ),
                ))
            }
            Ok(Err(err)) => {
                let error = ModelError::new(
                    ErrorCode::ModelTransport,
                    format!("cannot reach the model provider at {}: {}; check the network or DEEPSEEK_BASE_URL", self.config.base_url, error_chain(&err)),
                )
                .redact(&key);
                tracing::debug!(code = %error.code, "model request failed");
                return Err(error);
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        tracing::debug!(status = status.as_u16(), "model response");
        if !status.is_success() {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .and_then(parse_retry_after);
            let body = tokio::time::timeout(Duration::from_secs(10), response.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            let error =
                ModelError::from_status(status.as_u16(), &body, retry_after, &self.config.base_url)
                    .redact(&key);
            tracing::debug!(code = %error.code, status = status.as_u16(), "model request failed");
            return Err(error);
        }
        Ok(event_stream(response, self.config.stream_idle_timeout, key))
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Parses `Retry-After` as seconds (fractions allowed) or an HTTP date.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let when = humantime::parse_rfc3339_weak(value)
        .ok()
        .or_else(|| httpdate(value))?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

fn httpdate(value: &str) -> Option<std::time::SystemTime> {
    // "Sun, 06 Nov 1994 08:49:37 GMT" → "1994-11-06 08:49:37"
    let parts: Vec<&str> = value.split_whitespace().collect();
    if parts.len() != 6 {
        return None;
    }
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[2])?
        + 1;
    humantime::parse_rfc3339_weak(&format!(
        "{}-{month:02}-{:0>2} {}",
        parts[3], parts[1], parts[4]
    ))
    .ok()
}

/// Reads the body with an idle timeout per read, decodes SSE and yields
/// events; the reader task stops when the consumer drops the stream. Error
/// messages never carry the key.
fn event_stream(response: reqwest::Response, idle: Duration, key: String) -> EventStream {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<StreamEvent, ModelError>>(256);
    tokio::spawn(async move {
        let mut body = response.bytes_stream();
        let mut decoder = SseDecoder::default();
        let mut parser = ChunkParser::default();
        let mut payloads = Vec::new();
        let mut events = Vec::new();
        let result: Result<(), ModelError> = async {
            loop {
                let next = tokio::select! {
                    next = tokio::time::timeout(idle, body.next()) => next,
                    () = tx.closed() => return Ok(()),
                };
                let bytes = match next {
                    Err(_) => {
                        return Err(ModelError::new(
                            ErrorCode::ModelTimeout,
                            format!("the model stream sent nothing for {} and was abandoned; send the prompt again to retry", super::human_duration(idle)),
                        ))
                    }
                    Ok(None) => break,
                    Ok(Some(Err(err))) => {
                        return Err(ModelError::new(
                            ErrorCode::ModelStreamClosed,
                            format!("the model stream broke mid-reply ({}); send the prompt again to retry", error_chain(&err)),
                        ))
                    }
                    Ok(Some(Ok(bytes))) => bytes,
                };
                decoder.feed(&bytes, &mut payloads)?;
                for payload in payloads.drain(..) {
                    parser.parse(&payload, &mut events)?;
                }
                for event in events.drain(..) {
                    if tx.send(Ok(event)).await.is_err() {
                        return Ok(());
                    }
                }
                if parser.is_done() {
                    break;
                }
            }
            decoder.finish(&mut payloads);
            for payload in payloads.drain(..) {
                parser.parse(&payload, &mut events)?;
            }
            parser.end(&mut events)?;
            for event in events.drain(..) {
                if tx.send(Ok(event)).await.is_err() {
                    return Ok(());
                }
            }
            Ok(())
        }
        .await;
        if let Err(error) = result {
            let error = error.redact(&key);
            tracing::debug!(code = %error.code, "model stream failed");
            if tx.send(Err(error)).await.is_err() {
                tracing::debug!("model stream consumer left before the error");
            }
        }
    });
    tokio_stream_from(rx)
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Result<StreamEvent, ModelError>>,
) -> EventStream {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
}

/// Builds the JSON body for one request.
pub fn request_body(request: &ModelRequest, kind: ProviderKind) -> Value {
    let deepseek = kind == ProviderKind::Deepseek;
    let thinking = request.thought_level != ThoughtLevel::Off;
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({ "role": "system", "content": request.system }));
    }
    for message in &request.messages {
        messages.push(match message {
            ChatMessage::System(text) => json!({ "role": "system", "content": text }),
            ChatMessage::User(content) => json!({ "role": "user", "content": user_content(content, request.model.images) }),
            ChatMessage::Assistant { text, reasoning, tool_calls } => {
                let mut value = json!({ "role": "assistant", "content": text });
                if !tool_calls.is_empty() {
                    value["tool_calls"] = tool_calls
                        .iter()
                        .map(|call| json!({ "id": call.id, "type": "function", "function": { "name": call.name, "arguments": call.arguments } }))
                        .collect();
                    if deepseek && !reasoning.is_empty() {
                        value["reasoning_content"] = reasoning.clone().into();
                    }
                }
                value
            }
            ChatMessage::Tool { call_id, content } => json!({
                "role": "tool",
                "tool_call_id": call_id,
                "content": if content.is_empty() { "(no output)" } else { content.as_str() },
            }),
        });
    }
    let mut body = json!({
        "model": request.model.id,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    if let Some(max_tokens) = request.model.max_tokens {
        body["max_tokens"] = max_tokens.into();
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| json!({ "type": "function", "function": { "name": tool.name, "description": tool.description, "parameters": tool.parameters } }))
            .collect();
    }
    if deepseek {
        body["thinking"] = json!({ "type": if thinking { "enabled" } else { "disabled" } });
        if thinking {
            body["reasoning_effort"] = request.thought_level.as_str().into();
        }
    } else if thinking && request.thought_level != ThoughtLevel::High {
        // Plain OpenAI-compatible servers take `reasoning_effort` when they
        // support it; "high" is their default so it is left out.
        body["reasoning_effort"] = request.thought_level.as_str().into();
    }
    body
}

/// Renders user content: plain text when there are no images, else the
/// OpenAI content-part array.
fn user_content(content: &[UserContent], images_allowed: bool) -> Value {
    let mut parts = Vec::new();
    let mut has_image = false;
    for block in content {
        match block {
            UserContent::Text { text } => parts.push(json!({ "type": "text", "text": text })),
            UserContent::ResourceLink { uri, name } => parts.push(
                json!({ "type": "text", "text": format!("[resource_link name={name} uri={uri}]") }),
            ),
            UserContent::Resource { uri, text, .. } => parts.push(json!({
                "type": "text",
                "text": format!("<resource uri=\"{uri}\">\n{text}\n</resource>"),
            })),
            UserContent::Image { mime_type, data } if images_allowed => {
                has_image = true;
                parts.push(json!({ "type": "image_url", "image_url": { "url": format!("data:{mime_type};base64,{data}") } }));
            }
            UserContent::Image { mime_type, data } => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .map(|b| b.len())
                    .unwrap_or(0);
                parts.push(json!({
                    "type": "text",
                    "text": format!("[image omitted: {mime_type}, {bytes} bytes; the selected model does not accept images — switch to a vision model to use it]"),
                }));
            }
            _ => {}
        }
    }
    if has_image {
        Value::Array(parts)
    } else {
        let texts: Vec<&str> = parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect();
        Value::String(texts.join("\n\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::builtin_models;
    use dsh_protocol::model::ToolCallRequest;

    fn request(level: ThoughtLevel) -> ModelRequest {
        ModelRequest {
            model: builtin_models()[0].clone(),
            thought_level: level,
            system: "sys".into(),
            messages: vec![
                ChatMessage::User(vec![
                    UserContent::text("hi"),
                    UserContent::ResourceLink {
                        uri: "file:///a".into(),
                        name: "a".into(),
                    },
                ]),
                ChatMessage::Assistant {
                    text: String::new(),
                    reasoning: "because".into(),
                    tool_calls: vec![ToolCallRequest {
                        id: "c".into(),
                        name: "read".into(),
                        arguments: "{}".into(),
                        provider_id: None,
                    }],
                },
                ChatMessage::Tool {
                    call_id: "c".into(),
                    content: String::new(),
                },
                ChatMessage::Assistant {
                    text: "done".into(),
                    reasoning: "r2".into(),
                    tool_calls: vec![],
                },
            ],
            tools: vec![],
            session_id: "s".into(),
        }
    }

    #[test]
    fn deepseek_body_has_thinking_and_passback_only_on_tool_turns() {
        let body = request_body(&request(ThoughtLevel::Max), ProviderKind::Deepseek);
        assert_eq!(body["thinking"]["type"], "enabled");
        assert_eq!(body["reasoning_effort"], "max");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(
            body["messages"][1]["content"],
            "hi\n\n[resource_link name=a uri=file:///a]"
        );
        assert_eq!(body["messages"][2]["reasoning_content"], "because");
        assert_eq!(body["messages"][3]["content"], "(no output)");
        assert!(body["messages"][4].get("reasoning_content").is_none());

        let off = request_body(&request(ThoughtLevel::Off), ProviderKind::Deepseek);
        assert_eq!(off["thinking"]["type"], "disabled");
        assert!(off.get("reasoning_effort").is_none());

        let openai = request_body(&request(ThoughtLevel::High), ProviderKind::Openai);
        assert!(openai.get("thinking").is_none());
        assert!(openai["messages"][2].get("reasoning_content").is_none());
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }
}
