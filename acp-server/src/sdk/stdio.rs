//! `dsh sdk` on stdio: newline-delimited JSON-RPC 2.0. jsonrpsee has no
//! stdio server, so each line goes to [`jsonrpsee::Methods::raw_json_request`]
//! (the module's own dispatch: the same methods, parsing and errors as
//! over WebSocket), on its own task so a slow call never holds up the
//! next line; its answer and its subscription's notifications funnel into
//! one writer task that owns stdout. At most [`MAX_IN_FLIGHT`] calls are
//! dispatched and not yet answered: at the cap no line is taken, so stdin
//! is not read (a client that sends without reading stdout holds a few
//! hundred calls in dsh, not one task per line it wrote). Lines that are
//! not requests are answered here ([`crate::ndjson`] answers those that
//! are not even text) and never end the connection.

use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc as lines;
use futures::StreamExt;
use jsonrpsee::Methods;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use super::hub::Hub;
use crate::ndjson;

/// Notifications one subscription may queue for the writer.
const SUBSCRIPTION_BUFFER: usize = 1024;

/// Calls dispatched whose answer is not yet queued for stdout.
pub const MAX_IN_FLIGHT: usize = 256;

/// Serves the module on `input`/`output` until stdin ends or a client
/// calls `shutdown`; then every session is stopped and the output
/// drained.
pub async fn serve<R, W>(hub: Arc<Hub>, input: R, output: W, max_frame: usize)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let methods: Methods = super::module(hub.clone()).into();
    let (line_tx, mut line_rx) = lines::channel::<String>(64);
    let (error_tx, mut error_rx) = lines::channel::<String>(64);
    tokio::spawn(ndjson::read_frames(input, max_frame, line_tx, error_tx));
    let (out, out_rx) = mpsc::channel::<String>(256);
    let writer = tokio::spawn(write_lines(output, out_rx));
    let calls = tokio_util::task::TaskTracker::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
    let mut errors_open = true;
    loop {
        // A free slot before the next line: at the cap, lines wait in the
        // reader's small channel and then in the pipe.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = hub.stop.cancelled() => break,
        };
        tokio::select! {
            line = line_rx.next() => match line {
                Some(line) => {
                    calls.spawn(call(methods.clone(), line, out.clone(), slot));
                }
                None => break,
            },
            error = error_rx.next(), if errors_open => match error {
                Some(error) => {
                    let _ = out.send(error).await;
                }
                None => errors_open = false,
            },
            () = hub.stop.cancelled() => break,
        }
    }
    tracing::info!("SDK connection ended; stopping its sessions");
    hub.shutdown().await;
    calls.close();
    if tokio::time::timeout(Duration::from_secs(2), calls.wait())
        .await
        .is_err()
    {
        tracing::warn!("SDK calls did not finish within 2 s of shutdown");
    }
    drop(out);
    if tokio::time::timeout(Duration::from_secs(2), writer)
        .await
        .is_err()
    {
        tracing::warn!("stdout did not drain within 2 s");
    }
}

/// One line: the method's answer, then its subscription's notifications.
/// The `slot` is given back once the answer is queued (a subscription's
/// notifications have their own bound).
async fn call(
    methods: Methods,
    line: String,
    out: mpsc::Sender<String>,
    slot: tokio::sync::OwnedSemaphorePermit,
) {
    match methods.raw_json_request(&line, SUBSCRIPTION_BUFFER).await {
        Ok((response, mut notifications)) => {
            let sent = out.send(response.get().to_owned()).await;
            drop(slot);
            if sent.is_err() {
                return;
            }
            while let Some(notification) = notifications.recv().await {
                if out.send(notification.get().to_owned()).await.is_err() {
                    return;
                }
            }
        }
        Err(err) => {
            if let Some(answer) = not_a_request(&line, &err) {
                let _ = out.send(answer).await;
            }
        }
    }
}

/// The answer to a line jsonrpsee could not take as a request: none for
/// a notification (JSON-RPC answers those with nothing), -32600 for JSON
/// that is not a request (or a batch: not supported), -32700 otherwise.
fn not_a_request(line: &str, err: &serde_json::Error) -> Option<String> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
        tracing::warn!(%err, "answering a line that is not JSON");
        return Some(ndjson::error_frame(
            ndjson::recover_id(line),
            -32700,
            "Parse error",
            format!("not valid JSON: {err}"),
        ));
    };
    let detail = match &value {
        serde_json::Value::Array(_) => {
            "batch requests are not supported; send one request per line".to_owned()
        }
        serde_json::Value::Object(object)
            if !object.contains_key("id") && object.contains_key("method") =>
        {
            tracing::debug!("ignoring a notification: the SDK has none to receive");
            return None;
        }
        _ => format!("not a JSON-RPC 2.0 request: {err}"),
    };
    let id = match value.get("id") {
        Some(id @ (serde_json::Value::Number(_) | serde_json::Value::String(_))) => id.clone(),
        _ => serde_json::Value::Null,
    };
    Some(ndjson::error_frame(id, -32600, "Invalid request", detail))
}

/// Writes lines as they come (the one writer, [`ndjson::write_frames`]).
async fn write_lines<W: AsyncWrite + Unpin>(output: W, mut lines: mpsc::Receiver<String>) {
    let lines = futures::stream::poll_fn(move |cx| lines.poll_recv(cx));
    if let Err(err) = ndjson::write_frames(output, lines, None, &mut ndjson::Plain).await {
        tracing::warn!(%err, "stdout closed; dropping further output");
    }
}
