//! Test harness: a scratch `$DSH_HOME` and workspace, the mock model, the
//! built `dsh acp` driven through the SDK's client side, and a recorder that
//! validates every frame dsh writes against the vendored ACP v1 schema.
//!
//! What does not need the binary's path or the ACP crate lives in the
//! `dsh-test-support` crate (`tests/support/`) and is re-exported here:
//! the mock model and its script entries, `/proc` helpers, the schema
//! validation, `Raw`, the `dsh sdk` client. Here stays what needs
//! `env!("CARGO_BIN_EXE_dsh")` (`DSH`, `TestEnv`, the fixture binaries) or
//! names `agent_client_protocol` (`ClientSim`, `Conn`: `tests/tidy.rs`
//! keeps that crate in `tests/e2e/` and `acp-server/src/acp/`).
#![allow(dead_code)]

pub mod client_sim;

pub use client_sim::{Answer, ClientSim, Elicit};
pub use dsh_test_support::mock_model::{call, calls, reply, MockModel};
pub use dsh_test_support::procs::{self, peak_rss, pid_alive, rss};
pub use dsh_test_support::raw::Raw;
pub use dsh_test_support::schema::{validate_exchange, validate_frames};
pub use dsh_test_support::sdk_client;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, CreateTerminalRequest, InitializeRequest, KillTerminalRequest, NewSessionRequest,
    NewSessionResponse, PromptRequest, PromptResponse, ReadTextFileRequest, ReleaseTerminalRequest,
    RequestPermissionRequest, SessionId, SessionNotification, SessionUpdate, TerminalOutputRequest,
    TextContent, WaitForTerminalExitRequest, WriteTextFileRequest,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent, Client, Lines};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

pub const DSH: &str = env!("CARGO_BIN_EXE_dsh");

/// Frames dsh wrote to stdout, and the updates the client received.
#[derive(Default)]
pub struct Recorded {
    pub frames: Vec<String>,
    pub sent: Vec<String>,
    pub updates: Vec<SessionNotification>,
    /// `available_commands_update`s, kept apart: they come once per
    /// session open, between the answer and anything else.
    pub commands: Vec<SessionNotification>,
}

/// The deterministic test language server, built on first use.
pub fn test_lsp_binary() -> PathBuf {
    fixture_binary("dsh-test-lsp")
}

/// The fixture MCP server (rmcp's server side), built on first use.
pub fn test_mcp_binary() -> PathBuf {
    fixture_binary("dsh-test-mcp")
}

/// A fixture package's binary (named like the package). The first call
/// brings both fixtures up to date in one cargo run (a no-op after
/// `.ci/run` built them), so tests do not queue on cargo's lock.
fn fixture_binary(package: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            // Only the fixtures: building `dsh` here would relink the binary
            // other tests are running. The same selection as `.ci/run`'s
            // pre-build, so the features unify alike and it is a no-op there.
            .args([
                "build",
                "--quiet",
                "-p",
                "dsh-test-lsp",
                "-p",
                "dsh-test-mcp",
            ])
            .current_dir(&workspace)
            .status()
            .expect("run cargo build for the fixtures");
        assert!(status.success(), "building the fixture servers failed");
    });
    let path = Path::new(DSH).with_file_name(package);
    assert!(path.exists(), "{} missing after build", path.display());
    path
}

/// Processes of the test language server whose cwd is `root`.
pub fn test_lsp_pids(root: &Path) -> Vec<u32> {
    procs::live_pids("dsh-test-lsp", root)
}

/// One test's world: a home, a workspace and a mock model.
pub struct TestEnv {
    pub home: tempfile::TempDir,
    pub workspace: tempfile::TempDir,
    pub mock: MockModel,
    pub api_key: Option<String>,
    pub extra_env: Vec<(String, String)>,
}

impl TestEnv {
    /// A fresh environment with fast retry/timeout settings.
    pub async fn new() -> TestEnv {
        Self::with_config("").await
    }

    /// A fresh environment; `extra` is appended to the `[provider]` table of
    /// config.toml, or may add other tables after it.
    pub async fn with_config(extra: &str) -> TestEnv {
        Self::build(600, 5000, extra).await
    }

    /// Generous stream and request timeouts, for tests that load the
    /// machine (the 600 ms idle timeout is for the tests that test it).
    pub async fn relaxed() -> TestEnv {
        Self::build(30_000, 30_000, "").await
    }

    async fn build(idle_ms: u64, request_ms: u64, extra: &str) -> TestEnv {
        let home = tempfile::tempdir().expect("tempdir");
        let workspace = tempfile::tempdir().expect("tempdir");
        std::fs::write(workspace.path().join("hello.txt"), "hello\n").unwrap();
        // Titles from the model are off unless a test asks for them: the
        // side request would race the scripted conversation.
        let titles = if extra.contains("[titles]") {
            ""
        } else {
            "[titles]\nfrom_model = false\n"
        };
        // So is the time context: it would change every prompt a test
        // checks (`tests/e2e/reminders.rs` tests it).
        let time = if extra.contains("[time]") {
            ""
        } else {
            "[time]\nenabled = false\n"
        };
        let config = format!(
            "{titles}{time}[provider]\nkind = \"deepseek\"\nstream_idle_timeout_ms = {idle_ms}\nrequest_timeout_ms = {request_ms}\nmax_retries = 3\nretry_initial_delay_ms = 10\nretry_max_delay_ms = 300\n{extra}\n"
        );
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        TestEnv {
            home,
            workspace,
            mock: MockModel::start().await,
            api_key: Some("test-key-d5h".into()),
            extra_env: Vec::new(),
        }
    }

    pub fn cwd(&self) -> PathBuf {
        self.workspace.path().to_path_buf()
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.home.path().join("sessions")
    }

    /// The subagents' logs in the store: id and header.
    pub fn subagent_logs(&self) -> Vec<(String, serde_json::Value)> {
        std::fs::read_dir(self.sessions_dir())
            .unwrap()
            .filter_map(|entry| {
                let path = entry.unwrap().path();
                if path.extension()? != "jsonl" {
                    return None;
                }
                let text = std::fs::read_to_string(&path).ok()?;
                let header: serde_json::Value = serde_json::from_str(text.lines().next()?).ok()?;
                header.get("subagent_of")?;
                Some((header["id"].as_str()?.to_owned(), header))
            })
            .collect()
    }

    pub fn log_path(&self, session: &SessionId) -> PathBuf {
        self.sessions_dir().join(format!("{}.jsonl", session.0))
    }

    /// The events of a session log (header excluded).
    pub fn log_events(&self, session: &SessionId) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.log_path(session)).expect("session log");
        text.lines()
            .skip(1)
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// A `dsh acp` command with a clean environment.
    pub fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(DSH);
        command
            .arg("acp")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("DSH_HOME", self.home.path())
            .env("DEEPSEEK_BASE_URL", &self.mock.url)
            .env("DSH_LOG", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(key) = &self.api_key {
            command.env("DEEPSEEK_API_KEY", key);
        }
        for (name, value) in &self.extra_env {
            command.env(name, value);
        }
        command
    }

    /// `dsh ARGS…` (not `acp`) with the same clean environment.
    pub fn dsh(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = self.command();
        let std = command.as_std_mut();
        let program = std.get_program().to_owned();
        let mut fresh = std::process::Command::new(program);
        fresh.args(args).env_clear();
        for (name, value) in std.get_envs() {
            if let Some(value) = value {
                fresh.env(name, value);
            }
        }
        fresh.current_dir(self.cwd());
        let mut command = tokio::process::Command::from(fresh);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// Spawns dsh and connects the SDK client.
    pub async fn connect(&self) -> Conn {
        Conn::spawn(self.command()).await
    }

    /// Spawns dsh and connects a scripted editor.
    pub async fn connect_with(&self, sim: Arc<ClientSim>) -> Conn {
        Conn::spawn_with(self.command(), sim).await
    }
}

impl sdk_client::DshCommand for TestEnv {
    fn dsh(&self, args: &[&str]) -> tokio::process::Command {
        TestEnv::dsh(self, args)
    }
}

/// A connected client.
pub struct Conn {
    pub cx: ConnectionTo<Agent>,
    pub recorded: Arc<Mutex<Recorded>>,
    notify: Arc<tokio::sync::Notify>,
    done: Option<tokio::sync::oneshot::Sender<()>>,
    driver: Option<tokio::task::JoinHandle<()>>,
    pub child: tokio::process::Child,
    pub stderr: Arc<Mutex<String>>,
    pub sim: Arc<ClientSim>,
}

impl Conn {
    /// A prompt sent with `_meta.dsh.delivery = "steer"`.
    pub fn steer(
        &self,
        session: &SessionId,
        text: &str,
    ) -> agent_client_protocol::SentRequest<PromptResponse, agent_client_protocol::V1> {
        let serde_json::Value::Object(meta) = serde_json::json!({"dsh": {"delivery": "steer"}})
        else {
            unreachable!()
        };
        self.cx.send_request(
            PromptRequest::new(
                session.clone(),
                vec![ContentBlock::Text(TextContent::new(text))],
            )
            .meta(meta),
        )
    }

    pub async fn spawn(command: tokio::process::Command) -> Conn {
        Self::spawn_with(command, Arc::new(ClientSim::default())).await
    }

    pub async fn spawn_with(mut command: tokio::process::Command, sim: Arc<ClientSim>) -> Conn {
        let mut child = command.spawn().expect("spawn dsh");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr_pipe = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        tokio::spawn({
            let stderr = stderr.clone();
            async move {
                let mut lines = BufReader::new(stderr_pipe).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let mut text = stderr.lock().unwrap();
                    text.push_str(&line);
                    text.push('\n');
                }
            }
        });
        let recorded = Arc::new(Mutex::new(Recorded::default()));
        let notify = Arc::new(tokio::sync::Notify::new());

        let incoming = {
            let recorded = recorded.clone();
            futures::stream::unfold(BufReader::new(stdout).lines(), move |mut lines| {
                let recorded = recorded.clone();
                async move {
                    match lines.next_line().await {
                        Ok(Some(line)) => {
                            recorded.lock().unwrap().frames.push(line.clone());
                            Some((Ok(line), lines))
                        }
                        Ok(None) => None,
                        Err(err) => Some((Err(err), lines)),
                    }
                }
            })
        };
        let outgoing = futures::sink::unfold(
            (stdin, recorded.clone()),
            async |(mut stdin, recorded), line: String| {
                recorded.lock().unwrap().sent.push(line.clone());
                stdin.write_all(line.as_bytes()).await?;
                stdin.write_all(b"\n").await?;
                stdin.flush().await?;
                Ok::<_, std::io::Error>((stdin, recorded))
            },
        );
        let transport = Lines::new(Box::pin(outgoing), Box::pin(incoming));

        let (cx_tx, cx_rx) = tokio::sync::oneshot::channel();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let driver = tokio::spawn({
            let recorded = recorded.clone();
            let notify = notify.clone();
            let s9 = sim.clone();
            let (s1, s2, s3, s4, s5, s6, s7, s8) = (
                sim.clone(),
                sim.clone(),
                sim.clone(),
                sim.clone(),
                sim.clone(),
                sim.clone(),
                sim.clone(),
                sim.clone(),
            );
            async move {
                let result = Client
                    .v1()
                    .on_receive_request(
                        async move |r: RequestPermissionRequest, responder, cx| {
                            s1.on_permission(r, responder, cx)
                        },
                        agent_client_protocol::on_receive_request!(),
                    )
                    .on_receive_request(
                        async move |r: ReadTextFileRequest, responder, _cx| {
                            s2.on_read(r, responder)
                        },
                        agent_client_protocol::on_receive_request!(),
                    )
                    .on_receive_request(
                        async move |r: WriteTextFileRequest, responder, _cx| {
                            s3.on_write(r, responder)
                        },
                        agent_client_protocol::on_receive_request!(),
                    )
                    .on_receive_request(
                        async move |r: CreateTerminalRequest, responder, _cx| {
                            s4.on_create_terminal(r, responder)
                        },
                        agent_client_protocol::on_receive_request!(),
                    )
                    .on_receive_request(
                        async move |r: WaitForTerminalExitRequest, responder, cx| {
                            s5.on_wait(r, responder, cx)
                        },
                        agent_client_protocol::on_receive_request!(),
                    )
                    .on_receive_request(
                        async move |r: KillTerminalRequest, responder, _cx| {
                            s6.on_kill(r, responder)
                        },
                        agent_client_protocol::on_receive_request!(),
                    )
                    .on_receive_request(
                        async move |r: TerminalOutputRequest, responder, _cx| {
                            s7.on_output(r, responder)
                        },
                        agent_client_protocol::on_receive_request!(),
                    )
                    .on_receive_request(
                        async move |r: ReleaseTerminalRequest, responder, _cx| {
                            s8.on_release(r, responder)
                        },
                        agent_client_protocol::on_receive_request!(),
                    )
                    .on_receive_request(
                        async move |r: agent_client_protocol::v1::schema::CreateElicitationRequest,
                                    responder,
                                    _cx| { s9.on_elicitation(r, responder) },
                        agent_client_protocol::on_receive_request!(),
                    )
                    .on_receive_notification(
                        async move |notification: SessionNotification, _cx| {
                            let mut recorded = recorded.lock().unwrap();
                            if matches!(
                                notification.update,
                                SessionUpdate::AvailableCommandsUpdate(_)
                            ) {
                                recorded.commands.push(notification);
                            } else {
                                recorded.updates.push(notification);
                            }
                            drop(recorded);
                            notify.notify_waiters();
                            Ok(())
                        },
                        agent_client_protocol::on_receive_notification!(),
                    )
                    .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                        let _ = cx_tx.send(cx);
                        let _ = done_rx.await;
                        Ok(())
                    })
                    .await;
                if let Err(err) = result {
                    eprintln!("client connection ended: {err:?}");
                }
            }
        });
        let cx = cx_rx.await.expect("client connected");
        Conn {
            cx,
            recorded,
            notify,
            done: Some(done_tx),
            driver: Some(driver),
            child,
            stderr,
            sim,
        }
    }

    pub async fn initialize(&self) -> agent_client_protocol::v1::schema::InitializeResponse {
        self.cx
            .send_request(
                InitializeRequest::new(ProtocolVersion::V1)
                    .client_capabilities(self.sim.capabilities()),
            )
            .block_task()
            .await
            .expect("initialize")
    }

    pub async fn new_session(&self, cwd: &Path) -> NewSessionResponse {
        self.cx
            .send_request(NewSessionRequest::new(cwd))
            .block_task()
            .await
            .expect("session/new")
    }

    /// Initialize plus a new session.
    pub async fn start(&self, cwd: &Path) -> SessionId {
        self.initialize().await;
        self.new_session(cwd).await.session_id
    }

    /// Sets the session's permission mode (the `mode` config option).
    pub async fn set_mode(&self, session: &SessionId, mode: &str) {
        self.set_option(session, "mode", mode).await;
    }

    /// `session/set_config_option` of a select option, expecting success.
    pub async fn set_option(&self, session: &SessionId, option: &str, value: &str) {
        self.cx
            .send_request(
                agent_client_protocol::v1::schema::SetSessionConfigOptionRequest::new(
                    session.clone(),
                    option.to_owned(),
                    agent_client_protocol::v1::schema::SessionConfigOptionValue::from(value),
                ),
            )
            .block_task()
            .await
            .unwrap_or_else(|error| panic!("set {option} to {value}: {error:?}"));
    }

    /// `session/load` (after `initialize`), expecting success.
    pub async fn load(&self, session: &SessionId, cwd: &Path) {
        self.cx
            .send_request(agent_client_protocol::v1::schema::LoadSessionRequest::new(
                session.clone(),
                cwd,
            ))
            .block_task()
            .await
            .expect("session/load");
    }

    /// `initialize`, then `session/new` with these MCP servers.
    pub async fn start_with_mcp(
        &self,
        cwd: &Path,
        servers: Vec<agent_client_protocol::v1::schema::McpServer>,
    ) -> SessionId {
        self.initialize().await;
        self.cx
            .send_request(
                agent_client_protocol::v1::schema::NewSessionRequest::new(cwd).mcp_servers(servers),
            )
            .block_task()
            .await
            .expect("session/new with MCP servers")
            .session_id
    }

    pub async fn prompt(
        &self,
        session: &SessionId,
        text: &str,
    ) -> Result<PromptResponse, agent_client_protocol::Error> {
        self.send_prompt(session, text).block_task().await
    }

    /// Sends a text prompt without waiting for its answer.
    pub fn send_prompt(
        &self,
        session: &SessionId,
        text: &str,
    ) -> agent_client_protocol::SentRequest<PromptResponse, agent_client_protocol::V1> {
        self.cx.send_request(PromptRequest::new(
            session.clone(),
            vec![ContentBlock::Text(TextContent::new(text))],
        ))
    }

    /// `session/cancel`.
    pub fn cancel(&self, session: &SessionId) {
        self.cx
            .send_notification(agent_client_protocol::v1::schema::CancelNotification::new(
                session.clone(),
            ))
            .expect("send session/cancel");
    }

    pub fn updates(&self) -> Vec<SessionNotification> {
        self.recorded.lock().unwrap().updates.clone()
    }

    /// The `available_commands_update`s received.
    pub fn commands(&self) -> Vec<SessionNotification> {
        self.recorded.lock().unwrap().commands.clone()
    }

    pub fn clear_updates(&self) {
        self.recorded.lock().unwrap().updates.clear();
    }

    /// Waits until `pred` holds over the updates received so far.
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&[SessionNotification]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let notified = self.notify.notified();
            if pred(&self.recorded.lock().unwrap().updates) {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what}; stderr:\n{}",
                    self.stderr.lock().unwrap()
                );
            }
            let _ = tokio::time::timeout(Duration::from_millis(50), notified).await;
        }
    }

    /// Closes stdin, waits for dsh to exit, and validates every frame it
    /// wrote against the ACP schema. Returns the frames.
    pub async fn finish(mut self) -> Vec<String> {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
        if let Some(driver) = self.driver.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), driver).await;
        }
        let status = tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .expect("dsh exits within 5 s of stdin EOF")
            .expect("wait");
        assert!(
            status.success(),
            "dsh exited with {status}; stderr:\n{}",
            self.stderr.lock().unwrap()
        );
        // A panic caught anywhere (a task, a library's thread) is a bug even
        // when the process survives it.
        let stderr = self.stderr.lock().unwrap().clone();
        assert!(
            !stderr.contains("panicked"),
            "a panic in dsh's stderr:\n{stderr}"
        );
        let (sent, frames) = {
            let recorded = self.recorded.lock().unwrap();
            (recorded.sent.clone(), recorded.frames.clone())
        };
        let violations = self.sim.violations.lock().unwrap().clone();
        assert!(
            violations.is_empty(),
            "dsh called client methods the client did not advertise: {violations:?}"
        );
        validate_exchange(&sent, &frames);
        frames
    }
}

/// The concatenated text of message (or thought) chunks.
pub fn chunk_text(updates: &[SessionNotification], thoughts: bool) -> String {
    updates
        .iter()
        .filter_map(|n| match (&n.update, thoughts) {
            (SessionUpdate::AgentMessageChunk(chunk), false)
            | (SessionUpdate::AgentThoughtChunk(chunk), true) => match &chunk.content {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// A short name for each update kind, in order.
pub fn kinds(updates: &[SessionNotification]) -> Vec<&'static str> {
    updates
        .iter()
        .map(|n| match &n.update {
            SessionUpdate::UserMessageChunk(_) => "user",
            SessionUpdate::AgentMessageChunk(_) => "message",
            SessionUpdate::AgentThoughtChunk(_) => "thought",
            SessionUpdate::ToolCall(_) => "tool_call",
            SessionUpdate::ToolCallUpdate(_) => "tool_call_update",
            SessionUpdate::Plan(_) => "plan",
            SessionUpdate::UsageUpdate(_) => "usage",
            SessionUpdate::SessionInfoUpdate(_) => "session_info",
            SessionUpdate::ConfigOptionUpdate(_) => "config",
            _ => "other",
        })
        .collect()
}

/// Collapses runs of the same kind ("thought thought message" → "thought message").
pub fn runs(kinds: &[&'static str]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for kind in kinds {
        if out.last() != Some(kind) {
            out.push(kind);
        }
    }
    out
}

/// What the model was told for a tool call (from the last request).
pub fn tool_result(env: &TestEnv, call_id: &str) -> String {
    env.mock.tool_result(call_id)
}

/// A Rust project in `env`'s workspace whose only `rust-analyzer` is
/// `node_modules/.bin/rust-analyzer`, a shell script from the workspace
/// running `script` (PATH keeps any other out of reach).
pub fn plant_workspace_server(env: &mut TestEnv, script: &str) {
    use std::os::unix::fs::PermissionsExt;
    let root = env.cwd();
    std::fs::write(root.join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
    let bin = root.join("node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    let server = bin.join("rust-analyzer");
    std::fs::write(&server, format!("#!/bin/sh\n{script}")).unwrap();
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
    env.extra_env.push(("PATH".into(), "/usr/bin:/bin".into()));
}

/// The names of the tools a model request offers.
pub fn tool_names(request: &serde_json::Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The text of a model request's message, whatever shape its content has
/// (a string, or parts with text).
pub fn message_text(message: &serde_json::Value) -> String {
    match &message["content"] {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A process's output as text (lossy).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts that a finished process exited with `code`, showing `what` and
/// both of its streams when it did not.
#[track_caller]
pub fn assert_exit(output: &std::process::Output, code: i32, what: &str) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "{what}\nstdout: {}\nstderr: {}",
        text(&output.stdout),
        text(&output.stderr)
    );
}

/// The last line a process wrote on stdout, as JSON (`dsh run --json`'s
/// result object).
#[track_caller]
pub fn last_json(output: &std::process::Output) -> serde_json::Value {
    let stdout = text(&output.stdout);
    let last = stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("nothing on stdout; stderr: {}", text(&output.stderr)));
    serde_json::from_str(last).expect("the last line is JSON")
}

/// The path of the HTTP request on `socket` (its head read to the blank
/// line), or `None` when the client closed first: the test web servers'.
pub async fn http_request_path(socket: &mut tokio::net::TcpStream) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if socket.read(&mut byte).await.unwrap_or(0) == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    Some(head.split(' ').nth(1).unwrap_or("/").to_owned())
}

/// Answers an HTTP request on `socket` with `200 OK` and the plain text
/// `body`, then closes.
pub async fn http_answer_text(socket: &mut tokio::net::TcpStream, body: &str) {
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = socket.write_all(response.as_bytes()).await;
    let _ = socket.shutdown().await;
}
