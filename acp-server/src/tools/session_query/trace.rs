//! `session_trace` (a session's visible lineage and its compactions) and
//! `session_event_trace` (what replaced an event, and the events it comes
//! from or leads to).

use std::collections::{HashMap, HashSet, VecDeque};

use dsh_protocol::log::{Event, EventData};
use dsh_protocol::ErrorCode;
use serde_json::json;

use super::auth;
use super::read::summary;
use super::search::{lineage_of, Relation};
use super::{iso, render, Context, EventTraceArgs, Failure, TraceArgs};
use crate::search::{Scope, SessionInfo, MAX_LIMIT};

/// The session, its ancestors and descendants of this workspace (each
/// with how it came from its parent), and its compactions.
pub(super) fn lineage(args: &TraceArgs, context: &Context) -> Result<String, Failure> {
    let (id, reader) = auth::open(context, args.session_id.as_deref())?;
    let header = reader.header.clone();
    let mut compactions = Vec::new();
    let mut more_compactions = false;
    auth::each_event(context, reader, |event| {
        let entry = match &event.data {
            EventData::CompactionSummary {
                start,
                end,
                messages,
                ..
            } => json!({
                "seq": event.seq, "type": "compaction/summary", "time": iso(event.time),
                "replaced": {"from_seq": start, "to_seq": end}, "messages": messages,
            }),
            EventData::CompactionPrune { calls, .. } => json!({
                "seq": event.seq, "type": "compaction/prune", "time": iso(event.time),
                "pruned_calls": calls.len(),
            }),
            _ => return true,
        };
        if compactions.len() < MAX_LIMIT {
            compactions.push(entry);
        } else {
            more_compactions = true;
        }
        true
    })?;
    let infos: HashMap<String, SessionInfo> = context
        .store
        .search()
        .sessions_until(&Scope::Workspaces(vec![context.cwd.clone()]), &context.stop)?
        .into_iter()
        .filter(|info| info.cwd == context.cwd)
        .map(|info| (info.id.clone(), info))
        .collect();
    let parent_of_self = header
        .subagent_of
        .as_ref()
        .map(|origin| origin.session.as_str().to_owned())
        .or_else(|| {
            header
                .forked_from
                .as_ref()
                .map(|origin| origin.session.as_str().to_owned())
        });
    // A parent is shown when it is one of this workspace's sessions (a
    // fork's may be another workspace's: neither its id nor that there is
    // one is shown).
    let (shown_parent, own_relation) = match &parent_of_self {
        Some(parent) if infos.contains_key(parent) => (
            Some(parent.clone()),
            Some(if header.subagent_of.is_some() {
                Relation::Subagent
            } else {
                Relation::Fork
            }),
        ),
        _ => (None, None),
    };
    let mut lines = vec![json!({
        "role": "self", "generation": 0, "id": id,
        "parent": shown_parent, "relation": own_relation,
        "title": infos.get(&id).and_then(|info| info.title.clone()),
        "created_at": iso(header.created_at),
    })];
    let mut seen: HashSet<String> = HashSet::from([id.clone()]);
    // Ancestors: up the parents this workspace holds.
    let mut next = parent_of_self;
    let mut generation = 0i64;
    while let Some(parent) = next.take() {
        let Some(info) = infos.get(&parent) else {
            break;
        };
        if !seen.insert(parent) || lines.len() > MAX_LIMIT {
            break;
        }
        generation -= 1;
        lines.push(entry("ancestor", generation, info, &infos));
        next = info.parent().map(str::to_owned);
    }
    // Descendants: breadth first.
    let mut children: HashMap<&str, Vec<&SessionInfo>> = HashMap::new();
    for info in infos.values() {
        if let Some(parent) = info.parent() {
            children.entry(parent).or_default().push(info);
        }
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    }
    let mut queue = VecDeque::from([(id.clone(), 0i64)]);
    let mut more_sessions = false;
    while let Some((at, generation)) = queue.pop_front() {
        for child in children.get(at.as_str()).into_iter().flatten() {
            if !seen.insert(child.id.clone()) {
                continue;
            }
            if lines.len() > MAX_LIMIT {
                more_sessions = true;
                break;
            }
            lines.push(entry("descendant", generation + 1, child, &infos));
            queue.push_back((child.id.clone(), generation + 1));
        }
    }
    let what = format!(
        "The lineage of session {} in this workspace ({} session(s){}), one a line, then its compactions ({}{}):",
        json!(id),
        lines.len(),
        if more_sessions { ", more not shown" } else { "" },
        compactions.len(),
        if more_compactions { ", more not shown" } else { "" },
    );
    lines.push(json!({"compactions": compactions}));
    Ok(render(&what, lines))
}

/// A line of the lineage; its parent shown when it is one of `infos` (this
/// workspace's sessions).
fn entry(
    role: &str,
    generation: i64,
    info: &SessionInfo,
    infos: &HashMap<String, SessionInfo>,
) -> serde_json::Value {
    let (parent, relation) = lineage_of(info, |id| infos.contains_key(id));
    json!({
        "role": role, "generation": generation, "id": info.id,
        "parent": parent, "relation": relation,
        "title": info.title, "created_at": iso(info.created_at),
    })
}

/// The call ids an event is about.
fn call_ids(data: &EventData) -> Vec<&str> {
    match data {
        EventData::AssistantMessage { tool_calls, .. } => {
            tool_calls.iter().map(|call| call.id.as_str()).collect()
        }
        EventData::ToolCall { call_id, .. }
        | EventData::ToolResult { call_id, .. }
        | EventData::JobEnd { call_id, .. }
        | EventData::PermissionDecision { call_id, .. }
        | EventData::PlanDecision { call_id, .. }
        | EventData::QuestionDecision { call_id, .. }
        | EventData::CompactionStart { call_id, .. }
        | EventData::CompactionFailed { call_id, .. }
        | EventData::Undo { call_id, .. } => vec![call_id.as_str()],
        EventData::CompactionSummary {
            call_id: Some(call_id),
            ..
        } => vec![call_id.as_str()],
        _ => Vec::new(),
    }
}

/// The turn an event says it belongs to.
fn turn_field(data: &EventData) -> Option<u64> {
    match data {
        EventData::UserMessage { turn, .. }
        | EventData::TurnStart { turn }
        | EventData::TurnEnd { turn, .. }
        | EventData::AssistantMessage { turn, .. }
        | EventData::ToolCall { turn, .. }
        | EventData::ToolResult { turn, .. }
        | EventData::Checkpoint { turn, .. } => Some(*turn),
        _ => None,
    }
}

/// What the target is about, from the first reading.
struct Target {
    event: Event,
    calls: Vec<String>,
    turn: Option<u64>,
}

/// The event's replacement relations (the summary or prune that replaced
/// it; what a summary or prune replaced) and source relations (the reply
/// that asked for its call, the call's other events, its turn's prompt,
/// start and end).
pub(super) fn event(args: &EventTraceArgs, context: &Context) -> Result<String, Failure> {
    let (id, reader) = auth::open(context, args.session_id.as_deref())?;
    let mut target = None;
    let mut open_turn = None;
    auth::each_event(context, reader, |event| {
        if let EventData::TurnStart { turn } = event.data {
            open_turn = Some(turn);
        }
        if event.seq == args.seq {
            let turn = turn_field(&event.data).or(open_turn);
            let calls = call_ids(&event.data)
                .into_iter()
                .map(str::to_owned)
                .collect();
            target = Some(Target { event, calls, turn });
            return false;
        }
        if let EventData::TurnEnd { .. } = event.data {
            open_turn = None;
        }
        event.seq < args.seq
    })?;
    let Some(target) = target else {
        return Err(Failure::new(
            ErrorCode::InvalidToolArgs,
            format!("Session {} has no event {}.", json!(id), args.seq),
        ));
    };
    let mut relations = Vec::new();
    if let EventData::CompactionSummary { start, end, .. } = &target.event.data {
        relations.push(json!({
            "group": "replacement", "relation": "replaces",
            "from_seq": start, "to_seq": end,
        }));
    }
    let mut more = false;
    let (_, reader) = auth::open(context, Some(&id))?;
    let mut open_turn = None;
    auth::each_event(context, reader, |event| {
        if let EventData::TurnStart { turn } = event.data {
            open_turn = Some(turn);
        }
        let turn = turn_field(&event.data).or(open_turn);
        if let EventData::TurnEnd { .. } = event.data {
            open_turn = None;
        }
        if event.seq == target.event.seq {
            return true;
        }
        let Some((group, kind)) = related(&target, &event, turn) else {
            return true;
        };
        if relations.len() >= MAX_LIMIT {
            more = true;
            return false;
        }
        let mut line = summary(&event);
        line["group"] = json!(group);
        line["relation"] = json!(kind);
        relations.push(line);
        true
    })?;
    let what = format!(
        "Event {} ({}) of session {}, then its relations, one a line{}:",
        target.event.seq,
        super::read::type_of(&target.event),
        json!(id),
        if more { " (more not shown)" } else { "" }
    );
    let mut lines = vec![summary(&target.event)];
    lines.extend(relations);
    Ok(render(&what, lines))
}

/// How `event` relates to the target, if it does: its group
/// (`replacement` or `source`) and the relation.
fn related(
    target: &Target,
    event: &Event,
    turn: Option<u64>,
) -> Option<(&'static str, &'static str)> {
    let seq = target.event.seq;
    match &event.data {
        EventData::CompactionSummary { start, end, .. } if (*start..=*end).contains(&seq) => {
            return Some(("replacement", "shadowed-by"))
        }
        EventData::CompactionPrune { calls, .. }
            if matches!(target.event.data, EventData::ToolResult { .. })
                && calls
                    .iter()
                    .any(|call| target.calls.iter().any(|c| c == call.as_str())) =>
        {
            return Some(("replacement", "pruned-by"))
        }
        EventData::ToolResult { call_id, .. } => {
            if let EventData::CompactionPrune { calls, .. } = &target.event.data {
                if calls.iter().any(|call| call == call_id) {
                    return Some(("replacement", "prunes"));
                }
            }
        }
        _ => {}
    }
    if let EventData::CompactionSummary { start, end, .. } = &target.event.data {
        if (*start..=*end).contains(&event.seq) {
            // Listed as one range ("replaces"), not event by event.
            return None;
        }
    }
    let shares_call = call_ids(&event.data)
        .iter()
        .any(|call| target.calls.iter().any(|c| c == call));
    if shares_call {
        let kind = match (&target.event.data, &event.data) {
            (EventData::AssistantMessage { .. }, _) => "requests",
            (_, EventData::AssistantMessage { .. }) => "requested-by",
            _ => "same-call",
        };
        return Some(("source", kind));
    }
    let same_turn = target.turn.is_some() && turn == target.turn;
    match &event.data {
        EventData::UserMessage { steered: false, .. } if same_turn => {
            Some(("source", "turn-prompt"))
        }
        EventData::UserMessage { steered: true, .. } if same_turn => Some(("source", "turn-steer")),
        EventData::TurnStart { .. } if same_turn => Some(("source", "turn-start")),
        EventData::TurnEnd { .. } if same_turn => Some(("source", "turn-end")),
        _ => None,
    }
}
