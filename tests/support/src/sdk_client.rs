//! A JSON-RPC client for `dsh sdk`, the same over both of its transports:
//! lines on the child's stdin/stdout, or text frames on a WebSocket
//! (tokio-tungstenite, not jsonrpsee: the server's own library would
//! agree with it by construction).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, Notify};

/// Whatever can start `dsh ARGS…` for a test, its stdio piped: the e2e
/// harness's `TestEnv`, which knows where the built binary is.
pub trait DshCommand {
    /// `dsh ARGS…` with the test's environment.
    fn dsh(&self, args: &[&str]) -> tokio::process::Command;
}

#[derive(Default)]
struct Shared {
    pending: HashMap<u64, oneshot::Sender<Value>>,
    /// Every notification, in arrival order.
    notifications: Vec<Value>,
    /// Messages that matched no request (answers with a null id).
    stray: Vec<Value>,
    closed: bool,
}

/// One connection to `dsh sdk`.
pub struct SdkClient {
    out: mpsc::UnboundedSender<String>,
    shared: Arc<Mutex<Shared>>,
    notify: Arc<Notify>,
    next_id: Mutex<u64>,
    /// While true, the reader stops reading (a stalled client).
    paused: tokio::sync::watch::Sender<bool>,
}

impl SdkClient {
    fn start(out: mpsc::UnboundedSender<String>) -> (SdkClient, Arc<Mutex<Shared>>, Arc<Notify>) {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let notify = Arc::new(Notify::new());
        let client = SdkClient {
            out,
            shared: shared.clone(),
            notify: notify.clone(),
            next_id: Mutex::new(0),
            paused: tokio::sync::watch::channel(false).0,
        };
        (client, shared, notify)
    }

    fn dispatch(shared: &Mutex<Shared>, notify: &Notify, text: &str) {
        let value: Value = serde_json::from_str(text)
            .unwrap_or_else(|err| panic!("dsh sdk wrote a line that is not JSON ({err}): {text}"));
        let mut shared = shared.lock().unwrap();
        if value.get("method").is_some() {
            shared.notifications.push(value);
        } else if let Some(tx) = value["id"]
            .as_u64()
            .and_then(|id| shared.pending.remove(&id))
        {
            let _ = tx.send(value);
        } else {
            shared.stray.push(value);
        }
        drop(shared);
        notify.notify_waiters();
    }

    /// Over the child's stdin/stdout.
    pub fn stdio(child: &mut tokio::process::Child) -> SdkClient {
        let mut stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (out, mut out_rx) = mpsc::unbounded_channel::<String>();
        let (client, shared, notify) = Self::start(out);
        tokio::spawn(async move {
            while let Some(line) = out_rx.recv().await {
                if stdin.write_all(line.as_bytes()).await.is_err()
                    || stdin.write_all(b"\n").await.is_err()
                {
                    break;
                }
            }
        });
        let mut paused = client.paused.subscribe();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            loop {
                while *paused.borrow_and_update() {
                    if paused.changed().await.is_err() {
                        break;
                    }
                }
                let Ok(Some(line)) = lines.next_line().await else {
                    break;
                };
                Self::dispatch(&shared, &notify, &line);
            }
            shared.lock().unwrap().closed = true;
            notify.notify_waiters();
        });
        client
    }

    /// Over a WebSocket to `url`, with a bearer token when given.
    ///
    /// # Errors
    /// The handshake failed (a 401 among them), as text.
    pub async fn websocket(url: &str, token: Option<&str>) -> Result<SdkClient, String> {
        Self::websocket_with(url, token, None).await
    }

    /// Over a WebSocket, also sending an `Origin` header (as browsers do).
    ///
    /// # Errors
    /// The handshake failed, as text.
    pub async fn websocket_with(
        url: &str,
        token: Option<&str>,
        origin: Option<&str>,
    ) -> Result<SdkClient, String> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        use tokio_tungstenite::tungstenite::Message;
        let mut request = url.into_client_request().map_err(|e| e.to_string())?;
        if let Some(token) = token {
            request
                .headers_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        if let Some(origin) = origin {
            request
                .headers_mut()
                .insert("origin", origin.parse().unwrap());
        }
        let (socket, _) = tokio_tungstenite::connect_async(request)
            .await
            .map_err(|err| err.to_string())?;
        let (mut sink, mut stream) = socket.split();
        let (out, mut out_rx) = mpsc::unbounded_channel::<String>();
        let (client, shared, notify) = Self::start(out);
        tokio::spawn(async move {
            while let Some(text) = out_rx.recv().await {
                if sink.send(Message::text(text)).await.is_err() {
                    break;
                }
            }
            let _ = sink.close().await;
        });
        let mut paused = client.paused.subscribe();
        tokio::spawn(async move {
            loop {
                while *paused.borrow_and_update() {
                    if paused.changed().await.is_err() {
                        break;
                    }
                }
                let message = match stream.next().await {
                    Some(Ok(message)) => message,
                    Some(Err(err)) => {
                        eprintln!("sdk client: the WebSocket failed: {err}");
                        break;
                    }
                    None => break,
                };
                if let Message::Text(text) = message {
                    Self::dispatch(&shared, &notify, text.as_str());
                }
            }
            shared.lock().unwrap().closed = true;
            notify.notify_waiters();
        });
        Ok(client)
    }

    /// Stops (or resumes) reading dsh's output, as a stalled client would.
    pub fn pause(&self, paused: bool) {
        self.paused.send_replace(paused);
    }

    /// Sends a raw line (or frame).
    pub fn send_raw(&self, text: &str) {
        let _ = self.out.send(text.to_owned());
    }

    /// Sends a request without waiting for its answer.
    pub fn send(&self, method: &str, params: Value) -> oneshot::Receiver<Value> {
        let id = {
            let mut next = self.next_id.lock().unwrap();
            *next += 1;
            *next
        };
        let (tx, rx) = oneshot::channel();
        self.shared.lock().unwrap().pending.insert(id, tx);
        self.send_raw(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        rx
    }

    /// Sends requests in one write (they reach dsh together), without
    /// waiting for their answers.
    pub fn send_together(&self, calls: &[(&str, Value)]) -> Vec<oneshot::Receiver<Value>> {
        let mut lines = Vec::new();
        let mut answers = Vec::new();
        for (method, params) in calls {
            let id = {
                let mut next = self.next_id.lock().unwrap();
                *next += 1;
                *next
            };
            let (tx, rx) = oneshot::channel();
            self.shared.lock().unwrap().pending.insert(id, tx);
            answers.push(rx);
            lines.push(
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
            );
        }
        self.send_raw(&lines.join("\n"));
        answers
    }

    /// A request's whole answer (`result` or `error`).
    pub async fn call(&self, method: &str, params: Value) -> Value {
        let rx = self.send(method, params);
        tokio::time::timeout(Duration::from_secs(20), rx)
            .await
            .unwrap_or_else(|_| panic!("no answer to {method}"))
            .unwrap_or_else(|_| panic!("connection closed before answering {method}"))
    }

    /// A request's result; panics on an error answer.
    pub async fn ok(&self, method: &str, params: Value) -> Value {
        let answer = self.call(method, params).await;
        assert!(answer.get("error").is_none(), "{method} failed: {answer}");
        answer["result"].clone()
    }

    /// Sends a text prompt; its receipt (`messageId`).
    pub async fn prompt(&self, session: &str, text: &str) -> String {
        let receipt = self
            .ok(
                "session/prompt",
                json!({"sessionId": session, "text": text}),
            )
            .await;
        receipt["messageId"].as_str().unwrap().to_owned()
    }

    /// Subscribes; the subscription id.
    pub async fn subscribe(&self, session: &str, from_seq: Option<u64>) -> Value {
        let mut params = json!({"sessionId": session});
        if let Some(from) = from_seq {
            params["fromSeq"] = json!(from);
        }
        self.ok("session/subscribe", params).await
    }

    /// The `session.event` results of one subscription so far.
    pub fn items(&self, subscription: &Value) -> Vec<Value> {
        self.shared
            .lock()
            .unwrap()
            .notifications
            .iter()
            .filter(|n| {
                n["method"] == "session.event" && &n["params"]["subscription"] == subscription
            })
            .map(|n| n["params"]["result"].clone())
            .collect()
    }

    /// Its logged events so far.
    pub fn events(&self, subscription: &Value) -> Vec<Value> {
        self.items(subscription)
            .into_iter()
            .filter(|item| item["kind"] == "event")
            .map(|item| item["event"].clone())
            .collect()
    }

    /// Answers that matched no request.
    pub fn stray(&self) -> Vec<Value> {
        self.shared.lock().unwrap().stray.clone()
    }

    /// Waits until `pred` holds of the subscription's items.
    pub async fn wait_items(
        &self,
        subscription: &Value,
        what: &str,
        pred: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let notified = self.notify.notified();
            let items = self.items(subscription);
            if pred(&items) {
                return items;
            }
            if self.shared.lock().unwrap().closed {
                panic!("connection closed waiting for {what}; items: {items:#?}");
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("timed out waiting for {what}; items: {items:#?}");
            }
        }
    }

    /// Waits for the subscription to report the session idle after a prompt.
    pub async fn wait_idle(&self, subscription: &Value) -> Value {
        let items = self
            .wait_items(subscription, "idle", |items| {
                items.iter().any(|i| {
                    i["kind"] == "status" && i["status"] == "idle" && i.get("messageId").is_some()
                })
            })
            .await;
        items
            .into_iter()
            .rev()
            .find(|i| i["kind"] == "status" && i["status"] == "idle")
            .unwrap()
    }

    /// Waits for stray answers (to lines that carried no usable id).
    pub async fn wait_stray(&self, count: usize) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let notified = self.notify.notified();
            let stray = self.stray();
            if stray.len() >= count {
                return stray;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("timed out waiting for {count} stray answers; have {stray:?}");
            }
        }
    }

    /// Whether the server closed the connection.
    pub fn closed(&self) -> bool {
        self.shared.lock().unwrap().closed
    }
}

/// `dsh sdk` on stdio.
pub struct SdkProcess {
    pub child: tokio::process::Child,
    pub client: SdkClient,
    pub stderr: Arc<Mutex<String>>,
}

fn collect_stderr(child: &mut tokio::process::Child) -> (Arc<Mutex<String>>, Arc<Notify>) {
    let stderr = Arc::new(Mutex::new(String::new()));
    let notify = Arc::new(Notify::new());
    let pipe = child.stderr.take().unwrap();
    let (text, changed) = (stderr.clone(), notify.clone());
    tokio::spawn(async move {
        let mut lines = BufReader::new(pipe).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let mut text = text.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
            drop(text);
            changed.notify_waiters();
        }
    });
    (stderr, notify)
}

impl SdkProcess {
    /// Spawns `dsh sdk` and connects over its stdio.
    pub fn stdio(env: &impl DshCommand) -> SdkProcess {
        let mut child = env.dsh(&["sdk"]).spawn().expect("spawn dsh sdk");
        let (stderr, _) = collect_stderr(&mut child);
        let client = SdkClient::stdio(&mut child);
        SdkProcess {
            child,
            client,
            stderr,
        }
    }

    /// Waits for the process to exit after stdin closed or `shutdown`.
    pub async fn exit(mut self) -> std::process::ExitStatus {
        drop(self.client);
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("dsh sdk exits")
            .unwrap()
    }
}

/// `dsh sdk --listen` and where it listens.
pub struct SdkServer {
    pub child: tokio::process::Child,
    pub url: String,
    pub stderr: Arc<Mutex<String>>,
    /// The token file dsh made (none with `--token-env`).
    pub token_file: Option<std::path::PathBuf>,
    /// The token connections send.
    pub token: Option<String>,
}

impl SdkServer {
    /// Spawns `dsh sdk --listen 127.0.0.1:0 EXTRA…` and waits for its address.
    pub async fn start(env: &impl DshCommand, extra: &[&str]) -> SdkServer {
        let mut args = vec!["sdk", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut child = env.dsh(&args).spawn().expect("spawn dsh sdk --listen");
        let (stderr, changed) = collect_stderr(&mut child);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let (url, token_file) = loop {
            let notified = changed.notified();
            {
                let text = stderr.lock().unwrap();
                let line = |prefix: &str| {
                    text.lines()
                        .find_map(|line| line.strip_prefix(prefix))
                        .map(str::to_owned)
                };
                if let Some(url) = line("dsh sdk: listening on ") {
                    break (
                        url,
                        line("dsh sdk: token in ").map(std::path::PathBuf::from),
                    );
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "dsh sdk did not say where it listens: {}",
                    stderr.lock().unwrap()
                );
            }
        };
        let token = token_file
            .as_ref()
            .map(|path| std::fs::read_to_string(path).expect("the token file"));
        SdkServer {
            child,
            url,
            stderr,
            token_file,
            token,
        }
    }

    /// A connection with the token from dsh's token file.
    pub async fn connect(&self) -> SdkClient {
        SdkClient::websocket(&self.url, self.token.as_deref())
            .await
            .expect("connect")
    }
}
