//! The model's settings: which provider, where, with which key, and how
//! long to wait. [`crate::config`] composes them from `config.toml` and the
//! environment; the model client receives them and nothing else.

use std::path::PathBuf;
use std::time::Duration;

use dsh_protocol::model::{ModelInfo, Pricing};
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
        pricing: deepseek_pricing(id),
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

/// DeepSeek's published prices for its models, in USD per million tokens
/// (<https://api-docs.deepseek.com/quick_start/pricing>, as checked on
/// 2026-11-15): `deepseek-flash` (DeepSeek-V4.1-Flash, which also serves
/// and bills the retired names `deepseek-v4-flash`,
/// `deepseek-v4-flash-vision-exp`, `deepseek-chat` and `deepseek-reasoner`)
/// and `deepseek-v4-pro`. DeepSeek bills peak hours (01:00–04:00 and
/// 06:00–10:00 UTC on weekdays) at twice the off-peak rate; dsh does not
/// follow the clock and uses the peak rates, an upper bound. A model's
/// `pricing` in `config.toml` replaces these.
pub fn deepseek_pricing(id: &str) -> Option<Pricing> {
    let (hit, miss, output) = match id {
        "deepseek-flash"
        | "deepseek-v4-flash"
        | "deepseek-v4-flash-vision-exp"
        | "deepseek-chat"
        | "deepseek-reasoner" => (0.006, 0.30, 1.20),
        "deepseek-v4-pro" => (0.044, 1.32, 3.96),
        _ => return None,
    };
    Some(Pricing {
        input: miss,
        input_cache_hit: Some(hit),
        output,
        currency: "USD".to_owned(),
    })
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
    /// Whether requests need that key.
    pub key_policy: KeyPolicy,
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
    /// The catalog is what the endpoint serves (`GET {base}/models`,
    /// [`super::served`]): an OpenAI-compatible endpoint for which
    /// `config.toml` lists no `[[models]]`.
    pub served_catalog: bool,
}

/// Whether model requests carry an API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPolicy {
    /// Every request needs one: a missing key fails with
    /// `auth.missing_credential` before anything is sent.
    Required,
    /// Sent when one is found, else the request goes without
    /// `Authorization`: a loopback endpoint (a local llama.cpp or Ollama).
    Optional,
    /// Never looked up nor sent: `api_key_env = ""`, and the replay
    /// provider.
    None,
}

impl KeyPolicy {
    /// The policy for an endpoint: `keyless` when the config declares it
    /// (`api_key_env = ""`) or the provider is the replay; optional for a
    /// loopback base URL; required otherwise.
    pub fn of(provider: ProviderKind, keyless: bool, base_url: &str) -> KeyPolicy {
        if keyless || provider == ProviderKind::Replay {
            KeyPolicy::None
        } else if is_loopback(base_url) {
            KeyPolicy::Optional
        } else {
            KeyPolicy::Required
        }
    }
}

/// Whether `base_url` names this machine: `localhost` (or a name under
/// it), 127.0.0.0/8, `::1`. Nothing else counts — not a name that happens
/// to resolve to a loopback address.
pub fn is_loopback(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => {
            let name = host.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    }
}

/// Whether `base_url` is DeepSeek's API (`api.deepseek.com`, or another
/// name under `deepseek.com`): the dialect a base URL implies when
/// `[provider] kind` does not say.
pub fn is_deepseek(base_url: &str) -> bool {
    reqwest::Url::parse(base_url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_ascii_lowercase))
        .is_some_and(|host| {
            let host = host.trim_end_matches('.');
            host == "deepseek.com" || host.ends_with(".deepseek.com")
        })
}

/// The dialect of an endpoint whose `kind` is not configured: DeepSeek's
/// for its API, OpenAI's for any other base URL (llama.cpp, vLLM, Ollama,
/// which refuse DeepSeek's fields).
pub fn implied_kind(base_url: &str) -> ProviderKind {
    if is_deepseek(base_url) {
        ProviderKind::Deepseek
    } else {
        ProviderKind::Openai
    }
}

/// Checks a base URL before any request: an absolute `http` or `https`
/// URL with a host. The error names `key` (where the value came from:
/// `DEEPSEEK_BASE_URL`, `[provider] base_url`) and says what to write.
///
/// # Errors
/// No scheme, another scheme, no host, credentials in the URL, or not a
/// URL at all.
pub fn check_base_url(base_url: &str, key: &str) -> Result<(), String> {
    let shown = format!("{key} = {base_url:?}");
    if !base_url.contains("://") {
        return Err(format!(
            "{shown} has no scheme: write \"http://{base_url}\" (a local server) or \"https://{base_url}\""
        ));
    }
    let url = reqwest::Url::parse(base_url)
        .map_err(|err| format!("{shown} is not a valid URL ({err}); write it as http://HOST:PORT/PATH or https://HOST/PATH"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "{shown}: the scheme {:?} is not supported; use http:// or https://",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{shown} names no host"));
    }
    // Said without the value: it holds the secret.
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{key} carries a user name or password: dsh sends no credentials in the URL (they would show in messages and logs); remove them and give the key in the API key's variable"
        ));
    }
    Ok(())
}

impl ModelSettings {
    /// Whether requests fail without an API key: false for keyless
    /// providers and loopback endpoints (where a key is sent if found).
    /// The editor is offered authentication methods only then.
    pub fn needs_key(&self) -> bool {
        self.key_policy == KeyPolicy::Required
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

    /// What every front end says when the key is missing (before a
    /// session, or when it disappeared mid-session): `dsh run` in a shell
    /// or CI, a program over the SDK, an editor (whose authentication
    /// methods say where its settings put the variable).
    pub fn missing_key(&self) -> String {
        format!(
            "dsh needs the {key}: set {env} in the environment dsh starts with, or run `dsh login` in a terminal to store it ({checked})",
            key = self.key_name(),
            env = self.key.name,
            checked = crate::credentials::missing(crate::credentials::Lookup::of(&self.key)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_localhost_127_8_and_ipv6_1_only() {
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://127.1.2.3",
            "http://localhost:11434/v1",
            "http://LocalHost.",
            "http://api.localhost/v1",
            "http://[::1]:8080",
        ] {
            assert!(is_loopback(url), "{url}");
        }
        for url in [
            "https://api.deepseek.com",
            "http://10.0.0.1:8080",
            "http://localhost.example.com",
            "http://[::2]",
            "localhost:8080",
            "https://example.invalid",
        ] {
            assert!(!is_loopback(url), "{url}");
        }
    }

    #[test]
    fn only_deepseeks_api_implies_its_dialect() {
        for url in [
            DEFAULT_BASE_URL,
            "https://api.deepseek.com/v1",
            "https://API.DeepSeek.com./beta",
        ] {
            assert_eq!(implied_kind(url), ProviderKind::Deepseek, "{url}");
        }
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434/v1",
            "https://deepseek.com.example.org/v1",
            "https://notdeepseek.com",
            "https://openrouter.ai/api/v1",
        ] {
            assert_eq!(implied_kind(url), ProviderKind::Openai, "{url}");
        }
    }

    #[test]
    fn base_urls_are_checked_and_the_key_named() {
        assert!(check_base_url("http://127.0.0.1:8080/v1", "K").is_ok());
        assert!(check_base_url("https://api.deepseek.com", "K").is_ok());
        let err = check_base_url("localhost:8080", "DEEPSEEK_BASE_URL").unwrap_err();
        assert!(
            err.contains("DEEPSEEK_BASE_URL") && err.contains("no scheme"),
            "{err}"
        );
        assert!(err.contains("http://localhost:8080"), "{err}");
        let err = check_base_url("127.0.0.1:9", "[provider] base_url").unwrap_err();
        assert!(
            err.contains("[provider] base_url") && err.contains("no scheme"),
            "{err}"
        );
        let err = check_base_url("ftp://host/v1", "K").unwrap_err();
        assert!(
            err.contains("\"ftp\"") && err.contains("not supported"),
            "{err}"
        );
        let err = check_base_url("http://exa mple.com", "K").unwrap_err();
        assert!(err.contains("not a valid URL"), "{err}");
        assert!(check_base_url("http://", "K").is_err());
        let err = check_base_url("https://user:s3cret@proxy.example/v1", "K").unwrap_err();
        assert!(
            err.contains("user name or password") && !err.contains("s3cret"),
            "{err}"
        );
    }

    #[test]
    fn key_policy_follows_the_endpoint() {
        use KeyPolicy::*;
        let of = KeyPolicy::of;
        assert_eq!(
            of(ProviderKind::Deepseek, false, DEFAULT_BASE_URL),
            Required
        );
        assert_eq!(
            of(ProviderKind::Openai, false, "http://127.0.0.1:8080/v1"),
            Optional
        );
        assert_eq!(of(ProviderKind::Openai, true, "https://example.com"), None);
        assert_eq!(of(ProviderKind::Replay, false, DEFAULT_BASE_URL), None);
    }
}
