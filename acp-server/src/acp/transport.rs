//! stdio framing that survives bad input. The SDK's stock `Stdio` reads
//! lines as UTF-8 and ends the connection on the first invalid byte; this
//! transport reads raw bytes instead:
//!
//! - a line that is not UTF-8, or longer than the limit, is answered here
//!   with a JSON-RPC error (parse error -32700, or -32600 for an oversized
//!   frame) carrying the request id when one can be recovered, and skipped;
//! - everything else goes to the SDK, which answers malformed JSON itself;
//! - all output, SDK frames and ours, goes through one writer task that owns
//!   stdout, so frames never interleave; it flushes when its queue drains.
//!
//! When stdin and stdout are pipes or sockets (as editors spawn us) they are
//! driven non-blocking by the runtime itself; tokio's `stdin()`/`stdout()`
//! (a terminal, a file) hand every read and write to a blocking thread,
//! a thread hop per streamed chunk.
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

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

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
    direct: std::sync::Mutex<Option<mpsc::UnboundedSender<String>>>,
    /// Fences sent and fences the writer has passed.
    fences_sent: AtomicU64,
    fences_passed: AtomicU64,
    queued: AtomicUsize,
    /// Frames written so far (progress, for the stale-count check).
    written: AtomicU64,
    /// The writer waits for frames: nothing it was given is unwritten.
    writer_idle: AtomicBool,
    closed: AtomicBool,
    changed: tokio::sync::Notify,
}

impl Backlog {
    /// An empty backlog.
    pub fn new() -> Arc<Backlog> {
        Arc::new(Backlog::default())
    }

    /// One update handed to the SDK.
    pub fn queued(&self) {
        self.queued.fetch_add(1, Ordering::Relaxed);
    }

    /// Queues a serialized `session/update` for the writer, behind every
    /// frame already queued. Call it only after [`Self::fence`] resolved
    /// for this run of updates.
    pub fn send_direct(&self, frame: String) {
        let direct = self.direct.lock().unwrap_or_else(|p| p.into_inner());
        if direct
            .as_ref()
            .is_some_and(|direct| direct.unbounded_send(frame).is_ok())
        {
            self.queued();
        }
    }

    /// The connection ended: no more direct frames, so the writer can
    /// finish once the SDK's frames are written.
    pub fn disconnect(&self) {
        self.direct.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// A new fence's number; send [`FENCE`] through the SDK, then await
    /// [`Self::fence_passed`] with it.
    pub fn fence(&self) -> u64 {
        self.fences_sent.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Resolves once the writer has passed fence `number` (or is gone).
    pub async fn fence_passed(&self, number: u64) {
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

    fn written(&self) {
        let before = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(1))
            })
            .unwrap_or(0);
        self.written.fetch_add(1, Ordering::Relaxed);
        if before == BACKLOG_LOW + 1 {
            self.changed.notify_waiters();
        }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.changed.notify_waiters();
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

/// Reads from the client.
pub type Input = Box<dyn AsyncRead + Send + Unpin>;
/// Writes to the client.
pub type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// stdin and stdout for `dsh acp`: non-blocking when they are pipes or
/// sockets (`O_NONBLOCK` is set on those open files, which dsh alone
/// uses), tokio's blocking-thread handles otherwise.
pub fn stdio() -> (Input, Output) {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let input = match stdio_kind(std::io::stdin().as_fd()) {
        Some((Kind::Pipe, fd)) => pipe::Receiver::from_owned_fd(fd).map(|io| Box::new(io) as Input),
        Some((Kind::Socket, fd)) => socket(fd).map(|io| Box::new(io) as Input),
        None => Ok(Box::new(tokio::io::stdin()) as Input),
    };
    let output = match stdio_kind(std::io::stdout().as_fd()) {
        Some((Kind::Pipe, fd)) => pipe::Sender::from_owned_fd(fd).map(|io| Box::new(io) as Output),
        Some((Kind::Socket, fd)) => socket(fd).map(|io| Box::new(io) as Output),
        None => Ok(Box::new(tokio::io::stdout()) as Output),
    };
    let input = input.unwrap_or_else(|err| {
        tracing::debug!(%err, "stdin stays on a blocking thread");
        Box::new(tokio::io::stdin())
    });
    let output = output.unwrap_or_else(|err| {
        tracing::debug!(%err, "stdout stays on a blocking thread");
        Box::new(tokio::io::stdout())
    });
    (input, output)
}

enum Kind {
    Pipe,
    Socket,
}

/// A duplicate of a pipe or socket descriptor.
fn stdio_kind(fd: std::os::fd::BorrowedFd<'_>) -> Option<(Kind, std::os::fd::OwnedFd)> {
    use std::os::unix::fs::FileTypeExt;
    let owned = fd.try_clone_to_owned().ok()?;
    let kind = std::fs::File::from(owned.try_clone().ok()?)
        .metadata()
        .ok()?
        .file_type();
    if kind.is_fifo() {
        Some((Kind::Pipe, owned))
    } else if kind.is_socket() {
        Some((Kind::Socket, owned))
    } else {
        None
    }
}

fn socket(fd: std::os::fd::OwnedFd) -> io::Result<tokio::net::UnixStream> {
    let socket = std::os::unix::net::UnixStream::from(fd);
    socket.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(socket)
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
    let (out_tx, out_rx) = mpsc::unbounded::<String>();
    *backlog.direct.lock().unwrap_or_else(|p| p.into_inner()) = Some(out_tx.clone());
    let (error_tx, error_rx) = mpsc::channel::<String>(64);
    let writer = tokio::spawn(write_frames(output, out_rx, error_rx, backlog.clone()));
    let (in_tx, in_rx) = mpsc::channel::<io::Result<String>>(64);
    tokio::spawn(read_frames(input, max_frame, in_tx, error_tx));
    let sink =
        out_tx.sink_map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "stdout writer stopped"));
    StdioTransport {
        lines: agent_client_protocol::Lines::new(Box::pin(sink), Box::pin(in_rx)),
        backlog,
        writer,
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

/// Writes SDK frames and transport error frames. Ends when the SDK side
/// closes (the stdin reader may still be blocked in a read).
async fn write_frames<W: AsyncWrite + Unpin>(
    output: W,
    mut frames: mpsc::UnboundedReceiver<String>,
    mut errors: mpsc::Receiver<String>,
    backlog: Arc<Backlog>,
) {
    let mut output = tokio::io::BufWriter::with_capacity(64 * 1024, output);
    let mut errors_open = true;
    let written = |frame: &str| {
        if is_update(frame) {
            backlog.written();
        }
    };
    // A fence is reported once everything before it is written.
    let mut fences = 0u64;
    loop {
        backlog.writer_idle.store(true, Ordering::Release);
        let frame = tokio::select! {
            frame = frames.next() => match frame {
                Some(frame) => frame,
                None => break,
            },
            error = errors.next(), if errors_open => match error {
                Some(error) => error,
                None => {
                    errors_open = false;
                    continue;
                }
            },
        };
        backlog.writer_idle.store(false, Ordering::Release);
        let mut result = Ok(());
        let mut next = Some(frame);
        // Write whatever is already queued, then flush once.
        while let Some(frame) = next.take() {
            if is_fence(&frame) {
                fences += 1;
            } else {
                result = write_frame(&mut output, &frame).await;
                written(&frame);
                if result.is_err() {
                    break;
                }
            }
            next = frames.try_recv().ok();
        }
        if result.is_ok() {
            result = output.flush().await;
        }
        if fences > backlog.fences_passed.load(Ordering::Acquire) {
            backlog.fences_passed.store(fences, Ordering::Release);
            backlog.changed.notify_waiters();
        }
        if let Err(err) = result {
            tracing::warn!(%err, "stdout closed; dropping further output");
            backlog.close();
            return;
        }
    }
    backlog.close();
    while let Ok(error) = errors.try_recv() {
        if write_frame(&mut output, &error).await.is_err() {
            return;
        }
    }
    if let Err(err) = output.flush().await {
        tracing::debug!(%err, "final stdout flush failed");
    }
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

async fn write_frame<W: AsyncWrite + Unpin>(output: &mut W, frame: &str) -> io::Result<()> {
    let shrunk = shrink_error(frame);
    let frame = shrunk.as_deref().unwrap_or(frame);
    // The SDK never emits embedded newlines; guard anyway, a stray one would
    // split the frame for the client.
    if frame.contains('\n') {
        output
            .write_all(frame.replace('\n', "\\n").as_bytes())
            .await?;
    } else {
        output.write_all(frame.as_bytes()).await?;
    }
    output.write_all(b"\n").await
}

async fn read_frames<R: AsyncRead + Unpin>(
    input: R,
    max_frame: usize,
    mut lines: mpsc::Sender<io::Result<String>>,
    mut errors: mpsc::Sender<String>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let (oversized, eof) = match read_line_capped(&mut reader, &mut line, max_frame).await {
            Ok(result) => result,
            Err(err) => {
                tracing::warn!(%err, "cannot read stdin; closing the connection");
                break;
            }
        };
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if oversized {
            tracing::warn!(limit = max_frame, "dropping an oversized frame");
            let id = recover_id(&String::from_utf8_lossy(&line[..line.len().min(4096)]));
            let error = error_frame(
                id,
                -32600,
                "Invalid request",
                format!("frame exceeds the {max_frame}-byte limit and was dropped"),
            );
            if errors.send(error).await.is_err() {
                break;
            }
        } else if !line.iter().all(u8::is_ascii_whitespace) {
            match String::from_utf8(std::mem::take(&mut line)) {
                Ok(text) => {
                    let sent = match malformed_request(&text) {
                        Some((id, detail)) => {
                            tracing::warn!(%detail, "answering a malformed request");
                            errors
                                .send(error_frame(id, -32600, "Invalid request", detail))
                                .await
                                .is_ok()
                        }
                        None => lines.send(Ok(text)).await.is_ok(),
                    };
                    if !sent {
                        break;
                    }
                }
                Err(err) => {
                    let valid_up_to = err.utf8_error().valid_up_to();
                    let lossy = String::from_utf8_lossy(err.as_bytes()).into_owned();
                    tracing::warn!(
                        byte = valid_up_to,
                        "dropping a frame that is not valid UTF-8"
                    );
                    let error = error_frame(
                        recover_id(&lossy),
                        -32700,
                        "Parse error",
                        format!("frame is not valid UTF-8 (invalid byte at offset {valid_up_to})"),
                    );
                    if errors.send(error).await.is_err() {
                        break;
                    }
                }
            }
        }
        if eof {
            break;
        }
    }
    tracing::debug!("stdin closed");
}

/// Reads one line into `line`, keeping at most `max` bytes; returns
/// (oversized, eof).
async fn read_line_capped<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    line: &mut Vec<u8>,
    max: usize,
) -> io::Result<(bool, bool)> {
    let mut oversized = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok((oversized, true));
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(pos) => (&buf[..=pos], true),
            None => (buf, false),
        };
        let used = chunk.len();
        if !oversized {
            if line.len() + chunk.len() > max + 1 {
                oversized = true;
                // Keep a prefix for id recovery, drop the rest.
                let keep = 4096usize.saturating_sub(line.len()).min(chunk.len());
                line.extend_from_slice(&chunk[..keep]);
            } else {
                line.extend_from_slice(chunk);
            }
        }
        reader.consume(used);
        if done {
            return Ok((oversized, false));
        }
    }
}

/// Finds `"id": <number|string>` near the start of a frame, for answering
/// frames we cannot parse. Only a top-level-looking id is taken.
fn recover_id(text: &str) -> serde_json::Value {
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        return match value.get("id") {
            Some(id @ (serde_json::Value::Number(_) | serde_json::Value::String(_))) => id.clone(),
            _ => serde_json::Value::Null,
        };
    }
    let Some(pos) = text.find("\"id\"") else {
        return serde_json::Value::Null;
    };
    let rest = text[pos + 4..].trim_start();
    let Some(rest) = rest.strip_prefix(':') else {
        return serde_json::Value::Null;
    };
    let rest = rest.trim_start();
    if let Some(rest) = rest.strip_prefix('"') {
        if let Some(end) = rest.find('"') {
            return serde_json::Value::String(rest[..end].to_owned());
        }
    } else {
        let digits: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '-')
            .collect();
        if let Ok(number) = digits.parse::<i64>() {
            return serde_json::Value::from(number);
        }
    }
    serde_json::Value::Null
}

/// The top-level members of a frame, unparsed.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    params: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a serde_json::value::RawValue>,
}

/// A request whose id is usable but whose envelope is not valid JSON-RPC
/// 2.0 (wrong or missing `jsonrpc`, a `method` that is not a string,
/// `params` that are not structured, `result`/`error` on a request). The
/// SDK would answer those with a `null` id, which leaves the client's
/// request pending forever; dsh answers them with their id. Returns the id
/// and what is wrong. Everything else goes to the SDK untouched.
fn malformed_request(text: &str) -> Option<(serde_json::Value, String)> {
    let envelope: Envelope = serde_json::from_str(text).ok()?;
    let method = envelope.method?;
    let id: serde_json::Value = serde_json::from_str(envelope.id?.get()).ok()?;
    if !(id.is_string() || id.is_i64() || id.is_u64()) {
        return None;
    }
    let problem = if envelope.jsonrpc.map(|v| v.get()) != Some("\"2.0\"") {
        "`jsonrpc` must be \"2.0\""
    } else if !method.get().starts_with('"') {
        "`method` must be a string"
    } else if envelope
        .params
        .is_some_and(|p| !p.get().starts_with('{') && !p.get().starts_with('['))
    {
        "`params` must be an object or an array"
    } else if envelope.result.is_some() || envelope.error.is_some() {
        "a request cannot carry `result` or `error`"
    } else {
        return None;
    };
    Some((id, format!("not a valid JSON-RPC 2.0 request: {problem}")))
}

fn error_frame(id: serde_json::Value, code: i32, message: &str, detail: String) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message, "data": { "detail": detail } },
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn malformed_requests_keep_their_id() {
        let id = |text: &str| malformed_request(text).map(|(id, _)| id);
        assert_eq!(
            id(r#"{"id":"a","method":"x","params":{}}"#),
            Some("a".into())
        );
        assert_eq!(
            id(r#"{"jsonrpc":"1.0","id":7,"method":"x"}"#),
            Some(7.into())
        );
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":8,"method":5}"#), Some(8.into()));
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id":9,"method":"x","params":"s"}"#),
            Some(9.into())
        );
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id":10,"method":"x","params":{},"result":1}"#),
            Some(10.into())
        );
        // Valid frames, notifications, responses and unusable ids pass.
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x"}"#,
            r#"{"jsonrpc":"1.0","method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":5}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"x","params":5}"#,
            "not json",
            "[1,2]",
        ] {
            assert_eq!(id(text), None, "{text}");
        }
    }

    #[test]
    fn recovers_ids() {
        assert_eq!(
            recover_id(r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#),
            serde_json::json!(7)
        );
        assert_eq!(
            recover_id(r#"{"jsonrpc":"2.0","id":"a-1","method":"x","params":{"t":"tr"#),
            serde_json::json!("a-1")
        );
        assert_eq!(recover_id("garbage"), serde_json::Value::Null);
    }
}
