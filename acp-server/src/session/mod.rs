//! One live session: its header, roots, log writer and derived state, its
//! language servers and MCP servers, and the lock that lets one turn run at
//! a time. Every durable fact goes through [`Session::record`]: appended to
//! the log, folded into the state, projected into updates for the editor.

mod children;
pub(crate) mod extensions;
pub(crate) mod fork;
mod inbox;
mod mailbox;
mod owner;
mod residency;
#[cfg(test)]
pub(crate) mod scratch;
pub(crate) mod state;
pub(crate) mod wakeups;

pub(crate) use inbox::Joined;
pub use inbox::{Admission, PromptDelivery, Waited, Waiting, LIMIT as QUEUE_LIMIT};
pub use mailbox::Admitting;
pub(crate) use owner::Boundary;
pub use owner::Subscriber;
pub(crate) use residency::Residency;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use dsh_protocol::log::{Event, EventData, SessionHeader};
use dsh_protocol::model::ChatMessage;
use dsh_protocol::SessionId;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::error::AgentError;
use crate::frontend::Frontend;
use crate::permission::{self, Access, Decision, Mode};
use crate::projection::Delivery;
use crate::store::{LogWriter, SessionStore};
use crate::update::ConfigOption;
use state::SessionState;

/// A new session's header: a fresh id, now.
pub(crate) fn new_header(cwd: String, roots: Vec<String>) -> SessionHeader {
    SessionHeader::new(
        SessionId::new(uuid::Uuid::new_v4().to_string()),
        crate::store::now_ms(),
        cwd,
        roots,
    )
}

/// The log writer and the state, behind one lock so the order of the log
/// is the order of the fold.
pub(crate) struct Locked {
    /// `None` once the session is closed: nothing more is written.
    log: Option<LogWriter>,
    pub(crate) state: SessionState,
    /// When the session last recorded an event or ended a turn.
    active_at: std::time::Instant,
}

/// One live session.
pub struct Session {
    /// Id.
    pub id: SessionId,
    /// Header (cwd, roots, creation time).
    pub header: SessionHeader,
    /// Canonical workspace roots (cwd first), for the permission policy.
    pub roots: Vec<PathBuf>,
    /// Private directory for tool outputs too long to inline.
    pub spill_dir: PathBuf,
    /// Background jobs.
    pub jobs: crate::jobs::Jobs,
    /// Persistent terminals (`terminal_*`).
    pub terminals: crate::tools::Terminals,
    /// Whether a job's end starts a turn of its own ([`wakeups`]).
    pub(crate) wakeups: wakeups::Wakeups,
    /// Its owner, which decides what runs next ([`owner`]).
    mailbox: mailbox::Mailbox,
    config: Arc<Config>,
    /// The session's language servers, created on first use.
    bridge: std::sync::OnceLock<Arc<dsh_lsp_bridge::Bridge>>,
    /// The session's MCP servers (when the client passes some).
    mcp: Mutex<Option<Arc<crate::mcp::McpHub>>>,
    /// Where its log is read from (an evicted history is rebuilt from it).
    store: SessionStore,
    /// The process's budget for histories in memory.
    residency: Arc<Residency>,
    /// Where its requests are sent from ([`Session::spool`]).
    spool: Arc<crate::model::spool::SpoolSlot>,
    locked: Mutex<Locked>,
    /// The slash commands the editor was last offered ([`extensions`]).
    offered: Mutex<Option<Vec<crate::context::commands::Offered>>>,
    /// Its skills and custom commands as last found, and their files'
    /// stamps ([`extensions`]).
    discovery: Arc<Mutex<crate::context::discovery::Discovery>>,
    /// Cancelled when the session closes (and on shutdown, its parent).
    closed: CancellationToken,
    /// The user was told that commands run without a sandbox here.
    told_unsandboxed: std::sync::atomic::AtomicBool,
    /// Its language and MCP servers are its parent's (a subagent): they
    /// are not stopped when it closes.
    borrowed_servers: std::sync::atomic::AtomicBool,
    /// Its subagents while they live (they follow its mode), and the
    /// continuable ones until it closes ([`children`]).
    children: children::Children,
    /// What the file tools may read of `$DSH_HOME`: its spilled outputs,
    /// the user's skills and commands.
    home_readable: Vec<PathBuf>,
}

/// A prompt that holds its session's turn (its owner made it).
pub struct TurnTicket {
    pub(crate) session: Arc<Session>,
    pub(crate) cancel: CancellationToken,
    /// False only for a ticket whose hand-off failed (the owner took the
    /// turn back).
    armed: bool,
}

impl TurnTicket {
    /// Cancels this turn (same as `session/cancel`).
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }
}

impl Drop for TurnTicket {
    fn drop(&mut self) {
        if self.armed {
            self.session.turn_over();
        }
        self.session.mailbox.ticket_dropped(self.armed);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Session {
    /// A session over its log: `state` as restored from `events` (or new).
    pub(crate) fn new(
        config: Arc<Config>,
        header: SessionHeader,
        state: SessionState,
        log: LogWriter,
        parent: &CancellationToken,
        residency: &Arc<Residency>,
    ) -> Arc<Session> {
        let roots = crate::tools::canonical_roots(&header.cwd, &header.roots);
        let spill_dir = config.home.join("spill").join(header.id.as_str());
        let store = SessionStore::new(config.sessions_dir());
        let spool = Arc::new(crate::model::spool::SpoolSlot::new(store.dir().to_owned()));
        let home = config.protected.home();
        let home_readable = vec![
            home.join("spill").join(header.id.as_str()),
            home.join("skills"),
            home.join("commands"),
        ];
        let session = Arc::new_cyclic(|me| Session {
            id: header.id.clone(),
            roots,
            jobs: crate::jobs::Jobs::new(config.jobs.clone(), spill_dir.clone()),
            terminals: crate::tools::Terminals::default(),
            wakeups: Default::default(),
            mailbox: mailbox::Mailbox::start(me.clone()),
            spill_dir,
            config,
            bridge: std::sync::OnceLock::new(),
            mcp: Mutex::new(None),
            store,
            residency: residency.clone(),
            spool,
            header,
            locked: Mutex::new(Locked {
                log: Some(log),
                state,
                active_at: std::time::Instant::now(),
            }),
            offered: Mutex::default(),
            discovery: Arc::default(),
            closed: parent.child_token(),
            told_unsandboxed: std::sync::atomic::AtomicBool::new(false),
            borrowed_servers: std::sync::atomic::AtomicBool::new(false),
            children: children::Children::default(),
            home_readable,
        });
        residency.enter(&session);
        session
    }

    /// The process's budget for histories in memory (a subagent shares
    /// its parent's).
    pub(crate) fn residency(&self) -> &Arc<Residency> {
        &self.residency
    }

    /// A subagent uses its parent's language servers and MCP servers
    /// (the same tools, no second set of processes); closing it leaves
    /// them running.
    pub(crate) fn borrow_servers(&self, parent: &Arc<Session>) {
        self.borrowed_servers
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = self.bridge.set(parent.bridge());
        *lock(&self.mcp) = parent.mcp();
    }

    /// How deep a subagent it is: 0 for a session a front end opened.
    pub fn depth(&self) -> u32 {
        self.header
            .subagent_of
            .as_ref()
            .map_or(0, |origin| origin.depth)
    }

    /// The log and the state (a short-held lock; never across an await).
    pub(crate) fn locked(&self) -> MutexGuard<'_, Locked> {
        lock(&self.locked)
    }

    /// Records a fact: appends it to the log, folds it into the state and
    /// sends what it projects to (see [`crate::projection`]) to `out`.
    ///
    /// # Errors
    /// The write failed (nothing was recorded), or the session is closed.
    pub fn record(&self, data: EventData, out: &dyn Frontend) -> Result<Event, AgentError> {
        let (event, updates, (from, web_before), (to, web)) = {
            let mut locked = self.locked();
            let before = (locked.state.settings.mode, locked.state.settings.web);
            let log = locked
                .log
                .as_mut()
                .ok_or_else(|| AgentError::SessionClosed(self.id.to_string()))?;
            let event = log.append(data)?;
            locked.active_at = std::time::Instant::now();
            let updates = locked
                .state
                .fold(&event, &self.config.choices, Delivery::Live);
            let settings = &locked.state.settings;
            (event, updates, before, (settings.mode, settings.web))
        };
        out.emit(crate::frontend::Output::Recorded {
            event: &event,
            updates,
        });
        if from != to {
            self.mode_changed(from, to, out);
        }
        if web != web_before {
            // Its subagents leave (or may use) the web with it.
            let value = crate::settings::switch_value(web);
            self.tell_children(dsh_protocol::log::ConfigKey::Web, value);
        }
        Ok(event)
    }

    /// Records a setting the session's live subagents follow (its mode,
    /// its web switch) in each of them.
    fn tell_children(&self, key: dsh_protocol::log::ConfigKey, value: &str) {
        for child in self.live_children() {
            let value = value.to_owned();
            let changed = child.record(EventData::Config { key, value }, &crate::frontend::Nobody);
            if let Err(err) = changed {
                tracing::debug!(session = %child.id, %err, key = key.as_str(), "a subagent's setting did not follow");
            }
        }
    }

    /// Every change of mode (`session/config`, `/mode`, `/plan`, an
    /// approved plan, an SDK `mode`) comes through [`Self::record`]: the
    /// background jobs started in a looser mode than the new one are
    /// killed (their sandbox is the old mode's), and the user is told.
    fn mode_changed(&self, from: Mode, to: Mode, out: &dyn Frontend) {
        // Its subagents' calls are decided, and their commands confined,
        // by the mode the user chose now (their looser jobs stop too).
        self.tell_children(dsh_protocol::log::ConfigKey::Mode, to.as_str());
        let killed = self.jobs.mode_changed(from, to);
        let closed = self.terminals.mode_changed(to); // looser terminals close too
        if killed.is_empty() && closed.is_empty() {
            return;
        }
        let jobs: Vec<String> = killed
            .iter()
            .map(|job| {
                format!(
                    "{} (`{}`, started in {})",
                    job.id,
                    dsh_protocol::content::visible_title(
                        job.command.lines().next().unwrap_or(""),
                        60
                    ),
                    job.mode.as_str()
                )
            })
            .chain(closed)
            .collect();
        let text = format!(
            "The session's mode changed from {} to {}: stopped the background {} that ran with a looser mode's sandbox: {}.",
            from.as_str(),
            to.as_str(),
            if jobs.len() == 1 { "job" } else { "jobs" },
            jobs.join(", ")
        );
        if let Err(err) = self.record(EventData::Notice { text }, out) {
            tracing::debug!(session = %self.id, %err, "the notice of stopped jobs was not recorded");
        }
    }

    /// Replays the session to `out` from its log as far as it is written
    /// now, read a line at a time (blocking: call it on a blocking thread).
    ///
    /// # Errors
    /// The session is closed, or its log cannot be read.
    pub(crate) fn replay(
        &self,
        store: &SessionStore,
        out: &dyn Frontend,
    ) -> Result<(), AgentError> {
        let mut events = self.read_written(store)?;
        events
            .read_ahead(|events| {
                SessionState::restore(&self.config.choices, events, Some(out), &|call| {
                    self.jobs.runs_for(call)
                })
            })
            .map(drop)
    }

    /// A reader of the session's log as far as it is written now.
    fn read_written(&self, store: &SessionStore) -> Result<crate::store::LogReader, AgentError> {
        let written = self
            .locked()
            .log
            .as_ref()
            .map(LogWriter::written)
            .ok_or_else(|| AgentError::SessionClosed(self.id.to_string()))?;
        store.read(self.id.as_str(), Some(written))
    }

    /// Reads the logged events whose seq is `from` or later, as far as the
    /// log is written now, a line at a time, until `each` says stop
    /// (blocking: call it on a blocking thread).
    ///
    /// # Errors
    /// The session is closed, or its log cannot be read.
    pub(crate) fn read_events(
        &self,
        store: &SessionStore,
        from: u64,
        mut each: impl FnMut(Event) -> bool,
    ) -> Result<(), AgentError> {
        for event in self.read_written(store)? {
            let event = event?;
            if event.seq >= from && !each(event) {
                break;
            }
        }
        Ok(())
    }

    /// The seq of the last event recorded (0 before the first).
    pub fn last_seq(&self) -> u64 {
        self.locked().log.as_ref().map_or(0, LogWriter::last_seq)
    }

    /// Every setting with its current value.
    pub fn options(&self) -> Vec<ConfigOption> {
        self.locked().state.settings.options(&self.config.choices)
    }

    /// The current permission mode.
    pub fn mode(&self) -> Mode {
        self.locked().state.settings.mode
    }

    /// The conversation the next model request would carry (an evicted
    /// history is folded again from the log first, and the budget settled,
    /// as for a request: like any reader it may drop other sessions'
    /// histories).
    ///
    /// # Errors
    /// The session is closed, or its log cannot be read.
    pub async fn history(self: &Arc<Self>) -> Result<Vec<ChatMessage>, AgentError> {
        let messages = self.resident().await?.state.history.messages();
        Ok(messages
            .into_iter()
            .map(|message| Arc::unwrap_or_clone(message).into_message())
            .collect())
    }

    /// Whether the session's model history is out of memory now (evicted
    /// while idle or for the budget; its next reader folds it again from
    /// the log).
    pub fn history_evicted(&self) -> bool {
        self.locked().state.evicted()
    }

    /// Drops the model history from memory now, whatever the session is
    /// doing: how the budget drops one (tests force it with this too).
    /// Whether it was in memory.
    pub fn evict_history(&self) -> bool {
        let mut locked = self.locked();
        if locked.log.is_none() || locked.state.evicted() {
            return false;
        }
        self.let_go_of_history(&mut locked.state);
        true
    }

    /// [`Self::evict_idle_history`]'s check, by the owner with no turn
    /// running.
    fn evict_if_idle(&self, idle: std::time::Duration) -> bool {
        if self.jobs.list().iter().any(|job| !job.has_ended()) {
            return false;
        }
        let mut locked = self.locked();
        if locked.log.is_none() || locked.state.evicted() || locked.active_at.elapsed() < idle {
            return false;
        }
        self.let_go_of_history(&mut locked.state);
        true
    }

    /// The state with the model history in memory, under the session's
    /// lock (never hold it across an await): an evicted history is folded
    /// again from the log on a blocking thread first, then the process is
    /// kept within its history budget (other sessions' histories may
    /// leave; see [`residency`]). Every reader of the history goes through
    /// here, so an eviction — idle, or for the budget mid-turn — can fall
    /// between two reads, never under one.
    ///
    /// # Errors
    /// The session is closed, or its log cannot be read.
    pub(crate) async fn resident(self: &Arc<Self>) -> Result<MutexGuard<'_, Locked>, AgentError> {
        loop {
            if self.locked().state.evicted() {
                let turn = self.residency.rebuilding().await;
                let session = self.clone();
                tokio::task::spawn_blocking(move || {
                    let _turn = turn;
                    session.rebuild_history()
                })
                .await
                .map_err(|err| AgentError::bug("rebuilding the history", &err))??;
            }
            self.residency.settle(self);
            let locked = self.locked();
            if !locked.state.evicted() {
                return Ok(locked);
            }
        }
    }

    /// Folds an evicted history again from the log as far as it is written
    /// (blocking). Events recorded while it is read are in the log too: it
    /// is read again until none came in between.
    fn rebuild_history(&self) -> Result<(), AgentError> {
        loop {
            let (written, last_seq, restored_at) = {
                let locked = self.locked();
                if !locked.state.evicted() {
                    return Ok(());
                }
                let log = locked
                    .log
                    .as_ref()
                    .ok_or_else(|| AgentError::SessionClosed(self.id.to_string()))?;
                (log.written(), log.last_seq(), locked.state.restored_at())
            };
            let started = std::time::Instant::now();
            let events = self.store.read(self.id.as_str(), Some(written))?;
            let history = SessionState::fold_history(events, restored_at)?;
            let mut locked = self.locked();
            if !locked.state.evicted() {
                return Ok(());
            }
            if locked.log.as_ref().map(LogWriter::last_seq) == Some(last_seq) {
                locked.state.restore_history(history);
                // In use now: not the first to leave for the budget (nor
                // for the idle sweep, which waits `idle_evict_s` again).
                locked.active_at = std::time::Instant::now();
                tracing::debug!(session = %self.id, events = last_seq, ms = started.elapsed().as_secs_f64() * 1000.0, "history rebuilt from the log");
                return Ok(());
            }
        }
    }

    /// True the first time it is called: the session's first command
    /// without a sandbox.
    pub(crate) fn first_unsandboxed_command(&self) -> bool {
        !self
            .told_unsandboxed
            .swap(true, std::sync::atomic::Ordering::Relaxed)
    }

    /// Cancelled when the session closes.
    pub(crate) fn closing(&self) -> CancellationToken {
        self.closed.clone()
    }

    /// What the permission policy says of a call now (mode and rules are
    /// read at this moment).
    pub(crate) fn decide(&self, tool: &str, access: &Access) -> Decision {
        let locked = self.locked();
        permission::decide(
            locked.state.settings.mode,
            tool,
            access,
            &self.policy(),
            &locked.state.rules,
        )
    }

    /// The policy's view of this session.
    pub(crate) fn policy(&self) -> permission::Context<'_> {
        permission::Context {
            roots: &self.roots,
            protected: &self.config.protected,
            trust_workspace_servers: self.config.lsp.trust_workspace_servers,
            commands: self.config.command_guard(),
            web_in_read_only: self.config.web.fetch_in_read_only,
            home_readable: &self.home_readable,
        }
    }

    /// How a command of this session runs now (`with_network`: the user
    /// allowed this one the network).
    pub(crate) fn command_run(&self, with_network: bool) -> crate::sandbox::CommandRun {
        crate::sandbox::command_run(
            crate::sandbox::Scope {
                settings: &self.config.sandbox,
                guard: self.config.command_guard(),
                hidden: self.config.protected.hidden(),
                read_only: self.config.protected.in_sandbox(),
                session: self.id.as_str(),
                roots: &self.roots,
                mode: self.mode(),
            },
            with_network,
        )
    }

    /// The session's language-server bridge (created on first use; no
    /// server starts until a query needs one). It starts a server found
    /// inside the workspace only when the policy allows launching that
    /// program now.
    pub fn bridge(self: &Arc<Self>) -> Arc<dsh_lsp_bridge::Bridge> {
        self.bridge
            .get_or_init(|| {
                let session = Arc::downgrade(self);
                let trust: dsh_lsp_bridge::Trust = Arc::new(move |program: &Path| {
                    let launch = Access::Launch {
                        program: program.to_path_buf(),
                        reads: Vec::new(),
                    };
                    // Either language-server tool's "allow" starts it.
                    session.upgrade().is_some_and(|session| {
                        [crate::tools::Tool::Lsp, crate::tools::Tool::DshLsp]
                            .iter()
                            .any(|tool| session.decide(tool.name(), &launch) == Decision::Allow)
                    })
                });
                // A server from the workspace runs in the sandbox of the
                // session's mode when it starts, as a command would.
                let session = Arc::downgrade(self);
                let confine: dsh_lsp_bridge::Confine =
                    Arc::new(move || session.upgrade()?.command_run(false).sandbox);
                dsh_lsp_bridge::Bridge::confined(
                    self.config.lsp.clone(),
                    self.roots.clone(),
                    self.config.spawner.clone(),
                    trust,
                    Some(confine),
                )
            })
            .clone()
    }

    /// The bridge, if the session has used one.
    pub(crate) fn existing_bridge(&self) -> Option<Arc<dsh_lsp_bridge::Bridge>> {
        self.bridge.get().cloned()
    }

    /// Installs the session's MCP servers, stopping any previous set.
    pub(crate) async fn set_mcp(&self, hub: Arc<crate::mcp::McpHub>) {
        let previous = lock(&self.mcp).replace(hub);
        if let Some(previous) = previous {
            previous.shutdown().await;
        }
    }

    /// The session's MCP servers.
    pub(crate) fn mcp(&self) -> Option<Arc<crate::mcp::McpHub>> {
        lock(&self.mcp).clone()
    }

    /// Stops the session: cancels its turn, waits (up to `grace`) for it to
    /// end, stops its servers, and closes its log, releasing the lock on it
    /// — a turn still running can no longer write ([`Self::close`] first
    /// closes its continuable children).
    async fn close_one(&self, grace: std::time::Duration) {
        self.closed.cancel();
        self.cancel_turn();
        let idle = self.mailbox.ask(owner::Command::Idle);
        if tokio::time::timeout(grace, idle).await.is_err() {
            tracing::warn!(session = %self.id, "the turn did not stop in time; its log is closed under it");
        }
        self.jobs.shutdown("the session closed").await;
        self.terminals.shutdown().await;
        // The jobs' ends are recorded by the owner: before the log closes.
        self.flush().await;
        let id = self.id.to_string();
        let _ = tokio::task::spawn_blocking(move || crate::sandbox::remove_private_tmp(&id)).await;
        let hub = lock(&self.mcp).take();
        if !self
            .borrowed_servers
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            if let Some(bridge) = self.bridge.get() {
                bridge.shutdown().await;
            }
            if let Some(hub) = hub {
                hub.shutdown().await;
            }
        }
        if let Some(log) = self.locked().log.take() {
            log.sync();
        }
    }

    /// Flushes the log to stable storage (a turn's end).
    pub(crate) fn sync(&self) {
        if let Some(log) = &self.locked().log {
            log.sync();
        }
    }

    /// The session's configuration.
    pub(crate) fn config(&self) -> &Arc<Config> {
        &self.config
    }
}

#[cfg(test)]
mod tests;
