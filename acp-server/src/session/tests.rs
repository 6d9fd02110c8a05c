//! Unit tests of the live session: `record` (append, fold, project,
//! send), turn tickets, closing, and replay of the written log.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_protocol::log::{ConfigKey, Event, EventData, PermissionRule};
use dsh_protocol::model::{ChatMessage, FinishReason, ToolCallRequest, Usage};
use dsh_protocol::tool::{ToolStatus, ToolView};
use dsh_protocol::{ErrorCode, ToolCallId, UserContent};

use super::scratch::Scratch;
use super::state::SessionState;
use crate::error::AgentError;
use crate::frontend::Frontend;
use crate::permission::Mode;
use crate::update::AgentUpdate;

/// What a frontend saw: a recorded event (by seq), or an update.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Event(u64),
    Update(AgentUpdate),
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Seen>>);

impl Recorder {
    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    fn updates(&self) -> Vec<AgentUpdate> {
        self.take()
            .into_iter()
            .filter_map(|seen| match seen {
                Seen::Update(update) => Some(update),
                Seen::Event(_) => None,
            })
            .collect()
    }
}

impl Frontend for Recorder {
    fn emit(&self, output: crate::frontend::Output<'_>) {
        let mut seen = self.0.lock().unwrap();
        if let crate::frontend::Output::Recorded { event, .. } = &output {
            seen.push(Seen::Event(event.seq));
        }
        seen.extend(output.into_updates().into_iter().map(Seen::Update));
    }
}

/// A new session over a log in a scratch `$DSH_HOME`, in a scratch
/// workspace.
type Fixture = Scratch;

fn fixture() -> Fixture {
    Scratch::new("", |_| {})
}

impl Fixture {
    /// The events in the log file.
    fn logged(&self) -> Vec<Event> {
        self.store
            .read(self.session.id.as_str(), None)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// What `session/load` of the live session shows.
    async fn replay(&self) -> Vec<AgentUpdate> {
        let (session, store) = (self.session.clone(), self.store.clone());
        let out = Arc::new(Recorder::default());
        let shown = out.clone();
        tokio::task::spawn_blocking(move || session.replay(&store, &*shown))
            .await
            .unwrap()
            .unwrap();
        out.updates()
    }
}

fn text_view(title: &str, text: &str) -> ToolView {
    ToolView {
        title: title.to_owned(),
        ..ToolView::text(text)
    }
}

fn config(key: ConfigKey, value: &str) -> EventData {
    EventData::Config {
        key,
        value: value.to_owned(),
    }
}

/// One turn with a reply that calls `read`, its result and an answer.
fn a_turn(call: &str) -> Vec<EventData> {
    let request = ToolCallRequest {
        id: ToolCallId::new(call),
        name: "read".to_owned(),
        arguments: "{\"file_path\":\"a.txt\"}".to_owned(),
        provider_id: None,
    };
    let reply = |step: u64, text: &str, calls: Vec<ToolCallRequest>| EventData::AssistantMessage {
        turn: 1,
        step,
        text: text.to_owned(),
        reasoning: format!("thinking {step}"),
        finish: if calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        },
        tool_calls: calls,
        usage: Some(Usage {
            input_tokens: 100 * step,
            output_tokens: 10,
            cache_read_tokens: 0,
            reasoning_tokens: 0,
        }),
        estimated_context: None,
        interrupted: false,
        model: "deepseek-v4-flash".to_owned(),
    };
    vec![
        EventData::UserMessage {
            turn: 1,
            content: vec![UserContent::text("Read a.txt")],
            steered: false,
            source: dsh_protocol::log::MessageSource::User,
        },
        EventData::Title {
            title: "Read a.txt".to_owned(),
            usage: None,
        },
        EventData::TurnStart { turn: 1 },
        reply(1, "Let me look.", vec![request]),
        EventData::ToolCall {
            turn: 1,
            call_id: ToolCallId::new(call),
            name: "read".to_owned(),
            arguments: "{\"file_path\":\"a.txt\"}".to_owned(),
            view: text_view("Read a.txt", ""),
        },
        EventData::ToolResult {
            turn: 1,
            call_id: ToolCallId::new(call),
            status: ToolStatus::Completed,
            output: "A".to_owned(),
            error: None,
            view: text_view("Read a.txt", "A"),
            attachments: Vec::new(),
            live_terminal: None,
            job: None,
            usage: None,
        },
        reply(2, "It says A.", Vec::new()),
        EventData::TurnEnd {
            turn: 1,
            stop: Some(dsh_protocol::log::StopReason::EndTurn),
            error: None,
        },
    ]
}

#[tokio::test]
async fn record_appends_folds_and_then_sends_what_the_event_projects_to() {
    let fixture = fixture();
    let session = &fixture.session;
    let out = Recorder::default();
    assert_eq!(session.last_seq(), 0);
    let event = session
        .record(config(ConfigKey::Mode, "read-only"), &out)
        .unwrap();
    assert_eq!(event.seq, 1);
    assert_eq!(session.last_seq(), 1);
    // Folded: the mode is the new one.
    assert_eq!(session.mode(), Mode::ReadOnly);
    assert_eq!(session.options()[0].current, "read-only");
    // The front end hears of the event before its updates.
    assert_eq!(
        out.take(),
        [
            Seen::Event(1),
            Seen::Update(AgentUpdate::Mode(Mode::ReadOnly)),
            Seen::Update(AgentUpdate::ConfigOptions(session.options())),
        ]
    );
    // Appended: the log holds it.
    let logged = fixture.logged();
    assert_eq!(logged, [event]);
    assert_eq!(logged[0].data, config(ConfigKey::Mode, "read-only"));
}

#[tokio::test]
async fn a_recorded_prompt_reaches_the_history_but_is_not_sent_live() {
    let fixture = fixture();
    let out = Recorder::default();
    let prompt = vec![UserContent::text("hello")];
    fixture
        .session
        .record(
            EventData::UserMessage {
                turn: 1,
                content: prompt.clone(),
                steered: false,
                source: dsh_protocol::log::MessageSource::User,
            },
            &out,
        )
        .unwrap();
    assert_eq!(out.take(), [Seen::Event(1)]);
    assert_eq!(
        fixture.session.history().await.unwrap(),
        [ChatMessage::User(prompt)]
    );
}

#[tokio::test]
async fn a_closed_session_records_nothing() {
    let fixture = fixture();
    let session = &fixture.session;
    let out = Recorder::default();
    session
        .record(EventData::TurnStart { turn: 1 }, &out)
        .unwrap();
    out.take();
    session.close(Duration::from_millis(100)).await;
    let error = session
        .record(config(ConfigKey::Mode, "read-only"), &out)
        .unwrap_err();
    assert!(matches!(error, AgentError::SessionClosed(_)), "{error:?}");
    // Its stable code is the one of a session that is not open.
    assert_eq!(error.code(), ErrorCode::SessionNotFound);
    assert_eq!(out.take(), []);
    // Neither folded nor logged.
    assert_eq!(session.mode(), Mode::Ask);
    assert_eq!(fixture.logged().len(), 1);
    // Nor replayed from a log it no longer writes.
    let (closed, store) = (session.clone(), fixture.store.clone());
    let replayed =
        tokio::task::spawn_blocking(move || closed.replay(&store, &crate::frontend::Nobody))
            .await
            .unwrap();
    assert!(matches!(replayed, Err(AgentError::SessionClosed(_))));
}

#[tokio::test]
async fn one_turn_at_a_time() {
    let fixture = fixture();
    let session = &fixture.session;
    assert!(!session.is_busy());
    let ticket = session.begin_turn().await.unwrap();
    assert!(session.is_busy());
    let Err(error) = session.begin_turn().await else {
        panic!("a second turn began");
    };
    assert!(matches!(error, AgentError::SessionBusy(_)), "{error:?}");
    assert_eq!(error.code().as_str(), "session.busy");
    drop(ticket);
    assert!(!session.is_busy());
    assert!(session.begin_turn().await.is_ok());
}

/// The turn passes from ticket to ticket in arrival order, skipping a
/// prompt cancelled in line, and a new arrival cannot overtake the line.
#[tokio::test]
async fn the_turn_is_handed_on_in_arrival_order() {
    use super::{Admission, Waited};
    let fixture = fixture();
    let session = &fixture.session;
    let Ok(Admission::Now(first)) = session.admit(None).admitted().await else {
        panic!("an idle session admits at once");
    };
    let wait = |admission| match admission {
        Ok(Admission::Waiting(waiting)) => waiting,
        _ => panic!("a busy session queues"),
    };
    let (second, third, fourth) = (
        wait(session.admit(None).admitted().await),
        wait(session.admit(None).admitted().await),
        wait(session.admit(None).admitted().await),
    );
    third.cancel_token().cancel();
    let second = tokio::spawn(second.wait());
    let third = tokio::spawn(third.wait());
    assert!(matches!(third.await.unwrap(), Waited::Cancelled));
    drop(first);
    let Waited::Turn(ticket) = second.await.unwrap() else {
        panic!("the second in line gets the turn");
    };
    // The line is not empty: a newcomer waits behind it.
    assert!(matches!(
        session.begin_turn().await,
        Err(AgentError::SessionBusy(_))
    ));
    drop(ticket);
    let Waited::Turn(ticket) = fourth.wait().await else {
        panic!("the fourth gets it next (the third left the line)");
    };
    drop(ticket);
    assert!(!session.is_busy());
}

/// A prompt cancelled in line, or whose waiter is gone, does not hold a
/// goal's rounds back: only one that will run counts as waiting.
#[tokio::test]
async fn only_a_prompt_that_will_run_counts_as_waiting() {
    use super::Admission;
    let fixture = fixture();
    let session = &fixture.session;
    let Ok(Admission::Now(_running)) = session.admit(None).admitted().await else {
        panic!("an idle session admits at once");
    };
    assert!(!session.has_waiting().await);
    let Ok(Admission::Waiting(cancelled)) = session.admit(None).admitted().await else {
        panic!("a busy session queues");
    };
    assert!(session.has_waiting().await);
    cancelled.cancel_token().cancel();
    assert!(!session.has_waiting().await);
    let Ok(Admission::Waiting(gone)) = session.admit(None).admitted().await else {
        panic!("a busy session queues");
    };
    assert!(session.has_waiting().await);
    drop(gone);
    assert!(!session.has_waiting().await);
}

/// A steer is taken out of line by the running turn and answered with the
/// turn's outcome; a steer the turn never takes runs as its own turn.
#[tokio::test]
async fn a_steer_joins_the_running_turn_or_runs_as_its_own() {
    use super::{Admission, Waited};
    use dsh_protocol::log::StopReason;
    let fixture = fixture();
    let session = &fixture.session;
    let Ok(Admission::Now(running)) = session.admit(None).admitted().await else {
        panic!("an idle session admits at once");
    };
    let Ok(Admission::Waiting(steer)) = session
        .admit(Some(vec![UserContent::text("faster")]))
        .admitted()
        .await
    else {
        panic!("a busy session takes the steer in line");
    };
    let taken = session.boundary().await.steered;
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].0, [UserContent::text("faster")]);
    for (_, joined) in taken {
        joined.answer(Ok(StopReason::EndTurn));
    }
    assert!(matches!(
        steer.wait().await,
        Waited::Joined(Ok(StopReason::EndTurn))
    ));
    let Ok(Admission::Waiting(late)) = session
        .admit(Some(vec![UserContent::text("late")]))
        .admitted()
        .await
    else {
        panic!("queued behind the running turn");
    };
    drop(running);
    assert!(matches!(late.wait().await, Waited::Turn(_)));
}

/// `session/cancel` empties the line.
#[tokio::test]
async fn cancel_ends_every_wait() {
    use super::{Admission, Waited};
    let fixture = fixture();
    let session = &fixture.session;
    let Ok(Admission::Now(running)) = session.admit(None).admitted().await else {
        panic!("an idle session admits at once");
    };
    let mut waits = Vec::new();
    for _ in 0..super::QUEUE_LIMIT {
        match session.admit(None).admitted().await {
            Ok(Admission::Waiting(waiting)) => waits.push(waiting),
            _ => panic!("room in line"),
        }
    }
    assert!(matches!(
        session.admit(None).admitted().await,
        Err(AgentError::SessionBusy(_))
    ));
    session.cancel_turn();
    // Commands are taken in the order they were sent: this answer comes
    // after the cancel was carried out.
    assert!(!session.has_waiting().await);
    assert!(running.cancel_token().is_cancelled());
    for waiting in waits {
        assert!(matches!(waiting.wait().await, Waited::Cancelled));
    }
    drop(running);
    assert!(!session.is_busy());
}

#[tokio::test]
async fn cancel_reaches_the_running_turn_only() {
    let fixture = fixture();
    let session = &fixture.session;
    // No turn: nothing to cancel, nothing breaks.
    session.cancel_turn();
    let first = session.begin_turn().await.unwrap();
    let token = first.cancel_token();
    assert!(!token.is_cancelled());
    session.cancel_turn();
    session.flush().await;
    assert!(token.is_cancelled());
    drop(first);
    // The next turn starts with a fresh token.
    let second = session.begin_turn().await.unwrap();
    assert!(!second.cancel_token().is_cancelled());
}

#[tokio::test]
async fn closing_cancels_the_running_turn() {
    let fixture = fixture();
    let ticket = fixture.session.begin_turn().await.unwrap();
    // The ticket is never dropped: close waits its grace, then closes the
    // log under the turn.
    fixture.session.close(Duration::from_millis(20)).await;
    assert!(ticket.cancel_token().is_cancelled());
    let error = fixture
        .session
        .record(EventData::TurnStart { turn: 1 }, &Recorder::default())
        .unwrap_err();
    assert!(matches!(error, AgentError::SessionClosed(_)), "{error:?}");
}

#[tokio::test]
async fn replay_equals_live_but_for_the_prompt_and_the_streamed_text() {
    let fixture = fixture();
    let out = Recorder::default();
    for data in a_turn("c1") {
        fixture.session.record(data, &out).unwrap();
    }
    fixture
        .session
        .record(config(ConfigKey::Model, "deepseek-v4-pro"), &out)
        .unwrap();
    let live = out.updates();
    let replay = fixture.replay().await;
    // What live did not send: the prompt (the client sent it) and the
    // model's text and reasoning (streamed as they came).
    let only_replayed = |update: &AgentUpdate| {
        matches!(
            update,
            AgentUpdate::UserChunk(_)
                | AgentUpdate::MessageChunk(_, _)
                | AgentUpdate::ThoughtChunk(_, _)
        )
    };
    let (extra, same): (Vec<AgentUpdate>, Vec<AgentUpdate>) =
        replay.into_iter().partition(only_replayed);
    // The context use is shown once, at the end: the last of live's.
    let usage = |update: &AgentUpdate| matches!(update, AgentUpdate::Usage { .. });
    let live_usage: Vec<&AgentUpdate> = live.iter().filter(|u| usage(u)).collect();
    assert!(live_usage.len() > 1, "{live:?}");
    assert_eq!(same.iter().filter(|u| usage(u)).count(), 1, "{same:?}");
    assert_eq!(same.last(), live_usage.last().copied());
    let without_usage = |updates: &[AgentUpdate]| -> Vec<AgentUpdate> {
        updates.iter().filter(|u| !usage(u)).cloned().collect()
    };
    assert_eq!(without_usage(&same), without_usage(&live));
    assert_eq!(
        extra,
        [
            AgentUpdate::UserChunk(UserContent::text("Read a.txt")),
            AgentUpdate::ThoughtChunk("thinking 1".to_owned(), Some("1-1".to_owned())),
            AgentUpdate::MessageChunk("Let me look.".to_owned(), Some("1-1".to_owned())),
            AgentUpdate::ThoughtChunk("thinking 2".to_owned(), Some("1-2".to_owned())),
            AgentUpdate::MessageChunk("It says A.".to_owned(), Some("1-2".to_owned())),
        ]
    );
    assert!(live.iter().all(|update| !only_replayed(update)), "{live:?}");
}

#[tokio::test]
async fn replay_closes_a_call_the_log_never_answered() {
    let fixture = fixture();
    let out = Recorder::default();
    // The turn stops after the tool call: dsh died while it ran.
    for data in a_turn("c1").into_iter().take(5) {
        fixture.session.record(data, &out).unwrap();
    }
    let replay = fixture.replay().await;
    let Some(AgentUpdate::ToolCallUpdate {
        call_id, status, ..
    }) = replay
        .iter()
        .rfind(|update| !matches!(update, AgentUpdate::Usage { .. }))
    else {
        panic!("{replay:?}")
    };
    assert_eq!(call_id.as_str(), "c1");
    assert_eq!(*status, ToolStatus::Failed);
}

#[tokio::test]
async fn the_state_restored_from_the_log_is_the_live_state() {
    let fixture = fixture();
    let out = Recorder::default();
    fixture
        .session
        .record(config(ConfigKey::ThoughtLevel, "off"), &out)
        .unwrap();
    fixture
        .session
        .record(
            EventData::PermissionRule(PermissionRule {
                tool: "bash".to_owned(),
                scope: Some("cargo test".to_owned()),
                allow: true,
            }),
            &out,
        )
        .unwrap();
    for data in a_turn("c1") {
        fixture.session.record(data, &out).unwrap();
    }
    let events = fixture
        .store
        .read(fixture.session.id.as_str(), None)
        .unwrap();
    let restored =
        SessionState::restore(&fixture.config.choices, events, None, &|_| false).unwrap();
    let locked = fixture.session.locked();
    let live = &locked.state;
    assert_eq!(restored.settings, live.settings);
    assert_eq!(
        restored.settings.thought_level,
        dsh_protocol::model::ThoughtLevel::Off
    );
    assert_eq!(restored.title.as_deref(), Some("Read a.txt"));
    assert_eq!(restored.title, live.title);
    assert_eq!((restored.turns, live.turns), (1, 1));
    assert_eq!(restored.rules, live.rules);
    assert_eq!(restored.call_ids, live.call_ids);
    assert_eq!(restored.last_context, Some(210));
    assert_eq!(restored.last_context, live.last_context);
    assert_eq!(restored.history.messages(), live.history.messages());
    assert_eq!(live.history.messages().len(), 4);
}

#[tokio::test]
async fn a_background_job_ends_in_the_log_and_before_the_latest_front_end() {
    let fixture = fixture();
    let session = &fixture.session;
    let turn_out = Recorder::default();
    let mut events = a_turn("j1");
    // The call started a background job: in progress until its end.
    if let EventData::ToolResult { job, .. } = &mut events[5] {
        *job = Some("job-1".to_owned());
    }
    for data in events {
        session.record(data, &turn_out).unwrap();
    }
    let later = Arc::new(Recorder::default());
    session.set_prompter(later.clone().into());
    (session.on_job_end())(crate::jobs::JobReport {
        job_id: "job-1".to_owned(),
        call_id: ToolCallId::new("j1"),
        status: "exited 0".to_owned(),
        failed: false,
        summary: "done".to_owned(),
        view: text_view("Run", "tail"),
        usage: None,
    });
    // Its owner records it: this answer comes after.
    session.flush().await;
    assert_eq!(
        later.take(),
        [
            Seen::Event(9),
            Seen::Update(AgentUpdate::ToolCallUpdate {
                call_id: ToolCallId::new("j1"),
                status: ToolStatus::Completed,
                view: text_view("Run", "tail"),
                raw_output: Some(std::sync::Arc::new(crate::update::RawOutput {
                    output: "done".to_owned(),
                    error: None,
                    job_id: Some("job-1".to_owned()),
                    job_status: Some("exited 0".to_owned()),
                })),
            }),
        ]
    );
    assert!(turn_out.updates().iter().all(|update| !matches!(
        update,
        AgentUpdate::ToolCallUpdate {
            status: ToolStatus::Completed,
            ..
        }
    )));
    assert!(matches!(
        fixture.logged().last().map(|event| &event.data),
        Some(EventData::JobEnd { failed: false, .. })
    ));
}

/// The session's requests share one spool; it goes with the history (a
/// history folded again is new messages, written anew) and when a request
/// found it mostly garbage.
#[tokio::test]
async fn the_spool_lasts_until_the_history_goes_or_it_is_retired() {
    let fixture = fixture();
    let session = &fixture.session;
    let out = Recorder::default();
    for data in a_turn("c1") {
        session.record(data, &out).unwrap();
    }
    // None is made until a request needs one.
    assert!(session.spool().current().is_none());
    let spool = session.spool().get().unwrap();
    spool.append(b"[1]").unwrap();
    spool.read_live(3);
    assert!(Arc::ptr_eq(&spool, &session.spool().get().unwrap()));
    assert!(session.evict_history());
    assert!(session.spool().current().is_none());
    let after = session.spool().get().unwrap();
    assert_ne!(after.id(), spool.id());
    assert!(Arc::ptr_eq(&after, &session.spool().get().unwrap()));
    after.append(&vec![b' '; 2 << 20]).unwrap();
    after.read_live(3);
    assert_ne!(session.spool().get().unwrap().id(), after.id());
}
