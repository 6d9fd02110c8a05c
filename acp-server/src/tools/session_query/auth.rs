//! Who may see what, and the arguments every tool shares: a target session
//! is visible when its log's header names the calling session's working
//! directory; every other id gets one and the same answer, so nothing
//! tells whether it exists elsewhere.

use dsh_protocol::log::Event;
use dsh_protocol::ErrorCode;

use super::{Context, Failure};
use crate::store::LogReader;

/// The one answer for a session the caller may not see (another
/// workspace's, deleted, never existed, not an id).
pub(super) fn no_such_session(id: &str) -> Failure {
    let shown: String = id.chars().take(80).collect();
    Failure::new(
        ErrorCode::SessionNotFound,
        format!(
            "No such session in this workspace: {}.",
            serde_json::Value::String(shown)
        ),
    )
}

/// A timezone-qualified ISO 8601 time as epoch ms; `None` stays `None`.
///
/// # Errors
/// A time without an offset or zone, or not a time.
pub(super) fn time_ms(text: Option<&str>) -> Result<Option<u64>, String> {
    let Some(text) = text else {
        return Ok(None);
    };
    let at: jiff::Timestamp = text.trim().parse().map_err(|err| {
        format!(
            "{text:?} is not a timezone-qualified ISO 8601 time ({err}); write it with an offset or a zone, like 2026-05-01T09:30:00Z or 2026-05-01T11:30:00+02:00."
        )
    })?;
    Ok(Some(u64::try_from(at.as_millisecond()).unwrap_or(0)))
}

/// [`time_ms`] for arguments already checked when the call was planned.
pub(super) fn checked_ms(text: &Option<String>) -> Result<Option<u64>, Failure> {
    time_ms(text.as_deref()).map_err(|message| Failure::new(ErrorCode::InvalidToolArgs, message))
}

/// The session a call names (the caller's own when it names none), with
/// its log open for reading, when the caller may see it.
///
/// # Errors
/// [`no_such_session`] for anything not visible; a log that cannot be
/// read is said as such.
pub(super) fn open(context: &Context, id: Option<&str>) -> Result<(String, LogReader), Failure> {
    let id = id.unwrap_or(&context.caller);
    // The store validates the id (no path tricks) and says a missing log
    // is missing; both are "no such session".
    let reader = match context.store.read(id, None) {
        Ok(reader) => reader,
        Err(crate::error::AgentError::SessionNotFound(_)) => return Err(no_such_session(id)),
        Err(err) if id != context.caller => {
            tracing::debug!(%err, session = id, "a session-query target could not be read");
            return Err(no_such_session(id));
        }
        Err(err) => {
            return Err(Failure::new(
                ErrorCode::Internal,
                format!("this session's log could not be read: {err}"),
            ))
        }
    };
    if reader.header.cwd != context.cwd || reader.header.id.as_str() != id {
        return Err(no_such_session(id));
    }
    Ok((id.to_owned(), reader))
}

/// Every event of a log, a line at a time, until `each` says stop (or the
/// call's stop flag is set: nobody waits for the answer any more).
///
/// # Errors
/// A corrupt log; [`Failure::stopped`].
pub(super) fn each_event(
    context: &Context,
    reader: LogReader,
    mut each: impl FnMut(Event) -> bool,
) -> Result<(), Failure> {
    for event in reader {
        if context.stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(Failure::stopped());
        }
        let event = event.map_err(|err| {
            Failure::new(
                ErrorCode::SessionLogCorrupt,
                format!("the session's log could not be read: {err}"),
            )
        })?;
        if !each(event) {
            break;
        }
    }
    Ok(())
}

/// The seq of the step making this call in the caller's session: the
/// `assistant/message` that asked for `call_id` (the latest one when none
/// names it). Everything from it on is the calling step.
pub(super) fn calling_step(context: &Context) -> Result<Option<u64>, Failure> {
    let (_, reader) = open(context, None)?;
    let mut named = None;
    let mut latest = None;
    each_event(context, reader, |event| {
        if let dsh_protocol::log::EventData::AssistantMessage { tool_calls, .. } = &event.data {
            latest = Some(event.seq);
            if tool_calls
                .iter()
                .any(|call| call.id.as_str() == context.call_id)
            {
                named = Some(event.seq);
            }
        }
        true
    })?;
    Ok(named.or(latest))
}
