//! `session_search` (the best event of each visible session) and
//! `session_event_search` (events of one session), over the index.

use serde_json::json;

use super::auth::{self, checked_ms};
use super::{iso, render, Availability, Context, EventSearchArgs, Failure, SearchArgs};
use crate::search::{Filter, Hit, Query, Scope, MAX_LIMIT, SNIPPET_CHARS};

/// The best-matching event of each earlier session of the caller's
/// workspace (the caller's own session is left out: its events are
/// `session_event_search`'s, without the calling step).
pub(super) fn sessions(args: &SearchArgs, context: &Context) -> Result<String, Failure> {
    let limit = super::DEFAULT_LIMIT.min(MAX_LIMIT);
    let mut session_ids = args.session_ids.clone();
    let wanted = args.availability.as_deref().unwrap_or_default();
    // Every session has its log (`persisted`); `live` alone keeps the
    // sessions loaded in this process.
    if !wanted.is_empty() && !wanted.contains(&Availability::Persisted) {
        let live = context.live.clone();
        session_ids = Some(match session_ids {
            Some(ids) => ids.into_iter().filter(|id| live.contains(id)).collect(),
            None => live,
        });
    }
    if session_ids.as_ref().is_some_and(Vec::is_empty) {
        return Ok(present_sessions(&args.query, &[], context));
    }
    // Only a visible session is a parent to ask for: a fork of another
    // workspace's session does not answer to that session's id (which
    // would tell that it exists).
    let parents = args.parent_session_ids.as_ref().map(|ids| {
        ids.iter()
            .filter(|id| auth::open(context, Some(id)).is_ok())
            .cloned()
            .collect::<Vec<_>>()
    });
    let filter = Filter {
        session_ids,
        created_from: checked_ms(&args.created_at_from)?,
        created_to: checked_ms(&args.created_at_to)?,
        include_roots: parents.is_some() && args.include_root_sessions.unwrap_or(false),
        parents,
        seq_from: args.event_seq_from,
        seq_to: args.event_seq_to,
        time_from: checked_ms(&args.event_time_from)?,
        time_to: checked_ms(&args.event_time_to)?,
        event_types: args.event_types.clone(),
        surfaces: args.event_surfaces.clone(),
        // Subagents' sessions are the workspace's too (the model may
        // recall what a child did).
        ..Filter::default()
    };
    let query = Query {
        text: args.query.clone(),
        scope: Scope::Workspaces(vec![context.cwd.clone()]),
        filter,
        best_per_session: true,
        by_relevance: false,
        // One more: the caller's own session may be among them.
        limit: limit + 1,
    };
    let mut hits = context.store.search().search_until(&query, &context.stop)?;
    hits.retain(|hit| visible(hit, context) && hit.session.id != context.caller);
    hits.truncate(limit);
    Ok(present_sessions(&args.query, &hits, context))
}

/// The events of one visible session that match; in the caller's own
/// session, not those of the step making this call.
pub(super) fn events(args: &EventSearchArgs, context: &Context) -> Result<String, Failure> {
    let (id, reader) = auth::open(context, args.session_id.as_deref())?;
    drop(reader);
    let mut seq_to = args.seq_to;
    if id == context.caller {
        if let Some(step) = auth::calling_step(context)? {
            let before = step.saturating_sub(1);
            seq_to = Some(seq_to.map_or(before, |to| to.min(before)));
        }
    }
    let limit = super::DEFAULT_LIMIT.min(MAX_LIMIT);
    let filter = Filter {
        session_ids: Some(vec![id.clone()]),
        seq_from: args.seq_from,
        seq_to,
        time_from: checked_ms(&args.time_from)?,
        time_to: checked_ms(&args.time_to)?,
        event_types: args.event_types.clone(),
        surfaces: args.surfaces.clone(),
        ..Filter::default()
    };
    let query = Query {
        text: args.query.clone(),
        scope: Scope::Workspaces(vec![context.cwd.clone()]),
        filter,
        best_per_session: false,
        by_relevance: false,
        limit,
    };
    let mut hits = if seq_to == Some(0) {
        Vec::new()
    } else {
        context.store.search().search_until(&query, &context.stop)?
    };
    hits.retain(|hit| visible(hit, context) && hit.session.id == id);
    hits.truncate(limit);
    let what = format!(
        "{} matching event(s) of session {} for {}, newest first (at most {limit}):",
        hits.len(),
        json!(id),
        json!(args.query)
    );
    Ok(render(&what, hits.iter().map(event_json)))
}

/// The index answers for the scope it was given; checked again here, so
/// a result from elsewhere is never shown.
fn visible(hit: &Hit, context: &Context) -> bool {
    hit.session.cwd == context.cwd
}

fn present_sessions(query: &str, hits: &[Hit], context: &Context) -> String {
    let what = format!(
        "{} earlier session(s) of this workspace match {}, the most recently written first, each with its newest matching event:",
        hits.len(),
        json!(query)
    );
    let mut parents = std::collections::HashMap::new();
    render(
        &what,
        hits.iter().map(|hit| {
            let info = &hit.session;
            let (parent, relation) = lineage_of(info, |id| {
                *parents
                    .entry(id.to_owned())
                    .or_insert_with(|| auth::open(context, Some(id)).is_ok())
            });
            let mut availability = vec!["persisted"];
            if context.live.contains(&info.id) {
                availability.insert(0, "live");
            }
            json!({
                "session": {
                    "id": info.id,
                    "created_at": iso(info.created_at),
                    "title": info.title,
                    "parent": parent,
                    "relation": relation,
                    "availability": availability,
                },
                "event": event_json(hit),
            })
        }),
    )
}

/// How a session came from its parent.
#[derive(Debug, Clone, Copy, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Relation {
    /// A subagent's session: its parent started it.
    Subagent,
    /// A fork of its parent.
    Fork,
}

/// A session's parent and how it came from it, shown only when the caller
/// may see that parent (`visible`: of this workspace, not deleted). A
/// fork's parent may be another workspace's session: its id is not shown,
/// nor that there is one (both `None`, as for a session without one).
pub(super) fn lineage_of(
    info: &crate::search::SessionInfo,
    visible: impl FnOnce(&str) -> bool,
) -> (Option<String>, Option<Relation>) {
    let (parent, relation) = match (&info.subagent_of, &info.forked_from) {
        (Some(parent), _) => (parent, Relation::Subagent),
        (None, Some(parent)) => (parent, Relation::Fork),
        (None, None) => return (None, None),
    };
    if visible(parent) {
        (Some(parent.clone()), Some(relation))
    } else {
        (None, None)
    }
}

fn event_json(hit: &Hit) -> serde_json::Value {
    json!({
        "seq": hit.seq,
        "type": hit.event_type,
        "time": iso(hit.time),
        "surface": hit.surface.as_str(),
        "snippet": dsh_protocol::content::truncate_chars(&hit.snippet, SNIPPET_CHARS - 1),
    })
}
