//! The agent core: sessions, their logs, settings and prompts. Front ends
//! (the ACP adapter, tests, a headless runner) call [`Agent`] and receive
//! [`AgentUpdate`]s through an [`UpdateSink`]; nothing here knows ACP.
//!
//! Concurrency: each session has a turn lock (one prompt at a time; a second
//! prompt is refused with `session.busy`) and a cancellation token per turn,
//! a child of the agent's shutdown token.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::UNIX_EPOCH;

use base64::Engine as _;
use dsh_protocol::log::{derive_history, Event, EventData, PlanEntry, SessionHeader};
use dsh_protocol::model::Usage;
use dsh_protocol::tool::{ToolStatus, ToolView};
use dsh_protocol::UserContent;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ProviderKind, ThoughtLevel};
use crate::error::AgentError;
use crate::model::replay::ReplayProvider;
use crate::model::Provider;
use crate::permission::{self, Access, Decision, Mode};
use crate::store::{now_ms, LogWriter, SessionStore};
use dsh_protocol::log::PermissionRule;

/// Something the editor should show, produced live or by replaying a log.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentUpdate {
    /// A block of the user's prompt (replay).
    UserChunk(UserContent),
    /// Visible model text.
    MessageChunk(String),
    /// Model reasoning.
    ThoughtChunk(String),
    /// Context use after a model call.
    Usage {
        /// Tokens in the context window.
        used: u64,
        /// Window size.
        size: u64,
    },
    /// The session title changed.
    Title(String),
    /// A tool call appeared.
    ToolCall {
        /// Call id.
        call_id: String,
        /// Raw JSON arguments.
        arguments: String,
        /// Presentation.
        view: ToolView,
        /// Status.
        status: ToolStatus,
    },
    /// A tool call progressed or finished.
    ToolCallUpdate {
        /// Call id.
        call_id: String,
        /// Status.
        status: ToolStatus,
        /// Presentation (replaces the call's content and locations when set).
        view: ToolView,
    },
    /// The plan (whole list).
    Plan(Vec<PlanEntry>),
}

/// Receives updates for one session. Implementations must not block.
pub trait UpdateSink: Send + Sync {
    /// Delivers one update.
    fn send(&self, update: AgentUpdate);
}

/// Which menu a setting belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigCategory {
    /// Permission mode.
    Mode,
    /// Model picker.
    Model,
    /// Reasoning effort.
    ThoughtLevel,
}

/// One selectable value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigValue {
    /// Value id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
}

/// One session setting with its choices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigOption {
    /// Option id (`model`, `thought_level`).
    pub id: &'static str,
    /// Display name.
    pub name: &'static str,
    /// Description.
    pub description: &'static str,
    /// Category.
    pub category: ConfigCategory,
    /// Current value id.
    pub current: String,
    /// Choices.
    pub values: Vec<ConfigValue>,
}

/// How a prompt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model finished.
    EndTurn,
    /// The output limit was hit.
    MaxTokens,
    /// Too many model calls in one turn.
    MaxTurnRequests,
    /// The provider refused.
    Refusal,
    /// Cancelled by the user.
    Cancelled,
}

/// A listed session.
#[derive(Debug, Clone)]
pub struct SessionListing {
    /// Id.
    pub id: String,
    /// Working directory.
    pub cwd: String,
    /// Extra roots.
    pub roots: Vec<String>,
    /// Title.
    pub title: Option<String>,
    /// RFC 3339 time of the last write.
    pub updated_at: String,
}

/// A page of sessions.
#[derive(Debug, Clone)]
pub struct SessionPage {
    /// Sessions, newest first.
    pub sessions: Vec<SessionListing>,
    /// Cursor for the next page.
    pub next_cursor: Option<String>,
}

/// Mutable session state, guarded by a short-held std mutex (never across
/// an await).
pub(crate) struct SessionState {
    pub(crate) events: Vec<Event>,
    /// The log's writer (and lock); `None` once the session is closed.
    log: Option<LogWriter>,
    pub(crate) model: String,
    pub(crate) thought_level: ThoughtLevel,
    pub(crate) title: Option<String>,
    pub(crate) turns: u64,
    pub(crate) last_usage: Option<Usage>,
    pub(crate) mode: Mode,
    pub(crate) rules: Vec<PermissionRule>,
    /// Every tool-call id used in the session (ids shown to the editor are
    /// unique).
    pub(crate) call_ids: std::collections::HashSet<String>,
}

/// One live session.
pub struct Session {
    /// Id.
    pub id: String,
    /// Header (cwd, roots, creation time).
    pub header: SessionHeader,
    /// Canonical workspace roots (cwd first), for the permission policy.
    pub roots: Vec<PathBuf>,
    /// Private directory for tool outputs too long to inline.
    pub spill_dir: PathBuf,
    /// The session's language servers, created on first use.
    bridge: std::sync::OnceLock<Arc<dsh_lsp_bridge::Bridge>>,
    /// The session's MCP servers (set when the client passes some).
    mcp: Mutex<Option<Arc<crate::mcp::McpHub>>>,
    state: Mutex<SessionState>,
    turn_lock: Arc<tokio::sync::Mutex<()>>,
    turn_cancel: Mutex<Option<CancellationToken>>,
    closed: CancellationToken,
}

impl Session {
    pub(crate) fn state(&self) -> MutexGuard<'_, SessionState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends an event to the log and the in-memory copy.
    ///
    /// # Errors
    /// The write failed; nothing was recorded.
    pub(crate) fn append(&self, data: EventData) -> Result<Event, AgentError> {
        let mut state = self.state();
        let event = state
            .log
            .as_mut()
            .ok_or_else(|| AgentError::SessionClosed(self.id.clone()))?
            .append(data)?;
        apply(&mut state, &event);
        state.events.push(event.clone());
        Ok(event)
    }

    /// The session's language-server bridge (created on first use; no
    /// server starts until a query needs one). It starts a server found
    /// inside the workspace only when the session's policy allows launching
    /// that program now.
    pub fn bridge(self: &Arc<Self>, config: &Arc<Config>) -> Arc<dsh_lsp_bridge::Bridge> {
        self.bridge
            .get_or_init(|| {
                let session = Arc::downgrade(self);
                let policy = config.clone();
                let trust: dsh_lsp_bridge::Trust = Arc::new(move |program: &Path| {
                    let launch = Access::Launch {
                        program: program.to_path_buf(),
                        reads: Vec::new(),
                    };
                    session.upgrade().is_some_and(|session| {
                        session.decide(&policy, "lsp", &launch) == Decision::Allow
                    })
                });
                dsh_lsp_bridge::Bridge::new(
                    config.lsp.clone(),
                    self.roots.clone(),
                    config.spawner.clone(),
                    trust,
                )
            })
            .clone()
    }

    /// What the permission policy says of a call now (mode and rules are
    /// read at this moment).
    pub(crate) fn decide(&self, config: &Config, tool: &str, access: &Access) -> Decision {
        let state = self.state();
        permission::decide(state.mode, tool, access, &self.policy(config), &state.rules)
    }

    /// The policy's view of this session.
    pub(crate) fn policy<'a>(&'a self, config: &'a Config) -> permission::Context<'a> {
        permission::Context {
            roots: &self.roots,
            protected: &config.protected,
            trust_workspace_servers: config.lsp.trust_workspace_servers,
        }
    }

    /// Installs the session's MCP servers, stopping any previous set.
    pub async fn set_mcp(&self, hub: Arc<crate::mcp::McpHub>) {
        let previous = self
            .mcp
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(hub);
        if let Some(previous) = previous {
            previous.shutdown().await;
        }
    }

    /// The session's MCP servers.
    pub(crate) fn mcp(&self) -> Option<Arc<crate::mcp::McpHub>> {
        self.mcp.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The bridge, if the session has used one.
    pub(crate) fn existing_bridge(&self) -> Option<Arc<dsh_lsp_bridge::Bridge>> {
        self.bridge.get().cloned()
    }

    /// Stops the session's language servers, if any run.
    pub(crate) async fn stop_servers(&self) {
        if let Some(bridge) = self.bridge.get() {
            bridge.shutdown().await;
        }
        let hub = self.mcp.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(hub) = hub {
            hub.shutdown().await;
        }
    }

    /// The current permission mode.
    pub fn mode(&self) -> Mode {
        self.state().mode
    }

    pub(crate) fn sync(&self) {
        if let Some(log) = &self.state().log {
            log.sync();
        }
    }

    /// Flushes and closes the log, releasing its lock: a turn still running
    /// can no longer write, and the session can be opened again.
    fn close_log(&self) {
        if let Some(log) = self.state().log.take() {
            log.sync();
        }
    }

    fn cancel_turn(&self) {
        if let Some(token) = self
            .turn_cancel
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            token.cancel();
        }
    }
}

/// Folds settings-bearing events into the state.
fn apply(state: &mut SessionState, event: &Event) {
    match &event.data {
        EventData::Config { key, value } if key == "model" => state.model = value.clone(),
        EventData::Config { key, value } if key == "thought_level" => {
            if let Some(level) = ThoughtLevel::parse(value) {
                state.thought_level = level;
            }
        }
        EventData::Config { key, value } if key == "mode" => {
            if let Some(mode) = Mode::parse(value) {
                state.mode = mode;
            }
        }
        EventData::PermissionRule(rule) => state.rules.push(rule.clone()),
        EventData::Title { title } => state.title = Some(title.clone()),
        EventData::TurnStart { turn } => state.turns = state.turns.max(*turn),
        EventData::AssistantMessage {
            usage, tool_calls, ..
        } => {
            if usage.is_some() {
                state.last_usage = *usage;
            }
            state
                .call_ids
                .extend(tool_calls.iter().map(|call| call.id.clone()));
        }
        _ => {}
    }
}

/// A loaded session, the updates that replay it, and its settings.
pub type LoadedSession = (Arc<Session>, Vec<AgentUpdate>, Vec<ConfigOption>);

/// A prompt that holds its session's turn lock.
pub struct TurnTicket {
    pub(crate) session: Arc<Session>,
    pub(crate) cancel: CancellationToken,
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl TurnTicket {
    /// Cancels this turn (same as `session/cancel`).
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }
}

impl Drop for TurnTicket {
    fn drop(&mut self) {
        *self
            .session
            .turn_cancel
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// The agent: configuration, provider, store and live sessions.
pub struct Agent {
    pub(crate) config: Arc<Config>,
    config_error: Option<String>,
    pub(crate) provider: Option<Arc<Provider>>,
    store: SessionStore,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    shutdown: CancellationToken,
}

impl Agent {
    /// Builds the agent. A configuration problem does not stop the process:
    /// it is reported on every session request so the editor shows it.
    pub fn new(config: Result<Config, String>) -> Arc<Agent> {
        let (config, mut config_error) = match config {
            Ok(config) => (config, None),
            Err(error) => {
                let fallback = Config::from_raw(
                    Default::default(),
                    PathBuf::from("/nonexistent-dsh-home"),
                    &NoEnv,
                )
                .unwrap_or_else(|_| unreachable!("the default config is valid"));
                (fallback, Some(error))
            }
        };
        let config = Arc::new(config);
        let provider = if config_error.is_some() {
            None
        } else {
            match build_provider(&config) {
                Ok(provider) => Some(Arc::new(provider)),
                Err(error) => {
                    config_error = Some(error);
                    None
                }
            }
        };
        if let Some(error) = &config_error {
            tracing::error!(%error, "configuration error; session requests will fail until it is fixed");
        }
        Arc::new(Agent {
            store: SessionStore::new(config.sessions_dir()),
            config,
            config_error,
            provider,
            sessions: Mutex::new(HashMap::new()),
            shutdown: CancellationToken::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn check_config(&self) -> Result<(), AgentError> {
        match &self.config_error {
            Some(error) => Err(AgentError::Config(error.clone())),
            None => Ok(()),
        }
    }

    /// Whether a model credential is available now (or none is needed).
    pub fn has_credential(&self) -> bool {
        !self.config.needs_key() || self.config.api_key().is_some()
    }

    fn require_credential(&self) -> Result<(), AgentError> {
        if self.has_credential() {
            Ok(())
        } else {
            Err(AgentError::AuthRequired(format!(
                "{env} is not set: dsh needs the {key}. Set {env} in the environment your editor starts dsh with — in Zed, under agent_servers.<name>.env in settings.json — then restart the agent",
                env = self.config.api_key_env,
                key = self.config.key_name(),
            )))
        }
    }

    /// `authenticate` for the environment-variable method: succeeds when the
    /// key is present now.
    ///
    /// # Errors
    /// The key is still missing.
    pub fn authenticate(&self) -> Result<(), AgentError> {
        self.check_config()?;
        self.require_credential()
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn live(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions().get(id).cloned()
    }

    /// A live session.
    ///
    /// # Errors
    /// `session.not_found` when the session is not open in this process.
    pub fn session(&self, id: &str) -> Result<Arc<Session>, AgentError> {
        self.live(id)
            .ok_or_else(|| AgentError::SessionNotFound(id.to_owned()))
    }

    /// Creates a session.
    ///
    /// # Errors
    /// Invalid cwd or roots, missing credential, unwritable store.
    pub fn new_session(
        &self,
        cwd: &Path,
        extra_roots: &[PathBuf],
        mcp_servers: serde_json::Value,
    ) -> Result<(Arc<Session>, Vec<ConfigOption>), AgentError> {
        self.check_config()?;
        let cwd = check_dir("cwd", cwd)?;
        let roots = extra_roots
            .iter()
            .map(|root| check_dir("additionalDirectories entry", root))
            .collect::<Result<Vec<_>, _>>()?;
        self.require_credential()?;
        let id = uuid::Uuid::new_v4().to_string();
        let mut header = SessionHeader::new(id.clone(), now_ms(), cwd, roots);
        header.mcp_servers = mcp_servers;
        let log = self.store.create(&header)?;
        let session = self.install(header, Vec::new(), log);
        let options = self.config_options(&session);
        Ok((session, options))
    }

    fn install(&self, header: SessionHeader, events: Vec<Event>, log: LogWriter) -> Arc<Session> {
        let mut state = SessionState {
            events: Vec::new(),
            log: Some(log),
            model: self.config.default_model.clone(),
            thought_level: self.config.default_thought_level,
            title: None,
            turns: 0,
            last_usage: None,
            mode: self.config.default_mode,
            rules: Vec::new(),
            call_ids: Default::default(),
        };
        for event in &events {
            apply(&mut state, event);
        }
        if self.config.model(&state.model).is_none() {
            // The catalog changed since the session chose this model.
            state.model = self.config.default_model.clone();
        }
        state.events = events;
        let roots = crate::tools::canonical_roots(&header.cwd, &header.roots);
        let spill_dir = self.config.home.join("spill").join(&header.id);
        let session = Arc::new(Session {
            id: header.id.clone(),
            roots,
            spill_dir,
            bridge: std::sync::OnceLock::new(),
            mcp: Mutex::new(None),
            header,
            state: Mutex::new(state),
            turn_lock: Arc::new(tokio::sync::Mutex::new(())),
            turn_cancel: Mutex::new(None),
            closed: self.shutdown.child_token(),
        });
        self.sessions().insert(session.id.clone(), session.clone());
        session
    }

    /// Opens a stored session (or the live one) for load or resume.
    fn open(&self, id: &str) -> Result<Arc<Session>, AgentError> {
        self.check_config()?;
        if let Some(session) = self.live(id) {
            return Ok(session);
        }
        let (parsed, log) = self.store.open(id)?;
        Ok(self.install(parsed.header, parsed.events, log))
    }

    /// `session/load`: opens the session and returns the updates that replay
    /// its whole history.
    ///
    /// # Errors
    /// Unknown session, unreadable log, a prompt already running.
    pub fn load_session(&self, id: &str) -> Result<LoadedSession, AgentError> {
        let session = self.open(id)?;
        if session.turn_lock.try_lock().is_err() {
            return Err(AgentError::SessionBusy(id.to_owned()));
        }
        let updates = {
            let state = session.state();
            let size = self
                .config
                .model(&state.model)
                .map(|m| m.context_window)
                .unwrap_or(0);
            replay_updates(&state.events, size)
        };
        let options = self.config_options(&session);
        Ok((session, updates, options))
    }

    /// `session/resume`: opens the session without replay.
    ///
    /// # Errors
    /// Unknown session or unreadable log.
    pub fn resume_session(
        &self,
        id: &str,
    ) -> Result<(Arc<Session>, Vec<ConfigOption>), AgentError> {
        let session = self.open(id)?;
        let options = self.config_options(&session);
        Ok((session, options))
    }

    /// `session/close`: cancels work, waits for the turn to stop, flushes
    /// and frees the session. It stays loadable.
    ///
    /// # Errors
    /// The session is not open.
    pub async fn close_session(&self, id: &str) -> Result<(), AgentError> {
        let session = self
            .sessions()
            .remove(id)
            .ok_or_else(|| AgentError::SessionNotFound(id.to_owned()))?;
        session.closed.cancel();
        session.cancel_turn();
        let lock = session.turn_lock.clone();
        if tokio::time::timeout(std::time::Duration::from_secs(5), lock.lock_owned())
            .await
            .is_err()
        {
            tracing::warn!(
                session = id,
                "turn did not stop within 5 s of close; its log is closed under it"
            );
        }
        session.stop_servers().await;
        session.close_log();
        Ok(())
    }

    /// `session/delete`: closes the session if open and removes its log.
    ///
    /// # Errors
    /// Unknown session or the file cannot be removed.
    pub async fn delete_session(&self, id: &str) -> Result<(), AgentError> {
        self.store.path(id)?;
        if self.live(id).is_some() {
            self.close_session(id).await?;
        }
        self.store.delete(id)
    }

    /// `session/list`: newest first, optionally only sessions whose cwd is
    /// `cwd`, paged with an opaque cursor.
    ///
    /// # Errors
    /// A malformed cursor.
    pub fn list_sessions(
        &self,
        cwd: Option<&Path>,
        cursor: Option<&str>,
    ) -> Result<SessionPage, AgentError> {
        let wanted = cwd.map(|cwd| {
            let canonical = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
            (
                cwd.to_string_lossy().into_owned(),
                canonical.to_string_lossy().into_owned(),
            )
        });
        let all: Vec<_> = self
            .store
            .list()
            .into_iter()
            .filter(|summary| {
                wanted
                    .as_ref()
                    .is_none_or(|(raw, canonical)| &summary.cwd == raw || &summary.cwd == canonical)
            })
            .collect();
        let start = match cursor {
            None => 0,
            Some(cursor) => {
                let (millis, id) = cursor
                    .split_once(':')
                    .and_then(|(millis, id)| Some((millis.parse::<u128>().ok()?, id)))
                    .ok_or_else(|| {
                        AgentError::InvalidParams(format!("invalid session/list cursor {cursor:?}"))
                    })?;
                all.iter()
                    .position(|summary| {
                        let updated = summary
                            .updated_at
                            .duration_since(UNIX_EPOCH)
                            .unwrap_or_default()
                            .as_millis();
                        updated < millis || (updated == millis && summary.id.as_str() > id)
                    })
                    .unwrap_or(all.len())
            }
        };
        let page_size = self.config.list_page_size;
        let page: Vec<_> = all[start..].iter().take(page_size).collect();
        let next_cursor = (start + page.len() < all.len()).then(|| {
            let last = page
                .last()
                .unwrap_or_else(|| unreachable!("a short page has no next cursor"));
            format!(
                "{}:{}",
                last.updated_at
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis(),
                last.id
            )
        });
        let sessions = page
            .into_iter()
            .map(|summary| SessionListing {
                id: summary.id.clone(),
                cwd: summary.cwd.clone(),
                roots: summary.roots.clone(),
                title: summary.title.clone(),
                updated_at: humantime::format_rfc3339_millis(summary.updated_at).to_string(),
            })
            .collect();
        Ok(SessionPage {
            sessions,
            next_cursor,
        })
    }

    /// The full list of settings with current values.
    pub fn config_options(&self, session: &Session) -> Vec<ConfigOption> {
        let state = session.state();
        vec![
            ConfigOption {
                id: "mode",
                name: "Mode",
                description: "What the agent may do without asking",
                category: ConfigCategory::Mode,
                current: state.mode.as_str().to_owned(),
                values: Mode::ALL
                    .iter()
                    .map(|mode| ConfigValue {
                        id: mode.as_str().to_owned(),
                        name: mode.name().to_owned(),
                        description: Some(mode.description().to_owned()),
                    })
                    .collect(),
            },
            ConfigOption {
                id: "model",
                name: "Model",
                description: "The model that answers in this session",
                category: ConfigCategory::Model,
                current: state.model.clone(),
                values: self
                    .config
                    .models
                    .iter()
                    .map(|model| ConfigValue {
                        id: model.id.clone(),
                        name: model.display_name().to_owned(),
                        description: model.description.clone(),
                    })
                    .collect(),
            },
            ConfigOption {
                id: "thought_level",
                name: "Thinking",
                description: "How much the model reasons before answering",
                category: ConfigCategory::ThoughtLevel,
                current: state.thought_level.as_str().to_owned(),
                values: ThoughtLevel::ALL
                    .iter()
                    .map(|level| ConfigValue {
                        id: level.as_str().to_owned(),
                        name: match level {
                            ThoughtLevel::Off => "Off",
                            ThoughtLevel::Low => "Low",
                            ThoughtLevel::High => "High",
                            ThoughtLevel::Max => "Max",
                        }
                        .to_owned(),
                        description: Some(
                            match level {
                                ThoughtLevel::Off => "No reasoning; fastest",
                                ThoughtLevel::Low => "Brief reasoning",
                                ThoughtLevel::High => "Thorough reasoning (default)",
                                ThoughtLevel::Max => "Maximum reasoning effort",
                            }
                            .to_owned(),
                        ),
                    })
                    .collect(),
            },
        ]
    }

    /// `session/set_config_option`: validates, logs, and returns the full
    /// list. The change applies from the next model call.
    ///
    /// # Errors
    /// Unknown session, option or value.
    pub fn set_config_option(
        &self,
        id: &str,
        key: &str,
        value: &str,
    ) -> Result<Vec<ConfigOption>, AgentError> {
        let session = self.session(id)?;
        match key {
            "model" => {
                if self.config.model(value).is_none() {
                    let known: Vec<&str> =
                        self.config.models.iter().map(|m| m.id.as_str()).collect();
                    return Err(AgentError::InvalidParams(format!(
                        "unknown model {value:?}; available: {}",
                        known.join(", ")
                    )));
                }
            }
            "mode" => {
                if Mode::parse(value).is_none() {
                    return Err(AgentError::InvalidParams(format!(
                        "unknown mode {value:?}; use read-only, ask, accept-edits or full-access"
                    )));
                }
            }
            "thought_level" => {
                if ThoughtLevel::parse(value).is_none() {
                    return Err(AgentError::InvalidParams(format!(
                        "unknown thought_level {value:?}; use off, low, high or max"
                    )));
                }
            }
            other => {
                return Err(AgentError::InvalidParams(format!(
                "unknown config option {other:?}; this session has mode, model and thought_level"
            )))
            }
        }
        session.append(EventData::Config {
            key: key.to_owned(),
            value: value.to_owned(),
        })?;
        Ok(self.config_options(&session))
    }

    /// Reserves the session for one prompt. Call this before spawning the
    /// turn so a `session/cancel` that follows at once finds the token.
    ///
    /// # Errors
    /// Unknown session, busy session, missing credential.
    pub fn begin_prompt(&self, id: &str) -> Result<TurnTicket, AgentError> {
        self.check_config()?;
        let session = self.session(id)?;
        self.require_credential()?;
        let guard = session
            .turn_lock
            .clone()
            .try_lock_owned()
            .map_err(|_| AgentError::SessionBusy(id.to_owned()))?;
        let cancel = session.closed.child_token();
        *session
            .turn_cancel
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(cancel.clone());
        Ok(TurnTicket {
            session,
            cancel,
            _guard: guard,
        })
    }

    /// `session/cancel`: cancels the running turn, if any. Idempotent; an
    /// idle or unknown session is a no-op.
    pub fn cancel(&self, id: &str) {
        if let Some(session) = self.live(id) {
            session.cancel_turn();
        }
    }

    /// Validates prompt content (image types and sizes).
    ///
    /// # Errors
    /// An unsupported image type, a too-large or undecodable image, or an
    /// empty prompt.
    pub fn check_prompt(&self, content: &[UserContent]) -> Result<(), AgentError> {
        if content.is_empty() {
            return Err(AgentError::InvalidParams("the prompt is empty".to_owned()));
        }
        for block in content {
            if let UserContent::Image { mime_type, data } = block {
                if !matches!(
                    mime_type.as_str(),
                    "image/png" | "image/jpeg" | "image/webp" | "image/gif"
                ) {
                    return Err(AgentError::InvalidParams(format!(
                        "image type {mime_type:?} is not supported; use PNG, JPEG, WebP or GIF"
                    )));
                }
                let approx = data.len() / 4 * 3;
                if approx > self.config.max_image_bytes {
                    return Err(AgentError::InvalidParams(format!(
                        "the image is about {} MiB; the limit is {} MiB",
                        approx / (1024 * 1024),
                        self.config.max_image_bytes / (1024 * 1024)
                    )));
                }
                if base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .is_err()
                {
                    return Err(AgentError::InvalidParams(
                        "the image data is not valid base64".to_owned(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Stops every session (client EOF or signal): cancels turns and flushes logs.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let sessions: Vec<Arc<Session>> = self
            .sessions()
            .drain()
            .map(|(_, session)| session)
            .collect();
        for session in sessions {
            let lock = session.turn_lock.clone();
            if tokio::time::timeout(std::time::Duration::from_secs(2), lock.lock_owned())
                .await
                .is_err()
            {
                tracing::warn!(session = %session.id, "turn did not stop within 2 s of shutdown");
            }
            session.stop_servers().await;
            session.close_log();
        }
    }

    /// The model history a new request would carry (for tests and tools).
    pub fn history(&self, id: &str) -> Result<Vec<dsh_protocol::model::ChatMessage>, AgentError> {
        let session = self.session(id)?;
        let state = session.state();
        Ok(derive_history(&state.events))
    }
}

struct NoEnv;
impl crate::config::Env for NoEnv {
    fn var(&self, _name: &str) -> Option<String> {
        None
    }
}

fn build_provider(config: &Arc<Config>) -> Result<Provider, String> {
    match config.provider {
        ProviderKind::Replay => {
            let path = config.replay_file.as_ref().ok_or(
                "the replay provider needs a script: set DSH_REPLAY_FILE or provider.replay_file",
            )?;
            Ok(Provider::Replay(ReplayProvider::from_file(path)?))
        }
        ProviderKind::Deepseek | ProviderKind::Openai => Ok(Provider::Http(
            crate::model::http::HttpProvider::new(config.clone())?,
        )),
    }
}

fn check_dir(what: &str, path: &Path) -> Result<String, AgentError> {
    if !path.is_absolute() {
        return Err(AgentError::InvalidParams(format!(
            "{what} must be an absolute path, got {:?}",
            path.display().to_string()
        )));
    }
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(path.display().to_string()),
        Ok(_) => Err(AgentError::InvalidParams(format!(
            "{what} {} is not a directory",
            path.display()
        ))),
        Err(err) => Err(AgentError::InvalidParams(format!(
            "{what} {} does not exist or cannot be read: {err}",
            path.display()
        ))),
    }
}

/// Rebuilds the editor's view of a session from its log: prompts, replies
/// (thoughts first, as streamed), tool calls with their final state, the
/// latest plan, and the last context usage.
pub fn replay_updates(events: &[Event], context_window: u64) -> Vec<AgentUpdate> {
    let mut updates = Vec::new();
    let last_plan = events
        .iter()
        .rposition(|event| matches!(event.data, EventData::Plan { .. }));
    let mut last_usage = None;
    // Calls whose result was never logged (dsh died while they ran) are shown
    // failed with an "outcome unknown" note instead of pending forever.
    let mut open_calls: Vec<String> = Vec::new();
    let close_open = |updates: &mut Vec<AgentUpdate>, open_calls: &mut Vec<String>| {
        for call_id in open_calls.drain(..) {
            updates.push(AgentUpdate::ToolCallUpdate {
                call_id,
                status: ToolStatus::Failed,
                view: ToolView {
                    content: vec![dsh_protocol::tool::ToolContent::Text {
                        text: dsh_protocol::log::OUTCOME_UNKNOWN.to_owned(),
                    }],
                    ..ToolView::default()
                },
            });
        }
    };
    for (index, event) in events.iter().enumerate() {
        match &event.data {
            EventData::UserMessage { content, .. } => {
                close_open(&mut updates, &mut open_calls);
                updates.extend(content.iter().cloned().map(AgentUpdate::UserChunk));
            }
            EventData::AssistantMessage {
                text,
                reasoning,
                usage,
                estimated_context,
                ..
            } => {
                if !reasoning.is_empty() {
                    updates.push(AgentUpdate::ThoughtChunk(reasoning.clone()));
                }
                if !text.is_empty() {
                    updates.push(AgentUpdate::MessageChunk(text.clone()));
                }
                if let Some(used) = usage
                    .map(|usage| usage.context_tokens())
                    .or(*estimated_context)
                {
                    last_usage = Some(used);
                }
            }
            EventData::ToolCall {
                call_id,
                arguments,
                view,
                ..
            } => {
                open_calls.push(call_id.clone());
                updates.push(AgentUpdate::ToolCall {
                    call_id: call_id.clone(),
                    arguments: arguments.clone(),
                    view: view.clone(),
                    status: ToolStatus::Pending,
                })
            }
            EventData::ToolResult {
                call_id,
                status,
                view,
                ..
            } => {
                open_calls.retain(|open| open != call_id);
                updates.push(AgentUpdate::ToolCallUpdate {
                    call_id: call_id.clone(),
                    status: *status,
                    view: view.clone(),
                })
            }
            EventData::Plan { entries } if Some(index) == last_plan => {
                updates.push(AgentUpdate::Plan(entries.clone()))
            }
            _ => {}
        }
    }
    close_open(&mut updates, &mut open_calls);
    if let Some(used) = last_usage {
        updates.push(AgentUpdate::Usage {
            used,
            size: context_window,
        });
    }
    updates
}
