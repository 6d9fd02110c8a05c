//! A mock OpenAI-compatible model server on 127.0.0.1 for tests and
//! benchmarks. It answers `POST /chat/completions` with the next scripted
//! entry (see `dsh_acp_server::model::script`) as an SSE stream, or with an
//! HTTP error status, and records every request body; `GET /models` with
//! the models [`MockModel::serve_models`] named (404 until then). [`call`], [`calls`]
//! and [`reply`] write the entries tests queue most.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_acp_server::model::script::ScriptEntry;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A scripted model call that asks for one tool.
pub fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"chunks":[{"tool_call":{"index":0,"id":id,"name":name,"arguments":args.to_string()}}],"finish":"tool_calls"})
}

/// A scripted model call that asks for several tools at once.
pub fn calls(list: &[(&str, &str, Value)]) -> Value {
    let chunks: Vec<Value> = list
        .iter()
        .enumerate()
        .map(|(index, (id, name, args))| json!({"tool_call":{"index":index,"id":id,"name":name,"arguments":args.to_string()}}))
        .collect();
    json!({"chunks":chunks,"finish":"tool_calls"})
}

/// A scripted model reply that ends the turn.
pub fn reply(text: &str) -> Value {
    json!({"chunks":[{"text":text}],"finish":"stop"})
}

#[derive(Default)]
struct State {
    queue: VecDeque<ScriptEntry>,
    requests: Vec<serde_json::Value>,
    headers: Vec<String>,
    /// When the first SSE event of each streamed response was written.
    first_events: Vec<std::time::Instant>,
    /// Paced streams: when the first and the last event were written.
    emissions: Vec<(std::time::Instant, std::time::Instant)>,
    /// Streamed responses written to the end.
    written: usize,
    /// When each request's body had arrived.
    arrivals: Vec<std::time::Instant>,
    /// Keep no request bodies or heads (long soaks).
    forget: bool,
    /// Answers to title requests (side requests that name a session),
    /// kept apart from the scripted conversation, and those requests.
    titles: VecDeque<ScriptEntry>,
    title_requests: Vec<serde_json::Value>,
    /// Hanging responses (`hang_after`) whose connection the client closed.
    let_go: usize,
    /// What `GET /models` lists (`None`: 404).
    served: Option<Vec<String>>,
    /// `GET /models` requests received.
    model_lists: usize,
}

/// A running mock server; it stops when dropped.
pub struct MockModel {
    /// Base URL (`http://127.0.0.1:port`).
    pub url: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockModel {
    /// Starts a server on an ephemeral loopback port.
    pub async fn start() -> MockModel {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("local addr"));
        let state = Arc::new(Mutex::new(State::default()));
        let task = tokio::spawn({
            let state = state.clone();
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    tokio::spawn(serve(stream, state.clone()));
                }
            }
        });
        MockModel { url, state, task }
    }

    /// Queues one response.
    pub fn push(&self, entry: ScriptEntry) {
        self.state.lock().unwrap().queue.push_back(entry);
    }

    /// Queues one response from JSON (the script line format).
    pub fn push_json(&self, value: serde_json::Value) {
        self.push(serde_json::from_value(value).expect("valid script entry"));
    }

    /// Queues every entry of a JSONL script file under `fixtures/transcripts/`.
    pub fn push_fixture(&self, name: &str) {
        let path = format!(
            "{}/../../fixtures/transcripts/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        for entry in ScriptEntry::parse_script(&text).expect("valid script") {
            self.push(entry);
        }
    }

    /// The models `GET /models` lists from now on (OpenAI's list).
    pub fn serve_models(&self, ids: &[&str]) {
        self.state.lock().unwrap().served = Some(ids.iter().map(|id| (*id).to_owned()).collect());
    }

    /// How many `GET /models` requests came.
    pub fn model_lists(&self) -> usize {
        self.state.lock().unwrap().model_lists
    }

    /// Queues the answer to the next title request.
    pub fn push_title(&self, value: serde_json::Value) {
        let entry = serde_json::from_value(value).expect("a script entry");
        self.state.lock().unwrap().titles.push_back(entry);
    }

    /// The title requests received.
    pub fn title_requests(&self) -> Vec<serde_json::Value> {
        self.state.lock().unwrap().title_requests.clone()
    }

    /// How many hanging responses (`hang_after`) the client let go of:
    /// it closed their connection (a cancelled request).
    pub fn let_go(&self) -> usize {
        self.state.lock().unwrap().let_go
    }

    /// Request bodies received so far.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        self.state.lock().unwrap().requests.clone()
    }

    /// What the model was told for a tool call (from the last request
    /// that carries its result).
    pub fn tool_result(&self, call_id: &str) -> String {
        for request in self.requests().iter().rev() {
            if let Some(message) = request["messages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["tool_call_id"] == call_id)
            {
                return message["content"].as_str().unwrap().to_owned();
            }
        }
        panic!("no tool result for {call_id}");
    }

    /// Raw request heads received so far.
    pub fn heads(&self) -> Vec<String> {
        self.state.lock().unwrap().headers.clone()
    }

    /// Stops recording request bodies and heads (a soak sends thousands
    /// of growing bodies).
    pub fn forget_requests(&self) {
        self.state.lock().unwrap().forget = true;
    }

    /// Responses not yet served.
    pub fn pending(&self) -> usize {
        self.state.lock().unwrap().queue.len()
    }

    /// When the first SSE event of each streamed response was written.
    pub fn first_events(&self) -> Vec<std::time::Instant> {
        self.state.lock().unwrap().first_events.clone()
    }

    /// Paced streams: when their first and last events were written.
    pub fn emissions(&self) -> Vec<(std::time::Instant, std::time::Instant)> {
        self.state.lock().unwrap().emissions.clone()
    }

    /// Streamed responses written to the end (the last byte handed to
    /// the socket).
    pub fn written(&self) -> usize {
        self.state.lock().unwrap().written
    }

    /// When each request's body had arrived.
    pub fn arrivals(&self) -> Vec<std::time::Instant> {
        self.state.lock().unwrap().arrivals.clone()
    }
}

async fn serve(mut stream: TcpStream, state: Arc<Mutex<State>>) {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    if head.starts_with("GET ") {
        let path = head.split_whitespace().nth(1).unwrap_or("");
        let served = {
            let mut state = state.lock().unwrap();
            let listing = path.ends_with("/models");
            state.model_lists += usize::from(listing);
            state.served.clone().filter(|_| listing)
        };
        let _ = match served {
            Some(ids) => {
                let data: Vec<Value> = ids
                    .iter()
                    .map(
                        |id| json!({"id": id, "object": "model", "created": 0, "owned_by": "mock"}),
                    )
                    .collect();
                let body = json!({"object": "list", "data": data}).to_string();
                write_response(&mut stream, 200, None, &body).await
            }
            None => {
                let body =
                    format!(r#"{{"error":{{"message":"mock model: no route GET {path}"}}}}"#);
                write_response(&mut stream, 404, None, &body).await
            }
        };
        return;
    }
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body: serde_json::Value =
        serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or_default();
    let last_role = body["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .and_then(|m| m["role"].as_str())
        .unwrap_or("")
        .to_owned();
    let last_tool = body["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "tool"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned();
    let last_user = body["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned();
    let naming = body["messages"][0]["content"]
        .as_str()
        .is_some_and(|system| system.starts_with("You name coding sessions"));
    let entry = {
        let mut state = state.lock().unwrap();
        state.arrivals.push(std::time::Instant::now());
        if naming {
            state.title_requests.push(body);
            state.titles.pop_front()
        } else {
            if !state.forget {
                state.requests.push(body);
                state.headers.push(head);
            }
            state.queue.pop_front()
        }
    };
    let Some(entry) = entry else {
        let body = r#"{"error":{"message":"mock model: no scripted response left"}}"#;
        let _ = write_response(&mut stream, 500, None, body).await;
        return;
    };
    if entry.reset {
        // RST instead of FIN: the client sees a connection reset.
        // A zero linger does not block on drop: it sends the RST at once.
        #[allow(deprecated)]
        let _ = stream.set_linger(Some(Duration::ZERO));
        drop(stream);
        return;
    }
    if let Some(status) = entry.status {
        let body = entry
            .body
            .clone()
            .unwrap_or_else(|| format!(r#"{{"error":{{"message":"mock status {status}"}}}}"#));
        let _ = write_response(&mut stream, status, entry.retry_after.as_deref(), &body).await;
        return;
    }
    let mut entry = entry;
    if entry.echo_read && last_role == "user" {
        use dsh_acp_server::model::script::ScriptChunk;
        let file = last_user.split_whitespace().next().unwrap_or("").to_owned();
        entry.chunks = vec![ScriptChunk::ToolCall {
            index: 0,
            id: Some(format!("read-{file}")),
            name: Some("read".into()),
            arguments: serde_json::json!({"file_path": file}).to_string(),
        }];
        entry.echo_chunks = None;
        entry.finish = Some("tool_calls".into());
    }
    let echoed = if entry.echo_read {
        format!("{last_user} | {}", last_tool.trim_end())
    } else {
        last_user.clone()
    };
    if let Some(parts) = entry.echo_chunks.filter(|n| *n > 0) {
        let chars: Vec<char> = echoed.chars().collect();
        let size = chars.len().div_ceil(parts).max(1);
        entry.chunks = chars
            .chunks(size)
            .map(|piece| dsh_acp_server::model::script::ScriptChunk::Text(piece.iter().collect()))
            .collect();
    }
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
    if let Some(pace) = entry.pace_us {
        // Paced streams are encoded first, so the pacing is only writes.
        let payloads = entry.sse_payloads();
        if stream.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        paced(stream, payloads, Duration::from_micros(pace), state).await;
        return;
    }
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    // Encoded as they go: a large script's first event does not wait for
    // the rest (in a debug build on a loaded machine encoding 300,000
    // chunks first took longer than the tests' 600 ms idle timeout).
    let payloads = entry.sse_payload_iter();
    let delay = Duration::from_millis(entry.delay_ms);
    // Large scripted streams are written in batches, as a real server's
    // TCP writes coalesce; small ones one event per write.
    let mut pending = Vec::new();
    for (index, payload) in payloads.enumerate() {
        if entry.hang_after == Some(index) {
            let _ = stream.write_all(&pending).await;
            let _ = stream.flush().await;
            // Held open until the client lets go of it (or an hour).
            let mut byte = [0u8; 1];
            let hung = tokio::time::timeout(Duration::from_secs(3600), stream.read(&mut byte));
            if let Ok(Ok(0) | Err(_)) = hung.await {
                state.lock().unwrap().let_go += 1;
            }
            return;
        }
        if entry.drop_after == Some(index) {
            let _ = stream.write_all(&pending).await;
            let _ = stream.shutdown().await;
            return;
        }
        pending.extend_from_slice(b"data: ");
        pending.extend_from_slice(payload.as_bytes());
        pending.extend_from_slice(b"\n\n");
        if !delay.is_zero() || index == 0 || pending.len() > 16 * 1024 {
            if stream.write_all(&pending).await.is_err() {
                return;
            }
            if index == 0 {
                state
                    .lock()
                    .unwrap()
                    .first_events
                    .push(std::time::Instant::now());
            }
            pending.clear();
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            } else {
                // The mock shares its runtime with the test's client:
                // encoding a large script must not starve it.
                tokio::task::yield_now().await;
            }
        }
    }
    pending.extend_from_slice(b"data: [DONE]\n\n");
    if stream.write_all(&pending).await.is_ok() {
        state.lock().unwrap().written += 1;
    }
    let _ = stream.shutdown().await;
}

/// One SSE event per write, `pace` apart, on a blocking thread so the
/// pacing is real (the async timer's granularity is a millisecond).
async fn paced(stream: TcpStream, payloads: Vec<String>, pace: Duration, state: Arc<Mutex<State>>) {
    let Ok(stream) = stream.into_std() else {
        return;
    };
    let _ = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut stream = stream;
        if stream.set_nonblocking(false).is_err() {
            return;
        }
        let mut first = None;
        let mut last = std::time::Instant::now();
        for payload in payloads.iter().map(String::as_str).chain(["[DONE]"]) {
            let event = format!("data: {payload}\n\n");
            if stream.write_all(event.as_bytes()).is_err() {
                return;
            }
            last = std::time::Instant::now();
            first.get_or_insert(last);
            if !pace.is_zero() {
                std::thread::sleep(pace);
            }
        }
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut state = state.lock().unwrap();
        if let Some(first) = first {
            state.first_events.push(first);
            state.emissions.push((first, last));
        }
    })
    .await;
}

async fn write_response(
    stream: &mut TcpStream,
    status: u16,
    retry_after: Option<&str>,
    body: &str,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} Mock\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(retry_after) = retry_after {
        head.push_str(&format!("Retry-After: {retry_after}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}
