//! Checkpoints and `/undo`, over ACP with the scripted model.

use agent_client_protocol::v1::schema::{PermissionOptionKind, SessionUpdate, ToolCallContent};
use serde_json::json;

use crate::support::*;

fn edit_hello() -> serde_json::Value {
    call(
        "e1",
        "edit",
        json!({"file_path": "hello.txt", "old_string": "hello", "new_string": "bye"}),
    )
}

fn undo_diffs(conn: &Conn) -> Vec<(String, Option<String>, String)> {
    conn.updates()
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(update)
                if update.tool_call_id.0.starts_with("dsh-undo-") =>
            {
                update.fields.content.clone()
            }
            _ => None,
        })
        .flatten()
        .filter_map(|content| match content {
            ToolCallContent::Diff(diff) => Some((
                diff.path
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
                diff.old_text.clone(),
                diff.new_text.clone(),
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn undo_puts_back_an_edit_and_what_a_command_did_even_after_a_reload() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    std::fs::write(cwd.join("gone.txt"), "bye-bye\n").unwrap();
    std::fs::write(cwd.join("keep.txt"), "keep\n").unwrap();
    env.mock.push_json(calls(&[
        (
            "e1",
            "edit",
            json!({"file_path": "hello.txt", "old_string": "hello", "new_string": "bye"}),
        ),
        (
            "b1",
            "bash",
            json!({"command": "echo made > made.txt && rm gone.txt && echo more >> keep.txt", "description": "make, delete and change files"}),
        ),
    ]));
    env.mock.push_json(reply("Changed."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&cwd).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "change things").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(cwd.join("hello.txt")).unwrap(),
        "bye\n"
    );
    assert!(cwd.join("made.txt").exists());
    let checkpoint = env
        .log_events(&session)
        .into_iter()
        .find(|e| e["type"] == "checkpoint")
        .expect("a checkpoint event");
    assert_eq!(checkpoint["data"]["files"].as_array().unwrap().len(), 4);
    assert!(!cwd.join("gone.txt").exists());
    conn.finish().await;

    // A new process loads the session and undoes the turn.
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &cwd).await;
    conn.clear_updates();
    conn.prompt(&session, "/undo").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(cwd.join("hello.txt")).unwrap(),
        "hello\n"
    );
    assert!(!cwd.join("made.txt").exists());
    assert_eq!(
        std::fs::read_to_string(cwd.join("gone.txt")).unwrap(),
        "bye-bye\n"
    );
    assert_eq!(
        std::fs::read_to_string(cwd.join("keep.txt")).unwrap(),
        "keep\n"
    );
    let mut diffs = undo_diffs(&conn);
    diffs.sort();
    assert_eq!(
        diffs,
        [
            ("gone.txt".to_owned(), None, "bye-bye\n".to_owned()),
            (
                "hello.txt".to_owned(),
                Some("bye\n".to_owned()),
                "hello\n".to_owned()
            ),
            (
                "keep.txt".to_owned(),
                Some("keep\nmore\n".to_owned()),
                "keep\n".to_owned()
            ),
        ]
    );
    // Only what a checkpoint refers to is kept: the earlier hello.txt,
    // gone.txt and keep.txt (the precopy's other files were dropped).
    let kept = std::fs::read_dir(env.home.path().join("checkpoints").join(session.0.as_ref()))
        .unwrap()
        .count();
    assert_eq!(kept, 3);
    // Nothing more to undo.
    conn.clear_updates();
    conn.prompt(&session, "/undo").await.unwrap();
    assert!(chunk_text(&conn.updates(), false).contains("Nothing to undo"));
    // The model hears of it with the next prompt.
    env.mock.push_json(reply("Understood."));
    conn.prompt(&session, "what now?").await.unwrap();
    let last = env.mock.requests().pop().unwrap()["messages"].to_string();
    assert!(last.contains("undid the file changes of turn 1"), "{last}");
    let frames = conn.finish().await;
    validate_frames(&frames);
}

#[tokio::test]
async fn undo_refuses_when_a_file_changed_after_the_turn_and_goes_back_one_turn_at_a_time() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    env.mock.push_json(edit_hello());
    env.mock.push_json(reply("One."));
    env.mock.push_json(call(
        "e2",
        "edit",
        json!({"file_path": "hello.txt", "old_string": "bye", "new_string": "ciao"}),
    ));
    env.mock.push_json(reply("Two."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&cwd).await;
    conn.set_mode(&session, "accept-edits").await;
    conn.prompt(&session, "one").await.unwrap();
    conn.prompt(&session, "two").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(cwd.join("hello.txt")).unwrap(),
        "ciao\n"
    );

    // The user changed the file since: nothing is touched.
    std::fs::write(cwd.join("hello.txt"), "mine\n").unwrap();
    conn.clear_updates();
    conn.prompt(&session, "/undo").await.unwrap();
    let said = chunk_text(&conn.updates(), false);
    assert!(
        said.contains("changed after it") && said.contains("hello.txt"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(cwd.join("hello.txt")).unwrap(),
        "mine\n"
    );

    // Put back what turn 2 left: undo goes to "bye", then to "hello".
    std::fs::write(cwd.join("hello.txt"), "ciao\n").unwrap();
    conn.prompt(&session, "/undo").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(cwd.join("hello.txt")).unwrap(),
        "bye\n"
    );
    conn.prompt(&session, "/undo").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(cwd.join("hello.txt")).unwrap(),
        "hello\n"
    );
    conn.finish().await;
}

#[tokio::test]
async fn undo_writes_through_the_editor_when_it_offers_its_file_system() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    env.mock.push_json(edit_hello());
    env.mock.push_json(reply("Edited."));
    let sim = ClientSim::new(true, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim.clone()).await;
    conn.initialize().await;
    let session = conn.start(&cwd).await;
    conn.prompt(&session, "edit").await.unwrap();
    let path = cwd.join("hello.txt").canonicalize().unwrap();
    assert_eq!(
        sim.buffers.lock().unwrap().get(&path).map(String::as_str),
        Some("bye\n")
    );
    conn.prompt(&session, "/undo").await.unwrap();
    let writes = sim.writes.lock().unwrap().clone();
    assert_eq!(
        writes.last().unwrap(),
        &(path.clone(), "hello\n".to_owned())
    );
    assert!(sim.violations.lock().unwrap().is_empty());
    conn.finish().await;
}

/// Issue 23, item 16: a session's checkpoint store has a budget
/// (`[checkpoints] max_bytes_per_session`); past it the oldest turn's kept
/// contents are evicted, and `/undo` of that turn says so and changes
/// nothing.
#[tokio::test]
async fn undo_of_a_turn_evicted_by_the_checkpoint_budget_says_so_and_changes_nothing() {
    let env = TestEnv::with_config("\n[checkpoints]\nmax_bytes_per_session = 2621440\n").await;
    let cwd = env.cwd();
    // Three files of 1 MiB, each different.
    for name in ["a", "b", "c"] {
        let body = format!("marker-{name}\n{}", name.repeat(1024 * 1024));
        std::fs::write(cwd.join(format!("{name}.txt")), body).unwrap();
    }
    for name in ["a", "b", "c"] {
        env.mock.push_json(call(
            &format!("e{name}"),
            "edit",
            json!({"file_path": format!("{name}.txt"), "old_string": format!("marker-{name}"), "new_string": format!("changed-{name}")}),
        ));
        env.mock.push_json(reply("Edited."));
    }
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&cwd).await;
    conn.set_mode(&session, "accept-edits").await;
    for name in ["a", "b", "c"] {
        conn.prompt(&session, &format!("edit {name}"))
            .await
            .unwrap();
    }
    // 3 MiB kept would be over the 2.5 MiB budget: turn 1's content went.
    let store = env.home.path().join("checkpoints").join(session.0.as_ref());
    let kept: u64 = std::fs::read_dir(&store)
        .unwrap()
        .map(|entry| entry.unwrap().metadata().unwrap().len())
        .sum();
    assert!(kept <= 2_621_440, "{kept} bytes kept");
    // Turns 3 and 2 undo as before.
    conn.prompt(&session, "/undo").await.unwrap();
    conn.prompt(&session, "/undo").await.unwrap();
    for name in ["b", "c"] {
        let text = std::fs::read_to_string(cwd.join(format!("{name}.txt"))).unwrap();
        assert!(
            text.starts_with(&format!("marker-{name}\n")),
            "{name}.txt not undone"
        );
    }
    // Turn 1's cannot: said, and nothing changed.
    conn.clear_updates();
    conn.prompt(&session, "/undo").await.unwrap();
    let said = chunk_text(&conn.updates(), false);
    assert!(
        said.contains(
            "the earlier content of turn 1 was evicted to stay within the checkpoint budget"
        ),
        "{said}"
    );
    let a = std::fs::read_to_string(cwd.join("a.txt")).unwrap();
    assert!(a.starts_with("changed-a\n"), "a.txt was changed");
    validate_frames(&conn.finish().await);
}
