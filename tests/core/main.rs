//! The middle test layer: the agent core in process — a recording frontend
//! and the scripted model, no child process, no sockets — checked with
//! snapshots; golden files for the log format and the ACP updates; logs
//! from earlier versions; and the ACP server over an in-memory pipe.
// These suites run on Linux, where std's canonicalize is the one (clippy.toml).
#![allow(clippy::disallowed_methods)]
// Unix suites (/proc, sh, process groups); Windows is tested under wine
// by tests/windows.
#![cfg(unix)]

mod acp_duplex;
mod eviction;
mod golden;
mod old_logs;
mod sandbox;
mod turns;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dsh_acp_server::agent::{Agent, Opened};
use dsh_acp_server::config::{Config, RawConfig};
use dsh_acp_server::frontend::{Ask, Frontend, Output};
use dsh_acp_server::model::replay::ReplayProvider;
use dsh_acp_server::model::script::ScriptEntry;
use dsh_acp_server::model::Provider;
use dsh_acp_server::model::ProviderKind;
use dsh_acp_server::permission::{Answer, Question};
use dsh_acp_server::update::AgentUpdate;
use dsh_protocol::log::PermissionOutcome;
use dsh_protocol::tool::{ToolContent, ToolStatus};
use dsh_protocol::SessionId;
use futures::future::BoxFuture;

/// An agent on the scripted model, with a scratch home and workspace.
pub struct World {
    pub home: tempfile::TempDir,
    pub workspace: tempfile::TempDir,
    pub agent: Arc<Agent>,
}

impl World {
    /// The model answers with `script`, one entry per call.
    pub fn new(script: &[serde_json::Value]) -> World {
        Self::with_config("", script)
    }

    /// Same, with extra `config.toml` text.
    pub fn with_config(config: &str, script: &[serde_json::Value]) -> World {
        Self::build(config, script, true)
    }

    /// Commands run without the command guard, so without the kernel
    /// sandbox: a machine whose kernel cannot sandbox them.
    pub fn unguarded(config: &str, script: &[serde_json::Value]) -> World {
        Self::build(config, script, false)
    }

    fn build(config: &str, script: &[serde_json::Value], guard: bool) -> World {
        World::build_with(config, script, guard, |provider| provider)
    }

    /// [`World::build`], with the scripted model changed by `adapt` (an
    /// observer of its requests).
    fn build_with(
        config: &str,
        script: &[serde_json::Value],
        guard: bool,
        adapt: impl FnOnce(ReplayProvider) -> ReplayProvider,
    ) -> World {
        let home = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        std::fs::write(workspace.path().join("hello.txt"), "hello\n").unwrap();
        let mut raw: RawConfig = toml::from_str(config).unwrap();
        // The scripted model needs no key.
        raw.provider.kind = Some(ProviderKind::Replay);
        // No time context unless a test asks: it would change every prompt.
        if !config.contains("[time]") {
            raw.time.enabled = Some(false);
        }
        // Commands run under the guard (and its sandbox) as in dsh itself.
        let mut config = Config::from_raw(raw, home.path().to_path_buf(), &NoEnv).unwrap();
        if guard {
            config = config.with_command_guard(PathBuf::from(env!("CARGO_BIN_EXE_dsh")));
        }
        let entries = script
            .iter()
            .map(|entry| serde_json::from_value::<ScriptEntry>(entry.clone()).unwrap())
            .collect();
        let provider = Provider::Replay(adapt(ReplayProvider::new(entries)));
        World {
            agent: Agent::with_provider(config, provider),
            home,
            workspace,
        }
    }

    pub fn cwd(&self) -> PathBuf {
        self.workspace.path().canonicalize().unwrap()
    }

    /// A new session's id.
    pub async fn session(&self) -> SessionId {
        self.agent
            .new_session(&self.cwd(), &[], Vec::new())
            .await
            .unwrap()
            .session
            .id
            .clone()
    }

    /// Runs one text prompt; the stop reason's name, or the error's code.
    pub async fn prompt(
        &self,
        session: impl AsRef<str>,
        text: &str,
        frontend: &Recorder,
    ) -> String {
        let session = SessionId::new(session.as_ref());
        let ticket = self.agent.begin_prompt(&session).await.unwrap();
        match self
            .agent
            .prompt(
                ticket,
                vec![dsh_protocol::UserContent::text(text)],
                std::sync::Arc::new(frontend.clone()),
            )
            .await
        {
            Ok(stop) => format!("{stop:?}"),
            Err(error) => error.code().to_string(),
        }
    }

    /// Loads a session (stored or live) as `session/load` does: what it
    /// opened and the replay it was shown.
    pub async fn load(&self, session: impl AsRef<str>) -> (Opened, Vec<AgentUpdate>) {
        let recorder = Arc::new(Recorder::default());
        let opened = self
            .agent
            .load_session(
                &SessionId::new(session.as_ref()),
                Vec::new(),
                recorder.clone(),
            )
            .await
            .unwrap();
        (opened, recorder.take())
    }

    /// The session log's event types, in order.
    pub fn log_types(&self, session: impl std::fmt::Display) -> Vec<String> {
        let text = std::fs::read_to_string(
            self.home
                .path()
                .join("sessions")
                .join(format!("{session}.jsonl")),
        )
        .unwrap();
        text.lines()
            .skip(1)
            .map(|line| {
                serde_json::from_str::<serde_json::Value>(line).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }
}

struct NoEnv;
impl dsh_acp_server::credentials::Env for NoEnv {
    fn var(&self, _name: &str) -> Option<String> {
        None
    }
}

/// A frontend that records what it is shown and answers permission prompts
/// from a queue (unavailable when it runs out: fail closed).
/// Cheap to clone: a prompt holds one (it may outlive the turn).
#[derive(Default, Clone)]
pub struct Recorder(std::sync::Arc<Recorded>);

#[derive(Default)]
pub struct Recorded {
    pub updates: Mutex<Vec<AgentUpdate>>,
    pub answers: Mutex<VecDeque<PermissionOutcome>>,
    pub asked: Mutex<Vec<Ask>>,
}

impl std::ops::Deref for Recorder {
    type Target = Recorded;
    fn deref(&self) -> &Recorded {
        &self.0
    }
}

impl Recorder {
    pub fn answering(answers: &[PermissionOutcome]) -> Recorder {
        Recorder(std::sync::Arc::new(Recorded {
            answers: Mutex::new(answers.iter().copied().collect()),
            ..Recorded::default()
        }))
    }

    pub fn take(&self) -> Vec<AgentUpdate> {
        std::mem::take(&mut *self.updates.lock().unwrap())
    }
}

impl Frontend for Recorder {
    fn emit(&self, output: Output<'_>) {
        self.updates.lock().unwrap().extend(output.into_updates());
    }

    fn ask(&self, ask: Ask) -> BoxFuture<'_, Answer> {
        let permission = matches!(ask.question, Question::Permission(_));
        self.asked.lock().unwrap().push(ask);
        let answer = match self.answers.lock().unwrap().pop_front() {
            Some(outcome) if permission => Answer::from(outcome),
            Some(PermissionOutcome::Cancelled) => Answer::Cancelled,
            _ => Answer::Unavailable,
        };
        Box::pin(async move { answer })
    }
}

/// Consecutive text chunks of the same kind as one (how a client shows
/// them), and the transient updates left out: what replay must equal.
pub fn settled(updates: &[AgentUpdate]) -> Vec<AgentUpdate> {
    let mut out: Vec<AgentUpdate> = Vec::new();
    for update in updates {
        match (out.last_mut(), update) {
            (Some(AgentUpdate::MessageChunk(text, _)), AgentUpdate::MessageChunk(more, _))
            | (Some(AgentUpdate::ThoughtChunk(text, _)), AgentUpdate::ThoughtChunk(more, _)) => {
                text.push_str(more)
            }
            (
                _,
                AgentUpdate::ToolCallUpdate {
                    status: ToolStatus::InProgress,
                    ..
                },
            ) => {}
            _ => out.push(update.clone()),
        }
    }
    out
}

/// [`settled`], as a replay shows it: the context use once, at the end
/// (a usage update says what the context holds now; only the last is news).
pub fn as_replayed(updates: &[AgentUpdate]) -> Vec<AgentUpdate> {
    let usage = |update: &AgentUpdate| matches!(update, AgentUpdate::Usage { .. });
    let mut out = settled(updates);
    let last = out.iter().rfind(|update| usage(update)).cloned();
    out.retain(|update| !usage(update));
    out.extend(last);
    out
}

/// One line per update, paths inside `root` shown as `$WS`, for snapshots.
pub fn render(updates: &[AgentUpdate], root: &Path) -> String {
    let root = root.display().to_string();
    let short = |text: &str| {
        let text = text.replace(&root, "$WS");
        let text = text.replace('\n', "⏎");
        if text.chars().count() > 70 {
            format!("{}…", text.chars().take(70).collect::<String>())
        } else {
            text
        }
    };
    let mut lines = Vec::new();
    for update in updates {
        lines.push(match update {
            AgentUpdate::UserChunk(content) => format!("user {:?}", short(&format!("{content:?}"))),
            AgentUpdate::MessageChunk(text, _) => format!("message {:?}", short(text)),
            AgentUpdate::ThoughtChunk(text, _) => format!("thought {:?}", short(text)),
            AgentUpdate::Usage { used, size, .. } => format!("usage {used}/{size}"),
            AgentUpdate::Title(title, _) => format!("title {title:?}"),
            AgentUpdate::Commands(commands) => format!(
                "commands {}",
                commands
                    .iter()
                    .map(|c| format!("/{}", c.name))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            AgentUpdate::ToolCall {
                call_id,
                view,
                status,
                ..
            } => format!(
                "tool_call {call_id} {status:?} {:?}{}",
                short(&view.title),
                view.locations
                    .iter()
                    .map(|l| format!(" @{}:{}", short(&l.path), l.line.unwrap_or(0)))
                    .collect::<String>()
            ),
            AgentUpdate::ToolCallUpdate {
                call_id,
                status,
                view,
                ..
            } => format!(
                "tool_call_update {call_id} {status:?}{}",
                view.content
                    .iter()
                    .map(|content| match content {
                        ToolContent::Text { text } => format!(" text({:?})", short(text)),
                        ToolContent::Diff(diff) => format!(
                            " diff({}, {} → {} bytes)",
                            short(&diff.path),
                            diff.old_text.as_ref().map_or(0, String::len),
                            diff.new_text.len()
                        ),
                        ToolContent::Terminal { terminal_id } =>
                            format!(" terminal({terminal_id})"),
                        other => format!(" {other:?}"),
                    })
                    .collect::<String>()
            ),
            AgentUpdate::Plan(entries) => format!(
                "plan [{}]",
                entries
                    .iter()
                    .map(|e| format!("{:?} {}", e.status, e.content))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            AgentUpdate::ConfigOptions(options) => format!(
                "config_options {}",
                options
                    .iter()
                    .map(|o| format!("{}={}", o.key.as_str(), o.current))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            AgentUpdate::Mode(mode) => format!("mode {}", mode.as_str()),
        });
    }
    lines.join("\n") + "\n"
}
