//! Turns in process: the scripted model, a recording frontend, snapshots of
//! what the editor is shown and what the log holds.

use dsh_acp_server::update::AgentUpdate;
use dsh_protocol::log::{ConfigKey, PermissionOutcome};
use dsh_protocol::UserContent;
use expect_test::expect;
use serde_json::json;

use crate::{as_replayed, render, settled, Recorder, World};

fn call(id: &str, name: &str, args: serde_json::Value) -> serde_json::Value {
    json!({"chunks":[{"tool_call":{"index":0,"id":id,"name":name,"arguments":args.to_string()}}],"finish":"tool_calls"})
}

fn reply(text: &str) -> serde_json::Value {
    json!({"chunks":[{"text":text}],"finish":"stop"})
}

#[tokio::test]
async fn a_reply_streams_as_it_comes_and_is_recorded_once() {
    // Deltas that arrive together go out as one update; apart, as their
    // own; reasoning and text stay in the model's order either way.
    let world = World::new(&[
        json!({
            "chunks":[{"reasoning":"Think "},{"reasoning":"first."},{"text":"Hello "},{"text":"there."},
                      {"reasoning":" Then"},{"text":" again."}],
            "finish":"stop",
            "usage":{"prompt_tokens":120,"completion_tokens":8}
        }),
        json!({
            "chunks":[{"reasoning":"One"},{"text":"Two"},{"text":" three"}],
            "delay_ms": 20,
            "finish":"stop"
        }),
    ]);
    let session = world.session().await;
    let recorder = Recorder::default();
    assert_eq!(world.prompt(&session, "Say hi", &recorder).await, "EndTurn");
    expect![[r#"
        title "Say hi"
        thought "Think first."
        message "Hello there."
        thought " Then"
        message " again."
        usage 128/1000000
    "#]]
    .assert_eq(&render(&recorder.take(), &world.cwd()));
    expect![[r#"
        [
            "user/message",
            "session/title",
            "turn/start",
            "assistant/message",
            "turn/end",
        ]
    "#]]
    .assert_debug_eq(&world.log_types(&session));
    assert_eq!(world.prompt(&session, "Again", &recorder).await, "EndTurn");
    let shown: Vec<String> = recorder
        .take()
        .iter()
        .filter_map(|update| match update {
            AgentUpdate::ThoughtChunk(text, _) => Some(format!("thought {text}")),
            AgentUpdate::MessageChunk(text, _) => Some(format!("message {text}")),
            _ => None,
        })
        .collect();
    assert_eq!(shown, ["thought One", "message Two", "message  three"]);
}

#[tokio::test]
async fn tools_run_through_the_pipeline_and_answers_are_remembered() {
    let world = World::new(&[
        json!({"chunks":[
            {"tool_call":{"index":0,"id":"r1","name":"read","arguments":"{\"file_path\":\"hello.txt\"}"}},
            {"tool_call":{"index":1,"id":"b1","name":"bash","arguments":"{\"command\":\"echo one\",\"description\":\"say one\"}"}}
        ],"finish":"tool_calls"}),
        call(
            "b2",
            "bash",
            json!({"command":"echo two","description":"say two"}),
        ),
        reply("Done."),
    ]);
    let session = world.session().await;
    let recorder = Recorder::answering(&[PermissionOutcome::AllowAlways]);
    assert_eq!(
        world.prompt(&session, "Run things", &recorder).await,
        "EndTurn"
    );
    // One prompt: "always allow echo" covered the second command.
    let asked: Vec<String> = recorder
        .asked
        .lock()
        .unwrap()
        .iter()
        .map(|ask| ask.call_id.to_string())
        .collect();
    assert_eq!(asked, ["b1"]);
    expect![[r#"
        title "Run things"
        usage 4239/1000000
        tool_call r1 Pending "Read hello.txt" @$WS/hello.txt:1
        tool_call_update r1 Completed
        tool_call b1 Pending "Run echo one"
        tool_call_update b1 Completed text("```⏎one⏎[exit code: 0]⏎```")
        usage 4265/1000000
        tool_call b2 Pending "Run echo two"
        tool_call_update b2 Completed text("```⏎two⏎[exit code: 0]⏎```")
        message "Done."
        usage 4282/1000000
    "#]]
    .assert_eq(&render(&settled(&recorder.take()), &world.cwd()));
    expect![[r#"
        [
            "user/message",
            "session/title",
            "turn/start",
            "assistant/message",
            "tool/call",
            "tool/result",
            "tool/call",
            "permission/decision",
            "permission/rule",
            "tool/result",
            "assistant/message",
            "tool/call",
            "tool/result",
            "assistant/message",
            "turn/end",
        ]
    "#]]
    .assert_debug_eq(&world.log_types(&session));
}

/// Issue 11: what a fresh replay of the log shows equals what the editor
/// was shown live — chunks merged, transient updates left out, the
/// prompts (which the client sent) added — across text, reasoning, tool
/// calls with diffs and commands, a plan, a title, a mode change, usage
/// per step, an answered prompt and a cancelled turn.
#[tokio::test]
async fn replay_equals_live() {
    let world = World::new(&[
        json!({"chunks":[{"reasoning":"Plan."},
            {"tool_call":{"index":0,"id":"p1","name":"todo_write","arguments":"{\"todos\":[{\"content\":\"Edit\",\"status\":\"in_progress\"}]}"}},
            {"tool_call":{"index":1,"id":"r1","name":"read","arguments":"{\"file_path\":\"hello.txt\"}"}}
        ],"finish":"tool_calls","usage":{"prompt_tokens":500,"completion_tokens":20}}),
        call(
            "e1",
            "edit",
            json!({"file_path":"hello.txt","old_string":"hello","new_string":"hi"}),
        ),
        call(
            "b1",
            "bash",
            json!({"command":"cat hello.txt","description":"show it"}),
        ),
        reply("Edited and checked."),
        json!({"chunks":[{"text":"Once"},{"text":" upon"},{"text":" a time"}],"hang_after":2}),
    ]);
    let session = world.session().await;
    let recorder =
        Recorder::answering(&[PermissionOutcome::AllowOnce, PermissionOutcome::AllowOnce]);
    let mut live = Vec::new();

    live.push(AgentUpdate::UserChunk(UserContent::text("Edit it")));
    world.prompt(&session, "Edit it", &recorder).await;
    live.extend(recorder.take());

    world
        .agent
        .set_config_option(&session, ConfigKey::Mode, "accept-edits", &recorder)
        .unwrap();
    live.extend(recorder.take());

    // A turn cancelled while the model streams.
    live.push(AgentUpdate::UserChunk(UserContent::text("Tell a story")));
    let ticket = world.agent.begin_prompt(&session).await.unwrap();
    let cancel = ticket.cancel_token();
    let turn = world.agent.prompt(
        ticket,
        vec![UserContent::text("Tell a story")],
        std::sync::Arc::new(recorder.clone()),
    );
    let watch = async {
        while !recorder
            .updates
            .lock()
            .unwrap()
            .iter()
            .any(|u| matches!(u, AgentUpdate::MessageChunk(text, _) if text.ends_with(" upon")))
        {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        cancel.cancel();
    };
    let (stopped, ()) = tokio::join!(turn, watch);
    assert_eq!(format!("{:?}", stopped.unwrap()), "Cancelled");
    live.extend(recorder.take());

    let (_, replay) = world.load(&session).await;
    assert_eq!(settled(&replay), as_replayed(&live));
    expect![[r#"
        user "Text { text: \"Edit it\" }"
        title "Edit it"
        thought "Plan."
        tool_call p1 Pending "Update plan"
        plan [InProgress Edit]
        tool_call_update p1 Completed
        tool_call r1 Pending "Read hello.txt" @$WS/hello.txt:1
        tool_call_update r1 Completed
        tool_call e1 Pending "Edit hello.txt" @$WS/hello.txt:1
        tool_call_update e1 Completed diff($WS/hello.txt, 6 → 3 bytes)
        tool_call b1 Pending "Run cat hello.txt"
        tool_call_update b1 Completed text("```⏎hi⏎[exit code: 0]⏎```")
        message "Edited and checked."
        mode accept-edits
        config_options mode=accept-edits model=deepseek-v4-flash thought_level=high web=on
        user "Text { text: \"Tell a story\" }"
        message "Once upon"
        usage 4338/1000000
    "#]]
    .assert_eq(&render(&settled(&replay), &world.cwd()));
}

/// A closed session's log is released at once: it can be opened again.
#[tokio::test]
async fn a_closed_session_can_be_loaded_again_in_the_same_process() {
    let world = World::new(&[reply("one")]);
    let session = world.session().await;
    world.prompt(&session, "hi", &Recorder::default()).await;
    world.agent.close_session(&session).await.unwrap();
    let (opened, replay) = world.load(&session).await;
    assert_eq!(opened.session.id, session);
    expect![[r#"
        user "Text { text: \"hi\" }"
        title "hi"
        message "one"
        usage 4237/1000000
    "#]]
    .assert_eq(&render(&replay, &world.cwd()));
}

#[tokio::test]
async fn a_closed_session_gives_its_memory_back() {
    // Nothing keeps a closed session alive: not its turns, tools, replays
    // or settings (a process that keeps sessions for hours must not hold
    // every one it ever opened).
    let world = World::new(&[
        call("c1", "read", json!({"path":"hello.txt"})),
        reply("read it"),
        reply("again"),
    ]);
    let session = world.session().await;
    let recorder = Recorder::default();
    world.prompt(&session, "read hello.txt", &recorder).await;
    world.agent.close_session(&session).await.unwrap();
    let (opened, _) = world.load(&session).await;
    world.prompt(&session, "once more", &recorder).await;
    let held = std::sync::Arc::downgrade(&opened.session);
    drop(opened);
    world.agent.close_session(&session).await.unwrap();
    assert!(held.upgrade().is_none(), "the closed session is still held");
}

/// A frontend that falls behind after its fifth update and catches up
/// when the test says so.
#[derive(Default)]
struct Lagging {
    updates: std::sync::Mutex<Vec<AgentUpdate>>,
    behind: std::sync::atomic::AtomicBool,
    caught_up: tokio::sync::Notify,
    /// Told when it falls behind (the lag is timed from there, not from
    /// the turn's start, which a loaded machine delays).
    fell_behind: tokio::sync::Notify,
}

impl dsh_acp_server::frontend::Frontend for Lagging {
    fn emit(&self, output: dsh_acp_server::frontend::Output<'_>) {
        for update in output.into_updates() {
            let mut updates = self.updates.lock().unwrap();
            updates.push(update);
            if updates.len() == 5 {
                self.behind.store(true, std::sync::atomic::Ordering::SeqCst);
                self.fell_behind.notify_one();
            }
        }
    }

    fn hold(&self) -> Option<futures::future::BoxFuture<'_, ()>> {
        let behind = || self.behind.load(std::sync::atomic::Ordering::SeqCst);
        if !behind() {
            return None;
        }
        Some(Box::pin(async move {
            while behind() {
                let notified = self.caught_up.notified();
                if !behind() {
                    break;
                }
                notified.await;
            }
        }))
    }
}

/// Backpressure: while the editor is behind, the turn keeps reading the
/// model and merges what arrives; once it catches up, that goes out as
/// one update, and the turn streams on.
#[tokio::test]
async fn a_turn_holds_and_merges_deltas_while_the_editor_is_behind() {
    let chunks: Vec<serde_json::Value> =
        (0..60).map(|i| json!({"text": format!("{i} ")})).collect();
    let world = World::new(&[json!({"chunks": chunks, "delay_ms": 2, "finish": "stop"})]);
    let session = world.session().await;
    let frontend = std::sync::Arc::new(Lagging::default());
    let ticket = world.agent.begin_prompt(&session).await.unwrap();
    let turn = world
        .agent
        .prompt(ticket, vec![UserContent::text("count")], frontend.clone());
    let lag = async {
        frontend.fell_behind.notified().await;
        tokio::time::sleep(std::time::Duration::from_millis(60)).await;
        frontend
            .behind
            .store(false, std::sync::atomic::Ordering::SeqCst);
        frontend.caught_up.notify_waiters();
    };
    let (stopped, ()) = tokio::join!(turn, lag);
    assert_eq!(format!("{:?}", stopped.unwrap()), "EndTurn");
    let texts: Vec<String> = frontend
        .updates
        .lock()
        .unwrap()
        .iter()
        .filter_map(|update| match update {
            AgentUpdate::MessageChunk(text, _) => Some(text.clone()),
            _ => None,
        })
        .collect();
    let expected: String = (0..60).map(|i| format!("{i} ")).collect();
    assert_eq!(texts.concat(), expected, "nothing lost or reordered");
    // Before: one update per delta (they arrive 2 ms apart). While behind
    // (60 ms): nothing sent. Then one update with everything held.
    let held = texts
        .iter()
        .map(|text| text.split_whitespace().count())
        .max()
        .unwrap();
    assert!(held >= 10, "held deltas went out merged: {texts:?}");
    assert!(texts.len() < 60 - 10, "{} updates", texts.len());
}

#[tokio::test]
async fn a_compaction_that_replaces_nothing_is_logged_and_replays_failed() {
    // `/compact` whose summary call fails (the script has no reply for
    // it): its start and why it replaced nothing are recorded, so a load
    // shows what the user saw live.
    let world = World::new(&[reply("Hi.")]);
    let session = world.session().await;
    let recorder = Recorder::default();
    assert_eq!(world.prompt(&session, "Hello", &recorder).await, "EndTurn");
    recorder.take();
    world.prompt(&session, "/compact", &recorder).await;
    let compaction = |updates: &[AgentUpdate]| -> Vec<String> {
        updates
            .iter()
            .filter_map(|update| match update {
                AgentUpdate::ToolCall { view, status, .. } => {
                    Some(format!("call {} {status:?}", view.title))
                }
                AgentUpdate::ToolCallUpdate { view, status, .. } => Some(format!(
                    "update {status:?} {}",
                    serde_json::to_string(&view.content).unwrap()
                )),
                _ => None,
            })
            .collect()
    };
    let live = compaction(&recorder.take());
    assert_eq!(live.len(), 2, "{live:?}");
    assert_eq!(live[0], "call Compact conversation InProgress");
    assert!(
        live[1].starts_with("update Failed") && live[1].contains("The summary call failed"),
        "{live:?}"
    );
    let types = world.log_types(&session);
    let start = types.iter().position(|t| t == "compaction/start");
    let failed = types.iter().position(|t| t == "compaction/failed");
    assert!(start.is_some() && start < failed, "{types:?}");
    let (_, replayed) = world.load(&session).await;
    assert_eq!(compaction(&replayed), live);
}

/// A cancel is answered at once even when the editor stopped reading
/// before the first delta could go (the reply's text stays in the log).
#[tokio::test]
async fn a_cancel_is_answered_while_the_editor_never_reads() {
    let chunks: Vec<serde_json::Value> =
        (0..200).map(|i| json!({"text": format!("{i} ")})).collect();
    let world = World::new(&[json!({"chunks": chunks, "delay_ms": 2, "finish": "stop"})]);
    let session = world.session().await;
    let frontend = std::sync::Arc::new(Lagging::default());
    frontend
        .behind
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let ticket = world.agent.begin_prompt(&session).await.unwrap();
    let cancel = ticket.cancel_token();
    let turn = world
        .agent
        .prompt(ticket, vec![UserContent::text("count")], frontend.clone());
    let cancelling = async {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        cancel.cancel();
    };
    let (stopped, ()) = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        tokio::join!(turn, cancelling)
    })
    .await
    .expect("the cancelled turn returned");
    assert_eq!(format!("{:?}", stopped.unwrap()), "Cancelled");
    assert!(world
        .log_types(&session)
        .iter()
        .any(|t| t == "assistant/message"));
}
