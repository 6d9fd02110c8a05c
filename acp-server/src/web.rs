//! The web, for `web_fetch` and `web_search` (seeds: `dsh-tool-web`).
//!
//! Fetching: HTTP(S) only, through reqwest with no proxy; HTML becomes
//! markdown (`htmd`, bounded against hostile nesting and run on a worker
//! with a deadline: [`html`]), other text types stay text, anything else is
//! refused.
//! A download stops at `max_download_bytes`, what the model sees at
//! `max_output_bytes` (with a marker); at most `max_redirects` redirects;
//! one timeout for the whole request. Addresses a page could use to reach
//! the user's own machine or network — loopback, private, link-local,
//! shared and unique-local ranges — are refused after DNS resolution (a
//! resolver that drops them) and for every redirect, unless listed in
//! `[web] allow_private`: a prompt-injected page cannot make dsh call a
//! local service.
//!
//! Searching: behind a provider configured in `[web.search]` (a SearXNG
//! instance's JSON API, or Brave's Search API with its key from an
//! environment variable). The provider is the user's own choice, so it may
//! be a local instance. Without one, `web_search` is not offered.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

pub mod html;

/// `[web]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSettings {
    /// Offer `web_fetch`.
    #[serde(default = "yes")]
    pub fetch: bool,
    /// Addresses that may be fetched although private (`"127.0.0.1"`, a
    /// local documentation server).
    #[serde(default)]
    pub allow_private: Vec<IpAddr>,
    /// `read-only` and `plan` may fetch (each fetch asked).
    #[serde(default)]
    pub fetch_in_read_only: bool,
    /// One timeout for the whole request.
    #[serde(default = "timeout_ms")]
    pub timeout_ms: u64,
    /// The download stops here.
    #[serde(default = "max_download")]
    pub max_download_bytes: usize,
    /// What the model sees, at most.
    #[serde(default = "max_output")]
    pub max_output_bytes: usize,
    /// Redirects followed, at most.
    #[serde(default = "max_redirects")]
    pub max_redirects: usize,
    /// The search provider, if any.
    #[serde(default)]
    pub search: Option<SearchSettings>,
}

fn yes() -> bool {
    true
}
fn timeout_ms() -> u64 {
    30_000
}
fn max_download() -> usize {
    5 * 1024 * 1024
}
fn max_output() -> usize {
    64 * 1024
}
fn max_redirects() -> usize {
    5
}

impl Default for WebSettings {
    fn default() -> Self {
        WebSettings {
            fetch: true,
            allow_private: Vec::new(),
            fetch_in_read_only: false,
            timeout_ms: timeout_ms(),
            max_download_bytes: max_download(),
            max_output_bytes: max_output(),
            max_redirects: max_redirects(),
            search: None,
        }
    }
}

/// `[web.search]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSettings {
    /// `searxng` or `brave`.
    pub provider: SearchProvider,
    /// The instance (SearXNG) or API endpoint (Brave; has a default).
    #[serde(default)]
    pub url: Option<String>,
    /// The environment variable that holds the API key (Brave).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Results per query.
    #[serde(default = "max_results")]
    pub max_results: usize,
}

fn max_results() -> usize {
    8
}

/// A search provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchProvider {
    /// A SearXNG instance (`/search?format=json`).
    Searxng,
    /// Brave Search API.
    Brave,
}

/// Whether `ip` is one a fetched page must not make dsh reach.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (b == 18 || b == 19))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

/// Resolves names and drops the addresses [`is_private`] refuses.
struct PublicOnly {
    allowed: Arc<Vec<IpAddr>>,
}

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allowed = self.allowed.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|addr| !is_private(addr.ip()) || allowed.contains(&addr.ip()))
                .collect();
            if public.is_empty() && !found.is_empty() {
                return Err(format!(
                    "{host} resolves to a private address ({}); dsh does not fetch those",
                    found[0].ip()
                )
                .into());
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Why a URL may not be fetched: not HTTP(S), or a private address
/// written in it.
pub fn check_url(url: &reqwest::Url, allowed: &[IpAddr]) -> Result<(), String> {
    check_scheme(url)?;
    let host = url.host_str().unwrap_or("");
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = literal.parse::<IpAddr>() {
        if is_private(ip) && !allowed.contains(&ip) {
            return Err(format!(
                "{ip} is a private address; dsh does not fetch those"
            ));
        }
    }
    Ok(())
}

/// Why a URL is not one dsh fetches whatever its address: not HTTP(S),
/// or no host.
pub fn check_scheme(url: &reqwest::Url) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "only http and https URLs can be fetched, not {}:",
            url.scheme()
        ));
    }
    if url.host_str().unwrap_or("").is_empty() {
        return Err("the URL has no host".to_owned());
    }
    Ok(())
}

/// A fetched page.
#[derive(Debug)]
pub struct Page {
    /// The URL after redirects.
    pub url: String,
    /// Its content type.
    pub content_type: String,
    /// As markdown (HTML) or text.
    pub text: String,
    /// The download stopped at the cap.
    pub cut_download: bool,
    /// The HTML nested past [`html::MAX_DEPTH`] (or its quotes, lists and
    /// tables past [`html::MAX_BLOCK_NESTING`]): what lies deeper was
    /// flattened to its text.
    pub flattened: bool,
}

/// The fetching client for these settings.
///
/// # Errors
/// The client cannot be built.
pub fn fetch_client(settings: &WebSettings) -> Result<reqwest::Client, String> {
    crate::install_tls();
    let allowed = Arc::new(settings.allow_private.clone());
    let redirect_allowed = allowed.clone();
    let max_redirects = settings.max_redirects;
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(settings.timeout_ms))
        .user_agent(concat!("dsh/", env!("CARGO_PKG_VERSION")))
        .dns_resolver(Arc::new(PublicOnly { allowed }))
        .redirect(reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > max_redirects {
                return attempt.error(format!("more than {max_redirects} redirects"));
            }
            match check_url(attempt.url(), &redirect_allowed) {
                Ok(()) => attempt.follow(),
                Err(err) => {
                    let to = attempt.url().to_string();
                    attempt.error(format!("redirect to {to} refused: {err}"))
                }
            }
        }))
        .build()
        .map_err(|err| err.to_string())
}

/// Fetches `url` (see the module docs).
///
/// # Errors
/// What went wrong, for the model.
pub async fn fetch(
    client: &reqwest::Client,
    settings: &WebSettings,
    url: &str,
) -> Result<Page, String> {
    let parsed = reqwest::Url::parse(url.trim()).map_err(|err| format!("invalid URL: {err}"))?;
    check_url(&parsed, &settings.allow_private)?;
    let mut response = client.get(parsed).send().await.map_err(describe)?;
    let status = response.status();
    let final_url = response.url().to_string();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_owned();
    let textual = mime.is_empty()
        || mime.starts_with("text/")
        || mime.ends_with("+xml")
        || mime.ends_with("+json")
        || matches!(
            mime.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/x-javascript"
                | "application/toml"
                | "application/yaml"
                | "application/x-yaml"
                | "application/xhtml+xml"
        );
    if !textual {
        return Err(format!(
            "{final_url} is {mime}, not text; dsh returns text and HTML only"
        ));
    }
    let mut body = Vec::new();
    let mut cut_download = false;
    while let Some(chunk) = response.chunk().await.map_err(describe)? {
        let room = settings.max_download_bytes.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            cut_download = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let raw = String::from_utf8_lossy(&body).into_owned();
    let html = mime == "text/html"
        || mime == "application/xhtml+xml"
        || (mime.is_empty() && raw.trim_start().starts_with('<'));
    // Dropping this future (a cancelled call) stops the conversion.
    let (text, flattened) = if html {
        let markdown = html::to_markdown(raw, html::DEADLINE).await?;
        (markdown.text, markdown.flattened)
    } else {
        (raw, false)
    };
    if !status.is_success() {
        return Err(format!(
            "{final_url} answered {status}: {}",
            dsh_protocol::content::truncate_chars(text.trim(), 500)
        ));
    }
    Ok(Page {
        url: final_url,
        content_type: mime,
        text,
        cut_download,
        flattened,
    })
}

/// A reqwest error as the model should read it (with its causes).
fn describe(err: reqwest::Error) -> String {
    let mut text = if err.is_timeout() {
        "the request timed out".to_owned()
    } else {
        err.to_string()
    };
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// Title.
    pub title: String,
    /// URL.
    pub url: String,
    /// Snippet.
    pub snippet: String,
}

/// What a search found.
#[derive(Debug, Default)]
pub struct Found {
    /// Summary answers the provider gave.
    pub answers: Vec<String>,
    /// Results, merged across queries (first seen first, no duplicate URL).
    pub hits: Vec<Hit>,
}

/// Runs each query against the provider and merges the results.
///
/// # Errors
/// A provider failure, or no key where one is needed.
pub async fn search(
    settings: &SearchSettings,
    timeout: Duration,
    queries: &[String],
) -> Result<Found, String> {
    crate::install_tls();
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .user_agent(concat!("dsh/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|err| err.to_string())?;
    let mut found = Found::default();
    for query in queries {
        let (answers, hits) = match settings.provider {
            SearchProvider::Searxng => searxng(&client, settings, query).await?,
            SearchProvider::Brave => brave(&client, settings, query).await?,
        };
        for answer in answers {
            if !found.answers.contains(&answer) {
                found.answers.push(answer);
            }
        }
        for hit in hits.into_iter().take(settings.max_results) {
            if !found.hits.iter().any(|seen| seen.url == hit.url) {
                found.hits.push(hit);
            }
        }
    }
    Ok(found)
}

async fn get_json(request: reqwest::RequestBuilder) -> Result<serde_json::Value, String> {
    let response = request.send().await.map_err(describe)?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("the search provider answered {status}"));
    }
    response
        .json()
        .await
        .map_err(|err| format!("the search provider's answer is not JSON: {err}"))
}

fn text(value: &serde_json::Value, key: &str) -> String {
    value[key].as_str().unwrap_or("").trim().to_owned()
}

/// A provider's result list: `title`, `url` and the snippet under
/// `snippet_key`; results without a URL are dropped.
fn hits(results: &serde_json::Value, snippet_key: &str) -> Vec<Hit> {
    results
        .as_array()
        .into_iter()
        .flatten()
        .map(|result| Hit {
            title: text(result, "title"),
            url: text(result, "url"),
            snippet: text(result, snippet_key),
        })
        .filter(|hit| !hit.url.is_empty())
        .collect()
}

async fn searxng(
    client: &reqwest::Client,
    settings: &SearchSettings,
    query: &str,
) -> Result<(Vec<String>, Vec<Hit>), String> {
    let base = settings
        .url
        .as_deref()
        .ok_or("[web.search] provider = \"searxng\" needs url (the instance)")?
        .trim_end_matches('/');
    let url = reqwest::Url::parse_with_params(
        &format!("{base}/search"),
        &[("q", query), ("format", "json")],
    )
    .map_err(|err| format!("[web.search] url: {err}"))?;
    let json = get_json(client.get(url)).await?;
    let answers = json["answers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|answer| {
            answer
                .as_str()
                .map(str::to_owned)
                .or_else(|| answer["answer"].as_str().map(str::to_owned))
        })
        .collect();
    Ok((answers, hits(&json["results"], "content")))
}

async fn brave(
    client: &reqwest::Client,
    settings: &SearchSettings,
    query: &str,
) -> Result<(Vec<String>, Vec<Hit>), String> {
    let url = settings
        .url
        .as_deref()
        .unwrap_or("https://api.search.brave.com/res/v1/web/search");
    let env = settings.api_key_env.as_deref().unwrap_or("BRAVE_API_KEY");
    let key =
        std::env::var(env).map_err(|_| format!("the Brave search key is missing: set {env}"))?;
    let url = reqwest::Url::parse_with_params(url, &[("q", query)])
        .map_err(|err| format!("[web.search] url: {err}"))?;
    let json = get_json(
        client
            .get(url)
            .header("X-Subscription-Token", key)
            .header("Accept", "application/json"),
    )
    .await?;
    Ok((Vec::new(), hits(&json["web"]["results"], "description")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn urls_are_checked_before_any_request() {
        let check = |url: &str| check_url(&reqwest::Url::parse(url).unwrap(), &[]);
        assert!(check("https://docs.rs/tokio").is_ok());
        assert!(check("file:///etc/passwd")
            .unwrap_err()
            .contains("only http"));
        assert!(check("ftp://example.com/x").is_err());
        assert!(check("http://127.0.0.1:8080/")
            .unwrap_err()
            .contains("private"));
        assert!(check("http://[::1]/").unwrap_err().contains("private"));
        let allowed = ["127.0.0.1".parse().unwrap()];
        assert!(check_url(&reqwest::Url::parse("http://127.0.0.1/").unwrap(), &allowed).is_ok());
    }
}
