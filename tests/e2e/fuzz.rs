//! Protocol fuzzing of the ACP input side with a fixed budget: generated
//! frames (malformed JSON, wrong types, missing fields, huge strings and
//! ids, unknown methods, responses to requests never sent, interleaved
//! cancels, batches, invalid UTF-8) go to one dsh process. It must never
//! panic or exit, must answer every request-shaped frame, and must then hold
//! a normal conversation.
//!
//! The generator is proptest's, seeded: the same frames every run. Set
//! `DSH_FUZZ_SEED` (a number) and `DSH_FUZZ_FRAMES` to explore further.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::{reply, validate_exchange, TestEnv};

const METHODS: &[&str] = &[
    "initialize",
    "authenticate",
    "logout",
    "session/new",
    "session/load",
    "session/list",
    "session/resume",
    "session/close",
    "session/delete",
    "session/prompt",
    "session/cancel",
    "session/set_mode",
    "session/set_config_option",
    "session/set_model",
    "$/cancel_request",
    "fs/read_text_file",
    "terminal/create",
    "session/update",
    "",
    "session/",
    "SESSION/NEW",
];

/// Field names the generator mixes into objects. Never `command`, `args` or
/// `url`: a fuzzed MCP server must not start a real program.
const KEYS: &[&str] = &[
    "sessionId",
    "cwd",
    "mcpServers",
    "prompt",
    "protocolVersion",
    "clientCapabilities",
    "configId",
    "value",
    "modeId",
    "cursor",
    "methodId",
    "requestId",
    "additionalDirectories",
    "type",
    "text",
    "name",
    "_meta",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => Just(Value::Null),
        4 => any::<bool>().prop_map(Value::from),
        4 => any::<i64>().prop_map(Value::from),
        2 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        6 => prop::collection::vec(any::<char>(), 0..24)
            .prop_map(|chars| Value::from(chars.into_iter().collect::<String>())),
        2 => prop::sample::select(KEYS).prop_map(Value::from),
        1 => (1usize..300_000).prop_map(|n| Value::from("\u{00e9}x".repeat(n / 3))),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => prop::collection::vec(any::<char>(), 0..10)
            .prop_map(|chars| chars.into_iter().collect::<String>())
            .prop_filter("no spawning keys", |k| !["command", "args", "url"].contains(&k.as_str())),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Valid params for a method, as a starting point for mutations.
fn template(method: &str, cwd: &str) -> Value {
    match method {
        "initialize" => json!({"protocolVersion": 1, "clientCapabilities": {}}),
        "authenticate" => json!({"methodId": "deepseek-api-key"}),
        "session/new" => json!({"cwd": cwd, "mcpServers": []}),
        "session/load" | "session/resume" => {
            json!({"sessionId": "0b5c0d9e-0000-4000-8000-000000000000", "cwd": cwd, "mcpServers": []})
        }
        "session/list" => json!({"cwd": cwd}),
        "session/prompt" => {
            json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]})
        }
        "session/set_config_option" => {
            json!({"sessionId": "nope", "configId": "mode", "value": "ask"})
        }
        "session/set_mode" => json!({"sessionId": "nope", "modeId": "ask"}),
        "$/cancel_request" => json!({"requestId": 1}),
        _ => json!({"sessionId": "nope"}),
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Keep,
    Drop(usize),
    Replace(usize, Value),
    Add(String, Value),
    Whole(Value),
    Omit,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => Just(Mutation::Keep),
        2 => any::<usize>().prop_map(Mutation::Drop),
        4 => (any::<usize>(), value()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        2 => (key(), value()).prop_map(|(k, v)| Mutation::Add(k, v)),
        2 => value().prop_map(Mutation::Whole),
        1 => Just(Mutation::Omit),
    ]
}

fn mutate(params: Value, mutation: &Mutation) -> Option<Value> {
    let Value::Object(mut map) = params else {
        return Some(params);
    };
    let keys: Vec<String> = map.keys().cloned().collect();
    match mutation {
        Mutation::Keep => {}
        Mutation::Drop(i) if !keys.is_empty() => {
            map.remove(&keys[i % keys.len()]);
        }
        Mutation::Replace(i, v) if !keys.is_empty() => {
            map.insert(keys[i % keys.len()].clone(), v.clone());
        }
        Mutation::Add(k, v) => {
            map.insert(k.clone(), v.clone());
        }
        Mutation::Whole(v) => return Some(v.clone()),
        Mutation::Omit => return None,
        _ => {}
    }
    Some(Value::Object(map))
}

#[derive(Debug, Clone)]
enum IdStyle {
    Small,
    Text,
    Huge,
    Extreme,
    Negative,
}

#[derive(Debug, Clone)]
enum Frame {
    Request(String, Mutation, IdStyle),
    Notification(String, Mutation),
    /// A response to a request dsh never sent.
    Response(Value, Value),
    /// The cancel of an earlier request (`$/cancel_request`) or session.
    Cancel(bool),
    /// Bytes that are not a valid frame: garbage, invalid UTF-8, a cut JSON.
    Bytes(Vec<u8>),
    Truncated(String, usize),
    Batch,
    Scalar(Value),
}

fn frame() -> impl Strategy<Value = Frame> {
    let method = prop_oneof![
        8 => prop::sample::select(METHODS).prop_map(str::to_owned),
        1 => prop::collection::vec(any::<char>(), 0..16)
            .prop_map(|chars| chars.into_iter().collect::<String>()),
    ];
    let id_style = prop_oneof![
        4 => Just(IdStyle::Small),
        2 => Just(IdStyle::Text),
        1 => Just(IdStyle::Huge),
        1 => Just(IdStyle::Extreme),
        1 => Just(IdStyle::Negative),
    ];
    prop_oneof![
        10 => (method.clone(), mutation(), id_style).prop_map(|(m, x, s)| Frame::Request(m, x, s)),
        3 => (method.clone(), mutation()).prop_map(|(m, x)| Frame::Notification(m, x)),
        2 => (value(), value()).prop_map(|(id, body)| Frame::Response(id, body)),
        2 => any::<bool>().prop_map(Frame::Cancel),
        2 => prop::collection::vec(any::<u8>(), 0..300).prop_map(Frame::Bytes),
        2 => (method, any::<usize>()).prop_map(|(m, cut)| Frame::Truncated(m, cut)),
        1 => Just(Frame::Batch),
        1 => leaf().prop_map(Frame::Scalar),
    ]
}

/// Serializes a frame; returns its bytes and, for a request-shaped frame,
/// the id dsh must answer.
fn render(frame: &Frame, index: usize, cwd: &str) -> (Vec<u8>, Option<Value>) {
    let id = |style: &IdStyle| match style {
        IdStyle::Small => json!(index),
        IdStyle::Text => json!(format!("req-{index}")),
        IdStyle::Huge => json!(format!("{index}-{}", "i".repeat(100_000))),
        IdStyle::Extreme => json!(i64::MAX - index as i64),
        IdStyle::Negative => json!(-(index as i64) - 1),
    };
    let envelope = |method: &str, params: Option<Value>, id: Option<Value>| {
        let mut map = Map::new();
        map.insert("jsonrpc".into(), json!("2.0"));
        if let Some(id) = id {
            map.insert("id".into(), id);
        }
        map.insert("method".into(), json!(method));
        if let Some(params) = params {
            map.insert("params".into(), params);
        }
        Value::Object(map)
    };
    let line = |value: &Value| {
        let mut bytes = serde_json::to_vec(value).unwrap();
        bytes.push(b'\n');
        bytes
    };
    match frame {
        Frame::Request(method, mutation, style) => {
            let id = id(style);
            let value = envelope(
                method,
                mutate(template(method, cwd), mutation),
                Some(id.clone()),
            );
            (line(&value), Some(id))
        }
        Frame::Notification(method, mutation) => {
            let value = envelope(method, mutate(template(method, cwd), mutation), None);
            (line(&value), None)
        }
        Frame::Response(id, body) => {
            let value = json!({"jsonrpc": "2.0", "id": id, "result": body});
            (line(&value), None)
        }
        Frame::Cancel(request) => {
            let value = if *request {
                envelope(
                    "$/cancel_request",
                    Some(json!({"requestId": index.saturating_sub(1)})),
                    None,
                )
            } else {
                envelope("session/cancel", Some(json!({"sessionId": "nope"})), None)
            };
            (line(&value), None)
        }
        Frame::Bytes(bytes) => {
            let mut bytes: Vec<u8> = bytes
                .iter()
                .map(|b| if *b == b'\n' { b' ' } else { *b })
                .collect();
            bytes.push(b'\n');
            (bytes, None)
        }
        Frame::Truncated(method, cut) => {
            let value = envelope(method, Some(template(method, cwd)), Some(json!(index)));
            let text = serde_json::to_vec(&value).unwrap();
            let mut bytes = text[..cut % text.len()].to_vec();
            bytes.push(b'\n');
            (bytes, None)
        }
        Frame::Batch => {
            let value = json!([envelope(
                "session/list",
                Some(json!({})),
                Some(json!(index))
            )]);
            (line(&value), None)
        }
        Frame::Scalar(value) => (line(value), None),
    }
}

struct Child {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    frames: Arc<Mutex<Vec<String>>>,
    /// Responses (frames without a method), parsed once.
    answers: Arc<Mutex<Vec<Value>>>,
    stderr: Arc<Mutex<String>>,
    sent: Vec<String>,
}

impl Child {
    fn spawn(env: &TestEnv) -> Child {
        let mut command = env.command();
        command
            .env("DSH_MAX_FRAME_BYTES", "1000000")
            .env("DSH_LOG", "info");
        let mut child = command.spawn().expect("spawn dsh");
        let stdin = child.stdin.take().unwrap();
        let frames = Arc::new(Mutex::new(Vec::new()));
        let answers = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (sink, answer_sink) = (frames.clone(), answers.clone());
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    if value.get("method").is_none() {
                        answer_sink.lock().unwrap().push(value);
                    }
                }
                sink.lock().unwrap().push(line);
            }
        });
        let mut errors = BufReader::new(child.stderr.take().unwrap()).lines();
        let sink = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = errors.next_line().await {
                let mut text = sink.lock().unwrap();
                if text.len() < 4_000_000 {
                    text.push_str(&line);
                    text.push('\n');
                }
            }
        });
        Child {
            child,
            stdin,
            frames,
            answers,
            stderr,
            sent: Vec::new(),
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.sent
            .extend(String::from_utf8_lossy(bytes).lines().map(str::to_owned));
        self.stdin
            .write_all(bytes)
            .await
            .expect("dsh stopped reading");
    }

    fn answered(&self) -> Vec<Value> {
        self.answers.lock().unwrap().clone()
    }

    async fn wait_for(&self, what: &str, pred: impl Fn(&[Value]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if pred(&self.answers.lock().unwrap()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; stderr tail:\n{}",
                tail(&self.stderr.lock().unwrap())
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn response(&self, id: &Value) -> Option<Value> {
        self.answered()
            .into_iter()
            .find(|v| v.get("id") == Some(id))
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test]
async fn fuzzed_frames_never_kill_the_process_and_every_request_is_answered() {
    let seed = env_number("DSH_FUZZ_SEED", 0x5eed_d5b0);
    let rounds = 3;
    let per_round = env_number("DSH_FUZZ_FRAMES", 250) as usize;
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let strategy = frame();
    let started = Instant::now();
    let mut total = 0;
    let mut requests = 0;

    for round in 0..rounds {
        let env = TestEnv::relaxed().await;
        env.mock.push_json(reply("still fine"));
        let cwd = env.cwd().display().to_string();
        let mut dsh = Child::spawn(&env);
        // Round 0 fuzzes the uninitialized connection too.
        if round > 0 {
            dsh.send(b"{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
                .await;
        }
        let mut expected = Vec::new();
        for index in 0..per_round {
            let frame = strategy.new_tree(&mut runner).unwrap().current();
            let (bytes, id) = render(&frame, index + 1, &cwd);
            dsh.send(&bytes).await;
            if let Some(id) = id {
                expected.push(id);
            }
            total += 1;
        }
        requests += expected.len();
        // Every request-shaped frame gets exactly one answer.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let answered: BTreeSet<String> = dsh
                .answers
                .lock()
                .unwrap()
                .iter()
                .filter_map(|v| v.get("id").map(|id| id.to_string()))
                .collect();
            let missing: Vec<String> = expected
                .iter()
                .map(|id| id.to_string())
                .filter(|id| !answered.contains(id))
                .map(|id| id.chars().take(40).collect())
                .collect();
            if missing.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                let sent: Vec<String> = dsh
                    .sent
                    .iter()
                    .filter(|line| {
                        missing
                            .iter()
                            .any(|id| line.contains(&format!("\"id\":{id}")))
                    })
                    .map(|line| line.chars().take(300).collect())
                    .collect();
                panic!(
                    "round {round}: no answer to {missing:?}; the frames:\n{}",
                    sent.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Errors stay small: a huge bad request is not echoed back (only its
        // id, which the answer must carry).
        for answer in dsh.answered() {
            if answer.get("error").is_some() {
                let size = answer.to_string().len() - answer["id"].to_string().len();
                assert!(size < 32 * 1024, "a {size}-byte error answer");
            }
        }
        let mut counts = std::collections::HashMap::new();
        for answer in dsh.answered() {
            *counts.entry(answer["id"].to_string()).or_insert(0) += 1;
        }
        for id in &expected {
            let count = counts[&id.to_string()];
            assert_eq!(count, 1, "request {id} answered {count} times");
        }

        // Then a normal conversation works on the same process.
        dsh.send(b"{\"jsonrpc\":\"2.0\",\"id\":\"v-init\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n").await;
        let new = json!({"jsonrpc":"2.0","id":"v-new","method":"session/new","params":{"cwd": cwd, "mcpServers": []}});
        dsh.send(format!("{new}\n").as_bytes()).await;
        let new_id = json!("v-new");
        dsh.wait_for("the valid session/new", |frames| {
            frames.iter().any(|v| v.get("id") == Some(&new_id))
        })
        .await;
        let answer = dsh.response(&new_id).unwrap();
        let session = answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new failed after fuzzing: {answer}"))
            .to_owned();
        let prompt = json!({"jsonrpc":"2.0","id":"v-prompt","method":"session/prompt","params":{"sessionId": session, "prompt":[{"type":"text","text":"are you ok?"}]}});
        dsh.send(format!("{prompt}\n").as_bytes()).await;
        let prompt_id = json!("v-prompt");
        dsh.wait_for("the valid prompt", |frames| {
            frames.iter().any(|v| v.get("id") == Some(&prompt_id))
        })
        .await;
        let answer = dsh.response(&prompt_id).unwrap();
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

        // EOF: a clean exit, no panic anywhere, every frame valid ACP.
        let Child {
            mut child,
            stdin,
            frames,
            stderr,
            sent,
            ..
        } = dsh;
        drop(stdin);
        let status = tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .expect("dsh exits on EOF")
            .unwrap();
        assert!(status.success(), "dsh exited with {status}");
        let stderr = stderr.lock().unwrap().clone();
        assert!(
            !stderr.contains("panicked"),
            "a panic in round {round}:\n{}",
            tail(&stderr)
        );
        let frames = frames.lock().unwrap().clone();
        validate_exchange(&sent, &frames);
    }
    eprintln!(
        "fuzz: seed {seed:#x}, {total} frames ({requests} requests) in {:?}",
        started.elapsed()
    );
}
