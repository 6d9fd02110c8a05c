//! Issue 11: the editor's view of a session is one projection of its log.
//! What a fresh process replays on `session/load` equals what the editor
//! was shown live, and a client terminal's output survives the reload
//! (the terminal itself does not: it belonged to the old connection).

use agent_client_protocol::v1::schema::{
    McpServer, McpServerStdio, PermissionOptionKind, SessionNotification, SessionUpdate,
    ToolCallStatus,
};
use serde_json::{json, Value};

use crate::support::{
    call, calls, reply, test_lsp_binary, test_mcp_binary, Answer, ClientSim, TestEnv,
};

/// The updates as a client settles them: consecutive text chunks merged,
/// the transient `in_progress` notices and the client's own prompt left
/// out (live never echoes it; replay does).
fn settled(updates: &[SessionNotification]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    // The context use says what the context holds now: the last one stays
    // (a replay shows only that one, at its end).
    let mut usage = None;
    for notification in updates {
        let update = &notification.update;
        match update {
            SessionUpdate::UserMessageChunk(_) => continue,
            SessionUpdate::UsageUpdate(_) => {
                usage = Some(serde_json::to_value(update).unwrap());
                continue;
            }
            SessionUpdate::ToolCallUpdate(call)
                if call.fields.status == Some(ToolCallStatus::InProgress) =>
            {
                continue
            }
            _ => {}
        }
        let value = serde_json::to_value(update).unwrap();
        let kind = value["sessionUpdate"].clone();
        if let Some(last) = out.last_mut() {
            if last["sessionUpdate"] == kind
                && (kind == "agent_message_chunk" || kind == "agent_thought_chunk")
            {
                let more = value["content"]["text"].as_str().unwrap().to_owned();
                let text = last["content"]["text"].as_str().unwrap().to_owned() + &more;
                last["content"]["text"] = Value::String(text);
                continue;
            }
        }
        out.push(value);
    }
    out.extend(usage);
    out
}

#[tokio::test]
async fn a_fresh_process_replays_what_was_shown_live() {
    let env = TestEnv::with_config(&format!(
        "[lsp]\nbuiltin = false\nready_timeout_ms = 2000\n[[lsp.servers]]\nname = \"test-lsp\"\ncommand = \"{}\"\nextensions = {{ toy = \"toy\" }}\n",
        test_lsp_binary().display()
    ))
    .await;
    std::fs::write(
        env.cwd().join("main.toy"),
        "fn helper() {}\nfn main() {\n    helper();\n}\n",
    )
    .unwrap();
    env.mock.push_json(json!({"chunks":[
        {"reasoning":"Look around first."},
        {"tool_call":{"index":0,"id":"r1","name":"read","arguments":"{\"file_path\":\"hello.txt\"}"}},
        {"tool_call":{"index":1,"id":"l1","name":"lsp","arguments":"{\"operation\":\"hover\",\"file_path\":\"main.toy\",\"line\":1,\"character\":4}"}}
    ],"finish":"tool_calls","usage":{"prompt_tokens":900,"completion_tokens":30}}));
    env.mock.push_json(calls(&[
        ("m1", "mcp__fixture__echo", json!({"text":"hello"})),
        (
            "t1",
            "todo_write",
            json!({"todos":[{"content":"Edit","status":"in_progress"}]}),
        ),
    ]));
    env.mock.push_json(call(
        "e1",
        "edit",
        json!({"file_path":"hello.txt","old_string":"hello","new_string":"hi"}),
    ));
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command":"cat hello.txt","description":"show it"}),
    ));
    env.mock.push_json(reply("All done."));
    // A second turn, cancelled while the model streams.
    env.mock.push_json(
        json!({"chunks":[{"text":"Once"},{"text":" upon"},{"text":" a time"}],"hang_after":2}),
    );
    let sim = ClientSim::new(false, false);
    // The MCP call asks (ask mode); the edit and the command run after the
    // mode change.
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn
        .start_with_mcp(
            &env.cwd(),
            vec![McpServer::Stdio(
                McpServerStdio::new("fixture", test_mcp_binary()).args(vec!["stdio".to_owned()]),
            )],
        )
        .await;
    conn.set_mode(&session, "ask").await;
    sim.answer(Answer::SwitchModeThenSelect(
        "full-access".into(),
        PermissionOptionKind::AllowOnce,
    ));
    conn.prompt(&session, "Tidy up").await.unwrap();
    let waiting = conn.send_prompt(&session, "Tell a story");
    conn.wait_for("the story to start", |updates| {
        updates.iter().any(|n| matches!(&n.update, SessionUpdate::AgentMessageChunk(c) if serde_json::to_value(c).unwrap()["content"]["text"].as_str().is_some_and(|text| text.ends_with(" upon"))))
    })
    .await;
    conn.cancel(&session);
    let stopped = waiting.block_task().await.unwrap();
    assert_eq!(format!("{:?}", stopped.stop_reason), "Cancelled");
    let live = settled(&conn.updates());
    conn.finish().await;

    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    let replayed = settled(&conn.updates());
    conn.finish().await;

    let kinds = |updates: &[Value]| -> Vec<String> {
        updates
            .iter()
            .map(|u| u["sessionUpdate"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(kinds(&replayed), kinds(&live));
    for (index, (replayed, live)) in replayed.iter().zip(&live).enumerate() {
        assert_eq!(replayed, live, "update {index} differs");
    }
    // What the comparison covered.
    let all = kinds(&live).join(" ");
    for kind in [
        "session_info_update",
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call ",
        "tool_call_update",
        "plan",
        "usage_update",
        "current_mode_update",
        "config_option_update",
    ] {
        assert!(
            format!("{all} ").contains(kind),
            "{kind} missing from {all}"
        );
    }
    let titles: Vec<&str> = live.iter().filter_map(|u| u["title"].as_str()).collect();
    for expected in [
        "Read hello.txt",
        "fixture: echo",
        "Edit hello.txt",
        "Run cat hello.txt",
    ] {
        assert!(
            titles.iter().any(|t| t.contains(expected)),
            "{expected}: {titles:?}"
        );
    }
    assert!(titles.iter().any(|t| t.contains("main.toy")), "{titles:?}");
}

#[tokio::test]
async fn a_client_terminals_output_survives_reload_as_text() {
    // The sandbox cannot reach the editor's terminal: it is used only when
    // the configuration prefers it.
    let env = TestEnv::with_config("[sandbox]\nprefer_local = false").await;
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command":"echo from-the-terminal","description":"terminal run"}),
    ));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, true);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim).await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "run it").await.unwrap();
    let final_update = |updates: &[SessionNotification]| -> (Value, Value) {
        updates
            .iter()
            .rev()
            .find_map(|n| match &n.update {
                SessionUpdate::ToolCallUpdate(update)
                    if update.tool_call_id.0.as_ref() == "b1"
                        && update.fields.status == Some(ToolCallStatus::Completed) =>
                {
                    Some((
                        serde_json::to_value(&update.fields.content).unwrap(),
                        serde_json::to_value(&update.fields.raw_output).unwrap(),
                    ))
                }
                _ => None,
            })
            .unwrap()
    };
    let (live, live_raw) = final_update(&conn.updates());
    assert_eq!(live[0]["type"], "terminal", "{live}");
    conn.finish().await;

    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    let (replayed, replayed_raw) = final_update(&conn.updates());
    conn.finish().await;
    // What the model got, the same live (beside the terminal) and replayed.
    assert!(
        live_raw["output"]
            .as_str()
            .is_some_and(|output| output.contains("from-the-terminal")),
        "{live_raw}"
    );
    assert_eq!(replayed_raw, live_raw);
    assert!(
        replayed
            .as_array()
            .unwrap()
            .iter()
            .all(|content| content["type"] != "terminal"),
        "a terminal id never reaches another connection: {replayed}"
    );
    assert!(
        replayed.to_string().contains("from-the-terminal"),
        "the output is replayed as text: {replayed}"
    );
}
