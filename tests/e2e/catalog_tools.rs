//! The catalog's `read_image` and `str_replace_editor`, end to end: what the
//! model gets, what the editor sees, what is refused, asked and undone.

use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    SessionId, SessionUpdate, ToolCallContent, ToolCallStatus, ToolCallUpdate,
};
use serde_json::{json, Value};

use crate::support::{call, calls, reply, tool_names, tool_result, Conn, TestEnv};

const ENABLE_EDITOR: &str = "[tools]\nenable = [\"str_replace_editor\"]";

fn png(width: u32, height: u32) -> Vec<u8> {
    let image = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x / 16 % 256) as u8, (y / 16 % 256) as u8, 128])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    image.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

async fn use_vision_model(conn: &Conn, session: &SessionId) {
    conn.set_option(session, "model", "deepseek-v4-flash-vision-exp")
        .await;
}

/// The images of a model request's last message, decoded: (MIME, bytes).
fn sent_images(request: &Value) -> Vec<(String, Vec<u8>)> {
    use base64::Engine as _;
    let last = request["messages"].as_array().unwrap().last().unwrap();
    last["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|part| part["type"] == "image_url")
        .map(|part| {
            let url = part["image_url"]["url"].as_str().unwrap();
            let (head, data) = url.split_once(";base64,").unwrap();
            let mime = head.strip_prefix("data:").unwrap().to_owned();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap();
            (mime, bytes)
        })
        .collect()
}

fn final_update(conn: &Conn, call_id: &str) -> ToolCallUpdate {
    conn.updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::ToolCallUpdate(update)
                if update.tool_call_id.0.as_ref() == call_id
                    && update.fields.status.is_some_and(|s| {
                        matches!(s, ToolCallStatus::Completed | ToolCallStatus::Failed)
                    }) =>
            {
                Some(update)
            }
            _ => None,
        })
        .last()
        .unwrap_or_else(|| panic!("no final update for {call_id}"))
}

/// The diff the editor was shown for a call: (old text, new text).
fn diff_of(conn: &Conn, call_id: &str) -> (Option<String>, String) {
    let update = final_update(conn, call_id);
    match update.fields.content.as_deref() {
        Some([ToolCallContent::Diff(diff), ..]) => (diff.old_text.clone(), diff.new_text.clone()),
        other => panic!("{call_id}: expected a diff, got {other:?}"),
    }
}

#[tokio::test]
async fn read_image_is_offered_to_vision_models_and_sends_the_image_itself() {
    let env = TestEnv::new().await;
    let small = png(40, 30);
    // No extension: the format is the content's.
    std::fs::write(env.cwd().join("shot"), &small).unwrap();
    env.mock.push_json(reply("no images here"));
    env.mock
        .push_json(call("i1", "read_image", json!({"file_path": "shot"})));
    env.mock.push_json(reply("a gradient"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "hi").await.unwrap();
    assert!(
        !tool_names(&env.mock.requests()[0]).contains(&"read_image".to_owned()),
        "a model without images is not offered read_image"
    );
    use_vision_model(&conn, &session).await;
    conn.prompt(&session, "what is in shot?").await.unwrap();
    let requests = env.mock.requests();
    assert!(tool_names(&requests[1]).contains(&"read_image".to_owned()));
    let result = tool_result(&env, "i1");
    assert!(
        result.contains("PNG image") && result.contains("40x30 px"),
        "{result}"
    );
    assert_eq!(
        sent_images(&requests[2]),
        [("image/png".to_owned(), small)],
        "a small image is sent as it is, after the tool results"
    );
    conn.finish().await;
}

#[tokio::test]
async fn a_large_image_reaches_the_model_scaled_down() {
    let env = TestEnv::relaxed().await;
    std::fs::write(env.cwd().join("big.png"), png(4000, 3000)).unwrap();
    env.mock
        .push_json(call("i1", "read_image", json!({"file_path": "big.png"})));
    env.mock.push_json(reply("seen"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    use_vision_model(&conn, &session).await;
    conn.prompt(&session, "look").await.unwrap();
    let images = sent_images(&env.mock.requests()[1]);
    assert_eq!(images.len(), 1);
    let (mime, bytes) = &images[0];
    assert!(bytes.len() <= 5_000_000, "{} bytes", bytes.len());
    let sent = image::load_from_memory(bytes).unwrap();
    assert_eq!((sent.width(), sent.height()), (2048, 1536), "{mime}");
    let result = tool_result(&env, "i1");
    assert!(
        result.contains("4000x3000 px") && result.contains("scaled down to 2048x1536"),
        "{result}"
    );
    conn.finish().await;
}

#[tokio::test]
async fn huge_special_text_and_outside_files_are_refused_without_being_read() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    // 50 MB that start like a PNG (sparse: nothing to read but the head).
    let mut head = png(1, 1);
    head.truncate(33);
    std::fs::write(cwd.join("huge.png"), &head).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(cwd.join("huge.png"))
        .unwrap()
        .set_len(50 * 1024 * 1024)
        .unwrap();
    nix::unistd::mkfifo(&cwd.join("pipe.png"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("o.png"), png(2, 2)).unwrap();
    env.mock.push_json(calls(&[
        ("h1", "read_image", json!({"file_path": "huge.png"})),
        ("f1", "read_image", json!({"file_path": "pipe.png"})),
        ("t1", "read_image", json!({"file_path": "hello.txt"})),
        (
            "o1",
            "read_image",
            json!({"file_path": outside.path().join("o.png")}),
        ),
    ]));
    env.mock.push_json(reply("refused"));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    use_vision_model(&conn, &session).await;
    let started = Instant::now();
    conn.prompt(&session, "look at them").await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let huge = tool_result(&env, "h1");
    assert!(
        huge.contains("larger than the 20 MiB limit") && huge.contains("not read"),
        "{huge}"
    );
    let fifo = tool_result(&env, "f1");
    assert!(fifo.contains("named pipe (FIFO)"), "{fifo}");
    let text = tool_result(&env, "t1");
    assert!(text.contains("is not an image"), "{text}");
    assert_eq!(
        conn.sim.asked(),
        ["o1"],
        "a path outside the roots is asked about, as for read"
    );
    assert!(
        sent_images(&env.mock.requests()[1]).is_empty(),
        "nothing was attached"
    );
    for id in ["h1", "f1", "t1", "o1"] {
        assert_eq!(
            final_update(&conn, id).fields.status,
            Some(ToolCallStatus::Failed),
            "{id}"
        );
    }
    conn.finish().await;
}

#[tokio::test]
async fn str_replace_editor_views_creates_replaces_and_inserts_with_diffs_and_undo() {
    let env = TestEnv::with_config(ENABLE_EDITOR).await;
    let cwd = env.cwd();
    let original = "alpha\nbeta\ngamma\n";
    std::fs::write(cwd.join("src.txt"), original).unwrap();
    std::fs::write(cwd.join("dup.txt"), "x\nx\n").unwrap();
    std::fs::write(cwd.join(".hidden"), "secret-ish\n").unwrap();
    std::fs::create_dir_all(cwd.join("sub/deeper/deepest")).unwrap();
    let editor = |id: &'static str, args: Value| (id, "str_replace_editor", args);
    env.mock.push_json(calls(&[
        editor("v1", json!({"command": "view", "path": cwd.join("src.txt")})),
        editor(
            "v2",
            json!({"command": "view", "path": cwd, "view_range": null}),
        ),
        editor(
            "v3",
            json!({"command": "view", "path": "src.txt", "view_range": [2, -1]}),
        ),
        editor(
            "c1",
            json!({"command": "create", "path": "new.txt", "file_text": "one\ntwo\n"}),
        ),
        editor(
            "c2",
            json!({"command": "create", "path": "src.txt", "file_text": "clobber\n"}),
        ),
        editor(
            "r1",
            json!({"command": "str_replace", "path": "src.txt", "old_str": "beta", "new_str": "BETA"}),
        ),
        editor(
            "r2",
            json!({"command": "str_replace", "path": "dup.txt", "old_str": "x", "new_str": "y"}),
        ),
        editor(
            "i1",
            json!({"command": "insert", "path": "src.txt", "insert_line": 1, "new_str": "inserted", "old_str": null}),
        ),
        editor(
            "d1",
            json!({"command": "str_replace", "path": "src.txt", "old_str": "gamma\n"}),
        ),
    ]));
    env.mock.push_json(reply("edited"));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    conn.set_mode(&session, "accept-edits").await;
    conn.prompt(&session, "edit").await.unwrap();
    assert!(tool_names(&env.mock.requests()[0]).contains(&"str_replace_editor".to_owned()));
    assert!(
        conn.sim.asked().is_empty(),
        "accept-edits writes inside the roots without asking, as for edit"
    );

    let view = tool_result(&env, "v1");
    assert!(
        view.contains("     1\talpha\n     2\tbeta\n     3\tgamma\n"),
        "{view}"
    );
    let listing = tool_result(&env, "v2");
    assert!(
        listing.contains("src.txt") && listing.contains("sub/deeper/"),
        "{listing}"
    );
    assert!(
        !listing.contains(".hidden") && !listing.contains("deepest"),
        "hidden entries and a third level are left out: {listing}"
    );
    let range = tool_result(&env, "v3");
    assert!(
        range.contains("     2\tbeta\n     3\tgamma\n") && !range.contains("alpha"),
        "{range}"
    );
    assert!(
        tool_result(&env, "c2").contains("already exists"),
        "{}",
        tool_result(&env, "c2")
    );
    let ambiguous = tool_result(&env, "r2");
    assert!(ambiguous.contains("occurs 2 times"), "{ambiguous}");
    assert_eq!(
        std::fs::read_to_string(cwd.join("dup.txt")).unwrap(),
        "x\nx\n"
    );

    let now = "alpha\ninserted\nBETA\n";
    assert_eq!(std::fs::read_to_string(cwd.join("src.txt")).unwrap(), now);
    assert_eq!(
        std::fs::read_to_string(cwd.join("new.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(diff_of(&conn, "c1"), (None, "one\ntwo\n".to_owned()));
    assert_eq!(
        diff_of(&conn, "r1"),
        (Some(original.to_owned()), "alpha\nBETA\ngamma\n".to_owned())
    );
    assert_eq!(
        diff_of(&conn, "i1"),
        (
            Some("alpha\nBETA\ngamma\n".to_owned()),
            "alpha\ninserted\nBETA\ngamma\n".to_owned()
        )
    );
    assert_eq!(
        diff_of(&conn, "d1"),
        (
            Some("alpha\ninserted\nBETA\ngamma\n".to_owned()),
            now.to_owned()
        )
    );

    conn.prompt(&session, "/undo").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(cwd.join("src.txt")).unwrap(),
        original
    );
    assert!(!cwd.join("new.txt").exists(), "the created file is removed");
    conn.finish().await;
}

#[tokio::test]
async fn str_replace_editor_is_asked_about_protected_files_like_edit() {
    let env = TestEnv::with_config(ENABLE_EDITOR).await;
    let cwd = env.cwd();
    std::fs::write(cwd.join("AGENTS.md"), "Use tabs.\n").unwrap();
    env.mock.push_json(calls(&[
        (
            "e1",
            "edit",
            json!({"file_path": "AGENTS.md", "old_string": "tabs", "new_string": "spaces"}),
        ),
        (
            "s1",
            "str_replace_editor",
            json!({"command": "str_replace", "path": "AGENTS.md", "old_str": "tabs", "new_str": "spaces"}),
        ),
        (
            "s2",
            "str_replace_editor",
            json!({"command": "insert", "path": "AGENTS.md", "insert_line": 0, "new_str": "# Rules"}),
        ),
        (
            "v1",
            "str_replace_editor",
            json!({"command": "view", "path": "AGENTS.md"}),
        ),
    ]));
    env.mock.push_json(reply("asked"));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;
    conn.set_mode(&session, "accept-edits").await;
    conn.prompt(&session, "change the instructions")
        .await
        .unwrap();
    assert_eq!(
        conn.sim.asked(),
        ["e1", "s1", "s2"],
        "writes to a protected file are asked (and refused here), a view is not"
    );
    assert_eq!(
        std::fs::read_to_string(cwd.join("AGENTS.md")).unwrap(),
        "Use tabs.\n"
    );
    assert!(tool_result(&env, "v1").contains("     1\tUse tabs."));
    conn.finish().await;
}

#[tokio::test]
async fn str_replace_editor_reads_and_writes_through_the_editor_like_read_and_edit() {
    let env = TestEnv::with_config(ENABLE_EDITOR).await;
    let root = env.cwd().canonicalize().unwrap();
    env.mock.push_json(calls(&[
        (
            "v1",
            "str_replace_editor",
            json!({"command": "view", "path": "hello.txt"}),
        ),
        (
            "r1",
            "str_replace_editor",
            json!({"command": "str_replace", "path": "hello.txt", "old_str": "unsaved", "new_str": "edited"}),
        ),
        (
            "c1",
            "str_replace_editor",
            json!({"command": "create", "path": "new.txt", "file_text": "via client\n"}),
        ),
    ]));
    env.mock.push_json(reply("done"));
    let sim = crate::support::ClientSim::new(true, false);
    sim.buffers
        .lock()
        .unwrap()
        .insert(root.join("hello.txt"), "unsaved buffer\n".into());
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "accept-edits").await;
    conn.prompt(&session, "go").await.unwrap();
    assert_eq!(
        tool_result(&env, "v1"),
        "     1\tunsaved buffer\n",
        "a view sees the editor's buffer"
    );
    assert_eq!(
        sim.writes.lock().unwrap().clone(),
        [
            (root.join("hello.txt"), "edited buffer\n".to_owned()),
            (root.join("new.txt"), "via client\n".to_owned())
        ],
        "changes go to the editor"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("hello.txt")).unwrap(),
        "hello\n"
    );
    assert!(!root.join("new.txt").exists());
    conn.finish().await;
}
