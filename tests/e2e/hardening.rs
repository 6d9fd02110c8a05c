//! Issue 10: the defects found by attacking dsh and by driving it with
//! third-party clients. One test per item (items sharing a setup share a
//! test); each failed before its fix.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    ContentBlock, LoadSessionRequest, PermissionOptionKind, RequestPermissionRequest,
    SessionUpdate, SetSessionConfigOptionRequest, SetSessionModeRequest, StopReason,
    ToolCallContent,
};
use serde_json::{json, Value};

use crate::support::{
    call, calls, peak_rss, plant_workspace_server, procs, reply, tool_result, Answer, ClientSim,
    TestEnv,
};

fn select(kind: PermissionOptionKind) -> Answer {
    Answer::Select(kind)
}

fn option_names(request: &RequestPermissionRequest) -> Vec<(PermissionOptionKind, String)> {
    request
        .options
        .iter()
        .map(|option| (option.kind, option.name.clone()))
        .collect()
}

fn request_text(request: &RequestPermissionRequest) -> String {
    request
        .tool_call
        .fields
        .content
        .iter()
        .flatten()
        .filter_map(|content| match content {
            ToolCallContent::Content(content) => match &content.content {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Item 1: a language server shipped inside the workspace is a command from
/// the workspace. Read-only refuses it, ask mode asks (once per program,
/// for the session), and its `--version` probe gets no secrets.
#[tokio::test]
async fn issue10_item1_workspace_language_servers_need_permission_and_get_no_secrets() {
    let mut env = TestEnv::new().await;
    let root = env.cwd();
    // In the workspace: the server runs in the session's sandbox, which
    // can write only there (and never in dsh's home).
    let ran = root.join("ran.txt");
    // No rust-analyzer on this PATH: only the workspace has one.
    plant_workspace_server(
        &mut env,
        &format!(
            "echo \"ran $*\" >> '{}'\nenv >> '{}'\nexit 1\n",
            ran.display(),
            ran.display()
        ),
    );
    let query = |id: &str| {
        call(
            id,
            "lsp",
            json!({"operation":"hover","file_path":"src/main.rs","line":1,"character":1}),
        )
    };
    for id in ["l1", "l2", "l3", "l4"] {
        env.mock.push_json(query(id));
        env.mock.push_json(reply("ok"));
    }
    let sim = ClientSim::new(false, false);
    sim.answer(select(PermissionOptionKind::RejectOnce));
    sim.answer(select(PermissionOptionKind::AllowAlways));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&root).await;

    conn.set_mode(&session, "read-only").await;
    conn.prompt(&session, "symbols").await.unwrap();
    assert!(tool_result(&env, "l1").contains("read-only mode"));
    assert!(sim.asked().is_empty());
    assert!(!ran.exists(), "the workspace binary ran in read-only mode");

    conn.set_mode(&session, "ask").await;
    conn.prompt(&session, "symbols").await.unwrap();
    assert_eq!(sim.asked(), ["l2"]);
    assert!(!ran.exists(), "the workspace binary ran after a rejection");
    let request = sim.permission_requests.lock().unwrap()[0].clone();
    let options = option_names(&request);
    assert!(
        !options
            .iter()
            .any(|(kind, _)| *kind == PermissionOptionKind::AllowOnce),
        "{options:?}"
    );
    assert!(
        options
            .iter()
            .any(|(kind, name)| *kind == PermissionOptionKind::AllowAlways
                && name.contains("Allow for this session")
                && name.contains("node_modules/.bin/rust-analyzer")),
        "{options:?}"
    );

    conn.prompt(&session, "symbols").await.unwrap();
    assert_eq!(sim.asked(), ["l2", "l3"]);
    let log = std::fs::read_to_string(&ran).expect("allowed, the workspace binary ran");
    assert!(log.contains("ran --version"), "{log}");
    assert!(log.contains("PATH="), "{log}");
    assert!(
        !log.contains("DEEPSEEK_API_KEY") && !log.contains("test-key-d5h"),
        "the probe saw the API key:\n{log}"
    );

    // Remembered for the session: no second prompt.
    conn.prompt(&session, "symbols").await.unwrap();
    assert_eq!(sim.asked(), ["l2", "l3"]);
    conn.finish().await;
}

/// Item 2: a dangling symlink inside the workspace that points outside is
/// judged (and shown) by its target, through the disk and through the
/// editor's file system.
#[tokio::test]
async fn issue10_item2_a_dangling_symlink_is_judged_by_its_target() {
    let env = TestEnv::new().await;
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().canonicalize().unwrap().join("missing.md");
    std::os::unix::fs::symlink(&target, env.cwd().join("notes.md")).unwrap();
    let write = |id: &str| call(id, "write", json!({"file_path":"notes.md","content":"x"}));
    env.mock.push_json(write("w1"));
    env.mock.push_json(reply("done"));
    env.mock.push_json(write("w2"));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, false);
    sim.answer(select(PermissionOptionKind::RejectOnce));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "accept-edits").await;
    conn.prompt(&session, "write notes").await.unwrap();
    assert_eq!(sim.asked(), ["w1"], "an outside write asks in accept-edits");
    let title = sim.permission_requests.lock().unwrap()[0]
        .tool_call
        .fields
        .title
        .clone()
        .unwrap();
    assert!(
        title.contains(&target.display().to_string()),
        "the prompt names the real target: {title}"
    );
    assert!(!target.exists());
    conn.set_mode(&session, "read-only").await;
    conn.prompt(&session, "write notes").await.unwrap();
    assert!(tool_result(&env, "w2").contains("read-only mode"));
    assert!(!target.exists());
    conn.finish().await;

    // Through the editor's file system, the write goes to the target too.
    env.mock.push_json(write("w3"));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(true, false);
    sim.answer(select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "accept-edits").await;
    conn.prompt(&session, "write notes").await.unwrap();
    assert_eq!(sim.asked(), ["w3"]);
    let writes = sim.writes.lock().unwrap().clone();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].0, target);
    conn.finish().await;
}

/// Items 3, 4 and 9: allow rules match only plain commands (no parameter
/// tricks), "always" is offered only for a rule that could match again and
/// stores the command with its subcommand, reject rules see through
/// spellings, and the prompt shows the whole command with invisible
/// characters escaped.
#[tokio::test]
async fn issue10_items3_4_9_command_rules_are_parsed_scoped_and_shown_whole() {
    let env = TestEnv::new().await;
    std::fs::write(env.cwd().join("victim.txt"), "keep me\n").unwrap();
    let padded = format!("ls -la{}&& touch pwned \u{202e}txt.exe", " ".repeat(120));
    fn bash<'a>(id: &'a str, command: &str) -> (&'a str, &'static str, Value) {
        (
            id,
            "bash",
            json!({"command": command, "description": "list files"}),
        )
    }
    env.mock.push_json(calls(&[
        bash("c1", "ls -la"),
        bash("c2", "ls ${HOME@P}"),
        bash("c3", "ls ${!HOME}"),
        bash("c4", "git --no-pager log -1"),
        bash("c5", "echo a && pwd"),
        bash("c6", &padded),
        bash("c7", "ls"),
        bash("c8", "rm victim.txt"),
    ]));
    env.mock.push_json(reply("done"));
    env.mock.push_json(calls(&[
        bash("r1", "/bin/rm victim.txt"),
        bash("r2", "command rm victim.txt"),
        bash("r3", "'rm' victim.txt"),
        bash("r4", "\\rm victim.txt"),
        bash("r5", "env rm victim.txt"),
    ]));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, false);
    sim.answer(select(PermissionOptionKind::AllowAlways)); // c1: ls
    for _ in 0..5 {
        sim.answer(select(PermissionOptionKind::RejectOnce)); // c2..c6
    }
    sim.answer(select(PermissionOptionKind::RejectAlways)); // c8: rm
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "go").await.unwrap();
    assert_eq!(
        sim.asked(),
        ["c1", "c2", "c3", "c4", "c5", "c6", "c8"],
        "c7 (ls) ran under the rule; the expansions did not"
    );
    let requests = sim.permission_requests.lock().unwrap().clone();
    let always = |index: usize| {
        option_names(&requests[index])
            .into_iter()
            .find(|(kind, _)| *kind == PermissionOptionKind::AllowAlways)
            .map(|(_, name)| name)
    };
    assert_eq!(always(0).as_deref(), Some("Always allow (ls)"));
    assert_eq!(always(3).as_deref(), Some("Always allow (git log)"));
    assert_eq!(
        always(4),
        None,
        "echo a && pwd: no rule could match it again"
    );
    let title = requests[5].tool_call.fields.title.clone().unwrap();
    assert!(title.contains("&& touch pwned"), "{title}");
    let shown = request_text(&requests[5]);
    assert!(
        shown.contains(&" ".repeat(120)),
        "the whole command is shown"
    );
    assert!(shown.contains("\\u{202e}"), "{shown}");
    assert!(!shown.contains('\u{202e}'));
    assert!(shown.contains("The model says it will: list files"));

    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "go").await.unwrap();
    for id in ["r1", "r2", "r3", "r4", "r5"] {
        assert!(
            tool_result(&env, id).contains("always reject bash for rm"),
            "{id}: {}",
            tool_result(&env, id)
        );
    }
    assert!(env.cwd().join("victim.txt").exists());
    conn.finish().await;
}

/// Item 5: files whose change runs code (git config and hooks, direnv,
/// editor tasks) always ask, even in accept-edits, and never get "always";
/// dsh's own home is refused below full-access.
#[tokio::test]
async fn issue10_item5_protected_paths_ask_and_dsh_home_is_refused() {
    let env = TestEnv::new().await;
    std::fs::create_dir_all(env.cwd().join(".git/hooks")).unwrap();
    std::fs::write(env.cwd().join(".git/config"), "[core]\n").unwrap();
    let home_config = env.home.path().join("config.toml");
    let before = std::fs::read_to_string(&home_config).unwrap();
    env.mock.push_json(calls(&[
        ("w1", "write", json!({"file_path":".git/config","content":"[core]\n\tfsmonitor = touch pwned\n"})),
        ("w2", "write", json!({"file_path":".git/hooks/pre-commit","content":"#!/bin/sh\n"})),
        ("w3", "write", json!({"file_path":".envrc","content":"touch pwned\n"})),
        ("w4", "write", json!({"file_path": home_config.display().to_string(),"content":"default_mode = \"full-access\"\n"})),
        ("w5", "write", json!({"file_path":"src.txt","content":"fine\n"})),
    ]));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, false);
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "accept-edits").await;
    conn.prompt(&session, "go").await.unwrap();
    assert_eq!(sim.asked(), ["w1", "w2", "w3"]);
    for request in sim.permission_requests.lock().unwrap().iter() {
        assert!(
            !option_names(request)
                .iter()
                .any(|(kind, _)| *kind == PermissionOptionKind::AllowAlways),
            "protected paths are never remembered"
        );
    }
    assert_eq!(
        std::fs::read_to_string(env.cwd().join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!env.cwd().join(".envrc").exists());
    assert!(tool_result(&env, "w4").contains("dsh's own state"));
    assert_eq!(std::fs::read_to_string(&home_config).unwrap(), before);
    assert!(env.cwd().join("src.txt").exists());
    conn.finish().await;
}

/// Items 6 and 7: a child cannot read dsh's environment through /proc, the
/// scrub list covers common secret names (and configured patterns), and a
/// provider error that echoes the key reaches neither the editor nor the
/// log.
#[tokio::test]
async fn issue10_items6_7_children_cannot_read_dsh_or_its_secrets() {
    let mut env = TestEnv::with_config("[env]\nscrub = [\"ACME_*\"]").await;
    for (name, value) in [
        ("DATABASE_URL", "postgres://u:hunter2@h/db"),
        ("GH_PAT", "ghp_secret"),
        ("NPM_AUTH", "npm-secret"),
        ("PGPASSWORD", "pg-secret"),
        ("GOOGLE_APPLICATION_CREDENTIALS", "/secret.json"),
        ("SMTP_PASSWD", "smtp-secret"),
        ("SENTRY_DSN", "https://key@sentry"),
        ("SSH_PRIVATE_KEY", "-----BEGIN"),
        ("ACME_THING", "acme-secret"),
        ("KEEP_ME", "visible"),
    ] {
        env.extra_env.push((name.into(), value.into()));
    }
    let sim = ClientSim::new(false, false);
    let conn = env.connect_with(sim).await;
    let dsh = conn.child.id().unwrap();
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": format!("env; echo ---; tr '\\0' '\\n' < /proc/{dsh}/environ; echo status=$?"), "description": "look"}),
    ));
    env.mock.push_json(reply("done"));
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "look").await.unwrap();
    let output = tool_result(&env, "b1");
    assert!(output.contains("KEEP_ME=visible"), "{output}");
    for secret in [
        "DATABASE_URL",
        "GH_PAT",
        "NPM_AUTH",
        "PGPASSWORD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "SMTP_PASSWD",
        "SENTRY_DSN",
        "SSH_PRIVATE_KEY",
        "ACME_THING",
        "DEEPSEEK_API_KEY",
        "test-key-d5h",
    ] {
        assert!(
            !output.contains(secret),
            "{secret} reached a child:\n{output}"
        );
    }
    assert!(output.contains("Permission denied"), "{output}");

    // The provider echoes the key it rejected.
    env.mock.push_json(json!({"status": 401, "body": "{\"error\":{\"message\":\"Incorrect API key provided: test-key-d5h\"}}"}));
    let err = conn.prompt(&session, "again").await.unwrap_err();
    assert!(!format!("{err:?}").contains("test-key-d5h"), "{err:?}");
    assert!(err.message.contains("[redacted]"), "{}", err.message);
    let log = std::fs::read_to_string(env.log_path(&session)).unwrap();
    assert!(!log.contains("test-key-d5h"));
    conn.finish().await;
}

/// Item 10: a second process that loads a session another one holds gets
/// `session.locked` naming the holder; once the holder is gone it loads.
#[tokio::test]
async fn issue10_item10_a_second_writer_gets_session_locked() {
    let env = TestEnv::new().await;
    env.mock.push_json(reply("one"));
    env.mock.push_json(reply("two"));
    let first = env.connect().await;
    let session = first.start(&env.cwd()).await;
    first.prompt(&session, "hi").await.unwrap();
    let holder = first.child.id().unwrap();

    let second = env.connect().await;
    second.initialize().await;
    let err = second
        .cx
        .send_request(LoadSessionRequest::new(session.clone(), env.cwd()))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(err.data.as_ref().unwrap()["code"], "session.locked");
    assert!(
        err.message.contains(&format!("pid {holder}")),
        "{}",
        err.message
    );
    first.finish().await;

    second.load(&session, &env.cwd()).await;
    assert_eq!(
        second.prompt(&session, "again").await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    second.finish().await;
    let events = env.log_events(&session);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
}

/// Items 11 and 14: a FIFO is refused without blocking (two reads of one
/// used to freeze every session); logs are 0600 in a 0700 directory, an
/// existing 0755 directory tightened.
#[tokio::test]
async fn issue10_items11_14_fifos_are_refused_and_logs_are_private() {
    let env = TestEnv::new().await;
    std::fs::create_dir_all(env.sessions_dir()).unwrap();
    std::fs::set_permissions(env.sessions_dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(env.cwd().join("pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    env.mock.push_json(calls(&[
        ("r1", "read", json!({"file_path":"pipe"})),
        ("r2", "read", json!({"file_path":"pipe"})),
        ("w1", "write", json!({"file_path":"pipe","content":"x"})),
    ]));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    let started = Instant::now();
    let done = tokio::time::timeout(
        Duration::from_secs(10),
        conn.prompt(&session, "read the pipe"),
    )
    .await
    .expect("reading a FIFO must not block the turn");
    assert_eq!(done.unwrap().stop_reason, StopReason::EndTurn);
    assert!(started.elapsed() < Duration::from_secs(5));
    for id in ["r1", "r2", "w1"] {
        assert!(tool_result(&env, id).contains("named pipe"), "{id}");
    }
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&env.sessions_dir()), 0o700);
    assert_eq!(mode(&env.log_path(&session)), 0o600);
    conn.finish().await;
}

/// Items 12 and 13: memory for a call is bounded whatever the file (a huge
/// one-line file, a text file that starts like a GIF, a write over a huge
/// file), and rewriting a large file does not take minutes.
#[tokio::test]
async fn issue10_items12_13_huge_files_cost_bounded_memory_and_time() {
    use std::io::Write;
    let env = TestEnv::relaxed().await;
    let big = env.cwd().join("big.txt");
    {
        let mut file = std::fs::File::create(&big).unwrap();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..150 {
            file.write_all(&chunk).unwrap();
        }
    }
    let mut fake = b"GIF89a is how these notes begin\n".to_vec();
    while fake.len() < 20 << 20 {
        fake.extend_from_slice(b"just a line of plain text in a text file\n");
    }
    std::fs::write(env.cwd().join("notes.gif"), &fake).unwrap();
    let old: String = (0..40_000u64)
        .map(|i| format!("line {i} {}\n", i * 7919 % 10007))
        .collect();
    let new: String = (0..40_000u64)
        .map(|i| format!("row {i} {}\n", i * 104_729 % 10007))
        .collect();
    std::fs::write(env.cwd().join("rewrite.txt"), &old).unwrap();
    env.mock
        .push_json(call("r1", "read", json!({"file_path":"big.txt"})));
    env.mock.push_json(call(
        "r2",
        "read",
        json!({"file_path":"notes.gif","limit":3}),
    ));
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path":"big.txt","content":"small\n"}),
    ));
    env.mock.push_json(call(
        "w2",
        "write",
        json!({"file_path":"rewrite.txt","content": new}),
    ));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    let started = Instant::now();
    conn.prompt(&session, "go").await.unwrap();
    let elapsed = started.elapsed();
    assert!(tool_result(&env, "r1").contains("[line truncated: 157286400 characters]"));
    let notes = tool_result(&env, "r2");
    assert!(notes.contains("GIF89a is how these notes begin"), "{notes}");
    let last = env.mock.requests().last().unwrap().to_string();
    assert!(
        !last.contains("image/gif"),
        "a text file was sent as an image"
    );
    assert!(tool_result(&env, "w1").contains("Wrote"));
    assert_eq!(std::fs::read_to_string(&big).unwrap(), "small\n");
    assert!(tool_result(&env, "w2").contains("lines"));
    let peak = peak_rss(conn.child.id().unwrap());
    assert!(peak < 120 << 20, "dsh's peak RSS was {} MiB", peak >> 20);
    assert!(
        elapsed < Duration::from_secs(20),
        "the calls took {elapsed:?}"
    );
    eprintln!("peak RSS {} MiB, calls took {elapsed:?}", peak >> 20);
    conn.finish().await;
}

/// Item 15: a process a command starts with `setsid` dies with the
/// command.
#[tokio::test]
async fn issue10_item15_setsid_children_die_with_the_command() {
    let env = TestEnv::new().await;
    // One argument of the detached command (command lines are NUL-separated
    // in /proc, so the needle is a single word).
    let marker = format!("313.{}", std::process::id() % 1000);
    let cwd = env.cwd().canonicalize().unwrap();
    // The detector finds such a process.
    let mut probe = std::process::Command::new("sleep")
        .arg(&marker)
        .current_dir(&cwd)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while procs::live_pids(&marker, &cwd).len() != 1 {
        assert!(
            Instant::now() < deadline,
            "the detector does not see the probe"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    probe.kill().unwrap();
    probe.wait().unwrap();
    env.mock.push_json(call(
        "b1",
        "bash",
        // The daemon has left the command's process group before the
        // command ends (a group kill alone misses it).
        json!({"command": format!("setsid sleep {marker} < /dev/null > /dev/null 2>&1 & sleep 0.5; echo started"), "description": "detach"}),
    ));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "go").await.unwrap();
    assert!(tool_result(&env, "b1").contains("started"));
    let deadline = Instant::now() + Duration::from_secs(2);
    while !procs::live_pids(&marker, &cwd).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the setsid process outlived its command"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    conn.finish().await;
}

/// Item 16: ids the model repeats (in one reply and across steps) are made
/// unique for the editor; the provider keeps seeing the model's ids.
#[tokio::test]
async fn issue10_item16_repeated_tool_call_ids_are_made_unique() {
    let env = TestEnv::new().await;
    env.mock.push_json(calls(&[
        ("dup", "read", json!({"file_path":"hello.txt"})),
        ("dup", "read", json!({"file_path":"hello.txt"})),
    ]));
    env.mock
        .push_json(call("dup", "read", json!({"file_path":"hello.txt"})));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "go").await.unwrap();
    let ids: Vec<String> = conn
        .updates()
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::ToolCall(call) => Some(call.tool_call_id.0.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 3);
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), 3, "{ids:?}");
    let last = env.mock.requests().last().unwrap().clone();
    for message in last["messages"].as_array().unwrap() {
        if let Some(id) = message["tool_call_id"].as_str() {
            assert_eq!(id, "dup");
        }
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            assert_eq!(call["id"], "dup");
        }
    }
    conn.finish().await;
}

/// Item 17: the truncation note says what the spill file holds.
#[tokio::test]
async fn issue10_item17_the_spill_note_says_what_the_file_holds() {
    let env = TestEnv::relaxed().await;
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": "head -c 70000000 /dev/zero | tr '\\0' a; echo; echo end", "description": "lots"}),
    ));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "go").await.unwrap();
    let output = tool_result(&env, "b1");
    let note = output.lines().next().unwrap();
    assert!(note.contains("of 70000005 bytes"), "{note}");
    let path = note
        .split("the first 64 MiB of it are in ")
        .nth(1)
        .unwrap_or_else(|| panic!("{note}"))
        .trim_end_matches(']');
    assert_eq!(std::fs::metadata(path).unwrap().len(), 64 << 20);
    assert!(output.contains("end\n[exit code: 0]"));
    conn.finish().await;
}

/// Item 18: when the editor refuses a write, its error detail reaches the
/// model.
#[tokio::test]
async fn issue10_item18_the_editors_write_error_detail_is_kept() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path":"new.txt","content":"x"}),
    ));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(true, false);
    *sim.fail_writes.lock().unwrap() = Some("Permission denied for fs/write_text_file".into());
    let conn = env.connect_with(sim).await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "go").await.unwrap();
    assert!(
        tool_result(&env, "w1").contains("Permission denied for fs/write_text_file"),
        "{}",
        tool_result(&env, "w1")
    );
    conn.finish().await;
}

/// A strict chat template's rule (llama.cpp, Mistral-style): after the
/// system message, user and assistant alternate; tool messages follow an
/// assistant message with tool calls (or another tool message), and a user
/// message may carry attachments after tool results.
fn assert_alternates(messages: &[Value]) {
    let mut previous = "system";
    for (index, message) in messages.iter().enumerate().skip(1) {
        let role = message["role"].as_str().unwrap();
        let ok = match role {
            "user" => previous != "user",
            "assistant" => previous != "assistant",
            "tool" => {
                previous == "tool"
                    || (previous == "assistant" && messages[index - 1]["tool_calls"].is_array())
            }
            _ => false,
        };
        assert!(
            ok,
            "message {index} ({role}) after {previous}: {messages:#?}"
        );
        previous = role;
    }
}

/// Item 19: failed and cancelled turns do not leave user messages in a
/// row, before and after a reload.
#[tokio::test]
async fn issue10_item19_failed_turns_keep_the_history_alternating() {
    let env = TestEnv::new().await;
    for _ in 0..3 {
        env.mock
            .push_json(json!({"status": 400, "body": "{\"error\":{\"message\":\"bad request\"}}"}));
    }
    env.mock.push_json(reply("finally"));
    env.mock.push_json(reply("still fine"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    for text in ["one", "two", "three"] {
        assert!(conn.prompt(&session, text).await.is_err());
    }
    conn.prompt(&session, "four").await.unwrap();
    let messages = env.mock.requests().last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_alternates(&messages);
    conn.finish().await;

    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    conn.prompt(&session, "five").await.unwrap();
    let messages = env.mock.requests().last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_alternates(&messages);
    assert_eq!(messages.iter().filter(|m| m["role"] == "user").count(), 5);
    conn.finish().await;
}

/// Item 19b: errors of real servers are classified by type and code, a
/// server without usage still gets a context meter, and debug logs show the
/// model traffic without secrets.
#[tokio::test]
async fn issue10_item19b_model_errors_usage_and_logs() {
    let env = TestEnv::new().await;
    env.mock.push_json(json!({"status": 400, "body": "{\"error\":{\"code\":400,\"message\":\"the request exceeds the available context size, try increasing it\",\"type\":\"exceed_context_size_error\"}}"}));
    env.mock.push_json(json!({"raw": ["{\"error\":{\"message\":\"The model `x` does not exist\",\"type\":\"invalid_request_error\",\"code\":\"model_not_found\"}}"]}));
    env.mock.push_json(reply("hello"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let err = conn.prompt(&session, "one").await.unwrap_err();
    assert_eq!(
        err.data.as_ref().unwrap()["code"],
        "model.context_window_exceeded"
    );
    let err = conn.prompt(&session, "two").await.unwrap_err();
    assert_eq!(err.data.as_ref().unwrap()["code"], "model.invalid_request");
    assert!(!err.message.contains("try again"), "{}", err.message);
    conn.clear_updates();
    conn.prompt(&session, "three").await.unwrap();
    let usage = conn.updates().iter().find_map(|n| match &n.update {
        SessionUpdate::UsageUpdate(usage) => Some((usage.used, usage.size)),
        _ => None,
    });
    let (used, size) = usage.expect("a usage_update without provider usage");
    assert!(used > 0 && size > 0);
    let stderr = conn.stderr.lock().unwrap().clone();
    assert!(stderr.contains("model request"), "{stderr}");
    assert!(stderr.contains("status=400"), "{stderr}");
    assert!(stderr.contains("model reply"), "{stderr}");
    assert!(!stderr.contains("test-key-d5h"));
    conn.finish().await;
}

/// Item 20: writing identical content to a one-line file points at line 1.
#[tokio::test]
async fn issue10_item20_an_identical_write_points_at_line_1() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path":"hello.txt","content":"hello\n"}),
    ));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "go").await.unwrap();
    let line = conn.updates().iter().rev().find_map(|n| match &n.update {
        SessionUpdate::ToolCallUpdate(update) if update.tool_call_id.0.as_ref() == "w1" => update
            .fields
            .locations
            .as_ref()
            .and_then(|locations| locations.first())
            .and_then(|location| location.line),
        _ => None,
    });
    assert_eq!(line, Some(1));
    conn.finish().await;
}

/// Item 21: a mode change is announced as both a config option update and
/// a current mode update, whichever way it was made.
#[tokio::test]
async fn issue10_item21_mode_changes_are_announced_both_ways() {
    let env = TestEnv::new().await;
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let both = |updates: &[agent_client_protocol::v1::schema::SessionNotification], mode: &str| {
        let current = updates.iter().any(|n| matches!(&n.update, SessionUpdate::CurrentModeUpdate(u) if u.current_mode_id.0.as_ref() == mode));
        let option = updates
            .iter()
            .any(|n| matches!(&n.update, SessionUpdate::ConfigOptionUpdate(_)));
        current && option
    };
    conn.cx
        .send_request(SetSessionConfigOptionRequest::new(
            session.clone(),
            "mode",
            "accept-edits",
        ))
        .block_task()
        .await
        .unwrap();
    conn.wait_for("both updates after set_config_option", |u| {
        both(u, "accept-edits")
    })
    .await;
    conn.clear_updates();
    conn.cx
        .send_request(SetSessionModeRequest::new(session.clone(), "read-only"))
        .block_task()
        .await
        .unwrap();
    conn.wait_for("both updates after set_mode", |u| both(u, "read-only"))
        .await;
    conn.finish().await;
}

/// Item 22: the session header is sent by default and can be turned off.
#[tokio::test]
async fn issue10_item22_the_session_header_can_be_turned_off() {
    for (config, expected) in [("", true), ("session_header = false", false)] {
        let env = TestEnv::with_config(config).await;
        env.mock.push_json(reply("hi"));
        let conn = env.connect().await;
        let session = conn.start(&env.cwd()).await;
        conn.prompt(&session, "hi").await.unwrap();
        let head = env.mock.heads().last().unwrap().to_ascii_lowercase();
        assert_eq!(
            head.contains(&format!("x-deepseek-harness-session-id: {}", session.0)),
            expected,
            "{head}"
        );
        conn.finish().await;
    }
}

/// Item 15, the guard itself: run by a process that does not lead its
/// group, it cleans up only what it started (never its caller), passes the
/// command's exit code through, and kills background and `setsid`
/// descendants.
#[tokio::test]
async fn issue10_item15_the_command_guard_cleans_up_only_what_it_started() {
    let marker = format!("314.{}", std::process::id() % 1000);
    let status = tokio::process::Command::new(crate::support::DSH)
        .args(["__guard", "--", "bash", "-c"])
        .arg(format!(
            "sleep {marker} & setsid sleep {marker} < /dev/null > /dev/null 2>&1 & sleep 0.3; exit 3"
        ))
        .status()
        .await
        .unwrap();
    assert_eq!(status.code(), Some(3));
    let cwd = std::env::current_dir().unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while !procs::live_pids(&marker, &cwd).is_empty() {
        assert!(Instant::now() < deadline, "a descendant outlived the guard");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
