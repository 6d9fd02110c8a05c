//! The front ends without an editor: `dsh sdk` event latency over stdio and
//! WebSocket, its CPU per streamed chunk, and `dsh run` start to exit.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::compat::{Compat, TokioAsyncReadCompatExt};

use crate::proc::{cpu_ns_of, median, row};
use crate::Bench;

/// One JSON-RPC connection to `dsh sdk`.
enum Wire {
    Stdio {
        stdin: tokio::process::ChildStdin,
        lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    },
    WebSocket {
        sender: soketto::connection::Sender<Compat<tokio::net::TcpStream>>,
        receiver: soketto::connection::Receiver<Compat<tokio::net::TcpStream>>,
    },
}

struct Sdk {
    child: tokio::process::Child,
    wire: Wire,
    next_id: u64,
}

impl Sdk {
    async fn spawn(bench: &Bench, websocket: bool) -> Sdk {
        let mut command = tokio::process::Command::new(&bench.dsh);
        command.arg("sdk");
        if websocket {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        let mut child = command
            .env("DSH_HOME", &bench.home)
            .env("DEEPSEEK_API_KEY", "bench-key")
            .env("DEEPSEEK_BASE_URL", &bench.mock.url)
            .env("DSH_PROVIDER", "deepseek")
            .env("DSH_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn dsh sdk");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let wire = if websocket {
            let mut token = String::new();
            let addr = loop {
                let line = stderr
                    .next_line()
                    .await
                    .unwrap()
                    .expect("dsh sdk says where it listens");
                if let Some(path) = line.strip_prefix("dsh sdk: token in ") {
                    token = std::fs::read_to_string(path).expect("the SDK token file");
                }
                if let Some(url) = line.strip_prefix("dsh sdk: listening on ws://") {
                    break url.to_owned();
                }
            };
            let socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
            socket.set_nodelay(true).unwrap();
            let mut client = soketto::handshake::Client::new(socket.compat(), &addr, "/");
            let authorization = format!("Bearer {token}");
            let headers = [soketto::handshake::client::Header {
                name: "Authorization",
                value: authorization.as_bytes(),
            }];
            client.set_headers(&headers);
            match client.handshake().await.unwrap() {
                soketto::handshake::ServerResponse::Accepted { .. } => {}
                other => panic!("handshake refused: {other:?}"),
            }
            let (sender, receiver) = client.into_builder().finish();
            Wire::WebSocket { sender, receiver }
        } else {
            Wire::Stdio {
                stdin,
                lines: BufReader::with_capacity(1 << 20, stdout).lines(),
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
        Sdk {
            child,
            wire,
            next_id: 1,
        }
    }

    async fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let frame = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string();
        match &mut self.wire {
            Wire::Stdio { stdin, .. } => {
                stdin
                    .write_all(format!("{frame}\n").as_bytes())
                    .await
                    .unwrap();
                stdin.flush().await.unwrap();
            }
            Wire::WebSocket { sender, .. } => {
                sender.send_text(frame).await.unwrap();
                sender.flush().await.unwrap();
            }
        }
        id
    }

    async fn next(&mut self) -> Value {
        let text = match &mut self.wire {
            Wire::Stdio { lines, .. } => lines.next_line().await.unwrap().expect("dsh sdk exited"),
            Wire::WebSocket { receiver, .. } => {
                let mut data = Vec::new();
                receiver.receive_data(&mut data).await.unwrap();
                String::from_utf8(data).unwrap()
            }
        };
        serde_json::from_str(&text).unwrap()
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        loop {
            let message = self.next().await;
            if message["id"] == id && message.get("method").is_none() {
                return message["result"].clone();
            }
        }
    }

    async fn close(mut self) {
        let _ = self.send("shutdown", json!({})).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}

/// One subscribed session.
async fn session(bench: &Bench, websocket: bool) -> (Sdk, String) {
    let mut sdk = Sdk::spawn(bench, websocket).await;
    let session = sdk.call("session/new", json!({"cwd": bench.cwd})).await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    sdk.call("session/subscribe", json!({"sessionId": session}))
        .await;
    (sdk, session)
}

/// Reads notices until the session is idle; calls `each` with every item
/// and when it was read.
async fn until_idle(sdk: &mut Sdk, mut each: impl FnMut(&Value, Instant)) {
    loop {
        let message = sdk.next().await;
        let item = &message["params"]["result"];
        let now = Instant::now();
        each(item, now);
        if item["kind"] == "status" && item["status"] == "idle" && item.get("stopReason").is_some()
        {
            return;
        }
    }
}

pub async fn rows(bench: &Bench) {
    for websocket in [false, true] {
        latency(bench, websocket).await;
    }
    cost(bench).await;
    run_start_to_exit(bench).await;
}

/// The mock's first SSE event → the first `delta` read by the client, and
/// its last → the `turn/end` event read (one clock: the mock runs here).
async fn latency(bench: &Bench, websocket: bool) {
    let (mut sdk, session) = session(bench, websocket).await;
    let (mut first, mut last) = (Vec::new(), Vec::new());
    for _ in 0..30 {
        bench.mock.push_json(
            json!({"chunks":[{"text":"first"},{"text":" second"}],"finish":"stop","pace_us":5000}),
        );
        let before = bench.mock.emissions().len();
        sdk.call(
            "session/prompt",
            json!({"sessionId": session, "text": "go"}),
        )
        .await;
        let (mut first_delta, mut turn_end) = (None, None);
        until_idle(&mut sdk, |item, at| {
            if item["kind"] == "delta" {
                first_delta.get_or_insert(at);
            } else if item["kind"] == "event" && item["event"]["type"] == "turn/end" {
                turn_end = Some(at);
            }
        })
        .await;
        // The mock notes its emission once its writer thread is done.
        while bench.mock.emissions().len() == before {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let (sent_first, sent_last) = bench.mock.emissions()[before];
        first.push(
            first_delta
                .unwrap()
                .duration_since(sent_first)
                .as_secs_f64()
                * 1000.0,
        );
        last.push(turn_end.unwrap().duration_since(sent_last).as_secs_f64() * 1000.0);
    }
    let max = |values: &[f64]| values.iter().cloned().fold(0.0, f64::max);
    let transport = if websocket { "WebSocket" } else { "stdio" };
    row(
        &format!("dsh sdk over {transport}: first SSE event → first delta (median of 30)"),
        "≤ 2 ms",
        format!("{:.2} ms (max {:.2})", median(first.clone()), max(&first)),
    );
    row(
        &format!("dsh sdk over {transport}: last SSE event → turn/end event (median of 30)"),
        "—",
        format!("{:.2} ms (max {:.2})", median(last.clone()), max(&last)),
    );
    sdk.close().await;
}

/// CPU per streamed chunk over WebSocket (2,000 × 4-char chunks, paced
/// ~50 µs, one subscriber), as the ACP row measures it.
async fn cost(bench: &Bench) {
    const CHUNKS: usize = 2_000;
    let (mut sdk, session) = session(bench, true).await;
    let pid = sdk.child.id().unwrap();
    let mut samples = Vec::new();
    for _ in 0..5 {
        bench.mock.push_json(json!({
            "repeat":{"text":"tok ","count":CHUNKS},
            "finish":"stop",
            "usage":{"prompt_tokens":10,"completion_tokens":CHUNKS},
            "pace_us": 50
        }));
        let cpu = cpu_ns_of(pid);
        sdk.call(
            "session/prompt",
            json!({"sessionId": session, "text": "go"}),
        )
        .await;
        let mut text = 0;
        until_idle(&mut sdk, |item, _| {
            if item["kind"] == "delta" {
                text += item["text"].as_str().map_or(0, str::len);
            }
        })
        .await;
        assert_eq!(text, CHUNKS * 4, "every chunk arrives");
        samples.push((cpu_ns_of(pid) - cpu) as f64 / 1000.0 / CHUNKS as f64);
    }
    row(
        "dsh sdk over WebSocket: 2,000 × 4-char chunks paced ~50 µs (median of 5)",
        "≤ 25 µs CPU/chunk",
        format!("{:.1} µs/chunk", median(samples)),
    );
    sdk.close().await;
}

/// `dsh run` on a one-step scripted task (the replay provider: no network),
/// from spawn to exit.
async fn run_start_to_exit(bench: &Bench) {
    let script = bench.scratch.join("one-step.jsonl");
    std::fs::write(
        &script,
        "{\"chunks\":[{\"text\":\"Done.\"}],\"finish\":\"stop\"}\n",
    )
    .unwrap();
    let mut samples = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        let output = run(&bench.dsh, &bench.home, &bench.cwd, &script).await;
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(output.status.success(), "{output:?}");
        assert_eq!(output.stdout, b"Done.\n");
    }
    let min = samples.iter().cloned().fold(f64::MAX, f64::min);
    row(
        "dsh run, one-step scripted task: spawn → exit (median of 30)",
        "—",
        format!("{:.2} ms (min {:.2})", median(samples), min),
    );
}

async fn run(dsh: &Path, home: &Path, cwd: &Path, script: &Path) -> std::process::Output {
    tokio::process::Command::new(dsh)
        .args(["run", "say done"])
        .current_dir(cwd)
        .env("DSH_HOME", home)
        .env("DSH_PROVIDER", "replay")
        .env("DSH_REPLAY_FILE", script)
        .env("DSH_LOG", "error")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap()
}
