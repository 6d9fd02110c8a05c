//! `dsh sdk --listen ADDR`: the same module over WebSocket. Each accepted
//! TCP connection gets its own jsonrpsee service with a known connection
//! id, so its end can be told to the hub (its prompts' open asks are
//! denied; sessions nobody holds any more are closed). With a token,
//! every connection must send `Authorization: Bearer <token>` with its
//! upgrade request, or it is refused with 401 before any JSON-RPC.
//! Without one, a request that carries an `Origin` header is refused with
//! 403: browsers send it with every WebSocket upgrade, and any web page
//! could otherwise drive an agent on the user's loopback port (programs
//! such as the `ws` package or Python clients send none).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use jsonrpsee::core::BoxError;
use jsonrpsee::server::{
    serve_with_graceful_shutdown, stop_channel, HttpBody, HttpResponse, Server, ServerConfig,
};
use jsonrpsee::Methods;
use tokio::net::TcpListener;
use tower::Service;

use super::hub::Hub;

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
    // Tests and launchers read the port from this line (`--listen
    // 127.0.0.1:0` picks a free one).
    {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "dsh sdk: listening on ws://{local}");
    }
    tracing::info!(%local, authenticated = token.is_some(), "SDK WebSocket server started");
    let methods: Methods = super::module(hub.clone()).into();
    let (stop_handle, server_handle) = stop_channel();
    let builder = Server::builder()
        .set_config(ServerConfig::builder().ws_only().build())
        .to_service_builder();
    let token: Option<Arc<str>> = token.map(Arc::from);
    let next_conn = AtomicU32::new(1);
    let connections = tokio_util::task::TaskTracker::new();
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
        let conn = next_conn.fetch_add(1, Ordering::Relaxed);
        let service = builder
            .clone()
            .connection_id(conn)
            .build(methods.clone(), stop_handle.clone());
        let (hub, token) = (hub.clone(), token.clone());
        let service = tower::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let refusal = match &token {
                Some(token) if !authorized(request.headers(), token) => {
                    tracing::warn!(
                        conn,
                        "refused an SDK connection without the right bearer token"
                    );
                    Some(refused(
                        401,
                        "this server needs `Authorization: Bearer <token>`",
                    ))
                }
                None if request.headers().contains_key(hyper::header::ORIGIN) => {
                    tracing::warn!(
                        conn,
                        "refused an SDK connection from a web page (it sent Origin)"
                    );
                    Some(refused(
                        403,
                        "connections from web pages are refused; use --token-env to allow authenticated ones",
                    ))
                }
                _ => None,
            };
            if let Some(response) = refusal {
                return std::future::ready(Ok::<_, BoxError>(response)).boxed();
            }
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
        connections.spawn(serve_with_graceful_shutdown(
            socket,
            service,
            stop_handle.clone().shutdown(),
        ));
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
