//! `dsh sessions list|show|delete`: the stored sessions from a terminal.
//! The list is `session/list`'s (newest first, subagents left out), `show`
//! reads the log a line at a time and prints its conversation as text (a
//! line per tool call), `delete` is `session/delete` (the session's
//! checkpoints and its subagents' logs go too). Both take an id or the
//! start of exactly one ([`resolve`]).

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use dsh_protocol::log::EventData;
use dsh_protocol::tool::ToolStatus;
use dsh_protocol::{SessionId, UserContent};

use crate::agent::Agent;
use crate::store::SessionStore;

/// `dsh sessions list`: id, last update, title and working directory, one
/// session a line, newest first. Exit status 0, or 1 when the store cannot
/// be read.
pub async fn list(agent: &Arc<Agent>, out: &mut dyn Write) -> u8 {
    let tty = std::io::stdout().is_terminal();
    let mut cursor: Option<String> = None;
    let mut any = false;
    loop {
        let page = match agent.list_sessions(None, cursor.as_deref(), false).await {
            Ok(page) => page,
            Err(err) => {
                let _ = writeln!(out, "dsh sessions list: {err}");
                return 1;
            }
        };
        for session in &page.sessions {
            if !any {
                let _ = writeln!(out, "{:<36}  {:<20}  {:<40}  CWD", "ID", "UPDATED", "TITLE");
                any = true;
            }
            let updated: String = session.updated_at.chars().take(19).collect();
            let title = one_line(session.title.as_deref().unwrap_or("(untitled)"), 40);
            // Titles and paths come from logs (the model, a repository):
            // escaped on a terminal.
            let line = format!(
                "{:<36}  {:<20}  {:<40}  {}",
                session.id,
                updated.replace('T', " "),
                title,
                session.cwd
            );
            // An unfinished goal follows, after the directory.
            let line = match &session.goal {
                Some(goal) => format!(
                    "{line}  goal {} {}/{}: {}",
                    goal.phase.as_str(),
                    goal.rounds_used,
                    goal.max_rounds,
                    one_line(&goal.objective, 60)
                ),
                None => line,
            };
            let _ = writeln!(out, "{}", crate::run::for_stream(&line, tty));
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    if !any {
        let _ = writeln!(out, "no stored sessions");
    }
    0
}

/// `text` on one line, at most `max` characters (an ellipsis when cut).
pub(super) fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The stored session `given` names: its id, or — as git takes a
/// commit's — the start of exactly one stored session's id (subagents'
/// included: `show` and `delete` take theirs too).
///
/// # Errors
/// What to say: no session is named, or the start is ambiguous (the
/// matches listed).
async fn resolve(store: &SessionStore, given: &str) -> Result<String, String> {
    let not_found = || format!("no session {}", given.chars().take(140).collect::<String>());
    let path = store.path(given).map_err(|_| not_found())?;
    if path.exists() {
        return Ok(given.to_owned());
    }
    let (store, prefix) = (store.clone(), given.to_owned());
    let mut matches: Vec<String> = tokio::task::spawn_blocking(move || {
        store
            .list()
            .into_iter()
            .filter(|session| session.id.starts_with(&prefix))
            .map(|session| session.id.to_string())
            .collect()
    })
    .await
    .map_err(|err| err.to_string())?;
    matches.sort();
    match matches.len() {
        0 => Err(not_found()),
        1 => Ok(matches.remove(0)),
        count => Err(format!(
            "{given:?} is ambiguous: {count} session ids start with it; give more of the id:\n  {}",
            matches.join("\n  ")
        )),
    }
}

/// `dsh sessions show ID`: the conversation as text — the user's prompts,
/// the replies, a line per tool call with its outcome. Exit status 1 for
/// an unknown or ambiguous id or an unreadable log.
pub async fn show(agent: &Arc<Agent>, given: &str, out: &mut (dyn Write + Send)) -> u8 {
    let store = SessionStore::new(agent.config().sessions_dir());
    let id = match resolve(&store, given).await {
        Ok(id) => id,
        Err(err) => {
            let _ = writeln!(out, "dsh sessions show: {err}");
            return 1;
        }
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(64);
    let reader = tokio::task::spawn_blocking(move || -> Result<(), String> {
        let log = store.read(&id, None).map_err(|err| err.to_string())?;
        let send = |text: String| tx.blocking_send(text).is_ok();
        if !send(format!("session {id}\ncwd: {}\n", log.header.cwd)) {
            return Ok(());
        }
        let mut titles = std::collections::HashMap::new();
        for event in log {
            let event = event.map_err(|err| err.to_string())?;
            if let Some(text) = describe(&event.data, &mut titles) {
                if !send(text) {
                    break;
                }
            }
        }
        Ok(())
    });
    // The model's words and command output: escaped on a terminal (an
    // escape sequence in a reply must not drive the user's terminal).
    let tty = std::io::stdout().is_terminal();
    while let Some(text) = rx.recv().await {
        let _ = writeln!(out, "{}", crate::run::for_stream(&text, tty));
    }
    match reader.await {
        Ok(Ok(())) => 0,
        Ok(Err(err)) => {
            let _ = writeln!(out, "dsh sessions show: {err}");
            1
        }
        Err(err) => {
            let _ = writeln!(out, "dsh sessions show: {err}");
            1
        }
    }
}

/// What `show` prints for an event, if anything.
fn describe(
    data: &EventData,
    titles: &mut std::collections::HashMap<String, String>,
) -> Option<String> {
    Some(match data {
        EventData::UserMessage { content, .. } => {
            let text: Vec<String> = content
                .iter()
                .map(|block| match block {
                    UserContent::Text { text } => text.clone(),
                    UserContent::Image { .. } => "[image]".to_owned(),
                    _ => "[resource]".to_owned(),
                })
                .collect();
            format!("> {}\n", text.join("\n").trim_end().replace('\n', "\n> "))
        }
        EventData::AssistantMessage { text, .. } if !text.trim().is_empty() => {
            format!("{}\n", text.trim_end())
        }
        EventData::ToolCall {
            call_id,
            name,
            view,
            ..
        } => {
            let title = if view.title.is_empty() {
                name.clone()
            } else {
                one_line(&view.title, 100)
            };
            titles.insert(call_id.to_string(), title);
            return None;
        }
        EventData::ToolResult {
            call_id,
            status,
            error,
            job,
            ..
        } => {
            let title = titles
                .remove(call_id.as_str())
                .unwrap_or_else(|| call_id.to_string());
            let mark = match status {
                ToolStatus::Completed if job.is_some() => "…",
                ToolStatus::Completed => "✓",
                ToolStatus::Failed => "✗",
                _ => "·",
            };
            match error {
                Some(error) => format!("  {mark} {title}: {}", one_line(&error.message, 200)),
                None => format!("  {mark} {title}"),
            }
        }
        EventData::TurnEnd {
            stop: None, error, ..
        } => format!(
            "  (the turn failed{})\n",
            error
                .as_ref()
                .map(|error| format!(": {}", error.message))
                .unwrap_or_default()
        ),
        EventData::CompactionSummary { .. } => "  (earlier conversation compacted)\n".to_owned(),
        _ => return None,
    })
}

/// `dsh sessions delete ID`: the session, its checkpoints and its
/// subagents' logs. Exit status 1 for an unknown or ambiguous id (nothing
/// is deleted), a session another dsh has open, or a file that cannot be
/// removed.
pub async fn delete(agent: &Arc<Agent>, given: &str, out: &mut dyn Write) -> u8 {
    let store = SessionStore::new(agent.config().sessions_dir());
    // An unknown id is an error, not a silent success.
    let id = match resolve(&store, given).await {
        Ok(id) => id,
        Err(err) => {
            let _ = writeln!(out, "dsh sessions delete: {err}");
            return 1;
        }
    };
    match agent.delete_session(&SessionId::new(id.as_str())).await {
        Ok(()) => {
            let _ = writeln!(out, "deleted session {id}");
            0
        }
        Err(err) => {
            let _ = writeln!(out, "dsh sessions delete: {err}");
            1
        }
    }
}
