//! Logs written by earlier versions load unchanged: the same editor view
//! (crash repair included) and the same history, and the session goes on.

use std::path::Path;

use dsh_protocol::model::ChatMessage;
use expect_test::expect;
use serde_json::json;

use crate::{render, Recorder, World};

#[tokio::test]
async fn old_logs_load() {
    let world = World::new(&[json!({"chunks":[{"text":"Continuing."}],"finish":"stop"})]);
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/logs/v1-2026-11-30.jsonl");
    let text = std::fs::read_to_string(&fixture).unwrap();
    let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let id = header["id"].as_str().unwrap();
    let sessions = world.home.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::write(sessions.join(format!("{id}.jsonl")), &text).unwrap();

    let (opened, replay) = world.load(id).await;
    assert_eq!(opened.mode.as_str(), "accept-edits");
    expect![[r#"
        mode accept-edits
        config_options mode=accept-edits model=deepseek-v4-flash thought_level=high web=on
        title "Greet there instead of world"
        user "Text { text: \"Greet there instead of world\" }"
        thought "Plan first, then look."
        tool_call plan1 Pending "Update plan"
        plan [InProgress Read hello.txt, Pending Fix the greeting]
        tool_call_update plan1 Completed
        tool_call read1 Pending "Read hello.txt" @$WS/hello.txt:1
        tool_call_update read1 Completed
        tool_call edit1 Pending "Edit hello.txt" @$WS/hello.txt:1
        tool_call_update edit1 Completed diff($WS/hello.txt, 12 → 12 bytes)
        message "I changed world to there."
        config_options mode=accept-edits model=deepseek-v4-flash thought_level=low web=on
        user "Text { text: \"Run echo hi\" }"
        tool_call bash1 Pending "Run echo hi"
        tool_call_update bash1 Completed text("```⏎hi⏎[exit code: 0]⏎```")
        message "It said hi."
        user "Text { text: \"Are you there?\" }"
        user "Text { text: \"Again?\" }"
        message "Back again."
        user "Text { text: \"Write a long story\" }"
        thought "A story."
        message "Once upon"
        user "Text { text: \"Read it again\" }"
        tool_call read2 Pending "Read hello.txt" @$WS/hello.txt:1
        tool_call_update read2 Failed text("The outcome of this tool call is unknown: dsh stopped while it was run…")
        usage 1424/1000000
    "#]].assert_eq(&render(&replay, Path::new("/tmp/gold/ws")));

    let roles: Vec<String> = opened
        .session
        .history()
        .await
        .unwrap()
        .iter()
        .map(|message| match message {
            ChatMessage::System(_) => "system".to_owned(),
            ChatMessage::User(_) => "user".to_owned(),
            ChatMessage::Assistant {
                text, tool_calls, ..
            } => {
                format!(
                    "assistant({}{})",
                    text.chars().take(24).collect::<String>(),
                    if tool_calls.is_empty() {
                        String::new()
                    } else {
                        format!(" +{} calls", tool_calls.len())
                    }
                )
            }
            ChatMessage::Tool { call_id, content } => format!(
                "tool({call_id}: {})",
                content.chars().take(24).collect::<String>()
            ),
        })
        .collect();
    expect![[r#"
        [
            "user",
            "assistant( +2 calls)",
            "tool(plan1: Plan updated: 2 items (0)",
            "tool(read1:      1\thello\n     2\tworl)",
            "assistant( +1 calls)",
            "tool(edit1: Edited /tmp/gold/ws/hell)",
            "assistant(I changed world to there)",
            "user",
            "assistant( +1 calls)",
            "tool(bash1: hi\n[exit code: 0])",
            "assistant(It said hi.)",
            "user",
            "assistant([dsh: this turn failed ()",
            "user",
            "assistant(Back again.)",
            "user",
            "assistant(Once upon)",
            "user",
            "assistant( +1 calls)",
            "tool(read2: The outcome of this tool)",
        ]
    "#]]
    .assert_debug_eq(&roles);

    // And it goes on: the next turn is numbered after the last, the log
    // grows by the same format.
    let recorder = Recorder::default();
    assert_eq!(world.prompt(id, "Go on", &recorder).await, "EndTurn");
    let types = world.log_types(id);
    assert_eq!(types.len(), 41 + 4);
    let written = std::fs::read_to_string(sessions.join(format!("{id}.jsonl"))).unwrap();
    assert!(
        written.starts_with(&text),
        "the old lines are kept byte for byte"
    );
    let last: serde_json::Value = serde_json::from_str(written.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "turn/end");
    assert_eq!(last["data"]["turn"], 7);
}
