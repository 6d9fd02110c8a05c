//! `POST {base}/chat/completions` with `stream: true` for DeepSeek and other
//! OpenAI-compatible endpoints. DeepSeek gets its `thinking` and
//! `reasoning_effort` fields and `reasoning_content` passback on assistant
//! turns that carried tool calls (its API rejects the history otherwise).

use std::sync::Arc;
use std::time::Duration;

use dsh_protocol::model::{ModelInfo, StreamEvent};
use dsh_protocol::ErrorCode;
use futures::StreamExt;

use super::settings::{KeyPolicy, ModelSettings};
use super::sse::{ChunkParser, SseDecoder};
use super::{EventStream, ModelError, Prepared};

/// The HTTP provider.
pub struct HttpProvider {
    /// Built on the first request: loading the system's root certificates
    /// takes ~8 ms and ~2 MB, which an editor should not pay at every spawn.
    client: std::sync::OnceLock<reqwest::Client>,
    settings: Arc<ModelSettings>,
}

const USER_AGENT: &str = concat!(
    "dsh/",
    env!("CARGO_PKG_VERSION"),
    " (+https://github.com/dsh-agent/dsh)"
);

impl HttpProvider {
    /// A provider with its own connection pool (created on first use).
    pub fn new(settings: Arc<ModelSettings>) -> Self {
        HttpProvider {
            client: std::sync::OnceLock::new(),
            settings,
        }
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

    /// The dialect of the bodies it sends.
    pub(super) fn kind(&self) -> super::ProviderKind {
        self.settings.provider
    }

    /// The key a request carries (`None`: it goes without one).
    ///
    /// # Errors
    /// `auth.missing_credential`: the endpoint needs a key and none is
    /// found.
    async fn key(&self) -> Result<Option<String>, ModelError> {
        Ok(match self.settings.key_policy {
            KeyPolicy::None => None,
            KeyPolicy::Optional => crate::credentials::resolve_now(&self.settings.key).await,
            KeyPolicy::Required => Some(
                crate::credentials::resolve_now(&self.settings.key)
                    .await
                    .ok_or_else(|| {
                        ModelError::new(ErrorCode::MissingCredential, self.settings.missing_key())
                    })?,
            ),
        })
    }

    /// The models the endpoint serves ([`super::served`]), asked now (the
    /// agent keeps what it makes of a good answer: `Agent::ready`).
    ///
    /// # Errors
    /// The list cannot be had: what [`super::served`] says.
    pub(super) async fn served_models(&self) -> Result<Vec<ModelInfo>, ModelError> {
        let key = self.key().await?;
        super::served::ask(self.client()?, &self.settings, key, |err| {
            self.send_error(err)
        })
        .await
    }

    pub(super) async fn start(&self, request: &Prepared) -> Result<EventStream, ModelError> {
        let key = self.key().await?;
        let url = format!("{}/chat/completions", self.settings.base_url);
        // Read from the spool as it is sent (see `body`). reqwest cannot
        // replay such a body for its own retries (an HTTP/2 stream
        // refused, a 307/308): those come back as transport errors, which
        // `start_with_retry` retries with the body read again.
        let length = request.body.content_length();
        let body = reqwest::Body::wrap_stream(request.body.stream());
        let mut post = self.client()?.post(&url);
        if let Some(key) = &key {
            post = post.bearer_auth(key);
        }
        // What error messages must never carry.
        let key = key.unwrap_or_default();
        if self.settings.session_header {
            post = post.header("x-deepseek-harness-session-id", &request.session_id);
        }
        tracing::debug!(%url, model = %request.model, messages = request.messages, tools = request.tools, length, "model request");
        let send = post
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::CONTENT_LENGTH, length)
            .body(body)
            .send();
        let response = match tokio::time::timeout(self.settings.request_timeout, send).await {
            Err(_) => {
                return Err(ModelError::new(
                    ErrorCode::ModelTimeout,
                    format!(
                        "the model provider at {} did not answer within {} s; check the network or the base URL",
                        self.settings.base_url,
                        self.settings.request_timeout.as_secs()
                    ),
                ))
            }
            Ok(Err(err)) => {
                let error = self.send_error(&err).redact(&key);
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
            let error = ModelError::from_status(
                status.as_u16(),
                &body,
                retry_after,
                &self.settings.base_url,
            )
            .redact(&key);
            tracing::debug!(code = %error.code, status = status.as_u16(), "model request failed");
            return Err(error);
        }
        check_content_type(&response, &self.settings.base_url)?;
        Ok(event_stream(
            response,
            self.settings.stream_idle_timeout,
            key,
        ))
    }
}

impl HttpProvider {
    /// The error for a request that got no response. A refused connection
    /// to this machine is not retried: nothing listens there, and waiting
    /// will not start the server.
    fn send_error(&self, err: &reqwest::Error) -> ModelError {
        let base = &self.settings.base_url;
        // The body could not be read from the spool: not the network's
        // fault, and a retry would read the same file. (An `io::Error`'s
        // own `source` skips the error it carries.)
        let unread = causes(err).find_map(|cause| {
            cause
                .downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::get_ref)
                .and_then(|inner| inner.downcast_ref::<super::body::SpoolRead>())
                .or_else(|| cause.downcast_ref())
        });
        if let Some(unread) = unread {
            let mut error = ModelError::new(ErrorCode::Internal, unread.to_string());
            error.retryable = false;
            return error;
        }
        if err.is_builder() {
            // The config check lets no such URL through; kept for safety.
            return ModelError::new(
                ErrorCode::ModelInvalidRequest,
                format!(
                    "the base URL {base} cannot be used ({}); check DEEPSEEK_BASE_URL or [provider] base_url",
                    error_chain(err)
                ),
            );
        }
        if err.is_connect() && super::settings::is_loopback(base) && refused(err) {
            let mut error = ModelError::new(
                ErrorCode::ModelTransport,
                format!("nothing accepts connections at {base} (connection refused): is the server running at {}?", origin(base)),
            );
            error.retryable = false;
            return error;
        }
        ModelError::new(
            ErrorCode::ModelTransport,
            format!(
                "cannot reach the model provider at {base}: {}; check the network or the base URL (DEEPSEEK_BASE_URL or [provider] base_url)",
                error_chain(err)
            ),
        )
    }
}

/// Whether a connect error was a refusal (nothing listening).
fn refused(err: &reqwest::Error) -> bool {
    causes(err).any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    })
}

/// An error and its sources, outermost first.
fn causes<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(err), |cause| cause.source())
}

/// `scheme://host:port` of a URL, for the hint.
fn origin(base_url: &str) -> String {
    reqwest::Url::parse(base_url)
        .map(|url| url.origin().ascii_serialization())
        .unwrap_or_else(|_| base_url.to_owned())
}

/// A successful answer that is an HTML page (a proxy's login, a web UI at
/// the base URL) is `model.malformed_response`, not a dropped connection.
/// Other content types are left to the stream, which fails the same way
/// when the body holds no event at all (servers label streams loosely).
fn check_content_type(response: &reqwest::Response, base_url: &str) -> Result<(), ModelError> {
    let Some(value) = response.headers().get(reqwest::header::CONTENT_TYPE) else {
        return Ok(());
    };
    let value = value.to_str().unwrap_or("").to_ascii_lowercase();
    let kind = value.split(';').next().unwrap_or("").trim();
    if kind != "text/html" && kind != "application/xhtml+xml" {
        return Ok(());
    }
    Err(ModelError::new(
        ErrorCode::ModelMalformedResponse,
        format!(
            "{base_url}/chat/completions answered with a web page ({kind}), not an event stream: it is not an OpenAI-compatible endpoint; check the base URL (it often ends in /v1)"
        ),
    ))
}

fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    causes(err)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
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
/// idle timeout counts the time spent waiting for bytes (one timer,
/// re-armed only when it fires early). Error messages never carry the key.
fn event_stream(response: reqwest::Response, idle: Duration, key: String) -> EventStream {
    body_events(response.bytes_stream().boxed(), idle, key)
}

fn body_events(body: Body, idle: Duration, key: String) -> EventStream {
    Box::pin(BodyEvents {
        body,
        idle,
        waiting_since: None,
        last_look: false,
        timer: Box::pin(tokio::time::sleep(idle)),
        decoder: SseDecoder::default(),
        parser: ChunkParser::default(),
        payloads: Vec::new(),
        events: std::collections::VecDeque::new(),
        scratch: Vec::new(),
        done: false,
        seen_event: false,
        head: Vec::new(),
        key,
    })
}

type Body = futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>;

struct BodyEvents {
    body: Body,
    idle: Duration,
    /// When the current wait for bytes began (`None` while bytes come).
    /// The idle timeout counts only time spent waiting on the provider: a
    /// turn that stopped reading for a while (an editor that fell behind)
    /// is not a silent provider.
    waiting_since: Option<tokio::time::Instant>,
    /// The timeout passed and the stream gets one more look, after the
    /// tasks woken with the timer have run.
    last_look: bool,
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    decoder: SseDecoder,
    parser: ChunkParser,
    payloads: Vec<String>,
    events: std::collections::VecDeque<StreamEvent>,
    scratch: Vec<StreamEvent>,
    done: bool,
    /// Whether any SSE event was decoded: a body that ends without one is
    /// not an event stream (`model.malformed_response`).
    seen_event: bool,
    /// The body's first bytes, to show what came instead of a stream.
    head: Vec<u8>,
    key: String,
}

impl BodyEvents {
    /// Decodes the next buffered event's payload into events; false when
    /// no complete event is buffered.
    fn decode_one(&mut self) -> Result<bool, ModelError> {
        let Some(payload) = self.decoder.next_payload()? else {
            return Ok(false);
        };
        self.seen_event = true;
        self.parser.parse(&payload, &mut self.scratch)?;
        self.events.extend(self.scratch.drain(..));
        if self.parser.is_done() {
            self.end()?;
        }
        Ok(true)
    }

    fn end(&mut self) -> Result<(), ModelError> {
        self.done = true;
        // Whatever complete events are still buffered come first.
        while let Some(payload) = self.decoder.next_payload()? {
            self.payloads.push(payload);
        }
        self.decoder.finish(&mut self.payloads);
        if !self.seen_event && self.payloads.is_empty() && !looks_like_sse(&self.head) {
            return Err(self.not_a_stream());
        }
        for payload in self.payloads.drain(..) {
            self.parser.parse(&payload, &mut self.scratch)?;
        }
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
            match this.decode_one() {
                Ok(true) => continue,
                Ok(false) => {}
                Err(error) => return this.fail(error),
            }
            match this.body.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(bytes))) => {
                    this.waiting_since = None;
                    this.last_look = false;
                    if this.head.len() < HEAD_BYTES {
                        let room = HEAD_BYTES - this.head.len();
                        this.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
                    }
                    this.decoder.push(&bytes);
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
                    let since = *this
                        .waiting_since
                        .get_or_insert_with(tokio::time::Instant::now);
                    match std::future::Future::poll(this.timer.as_mut(), cx) {
                        Poll::Pending => return Poll::Pending,
                        // Fired: idle, unless the wait began after it was
                        // armed (then it is armed again from that).
                        Poll::Ready(()) => {
                            let deadline = since + this.idle;
                            if tokio::time::Instant::now() >= deadline {
                                // Once more after the tasks already woken
                                // (the connection may hold bytes that came
                                // while dsh was not running): only then is
                                // the provider silent.
                                if !this.last_look {
                                    this.last_look = true;
                                    cx.waker().wake_by_ref();
                                    return Poll::Pending;
                                }
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

/// How much of a body that is not an event stream its error shows.
const HEAD_BYTES: usize = 120;

/// Whether a body's first bytes could be an event stream: nothing at all
/// (an empty body is a dropped connection), or a first line that is an
/// SSE field or comment (`: keep-alive` before a connection broke is
/// still a stream).
fn looks_like_sse(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let Some(first) = text
        .lines()
        .map(str::trim_start)
        .find(|line| !line.is_empty())
    else {
        return true;
    };
    first.starts_with(':')
        || ["data", "event", "id", "retry"].iter().any(|field| {
            first
                .strip_prefix(field)
                .is_some_and(|rest| rest.starts_with(':') || rest.is_empty())
        })
}

impl BodyEvents {
    fn not_a_stream(&self) -> ModelError {
        let head = String::from_utf8_lossy(&self.head);
        let head: String = head
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        ModelError::new(
            ErrorCode::ModelMalformedResponse,
            format!(
                "the model provider answered with something that is not an event stream (it began {:?}): not an OpenAI-compatible endpoint, or one that ignored `stream: true`; check the base URL",
                head.trim()
            ),
        )
    }

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
    use crate::model::ModelRequest;

    /// The idle timeout counts time spent waiting on the provider, not
    /// time the turn spent elsewhere (held by an editor that fell behind).
    #[tokio::test(start_paused = true)]
    async fn the_idle_timeout_counts_only_waiting() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<reqwest::Result<bytes::Bytes>>();
        let mut events = body_events(rx.boxed(), Duration::from_millis(500), String::new());
        let event = |text: &str| {
            Ok(bytes::Bytes::from(format!(
                "data: {{\"choices\":[{{\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n"
            )))
        };
        tx.unbounded_send(event("one")).unwrap();
        assert!(matches!(events.next().await, Some(Ok(StreamEvent::TextDelta(t))) if t == "one"));
        // The turn looks away for 700 ms (more than the timeout) without
        // polling; then it waits, and the provider answers 300 ms later.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let late = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            late.unbounded_send(event("two")).unwrap();
        });
        assert!(matches!(events.next().await, Some(Ok(StreamEvent::TextDelta(t))) if t == "two"));
        // A provider silent for the whole timeout is still abandoned.
        let started = tokio::time::Instant::now();
        match events.next().await {
            Some(Err(error)) => assert_eq!(error.code, ErrorCode::ModelTimeout),
            other => panic!("{other:?}"),
        }
        assert_eq!(started.elapsed(), Duration::from_millis(500));
    }

    /// A body the spool can no longer give (its file cut short) fails the
    /// request as dsh's own fault, not the network's, and is not retried.
    #[tokio::test]
    async fn a_spool_that_cannot_be_read_is_not_blamed_on_the_network() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut sink = tokio::io::sink();
                    let _ = tokio::io::copy(&mut socket, &mut sink).await;
                });
            }
        });
        let home = tempfile::tempdir().unwrap();
        let raw: crate::config::RawConfig = toml::from_str(&format!(
            "[provider]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{port}\"\n[[models]]\nid = \"local\"\n"
        ))
        .unwrap();
        let config = crate::config::Config::from_raw(
            raw,
            home.path().to_path_buf(),
            &crate::session::scratch::NoEnv,
        )
        .unwrap();
        let provider = super::super::Provider::from_settings(&config.model).unwrap();
        let slot = Arc::new(super::super::spool::SpoolSlot::new(home.path().to_owned()));
        let request = ModelRequest {
            model: config.choices.models[0].clone(),
            thought_level: dsh_protocol::model::ThoughtLevel::Off,
            system: "sys".into(),
            messages: vec![Arc::new(dsh_protocol::model::Message::new(
                dsh_protocol::model::ChatMessage::User(vec![dsh_protocol::UserContent::text(
                    "x".repeat(100_000),
                )]),
            ))],
            tools: Vec::new(),
            session_id: "s".into(),
            spool: Some(slot.clone()),
        };
        let prepared = provider.prepare(request).await.unwrap();
        slot.current().unwrap().cut_short();
        let error = match provider.start(&prepared).await {
            Err(error) => error,
            Ok(_) => panic!("a request over a cut spool was sent"),
        };
        assert_eq!(error.code, ErrorCode::Internal, "{error:?}");
        assert!(!error.is_retryable());
        assert!(
            error
                .message
                .contains("cannot read the model request from its spool file"),
            "{}",
            error.message
        );
    }

    /// A body without a single event is not a stream (malformed); one
    /// that began as a stream and broke is a dropped connection.
    #[tokio::test]
    async fn a_body_without_events_is_malformed_and_a_broken_stream_is_not() {
        let outcome = |body: &'static str| async move {
            let chunks = vec![Ok(bytes::Bytes::from_static(body.as_bytes()))];
            let mut events = body_events(
                futures::stream::iter(chunks).boxed(),
                Duration::from_secs(5),
                String::new(),
            );
            loop {
                match events.next().await {
                    Some(Ok(_)) => continue,
                    Some(Err(error)) => return Some(error.code),
                    None => return None,
                }
            }
        };
        for body in [
            "<!doctype html><html>It works!</html>\n",
            "{\"choices\":[{\"message\":{\"content\":\"hi\"}}]}",
            "Bad Gateway",
        ] {
            assert_eq!(
                outcome(body).await,
                Some(ErrorCode::ModelMalformedResponse),
                "{body}"
            );
        }
        for body in [
            "",
            ": keep-alive\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
        ] {
            assert_eq!(
                outcome(body).await,
                Some(ErrorCode::ModelStreamClosed),
                "{body:?}"
            );
        }
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
