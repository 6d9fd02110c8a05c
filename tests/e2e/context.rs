//! Agent context over ACP: workspace instructions (AGENTS.md), compaction
//! (pressure, overflow, pruning, `/compact`) and slash commands.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    PermissionOptionKind, SessionUpdate, StopReason, ToolCallStatus,
};
use serde_json::{json, Value};

use crate::support::client_sim::{Answer, ClientSim};
use crate::support::*;

/// The text of a request message, whatever shape its content has.
fn text_of(message: &Value) -> String {
    message_text(message)
}

/// Every message of a request as `role: text`.
fn transcript(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{}: {}", m["role"].as_str().unwrap(), text_of(m)))
        .collect()
}

fn count(haystack: &[String], needle: &str) -> usize {
    haystack.iter().map(|m| m.matches(needle).count()).sum()
}

#[tokio::test]
async fn instructions_load_root_first_dedup_and_nested_after_a_read() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    std::fs::create_dir(cwd.join(".git")).unwrap();
    std::fs::write(cwd.join("AGENTS.md"), "Use tabs.\n").unwrap();
    // A copy under the other name: the same instructions, given once.
    std::fs::write(cwd.join("CLAUDE.md"), "\nUse tabs.\n\n").unwrap();
    std::fs::write(cwd.join("AGENTS.local.md"), "I like short answers.\n").unwrap();
    std::fs::create_dir(cwd.join("sub")).unwrap();
    std::fs::write(cwd.join("sub/AGENTS.md"), "In sub/, never touch x.\n").unwrap();
    std::fs::write(cwd.join("sub/x.txt"), "x\n").unwrap();
    // Hostile entries are skipped and the turn goes on: a symlink out of
    // the project, and a FIFO that would block a reader.
    std::os::unix::fs::symlink("/etc/hostname", cwd.join("CLAUDE.local.md")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(cwd.join("sub/AGENTS.local.md"))
        .status()
        .unwrap();
    assert!(made.success());

    env.mock
        .push_json(call("r1", "read", json!({"file_path":"sub/x.txt"})));
    env.mock.push_json(reply("read"));
    env.mock.push_json(reply("again"));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    assert_eq!(
        conn.prompt(&session, "look at sub")
            .await
            .unwrap()
            .stop_reason,
        StopReason::EndTurn
    );
    assert_eq!(
        conn.prompt(&session, "and again")
            .await
            .unwrap()
            .stop_reason,
        StopReason::EndTurn
    );
    let requests = env.mock.requests();
    let first = transcript(&requests[0]);
    let user = first.last().unwrap();
    let root = cwd.canonicalize().unwrap();
    let agents = user
        .find(&format!(
            "Instructions from: {}/AGENTS.md\nUse tabs.",
            root.display()
        ))
        .expect("root AGENTS.md");
    let local = user
        .find(&format!(
            "Instructions from: {}/AGENTS.local.md\nI like short answers.",
            root.display()
        ))
        .expect("AGENTS.local.md");
    assert!(agents < local, "base before local: {user}");
    assert_eq!(user.matches("<system-reminder>").count(), 1, "{user}");
    assert_eq!(
        count(&first, "Use tabs."),
        1,
        "the identical CLAUDE.md collapses"
    );
    assert!(!user.contains("CLAUDE"), "{user}");
    assert!(
        !user.contains("never touch x"),
        "sub/ waits for a tool: {user}"
    );
    assert!(
        user.ends_with("look at sub"),
        "instructions come before the prompt: {user}"
    );

    // After the read of sub/x.txt: sub/AGENTS.md, once, after the result.
    let second = transcript(&requests[1]);
    assert_eq!(count(&second, "never touch x"), 1, "{second:#?}");
    let at = second
        .iter()
        .position(|m| m.contains("never touch x"))
        .unwrap();
    assert!(second[at - 1].starts_with("tool: "), "{second:#?}");
    let third = transcript(&requests[2]);
    assert_eq!(count(&third, "never touch x"), 1);
    assert_eq!(count(&third, "Use tabs."), 1);

    // The editor is told which files were loaded.
    let thoughts = chunk_text(&conn.updates(), true);
    assert!(
        thoughts.contains("Workspace instructions from:"),
        "{thoughts}"
    );
    assert!(thoughts.contains("sub/AGENTS.md"), "{thoughts}");
    conn.finish().await;

    // A new process derives the same conversation.
    env.mock.push_json(reply("after load"));
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &cwd).await;
    conn.prompt(&session, "after load").await.unwrap();
    let reloaded = transcript(&env.mock.requests()[3]);
    let mut expected = third.clone();
    expected.push("assistant: again".to_owned());
    expected.push("user: after load".to_owned());
    assert_eq!(reloaded, expected);
    conn.finish().await;
}

#[tokio::test]
async fn instructions_over_budget_say_what_was_cut_and_no_root_means_cwd_only() {
    let env = TestEnv::with_config("\n[instructions]\nmax_bytes = 600\n").await;
    // No .git anywhere above: the root is cwd; the parent's file is not
    // read.
    let cwd = env.cwd().join("proj");
    std::fs::create_dir(&cwd).unwrap();
    std::fs::write(env.cwd().join("AGENTS.md"), "PARENT RULES\n").unwrap();
    std::fs::write(cwd.join("AGENTS.md"), "rule. ".repeat(200)).unwrap();
    env.mock.push_json(reply("ok"));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    conn.prompt(&session, "hi").await.unwrap();
    let first = transcript(&env.mock.requests()[0]);
    let user = first.last().unwrap();
    assert!(!user.contains("PARENT RULES"), "{user}");
    let block = &user
        ["user: ".len()..user.find("</system-reminder>").unwrap() + "</system-reminder>".len()];
    assert!(block.len() <= 600, "{} bytes", block.len());
    assert!(
        block.contains(&format!(
            "Workspace instruction budget 600 bytes: truncated {}/AGENTS.md from 1200 to",
            cwd.canonicalize().unwrap().display()
        )),
        "{block}"
    );
    conn.finish().await;
}

/// A 4,000-token model: compaction is due past 3,200 tokens. Without the
/// goal tools and the continuable children's, whose schemas would move the
/// requests' size past it.
const SMALL_MODEL: &str =
    "\n[[models]]\nid = \"small-4k\"\ncontext_window = 4000\n[goals]\nenabled = false\n\
     [tools]\ndisable = [\"dsh-tool-subagent-control\", \"list_subagent_models\"]\n";

#[tokio::test]
async fn pressure_compacts_with_a_summary_and_reload_derives_the_same() {
    let env = TestEnv::with_config(SMALL_MODEL).await;
    // Turn 1 runs a tool; its last reply reports a nearly full window.
    env.mock
        .push_json(call("r1", "read", json!({"file_path":"hello.txt"})));
    let long = format!("The file says hello. {}", "Details. ".repeat(700));
    env.mock.push_json(json!({
        "chunks":[{"text":long}], "finish":"stop",
        "usage":{"prompt_tokens":3800,"completion_tokens":20}
    }));
    // Turn 2: first the summary call, then the conversation.
    env.mock
        .push_json(reply("SUMMARY: read hello.txt, it says hello."));
    env.mock.push_json(reply("Still here."));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "read hello.txt").await.unwrap();
    conn.clear_updates();
    assert_eq!(
        conn.prompt(&session, "what next?")
            .await
            .unwrap()
            .stop_reason,
        StopReason::EndTurn
    );
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 4);
    let before = transcript(&requests[1]);
    let summary_call = transcript(&requests[2]);
    assert!(requests[2]["tools"].is_null(), "no tools in a summary call");
    assert!(summary_call
        .last()
        .unwrap()
        .contains("write a summary of the conversation"));
    assert!(
        summary_call.iter().any(|m| m.starts_with("tool: ")),
        "the summary reads the tool result"
    );
    let after = transcript(&requests[3]);
    assert!(
        after[1].contains("<conversation-summary>\nSUMMARY: read hello.txt"),
        "{after:#?}"
    );
    assert!(
        !after.iter().any(|m| m.starts_with("tool: ")),
        "the call went with its result"
    );
    assert_eq!(after.last().unwrap(), "user: what next?");
    let size = |messages: &[String]| messages.iter().map(String::len).sum::<usize>();
    // Without the summary it would have carried turn 1's long reply too.
    assert!(size(&after) < size(&before) + long.len(), "shorter");

    // The editor saw the compaction as a tool call, then the usage.
    let updates = conn.updates();
    let shown: Vec<_> = updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::ToolCall(call) => Some(format!("call {} {:?}", call.title, call.status)),
            SessionUpdate::ToolCallUpdate(update) => {
                Some(format!("update {:?}", update.fields.status))
            }
            SessionUpdate::UsageUpdate(usage) => Some(format!("usage {}", usage.size)),
            _ => None,
        })
        .collect();
    assert_eq!(
        &shown[..3],
        [
            "call Compact conversation InProgress",
            "update Some(Completed)",
            "usage 4000"
        ],
        "{shown:?}"
    );
    conn.finish().await;

    // A new process derives the same history, and replays the marker.
    env.mock.push_json(reply("Loaded."));
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    // Replayed as it went (its start is logged): in progress, then
    // completed.
    let replayed = conn.updates();
    let started = replayed
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::ToolCall(call)
                if call.title == "Compact conversation"
                    && call.status == ToolCallStatus::InProgress =>
            {
                Some(call.tool_call_id.clone())
            }
            _ => None,
        })
        .expect("the compaction's start is replayed");
    assert!(replayed.iter().any(|n| matches!(&n.update,
        SessionUpdate::ToolCallUpdate(update) if update.tool_call_id == started
            && update.fields.status == Some(ToolCallStatus::Completed))));
    conn.prompt(&session, "and now").await.unwrap();
    let reloaded = transcript(&env.mock.requests()[4]);
    let mut expected = after.clone();
    expected.push("assistant: Still here.".to_owned());
    expected.push("user: and now".to_owned());
    assert_eq!(reloaded, expected);
    conn.finish().await;
}

#[tokio::test]
async fn an_overflow_compacts_and_retries_the_step() {
    let env = TestEnv::with_config(SMALL_MODEL).await;
    env.mock.push_json(reply("First answer."));
    env.mock.push_json(json!({
        "status": 400,
        "body": json!({"error":{"message":"This model's maximum context length is 4000 tokens. However, you requested 5000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","code":"context_length_exceeded"}}).to_string()
    }));
    env.mock.push_json(reply("SUMMARY: the user said hello."));
    env.mock.push_json(reply("Recovered."));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "hello").await.unwrap();
    let response = conn.prompt(&session, "go on").await.unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert!(chunk_text(&conn.updates(), false).ends_with("Recovered."));
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 4);
    let retried = transcript(&requests[3]);
    assert!(
        retried[1].contains("<conversation-summary>"),
        "{retried:#?}"
    );
    assert_eq!(retried.last().unwrap(), "user: go on");
    conn.finish().await;
}

#[tokio::test]
async fn old_large_tool_results_are_pruned_without_a_model_call() {
    let env = TestEnv::with_config(SMALL_MODEL).await;
    let big: String = (0..5000).map(|i| format!("line {i:05}\n")).collect();
    std::fs::write(env.cwd().join("big.txt"), &big).unwrap();
    env.mock.push_json(call(
        "r1",
        "read",
        json!({"file_path":"big.txt","limit":100000}),
    ));
    env.mock.push_json(json!({
        "chunks":[{"text":"Read it."}], "finish":"stop",
        "usage":{"prompt_tokens":3500,"completion_tokens":10}
    }));
    env.mock.push_json(reply("Next."));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "read big.txt").await.unwrap();
    conn.prompt(&session, "next").await.unwrap();
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 3, "no summary call");
    let whole = transcript(&requests[1]);
    let pruned = transcript(&requests[2]);
    let tool = |messages: &[String]| {
        messages
            .iter()
            .find(|m| m.starts_with("tool: "))
            .unwrap()
            .clone()
    };
    let whole = tool(&whole);
    assert!(whole.chars().count() > 20_000, "{}", whole.chars().count());
    let cut = tool(&pruned);
    assert!(
        cut.contains("characters of this tool result were removed"),
        "{cut}"
    );
    assert!(
        cut.chars().count() < 4096 + 1024 + 300,
        "{}",
        cut.chars().count()
    );
    let (head, tail) = (&whole[..200], &whole[whole.len() - 200..]);
    assert!(
        cut.starts_with(head) && cut.ends_with(tail),
        "head and tail kept"
    );
    let events = env.log_events(&session);
    assert!(events.iter().any(|e| e["type"] == "compaction/prune"));
    // The log keeps the result whole.
    assert!(events.iter().any(|e| e["type"] == "tool/result"
        && e["data"]["output"].as_str() == Some(whole.trim_start_matches("tool: "))));
    conn.finish().await;
}

#[tokio::test]
async fn slash_commands_are_offered_and_compact_runs_on_demand() {
    let env = TestEnv::new().await;
    env.mock.push_json(reply("One."));
    env.mock.push_json(reply("Two."));
    env.mock.push_json(reply("SUMMARY with focus."));
    env.mock.push_json(reply("Echo of /unknown."));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let offered = conn.commands();
    let SessionUpdate::AvailableCommandsUpdate(update) = &offered[0].update else {
        unreachable!()
    };
    let names: Vec<_> = update
        .available_commands
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["compact", "init", "plan", "mode", "model", "undo", "fork", "skills", "goal", "help"]
    );
    conn.prompt(&session, "first").await.unwrap();
    conn.prompt(&session, "second").await.unwrap();
    conn.clear_updates();
    let response = conn
        .prompt(&session, "/compact keep the numbers")
        .await
        .unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let requests = env.mock.requests();
    let summary_call = transcript(&requests[2]);
    assert!(summary_call
        .last()
        .unwrap()
        .contains("focus on: keep the numbers"));
    let kinds: Vec<_> = conn
        .updates()
        .iter()
        .map(|n| match &n.update {
            SessionUpdate::ToolCall(call) => format!("call {} {:?}", call.title, call.status),
            SessionUpdate::ToolCallUpdate(update) => format!("update {:?}", update.fields.status),
            SessionUpdate::UsageUpdate(_) => "usage".to_owned(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "call Compact conversation InProgress",
            "update Some(Completed)",
            "usage"
        ]
    );
    // An unknown command is plain text for the model.
    conn.prompt(&session, "/unknown thing").await.unwrap();
    let last = transcript(env.mock.requests().last().unwrap());
    assert_eq!(last.last().unwrap(), "user: /unknown thing");
    assert!(
        last[1].contains("<conversation-summary>\nSUMMARY with focus."),
        "{last:#?}"
    );
    // Load and resume offer the commands too.
    conn.finish().await;
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    assert_eq!(conn.commands().len(), 1);
    conn.finish().await;
}

#[tokio::test]
async fn init_writes_agents_md_only_after_permission() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path":"AGENTS.md","content":"# Agents\nRun cargo test.\n"}),
    ));
    env.mock.push_json(reply("Wrote AGENTS.md."));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(Arc::clone(&sim)).await;
    let session = conn.start(&env.cwd()).await;
    assert_eq!(
        conn.prompt(&session, "/init").await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    let first = transcript(&env.mock.requests()[0]);
    assert!(
        first.last().unwrap().contains("write an AGENTS.md file"),
        "{first:#?}"
    );
    assert_eq!(sim.asked(), ["w1"], "the write was asked about");
    assert_eq!(
        std::fs::read_to_string(env.cwd().join("AGENTS.md")).unwrap(),
        "# Agents\nRun cargo test.\n"
    );
    conn.finish().await;
}

#[tokio::test]
async fn changed_and_removed_instructions_are_announced_at_the_next_turn() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    std::fs::create_dir(cwd.join(".git")).unwrap();
    std::fs::write(cwd.join("AGENTS.md"), "Use tabs.\n").unwrap();
    std::fs::write(cwd.join("AGENTS.local.md"), "Be brief.\n").unwrap();
    env.mock.push_json(reply("one"));
    env.mock.push_json(reply("two"));
    env.mock.push_json(reply("three"));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    conn.prompt(&session, "one").await.unwrap();
    conn.prompt(&session, "two").await.unwrap();
    std::fs::write(cwd.join("AGENTS.md"), "Use spaces.\n").unwrap();
    std::fs::remove_file(cwd.join("AGENTS.local.md")).unwrap();
    conn.prompt(&session, "three").await.unwrap();
    let requests = env.mock.requests();
    assert_eq!(
        count(&transcript(&requests[1]), "<system-reminder>"),
        1,
        "nothing new at turn 2"
    );
    let third = transcript(&requests[2]);
    let last = third.last().unwrap();
    let root = cwd.canonicalize().unwrap();
    assert!(
        last.contains(&format!(
            "Updated instructions from: {}/AGENTS.md\nUse spaces.",
            root.display()
        )),
        "{last}"
    );
    assert!(
        last.contains(&format!(
            "Instructions removed: {}/AGENTS.local.md",
            root.display()
        )),
        "{last}"
    );
    assert!(last.ends_with("three"));
    conn.finish().await;
}
