//! Golden files: the JSON of every log event type (the session log is a
//! file format) and of every update as ACP sends it. A diff means the wire
//! changed: make it on purpose, then regenerate with `DSH_UPDATE_GOLDEN=1
//! cargo test --test core golden`.

use std::path::PathBuf;

use dsh_acp_server::acp::convert;
use dsh_acp_server::permission::Mode;
use std::sync::Arc;

use dsh_acp_server::update::{AgentUpdate, ConfigOption, ConfigValue, RawOutput};
use dsh_protocol::error::{ErrorCode, ErrorInfo};
use dsh_protocol::log::{
    CompactionReason, ConfigKey, Event, EventData, InstructionFile, InstructionStatus,
    PermissionOutcome, PermissionRule, PlanEntry, PlanOutcome, PlanPriority, PlanStatus,
    StopReason, KNOWN_TYPES,
};
use dsh_protocol::model::{FinishReason, ToolCallRequest, Usage};
use dsh_protocol::tool::{FileDiff, FileLocation, ToolContent, ToolKind, ToolStatus, ToolView};
use dsh_protocol::{ToolCallId, UserContent};

fn golden(kind: &str, name: &str, value: serde_json::Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/golden")
        .join(kind)
        .join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(&value).unwrap() + "\n";
    if std::env::var_os("DSH_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "no golden file {} (DSH_UPDATE_GOLDEN=1 writes it)",
            path.display()
        )
    });
    assert_eq!(
        text,
        expected,
        "{} changed; if that is meant, regenerate with DSH_UPDATE_GOLDEN=1",
        path.display()
    );
}

fn view() -> ToolView {
    ToolView {
        title: "Edit src/main.rs".into(),
        kind: Some(ToolKind::Edit),
        locations: vec![FileLocation {
            path: "/w/src/main.rs".into(),
            line: Some(3),
        }],
        content: vec![ToolContent::Diff(FileDiff {
            path: "/w/src/main.rs".into(),
            old_text: Some("fn main() {}\n".into()),
            new_text: "fn main() {\n    run();\n}\n".into(),
        })],
    }
}

fn entries() -> Vec<PlanEntry> {
    vec![
        PlanEntry {
            content: "Read the code".into(),
            status: PlanStatus::Completed,
            priority: PlanPriority::High,
        },
        PlanEntry {
            content: "Fix the bug".into(),
            status: PlanStatus::InProgress,
            priority: PlanPriority::Medium,
        },
    ]
}

/// One sample of every event type.
fn samples() -> Vec<EventData> {
    let error = ErrorInfo {
        code: ErrorCode::ModelServer,
        message: "the provider had a server error".into(),
    };
    vec![
        EventData::Config {
            key: ConfigKey::Mode,
            value: "accept-edits".into(),
        },
        EventData::Title {
            title: "Fix the bug".into(),
            usage: None,
        },
        EventData::UserMessage {
            turn: 1,
            content: vec![
                UserContent::text("Fix the bug"),
                UserContent::ResourceLink {
                    uri: "file:///w/src/main.rs".into(),
                    name: "main.rs".into(),
                },
            ],
            steered: false,
            source: dsh_protocol::log::MessageSource::User,
        },
        EventData::TurnStart { turn: 1 },
        EventData::TurnEnd {
            turn: 1,
            stop: Some(StopReason::EndTurn),
            error: None,
        },
        EventData::AssistantMessage {
            turn: 1,
            step: 1,
            text: "I will edit it.".into(),
            reasoning: "The bug is in main.".into(),
            tool_calls: vec![ToolCallRequest {
                id: ToolCallId::new("call_1~2"),
                name: "edit".into(),
                arguments: "{\"file_path\":\"src/main.rs\"}".into(),
                provider_id: Some("call_1".into()),
            }],
            usage: Some(Usage {
                input_tokens: 200,
                output_tokens: 40,
                cache_read_tokens: 1000,
                reasoning_tokens: 10,
            }),
            estimated_context: None,
            finish: FinishReason::ToolCalls,
            interrupted: false,
            model: "deepseek-v4-flash".into(),
        },
        EventData::ToolCall {
            turn: 1,
            call_id: ToolCallId::new("call_1~2"),
            name: "edit".into(),
            arguments: "{\"file_path\":\"src/main.rs\"}".into(),
            view: ToolView {
                content: Vec::new(),
                ..view()
            },
        },
        EventData::ToolResult {
            turn: 1,
            call_id: ToolCallId::new("call_1~2"),
            status: ToolStatus::Completed,
            output: "Edited /w/src/main.rs".into(),
            error: None,
            view: view(),
            attachments: Vec::new(),
            live_terminal: Some("term-1".into()),
            job: None,
            usage: None,
        },
        EventData::PermissionDecision {
            call_id: ToolCallId::new("call_1~2"),
            outcome: PermissionOutcome::AllowAlways,
        },
        EventData::PermissionRule(PermissionRule {
            tool: "bash".into(),
            scope: Some("cargo test".into()),
            allow: true,
        }),
        EventData::Plan { entries: entries() },
        EventData::CompactionSummary {
            start: 1,
            end: 40,
            summary: "The user asked to fix a bug; main.rs was edited.".into(),
            call_id: None,
            messages: 0,
            tokens_before: 0,
            tokens_after: 0,
        },
        EventData::LlmRetry {
            attempt: 1,
            delay_ms: 500,
            error,
        },
        EventData::CompactionPrune {
            calls: vec![ToolCallId::new("call_1")],
            head_chars: 4096,
            tail_chars: 1024,
        },
        EventData::Instructions {
            text: "<system-reminder>\nInstructions from: /work/AGENTS.md\nRun cargo test.\n</system-reminder>".into(),
            files: vec![InstructionFile {
                path: "/work/AGENTS.md".into(),
                status: InstructionStatus::Loaded,
                fingerprint: Some("0123456789abcdef".into()),
            }],
        },
        EventData::Notice {
            text: "The mode is now `accept-edits`.".into(),
        },
        EventData::Checkpoint {
            turn: 3,
            files: vec![
                dsh_protocol::checkpoint::CheckpointFile {
                    path: "/work/src/main.rs".into(),
                    before: Some("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into()),
                    after: Some("60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752".into()),
                    lost: None,
                },
                dsh_protocol::checkpoint::CheckpointFile {
                    path: "/work/notes.txt".into(),
                    before: None,
                    after: Some("fd61a03af4f77d870fc21e05e7e80678095c92d808cfb3b5c279ee04c74aca13".into()),
                    lost: None,
                },
            ],
        },
        EventData::Undo {
            turn: 3,
            call_id: ToolCallId::new("dsh-undo-3"),
            view: ToolView {
                title: "Undo turn 3".into(),
                kind: Some(ToolKind::Edit),
                locations: vec![FileLocation {
                    path: "/work/src/main.rs".into(),
                    line: Some(1),
                }],
                content: vec![ToolContent::Diff(FileDiff {
                    path: "/work/src/main.rs".into(),
                    old_text: Some("fn main() {}\n".into()),
                    new_text: "fn main() { run() }\n".into(),
                })],
            },
            summary: "The user undid the file changes of turn 3 with /undo: restored /work/src/main.rs.".into(),
        },
        EventData::JobEnd {
            job_id: "j1".into(),
            call_id: ToolCallId::new("call_4"),
            status: "exited 0".into(),
            failed: false,
            summary: "[dsh: background job j1 (`npm run build`) exited with code 0 after 3.0 s]".into(),
            view: view(),
            usage: None,
        },
        EventData::CompactionStart {
            call_id: ToolCallId::new("compact_1"),
            reason: CompactionReason::Pressure,
        },
        EventData::CompactionFailed {
            call_id: ToolCallId::new("compact_1"),
            message: "The model returned an empty summary; nothing was replaced.".into(),
        },
        EventData::PlanDecision {
            call_id: ToolCallId::new("call_plan"),
            outcome: PlanOutcome::AcceptEdits,
            feedback: None,
        },
        EventData::QuestionDecision {
            call_id: ToolCallId::new("call_ask"),
            outcome: dsh_protocol::question::QuestionOutcome::Answered,
            answers: vec![
                dsh_protocol::question::QuestionAnswer {
                    id: "db".into(),
                    selected: vec!["SQLite".into()],
                    custom: None,
                    note: None,
                },
                dsh_protocol::question::QuestionAnswer {
                    id: "extras".into(),
                    selected: vec!["tests".into()],
                    custom: Some("and a README".into()),
                    note: Some(dsh_protocol::question::AnswerNote::OneChoice),
                },
                dsh_protocol::question::QuestionAnswer::unanswered(
                    "name",
                    Some(dsh_protocol::question::AnswerNote::NotAsked),
                ),
            ],
        },
        EventData::HookResult(dsh_protocol::hook::HookRun {
            event: "PreToolUse".into(),
            command: "./check.sh".into(),
            source: "project".into(),
            call_id: Some(ToolCallId::new("call_1")),
            exit_code: Some(2),
            failure: None,
            blocked: true,
            duration_ms: 12,
            stderr: "No rm -rf here.".into(),
        }),
        EventData::HookConsent(dsh_protocol::hook::HookConsent {
            path: "/work/.dsh/hooks.json".into(),
            hash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
            allow: true,
            read_only: false,
        }),
        EventData::Skills {
            text: "<system-reminder>\nThe following skills are available. …\n\n- release-notes: Write release notes from the git log.\n</system-reminder>".into(),
            skills: vec!["release-notes".into()],
        },
        EventData::GoalChange {
            change: dsh_protocol::log::GoalChangeKind::Round,
            goal: dsh_protocol::log::Goal {
                id: "goal-1".into(),
                revision: 3,
                objective: "Make the test suite pass".into(),
                phase: dsh_protocol::log::GoalPhase::Active,
                rounds_used: 2,
                max_rounds: 20,
                consecutive_rounds: 2,
                blocked_reason: None,
            },
        },
    ]
}

/// Every event type this build knows has a golden file, and its JSON has
/// not changed.
#[test]
fn every_event_type_keeps_its_json() {
    let mut seen = Vec::new();
    for (seq, data) in samples().into_iter().enumerate() {
        let event = Event {
            seq: seq as u64 + 1,
            time: 1_764_470_000_000,
            ignorable: data.is_ignorable(),
            data,
        };
        let value = serde_json::to_value(&event).unwrap();
        let kind = value["type"].as_str().unwrap().to_owned();
        golden("events", &kind.replace('/', "-"), value.clone());
        // And it reads back as itself.
        assert_eq!(serde_json::from_value::<Event>(value).unwrap(), event);
        seen.push(kind);
    }
    let mut known: Vec<&str> = KNOWN_TYPES.to_vec();
    known.sort();
    seen.sort();
    assert_eq!(seen, known, "a sample for every event type");
}

/// Every update the projection produces keeps its ACP form.
#[test]
fn every_update_keeps_its_acp_json() {
    let updates = vec![
        (
            "user",
            AgentUpdate::UserChunk(UserContent::text("Fix the bug")),
        ),
        (
            "message",
            AgentUpdate::MessageChunk("I will edit it.".into(), Some("1-2".into())),
        ),
        (
            "thought",
            AgentUpdate::ThoughtChunk("The bug is in main.".into(), Some("1-2".into())),
        ),
        (
            "usage",
            AgentUpdate::Usage {
                used: 1240,
                size: 1_000_000,
                cost: Some(dsh_protocol::model::Cost {
                    amount: 0.0042,
                    currency: "USD".into(),
                }),
            },
        ),
        (
            "title",
            AgentUpdate::Title("Fix the bug".into(), 1_767_225_600_000),
        ),
        (
            "commands",
            AgentUpdate::Commands(
                dsh_acp_server::context::commands::COMMANDS
                    .iter()
                    .map(Into::into)
                    .collect(),
            ),
        ),
        (
            "tool_call",
            AgentUpdate::ToolCall {
                call_id: ToolCallId::new("call_1"),
                arguments: "{\"file_path\":\"src/main.rs\"}".into(),
                view: ToolView {
                    content: Vec::new(),
                    ..view()
                },
                status: ToolStatus::Pending,
            },
        ),
        (
            "tool_call_update",
            AgentUpdate::ToolCallUpdate {
                call_id: ToolCallId::new("call_1"),
                status: ToolStatus::Completed,
                view: view(),
                raw_output: Some(Arc::new(RawOutput {
                    output: "Edited src/main.rs".into(),
                    error: None,
                    job_id: None,
                    job_status: None,
                })),
            },
        ),
        (
            "tool_call_update_failed",
            AgentUpdate::ToolCallUpdate {
                call_id: ToolCallId::new("call_1"),
                status: ToolStatus::Failed,
                view: ToolView::default(),
                raw_output: Some(Arc::new(RawOutput {
                    output: "The user rejected this edit.".into(),
                    error: Some(ErrorInfo {
                        code: ErrorCode::PermissionRejected,
                        message: "The user rejected this edit.".into(),
                    }),
                    job_id: None,
                    job_status: None,
                })),
            },
        ),
        (
            "tool_call_update_job_end",
            AgentUpdate::ToolCallUpdate {
                call_id: ToolCallId::new("call_3"),
                status: ToolStatus::Completed,
                view: ToolView::text("test result: ok"),
                raw_output: Some(Arc::new(RawOutput {
                    output:
                        "[dsh: background job j1 (`npm run build`) exited with code 0 after 3.0 s]"
                            .into(),
                    error: None,
                    job_id: Some("j1".into()),
                    job_status: Some("exited 0".into()),
                })),
            },
        ),
        (
            "tool_call_update_terminal",
            AgentUpdate::ToolCallUpdate {
                call_id: ToolCallId::new("call_2"),
                status: ToolStatus::InProgress,
                view: ToolView {
                    content: vec![ToolContent::Terminal {
                        terminal_id: "term-1".into(),
                    }],
                    ..ToolView::default()
                },
                raw_output: None,
            },
        ),
        ("plan", AgentUpdate::Plan(entries())),
        (
            "config_options",
            AgentUpdate::ConfigOptions(vec![ConfigOption {
                key: ConfigKey::Mode,
                name: "Mode",
                description: "What the agent may do without asking",
                current: "ask".into(),
                values: vec![ConfigValue {
                    id: "ask".into(),
                    name: "Ask".into(),
                    description: Some("Reads are free; edits ask".into()),
                }],
                toggle: false,
            }]),
        ),
        ("mode", AgentUpdate::Mode(Mode::AcceptEdits)),
    ];
    for (name, update) in updates {
        let value = serde_json::to_value(convert::session_update(update, false)).unwrap();
        golden("acp", name, value);
    }
    // The web switch: a select of on and off, or a boolean for a client
    // that shows boolean options.
    let web = || {
        let value = |id: &str, name: &str| ConfigValue {
            id: id.into(),
            name: name.into(),
            description: None,
        };
        AgentUpdate::ConfigOptions(vec![ConfigOption {
            key: ConfigKey::Web,
            name: "Web",
            description: "Whether web_fetch and web_search are offered",
            current: "off".into(),
            values: vec![value("on", "On"), value("off", "Off")],
            toggle: true,
        }])
    };
    for (name, booleans) in [
        ("config_options_web", false),
        ("config_options_web_boolean", true),
    ] {
        let value = serde_json::to_value(convert::session_update(web(), booleans)).unwrap();
        golden("acp", name, value);
    }
}
