//! `dsh acp`'s stdio transport: the lines of [`crate::ndjson`] (which
//! answers frames the SDK could not), one writer task that owns stdout so
//! frames never interleave (it flushes when its queue drains), and the
//! backlog.
//!
//! [`Backlog`] is the backpressure: it counts `session/update`s sent and
//! not yet written. An editor that stops reading fills the pipe, the
//! writer blocks, the count passes a high-water mark, and a streaming turn
//! stops sending (it merges what keeps arriving) until the count falls to
//! the low-water mark. Memory stays bounded by the marks, not by how long
//! the editor looks away.
//!
//! Streamed deltas skip the SDK: serialized once, they go straight to the
//! writer's queue ([`Backlog::send_direct`]), which saves the SDK's JSON
//! tree and two task hops per chunk (about a quarter of a chunk's CPU).
//! They must not overtake what was sent through the SDK before them, so a
//! run of deltas starts with a fence: a notification sent through the SDK
//! that the writer recognises, drops and reports; once it has passed,
//! everything sent through the SDK before it has been written.
//!
//! Lines go to the SDK in the order they came, through [`InFlight`]: a line
//! that needs an answer first (its `initialize`, its session's load) waits,
//! and holds the ones behind it; every request is counted until its answer
//! is written, so that when stdin ends each one is answered before dsh
//! exits ([`Backlog::settled`], [`Backlog::end_input`]).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::JsonRpcMessage as _;
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};

use super::inflight::InFlight;
pub use crate::ndjson::stdio;
use crate::ndjson::{self, Line, Outgoing};

/// The largest frame accepted, bytes (images are base64 inside prompts).
pub const DEFAULT_MAX_FRAME: usize = 64 * 1024 * 1024;

/// Frames going out to the client.
pub type FrameSink = std::pin::Pin<Box<dyn futures::Sink<String, Error = io::Error> + Send>>;
/// Frames coming in from the client.
pub type FrameStream = std::pin::Pin<Box<dyn futures::Stream<Item = io::Result<String>> + Send>>;

/// The transport plus the writer task to await after the connection ends.
pub struct StdioTransport {
    /// What the SDK connects to.
    pub lines: agent_client_protocol::Lines<FrameSink, FrameStream>,
    /// Updates queued for the client (see the module docs).
    pub backlog: Arc<Backlog>,
    /// Finishes when every queued frame is written.
    pub writer: tokio::task::JoinHandle<()>,
}

/// The method of the fence notification (never written to the client).
pub const FENCE: &str = "$/dsh/fence";

/// The notification the SDK reads behind the last line, once stdin has
/// ended: the SDK dispatches in order, so when it reaches its handler
/// ([`Backlog::reached`]) every request read has reached its own. Its
/// token (the transport's) tells it from a client's.
#[derive(
    Debug, Clone, serde::Serialize, serde::Deserialize, agent_client_protocol::JsonRpcNotification,
)]
#[notification(method = "$/dsh/end_of_input")]
pub struct EndOfInput {
    token: u64,
}

/// Updates waiting to be written, past this, hold streaming.
pub const BACKLOG_HIGH: usize = 256;
/// ... until the backlog is down to this.
pub const BACKLOG_LOW: usize = 64;

/// `session/update`s sent and not yet written to the client; the writer's
/// queue for frames that skip the SDK; fences.
#[derive(Debug, Default)]
pub struct Backlog {
    /// The writer's queue, from the transport's start until the connection
    /// ends (the writer stops once every sender is gone).
    direct: std::sync::Mutex<Option<mpsc::UnboundedSender<Outgoing>>>,
    /// Fences sent and fences the writer has passed.
    fences_sent: AtomicU64,
    /// Numbers a fence and sends it as one step (the writer counts fences
    /// in the order they arrive).
    fence_order: std::sync::Mutex<()>,
    /// Updates sent through the SDK on this connection (by any session's
    /// sink, or a handler), and how many of them a passed fence is known to
    /// be behind: while more were sent, the direct path waits for a fence.
    through_sdk: AtomicU64,
    fenced: AtomicU64,
    fences_passed: AtomicU64,
    queued: AtomicUsize,
    /// Frames written so far (progress, for the stale-count check).
    written: AtomicU64,
    /// The writer waits for frames: nothing it was given is unwritten.
    writer_idle: AtomicBool,
    closed: AtomicBool,
    changed: tokio::sync::Notify,
    /// Requests read and not yet answered.
    requests: InFlight,
    /// [`EndOfInput`]'s token.
    token: u64,
}

impl Backlog {
    /// An empty backlog.
    pub fn new() -> Arc<Backlog> {
        use std::hash::{BuildHasher, Hasher};
        let token = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Arc::new(Backlog {
            token,
            ..Backlog::default()
        })
    }

    /// One update handed to the SDK (the direct path must fence before
    /// it goes next).
    pub fn queued(&self) {
        self.through_sdk.fetch_add(1, Ordering::AcqRel);
        self.queued.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the direct path must wait for a fence first.
    pub fn unfenced(&self) -> bool {
        self.through_sdk.load(Ordering::Acquire) > self.fenced.load(Ordering::Acquire)
    }

    /// Sends a fence with `send` (through the SDK), numbered in the order
    /// fences are sent; resolves once the writer has passed it, or at once
    /// when it could not be sent (the connection is going: nothing more
    /// will be written in order anyway).
    pub async fn fence(&self, send: impl FnOnce() -> bool) {
        let behind = self.through_sdk.load(Ordering::Acquire);
        let number = {
            let _order = self.fence_order.lock().unwrap_or_else(|p| p.into_inner());
            if !send() {
                self.fenced.fetch_max(behind, Ordering::AcqRel);
                return;
            }
            self.fences_sent.fetch_add(1, Ordering::AcqRel) + 1
        };
        self.fence_passed(number).await;
        self.fenced.fetch_max(behind, Ordering::AcqRel);
    }

    /// Queues a serialized `session/update` for the writer, behind every
    /// frame already queued. Call it only after [`Self::fence`] resolved
    /// for this run of updates.
    pub fn send_direct(&self, frame: String) {
        self.queue_direct(Outgoing::Frame(frame), 1);
    }

    /// Queues a run of serialized `session/update`s joined by newlines
    /// (none of them holding a raw one), written in one piece: a replay's
    /// updates, a wake-up and a queue slot per run rather than per update.
    /// Call it only after [`Self::fence`] resolved for this run.
    pub fn send_run(&self, lines: String, frames: usize) {
        if frames > 0 {
            self.queue_direct(Outgoing::Run { lines, frames }, frames);
        }
    }

    fn queue_direct(&self, outgoing: Outgoing, updates: usize) {
        // Counted before it is queued: the writer may write it (and count
        // it off) before this thread runs again.
        self.queued.fetch_add(updates, Ordering::AcqRel);
        let direct = self.direct.lock().unwrap_or_else(|p| p.into_inner());
        if direct
            .as_ref()
            .is_none_or(|direct| direct.unbounded_send(outgoing).is_err())
        {
            self.queued.fetch_sub(updates, Ordering::AcqRel);
        }
    }

    /// The connection ended: no more direct frames, so the writer can
    /// finish once the SDK's frames are written.
    pub fn disconnect(&self) {
        self.direct.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Resolves once the writer has passed fence `number` (or is gone).
    async fn fence_passed(&self, number: u64) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.closed.load(Ordering::Acquire)
                || self.fences_passed.load(Ordering::Acquire) >= number
            {
                return;
            }
            notified.await;
        }
    }

    fn written(&self, updates: usize) {
        let before = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(updates))
            })
            .unwrap_or(0);
        self.written.fetch_add(updates as u64, Ordering::Relaxed);
        if before > BACKLOG_LOW && before.saturating_sub(updates) <= BACKLOG_LOW {
            self.changed.notify_waiters();
        }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.changed.notify_waiters();
        self.requests.writer_closed();
    }

    /// Resolves once stdin has ended.
    pub async fn input_closed(&self) {
        self.requests.input_closed().await;
    }

    /// [`EndOfInput`] reached its handler.
    pub fn reached(&self, marker: &EndOfInput) {
        if marker.token == self.token {
            self.requests.dispatched();
        }
    }

    /// Resolves once every line read from stdin has reached its handler
    /// (after stdin's end: [`EndOfInput`]).
    pub async fn dispatched(&self) {
        self.requests.all_dispatched().await;
    }

    /// Resolves once stdin has ended and every request read from it is
    /// answered (or stdout is gone).
    pub async fn settled(&self) {
        self.requests.settled().await;
    }

    /// Ends the SDK's input after stdin's end: every request still owed an
    /// answer, or still waiting to go to the SDK, is answered here with
    /// -32800 (a later answer from the SDK is not written), and the SDK
    /// reads the end of its input.
    pub fn end_input(&self) {
        let owed = self.requests.end();
        if !owed.is_empty() {
            tracing::warn!(
                requests = owed.len(),
                "stdin closed; answering requests that did not finish as cancelled"
            );
        }
        for id in owed {
            self.answer_cancelled(&id);
        }
    }

    /// Answers request `id` (as [`ndjson::id_key`] writes it) -32800,
    /// written as the SDK writes answers ([`response_id`] reads it).
    fn answer_cancelled(&self, id: &str) {
        let error = serde_json::json!({
            "code": -32800,
            "message": "Request cancelled",
            "data": {"detail": "stdin closed and dsh is exiting; the request did not finish"},
        });
        let frame = format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#);
        self.queue_direct(Outgoing::Frame(frame), 0);
    }

    /// Past the high-water mark (and the client still there).
    pub fn congested(&self) -> bool {
        !self.closed.load(Ordering::Acquire) && self.queued.load(Ordering::Acquire) >= BACKLOG_HIGH
    }

    /// Resolves at the low-water mark or when the connection is gone.
    pub async fn drained(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.closed.load(Ordering::Acquire)
                || self.queued.load(Ordering::Acquire) <= BACKLOG_LOW
            {
                return;
            }
            let progress = self.written.load(Ordering::Relaxed);
            if tokio::time::timeout(Duration::from_secs(1), notified)
                .await
                .is_err()
                && self.writer_idle.load(Ordering::Acquire)
                && self.written.load(Ordering::Relaxed) == progress
            {
                // The writer has been idle for a second with updates
                // counted: the SDK dropped some it had accepted. Start
                // counting afresh rather than hold the turn forever.
                tracing::warn!(
                    queued = self.queued.load(Ordering::Relaxed),
                    "update backlog count was stale; reset"
                );
                self.queued.store(0, Ordering::Release);
                return;
            }
        }
    }
}

/// Builds the transport over any reader and writer (stdin/stdout in `dsh acp`).
pub fn transport<R, W>(input: R, output: W, max_frame: usize) -> StdioTransport
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let backlog = Backlog::new();
    // Unbounded: frames are bounded before they get here (the backlog for
    // updates; the SDK's own queues, unbounded too, for the rest).
    let (out_tx, out_rx) = mpsc::unbounded::<Outgoing>();
    *backlog.direct.lock().unwrap_or_else(|p| p.into_inner()) = Some(out_tx.clone());
    let (error_tx, error_rx) = mpsc::channel::<String>(64);
    let writer = tokio::spawn(write_frames(output, out_rx, error_rx, backlog.clone()));
    let (in_tx, in_rx) = mpsc::channel::<Line>(64);
    tokio::spawn({
        let backlog = backlog.clone();
        async move {
            ndjson::read_lines(input, max_frame, in_tx, error_tx).await;
            backlog.requests.stdin_closed();
        }
    });
    let (sdk_tx, sdk_rx) = mpsc::channel::<String>(1);
    tokio::spawn(hand_on(in_rx, sdk_tx, backlog.clone()));
    // Once stdin has ended, a frame for a client that stopped reading is
    // dropped: the answers owed still come, and dsh still exits cleanly.
    let sink = futures::sink::unfold(
        (out_tx, backlog.clone()),
        |(out_tx, backlog), frame: String| async move {
            if out_tx.unbounded_send(Outgoing::Frame(frame)).is_err()
                && !backlog.requests.stdin_has_ended()
            {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "stdout writer stopped",
                ));
            }
            Ok((out_tx, backlog))
        },
    );
    StdioTransport {
        lines: agent_client_protocol::Lines::new(Box::pin(sink), Box::pin(sdk_rx.map(Ok))),
        backlog,
        writer,
    }
}

/// Hands lines to the SDK in the order they came, each once nothing it
/// waits for is unanswered ([`InFlight::admit`]); after stdin's end, keeps
/// the SDK's input open until [`Backlog::end_input`].
async fn hand_on(
    mut lines: mpsc::Receiver<Line>,
    mut sdk: mpsc::Sender<String>,
    backlog: Arc<Backlog>,
) {
    let requests = &backlog.requests;
    while let Some(line) = lines.next().await {
        if !requests.take(&line) {
            // Read before stdin's end, taken after the wait for answers.
            if let Some(id) = &line.id {
                backlog.answer_cancelled(id);
            }
        } else if requests.admit(&line).await && sdk.send(line.text).await.is_err() {
            tracing::debug!("the connection stopped reading its input");
        }
    }
    requests.drained();
    // Behind the last line: once it reaches its handler, every line has.
    let marker = EndOfInput {
        token: backlog.token,
    };
    match marker.to_untyped_message() {
        Ok(marker) => {
            let (method, params) = marker.into_parts();
            let line = serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params});
            let _ = sdk.send(line.to_string()).await;
        }
        Err(error) => tracing::warn!(?error, "cannot write the end-of-input marker"),
    }
    requests.ended().await;
}

/// The id of a response, as [`ndjson::id_key`] writes it. The SDK writes
/// `jsonrpc`, then `id`, then `result` or `error` (a request to the client
/// has `method` there).
fn response_id(frame: &str) -> Option<String> {
    let rest = frame.strip_prefix(r#"{"jsonrpc":"2.0","id":"#)?;
    let mut values = serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
    let id = values.next()?.ok()?;
    let after = &rest[values.byte_offset()..];
    if after.starts_with(r#","result""#) || after.starts_with(r#","error""#) {
        ndjson::id_key(&id)
    } else {
        None
    }
}

/// Whether a frame is a `session/update` (the SDK and
/// [`crate::acp::sink`] write `jsonrpc` first, then `method`).
fn is_update(frame: &str) -> bool {
    frame.starts_with(r#"{"jsonrpc":"2.0","method":"session/update""#)
}

fn is_fence(frame: &str) -> bool {
    frame.starts_with(r#"{"jsonrpc":"2.0","method":"$/dsh/fence""#)
}

/// What the ACP writer makes of its frames: fences are counted, not
/// written; updates written are taken off the backlog; answers are counted
/// off the requests in flight (a second answer to one is not written);
/// large error answers lose their echoed params.
struct AcpFrames {
    backlog: Arc<Backlog>,
    fences: u64,
}

impl ndjson::Frames for AcpFrames {
    fn out<'a>(&mut self, frame: &'a str) -> Option<std::borrow::Cow<'a, str>> {
        if is_fence(frame) {
            self.fences += 1;
            return None;
        }
        if let Some(id) = response_id(frame) {
            if !self.backlog.requests.answered(&id) {
                tracing::debug!(id, "dropping a second answer to a request");
                return None;
            }
        }
        Some(shrink_error(frame).map_or(std::borrow::Cow::Borrowed(frame), std::borrow::Cow::Owned))
    }

    fn written(&mut self, frame: &str) {
        if is_update(frame) {
            self.backlog.written(1);
        }
    }

    fn written_run(&mut self, frames: usize) {
        self.backlog.written(frames);
    }

    /// A fence is reported once everything before it is written.
    fn flushed(&mut self) {
        if self.fences > self.backlog.fences_passed.load(Ordering::Acquire) {
            self.backlog
                .fences_passed
                .store(self.fences, Ordering::Release);
            self.backlog.changed.notify_waiters();
        }
    }

    fn idle(&mut self, idle: bool) {
        self.backlog.writer_idle.store(idle, Ordering::Release);
    }
}

/// Writes SDK frames and transport error frames (the one writer,
/// [`ndjson::write_frames`]); the backlog is closed when it ends.
async fn write_frames<W: AsyncWrite + Unpin>(
    output: W,
    frames: mpsc::UnboundedReceiver<Outgoing>,
    errors: mpsc::Receiver<String>,
    backlog: Arc<Backlog>,
) {
    let mut front = AcpFrames {
        backlog: backlog.clone(),
        fences: 0,
    };
    if let Err(err) = ndjson::write_frames(output, frames, Some(errors), &mut front).await {
        tracing::warn!(%err, "stdout closed; dropping further output");
    }
    backlog.close();
}

/// Error answers larger than this are checked for echoed params.
const ERROR_ECHO_LIMIT: usize = 16 * 1024;

/// The SDK's invalid-params errors carry the request's params back in
/// `error.data.json`; for a large request that doubles the traffic (a 60 MB
/// prompt with one bad field would come back whole). Large error answers
/// keep everything but that echo.
fn shrink_error(frame: &str) -> Option<String> {
    if frame.len() <= ERROR_ECHO_LIMIT || !frame.contains("\"error\"") {
        return None;
    }
    let mut value: serde_json::Value = serde_json::from_str(frame).ok()?;
    let echo = value.get_mut("error")?.get_mut("data")?.get_mut("json")?;
    let size = echo.to_string().len();
    *echo = serde_json::Value::String(format!("[{size} bytes of the request's params omitted]"));
    Some(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_told_from_requests_to_the_client() {
        assert_eq!(
            response_id(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#).as_deref(),
            Some("7")
        );
        assert_eq!(
            response_id(r#"{"jsonrpc":"2.0","id":"a\"b","error":{"code":1,"message":"m"}}"#)
                .as_deref(),
            Some(r#""a\"b""#)
        );
        for frame in [
            r#"{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}"#,
        ] {
            assert_eq!(response_id(frame), None, "{frame}");
        }
    }

    #[test]
    fn large_error_answers_drop_the_echoed_params() {
        let pad = "x".repeat(100_000);
        let frame = serde_json::json!({"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid params","data":{"error":"invalid type","json":{"cwd":5,"pad":pad}}}}).to_string();
        let shrunk: serde_json::Value =
            serde_json::from_str(&shrink_error(&frame).unwrap()).unwrap();
        assert_eq!(shrunk["id"], 2);
        assert_eq!(shrunk["error"]["data"]["error"], "invalid type");
        assert!(shrunk["error"]["data"]["json"]
            .as_str()
            .unwrap()
            .contains("bytes of the request's params omitted"));
        // Small errors and large results pass untouched.
        assert!(shrink_error(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":{"json":1}}}"#
        )
        .is_none());
        let result = serde_json::json!({"jsonrpc":"2.0","id":3,"result":{"text":pad}}).to_string();
        assert!(shrink_error(&result).is_none());
    }
}
