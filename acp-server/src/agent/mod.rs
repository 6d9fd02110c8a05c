//! The agent: what every front end calls. It owns the configuration, the
//! model provider, the session store and the live sessions; it opens,
//! lists, closes and deletes sessions, changes their settings and runs
//! prompts. Nothing here knows a wire protocol: front ends translate their
//! requests into these calls and render [`AgentUpdate`]s through a
//! [`Frontend`].
//!
//! Blocking work (reading and creating logs) runs off the async workers,
//! so a front end's dispatch loop never waits on the disk.

mod fork;
mod goal_rounds;
mod listing;
mod memory;
mod prompts;
pub(crate) mod wakeups;

pub use listing::{SessionListing, SessionPage};
pub use prompts::{Admitted, Submitted};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use base64::Engine as _;
use dsh_protocol::log::{ConfigKey, EventData};
use dsh_protocol::{SessionId, UserContent};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::Config;
use crate::error::AgentError;
use crate::frontend::Frontend;
use crate::mcp::{McpHub, McpServerConfig};
use crate::model::Provider;
use crate::session::state::SessionState;
use crate::session::Session;
use crate::settings::Settings;
use crate::store::SessionStore;
use crate::update::ConfigOption;
use dsh_protocol::Mode;

/// How long closing one session waits for its turn to stop.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// How long shutdown waits for every session, all together.
const SHUTDOWN_BUDGET: Duration = Duration::from_secs(2);

/// A session a front end opened.
pub struct Opened {
    /// The session.
    pub session: Arc<Session>,
    /// Its settings, for the editor's menus.
    pub options: Vec<ConfigOption>,
    /// Its permission mode (the legacy modes view).
    pub mode: Mode,
    /// One message per MCP server that failed to start (for the user; not
    /// part of the session's history).
    pub notices: Vec<String>,
    /// The slash commands it offers (built-in, custom, skills).
    pub commands: Vec<crate::context::commands::Offered>,
}

/// The agent: configuration, provider, store and live sessions.
pub struct Agent {
    config: Arc<Config>,
    config_error: Option<String>,
    provider: Option<Arc<Provider>>,
    store: SessionStore,
    sessions: Mutex<HashMap<SessionId, Arc<Session>>>,
    shutdown: CancellationToken,
    /// When free memory was last given back to the system.
    gave_back: Mutex<Instant>,
    /// Itself, for the task that evicts idle sessions' histories.
    me: std::sync::Weak<Agent>,
    /// That task was started (with the first session).
    sweeping: std::sync::atomic::AtomicBool,
    /// The budget for its sessions' histories in memory.
    residency: Arc<crate::session::Residency>,
    /// `config` with the model the endpoint serves, once asked
    /// ([`Agent::ready`]).
    served: tokio::sync::OnceCell<Arc<Config>>,
}

impl Agent {
    /// Builds the agent. A configuration problem does not stop the process:
    /// it is reported on every session request so the editor shows it.
    pub fn new(config: Result<Config, crate::config::ConfigError>) -> Arc<Agent> {
        let (config, mut config_error) = match config {
            Ok(config) => (config, None),
            Err(error) => {
                let fallback = Config::from_raw(
                    Default::default(),
                    PathBuf::from("/nonexistent-dsh-home"),
                    &NoEnv,
                )
                .unwrap_or_else(|_| unreachable!("the default config is valid"));
                (fallback, Some(error.to_string()))
            }
        };
        let config = Arc::new(config);
        let provider = if config_error.is_some() {
            None
        } else {
            match Provider::from_settings(&config.model) {
                Ok(provider) => Some(Arc::new(provider)),
                Err(error) => {
                    config_error = Some(error.to_string());
                    None
                }
            }
        };
        if let Some(error) = &config_error {
            tracing::error!(%error, "configuration error; session requests will fail until it is fixed");
        }
        Self::assemble(config, config_error, provider)
    }

    /// An agent with a given provider (in-process tests, the scripted
    /// model).
    pub fn with_provider(config: Config, provider: Provider) -> Arc<Agent> {
        Self::assemble(Arc::new(config), None, Some(Arc::new(provider)))
    }

    fn assemble(
        config: Arc<Config>,
        config_error: Option<String>,
        provider: Option<Arc<Provider>>,
    ) -> Arc<Agent> {
        // Old spill files go, off the start-up path.
        if let (None, Ok(runtime)) = (&config_error, tokio::runtime::Handle::try_current()) {
            let root = config.home.join("spill");
            let before = std::time::SystemTime::now() - crate::tools::spill::SWEEP_AFTER;
            runtime.spawn_blocking(move || crate::tools::spill::sweep(&root, before));
        }
        Arc::new_cyclic(|me| Agent {
            store: SessionStore::new(config.sessions_dir()),
            residency: crate::session::Residency::new(config.max_history_bytes),
            config,
            config_error,
            provider,
            sessions: Mutex::new(HashMap::new()),
            shutdown: CancellationToken::new(),
            gave_back: Mutex::new(Instant::now()),
            me: me.clone(),
            sweeping: std::sync::atomic::AtomicBool::new(false),
            served: tokio::sync::OnceCell::new(),
        })
    }

    /// The full-text index of the stored sessions (the one the live
    /// sessions keep up to date).
    pub fn search_index(&self) -> &Arc<crate::search::SearchIndex> {
        self.store.search()
    }

    /// The configuration (with the served model, once asked).
    pub fn config(&self) -> &Config {
        self.served.get().map_or(&self.config, |served| served)
    }

    /// The configuration sessions get, once it is valid: the loaded one,
    /// or — where the catalog is what the endpoint serves
    /// ([`crate::model::served`]) — that with the served model, asked at
    /// the first session request (never at start-up) and kept for the
    /// process.
    ///
    /// # Errors
    /// A configuration error; the served models cannot be had, or no one
    /// of them is the one to use.
    async fn ready(&self) -> Result<Arc<Config>, AgentError> {
        self.check_config()?;
        if !self.config.model.served_catalog {
            return Ok(self.config.clone());
        }
        let provider = self
            .provider
            .clone()
            .ok_or_else(|| AgentError::Internal("no model provider".to_owned()))?;
        self.served
            .get_or_try_init(|| async {
                let served = provider.served_models().await?;
                let wanted = Some(self.config.choices.default_model.as_str())
                    .filter(|wanted| !wanted.is_empty());
                let model =
                    crate::model::served::pick(&served, wanted, &self.config.model.base_url)?;
                tracing::info!(model = %model.id, "using the model the endpoint serves");
                Ok(Arc::new(self.config.serving(model)))
            })
            .await
            .cloned()
    }

    /// Checks settings a front end gives a session before it opens one
    /// (`dsh run`'s flags, an SDK opening) as the session would: against
    /// the catalog sessions get, the served one where that is the catalog.
    ///
    /// # Errors
    /// What [`Agent::ready`] or [`crate::settings::Settings::check`]
    /// says.
    pub async fn validate_settings(&self, given: &[(ConfigKey, &str)]) -> Result<(), AgentError> {
        let config = self.ready().await?;
        for (key, value) in given {
            Settings::check(&config.choices, *key, value)?;
        }
        Ok(())
    }

    /// The config option a client names (`session/set_config_option`'s
    /// id).
    ///
    /// # Errors
    /// An option sessions do not have, answered with those they have.
    pub fn config_key(&self, name: &str) -> Result<ConfigKey, AgentError> {
        Settings::key(&self.config().choices, name)
    }

    fn check_config(&self) -> Result<(), AgentError> {
        match &self.config_error {
            Some(error) => Err(AgentError::Config(error.clone())),
            None => Ok(()),
        }
    }

    /// Whether a model credential is available now (or none is needed).
    pub async fn has_credential(&self) -> bool {
        !self.config.model.needs_key()
            || crate::credentials::resolve_now(&self.config.model.key)
                .await
                .is_some()
    }

    /// Fails unless a model credential is available now.
    ///
    /// # Errors
    /// `auth.missing_credential`, naming `dsh login` and the variable.
    pub async fn require_credential(&self) -> Result<(), AgentError> {
        if self.has_credential().await {
            Ok(())
        } else {
            Err(AgentError::AuthRequired(self.config.model.missing_key()))
        }
    }

    /// `authenticate` for the environment-variable method: succeeds when the
    /// key is present now.
    ///
    /// # Errors
    /// The key is still missing.
    pub async fn authenticate(&self) -> Result<(), AgentError> {
        self.check_config()?;
        self.require_credential().await
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<SessionId, Arc<Session>>> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn live(&self, id: &SessionId) -> Option<Arc<Session>> {
        self.sessions().get(id).cloned()
    }

    /// Every session open here (subagents aside), in no order.
    pub fn live_sessions(&self) -> Vec<Arc<Session>> {
        self.sessions().values().cloned().collect()
    }

    /// `logout`: removes the key `dsh login` stored.
    ///
    /// # Errors
    /// The credentials file cannot be rewritten.
    pub async fn logout(&self) -> Result<(), AgentError> {
        let (home, name) = (self.config.home.clone(), self.config.model.key.name.clone());
        blocking(move || {
            crate::credentials::remove(&home, &name)
                .map(drop)
                .map_err(AgentError::Internal)
        })
        .await
    }

    /// A live session.
    ///
    /// # Errors
    /// `session.not_found` when the session is not open in this process.
    pub fn session(&self, id: &SessionId) -> Result<Arc<Session>, AgentError> {
        self.live(id)
            .ok_or_else(|| AgentError::SessionNotFound(id.to_string()))
    }

    /// `session/new`: creates the session's log, then starts its MCP
    /// servers (so their tools are there for the first prompt).
    ///
    /// # Errors
    /// Invalid cwd or roots, missing credential, unwritable store.
    pub async fn new_session(
        &self,
        cwd: &Path,
        extra_roots: &[PathBuf],
        mcp: Vec<McpServerConfig>,
    ) -> Result<Opened, AgentError> {
        let (cwd, roots) = self.workspace(cwd, extra_roots).await?;
        let config = self.ready().await?;
        let mut header = crate::session::new_header(cwd, roots);
        header.mcp_servers = crate::mcp::recorded(&mcp);
        let store = self.store.clone();
        let (header, log) = blocking(move || {
            let log = store.create(&header)?;
            Ok((header, log))
        })
        .await?;
        let session = Session::new(
            config.clone(),
            header,
            SessionState::new(&config.choices),
            log,
            &self.shutdown,
            &self.residency,
        );
        self.track(&session);
        Ok(self.opened(session, mcp).await)
    }

    /// Where a new session works (`session/new`, `session/fork`): its cwd
    /// and extra roots, checked (absolute, existing directories), once the
    /// configuration and a credential are there.
    async fn workspace(
        &self,
        cwd: &Path,
        extra_roots: &[PathBuf],
    ) -> Result<(String, Vec<String>), AgentError> {
        self.check_config()?;
        let (cwd, extra_roots) = (cwd.to_path_buf(), extra_roots.to_vec());
        let (cwd, roots) = blocking(move || {
            let cwd = check_dir("cwd", &cwd)?;
            let roots = extra_roots
                .iter()
                .map(|root| check_dir("additionalDirectories entry", root))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((cwd, roots))
        })
        .await?;
        self.require_credential().await?;
        Ok((cwd, roots))
    }

    /// Opens a stored session, or finds the live one, for load or resume.
    /// With `replay` (load), the updates that show the session go there
    /// first, read from its log a line at a time as they are sent.
    async fn open(
        &self,
        id: &SessionId,
        replay: Option<Arc<dyn Frontend>>,
    ) -> Result<Arc<Session>, AgentError> {
        let config = self.ready().await?;
        if let Some(session) = self.live(id) {
            return self.reopen(session, replay).await;
        }
        let store = self.store.clone();
        let key = id.to_string();
        let out = replay.clone();
        let restored = config.clone();
        let opened = blocking(move || {
            let mut log = store.open(&key)?;
            let state = log.reader.read_ahead(|events| {
                SessionState::restore(&restored.choices, events, out.as_deref(), &|_| false)
            })?;
            let header = log.reader.header.clone();
            Ok((header, state, log.finish()?))
        })
        .await;
        let (header, state, log) = match opened {
            Ok(opened) => opened,
            // Another request of this connection opened it meanwhile.
            Err(AgentError::SessionLocked { .. }) if self.live(id).is_some() => {
                let session = self.session(id)?;
                return self.reopen(session, replay).await;
            }
            Err(err) => return Err(err),
        };
        let session = Session::new(config, header, state, log, &self.shutdown, &self.residency);
        self.track(&session);
        Ok(session)
    }

    /// A session already open here: replayed from its log for a load
    /// (unless a turn is writing it).
    async fn reopen(
        &self,
        session: Arc<Session>,
        replay: Option<Arc<dyn Frontend>>,
    ) -> Result<Arc<Session>, AgentError> {
        let Some(out) = replay else {
            return Ok(session);
        };
        if session.is_busy() {
            return Err(AgentError::SessionBusy(format!(
                "session {} is running a prompt; load it again when the prompt ends",
                session.id
            )));
        }
        let (store, replayed) = (self.store.clone(), session.clone());
        blocking(move || replayed.replay(&store, &*out)).await?;
        Ok(session)
    }

    async fn opened(&self, session: Arc<Session>, mcp: Vec<McpServerConfig>) -> Opened {
        // The config file's servers, then the client's (which win).
        let (mcp, mut notices) = self.config.mcp_servers.merged(mcp);
        if !mcp.is_empty() {
            let cwd = PathBuf::from(&session.header.cwd);
            let (hub, failures) = McpHub::start(mcp, &cwd, &self.config.spawner).await;
            session.set_mcp(hub).await;
            notices.extend(failures);
        }
        for notice in &notices {
            tracing::warn!(session = %session.id, "{notice}");
        }
        let commands = session.discover().await.offered();
        session.offer(commands.clone());
        Opened {
            options: session.options(),
            mode: session.mode(),
            session,
            notices,
            commands,
        }
    }

    /// `session/load`: opens the session, replaying its whole history to
    /// `out` before it returns.
    ///
    /// # Errors
    /// Unknown session, unreadable or locked log, a prompt already running.
    pub async fn load_session(
        &self,
        id: &SessionId,
        mcp: Vec<McpServerConfig>,
        out: Arc<dyn Frontend>,
    ) -> Result<Opened, AgentError> {
        async {
            let session = self.open(id, Some(out)).await?;
            tracing::info!("session loaded");
            Ok(self.opened(session, mcp).await)
        }
        .instrument(tracing::info_span!("session", session = %id))
        .await
    }

    /// `session/resume`: opens the session without replay.
    ///
    /// # Errors
    /// Unknown session, unreadable or locked log.
    pub async fn resume_session(
        &self,
        id: &SessionId,
        mcp: Vec<McpServerConfig>,
    ) -> Result<Opened, AgentError> {
        async {
            let session = self.open(id, None).await?;
            tracing::info!("session resumed");
            Ok(self.opened(session, mcp).await)
        }
        .instrument(tracing::info_span!("session", session = %id))
        .await
    }

    /// Sends a live session's logged events from seq `from` on, as far as
    /// the log is written now, to `out` (read on a blocking thread a line at
    /// a time; stops early when `out` closes).
    ///
    /// # Errors
    /// The session is not open, or its log cannot be read.
    pub async fn read_events(
        &self,
        id: &SessionId,
        from: u64,
        out: tokio::sync::mpsc::Sender<dsh_protocol::log::Event>,
    ) -> Result<(), AgentError> {
        let session = self.session(id)?;
        let store = self.store.clone();
        blocking(move || {
            session.read_events(&store, from, |event| out.blocking_send(event).is_ok())
        })
        .await
    }

    /// `session/close`: cancels work, waits for the turn to stop, stops the
    /// servers, and closes the log. The session stays loadable.
    ///
    /// # Errors
    /// The session is not open.
    pub async fn close_session(&self, id: &SessionId) -> Result<(), AgentError> {
        let session = self
            .sessions()
            .remove(id)
            .ok_or_else(|| AgentError::SessionNotFound(id.to_string()))?;
        session
            .close(CLOSE_GRACE)
            .instrument(tracing::info_span!("session", session = %id))
            .await;
        tracing::info!(session = %id, "session closed");
        drop(session);
        self.give_back_memory(true);
        Ok(())
    }

    /// `session/delete`: closes the session if open and removes its log
    /// and its checkpoints, and its subagents' logs and checkpoints.
    ///
    /// # Errors
    /// Unknown or locked session, or the file cannot be removed.
    pub async fn delete_session(&self, id: &SessionId) -> Result<(), AgentError> {
        self.store.path(id.as_str())?;
        if self.live(id).is_some() {
            self.close_session(id).await?;
        }
        let (store, home) = (self.store.clone(), self.config.home.clone());
        let id = id.to_string();
        blocking(move || {
            store.delete(&id)?;
            crate::checkpoint::Store::new(&home, &id).remove();
            listing::delete_subagents(&store, &home, id);
            Ok(())
        })
        .await
    }

    /// `session/list`: newest first, optionally only sessions whose cwd is
    /// `cwd`, paged with an opaque cursor; subagents' sessions only when
    /// `subagents` asks for them.
    ///
    /// # Errors
    /// A malformed cursor.
    pub async fn list_sessions(
        &self,
        cwd: Option<&Path>,
        cursor: Option<&str>,
        subagents: bool,
    ) -> Result<SessionPage, AgentError> {
        let store = self.store.clone();
        let (cwd, cursor) = (cwd.map(Path::to_path_buf), cursor.map(str::to_owned));
        let page_size = self.config.list_page_size;
        blocking(move || {
            listing::page(
                &store,
                cwd.as_deref(),
                cursor.as_deref(),
                page_size,
                subagents,
            )
        })
        .await
    }

    /// `session/set_config_option`: validates, records (the editor is told
    /// through `out`), and returns every option.
    ///
    /// # Errors
    /// Unknown session, option or value.
    pub fn set_config_option(
        &self,
        id: &SessionId,
        key: ConfigKey,
        value: &str,
        out: &dyn Frontend,
    ) -> Result<Vec<ConfigOption>, AgentError> {
        let session = self.session(id)?;
        Settings::check(&self.config().choices, key, value)?;
        tracing::info!(session = %id, key = key.as_str(), value, "setting changed");
        session.record(
            EventData::Config {
                key,
                value: value.to_owned(),
            },
            out,
        )?;
        Ok(session.options())
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

    /// Stops every session (client EOF or signal), all at once, within one
    /// budget: turns are cancelled, servers stopped, logs flushed and
    /// closed.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let sessions: Vec<Arc<Session>> = self
            .sessions()
            .drain()
            .map(|(_, session)| session)
            .collect();
        let tracker = tokio_util::task::TaskTracker::new();
        for session in sessions {
            tracker.spawn(async move { session.close(SHUTDOWN_BUDGET).await });
        }
        tracker.close();
        if tokio::time::timeout(SHUTDOWN_BUDGET, tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("sessions did not all stop within {SHUTDOWN_BUDGET:?} of shutdown");
        }
    }
}

/// Runs blocking work (the disk) off the async workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, AgentError> + Send + 'static,
) -> Result<T, AgentError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(err) => Err(AgentError::bug("request", &err)),
    }
}

struct NoEnv;
impl crate::credentials::Env for NoEnv {
    fn var(&self, _name: &str) -> Option<String> {
        None
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
