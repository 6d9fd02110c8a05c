//! `dsh sessions search QUERY`: the stored sessions whose events contain
//! every word of the query, through the session search index
//! ([`crate::search`]). The current directory's workspace by default (as
//! `dsh run` writes it in a session's header, and as `sessions list`
//! filters it), every workspace with `--all`; a person's sessions only (a
//! subagent's log is not listed either; forks are), each once with its
//! best event.
//! The SDK's `session/search` shares [`workspace`], [`search`] and
//! [`hit_json`].

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::agent::Agent;
use crate::search::{Filter, Hit, Query, Scope, SearchError, SearchIndex, MAX_LIMIT};

/// How many sessions a search shows unless told.
pub const DEFAULT_LIMIT: usize = 20;

/// The scope of a directory's workspace: sessions whose header's cwd is
/// `dir` as given or canonical (`dsh run` and editors write the canonical
/// path; `session/list` matches both the same way).
pub fn workspace(dir: &Path) -> Scope {
    let raw = dir.to_string_lossy().into_owned();
    let canonical = dunce::canonicalize(dir)
        .map(|dir| dir.to_string_lossy().into_owned())
        .unwrap_or_else(|_| raw.clone());
    let mut dirs = vec![canonical];
    if !dirs.contains(&raw) {
        dirs.push(raw);
    }
    Scope::Workspaces(dirs)
}

/// The query a person's search makes: the sessions of `scope` but
/// subagents' logs (forks stay: they are a person's sessions, as
/// `sessions list` shows them), the best event of each, best first, at
/// most `limit` (1 to [`MAX_LIMIT`]).
pub fn query(text: &str, scope: Scope, limit: usize) -> Query {
    Query {
        text: text.to_owned(),
        scope,
        filter: Filter {
            no_subagents: true,
            ..Filter::default()
        },
        best_per_session: true,
        by_relevance: true,
        limit: limit.clamp(1, MAX_LIMIT),
    }
}

/// Runs `query` on the index off the runtime's threads.
///
/// # Errors
/// The index failed, or the query has no word.
pub async fn search(index: Arc<SearchIndex>, query: Query) -> Result<Vec<Hit>, SearchError> {
    tokio::task::spawn_blocking(move || index.search(&query))
        .await
        .map_err(|err| SearchError::Index(err.to_string()))?
}

/// A hit as JSON: `id, cwd, title, created_at, seq, event_type, time,
/// surface, snippet` (times in epoch ms; the snippet raw).
pub fn hit_json(hit: &Hit) -> Value {
    json!({
        "id": hit.session.id,
        "cwd": hit.session.cwd,
        "title": hit.session.title,
        "created_at": hit.session.created_at,
        "seq": hit.seq,
        "event_type": hit.event_type,
        "time": hit.time,
        "surface": hit.surface,
        "snippet": hit.snippet,
    })
}

/// `dsh sessions search`'s flags.
#[derive(Debug, Clone)]
pub struct SearchArgs {
    /// The words.
    pub query: String,
    /// One JSON document instead of text.
    pub json: bool,
    /// Every workspace, not only the current directory's.
    pub all: bool,
    /// At most this many sessions.
    pub limit: usize,
}

/// `dsh sessions search`: a block per matching session — id, the matching
/// event's time (UTC, as `sessions list` prints it) and title, then the
/// event's type and the matching line — best first, or with `--json` one
/// array of [`hit_json`]. Titles and snippets come from logs (the model, a
/// repository): escaped on a terminal. Exit status 0 (with "no matching
/// sessions" when none), 1 when the search fails.
pub async fn run(agent: &Arc<Agent>, args: &SearchArgs, out: &mut dyn Write) -> u8 {
    let scope = if args.all {
        Scope::All
    } else {
        match std::env::current_dir() {
            Ok(dir) => workspace(&dir),
            Err(err) => {
                let _ = writeln!(out, "dsh sessions search: no current directory: {err}");
                return 1;
            }
        }
    };
    let query = query(&args.query, scope, args.limit);
    let hits = match search(Arc::clone(agent.search_index()), query).await {
        Ok(hits) => hits,
        Err(err) => {
            let _ = writeln!(out, "dsh sessions search: {err}");
            return 1;
        }
    };
    if args.json {
        let hits: Vec<Value> = hits.iter().map(hit_json).collect();
        let _ = writeln!(out, "{}", Value::Array(hits));
        return 0;
    }
    if hits.is_empty() {
        let _ = writeln!(out, "no matching sessions");
        return 0;
    }
    let tty = std::io::stdout().is_terminal();
    for hit in &hits {
        let _ = writeln!(
            out,
            "{}",
            crate::run::for_stream(&describe(hit), tty).trim_end()
        );
    }
    0
}

/// The block `run` prints for a hit: `ID  TIME  TITLE`, then the event's
/// type and its matching line, indented.
fn describe(hit: &Hit) -> String {
    let time =
        humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(hit.time)).to_string();
    let title = super::sessions::one_line(hit.session.title.as_deref().unwrap_or("(untitled)"), 80);
    format!(
        "{}  {}  {}\n    {}: {}\n",
        hit.session.id,
        time.trim_end_matches('Z').replace('T', " "),
        title,
        hit.event_type,
        super::sessions::one_line(&hit.snippet, crate::search::SNIPPET_CHARS),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{SessionInfo, Surface};

    fn hit(title: &str, snippet: &str) -> Hit {
        Hit {
            session: SessionInfo {
                id: "s1".to_owned(),
                cwd: "/w".to_owned(),
                title: Some(title.to_owned()),
                created_at: 0,
                subagent_of: None,
                forked_from: None,
            },
            seq: 3,
            time: 1_796_095_029_064,
            event_type: "user/message".to_owned(),
            surface: Surface::Current,
            snippet: snippet.to_owned(),
        }
    }

    #[test]
    fn a_hit_is_its_session_time_title_and_line() {
        let text = describe(&hit("Fix the\nparser", "the flaky parser test"));
        assert_eq!(
            text,
            "s1  2026-12-01 03:17:09  Fix the parser\n    user/message: the flaky parser test\n"
        );
    }

    #[test]
    fn escape_sequences_from_a_log_are_escaped_on_a_terminal_only() {
        let text = describe(&hit("\x1b]0;pwned\x07title", "word \x1b[2J here"));
        let shown = crate::run::for_stream(&text, true);
        assert!(
            !shown.contains('\x1b') && !shown.contains('\x07'),
            "{shown}"
        );
        assert!(shown.contains("title") && shown.contains("here"), "{shown}");
        assert_eq!(crate::run::for_stream(&text, false), text);
    }

    #[test]
    fn the_workspace_is_the_directory_as_given_and_canonical() {
        let dir = tempfile::tempdir().unwrap();
        let canonical = dunce::canonicalize(dir.path()).unwrap();
        let Scope::Workspaces(dirs) = workspace(&canonical.join(".")) else {
            panic!("a workspace scope");
        };
        assert_eq!(dirs[0], canonical.to_string_lossy());
        let Scope::Workspaces(dirs) = workspace(&canonical) else {
            panic!("a workspace scope");
        };
        assert_eq!(dirs, vec![canonical.to_string_lossy().into_owned()]);
    }

    #[test]
    fn the_query_asks_for_the_best_event_of_each_session() {
        let query = query("parser", Scope::All, 7);
        assert_eq!(query.limit, 7);
        assert!(query.filter.no_subagents && query.filter.parents.is_none());
        assert!(query.best_per_session);
    }
}
