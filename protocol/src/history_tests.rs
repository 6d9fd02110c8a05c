//! Tests of [`super`]: the model history folded from events.

use super::*;
use crate::error::ErrorInfo;
use crate::log::EventData;
use crate::model::{FinishReason, Place};
use crate::tool::{ToolStatus, ToolView};

fn mk(seq: u64, data: EventData) -> Event {
    Event {
        seq,
        time: 0,
        ignorable: false,
        data,
    }
}

fn prompt(turn: u64, text: &str) -> EventData {
    EventData::UserMessage {
        turn,
        content: vec![UserContent::text(text)],
        steered: false,
        source: crate::log::MessageSource::User,
    }
}

fn call(id: &str) -> ToolCallRequest {
    ToolCallRequest {
        id: ToolCallId::new(id),
        name: "read".into(),
        arguments: "{}".into(),
        provider_id: None,
    }
}

fn asks(turn: u64, calls: Vec<ToolCallRequest>) -> EventData {
    EventData::AssistantMessage {
        turn,
        step: 1,
        text: String::new(),
        reasoning: String::new(),
        tool_calls: calls,
        usage: None,
        estimated_context: None,
        finish: FinishReason::ToolCalls,
        interrupted: false,
        model: String::new(),
    }
}

fn result(turn: u64, id: &str, output: &str) -> EventData {
    EventData::ToolResult {
        turn,
        call_id: ToolCallId::new(id),
        status: ToolStatus::Completed,
        output: output.into(),
        error: None,
        view: ToolView::default(),
        attachments: Vec::new(),
        live_terminal: None,
        job: None,
        usage: None,
    }
}

fn failed(turn: u64, code: ErrorCode) -> EventData {
    EventData::TurnEnd {
        turn,
        stop: None,
        error: Some(ErrorInfo {
            code,
            message: "it failed".into(),
        }),
    }
}

fn roles(history: &[ChatMessage]) -> Vec<&'static str> {
    history
        .iter()
        .map(|message| match message {
            ChatMessage::System(_) => "system",
            ChatMessage::User(_) => "user",
            ChatMessage::Assistant { .. } => "assistant",
            ChatMessage::Tool { .. } => "tool",
        })
        .collect()
}

#[test]
fn history_repairs_unfinished_calls_and_applies_compaction() {
    let events = vec![
        mk(1, prompt(1, "one")),
        mk(2, asks(1, vec![call("c1")])),
        mk(3, prompt(2, "two")),
    ];
    let history = derive_history(&events);
    assert_eq!(
        roles(&history),
        ["user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(
        history[2],
        ChatMessage::Tool {
            call_id: "c1".into(),
            content: OUTCOME_UNKNOWN.into()
        }
    );
    assert!(matches!(&history[3], ChatMessage::Assistant { text, .. } if text == NOTE_NO_REPLY));

    let mut compacted = events.clone();
    compacted.push(mk(
        4,
        EventData::CompactionSummary {
            start: 1,
            end: 2,
            summary: "did one".into(),
            call_id: None,
            messages: 2,
            tokens_before: 0,
            tokens_after: 0,
        },
    ));
    let history = derive_history(&compacted);
    assert_eq!(roles(&history), ["user", "assistant", "user"]);
    assert!(
        matches!(&history[0], ChatMessage::User(c) if matches!(&c[0], UserContent::Text{text} if text.contains("did one")))
    );
}

/// The repair answers a call cut off by a crash at the end of the log
/// and before the next prompt, once, with the call's turn.
#[test]
fn the_repair_closes_cut_off_calls_once() {
    let mut repair = Repair::default();
    assert!(repair.before(&mk(1, prompt(1, "go"))).is_empty());
    assert!(repair
        .before(&mk(2, asks(1, vec![call("a"), call("b")])))
        .is_empty());
    assert!(repair.before(&mk(3, result(1, "a", "ok"))).is_empty());
    let closed = repair.before(&mk(4, prompt(2, "again")));
    assert_eq!(closed.len(), 1);
    assert!(
        matches!(&closed[0].data, EventData::ToolResult { call_id, turn: 1, status: ToolStatus::Failed, .. } if call_id == "b")
    );
    assert_eq!(closed[0].seq, 3);
    assert!(repair.finish().is_empty());
}

/// Issue 10, item 19: failed and cancelled turns, and a crash, never
/// leave two user messages in a row.
#[test]
fn failed_turns_keep_roles_alternating() {
    let events = vec![
        mk(1, prompt(1, "one")),
        mk(2, failed(1, ErrorCode::ModelServer)),
        mk(3, prompt(2, "two")),
        mk(
            4,
            EventData::TurnEnd {
                turn: 2,
                stop: Some(StopReason::Cancelled),
                error: None,
            },
        ),
        mk(5, prompt(3, "three")),
        // dsh died here: no turn/end.
        mk(6, prompt(4, "four")),
    ];
    let history = derive_history(&events);
    assert_eq!(
        roles(&history),
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "user"
        ]
    );
    assert!(
        matches!(&history[1], ChatMessage::Assistant { text, .. } if text.contains("model.server"))
    );
    assert!(
        matches!(&history[3], ChatMessage::Assistant { text, .. } if text.contains("cancelled"))
    );
}

/// Issue 10, item 19: a turn that overflowed the window keeps a short
/// prompt, drops a large one and everything the turn produced.
#[test]
fn an_overflowed_turn_does_not_overflow_the_next() {
    let big = "x".repeat(100_000);
    let events = vec![
        mk(1, prompt(1, &big)),
        mk(2, asks(1, vec![call("c1")])),
        mk(3, result(1, "c1", &big)),
        mk(4, failed(1, ErrorCode::ModelContextWindowExceeded)),
        mk(5, prompt(2, "short again")),
    ];
    let history = derive_history(&events);
    assert_eq!(roles(&history), ["user", "assistant", "user"]);
    assert!(
        matches!(&history[0], ChatMessage::User(c) if matches!(&c[0], UserContent::Text { text } if text == NOTE_DROPPED_PROMPT))
    );
    let size: usize = history
        .iter()
        .map(|m| match m {
            ChatMessage::User(c) => c
                .iter()
                .map(|b| match b {
                    UserContent::Text { text } => text.len(),
                    _ => 0,
                })
                .sum(),
            ChatMessage::Assistant { text, .. } => text.len(),
            ChatMessage::Tool { content, .. } => content.len(),
            ChatMessage::System(t) => t.len(),
        })
        .sum();
    assert!(size < 2000, "{size}");
}

/// Issue 10, item 16: a renamed call keeps the model's id in the history.
#[test]
fn renamed_calls_keep_the_models_id_for_the_provider() {
    let renamed = ToolCallRequest {
        provider_id: Some("call_1".into()),
        ..call("call_1~2")
    };
    let events = vec![
        mk(1, prompt(1, "go")),
        mk(2, asks(1, vec![call("call_1"), renamed])),
        mk(3, result(1, "call_1", "call_1")),
        mk(4, result(1, "call_1~2", "call_1~2")),
    ];
    let history = derive_history(&events);
    assert!(
        matches!(&history[1], ChatMessage::Assistant { tool_calls, .. } if tool_calls.iter().all(|c| c.id == "call_1"))
    );
    assert_eq!(
        history[2],
        ChatMessage::Tool {
            call_id: "call_1".into(),
            content: "call_1".into()
        }
    );
    assert_eq!(
        history[3],
        ChatMessage::Tool {
            call_id: "call_1".into(),
            content: "call_1~2".into()
        }
    );
}

/// Folding event by event gives what a whole log derives to.
#[test]
fn the_fold_and_the_whole_log_agree() {
    let events = vec![
        mk(1, prompt(1, "one")),
        mk(2, asks(1, vec![call("a")])),
        mk(3, result(1, "a", "out")),
        mk(
            4,
            EventData::TurnEnd {
                turn: 1,
                stop: Some(StopReason::EndTurn),
                error: None,
            },
        ),
    ];
    let mut history = History::default();
    for event in &events {
        history.apply(event);
    }
    assert_eq!(
        history
            .messages()
            .iter()
            .map(|message| message.message().clone())
            .collect::<Vec<_>>(),
        derive_history(&events)
    );
}

/// A steered prompt lands after the step's tool results, and stays
/// with the turn's prompt when the turn's work is dropped.
#[test]
fn steered_words_follow_tool_results_and_survive_an_overflow() {
    let steer = |text: &str| EventData::UserMessage {
        turn: 1,
        content: vec![UserContent::text(text)],
        steered: true,
        source: crate::log::MessageSource::User,
    };
    let mut events = vec![
        mk(1, prompt(1, "one")),
        mk(2, asks(1, vec![call("c1")])),
        mk(3, result(1, "c1", "out")),
        mk(4, steer("faster")),
    ];
    let history = derive_history(&events);
    assert_eq!(roles(&history), ["user", "assistant", "tool", "user"]);
    assert_eq!(
        history[3],
        ChatMessage::User(vec![UserContent::text("faster")])
    );
    events.push(mk(5, failed(1, ErrorCode::ModelContextWindowExceeded)));
    let history = derive_history(&events);
    assert_eq!(roles(&history), ["user", "assistant"]);
    assert_eq!(
        history[0],
        ChatMessage::User(vec![UserContent::text("one"), UserContent::text("faster")])
    );
}

/// A message a request placed, then changed by the fold (words steered
/// into the turn's prompt) while the request still holds it: the request
/// keeps its message and place, the history has a new message, placed
/// nowhere; a place is kept under its key only.
#[test]
fn a_changed_message_is_placed_again() {
    let mut history = History::default();
    history.apply(&mk(1, prompt(1, "one")));
    let sent = history.messages();
    let at = |offset, len| Place { offset, len };
    assert_eq!(sent[0].place(1), None);
    sent[0].put(1, at(100, 3));
    assert_eq!(sent[0].place(1), Some(at(100, 3)));
    assert_eq!(sent[0].bytes(), 3);
    history.apply(&mk(
        2,
        EventData::UserMessage {
            turn: 1,
            content: vec![UserContent::text("two")],
            steered: true,
            source: crate::log::MessageSource::User,
        },
    ));
    let now = history.messages();
    assert_eq!(now[0].place(1), None);
    assert_eq!(now[0].bytes(), 6);
    assert_eq!(sent[0].place(1), Some(at(100, 3)));
    // Another key forgets the first; key 0 is no key.
    now[0].put(1, at(200, 6));
    now[0].put(2, at(300, 6));
    assert_eq!(now[0].place(1), None);
    assert_eq!(now[0].place(2), Some(at(300, 6)));
    now[0].put(0, at(400, 6));
    assert_eq!(now[0].place(0), None);
    now[0].put(2, at(300, 6));
    // Alone in the history, it is changed in place, and placed nowhere.
    drop((sent, now));
    history.apply(&mk(
        3,
        EventData::UserMessage {
            turn: 1,
            content: vec![UserContent::text("three")],
            steered: true,
            source: crate::log::MessageSource::User,
        },
    ));
    assert_eq!(history.messages()[0].place(0), None);
    assert_eq!(history.messages()[0].place(2), None);
    assert_eq!(history.messages()[0].bytes(), 11);
}
