//! The model client: one provider-neutral request type, a stream of
//! [`StreamEvent`]s back, and the providers that produce it — an HTTP client
//! for DeepSeek and OpenAI-compatible endpoints, and a replay provider that
//! plays a scripted transcript (for `dsh demo` and tests).
//!
//! Retries live in [`retry`], outside the providers: one `start` is one
//! attempt.

pub mod body;
pub mod http;
pub mod replay;
pub mod retry;
pub mod script;
pub mod served;
pub mod settings;
pub mod spool;
pub mod sse;

use std::pin::Pin;
use std::time::Duration;

use dsh_protocol::model::{Message, StreamEvent};
use dsh_protocol::ErrorCode;
use futures::Stream;

pub use dsh_protocol::model::ToolSchema;
use dsh_protocol::model::{ModelInfo, ThoughtLevel};
pub use retry::RetryPolicy;
pub use settings::{ModelSettings, ProviderKind};

/// A stream of model events; it ends after `Finish` or an error.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, ModelError>> + Send>>;

/// One model call.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The model.
    pub model: ModelInfo,
    /// Reasoning effort.
    pub thought_level: ThoughtLevel,
    /// System prompt.
    pub system: String,
    /// Conversation, derived from the session log (shared with it).
    pub messages: Vec<std::sync::Arc<Message>>,
    /// Tools offered.
    pub tools: Vec<ToolSchema>,
    /// The session, for provider-side correlation headers.
    pub session_id: String,
    /// Where the request's messages are written to be sent from (the
    /// session's, [`spool`]; a file of its own in the temp directory when
    /// `None`).
    pub spool: Option<std::sync::Arc<spool::SpoolSlot>>,
}

impl ModelRequest {
    /// A rough count of the tokens this request puts in the context window
    /// (four bytes a token), for providers that report no usage.
    pub fn estimated_tokens(&self) -> u64 {
        let messages: u64 = self.messages.iter().map(|m| m.estimated_tokens()).sum();
        let tools: usize = self
            .tools
            .iter()
            .map(|tool| {
                tool.name.len() + tool.description.len() + tool.parameters.to_string().len()
            })
            .sum();
        messages + ((self.system.len() + tools) / 4) as u64
    }
}

/// A failed model call with a stable code and a message that says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    /// Stable code.
    pub code: ErrorCode,
    /// What happened and what to do.
    pub message: String,
    /// HTTP status, when there was one.
    pub status: Option<u16>,
    /// The provider's `Retry-After`.
    pub retry_after: Option<Duration>,
    /// False when retrying cannot help although the code is one that is
    /// usually retried (a refused connection to this machine).
    pub retryable: bool,
}

impl ModelError {
    /// A new error.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ModelError {
            code,
            message: message.into(),
            status: None,
            retry_after: None,
            retryable: true,
        }
    }

    /// Whether a retry could succeed (rate limits, server faults, transport).
    pub fn is_retryable(&self) -> bool {
        self.retryable
            && matches!(
                self.code,
                ErrorCode::ModelRateLimit
                    | ErrorCode::ModelServer
                    | ErrorCode::ModelTransport
                    | ErrorCode::ModelTimeout
            )
    }

    /// Maps an HTTP error status and body to an error with advice. The
    /// body's error `type` and `code` count as much as the status: servers
    /// disagree on statuses (llama.cpp's overflow is a 400 with type
    /// `exceed_context_size_error`).
    pub fn from_status(
        status: u16,
        body: &str,
        retry_after: Option<Duration>,
        base_url: &str,
    ) -> Self {
        let provider = ProviderError::parse(body);
        let detail = &provider.message;
        let (code, advice) = match status {
            _ if provider.is_context_overflow() => (
                ErrorCode::ModelContextWindowExceeded,
                "the conversation is longer than the model's context window; start a new session".to_owned(),
            ),
            401 | 403 => (
                ErrorCode::ModelAuth,
                "the API key was rejected; check DEEPSEEK_API_KEY (or the key variable set in config.toml)".to_owned(),
            ),
            402 => (ErrorCode::ModelQuota, "the account has no balance left; top it up with the provider".to_owned()),
            429 if detail.to_ascii_lowercase().contains("quota") => {
                (ErrorCode::ModelQuota, "the account's quota is used up".to_owned())
            }
            429 => (ErrorCode::ModelRateLimit, "the provider is rate limiting requests; wait a moment and try again".to_owned()),
            _ if provider.is_model_not_found() => (
                ErrorCode::ModelInvalidRequest,
                "the provider does not know this model; pick another model or check the model ids in config.toml".to_owned(),
            ),
            400 | 422 => (ErrorCode::ModelInvalidRequest, "the provider rejected the request".to_owned()),
            404 => (
                ErrorCode::ModelInvalidRequest,
                format!("{base_url}/chat/completions was not found; check the base URL and the model id"),
            ),
            500..=599 => (ErrorCode::ModelServer, "the provider had a server error; try again shortly".to_owned()),
            _ => (ErrorCode::ModelHttp, "the provider answered with an unexpected status".to_owned()),
        };
        let message = if detail.is_empty() {
            format!("model request failed with HTTP {status}: {advice}")
        } else {
            format!("model request failed with HTTP {status}: {advice} (provider said: {detail})")
        };
        ModelError {
            code,
            message,
            status: Some(status),
            retry_after,
            retryable: true,
        }
    }

    /// Maps an error the provider sent inside the stream (an `error`
    /// object in a chunk).
    pub fn from_stream(error: &serde_json::Value) -> Self {
        let provider = ProviderError::from_value(error);
        let said = if provider.message.is_empty() {
            "unknown error".to_owned()
        } else {
            provider.message.clone()
        };
        let (code, message) = if provider.is_context_overflow() {
            (
                ErrorCode::ModelContextWindowExceeded,
                format!("the conversation is longer than the model's context window (provider said: {said})"),
            )
        } else if provider.is_model_not_found() || provider.kind == "invalid_request_error" {
            (
                ErrorCode::ModelInvalidRequest,
                format!("the provider rejected the request mid-stream: {said}"),
            )
        } else if provider.kind.contains("rate_limit") || provider.code.contains("rate_limit") {
            (
                ErrorCode::ModelRateLimit,
                format!("the provider is rate limiting requests (provider said: {said}); wait a moment and try again"),
            )
        } else {
            (
                ErrorCode::ModelServer,
                format!("the provider reported an error mid-stream: {said}; try again"),
            )
        };
        ModelError::new(code, message)
    }

    /// Removes `secret` (the API key) from the message: some providers
    /// echo the key they rejected.
    pub fn redact(mut self, secret: &str) -> Self {
        if !secret.is_empty() && self.message.contains(secret) {
            self.message = self.message.replace(secret, "[redacted]");
        }
        self
    }
}

/// What an OpenAI-style error body says: `{"error": {"message", "type",
/// "code"}}`, or plain text.
#[derive(Debug, Default)]
struct ProviderError {
    message: String,
    kind: String,
    code: String,
}

impl ProviderError {
    fn parse(body: &str) -> ProviderError {
        match serde_json::from_str::<serde_json::Value>(body) {
            Ok(value) => {
                let error = value.get("error").unwrap_or(&value);
                let mut parsed = ProviderError::from_value(error);
                if parsed.message.is_empty() && !error.is_object() {
                    parsed.message = dsh_protocol::content::truncate_chars(body.trim(), 300);
                }
                parsed
            }
            Err(_) => ProviderError {
                message: dsh_protocol::content::truncate_chars(body.trim(), 300),
                ..ProviderError::default()
            },
        }
    }

    fn from_value(error: &serde_json::Value) -> ProviderError {
        let text = |key: &str| {
            error
                .get(key)
                .map(|value| match value {
                    serde_json::Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .unwrap_or_default()
        };
        let message = match error {
            serde_json::Value::String(text) => text.clone(),
            _ => text("message"),
        };
        ProviderError {
            message: dsh_protocol::content::truncate_chars(&message, 300),
            kind: text("type").to_ascii_lowercase(),
            code: text("code").to_ascii_lowercase(),
        }
    }

    /// DeepSeek's and OpenAI's wording and codes, vLLM's and llama.cpp's.
    fn is_context_overflow(&self) -> bool {
        let message = self.message.to_ascii_lowercase();
        self.code == "context_length_exceeded"
            || self.kind == "exceed_context_size_error"
            || message.contains("context length")
            || message.contains("context window")
            || message.contains("maximum context")
            || message.contains("context size")
            || message.contains("maximum model length")
    }

    fn is_model_not_found(&self) -> bool {
        self.code == "model_not_found" || self.kind == "model_not_found"
    }
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The configured provider.
pub enum Provider {
    /// DeepSeek or OpenAI-compatible over HTTP.
    Http(http::HttpProvider),
    /// Scripted replay.
    Replay(replay::ReplayProvider),
}

/// Why a provider cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The replay provider has no script.
    #[error("the replay provider needs a script: set DSH_REPLAY_FILE or provider.replay_file")]
    NoScript,
    /// The script cannot be read or parsed.
    #[error("cannot use the replay script {}: {message}", path.display())]
    Script {
        /// The script.
        path: std::path::PathBuf,
        /// Why (a line number when a line is bad).
        message: String,
    },
}

impl Provider {
    /// The provider `settings` name.
    ///
    /// # Errors
    /// The replay provider without a readable script.
    pub fn from_settings(settings: &std::sync::Arc<ModelSettings>) -> Result<Provider, SetupError> {
        match settings.provider {
            ProviderKind::Replay => {
                let path = settings.replay_file.as_ref().ok_or(SetupError::NoScript)?;
                let replay = replay::ReplayProvider::from_file(path).map_err(|message| {
                    SetupError::Script {
                        path: path.clone(),
                        message,
                    }
                })?;
                Ok(Provider::Replay(replay))
            }
            ProviderKind::Deepseek | ProviderKind::Openai => {
                Ok(Provider::Http(http::HttpProvider::new(settings.clone())))
            }
        }
    }

    /// Makes `request` ready to send: the messages it carries are written
    /// to its spool ([`spool`]; those not written yet, on a blocking
    /// thread) and it keeps no message (the history may leave memory while
    /// the request waits for the provider).
    ///
    /// # Errors
    /// The request cannot be written (a full disk): not retried.
    pub async fn prepare(&self, request: ModelRequest) -> Result<Prepared, ModelError> {
        let kind = match self {
            Provider::Http(provider) => provider.kind(),
            // The bytes an HTTP provider would send DeepSeek.
            Provider::Replay(_) => ProviderKind::Deepseek,
        };
        let unwritten = |err: body::BodyError| {
            let code = match err {
                body::BodyError::Spool(_) => ErrorCode::SessionLogWrite,
                body::BodyError::Serialize(_) => ErrorCode::Internal,
            };
            ModelError::new(code, err.to_string())
        };
        tokio::task::spawn_blocking(move || {
            let spool = match &request.spool {
                Some(slot) => slot.get().map_err(body::BodyError::Spool)?,
                // A request of its own (a session's title): a spool of its
                // own.
                None => std::sync::Arc::new(
                    spool::Spool::new_in(&std::env::temp_dir()).map_err(body::BodyError::Spool)?,
                ),
            };
            let body = body::SpooledBody::new(&request, kind, spool)?;
            Ok(Prepared {
                body,
                model: request.model.id,
                messages: request.messages.len(),
                tools: request.tools.len(),
                session_id: request.session_id,
            })
        })
        .await
        .map_err(|err| {
            ModelError::new(
                ErrorCode::Internal,
                format!("preparing the model request failed: {err}"),
            )
        })?
        .map_err(unwritten)
    }

    /// The models the endpoint serves ([`served`]), asked once per
    /// process.
    ///
    /// # Errors
    /// The list cannot be had (unreachable, an error status, not a list,
    /// too slow); the replay provider serves none.
    pub async fn served_models(&self) -> Result<Vec<ModelInfo>, ModelError> {
        match self {
            Provider::Http(provider) => provider.served_models().await,
            Provider::Replay(_) => Err(ModelError::new(
                ErrorCode::Internal,
                "the replay provider serves no model list",
            )),
        }
    }

    /// Starts one attempt of a prepared request; errors before the first
    /// byte come back here so the caller can retry them.
    ///
    /// # Errors
    /// Missing credential, HTTP error status, transport failure.
    pub async fn start(&self, request: &Prepared) -> Result<EventStream, ModelError> {
        match self {
            Provider::Http(provider) => provider.start(request).await,
            Provider::Replay(provider) => provider.start(request).await,
        }
    }
}

/// A request ready to send ([`Provider::prepare`]): its body, which each
/// attempt sends, and what log lines and headers say of it.
pub struct Prepared {
    body: body::SpooledBody,
    model: String,
    messages: usize,
    tools: usize,
    session_id: String,
}

/// `1.5 s`, `300 ms`.
pub(crate) fn human_duration(duration: Duration) -> String {
    if duration < Duration::from_secs(1) {
        format!("{} ms", duration.as_millis())
    } else if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 10, item 19b: errors are classified by type and code too.
    #[test]
    fn provider_errors_are_classified_by_type_and_code() {
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#;
        assert_eq!(
            ModelError::from_status(400, llama, None, "x").code,
            ErrorCode::ModelContextWindowExceeded
        );
        let openai = r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        assert_eq!(
            ModelError::from_status(400, openai, None, "x").code,
            ErrorCode::ModelContextWindowExceeded
        );
        let missing = serde_json::json!({"message":"The model `x` does not exist","type":"invalid_request_error","code":"model_not_found"});
        let error = ModelError::from_stream(&missing);
        assert_eq!(error.code, ErrorCode::ModelInvalidRequest);
        assert!(!error.message.contains("try again"), "{}", error.message);
        assert_eq!(
            ModelError::from_status(
                404,
                &serde_json::json!({"error": missing}).to_string(),
                None,
                "x"
            )
            .code,
            ErrorCode::ModelInvalidRequest
        );
        // Context overflows in the wording of DeepSeek/OpenAI, llama.cpp
        // and vLLM (old and new).
        for body in [
            r#"{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 140000 tokens","type":"invalid_request_error"}}"#,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#,
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).","type":"BadRequestError","code":400}"#,
            r#"{"error":{"message":"The decoder prompt (length 5000) is longer than the maximum model length of 4096.","type":"BadRequestError"}}"#,
        ] {
            assert_eq!(
                ModelError::from_status(400, body, None, "x").code,
                ErrorCode::ModelContextWindowExceeded,
                "{body}"
            );
        }
        let overloaded = serde_json::json!({"message":"overloaded","type":"server_error"});
        assert_eq!(
            ModelError::from_stream(&overloaded).code,
            ErrorCode::ModelServer
        );
        let echoed = ModelError::from_status(
            401,
            r#"{"error":{"message":"bad key sk-secret-123"}}"#,
            None,
            "x",
        )
        .redact("sk-secret-123");
        assert!(
            !echoed.message.contains("sk-secret-123"),
            "{}",
            echoed.message
        );
    }
}
