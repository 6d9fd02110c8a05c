//! Newline-delimited JSON-RPC on stdin/stdout that survives bad input,
//! for every stdio front end (`dsh acp`, `dsh sdk`). Lines are read as raw
//! bytes:
//!
//! - a line that is not UTF-8, or longer than the limit, is answered here
//!   with a JSON-RPC error (parse error -32700, or -32600 for an oversized
//!   frame) carrying the request id when one can be recovered, and skipped;
//! - a request whose envelope is not JSON-RPC 2.0 but whose id is usable
//!   is answered with that id (-32600);
//! - everything else is handed on as text, for the protocol's own parser
//!   ([`read_lines`] hands on with it what the envelope says: the method,
//!   a request's id, where the params are).
//!
//! On Unix, when stdin and stdout are pipes or sockets (as editors spawn
//! us) they are driven non-blocking by the runtime itself; tokio's
//! `stdin()`/`stdout()` (a terminal, a file, and everything on Windows,
//! whose anonymous pipes cannot be made non-blocking) hand every read and
//! write to a blocking thread, a thread hop per line.

use std::io;

use futures::channel::mpsc;
use futures::SinkExt;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// Reads from the client.
pub type Input = Box<dyn AsyncRead + Send + Unpin>;
/// Writes to the client.
pub type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// stdin and stdout for `dsh acp`: non-blocking when they are pipes or
/// sockets (`O_NONBLOCK` is set on those open files, which dsh alone
/// uses), tokio's blocking-thread handles otherwise.
#[cfg(unix)]
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

/// stdin and stdout for `dsh acp` on Windows: tokio's handles, read and
/// written on a blocking thread (an anonymous pipe — what an editor
/// spawns us with — has no overlapped mode to drive it without one).
#[cfg(windows)]
pub fn stdio() -> (Input, Output) {
    (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
}

#[cfg(unix)]
enum Kind {
    Pipe,
    Socket,
}

/// A duplicate of a pipe or socket descriptor.
#[cfg(unix)]
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

#[cfg(unix)]
fn socket(fd: std::os::fd::OwnedFd) -> io::Result<tokio::net::UnixStream> {
    let socket = std::os::unix::net::UnixStream::from(fd);
    socket.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(socket)
}

/// What the one writer takes ([`write_frames`]): a frame, or a run of
/// frames already joined by newlines (serialized by dsh itself, so none
/// holds a raw newline), written in one piece and counted as `frames`.
#[derive(Debug)]
pub enum Outgoing {
    /// One frame.
    Frame(String),
    /// Frames joined by newlines (no trailing one).
    Run {
        /// The frames.
        lines: String,
        /// How many.
        frames: usize,
    },
}

impl From<String> for Outgoing {
    fn from(frame: String) -> Outgoing {
        Outgoing::Frame(frame)
    }
}

/// What a front end makes of the frames its writer takes ([`write_frames`]).
pub trait Frames {
    /// The frame as it goes out; `None` keeps it from the client (a marker
    /// for the writer alone).
    fn out<'a>(&mut self, frame: &'a str) -> Option<std::borrow::Cow<'a, str>> {
        Some(std::borrow::Cow::Borrowed(frame))
    }
    /// `frame` was written.
    fn written(&mut self, _frame: &str) {}
    /// A run of `frames` (see [`Outgoing::Run`]) was written.
    fn written_run(&mut self, _frames: usize) {}
    /// Everything taken so far is written and flushed.
    fn flushed(&mut self) {}
    /// The writer waits for frames (`true`), or has some (`false`).
    fn idle(&mut self, _idle: bool) {}
}

/// The plain front end: every frame goes out as it is.
pub struct Plain;

impl Frames for Plain {}

/// The one stdout writer of `dsh acp` and `dsh sdk`: it owns `output`, so
/// frames never interleave; it writes whatever is already queued, then
/// flushes once. Answers to unreadable input (`errors`) go out between
/// frames. It ends when `frames` ends (the stdin reader may still be
/// blocked in a read), writing the errors still queued; or when `output`
/// fails (the error is returned).
///
/// # Errors
/// `output` could not be written or flushed.
pub async fn write_frames<W, S, T>(
    output: W,
    mut frames: S,
    mut errors: Option<mpsc::Receiver<String>>,
    front: &mut impl Frames,
) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
    S: futures::Stream<Item = T> + Unpin,
    T: Into<Outgoing>,
{
    use futures::{FutureExt, StreamExt};
    let mut output = tokio::io::BufWriter::with_capacity(64 * 1024, output);
    loop {
        front.idle(true);
        let frame = tokio::select! {
            frame = frames.next() => match frame {
                Some(frame) => frame.into(),
                None => break,
            },
            error = async { errors.as_mut()?.next().await }, if errors.is_some() => match error {
                Some(error) => Outgoing::Frame(error),
                None => {
                    errors = None;
                    continue;
                }
            },
        };
        front.idle(false);
        let mut next = Some(frame);
        while let Some(frame) = next.take() {
            match frame {
                Outgoing::Frame(frame) => {
                    if let Some(out) = front.out(&frame) {
                        write_line(&mut output, &out).await?;
                        front.written(&frame);
                    }
                }
                Outgoing::Run {
                    lines,
                    frames: count,
                } => {
                    output.write_all(lines.as_bytes()).await?;
                    output.write_all(b"\n").await?;
                    front.written_run(count);
                }
            }
            next = frames.next().now_or_never().flatten().map(Into::into);
        }
        output.flush().await?;
        front.flushed();
    }
    if let Some(errors) = errors.as_mut() {
        while let Ok(error) = errors.try_recv() {
            write_line(&mut output, &error).await?;
        }
    }
    output.flush().await
}

/// Writes one frame and its newline. Serializers never emit raw
/// newlines inside a frame; a stray one is escaped anyway, since it would
/// split the frame for the reader.
pub async fn write_line<W: AsyncWrite + Unpin>(output: &mut W, frame: &str) -> io::Result<()> {
    if frame.contains('\n') {
        output
            .write_all(frame.replace('\n', "\\n").as_bytes())
            .await?;
    } else {
        output.write_all(frame.as_bytes()).await?;
    }
    output.write_all(b"\n").await
}

/// Reads lines from `input` until it ends: the text of good ones goes to
/// `lines`, the answers to bad ones to `errors`.
pub async fn read_frames<R: AsyncRead + Unpin>(
    input: R,
    max_frame: usize,
    lines: mpsc::Sender<String>,
    errors: mpsc::Sender<String>,
) {
    let lines =
        lines.with(|line: Line| futures::future::ready(Ok::<_, mpsc::SendError>(line.text)));
    read_lines(input, max_frame, lines, errors).await;
}

/// A line handed on to the protocol's parser, and what its envelope says
/// (read once, here).
#[derive(Debug)]
pub struct Line {
    /// The frame.
    pub text: String,
    /// Its `method`, for a request or a notification.
    pub method: Option<String>,
    /// A request's id (a `method` and an integer or string id), as
    /// [`id_key`] writes it.
    pub id: Option<String>,
    /// Where `params` is in `text`.
    params: Option<std::ops::Range<usize>>,
}

impl Line {
    /// What the line is, from its envelope; or, for a request JSON-RPC 2.0
    /// would not take ([`malformed_request`]), its id and what is wrong.
    pub(crate) fn classify(text: String) -> Result<Line, (serde_json::Value, String)> {
        let Ok(envelope) = serde_json::from_str::<Envelope>(&text) else {
            return Ok(Line::opaque(text));
        };
        if let Some(malformed) = malformed_request(&envelope) {
            return Err(malformed);
        }
        let method = envelope
            .method
            .and_then(|method| serde_json::from_str::<String>(method.get()).ok());
        let id = method
            .as_ref()
            .and(envelope.id)
            .and_then(|id| serde_json::from_str(id.get()).ok())
            .and_then(|id: serde_json::Value| id_key(&id));
        // A borrowed `RawValue` is a slice of `text`.
        let params = envelope.params.map(|params| {
            let start = params.get().as_ptr() as usize - text.as_ptr() as usize;
            start..start + params.get().len()
        });
        Ok(Line {
            method,
            id,
            params,
            text,
        })
    }

    /// A line whose envelope could not be read (the protocol's parser
    /// answers it).
    pub fn opaque(text: String) -> Line {
        Line {
            text,
            method: None,
            id: None,
            params: None,
        }
    }

    /// Its `params`, unparsed.
    pub fn params(&self) -> Option<&str> {
        self.params.clone().map(|range| &self.text[range])
    }
}

/// A request id as one text, to match requests and their answers: an
/// integer's digits or a string's JSON; other ids (`null`, fractions,
/// integers past `i64`) are none.
pub fn id_key(id: &serde_json::Value) -> Option<String> {
    match id {
        serde_json::Value::Number(number) => number.as_i64().map(|n| n.to_string()),
        serde_json::Value::String(_) => Some(id.to_string()),
        _ => None,
    }
}

/// Reads lines from `input` until it ends: good ones go to `lines`, the
/// answers to bad ones to `errors`.
pub async fn read_lines<R, L>(
    input: R,
    max_frame: usize,
    mut lines: L,
    mut errors: mpsc::Sender<String>,
) where
    R: AsyncRead + Unpin,
    L: futures::Sink<Line> + Unpin,
{
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
                    let sent = match Line::classify(text) {
                        Err((id, detail)) => {
                            tracing::warn!(%detail, "answering a malformed request");
                            errors
                                .send(error_frame(id, -32600, "Invalid request", detail))
                                .await
                                .is_ok()
                        }
                        Ok(line) => lines.send(line).await.is_ok(),
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
pub fn recover_id(text: &str) -> serde_json::Value {
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
fn malformed_request(envelope: &Envelope) -> Option<(serde_json::Value, String)> {
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

pub fn error_frame(id: serde_json::Value, code: i32, message: &str, detail: String) -> String {
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
    fn malformed_requests_keep_their_id() {
        let id = |text: &str| Line::classify(text.to_owned()).err().map(|(id, _)| id);
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

    /// A run goes out as its frames, one per line, counted as a run; a
    /// single frame with a stray newline is escaped.
    #[tokio::test]
    async fn runs_are_written_whole_and_counted() {
        #[derive(Default)]
        struct Count {
            frames: usize,
            runs: Vec<usize>,
        }
        impl Frames for Count {
            fn written(&mut self, _frame: &str) {
                self.frames += 1;
            }
            fn written_run(&mut self, frames: usize) {
                self.runs.push(frames);
            }
        }
        let items = vec![
            Outgoing::Frame("{\"a\":1}".to_owned()),
            Outgoing::Run {
                lines: "{\"b\":1}\n{\"b\":2}\n{\"b\":3}".to_owned(),
                frames: 3,
            },
            Outgoing::Frame("{\"c\":\n1}".to_owned()),
        ];
        let mut out = Vec::new();
        let mut count = Count::default();
        write_frames(&mut out, futures::stream::iter(items), None, &mut count)
            .await
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"a\":1}\n{\"b\":1}\n{\"b\":2}\n{\"b\":3}\n{\"c\":\\n1}\n"
        );
        assert_eq!((count.frames, count.runs), (2, vec![3]));
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
