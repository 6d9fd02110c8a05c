//! `web_fetch` and `web_search` (seeds: `dsh-tool-web`); the work is in
//! [`crate::web`].

use dsh_protocol::tool::{ToolOutcome, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use super::{Refusal, ToolEnv};

pub const FETCH_DESCRIPTION: &str =
    "Fetch the content of an HTTP(S) URL and return it decoded as text.";
pub const SEARCH_DESCRIPTION: &str = "Search the web for up-to-date information. Give 1–4 queries in the required queries array. Returns an optional summary answer and a list of source URLs.";

#[derive(Debug, Deserialize)]
pub struct FetchArgs {
    pub url: String,
}

#[derive(Debug, Deserialize)]
pub struct SearchArgs {
    pub queries: Vec<String>,
}

/// The host a fetch goes to (what "always allow" remembers).
///
/// # Errors
/// Not a URL, or not one dsh fetches.
pub fn host(args: &FetchArgs) -> Result<String, Refusal> {
    let url = reqwest::Url::parse(args.url.trim()).map_err(|err| {
        Refusal::new(
            ErrorCode::InvalidToolArgs,
            format!("{:?} is not a URL: {err}", args.url),
        )
    })?;
    // The address is decided at fetch time (the configuration may allow a
    // private one); the scheme now.
    crate::web::check_scheme(&url).map_err(|err| Refusal::new(ErrorCode::InvalidToolArgs, err))?;
    Ok(url.host_str().unwrap_or("").to_owned())
}

/// # Errors
/// No query, too many, or an empty one.
pub fn validate_search(args: &SearchArgs) -> Result<(), Refusal> {
    if args.queries.is_empty() || args.queries.len() > 4 {
        return Err(Refusal::new(
            ErrorCode::InvalidToolArgs,
            format!("queries takes 1–4 items, not {}.", args.queries.len()),
        ));
    }
    if args.queries.iter().any(|q| q.trim().is_empty()) {
        return Err(Refusal::new(
            ErrorCode::InvalidToolArgs,
            "A query is empty.",
        ));
    }
    Ok(())
}

fn client(settings: &crate::web::WebSettings) -> Result<reqwest::Client, String> {
    static CLIENT: std::sync::OnceLock<Result<reqwest::Client, String>> =
        std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| crate::web::fetch_client(settings))
        .clone()
}

pub async fn fetch(args: &FetchArgs, env: &ToolEnv<'_>) -> ToolOutcome {
    let settings = env.web;
    let client = match client(settings) {
        Ok(client) => client,
        Err(err) => return ToolOutcome::failed(ErrorCode::Internal, err),
    };
    let page = tokio::select! {
        page = crate::web::fetch(&client, settings, &args.url) => page,
        () = env.cancel.cancelled() => Err("cancelled by the user".to_owned()),
    };
    match page {
        Err(err) => ToolOutcome::failed(
            ErrorCode::WebFailed,
            format!("web_fetch {}: {err}", args.url),
        ),
        Ok(page) => {
            let max = settings.max_output_bytes;
            let mut text = page.text;
            let total = text.len();
            let mut notes = Vec::new();
            if total > max {
                let cut = dsh_protocol::content::head_bytes(&text, max).len();
                let full = text.clone();
                text.truncate(cut);
                let spilled =
                    super::spill::Spilled::save(super::spill::SpillTarget::new(env, "md"), full)
                        .await;
                notes.push(format!(
                    "truncated: showing the first {cut} of {total} bytes. {}",
                    spilled.sentence("page")
                ));
            }
            if page.flattened {
                notes.push(format!(
                    "the page is nested deeper than dsh converts ({} elements, or {} quotes, lists and tables); what lies deeper is kept as flat text",
                    crate::web::html::MAX_DEPTH,
                    crate::web::html::MAX_BLOCK_NESTING
                ));
            }
            if page.cut_download {
                notes.push(format!(
                    "the download stopped at {} bytes",
                    settings.max_download_bytes
                ));
            }
            let mut output = format!(
                "URL: {}\nContent-Type: {}\n\n{text}",
                page.url, page.content_type
            );
            if !notes.is_empty() {
                output.push_str(&format!("\n\n[{}]", notes.join("; ")));
            }
            let view = ToolView::text(format!(
                "Fetched {} ({} bytes{})",
                page.url,
                total,
                if notes.is_empty() { "" } else { ", truncated" }
            ));
            ToolOutcome::ok(output, view)
        }
    }
}

pub async fn search(args: &SearchArgs, env: &ToolEnv<'_>) -> ToolOutcome {
    let Some(settings) = &env.web.search else {
        return ToolOutcome::failed(ErrorCode::Internal, "no search provider is configured");
    };
    let timeout = std::time::Duration::from_millis(env.web.timeout_ms);
    let found = tokio::select! {
        found = crate::web::search(settings, timeout, &args.queries) => found,
        () = env.cancel.cancelled() => Err("cancelled by the user".to_owned()),
    };
    match found {
        Err(err) => ToolOutcome::failed(ErrorCode::WebFailed, format!("web_search: {err}")),
        Ok(found) => {
            let mut output = String::new();
            for answer in &found.answers {
                output.push_str(&format!("Answer: {answer}\n\n"));
            }
            if found.hits.is_empty() {
                output.push_str("No results.");
            }
            for (n, hit) in found.hits.iter().enumerate() {
                output.push_str(&format!("{}. [{}]({})\n", n + 1, hit.title, hit.url));
                if !hit.snippet.is_empty() {
                    output.push_str(&format!("   {}\n", hit.snippet));
                }
            }
            let view = ToolView::text(
                found
                    .hits
                    .iter()
                    .map(|hit| format!("- [{}]({})", hit.title, hit.url))
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
            ToolOutcome::ok(output, view)
        }
    }
}
