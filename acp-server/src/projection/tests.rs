//! Unit tests of the projection: what the editor is shown for each event,
//! live and on replay, and the few differences between the two.

use super::*;
use std::sync::Arc;

use dsh_protocol::error::{ErrorCode, ErrorInfo};
use dsh_protocol::log::{PermissionOutcome, PlanEntry};
use dsh_protocol::model::{FinishReason, ModelInfo, ThoughtLevel, Usage};
use dsh_protocol::plan::{PlanPriority, PlanStatus};
use dsh_protocol::{Mode, UserContent};

use crate::update::RawOutput;
use Delivery::{Live, Replay};

fn choices() -> Choices {
    let model = |id: &str, window: u64| ModelInfo {
        id: id.to_owned(),
        name: None,
        description: None,
        context_window: window,
        max_tokens: None,
        images: false,
        pricing: None,
    };
    Choices {
        models: vec![model("small", 8_000), model("big", 128_000)],
        default_model: "big".to_owned(),
        default_thought_level: ThoughtLevel::High,
        default_mode: Mode::Ask,
        web: false,
    }
}

fn event(data: EventData) -> Event {
    Event {
        seq: 1,
        time: 0,
        ignorable: false,
        data,
    }
}

/// The updates one event projects to, with the default settings, from a
/// fresh projection.
fn project(data: EventData, delivery: Delivery) -> Vec<AgentUpdate> {
    let choices = choices();
    Projection::default().project(
        &event(data),
        &Settings::defaults(&choices),
        &choices,
        delivery,
    )
}

fn id(call: &str) -> ToolCallId {
    ToolCallId::new(call)
}

fn text_view(title: &str, text: &str) -> ToolView {
    ToolView {
        title: title.to_owned(),
        ..ToolView::text(text)
    }
}

fn reply(text: &str, reasoning: &str, usage: Option<Usage>, model: &str) -> EventData {
    EventData::AssistantMessage {
        turn: 1,
        step: 1,
        text: text.to_owned(),
        reasoning: reasoning.to_owned(),
        tool_calls: Vec::new(),
        usage,
        estimated_context: None,
        finish: FinishReason::Stop,
        interrupted: false,
        model: model.to_owned(),
    }
}

fn usage(input: u64, cached: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cached,
        reasoning_tokens: 0,
    }
}

fn tool_call(call: &str) -> EventData {
    EventData::ToolCall {
        turn: 1,
        call_id: id(call),
        name: "read".to_owned(),
        arguments: "{\"file_path\":\"a\"}".to_owned(),
        view: text_view("Read a", ""),
    }
}

fn tool_result(call: &str, status: ToolStatus, job: Option<&str>) -> EventData {
    EventData::ToolResult {
        turn: 1,
        call_id: id(call),
        status,
        output: "out".to_owned(),
        error: None,
        view: text_view("Read a", "logged output"),
        attachments: Vec::new(),
        live_terminal: None,
        job: job.map(str::to_owned),
        usage: None,
    }
}

#[test]
fn the_prompt_is_replayed_but_not_echoed_live() {
    let prompt = EventData::UserMessage {
        turn: 1,
        content: vec![UserContent::text("first"), UserContent::text("second")],
        steered: false,
        source: dsh_protocol::log::MessageSource::User,
    };
    assert_eq!(project(prompt.clone(), Live), []);
    assert_eq!(
        project(prompt, Replay),
        [
            AgentUpdate::UserChunk(UserContent::text("first")),
            AgentUpdate::UserChunk(UserContent::text("second")),
        ]
    );
}

#[test]
fn dshs_own_prompts_are_not_shown_as_the_persons_live_or_on_replay() {
    for source in [
        dsh_protocol::log::MessageSource::Wakeup,
        dsh_protocol::log::MessageSource::Goal,
    ] {
        let prompt = EventData::UserMessage {
            turn: 1,
            content: vec![UserContent::text("[dsh: the user did not write this]")],
            steered: false,
            source,
        };
        assert_eq!(project(prompt.clone(), Live), []);
        assert_eq!(project(prompt, Replay), [], "{source:?}");
    }
}

#[test]
fn a_reply_adds_only_its_usage_live_and_is_whole_on_replay() {
    let data = reply("Hello.", "Thinking.", Some(usage(100, 20, 5)), "small");
    let usage = AgentUpdate::Usage {
        used: 125,
        size: 8_000,
        cost: None,
    };
    assert_eq!(project(data.clone(), Live), std::slice::from_ref(&usage));
    assert_eq!(
        project(data, Replay),
        [
            AgentUpdate::ThoughtChunk("Thinking.".to_owned(), Some("1-1".to_owned())),
            AgentUpdate::MessageChunk("Hello.".to_owned(), Some("1-1".to_owned())),
            usage,
        ]
    );
    // Empty text or reasoning is not shown as an empty chunk.
    assert_eq!(
        project(reply("Only text.", "", None, "small"), Replay),
        [AgentUpdate::MessageChunk(
            "Only text.".to_owned(),
            Some("1-1".to_owned())
        )]
    );
}

#[test]
fn usage_is_measured_against_the_window_of_the_model_that_answered() {
    // The session's model is "big" now; the reply came from "small".
    assert_eq!(
        project(reply("", "", Some(usage(1, 0, 1)), "small"), Live),
        [AgentUpdate::Usage {
            used: 2,
            size: 8_000,
            cost: None,
        }]
    );
    // A model the catalog no longer has (or an old log without one): the
    // session's model.
    assert_eq!(
        project(reply("", "", Some(usage(1, 0, 1)), ""), Live),
        [AgentUpdate::Usage {
            used: 2,
            size: 128_000,
            cost: None,
        }]
    );
    // No usage from the provider: dsh's estimate; neither: no meter.
    let mut estimated = reply("", "", None, "big");
    if let EventData::AssistantMessage {
        estimated_context, ..
    } = &mut estimated
    {
        *estimated_context = Some(42);
    }
    assert_eq!(
        project(estimated, Live),
        [AgentUpdate::Usage {
            used: 42,
            size: 128_000,
            cost: None,
        }]
    );
    assert_eq!(project(reply("", "", None, "big"), Live), []);
}

#[test]
fn a_mode_change_sends_the_mode_and_every_option() {
    let choices = choices();
    let mut settings = Settings::defaults(&choices);
    settings.apply(ConfigKey::Mode, "plan", &choices);
    let config = event(EventData::Config {
        key: ConfigKey::Mode,
        value: "plan".to_owned(),
    });
    for delivery in [Live, Replay] {
        let updates = Projection::default().project(&config, &settings, &choices, delivery);
        assert_eq!(
            updates,
            [
                AgentUpdate::Mode(Mode::Plan),
                AgentUpdate::ConfigOptions(settings.options(&choices)),
            ]
        );
    }
}

#[test]
fn other_config_changes_send_the_options_and_unknown_keys_nothing() {
    let choices = choices();
    let settings = Settings::defaults(&choices);
    let mut projection = Projection::default();
    for key in [ConfigKey::Model, ConfigKey::ThoughtLevel] {
        let config = event(EventData::Config {
            key,
            value: "whatever".to_owned(),
        });
        assert_eq!(
            projection.project(&config, &settings, &choices, Live),
            [AgentUpdate::ConfigOptions(settings.options(&choices))]
        );
    }
    let unknown = event(EventData::Config {
        key: ConfigKey::Unknown,
        value: "x".to_owned(),
    });
    assert_eq!(
        projection.project(&unknown, &settings, &choices, Replay),
        []
    );
}

#[test]
fn a_tool_call_is_pending_then_updated_once_by_its_result() {
    let choices = choices();
    let settings = Settings::defaults(&choices);
    let mut projection = Projection::default();
    let mut show = |data: EventData| projection.project(&event(data), &settings, &choices, Live);
    assert_eq!(
        show(tool_call("c1")),
        [AgentUpdate::ToolCall {
            call_id: id("c1"),
            arguments: "{\"file_path\":\"a\"}".to_owned(),
            view: text_view("Read a", ""),
            status: ToolStatus::Pending,
        }]
    );
    assert_eq!(
        show(tool_result("c1", ToolStatus::Failed, None)),
        [AgentUpdate::ToolCallUpdate {
            call_id: id("c1"),
            status: ToolStatus::Failed,
            view: text_view("Read a", "logged output"),
            raw_output: raw("out", None),
        }]
    );
    // The call is finished: a second result for it shows nothing.
    assert_eq!(show(tool_result("c1", ToolStatus::Completed, None)), []);
    // Nor does a result for a call the editor never saw.
    assert_eq!(show(tool_result("c9", ToolStatus::Completed, None)), []);
}

/// A finished call's raw output: what the model got, and its error.
fn raw(output: &str, error: Option<ErrorInfo>) -> Option<Arc<RawOutput>> {
    Some(Arc::new(RawOutput {
        output: output.to_owned(),
        error,
        job_id: None,
        job_status: None,
    }))
}

#[test]
fn a_finished_call_carries_what_the_model_got_live_and_on_replay() {
    let choices = choices();
    let settings = Settings::defaults(&choices);
    let rejected = ErrorInfo {
        code: ErrorCode::PermissionRejected,
        message: "The user rejected this call.".to_owned(),
    };
    let mut failed = tool_result("c2", ToolStatus::Failed, None);
    if let EventData::ToolResult { output, error, .. } = &mut failed {
        *output = "Rejected: not now".to_owned();
        *error = Some(rejected.clone());
    }
    let job_end = EventData::JobEnd {
        job_id: "job-1".to_owned(),
        call_id: id("j1"),
        status: "exited 0".to_owned(),
        failed: false,
        summary: "[dsh: background job job-1 exited with code 0]".to_owned(),
        view: text_view("Run", "tail"),
        usage: None,
    };
    let raw_outputs = |delivery: Delivery| {
        let mut projection = Projection::default();
        let mut show =
            |data: EventData| projection.project(&event(data), &settings, &choices, delivery);
        let mut seen = Vec::new();
        for (call, result) in [
            ("c1", tool_result("c1", ToolStatus::Completed, None)),
            ("c2", failed.clone()),
            (
                "j1",
                tool_result("j1", ToolStatus::Completed, Some("job-1")),
            ),
        ] {
            show(tool_call(call));
            seen.extend(show(result));
        }
        seen.extend(show(job_end.clone()));
        seen.into_iter()
            .map(|update| match update {
                AgentUpdate::ToolCallUpdate {
                    call_id,
                    status,
                    raw_output,
                    ..
                } => (call_id.as_str().to_owned(), status, raw_output),
                other => panic!("{other:?}"),
            })
            .collect::<Vec<_>>()
    };
    let expected = [
        ("c1".to_owned(), ToolStatus::Completed, raw("out", None)),
        (
            "c2".to_owned(),
            ToolStatus::Failed,
            raw("Rejected: not now", Some(rejected)),
        ),
        // A background job's call is still running: nothing yet.
        ("j1".to_owned(), ToolStatus::InProgress, None),
        (
            "j1".to_owned(),
            ToolStatus::Completed,
            Some(Arc::new(RawOutput {
                output: "[dsh: background job job-1 exited with code 0]".to_owned(),
                error: None,
                job_id: Some("job-1".to_owned()),
                job_status: Some("exited 0".to_owned()),
            })),
        ),
    ];
    assert_eq!(raw_outputs(Live), expected);
    assert_eq!(raw_outputs(Replay), expected);
    // As ACP sends it: camelCase, the absent parts left out.
    assert_eq!(
        serde_json::to_value(&expected[1].2).unwrap(),
        serde_json::json!({
            "output": "Rejected: not now",
            "error": {"code": "permission.rejected", "message": "The user rejected this call."},
        })
    );
    assert_eq!(
        serde_json::to_value(&expected[3].2).unwrap(),
        serde_json::json!({
            "output": "[dsh: background job job-1 exited with code 0]",
            "jobId": "job-1",
            "jobStatus": "exited 0",
        })
    );
}

#[test]
fn a_client_terminal_stays_embedded_live_and_replay_shows_the_output() {
    let choices = choices();
    let settings = Settings::defaults(&choices);
    let mut result = tool_result("t1", ToolStatus::Completed, None);
    if let EventData::ToolResult { live_terminal, .. } = &mut result {
        *live_terminal = Some("term-7".to_owned());
    }
    let shown = |delivery: Delivery| {
        let mut projection = Projection::default();
        projection.project(&event(tool_call("t1")), &settings, &choices, delivery);
        projection.project(&event(result.clone()), &settings, &choices, delivery)
    };
    let content = |updates: Vec<AgentUpdate>| match updates.as_slice() {
        [AgentUpdate::ToolCallUpdate { view, .. }] => view.content.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        content(shown(Live)),
        [ToolContent::Terminal {
            terminal_id: "term-7".to_owned()
        }]
    );
    assert_eq!(
        content(shown(Replay)),
        [ToolContent::Text {
            text: "logged output".to_owned()
        }]
    );
}

#[test]
fn a_background_job_is_in_progress_until_its_end() {
    let choices = choices();
    let settings = Settings::defaults(&choices);
    let mut projection = Projection::default();
    let mut show = |data: EventData| projection.project(&event(data), &settings, &choices, Replay);
    show(tool_call("j1"));
    let started = show(tool_result("j1", ToolStatus::Completed, Some("job-1")));
    assert!(
        matches!(
            started.as_slice(),
            [AgentUpdate::ToolCallUpdate {
                status: ToolStatus::InProgress,
                ..
            }]
        ),
        "{started:?}"
    );
    let end = |failed: bool| EventData::JobEnd {
        job_id: "job-1".to_owned(),
        call_id: id("j1"),
        status: "exited 1".to_owned(),
        failed,
        summary: "done".to_owned(),
        view: text_view("Run", "tail"),
        usage: None,
    };
    assert_eq!(
        show(end(true)),
        [AgentUpdate::ToolCallUpdate {
            call_id: id("j1"),
            status: ToolStatus::Failed,
            view: text_view("Run", "tail"),
            raw_output: Some(Arc::new(RawOutput {
                output: "done".to_owned(),
                error: None,
                job_id: Some("job-1".to_owned()),
                job_status: Some("exited 1".to_owned()),
            })),
        }]
    );
    // Ended once: a repeated job/end is not shown again.
    assert_eq!(show(end(false)), []);
}

#[test]
fn jobs_the_log_never_saw_end_fail_after_replay_unless_still_running() {
    let choices = choices();
    let settings = Settings::defaults(&choices);
    let mut projection = Projection::default();
    for call in ["j2", "j1", "j3"] {
        projection.project(&event(tool_call(call)), &settings, &choices, Replay);
        projection.project(
            &event(tool_result(call, ToolStatus::Completed, Some(call))),
            &settings,
            &choices,
            Replay,
        );
    }
    let ended = projection.finish_replay(&|call| call.as_str() == "j3");
    let calls: Vec<(&str, ToolStatus)> = ended
        .iter()
        .map(|update| match update {
            AgentUpdate::ToolCallUpdate {
                call_id, status, ..
            } => (call_id.as_str(), *status),
            other => panic!("{other:?}"),
        })
        .collect();
    // In id order; the job still running here is left alone.
    assert_eq!(
        calls,
        [("j1", ToolStatus::Failed), ("j2", ToolStatus::Failed)]
    );
    // Drained: a second call ends nothing.
    assert_eq!(projection.finish_replay(&|_| false), []);
}

#[test]
fn an_undo_shows_as_a_finished_tool_call() {
    let view = text_view("Undo turn 2", "diff");
    let updates = project(
        EventData::Undo {
            turn: 2,
            call_id: id("undo-1"),
            view: view.clone(),
            summary: "put back".to_owned(),
        },
        Live,
    );
    assert_eq!(
        updates,
        [
            AgentUpdate::ToolCall {
                call_id: id("undo-1"),
                arguments: "{}".to_owned(),
                view: ToolView {
                    content: Vec::new(),
                    ..view.clone()
                },
                status: ToolStatus::Pending,
            },
            AgentUpdate::ToolCallUpdate {
                call_id: id("undo-1"),
                status: ToolStatus::Completed,
                view,
                raw_output: None,
            },
        ]
    );
}

#[test]
fn a_compaction_updates_its_live_call_and_is_a_whole_call_on_replay() {
    let summary = |call_id: Option<&str>| EventData::CompactionSummary {
        start: 1,
        end: 9,
        summary: "We talked.".to_owned(),
        call_id: call_id.map(id),
        messages: 9,
        tokens_before: 5_000,
        tokens_after: 300,
    };
    let view = compaction_view(Some((9, 5_000, 300, &"We talked.".to_owned())));
    let usage = AgentUpdate::Usage {
        used: 300,
        size: 128_000,
        cost: None,
    };
    assert_eq!(
        project(summary(Some("k1")), Live),
        [
            AgentUpdate::ToolCallUpdate {
                call_id: id("k1"),
                status: ToolStatus::Completed,
                view: view.clone(),
                raw_output: None,
            },
            usage.clone(),
        ]
    );
    assert_eq!(
        project(summary(Some("k1")), Replay),
        [
            AgentUpdate::ToolCall {
                call_id: id("k1"),
                arguments: String::new(),
                view,
                status: ToolStatus::Completed,
            },
            usage,
        ]
    );
    // Logs from before the call: a message.
    assert_eq!(
        project(summary(None), Replay),
        [AgentUpdate::MessageChunk(
            "Conversation compacted: 9 messages summarised.\n\n".to_owned(),
            None
        )]
    );
}

#[test]
fn the_compaction_view_says_what_it_did() {
    let pending = compaction_view(None);
    assert_eq!(pending.title, "Compact conversation");
    assert!(pending.content.is_empty());
    let long = "x".repeat(5_000);
    let done = compaction_view(Some((3, 900, 100, &long)));
    let [ToolContent::Text { text }] = done.content.as_slice() else {
        panic!("{done:?}")
    };
    assert!(text.starts_with("Summarised 3 messages: about 900 → 100 tokens.\n\nxxx"));
    // The summary is cut for the editor.
    assert!(text.chars().count() < 2_100, "{}", text.len());
}

#[test]
fn instructions_are_one_thought_naming_the_files_by_status() {
    let file = |path: &str, status: InstructionStatus| InstructionFile {
        path: path.to_owned(),
        status,
        fingerprint: None,
    };
    let updates = project(
        EventData::Instructions {
            text: "<system-reminder>…</system-reminder>".to_owned(),
            files: vec![
                file("/w/AGENTS.md", InstructionStatus::Loaded),
                file("/w/big.md", InstructionStatus::Truncated),
                file("/w/CLAUDE.md", InstructionStatus::Loaded),
                file("/w/old.md", InstructionStatus::Removed),
            ],
        },
        Live,
    );
    assert_eq!(
        updates,
        [AgentUpdate::ThoughtChunk(
            "Workspace instructions from: /w/AGENTS.md, /w/CLAUDE.md; cut to fit: /w/big.md; \
             Instructions removed: /w/old.md.\n\n"
                .to_owned(),
            None
        )]
    );
}

#[test]
fn titles_plans_and_notices_show_alike_live_and_on_replay() {
    let entries = vec![PlanEntry {
        content: "Write tests".to_owned(),
        status: PlanStatus::InProgress,
        priority: PlanPriority::default(),
    }];
    for delivery in [Live, Replay] {
        assert_eq!(
            project(
                EventData::Title {
                    title: "A title".to_owned(),
                    usage: None
                },
                delivery
            ),
            [AgentUpdate::Title("A title".to_owned(), 0)]
        );
        assert_eq!(
            project(
                EventData::Plan {
                    entries: entries.clone()
                },
                delivery
            ),
            [AgentUpdate::Plan(entries.clone())]
        );
        assert_eq!(
            project(
                EventData::Notice {
                    text: "Mode set.".to_owned()
                },
                delivery
            ),
            [AgentUpdate::MessageChunk("Mode set.".to_owned(), None)]
        );
    }
}

#[test]
fn bookkeeping_events_show_nothing() {
    let silent = [
        EventData::TurnStart { turn: 1 },
        EventData::TurnEnd {
            turn: 1,
            stop: None,
            error: None,
        },
        EventData::PermissionDecision {
            call_id: id("c1"),
            outcome: PermissionOutcome::AllowOnce,
        },
        EventData::CompactionPrune {
            calls: vec![id("c1")],
            head_chars: 10,
            tail_chars: 10,
        },
        EventData::Checkpoint {
            turn: 1,
            files: Vec::new(),
        },
    ];
    for data in silent {
        for delivery in [Live, Replay] {
            assert_eq!(project(data.clone(), delivery), [], "{data:?}");
        }
    }
}

/// A long result reaches the model whole; its rawOutput keeps the first
/// and the last half of `MAX_CHARS` with a note of what was cut.
#[test]
fn a_long_results_raw_output_keeps_its_ends() {
    let text: String = (0..40_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let raw = RawOutput::of(&text, None);
    let half = RawOutput::MAX_CHARS / 2;
    assert!(raw.output.starts_with(&text[..half]));
    assert!(raw.output.ends_with(&text[text.len() - half..]));
    assert!(
        raw.output.len() < RawOutput::MAX_CHARS + 200,
        "{}",
        raw.output.len()
    );
    let short = RawOutput::of("short", None);
    assert_eq!(short.output, "short");
}
