//! `dsh sdk --listen ADDR`: the same module over WebSocket. Each accepted
//! TCP connection gets its own jsonrpsee service with a known connection
//! id, so its end can be told to the hub (its prompts' open asks are
//! denied; sessions nobody holds any more are closed).
//!
//! Every connection authenticates: it must send `Authorization: Bearer
//! <token>` with its upgrade request, or it is refused with 401 before any
//! JSON-RPC. The token is the one named by `--token-env`, else a random one
//! made for this start and written, 0600, to
//! `$DSH_HOME/sdk/ws-<port>.token` (dsh's home is hidden from sandboxed
//! commands; stderr names the file, never the token). Any local process of
//! another user — or a command allowed the network — would otherwise drive
//! an agent that runs code as the user. A request that carries an `Origin`
//! header is refused with 403 as well: browsers send it with every
//! WebSocket upgrade.
//!
//! Before authentication a connection is cheap to refuse and must stay so:
//! at most [`MAX_UNAUTHENTICATED`] connections may be waiting for their
//! upgrade request at once (a new one closes the oldest waiting one, so a
//! flood of idle connections cannot lock out a client that sends its
//! request at once), and each has [`HEADER_TIMEOUT`] to send it.
//!
//! Framing errors answer as over stdio where jsonrpsee lets them: a batch
//! is refused with -32600 ([`NoBatches`]); a message over the frame limit
//! (`DSH_MAX_FRAME_BYTES`, 64 MiB) is discarded unread by jsonrpsee and
//! answered with -32007 and a null id.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use jsonrpsee::core::BoxError;
use jsonrpsee::server::middleware::rpc::{
    Batch, MethodResponse, Notification, RpcServiceBuilder, RpcServiceT,
};
use jsonrpsee::server::{
    serve_with_graceful_shutdown, stop_channel, HttpBody, HttpResponse, Server, ServerConfig,
};
use jsonrpsee::types::{ErrorObject, Id, Request};
use jsonrpsee::Methods;
use tokio::net::TcpListener;
use tower::Service;

use super::hub::Hub;

/// Connections that have not authenticated yet, at most.
pub const MAX_UNAUTHENTICATED: usize = 64;
/// How long a connection has to send an authenticated upgrade request.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest message a connection may send, as over stdio:
/// `DSH_MAX_FRAME_BYTES`, else 64 MiB. jsonrpsee discards a longer one
/// unread and answers it with -32007 and a null id (its id is never seen).
fn max_message() -> u32 {
    std::env::var("DSH_MAX_FRAME_BYTES")
        .ok()
        .and_then(|value| value.parse::<u64>().ok())
        .unwrap_or(64 * 1024 * 1024)
        .clamp(1, u64::from(u32::MAX)) as u32
}

/// Refuses JSON-RPC batches as stdio does (`sdk/stdio.rs`): one -32600
/// error with a null id, and nothing in the batch runs. (jsonrpsee's own
/// `BatchRequestConfig::Disabled` answers -32005, which the API does not
/// use.)
#[derive(Clone)]
struct NoBatches<S>(S);

impl<S> RpcServiceT for NoBatches<S>
where
    S: RpcServiceT<
            MethodResponse = MethodResponse,
            BatchResponse = MethodResponse,
            NotificationResponse = MethodResponse,
        > + Send
        + Sync,
{
    type MethodResponse = MethodResponse;
    type NotificationResponse = MethodResponse;
    type BatchResponse = MethodResponse;

    fn call<'a>(
        &self,
        request: Request<'a>,
    ) -> impl std::future::Future<Output = MethodResponse> + Send + 'a {
        self.0.call(request)
    }

    fn batch<'a>(
        &self,
        _requests: Batch<'a>,
    ) -> impl std::future::Future<Output = MethodResponse> + Send + 'a {
        tracing::warn!("answering a batch: not supported");
        std::future::ready(MethodResponse::error(
            Id::Null,
            ErrorObject::owned(
                -32600,
                "Invalid request",
                Some(serde_json::json!({
                    "detail": "batch requests are not supported; send one request per message"
                })),
            ),
        ))
    }

    fn notification<'a>(
        &self,
        n: Notification<'a>,
    ) -> impl std::future::Future<Output = MethodResponse> + Send + 'a {
        self.0.notification(n)
    }
}

/// Connections still to authenticate, oldest first.
type Waiting = Arc<std::sync::Mutex<std::collections::VecDeque<(u32, tokio::task::AbortHandle)>>>;

/// A fresh random token: 256 bits from the operating system, hex.
fn random_token() -> String {
    let (a, b) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    format!("{}{}", a.simple(), b.simple())
}

/// The token file, 0600 in a 0700 directory under dsh's home: written at
/// start, removed when this is dropped — when [`serve`] returns, and when
/// its future is dropped unfinished (SIGTERM, SIGINT: `main.rs` drops the
/// serving future when a signal comes). A file a killed server left is
/// replaced by the next start on its port.
struct TokenFile(std::path::PathBuf);

impl TokenFile {
    /// Writes `token` to `$home/sdk/ws-<port>.token`.
    fn write(home: &std::path::Path, port: u16, token: &str) -> Result<TokenFile, String> {
        use std::io::Write;
        let dir = home.join("sdk");
        crate::private::create_dir_all(&dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        let path = dir.join(format!("ws-{port}.token"));
        // A stale file of an earlier start (the port was free again).
        let _ = std::fs::remove_file(&path);
        let mut options = crate::private::options();
        options.write(true).create_new(true);
        let file = crate::private::open_no_follow(&options, &path)
            .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
        // Removed from here on, also when the write fails.
        let written = TokenFile(path);
        (&file)
            .write_all(token.as_bytes())
            .map_err(|err| format!("cannot write {}: {err}", written.0.display()))?;
        Ok(written)
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_file(&self.0) {
            tracing::warn!(%err, file = %self.0.display(), "cannot remove the SDK token file");
        }
    }
}

/// Serves until a client calls `shutdown` (or `stop` is cancelled):
/// binds `addr`, says where on stderr, accepts connections.
///
/// # Errors
/// The address cannot be bound.
pub async fn serve(hub: Arc<Hub>, addr: SocketAddr, token: Option<String>) -> Result<(), String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|err| format!("cannot listen on {addr}: {err}"))?;
    let local = listener
        .local_addr()
        .map_err(|err| format!("cannot listen on {addr}: {err}"))?;
    let (token, token_file) = match token {
        Some(token) => (token, None),
        None => {
            let token = random_token();
            let home = hub.agent.config().home.clone();
            let file = TokenFile::write(&home, local.port(), &token)?;
            (token, Some(file))
        }
    };
    // Tests and launchers read the token file's path, then the port, from
    // these lines (`--listen 127.0.0.1:0` picks a free port).
    {
        use std::io::Write;
        let mut stderr = std::io::stderr().lock();
        if let Some(TokenFile(path)) = &token_file {
            let _ = writeln!(stderr, "dsh sdk: token in {}", path.display());
        }
        let _ = writeln!(stderr, "dsh sdk: listening on ws://{local}");
    }
    tracing::info!(%local, token_file = token_file.is_some(), "SDK WebSocket server started");
    let served = accept_loop(&hub, listener, token).await;
    drop(token_file);
    served
}

async fn accept_loop(hub: &Arc<Hub>, listener: TcpListener, token: String) -> Result<(), String> {
    let methods: Methods = super::module(hub.clone()).into();
    let (stop_handle, server_handle) = stop_channel();
    let builder = Server::builder()
        .set_config(
            ServerConfig::builder()
                .ws_only()
                .max_request_body_size(max_message())
                .build(),
        )
        .set_rpc_middleware(RpcServiceBuilder::new().layer_fn(NoBatches))
        .to_service_builder();
    let token: Arc<str> = Arc::from(token);
    let next_conn = AtomicU32::new(1);
    let connections = tokio_util::task::TaskTracker::new();
    let waiting: Waiting = Arc::default();
    loop {
        let socket = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    tracing::debug!(%peer, "SDK connection");
                    // Small frames go out at once: with Nagle's algorithm a
                    // delta waits ~40 ms for the peer's delayed ACK.
                    if let Err(err) = socket.set_nodelay(true) {
                        tracing::debug!(%err, "cannot set TCP_NODELAY");
                    }
                    socket
                }
                Err(err) => {
                    tracing::warn!(%err, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = hub.stop.cancelled() => break,
        };
        let authenticated = Arc::new(tokio::sync::Notify::new());
        let conn = next_conn.fetch_add(1, Ordering::Relaxed);
        let service = builder
            .clone()
            .connection_id(conn)
            .build(methods.clone(), stop_handle.clone());
        let (hub, token) = (hub.clone(), token.clone());
        let (queue, signal) = (waiting.clone(), authenticated.clone());
        let service = tower::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let refusal = if request.headers().contains_key(hyper::header::ORIGIN) {
                tracing::warn!(
                    conn,
                    "refused an SDK connection from a web page (it sent Origin)"
                );
                Some(refused(403, "connections from web pages are refused"))
            } else if !authorized(request.headers(), &token) {
                tracing::warn!(
                    conn,
                    "refused an SDK connection without the right bearer token"
                );
                Some(refused(
                    401,
                    "this server needs `Authorization: Bearer <token>` (the token is in the file dsh sdk named on stderr, or the --token-env variable)",
                ))
            } else {
                None
            };
            if let Some(response) = refusal {
                return std::future::ready(Ok::<_, BoxError>(response)).boxed();
            }
            queue
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|(id, _)| *id != conn);
            signal.notify_one();
            let mut service = service.clone();
            let closed = service.on_session_closed();
            let hub = hub.clone();
            tokio::spawn(async move {
                closed.await;
                tracing::debug!(conn, "SDK connection closed");
                hub.disconnected(conn as usize).await;
            });
            async move { service.call(request).await }.boxed()
        });
        let serving = connections.spawn(serve_with_graceful_shutdown(
            socket,
            service,
            stop_handle.clone().shutdown(),
        ));
        let abort = serving.abort_handle();
        {
            let mut queue = waiting.lock().unwrap_or_else(|e| e.into_inner());
            if queue.len() >= MAX_UNAUTHENTICATED {
                if let Some((oldest, handle)) = queue.pop_front() {
                    tracing::debug!(
                        oldest,
                        "SDK connection closed: too many waiting to authenticate"
                    );
                    handle.abort();
                }
            }
            queue.push_back((conn, abort.clone()));
        }
        let queue = waiting.clone();
        // Not tracked: shutdown need not wait for it.
        tokio::spawn(async move {
            tokio::select! {
                () = authenticated.notified() => {}
                () = tokio::time::sleep(HEADER_TIMEOUT) => {
                    tracing::debug!(conn, "SDK connection closed: no authenticated upgrade in time");
                    queue
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .retain(|(id, _)| *id != conn);
                    abort.abort();
                }
            }
        });
    }
    tracing::info!("SDK server stopping");
    hub.shutdown().await;
    let _ = server_handle.stop();
    connections.close();
    if tokio::time::timeout(Duration::from_secs(2), connections.wait())
        .await
        .is_err()
    {
        tracing::warn!("SDK connections did not all close within 2 s");
    }
    Ok(())
}

/// Whether the headers carry `Authorization: Bearer <token>` (compared in
/// constant time).
fn authorized(headers: &hyper::HeaderMap, token: &str) -> bool {
    let Some(given) = headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
    else {
        return false;
    };
    let (given, token) = (given.trim().as_bytes(), token.as_bytes());
    given.len() == token.len()
        && given
            .iter()
            .zip(token)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

fn refused(status: u16, why: &str) -> HttpResponse {
    let mut response = HttpResponse::builder()
        .status(status)
        .header("content-type", "text/plain");
    if status == 401 {
        response = response.header("www-authenticate", "Bearer");
    }
    response
        .body(HttpBody::from(format!("dsh sdk: {why}\n")))
        .unwrap_or_default()
}
