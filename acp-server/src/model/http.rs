//! `POST {base}/chat/completions` with `stream: true` for DeepSeek and other
//! OpenAI-compatible endpoints. DeepSeek gets its `thinking` and
//! `reasoning_effort` fields and `reasoning_content` passback on assistant
//! turns that carried tool calls (its API rejects the history otherwise).

use std::sync::Arc;
use std::time::Duration;

use dsh_protocol::model::StreamEvent;
use dsh_protocol::ErrorCode;
use futures::StreamExt;

use super::sse::{ChunkParser, SseDecoder};
use super::{EventStream, ModelError, ModelRequest};
use crate::config::Config;

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
        let body = super::body::request_body(request, self.config.provider).map_err(|err| {
            ModelError::new(
                ErrorCode::Internal,
                format!("cannot serialize the model request: {err}"),
            )
        })?;
        let mut post = self.client()?.post(&url).bearer_auth(&key);
        if self.config.session_header {
            post = post.header("x-deepseek-harness-session-id", &request.session_id);
        }
        tracing::debug!(%url, model = %request.model.id, messages = request.messages.len(), tools = request.tools.len(), "model request");
        let send = post
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send();
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

/// Decodes the body as the consumer polls it: no task of its own, so a
/// chunk goes from the connection to the turn without another hop. The
/// idle timeout counts from the last bytes received (one timer, re-armed
/// only when it fires early). Error messages never carry the key.
fn event_stream(response: reqwest::Response, idle: Duration, key: String) -> EventStream {
    Box::pin(BodyEvents {
        body: response.bytes_stream().boxed(),
        idle,
        last_read: tokio::time::Instant::now(),
        timer: Box::pin(tokio::time::sleep(idle)),
        decoder: SseDecoder::default(),
        parser: ChunkParser::default(),
        payloads: Vec::new(),
        events: std::collections::VecDeque::new(),
        scratch: Vec::new(),
        done: false,
        key,
    })
}

type Body = futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>;

struct BodyEvents {
    body: Body,
    idle: Duration,
    last_read: tokio::time::Instant,
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    decoder: SseDecoder,
    parser: ChunkParser,
    payloads: Vec<String>,
    events: std::collections::VecDeque<StreamEvent>,
    scratch: Vec<StreamEvent>,
    done: bool,
    key: String,
}

impl BodyEvents {
    fn parse_payloads(&mut self) -> Result<(), ModelError> {
        for payload in self.payloads.drain(..) {
            self.parser.parse(&payload, &mut self.scratch)?;
        }
        self.events.extend(self.scratch.drain(..));
        Ok(())
    }

    fn received(&mut self, bytes: &[u8]) -> Result<(), ModelError> {
        self.decoder.feed(bytes, &mut self.payloads)?;
        self.parse_payloads()?;
        if self.parser.is_done() {
            self.end()?;
        }
        Ok(())
    }

    fn end(&mut self) -> Result<(), ModelError> {
        self.done = true;
        self.decoder.finish(&mut self.payloads);
        self.parse_payloads()?;
        self.parser.end(&mut self.scratch)?;
        self.events.extend(self.scratch.drain(..));
        Ok(())
    }

    fn fail(
        &mut self,
        error: ModelError,
    ) -> std::task::Poll<Option<Result<StreamEvent, ModelError>>> {
        self.done = true;
        self.events.clear();
        let error = error.redact(&self.key);
        tracing::debug!(code = %error.code, "model stream failed");
        std::task::Poll::Ready(Some(Err(error)))
    }
}

impl futures::Stream for BodyEvents {
    type Item = Result<StreamEvent, ModelError>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = self.get_mut();
        loop {
            if let Some(event) = this.events.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            match this.body.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(bytes))) => {
                    this.last_read = tokio::time::Instant::now();
                    if let Err(error) = this.received(&bytes) {
                        return this.fail(error);
                    }
                }
                Poll::Ready(Some(Err(err))) => {
                    return this.fail(ModelError::new(
                        ErrorCode::ModelStreamClosed,
                        format!(
                            "the model stream broke mid-reply ({}); send the prompt again to retry",
                            error_chain(&err)
                        ),
                    ));
                }
                Poll::Ready(None) => {
                    if let Err(error) = this.end() {
                        return this.fail(error);
                    }
                }
                Poll::Pending => loop {
                    match std::future::Future::poll(this.timer.as_mut(), cx) {
                        Poll::Pending => return Poll::Pending,
                        // Fired: idle, unless bytes came since it was armed
                        // (then it is armed again from the last read).
                        Poll::Ready(()) => {
                            let deadline = this.last_read + this.idle;
                            if tokio::time::Instant::now() >= deadline {
                                return this.fail(this.idle_error());
                            }
                            this.timer.as_mut().reset(deadline);
                        }
                    }
                },
            }
        }
    }
}

impl BodyEvents {
    fn idle_error(&self) -> ModelError {
        ModelError::new(
            ErrorCode::ModelTimeout,
            format!("the model stream sent nothing for {} and was abandoned; send the prompt again to retry", super::human_duration(self.idle)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
