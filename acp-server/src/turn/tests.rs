//! Unit tests of a turn with the scripted model: what is recorded, in
//! which order, and how a turn stops (the model's finish, a cancel, a
//! failure, the step limit).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use dsh_protocol::log::{Event, EventData, PermissionOutcome, StopReason};
use dsh_protocol::model::{ChatMessage, FinishReason};
use dsh_protocol::tool::ToolStatus;
use dsh_protocol::{ErrorCode, UserContent};
use futures::future::BoxFuture;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::error::AgentError;
use crate::frontend::{Ask, Frontend};
use crate::model::replay::ReplayProvider;
use crate::model::script::ScriptEntry;
use crate::model::Provider;
use crate::permission::{Answer, Question};
use crate::session::scratch::Scratch;
use crate::session::Session;
use crate::update::AgentUpdate;

/// A frontend that records updates, answers permission prompts from a
/// queue (unavailable once it runs out), and can cancel the turn when the
/// first streamed text arrives.
#[derive(Default)]
struct Recorder {
    updates: Mutex<Vec<AgentUpdate>>,
    answers: Mutex<VecDeque<PermissionOutcome>>,
    asked: Mutex<Vec<String>>,
    cancel_on_text: Option<CancellationToken>,
}

impl Recorder {
    fn answering(answers: &[PermissionOutcome]) -> Recorder {
        Recorder {
            answers: Mutex::new(answers.iter().copied().collect()),
            ..Recorder::default()
        }
    }

    fn take(&self) -> Vec<AgentUpdate> {
        std::mem::take(&mut *self.updates.lock().unwrap())
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl Frontend for Recorder {
    fn emit(&self, output: crate::frontend::Output<'_>) {
        for update in output.into_updates() {
            if let (AgentUpdate::MessageChunk(_, _), Some(token)) = (&update, &self.cancel_on_text)
            {
                token.cancel();
            }
            self.updates.lock().unwrap().push(update);
        }
    }

    fn ask(&self, ask: Ask) -> BoxFuture<'_, Answer> {
        let permission = matches!(ask.question, Question::Permission(_));
        self.asked.lock().unwrap().push(ask.call_id.to_string());
        let answer = match self.answers.lock().unwrap().pop_front() {
            Some(outcome) if permission => Answer::from(outcome),
            Some(PermissionOutcome::Cancelled) => Answer::Cancelled,
            _ => Answer::Unavailable,
        };
        Box::pin(async move { answer })
    }
}

/// A session in a scratch home and workspace (with `hello.txt`), and a
/// scripted model shared by its turns.
struct World {
    scratch: Scratch,
    session: Arc<Session>,
    provider: Arc<Provider>,
}

impl World {
    fn new(script: &[serde_json::Value]) -> World {
        Self::with_config("", script)
    }

    fn with_config(config: &str, script: &[serde_json::Value]) -> World {
        let scratch = Scratch::new(config, |work| {
            std::fs::write(work.join("hello.txt"), "hello\n").unwrap();
        });
        let entries = script
            .iter()
            .map(|entry| serde_json::from_value::<ScriptEntry>(entry.clone()).unwrap())
            .collect();
        World {
            session: scratch.session.clone(),
            scratch,
            provider: Arc::new(Provider::Replay(ReplayProvider::new(entries))),
        }
    }

    /// Runs one text prompt.
    async fn prompt(&self, text: &str, out: &Recorder) -> Result<StopReason, AgentError> {
        let ticket = self.session.begin_turn().await.unwrap();
        super::run(
            &ticket,
            self.provider.clone(),
            vec![UserContent::text(text)],
            out,
        )
        .await
    }

    fn events(&self) -> Vec<Event> {
        self.scratch
            .store
            .read(self.session.id.as_str(), None)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// The log's event types, in order.
    fn types(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|event| {
                serde_json::to_value(event).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    /// The `assistant/message`s, in order.
    fn replies(&self) -> Vec<EventData> {
        self.events()
            .into_iter()
            .map(|event| event.data)
            .filter(|data| matches!(data, EventData::AssistantMessage { .. }))
            .collect()
    }

    /// The last `turn/end`'s stop and error code.
    fn end(&self) -> (Option<StopReason>, Option<ErrorCode>) {
        self.events()
            .into_iter()
            .rev()
            .find_map(|event| match event.data {
                EventData::TurnEnd { stop, error, .. } => Some((stop, error.map(|e| e.code))),
                _ => None,
            })
            .expect("a turn/end")
    }

    /// The `tool/result`s: call id, status, error code, output.
    fn results(&self) -> Vec<(String, ToolStatus, Option<ErrorCode>, String)> {
        self.events()
            .into_iter()
            .filter_map(|event| match event.data {
                EventData::ToolResult {
                    call_id,
                    status,
                    error,
                    output,
                    ..
                } => Some((call_id.to_string(), status, error.map(|e| e.code), output)),
                _ => None,
            })
            .collect()
    }
}

fn reply(text: &str) -> serde_json::Value {
    json!({"chunks":[{"text":text}],"finish":"stop"})
}

fn call(id: &str, name: &str, args: serde_json::Value) -> serde_json::Value {
    json!({
        "chunks":[{"tool_call":{"index":0,"id":id,"name":name,"arguments":args.to_string()}}],
        "finish":"tool_calls"
    })
}

fn text(data: &EventData) -> (&str, bool, &FinishReason) {
    match data {
        EventData::AssistantMessage {
            text,
            interrupted,
            finish,
            ..
        } => (text, *interrupted, finish),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_turn_records_its_prompt_title_start_reply_and_end_in_order() {
    let world = World::new(&[json!({
        "chunks":[{"reasoning":"Hm."},{"text":"Hello "},{"text":"there."}],
        "usage":{"prompt_tokens":120,"completion_tokens":8},
        "finish":"stop"
    })]);
    let out = Recorder::default();
    assert_eq!(
        world.prompt("Say hi\nplease", &out).await.unwrap(),
        StopReason::EndTurn
    );
    assert_eq!(
        world.types(),
        [
            "user/message",
            "session/title",
            "turn/start",
            "assistant/message",
            "turn/end"
        ]
    );
    let events = world.events();
    assert_eq!(
        events[0].data,
        EventData::UserMessage {
            turn: 1,
            content: vec![UserContent::text("Say hi\nplease")],
            steered: false,
            source: dsh_protocol::log::MessageSource::User,
        }
    );
    // The title is the prompt's first line.
    assert!(matches!(&events[1].data, EventData::Title { title, .. } if title == "Say hi"));
    let EventData::AssistantMessage {
        turn,
        step,
        text,
        reasoning,
        tool_calls,
        usage,
        finish,
        interrupted,
        model,
        ..
    } = &events[3].data
    else {
        panic!("{:?}", events[3]);
    };
    assert_eq!((*turn, *step), (1, 1));
    assert_eq!((text.as_str(), reasoning.as_str()), ("Hello there.", "Hm."));
    assert!(tool_calls.is_empty());
    assert_eq!(usage.map(|usage| usage.context_tokens()), Some(128));
    assert_eq!((finish, *interrupted), (&FinishReason::Stop, false));
    assert_eq!(model, "deepseek-v4-flash");
    assert_eq!(world.end(), (Some(StopReason::EndTurn), None));
    // Live: the title, the streamed deltas (whatever their grouping), then
    // the reply's usage.
    let updates = out.take();
    assert!(
        matches!(updates.first(), Some(AgentUpdate::Title(title, _)) if title == "Say hi"),
        "{updates:?}"
    );
    let streamed: String = updates
        .iter()
        .filter_map(|update| match update {
            AgentUpdate::MessageChunk(text, _) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "Hello there.");
    assert_eq!(
        updates.last(),
        Some(&AgentUpdate::Usage {
            used: 128,
            size: 1_000_000,
            cost: None,
        })
    );
    assert!(!world.session.is_busy());
}

#[tokio::test]
async fn the_next_turn_has_the_next_number_and_no_new_title() {
    let world = World::new(&[reply("One."), reply("Two.")]);
    let out = Recorder::default();
    world.prompt("first", &out).await.unwrap();
    world.prompt("second", &out).await.unwrap();
    let second: Vec<String> = world.types().split_off(5);
    assert_eq!(
        second,
        [
            "user/message",
            "turn/start",
            "assistant/message",
            "turn/end"
        ]
    );
    let turns: Vec<u64> = world
        .events()
        .iter()
        .filter_map(|event| match event.data {
            EventData::TurnStart { turn } | EventData::TurnEnd { turn, .. } => Some(turn),
            _ => None,
        })
        .collect();
    assert_eq!(turns, [1, 1, 2, 2]);
    // The model's history: both prompts and both replies.
    assert_eq!(world.session.history().await.unwrap().len(), 4);
}

/// A session's requests are sent from its spool, and each request writes
/// only the messages no request carried before: the spool grows by what
/// the second request's body adds to the first's.
#[tokio::test]
async fn each_message_of_a_session_is_written_to_its_spool_once() {
    let mut world = World::new(&[]);
    let entries = [reply("One."), reply("Two.")]
        .iter()
        .map(|entry| serde_json::from_value::<ScriptEntry>(entry.clone()).unwrap())
        .collect();
    let (replay, requests) = ReplayProvider::new(entries).recording();
    world.provider = Arc::new(Provider::Replay(replay));
    let out = Recorder::default();
    world.prompt("first", &out).await.unwrap();
    let spool = world.session.spool().current().unwrap();
    let first = spool.len();
    world.prompt("second", &out).await.unwrap();
    assert!(Arc::ptr_eq(
        &spool,
        &world.session.spool().current().unwrap()
    ));
    let bodies: Vec<usize> = requests.lock().unwrap().iter().map(Vec::len).collect();
    assert_eq!(bodies.len(), 2);
    assert!(
        first > 0 && first < bodies[0] as u64,
        "{first} of {bodies:?}"
    );
    assert_eq!(spool.len() - first, (bodies[1] - bodies[0]) as u64);
}

#[tokio::test]
async fn an_allowed_tool_call_is_recorded_run_and_answered_before_the_next_step() {
    let world = World::new(&[
        call("r1", "read", json!({"file_path":"hello.txt"})),
        reply("It says hello."),
    ]);
    let out = Recorder::default();
    assert_eq!(
        world.prompt("Read it", &out).await.unwrap(),
        StopReason::EndTurn
    );
    assert_eq!(
        world.types(),
        [
            "user/message",
            "session/title",
            "turn/start",
            "assistant/message",
            "tool/call",
            "tool/result",
            "assistant/message",
            "turn/end"
        ]
    );
    // Reads in the workspace are not asked about in ask mode.
    assert!(out.asked().is_empty());
    let results = world.results();
    assert_eq!(results.len(), 1);
    let (id, status, error, output) = &results[0];
    assert_eq!(
        (id.as_str(), *status, *error),
        ("r1", ToolStatus::Completed, None)
    );
    assert!(output.contains("hello"), "{output}");
    let replies = world.replies();
    assert_eq!(text(&replies[0]).2, &FinishReason::ToolCalls);
    // The second step saw the result.
    assert!(world.session.history().await.unwrap().iter().any(
        |message| matches!(message, ChatMessage::Tool { call_id, content } if call_id == "r1" && content.contains("hello"))
    ));
    // The editor saw the call pending, running (transient), then its
    // result.
    let calls: Vec<(String, ToolStatus)> = out
        .take()
        .into_iter()
        .filter_map(|update| match update {
            AgentUpdate::ToolCall {
                call_id, status, ..
            }
            | AgentUpdate::ToolCallUpdate {
                call_id, status, ..
            } => Some((call_id.to_string(), status)),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("r1".to_owned(), ToolStatus::Pending),
            ("r1".to_owned(), ToolStatus::InProgress),
            ("r1".to_owned(), ToolStatus::Completed)
        ]
    );
}

/// Unix: the model calls `bash`, which Windows offers only without
/// PowerShell (docs/platforms.md).
#[cfg(unix)]
#[tokio::test]
async fn a_rejected_call_is_decided_recorded_and_not_run() {
    let world = World::new(&[
        call(
            "b1",
            "bash",
            json!({"command":"touch made-by-bash","description":"make a file"}),
        ),
        reply("Understood."),
    ]);
    let out = Recorder::answering(&[PermissionOutcome::RejectOnce]);
    assert_eq!(
        world.prompt("Make it", &out).await.unwrap(),
        StopReason::EndTurn
    );
    assert_eq!(out.asked(), ["b1"]);
    let decisions: Vec<(String, PermissionOutcome)> = world
        .events()
        .into_iter()
        .filter_map(|event| match event.data {
            EventData::PermissionDecision { call_id, outcome } => {
                Some((call_id.to_string(), outcome))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        decisions,
        [("b1".to_owned(), PermissionOutcome::RejectOnce)]
    );
    let results = world.results();
    assert_eq!(results[0].1, ToolStatus::Failed);
    assert_eq!(results[0].2, Some(ErrorCode::PermissionRejected));
    assert!(!world.scratch.work.path().join("made-by-bash").exists());
    // In order: the call, the question's answer, the result.
    let types = world.types();
    let at = |name: &str| types.iter().position(|t| t == name).unwrap();
    assert!(at("tool/call") < at("permission/decision"));
    assert!(at("permission/decision") < at("tool/result"));
}

#[tokio::test]
async fn a_call_the_mode_denies_is_not_asked_about() {
    let world = World::new(&[
        call("w1", "write", json!({"file_path":"new.txt","content":"x"})),
        reply("I may not."),
    ]);
    world
        .session
        .record(
            EventData::Config {
                key: dsh_protocol::log::ConfigKey::Mode,
                value: "read-only".to_owned(),
            },
            &crate::frontend::Nobody,
        )
        .unwrap();
    let out = Recorder::answering(&[PermissionOutcome::AllowOnce]);
    assert_eq!(
        world.prompt("Write it", &out).await.unwrap(),
        StopReason::EndTurn
    );
    assert!(out.asked().is_empty());
    let results = world.results();
    assert_eq!(
        (results[0].1, results[0].2),
        (ToolStatus::Failed, Some(ErrorCode::PermissionDenied))
    );
    assert!(!world.scratch.work.path().join("new.txt").exists());
}

#[tokio::test]
async fn an_unknown_tool_is_answered_with_an_error_and_the_turn_goes_on() {
    let world = World::new(&[call("u1", "frobnicate", json!({})), reply("Sorry.")]);
    let out = Recorder::default();
    assert_eq!(world.prompt("Go", &out).await.unwrap(), StopReason::EndTurn);
    let results = world.results();
    assert_eq!(
        (results[0].0.as_str(), results[0].1, results[0].2),
        ("u1", ToolStatus::Failed, Some(ErrorCode::UnknownTool))
    );
    assert!(results[0].3.contains("frobnicate"), "{}", results[0].3);
    assert_eq!(world.replies().len(), 2);
}

#[tokio::test]
async fn repeated_call_ids_are_made_unique_and_the_models_id_is_kept() {
    let both = json!({"chunks":[
        {"tool_call":{"index":0,"id":"call_0","name":"read","arguments":"{\"file_path\":\"hello.txt\"}"}},
        {"tool_call":{"index":1,"id":"call_0","name":"read","arguments":"{\"file_path\":\"hello.txt\"}"}}
    ],"finish":"tool_calls"});
    let world = World::new(&[
        both,
        call("call_0", "read", json!({"file_path":"hello.txt"})),
        reply("Done."),
    ]);
    world
        .prompt("Read twice", &Recorder::default())
        .await
        .unwrap();
    let ids: Vec<(String, Option<String>)> = world
        .replies()
        .iter()
        .flat_map(|data| match data {
            EventData::AssistantMessage { tool_calls, .. } => tool_calls.clone(),
            _ => Vec::new(),
        })
        .map(|call| (call.id.to_string(), call.provider_id))
        .collect();
    assert_eq!(
        ids,
        [
            ("call_0".to_owned(), None),
            ("call_0~2".to_owned(), Some("call_0".to_owned())),
            ("call_0~3".to_owned(), Some("call_0".to_owned())),
        ]
    );
    let answered: Vec<String> = world.results().into_iter().map(|result| result.0).collect();
    assert_eq!(answered, ["call_0", "call_0~2", "call_0~3"]);
}

#[tokio::test]
async fn a_cancel_mid_stream_keeps_the_delivered_prefix_and_ends_the_turn_cancelled() {
    let world = World::new(&[
        json!({"chunks":[{"text":"Partial"},{"text":" never sent"}],"hang_after":1}),
        reply("Fresh."),
    ]);
    let cancel = CancellationToken::new();
    let out = Recorder {
        cancel_on_text: Some(cancel.clone()),
        ..Recorder::default()
    };
    let ticket = world.session.begin_turn().await.unwrap();
    // The frontend cancels the ticket's token when the first text comes.
    let token = ticket.cancel_token();
    tokio::spawn(async move {
        cancel.cancelled().await;
        token.cancel();
    });
    let stop = super::run(
        &ticket,
        world.provider.clone(),
        vec![UserContent::text("Talk")],
        &out,
    );
    let stop = tokio::time::timeout(std::time::Duration::from_secs(5), stop)
        .await
        .expect("the cancel stopped the stream")
        .unwrap();
    drop(ticket);
    assert_eq!(stop, StopReason::Cancelled);
    let replies = world.replies();
    assert_eq!(
        text(&replies[0]),
        ("Partial", true, &FinishReason::Cancelled)
    );
    assert_eq!(world.end(), (Some(StopReason::Cancelled), None));
    assert_eq!(world.types().last().map(String::as_str), Some("turn/end"));
    // The session goes on, and the model sees what the user saw.
    assert_eq!(
        world.prompt("Again", &Recorder::default()).await.unwrap(),
        StopReason::EndTurn
    );
    assert!(world.session.history().await.unwrap().iter().any(
        |message| matches!(message, ChatMessage::Assistant { text, .. } if text == "Partial")
    ));
}

#[tokio::test]
async fn a_turn_cancelled_before_its_first_step_calls_no_model() {
    let world = World::new(&[reply("Kept for later.")]);
    let ticket = world.session.begin_turn().await.unwrap();
    ticket.cancel_token().cancel();
    let stop = super::run(
        &ticket,
        world.provider.clone(),
        vec![UserContent::text("Stop")],
        &Recorder::default(),
    )
    .await
    .unwrap();
    drop(ticket);
    assert_eq!(stop, StopReason::Cancelled);
    assert_eq!(
        world.types(),
        ["user/message", "session/title", "turn/start", "turn/end"]
    );
    assert_eq!(world.end(), (Some(StopReason::Cancelled), None));
    // The script's entry is still there for the next turn.
    world.prompt("Go", &Recorder::default()).await.unwrap();
    assert_eq!(text(&world.replies()[0]).0, "Kept for later.");
}

#[tokio::test]
async fn max_steps_stops_a_model_that_keeps_calling_tools() {
    let read = || call("", "read", json!({"file_path":"hello.txt"}));
    let world = World::with_config("[session]\nmax_steps = 2\n", &[read(), read(), read()]);
    let stop = world.prompt("Loop", &Recorder::default()).await.unwrap();
    assert_eq!(stop, StopReason::MaxTurnRequests);
    assert_eq!(world.replies().len(), 2);
    // Every call was answered (ids made up for the model's empty ones).
    let answered: Vec<String> = world.results().into_iter().map(|result| result.0).collect();
    assert_eq!(answered, ["call_1_1_0", "call_1_2_0"]);
    assert_eq!(world.end(), (Some(StopReason::MaxTurnRequests), None));
}

#[tokio::test]
async fn the_models_finish_says_how_the_turn_stopped() {
    let world = World::new(&[
        json!({"chunks":[{"text":"Cut"}],"finish":"length"}),
        json!({"chunks":[],"finish":"content_filter"}),
    ]);
    let out = Recorder::default();
    assert_eq!(
        world.prompt("Long", &out).await.unwrap(),
        StopReason::MaxTokens
    );
    assert_eq!(world.end(), (Some(StopReason::MaxTokens), None));
    assert_eq!(
        world.prompt("Bad", &out).await.unwrap(),
        StopReason::Refusal
    );
    assert_eq!(world.end(), (Some(StopReason::Refusal), None));
}

#[tokio::test]
async fn a_failed_model_call_ends_the_turn_with_its_error() {
    let world = World::new(&[
        json!({"status":400,"body":"{\"error\":{\"message\":\"bad request\"}}"}),
        json!({"chunks":[{"text":"Half"},{"text":" more"}],"drop_after":1}),
    ]);
    let out = Recorder::default();
    let error = world.prompt("One", &out).await.unwrap_err();
    assert_eq!(error.code(), ErrorCode::ModelInvalidRequest);
    // Refused before any stream: no reply, an error in turn/end.
    assert!(world.replies().is_empty());
    assert_eq!(world.end(), (None, Some(ErrorCode::ModelInvalidRequest)));
    // Cut mid-stream: the delivered prefix is kept, marked interrupted.
    let error = world.prompt("Two", &out).await.unwrap_err();
    assert_eq!(error.code(), ErrorCode::ModelStreamClosed);
    assert_eq!(
        text(&world.replies()[0]),
        ("Half", true, &FinishReason::Error)
    );
    assert_eq!(world.end(), (None, Some(ErrorCode::ModelStreamClosed)));
    assert!(!world.session.is_busy());
}

#[tokio::test]
async fn a_setting_command_is_recorded_without_a_turn() {
    let world = World::new(&[]);
    let out = Recorder::default();
    assert_eq!(
        world.prompt("/mode read-only", &out).await.unwrap(),
        StopReason::EndTurn
    );
    assert_eq!(world.types(), ["session/config", "agent/notice"]);
    assert_eq!(world.session.mode(), dsh_protocol::Mode::ReadOnly);
    // A value that does not exist: the choices, as a notice; no change.
    world.prompt("/mode sideways", &out).await.unwrap();
    assert_eq!(
        world.types(),
        ["session/config", "agent/notice", "agent/notice"]
    );
    let Some(EventData::Notice { text }) = world.events().pop().map(|event| event.data) else {
        panic!()
    };
    assert!(
        text.contains("read-only, plan, ask, accept-edits, full-access"),
        "{text}"
    );
    assert_eq!(world.session.mode(), dsh_protocol::Mode::ReadOnly);
    // No model was called, no turn counted.
    assert_eq!(world.session.locked().state.turns, 0);
}
