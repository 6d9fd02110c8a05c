//! `session_event_read`: one event whole, from the log (the truth), with
//! one-line summaries of its neighbours; and the summary line every tool
//! shows of an event.

use std::collections::VecDeque;

use dsh_protocol::content::UserContent;
use dsh_protocol::log::{Event, EventData};
use dsh_protocol::ErrorCode;
use serde_json::json;

use super::auth;
use super::{iso, render, Context, EventReadArgs, Failure, SUMMARY_CHARS};

/// The event, unabridged (its JSON as the log holds it), after the
/// summaries of `before` events before it and `after` after it (first:
/// a result too long to show whole is cut from its end).
pub(super) fn event(args: &EventReadArgs, context: &Context) -> Result<String, Failure> {
    let (id, reader) = auth::open(context, args.session_id.as_deref())?;
    let before_n = args.before.unwrap_or(0).min(super::MAX_NEIGHBOURS) as usize;
    let after_n = args.after.unwrap_or(0).min(super::MAX_NEIGHBOURS) as usize;
    let mut before: VecDeque<serde_json::Value> = VecDeque::with_capacity(before_n);
    let mut after = Vec::with_capacity(after_n);
    let mut found: Option<Event> = None;
    auth::each_event(context, reader, |event| {
        if found.is_some() {
            if after.len() < after_n {
                after.push(summary(&event));
            }
            return after.len() < after_n;
        }
        if event.seq == args.seq {
            found = Some(event);
            return after_n > 0;
        }
        if event.seq > args.seq {
            return false;
        }
        if before_n > 0 {
            if before.len() == before_n {
                before.pop_front();
            }
            before.push_back(summary(&event));
        }
        true
    })?;
    let Some(found) = found else {
        return Err(Failure::new(
            ErrorCode::InvalidToolArgs,
            format!("Session {} has no event {}.", json!(id), args.seq),
        ));
    };
    let whole = shown(&found)?;
    let what = format!(
        "Event {} of session {}: the summaries of {} event(s) before it and {} after it, then the event whole.",
        found.seq,
        json!(id),
        before.len(),
        after.len()
    );
    Ok(render(
        &what,
        [
            json!({"before": Vec::from(before)}),
            json!({"after": after}),
            json!({"session_id": id, "event": whole}),
        ],
    ))
}

/// An event as the log holds it, less what only means something to a
/// provider or a connection: a call's `provider_id` (the model's own id,
/// when dsh changed it) and a result's `live_terminal` (a client's
/// terminal id). Everything else stays whole.
pub(super) fn shown(event: &Event) -> Result<serde_json::Value, Failure> {
    let mut whole = serde_json::to_value(event)
        .map_err(|err| Failure::new(ErrorCode::Internal, err.to_string()))?;
    if let Some(data) = whole.get_mut("data").and_then(|data| data.as_object_mut()) {
        data.remove("live_terminal");
        if let Some(calls) = data.get_mut("tool_calls").and_then(|c| c.as_array_mut()) {
            for call in calls.iter_mut().filter_map(|call| call.as_object_mut()) {
                call.remove("provider_id");
            }
        }
    }
    Ok(whole)
}

/// One line about an event: seq, type, time and the start of its text.
pub(super) fn summary(event: &Event) -> serde_json::Value {
    json!({
        "seq": event.seq,
        "type": type_of(event),
        "time": iso(event.time),
        "text": dsh_protocol::content::truncate_chars(&text_of(&event.data), SUMMARY_CHARS),
    })
}

/// An event's wire type (`user/message`...).
pub(super) fn type_of(event: &Event) -> String {
    serde_json::to_value(&event.data)
        .ok()
        .and_then(|value| {
            value
                .get("type")
                .and_then(|t| t.as_str())
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

/// The text that stands for an event in a summary: what was said or
/// shown, else its data as JSON.
fn text_of(data: &EventData) -> String {
    let content = |content: &[UserContent]| {
        content
            .iter()
            .map(|part| match part {
                UserContent::Text { text } | UserContent::Resource { text, .. } => text.clone(),
                UserContent::ResourceLink { uri, .. } => uri.clone(),
                UserContent::Image { mime_type, .. } => format!("[{mime_type} image]"),
                _ => String::new(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let text = match data {
        EventData::UserMessage { content: parts, .. } => content(parts),
        EventData::AssistantMessage {
            text,
            reasoning,
            tool_calls,
            ..
        } => {
            let calls: Vec<String> = tool_calls
                .iter()
                .map(|call| format!("{}({})", call.name, call.arguments))
                .collect();
            [text.as_str(), &calls.join(" ")]
                .into_iter()
                .find(|part| !part.trim().is_empty())
                .unwrap_or(reasoning)
                .to_owned()
        }
        EventData::ToolCall {
            name, arguments, ..
        } => format!("{name}({arguments})"),
        EventData::ToolResult { output, .. } => output.clone(),
        EventData::JobEnd { summary, .. } | EventData::Undo { summary, .. } => summary.clone(),
        EventData::CompactionSummary { summary, .. } => summary.clone(),
        EventData::Title { title, .. } => title.clone(),
        EventData::Notice { text } => text.clone(),
        EventData::Instructions { text, .. } | EventData::Skills { text, .. } => text.clone(),
        EventData::CompactionFailed { message, .. } => message.clone(),
        other => serde_json::to_value(other)
            .ok()
            .and_then(|value| value.get("data").map(serde_json::Value::to_string))
            .unwrap_or_default(),
    };
    // One line, from a bounded head (a summary never copies a whole
    // megabyte around).
    let head: String = text.chars().take(SUMMARY_CHARS * 4).collect();
    head.split_whitespace().collect::<Vec<_>>().join(" ")
}
