//! The SDK's live sessions, shared by every connection: what a session's
//! subscribers hear, its open permission asks, who holds it, and its
//! running prompt.
//!
//! Subscribers hear the session log's events as they are recorded (the
//! identity projection: an event is shown as stored), plus the transient
//! notices no event carries: streamed deltas, the session's status, and
//! permission asks a client is to answer. Every notice is serialized once
//! and broadcast; each carries the seq of the last event recorded before it
//! (`after`), so a subscriber that replays the log can tell which deltas it
//! has already seen whole.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use dsh_protocol::log::{ConfigKey, StopReason};
use dsh_protocol::question::QuestionAnswer;
use dsh_protocol::{SessionId, UserContent};
use serde_json::value::RawValue;
use tokio::sync::{broadcast, oneshot};

use crate::agent::Agent;
use crate::error::AgentError;
use crate::mcp::McpServerConfig;
use crate::permission::{Answer, Approvals, Question};
use crate::session::Subscriber;

pub use super::item::{AskedCall, Item, OfferedOption, WakeMark};

mod frontend;
mod wakeup;

/// A connection: 0 is stdio; WebSocket connections count from 1.
pub type ConnId = usize;

/// Notices a subscriber may fall behind by before it re-reads the log.
const BROADCAST_CAPACITY: usize = 1024;

/// What a notice is, for the subscriber that forwards it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoticeKind {
    /// A logged event with this seq.
    Event(u64),
    /// A streamed delta.
    Delta,
    /// A status change.
    Status,
    /// A goal's status after the logged event with this seq (a replay's own).
    Goal(u64),
    /// The session closed: the last notice.
    Closed,
    /// A permission ask with this request id.
    Ask(String),
}

/// One notification's payload, serialized once for every subscriber.
#[derive(Debug)]
pub struct Notice {
    /// What it is.
    pub kind: NoticeKind,
    /// The seq of the last event recorded when this was sent.
    pub after: u64,
    /// `{"kind": ...}`.
    pub json: Box<RawValue>,
}

/// The running prompt.
#[derive(Debug, Clone)]
struct Running {
    message_id: String,
    conn: ConnId,
    /// A wake-up turn's mark.
    wakeup: Option<WakeMark>,
}

/// An ask waiting for `session/respond`.
struct Ask {
    conn: ConnId,
    question: Question,
    notice: Arc<Notice>,
    answer: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct Live {
    holders: HashSet<ConnId>,
    running: Option<Running>,
    asks: HashMap<String, Ask>,
    next_ask: u64,
    /// The cost of the latest usage update (the session's so far).
    cost: Option<dsh_protocol::model::Cost>,
}

/// What a new subscriber starts from.
pub struct Snapshot {
    /// Every notice sent after the snapshot.
    pub live: broadcast::Receiver<Arc<Notice>>,
    /// The last event recorded before it.
    pub last_seq: u64,
    /// The status then.
    pub status: Arc<Notice>,
    /// The asks open then.
    pub asks: Vec<Arc<Notice>>,
}

/// One live session as the SDK serves it; the front end its turns and
/// settings report to.
pub struct SdkSession {
    /// Its id.
    pub id: SessionId,
    /// The hub let it go (closed, deleted, orphaned): once.
    forgotten: std::sync::atomic::AtomicBool,
    approvals: Mutex<Approvals>,
    tx: broadcast::Sender<Arc<Notice>>,
    last_seq: AtomicU64,
    live: Mutex<Live>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SdkSession {
    fn new(id: SessionId, last_seq: u64) -> Arc<SdkSession> {
        Arc::new(SdkSession {
            id,
            forgotten: std::sync::atomic::AtomicBool::new(false),
            approvals: Mutex::new(Approvals::Never),
            tx: broadcast::channel(BROADCAST_CAPACITY).0,
            last_seq: AtomicU64::new(last_seq),
            live: Mutex::new(Live::default()),
        })
    }

    /// Broadcasts a notice under the lock that orders notices against
    /// snapshots.
    fn notify(
        &self,
        _live: &MutexGuard<'_, Live>,
        kind: NoticeKind,
        item: &Item<'_>,
    ) -> Arc<Notice> {
        let notice = Arc::new(Notice {
            kind,
            after: self.last_seq.load(Ordering::Acquire),
            json: item.to_raw(),
        });
        // No subscriber is not an error.
        let _ = self.tx.send(notice.clone());
        notice
    }

    fn status_item(live: &Live) -> Item<'_> {
        Item::Status {
            status: if live.running.is_some() {
                "running"
            } else {
                "idle"
            },
            message_id: live.running.as_ref().map(|run| run.message_id.as_str()),
            stop_reason: None,
            error: None,
            cost: live.cost.as_ref(),
            wakeup: live.running.as_ref().and_then(|run| run.wakeup.as_ref()),
        }
    }

    /// Subscribes: every notice after this moment, and the state at it.
    pub fn subscribe(&self, conn: ConnId) -> Snapshot {
        let mut live = lock(&self.live);
        live.holders.insert(conn);
        let status = Arc::new(Notice {
            kind: NoticeKind::Status,
            after: self.last_seq.load(Ordering::Acquire),
            json: Self::status_item(&live).to_raw(),
        });
        Snapshot {
            live: self.tx.subscribe(),
            last_seq: self.last_seq.load(Ordering::Acquire),
            status,
            asks: live.asks.values().map(|ask| ask.notice.clone()).collect(),
        }
    }

    /// Whether the ask is still open.
    pub fn asks(&self, request_id: &str) -> bool {
        lock(&self.live).asks.contains_key(request_id)
    }

    fn set_approvals(&self, approvals: Approvals) {
        *lock(&self.approvals) = approvals;
    }

    /// Answers an open ask.
    fn respond(&self, request_id: &str, option_id: &str) -> Result<(), AgentError> {
        let mut live = lock(&self.live);
        let ask = live.asks.get(request_id).ok_or_else(|| {
            AgentError::InvalidParams(format!(
                "no open permission request {request_id:?} in session {}",
                self.id
            ))
        })?;
        if let Question::User(_) = ask.question {
            return Err(AgentError::InvalidParams(format!(
                "{request_id:?} is a question: answer it with session/answer"
            )));
        }
        let outcome = ask.question.answer(option_id).ok_or_else(|| {
            let offered: Vec<&str> = ask.question.options().iter().map(|o| o.id).collect();
            AgentError::InvalidParams(format!(
                "option {option_id:?} was not offered; choose one of {offered:?}"
            ))
        })?;
        if let Some(ask) = live.asks.remove(request_id) {
            let _ = ask.answer.send(outcome);
        }
        Ok(())
    }

    /// Answers an open question (`ask_user_question`).
    fn answer(&self, request_id: &str, given: Vec<QuestionAnswer>) -> Result<(), AgentError> {
        let mut live = lock(&self.live);
        let ask = live.asks.get(request_id).ok_or_else(|| {
            AgentError::InvalidParams(format!(
                "no open question {request_id:?} in session {}",
                self.id
            ))
        })?;
        let Question::User(questions) = &ask.question else {
            return Err(AgentError::InvalidParams(format!(
                "{request_id:?} is a permission request: answer it with session/respond"
            )));
        };
        let answers =
            dsh_protocol::question::settle(questions, given).map_err(AgentError::InvalidParams)?;
        if let Some(ask) = live.asks.remove(request_id) {
            let _ = ask.answer.send(Answer::Questions(answers));
        }
        Ok(())
    }

    /// Denies the open asks (all, or those of prompts `conn` sent).
    fn deny_asks(&self, conn: Option<ConnId>, outcome: Answer) {
        let mut live = lock(&self.live);
        let ids: Vec<String> = live
            .asks
            .iter()
            .filter(|(_, ask)| conn.is_none_or(|conn| ask.conn == conn))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            if let Some(ask) = live.asks.remove(&id) {
                tracing::info!(session = %self.id, request = %id, ?outcome, "permission ask denied");
                let _ = ask.answer.send(outcome.clone());
            }
        }
    }

    /// Marks the prompt (or a wake-up turn) running and says so.
    pub(super) fn started(&self, message_id: &str, conn: ConnId, wakeup: Option<WakeMark>) {
        let mut live = lock(&self.live);
        live.running = Some(Running {
            message_id: message_id.to_owned(),
            conn,
            wakeup,
        });
        let item = Self::status_item(&live);
        self.notify(&live, NoticeKind::Status, &item);
    }

    /// Marks the prompt's turn (or a wake-up turn) finished and says how.
    pub(super) fn finished(
        &self,
        message_id: &str,
        outcome: &Result<StopReason, AgentError>,
        wakeup: Option<&WakeMark>,
    ) {
        let mut live = lock(&self.live);
        // The next prompt in line may have started already.
        if live
            .running
            .as_ref()
            .is_some_and(|running| running.message_id == message_id)
        {
            live.running = None;
        }
        self.ended(&live, ("idle", wakeup), message_id, outcome);
    }

    /// A prompt that waited ended without a turn of its own: cancelled in
    /// line, or steered into a turn that ended.
    fn answered(&self, message_id: &str, outcome: &Result<StopReason, AgentError>) {
        let live = lock(&self.live);
        self.ended(&live, ("answered", None), message_id, outcome);
    }

    fn ended(
        &self,
        live: &MutexGuard<'_, Live>,
        (status, wakeup): (&'static str, Option<&WakeMark>),
        message_id: &str,
        outcome: &Result<StopReason, AgentError>,
    ) {
        let (stop_reason, error) = match outcome {
            Ok(stop) => (Some(*stop), None),
            Err(error) => (None, Some(error.rpc_data())),
        };
        let item = Item::Status {
            status,
            message_id: Some(message_id),
            stop_reason,
            error,
            cost: live.cost.as_ref(),
            wakeup,
        };
        self.notify(live, NoticeKind::Status, &item);
    }

    /// A prompt waits behind the running turn (`queued`) or for it to take
    /// it in (`steering`).
    fn waiting(&self, message_id: &str, delivery: crate::session::PromptDelivery) {
        let live = lock(&self.live);
        let item = Item::Status {
            status: match delivery {
                crate::session::PromptDelivery::Queue => "queued",
                crate::session::PromptDelivery::Steer => "steering",
            },
            message_id: Some(message_id),
            stop_reason: None,
            error: None,
            cost: live.cost.as_ref(),
            wakeup: None,
        };
        self.notify(&live, NoticeKind::Status, &item);
    }

    /// Says the session closed (subscriptions end after this).
    fn closed(&self) {
        let live = lock(&self.live);
        let item = Item::Status {
            status: "closed",
            message_id: None,
            stop_reason: None,
            error: None,
            cost: live.cost.as_ref(),
            wakeup: None,
        };
        self.notify(&live, NoticeKind::Closed, &item);
    }
}

/// `session/new`'s and `session/resume`'s settings.
#[derive(Debug, Default)]
pub struct Opening {
    /// Who answers asks.
    pub approvals: Approvals,
    /// Model id.
    pub model: Option<String>,
    /// Thinking level.
    pub thought_level: Option<String>,
    /// Permission mode (over the one `approvals` implies).
    pub mode: Option<String>,
    /// MCP servers.
    pub mcp_servers: Vec<McpServerConfig>,
}

/// What the SDK serves: the agent's live sessions, each with its SDK
/// subscriber ([`SdkSession`], kept by the session itself).
pub struct Hub {
    /// The agent core.
    pub agent: Arc<Agent>,
    /// Cancelled by `shutdown`.
    pub stop: tokio_util::sync::CancellationToken,
    /// The running prompts.
    pub tasks: tokio_util::task::TaskTracker,
}

impl Hub {
    /// A hub over the agent.
    pub fn new(agent: Arc<Agent>) -> Arc<Hub> {
        Arc::new(Hub {
            agent,
            stop: tokio_util::sync::CancellationToken::new(),
            tasks: tokio_util::task::TaskTracker::new(),
        })
    }

    /// The live session's SDK subscriber, if the SDK serves it (read
    /// without waiting: nothing is awaited between finding a session and
    /// sending it a prompt or noting who holds it).
    fn live(&self, id: &SessionId) -> Option<Arc<SdkSession>> {
        let core = self.agent.session(id).ok()?;
        core.subscriber::<SdkSession>()
            .filter(|session| !session.forgotten.load(Ordering::Acquire))
    }

    /// Every live session's SDK subscriber.
    fn every_live(&self) -> Vec<Arc<SdkSession>> {
        self.agent
            .live_sessions()
            .iter()
            .filter_map(|core| core.subscriber::<SdkSession>())
            .filter(|session| !session.forgotten.load(Ordering::Acquire))
            .collect()
    }

    /// The session's SDK subscriber, made (with its waker) the first time.
    async fn adopt(&self, id: &SessionId, conn: ConnId) -> Result<Arc<SdkSession>, AgentError> {
        if let Some(session) = self.live(id) {
            lock(&session.live).holders.insert(conn);
            return Ok(session);
        }
        let core = self.agent.session(id)?;
        let made = {
            let (core, agent, tasks) = (
                core.clone(),
                Arc::downgrade(&self.agent),
                self.tasks.clone(),
            );
            move || {
                let session = SdkSession::new(core.id.clone(), core.last_seq());
                wakeup::install(agent, tasks, &core, &session);
                session
            }
        };
        let session = core
            .attach(made)
            .await
            .filter(|session| !session.forgotten.load(Ordering::Acquire))
            .ok_or_else(|| AgentError::SessionClosed(id.to_string()))?;
        lock(&session.live).holders.insert(conn);
        Ok(session)
    }

    /// `session/new`.
    ///
    /// # Errors
    /// As the agent's, and bad settings (checked before anything is
    /// created).
    pub async fn new_session(
        &self,
        cwd: PathBuf,
        opening: Opening,
        conn: ConnId,
    ) -> Result<Arc<SdkSession>, AgentError> {
        let settings = self.check(&opening).await?;
        let opened = self
            .agent
            .new_session(&cwd, &[], opening.mcp_servers)
            .await?;
        self.settle(opened, opening.approvals, &settings, conn)
            .await
    }

    /// `session/resume`: opens a stored session (or finds the live one)
    /// with new settings.
    ///
    /// # Errors
    /// As the agent's, and bad settings.
    pub async fn resume(
        &self,
        id: &SessionId,
        opening: Opening,
        conn: ConnId,
    ) -> Result<Arc<SdkSession>, AgentError> {
        let settings = self.check(&opening).await?;
        let opened = self.agent.resume_session(id, opening.mcp_servers).await?;
        self.settle(opened, opening.approvals, &settings, conn)
            .await
    }

    /// `session/fork`: a new session with `parent`'s history up to its
    /// last completed turn, in `cwd` (the parent's by default).
    ///
    /// # Errors
    /// As the agent's, and bad settings.
    pub async fn fork(
        &self,
        parent: &SessionId,
        cwd: Option<PathBuf>,
        opening: Opening,
        conn: ConnId,
    ) -> Result<Arc<SdkSession>, AgentError> {
        let settings = self.check(&opening).await?;
        let cwd = match cwd {
            Some(cwd) => cwd,
            None => self.agent.stored_cwd(parent).await?,
        };
        let opened = self
            .agent
            .fork_session(parent, &cwd, &[], opening.mcp_servers)
            .await?;
        self.settle(opened, opening.approvals, &settings, conn)
            .await
    }

    /// The settings to record, validated.
    async fn check(&self, opening: &Opening) -> Result<Vec<(ConfigKey, String)>, AgentError> {
        let mode = opening.mode.as_deref().or(opening.approvals.mode());
        let settings: Vec<(ConfigKey, String)> = [
            (ConfigKey::Mode, mode),
            (ConfigKey::Model, opening.model.as_deref()),
            (ConfigKey::ThoughtLevel, opening.thought_level.as_deref()),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some((key, value?.to_owned())))
        .collect();
        let given: Vec<(ConfigKey, &str)> = settings
            .iter()
            .map(|(key, value)| (*key, value.as_str()))
            .collect();
        self.agent.validate_settings(&given).await?;
        Ok(settings)
    }

    async fn settle(
        &self,
        opened: crate::agent::Opened,
        approvals: Approvals,
        settings: &[(ConfigKey, String)],
        conn: ConnId,
    ) -> Result<Arc<SdkSession>, AgentError> {
        for notice in &opened.notices {
            tracing::warn!(session = %opened.session.id, "{notice}");
        }
        let id = opened.session.id.clone();
        let session = self.adopt(&id, conn).await?;
        session.set_approvals(approvals);
        for (key, value) in settings {
            self.agent.set_config_option(&id, *key, value, &*session)?;
        }
        Ok(session)
    }

    /// The session, opening a stored one (with the default settings) if it
    /// is not live.
    ///
    /// # Errors
    /// Unknown, unreadable or locked session.
    pub async fn open(&self, id: &SessionId, conn: ConnId) -> Result<Arc<SdkSession>, AgentError> {
        if let Some(session) = self.live(id) {
            lock(&session.live).holders.insert(conn);
            return Ok(session);
        }
        if self.agent.session(id).is_ok() {
            return self.adopt(id, conn).await;
        }
        self.resume(id, Opening::default(), conn).await
    }

    /// `session/prompt`: submits the prompt (it runs now, waits in line,
    /// or is steered into the running turn) and returns its receipt.
    ///
    /// It is sent to the session's owner before anything is awaited when
    /// the session is live, so prompts sent back to back line up in the
    /// order they came and a `session/interrupt` right behind finds it
    /// (each line's call is a task of its own, and the current-thread
    /// runtime starts them in the order they were read); a
    /// missing credential fails the prompt's turn (its `idle` status says
    /// so).
    ///
    /// # Errors
    /// Unknown session, bad content, a full line.
    pub async fn prompt(
        self: &Arc<Self>,
        id: &SessionId,
        content: Vec<UserContent>,
        delivery: crate::session::PromptDelivery,
        conn: ConnId,
    ) -> Result<String, AgentError> {
        self.agent.check_prompt(&content)?;
        let session = self.open(id, conn).await?;
        let core = self.agent.session(id)?;
        let message_id = uuid::Uuid::new_v4().to_string();
        let own_turn = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let on_start = {
            let (session, message_id, own_turn) =
                (session.clone(), message_id.clone(), own_turn.clone());
            Box::new(move || {
                own_turn.store(true, Ordering::SeqCst);
                session.started(&message_id, conn, None);
            })
        };
        let submitted = self
            .agent
            .submit(
                id,
                content,
                delivery,
                Subscriber::new(session.clone()),
                on_start,
            )?
            .admitted()
            .await?;
        if submitted.waiting {
            session.waiting(&message_id, delivery);
        }
        let receipt = message_id.clone();
        self.tasks.spawn(async move {
            let outcome = submitted.done.await;
            if let Err(error) = &outcome {
                tracing::warn!(session = %session.id, code = error.code().as_str(), "prompt failed: {error}");
            }
            if own_turn.load(Ordering::SeqCst) {
                session.finished(&message_id, &outcome, None);
            } else {
                session.answered(&message_id, &outcome);
            }
            // A job that ended in the turn, unheard, wakes the session
            // (not after a cancel or a failure: the next prompt hears it).
            if matches!(outcome, Ok(StopReason::EndTurn)) {
                core.wakeups.after_turn(&core);
            }
        });
        Ok(receipt)
    }

    /// `session/interrupt`: cancels the turn; its open asks are cancelled.
    pub fn interrupt(&self, id: &SessionId) {
        self.agent.cancel(id);
        if let Some(session) = self.live(id) {
            session.deny_asks(None, Answer::Cancelled);
        }
    }

    /// `session/respond`.
    ///
    /// # Errors
    /// Unknown session or ask, or an option that was not offered.
    pub fn respond(
        &self,
        id: &SessionId,
        request_id: &str,
        option_id: &str,
    ) -> Result<(), AgentError> {
        self.live(id)
            .ok_or_else(|| AgentError::SessionNotFound(id.to_string()))?
            .respond(request_id, option_id)
    }

    /// `session/answer`.
    ///
    /// # Errors
    /// Unknown session or question, or answers that fit no question.
    pub fn answer(
        &self,
        id: &SessionId,
        request_id: &str,
        answers: Vec<QuestionAnswer>,
    ) -> Result<(), AgentError> {
        self.live(id)
            .ok_or_else(|| AgentError::SessionNotFound(id.to_string()))?
            .answer(request_id, answers)
    }

    /// `session/close`.
    ///
    /// # Errors
    /// The session is not open.
    pub async fn close(&self, id: &SessionId) -> Result<(), AgentError> {
        match self.live(id) {
            Some(session) => {
                self.forget(&session).await;
                Ok(())
            }
            None => self.agent.close_session(id).await,
        }
    }

    /// `session/delete`.
    ///
    /// # Errors
    /// As the agent's.
    pub async fn delete(&self, id: &SessionId) -> Result<(), AgentError> {
        if let Some(session) = self.live(id) {
            self.forget(&session).await;
        }
        self.agent.delete_session(id).await
    }

    /// Lets a session go (to close it): asks denied, the core session
    /// closed (its subscriber goes with it), subscribers told. Once.
    async fn forget(&self, session: &Arc<SdkSession>) {
        if session.forgotten.swap(true, Ordering::AcqRel) {
            return;
        }
        session.deny_asks(None, Answer::Unavailable);
        let _ = self.agent.close_session(&session.id).await;
        session.closed();
    }

    /// A connection went away: the asks of prompts it sent are denied, and
    /// sessions nobody holds any more are closed (they stay resumable).
    pub async fn disconnected(&self, conn: ConnId) {
        for session in self.every_live() {
            session.deny_asks(Some(conn), Answer::Unavailable);
            let orphaned = {
                let mut live = lock(&session.live);
                live.holders.remove(&conn) && live.holders.is_empty()
            };
            if orphaned {
                tracing::info!(session = %session.id, conn, "closing a session no connection holds");
                self.forget(&session).await;
            }
        }
    }

    /// Stops every session (shutdown, stdin's end).
    pub async fn shutdown(&self) {
        let sessions = self.every_live();
        for session in &sessions {
            session.forgotten.store(true, Ordering::Release);
            session.deny_asks(None, Answer::Unavailable);
        }
        self.agent.shutdown().await;
        for session in &sessions {
            session.closed();
        }
        self.tasks.close();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), self.tasks.wait()).await;
    }
}
