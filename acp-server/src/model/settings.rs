//! The model's settings: which provider, where, with which key, and how
//! long to wait. [`crate::config`] composes them from `config.toml` and the
//! environment; the model client receives them and nothing else.

use std::path::PathBuf;
use std::time::Duration;

use dsh_protocol::model::ModelInfo;
use serde::Deserialize;

pub use super::retry::RetryPolicy;
use crate::credentials::KeySource;

/// Which wire dialect the provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// DeepSeek's API: OpenAI-compatible plus `thinking`, `reasoning_effort`
    /// and `reasoning_content`.
    Deepseek,
    /// A plain OpenAI-compatible endpoint (llama.cpp, vLLM, Ollama, ...).
    Openai,
    /// Scripted responses from a JSONL file; no network, no key.
    Replay,
}

/// DeepSeek's public API.
pub const DEFAULT_BASE_URL: &str = "https://api.deepseek.com";
/// The default key variable.
pub const DEFAULT_API_KEY_ENV: &str = "DEEPSEEK_API_KEY";

/// The built-in DeepSeek catalog (the seeds' V4 Flash, V4 Pro and the
/// vision preview), 1M context, 256k output cap.
pub fn builtin_models() -> Vec<ModelInfo> {
    let model = |id: &str, name: &str, description: &str, images: bool| ModelInfo {
        id: id.to_owned(),
        name: Some(name.to_owned()),
        description: Some(description.to_owned()),
        context_window: 1_000_000,
        max_tokens: Some(256_000),
        images,
    };
    vec![
        model(
            "deepseek-v4-flash",
            "DeepSeek V4 Flash",
            "Fast and inexpensive; the default",
            false,
        ),
        model(
            "deepseek-v4-pro",
            "DeepSeek V4 Pro",
            "Strongest reasoning",
            false,
        ),
        model(
            "deepseek-v4-flash-vision-exp",
            "DeepSeek V4 Flash Vision (exp)",
            "Accepts images",
            true,
        ),
    ]
}

/// Everything a model client needs.
#[derive(Debug, Clone)]
pub struct ModelSettings {
    /// Wire dialect.
    pub provider: ProviderKind,
    /// Endpoint base, without a trailing slash.
    pub base_url: String,
    /// Where the API key is looked up (never the key itself).
    pub key: KeySource,
    /// The replay provider's script.
    pub replay_file: Option<PathBuf>,
    /// Longest silence inside a stream.
    pub stream_idle_timeout: Duration,
    /// Longest wait for the response head.
    pub request_timeout: Duration,
    /// Retries before the first byte.
    pub retry: RetryPolicy,
    /// Whether requests carry the session id header.
    pub session_header: bool,
}

impl ModelSettings {
    /// Whether this provider needs an API key at all.
    pub fn needs_key(&self) -> bool {
        self.provider != ProviderKind::Replay
    }

    /// What the key is, for people: "DeepSeek API key", or "API key for
    /// 127.0.0.1:8080" with another OpenAI-compatible endpoint.
    pub fn key_name(&self) -> String {
        match self.provider {
            ProviderKind::Deepseek if self.base_url == DEFAULT_BASE_URL => {
                "DeepSeek API key".to_owned()
            }
            _ => {
                let host = self
                    .base_url
                    .split_once("://")
                    .map_or(self.base_url.as_str(), |(_, rest)| rest);
                let host = host.split('/').next().unwrap_or(host);
                format!("API key for {host}")
            }
        }
    }
}
