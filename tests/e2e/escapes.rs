//! Issue 23: what a hostile repository (or a command the user allowed, or
//! a background job) can do to dsh's own file operations — links swapped
//! in after a check, instruction files that point at secrets, secrets in a
//! workspace that is the home directory.

use std::os::unix::fs::symlink;

use serde_json::json;

use crate::support::*;

/// A directory outside the workspace, canonical.
fn outside() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

/// A session in accept-edits whose first turn edited `hello.txt`
/// ("hello" → "bye").
async fn edited(
    env: &TestEnv,
    cwd: &std::path::Path,
) -> (Conn, agent_client_protocol::v1::schema::SessionId) {
    env.mock.push_json(call(
        "e1",
        "edit",
        json!({"file_path": "hello.txt", "old_string": "hello", "new_string": "bye"}),
    ));
    env.mock.push_json(reply("Edited."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(cwd).await;
    conn.set_mode(&session, "accept-edits").await;
    conn.prompt(&session, "edit").await.unwrap();
    (conn, session)
}

/// Item 1: the file a turn edited is swapped for a link to an outside file
/// holding the same text (so "changed since" would pass through the link):
/// `/undo` refuses it by name and the outside file is untouched.
#[tokio::test]
async fn undo_refuses_a_file_swapped_for_a_link_and_writes_nothing_outside() {
    let env = TestEnv::new().await;
    let cwd = env.cwd().canonicalize().unwrap();
    let (_keep, far) = outside();
    let (conn, session) = edited(&env, &cwd).await;
    // What the turn left, moved outside; the workspace file becomes a link.
    std::fs::write(far.join("victim.txt"), "bye\n").unwrap();
    std::fs::remove_file(cwd.join("hello.txt")).unwrap();
    symlink(far.join("victim.txt"), cwd.join("hello.txt")).unwrap();
    conn.clear_updates();
    conn.prompt(&session, "/undo").await.unwrap();
    let said = chunk_text(&conn.updates(), false);
    assert!(
        said.contains("Cannot undo")
            && said.contains("hello.txt")
            && said.contains("symbolic link"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(far.join("victim.txt")).unwrap(),
        "bye\n",
        "the outside file keeps its text"
    );
    conn.finish().await;
}

/// Item 1: a directory the turn wrote into is replaced by a link to another
/// project's directory holding the same file: `/undo` does not delete it.
/// A file the turn deleted becomes a dangling link to
/// `~/.ssh/authorized_keys`-like target: `/undo` does not create it.
#[tokio::test]
async fn undo_neither_deletes_nor_creates_through_a_swapped_directory_or_a_dangling_link() {
    let env = TestEnv::new().await;
    let cwd = env.cwd().canonicalize().unwrap();
    let (_keep, far) = outside();
    std::fs::create_dir(cwd.join("d")).unwrap();
    std::fs::write(cwd.join("gone.txt"), "old\n").unwrap();
    env.mock.push_json(calls(&[
        (
            "w1",
            "write",
            json!({"file_path": "d/new.txt", "content": "made\n"}),
        ),
        (
            "b1",
            "bash",
            json!({"command": "rm gone.txt", "description": "delete"}),
        ),
    ]));
    env.mock.push_json(reply("Done."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&cwd).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "make and delete").await.unwrap();
    assert!(cwd.join("d/new.txt").exists() && !cwd.join("gone.txt").exists());
    conn.set_mode(&session, "ask").await;
    // `d` becomes a link to another project's directory with the same file.
    std::fs::create_dir(far.join("project")).unwrap();
    std::fs::write(far.join("project/new.txt"), "made\n").unwrap();
    std::fs::remove_dir_all(cwd.join("d")).unwrap();
    symlink(far.join("project"), cwd.join("d")).unwrap();
    // `gone.txt` becomes a dangling link to a key file.
    symlink(far.join("authorized_keys"), cwd.join("gone.txt")).unwrap();
    conn.clear_updates();
    conn.prompt(&session, "/undo").await.unwrap();
    let said = chunk_text(&conn.updates(), false);
    assert!(said.contains("Cannot undo"), "{said}");
    assert!(said.contains("symbolic link"), "{said}");
    assert!(
        far.join("project/new.txt").exists(),
        "the other project's file is not deleted"
    );
    assert!(
        !far.join("authorized_keys").exists(),
        "nothing is created through the link"
    );
    // Only the directory swapped: the dangling link alone is refused too.
    std::fs::remove_file(cwd.join("d")).unwrap();
    std::fs::create_dir(cwd.join("d")).unwrap();
    std::fs::write(cwd.join("d/new.txt"), "made\n").unwrap();
    conn.clear_updates();
    conn.prompt(&session, "/undo").await.unwrap();
    let said = chunk_text(&conn.updates(), false);
    assert!(
        said.contains("gone.txt") && said.contains("symbolic link"),
        "{said}"
    );
    assert!(!far.join("authorized_keys").exists());
    let frames = conn.finish().await;
    validate_frames(&frames);
}

/// Item 1: `/undo` changes files, so read-only and plan refuse it.
#[tokio::test]
async fn undo_is_refused_in_read_only_and_plan_modes() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    let (conn, session) = edited(&env, &cwd).await;
    for mode in ["read-only", "plan"] {
        conn.set_mode(&session, mode).await;
        conn.clear_updates();
        conn.prompt(&session, "/undo").await.unwrap();
        let said = chunk_text(&conn.updates(), false);
        assert!(said.contains(&format!("in {mode} mode")), "{said}");
        assert_eq!(
            std::fs::read_to_string(cwd.join("hello.txt")).unwrap(),
            "bye\n"
        );
    }
    conn.set_mode(&session, "ask").await;
    conn.prompt(&session, "/undo").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(cwd.join("hello.txt")).unwrap(),
        "hello\n"
    );
    conn.finish().await;
}

/// Item 1: a background job swaps a directory for a link to an outside one
/// over and over while the model writes into it in accept-edits: no write
/// lands outside.
#[tokio::test]
async fn writes_never_land_outside_while_a_job_swaps_a_directory_for_a_link() {
    let env = TestEnv::relaxed().await;
    let cwd = env.cwd().canonicalize().unwrap();
    let (_keep, far) = outside();
    std::fs::create_dir(cwd.join("d")).unwrap();
    let swapper = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "cd {cwd:?} && for i in $(seq 1 5000); do mv d d.real && ln -s {far:?} d; sleep 0.002; rm -f d && mv d.real d; sleep 0.002; done 2>/dev/null"
        ))
        .spawn()
        .unwrap();
    let writes: Vec<(String, &str, serde_json::Value)> = (0..100)
        .map(|i| {
            (
                format!("w{i}"),
                "write",
                json!({"file_path": format!("d/x{i}.txt"), "content": "x"}),
            )
        })
        .collect();
    let list: Vec<(&str, &str, serde_json::Value)> = writes
        .iter()
        .map(|(id, tool, args)| (id.as_str(), *tool, args.clone()))
        .collect();
    env.mock.push_json(calls(&list));
    env.mock.push_json(reply("Wrote."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&cwd).await;
    conn.set_mode(&session, "accept-edits").await;
    conn.prompt(&session, "write a hundred files")
        .await
        .unwrap();
    let mut swapper = swapper;
    let _ = swapper.kill();
    let _ = swapper.wait();
    let landed: Vec<_> = std::fs::read_dir(&far)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(landed.is_empty(), "writes landed outside: {landed:?}");
    conn.finish().await;
}

/// Item 3: instruction files that are links to the credentials file or a
/// private key are never read, in any mode; a link that stays inside the
/// project still is.
#[tokio::test]
async fn instruction_files_linked_to_secrets_are_never_read() {
    let env = TestEnv::new().await;
    let cwd = env.cwd().canonicalize().unwrap();
    let home = env.home.path().canonicalize().unwrap();
    std::fs::write(
        home.join(".credentials.yaml"),
        "deepseek_api_key: sk-CRED-7c1d\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "PRIVATE-KEY-93ab\n").unwrap();
    symlink(home.join(".credentials.yaml"), cwd.join("AGENTS.md")).unwrap();
    symlink(home.join(".ssh/id_rsa"), cwd.join("CLAUDE.md")).unwrap();
    std::fs::write(cwd.join("NOTES.md"), "Use tabs.\n").unwrap();
    symlink("NOTES.md", cwd.join("AGENTS.local.md")).unwrap();
    env.mock.push_json(reply("Hi."));
    env.mock.push_json(reply("Hi again."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&cwd).await;
    conn.prompt(&session, "hello").await.unwrap();
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "again").await.unwrap();
    let sent = serde_json::to_string(&env.mock.requests()).unwrap();
    assert!(
        !sent.contains("sk-CRED-7c1d"),
        "credentials reached the model"
    );
    assert!(
        !sent.contains("PRIVATE-KEY-93ab"),
        "a key reached the model"
    );
    assert!(
        sent.contains("Use tabs."),
        "a link inside the project is read"
    );
    let log = std::fs::read_to_string(env.log_path(&session)).unwrap();
    assert!(!log.contains("sk-CRED-7c1d") && !log.contains("PRIVATE-KEY-93ab"));
    conn.finish().await;
}

/// Item 8: with the home directory as the workspace, the file tools do not
/// read, list or search the secret locations below full-access.
#[tokio::test]
async fn file_tools_keep_out_of_hidden_paths_when_the_workspace_is_home() {
    let mut env = TestEnv::new().await;
    // The user's home (not dsh's: $DSH_HOME is hidden as a whole).
    let user = tempfile::tempdir().unwrap();
    let home = user.path().canonicalize().unwrap();
    env.extra_env
        .push(("HOME".into(), home.display().to_string()));
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "PRIVATE-KEY-5f2e\n").unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".aws/credentials"), "aws_secret=AKIA-77\n").unwrap();
    std::fs::write(home.join("notes.txt"), "PRIVATE-KEY is a phrase\n").unwrap();
    env.mock.push_json(calls(&[
        ("r1", "read", json!({"file_path": ".ssh/id_rsa"})),
        ("r2", "read", json!({"file_path": ".aws/credentials"})),
        ("g1", "grep", json!({"pattern": "PRIVATE-KEY|AKIA"})),
        ("l1", "glob", json!({"pattern": "**/*"})),
        (
            "w1",
            "write",
            json!({"file_path": ".ssh/authorized_keys", "content": "ssh-ed25519 AAAA"}),
        ),
    ]));
    env.mock.push_json(reply("Done."));
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&home).await;
    conn.set_mode(&session, "read-only").await;
    conn.prompt(&session, "look around").await.unwrap();
    let sent = serde_json::to_string(&env.mock.requests()).unwrap();
    assert!(!sent.contains("PRIVATE-KEY-5f2e"), "{sent}");
    assert!(!sent.contains("AKIA-77"), "{sent}");
    assert!(!sent.contains("id_rsa\\n"), "glob listed the key: {sent}");
    assert!(
        sent.contains("notes.txt"),
        "other files are searched: {sent}"
    );
    assert!(sent.contains("hidden location"), "{sent}");
    assert!(!home.join(".ssh/authorized_keys").exists());
    conn.finish().await;
}
