//! `dsh sdk --listen`'s token file goes with the server on every way out
//! dsh controls (issue 38, item 8): `shutdown` (`sdk.rs`), SIGTERM and
//! SIGINT; a file a killed server left is replaced by the next start on
//! its port.

use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::json;

use crate::support::sdk_client::{SdkClient, SdkServer};
use crate::support::*;

/// Sends `signal` to a serving `dsh sdk --listen` (a client connected and
/// answered, so its signal handlers are in place): it exits 0 and its
/// token file is gone.
async fn a_signal_removes_the_token_file(signal: Signal) {
    let env = TestEnv::new().await;
    let server = SdkServer::start(&env, &[]).await;
    let file = server.token_file.clone().expect("dsh names its token file");
    let client = server.connect().await;
    client.ok("initialize", json!({})).await;
    assert!(file.exists());
    let mut child = server.child;
    let pid = nix::unistd::Pid::from_raw(child.id().expect("dsh runs") as i32);
    nix::sys::signal::kill(pid, signal).expect("signal dsh sdk");
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("dsh sdk exits on the signal")
        .unwrap();
    assert!(status.success(), "{signal}: {status:?}");
    assert!(
        !file.exists(),
        "{signal}: the token file goes with the server"
    );
}

#[tokio::test]
async fn sigterm_removes_the_token_file() {
    a_signal_removes_the_token_file(Signal::SIGTERM).await;
}

#[tokio::test]
async fn sigint_removes_the_token_file() {
    a_signal_removes_the_token_file(Signal::SIGINT).await;
}

/// A server killed with SIGKILL cannot remove its file; the next start
/// on the same port writes its own token there, and only that one lets
/// a client in.
#[tokio::test]
async fn a_killed_servers_token_file_is_replaced_at_the_next_start() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new().await;
    let first = SdkServer::start(&env, &[]).await;
    let file = first.token_file.clone().expect("dsh names its token file");
    let stale = first.token.clone().unwrap();
    let addr = first.url.strip_prefix("ws://").unwrap().to_owned();
    let mut child = first.child;
    child.kill().await.expect("SIGKILL dsh sdk");
    assert!(file.exists(), "SIGKILL leaves the file");
    // The stale file, made readable: the next start must not keep it.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();

    let (mut child, named) = listen_on(&env, &addr).await;
    assert_eq!(named, file);
    let token = std::fs::read_to_string(&file).unwrap();
    assert_ne!(token, stale, "a new token");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let url = format!("ws://{addr}");
    let refused = SdkClient::websocket(&url, Some(&stale)).await;
    assert!(
        refused.as_ref().err().is_some_and(|e| e.contains("401")),
        "the stale token is refused"
    );
    let client = SdkClient::websocket(&url, Some(&token))
        .await
        .expect("the new token connects");
    client.ok("initialize", json!({})).await;
    client.ok("shutdown", json!({})).await;
    assert!(tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap()
        .success());
    assert!(!file.exists(), "the token file goes with the server");
}

/// Starts `dsh sdk --listen ADDR` (a given port, which `SdkServer` does
/// not take) and waits until it listens; the token file it names.
async fn listen_on(env: &TestEnv, addr: &str) -> (tokio::process::Child, std::path::PathBuf) {
    use tokio::io::AsyncBufReadExt;
    let mut child = env
        .dsh(&["sdk", "--listen", addr])
        .spawn()
        .expect("spawn dsh sdk --listen");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut file = None;
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(path) = line.strip_prefix("dsh sdk: token in ") {
                file = Some(std::path::PathBuf::from(path));
            }
            if line.starts_with("dsh sdk: listening on ") {
                return;
            }
        }
        panic!("dsh sdk ended before it listened");
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("dsh sdk says where it listens");
    // The rest of stderr is read, so dsh never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, file.expect("dsh names its token file"))
}
