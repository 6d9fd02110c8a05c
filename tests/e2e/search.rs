//! `glob` and `grep` as the catalog has them, and spilled output: what a
//! capped result leaves out is saved in the session's spill directory, and
//! the model is told where (issue 39).

use std::path::Path;

use serde_json::json;

use crate::support::{call, calls, reply, test_mcp_binary, tool_result, TestEnv};

/// The spill file a result names: the path after "saved in ", up to "; ".
fn locator(result: &str) -> String {
    let after = result
        .split(" saved in ")
        .nth(1)
        .unwrap_or_else(|| panic!("no locator in {result}"));
    let end = after.find("; ").or_else(|| after.find(" (")).unwrap();
    after[..end].to_owned()
}

/// A spill file is private (0600) and in the session's spill directory.
fn assert_private(path: &str, env: &TestEnv) {
    use std::os::unix::fs::PermissionsExt;
    assert!(Path::new(path).starts_with(env.home.path()), "{path}");
    assert_eq!(
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777,
        0o600,
        "{path}"
    );
}

/// A hidden file, a `.gitignore`d file and the VCS directory.
fn plant_tree(root: &Path) {
    std::fs::write(root.join(".hidden.txt"), "h\n").unwrap();
    std::fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
    std::fs::create_dir_all(root.join("ignored")).unwrap();
    std::fs::write(root.join("ignored/two.txt"), "two\n").unwrap();
    std::fs::create_dir_all(root.join(".git/refs")).unwrap();
    std::fs::write(root.join(".git/refs/head.txt"), "ref\n").unwrap();
    std::fs::create_dir_all(root.join(".jj")).unwrap();
    std::fs::write(root.join(".jj/op.txt"), "op\n").unwrap();
}

async fn glob_once(env: &TestEnv) -> String {
    glob_once_with(env, json!({"pattern": "*.txt"})).await
}

/// The catalog's glob includes hidden and ignored files, never what is
/// under a VCS directory.
#[tokio::test]
async fn glob_lists_hidden_and_ignored_files_but_not_vcs_metadata() {
    let env = TestEnv::new().await;
    plant_tree(&env.cwd());
    let globbed = glob_once(&env).await;
    let listed: Vec<&str> = globbed.lines().collect();
    for expected in ["hello.txt", ".hidden.txt", "ignored/two.txt"] {
        assert!(listed.contains(&expected), "{expected}: {globbed}");
    }
    assert!(
        !globbed.contains(".git/") && !globbed.contains(".jj/"),
        "{globbed}"
    );
}

/// `[tools.glob] respect_ignore_files = true`: what `.gitignore` ignores
/// is left out again (hidden files stay).
#[tokio::test]
async fn glob_respects_ignore_files_when_configured() {
    let env = TestEnv::with_config("[tools.glob]\nrespect_ignore_files = true\n").await;
    plant_tree(&env.cwd());
    let globbed = glob_once(&env).await;
    assert!(
        globbed.contains(".hidden.txt") && globbed.contains("hello.txt"),
        "{globbed}"
    );
    assert!(!globbed.contains("two.txt"), "{globbed}");
    assert!(!globbed.contains(".git/"), "{globbed}");
}

/// Over 100 matches: a sample of 100 spread over the top-level entries
/// (round-robin: `c/` has 10, `b/` 40, so `a/` gets the other 50), a line
/// saying it sampled, and the complete list, newest first, in the spill
/// file.
#[tokio::test]
async fn glob_over_the_cap_samples_and_saves_the_complete_list() {
    let env = TestEnv::new().await;
    let root = env.cwd();
    for (dir, count) in [("a", 100), ("b", 40), ("c", 10)] {
        std::fs::create_dir(root.join(dir)).unwrap();
        for i in 0..count {
            std::fs::write(root.join(format!("{dir}/f{i:03}.log")), "x\n").unwrap();
        }
    }
    // The newest file comes first in the complete list.
    let newest = root.join("c/f005.log");
    let file = std::fs::File::options().write(true).open(&newest).unwrap();
    file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60))
        .unwrap();
    let globbed = glob_once_with(&env, json!({"pattern": "*.log"})).await;
    let listed: Vec<&str> = globbed.lines().filter(|l| l.ends_with(".log")).collect();
    assert_eq!(listed.len(), 100, "{globbed}");
    let from = |dir: &str| listed.iter().filter(|l| l.starts_with(dir)).count();
    assert_eq!(
        (from("a/"), from("b/"), from("c/")),
        (50, 40, 10),
        "{globbed}"
    );
    assert_eq!(listed[0], "c/f005.log");
    assert!(
        globbed.contains("This is a sample of 100 of 150 matching files"),
        "{globbed}"
    );
    let spill = locator(&globbed);
    assert_private(&spill, &env);
    let saved = std::fs::read_to_string(&spill).unwrap();
    let all: Vec<&str> = saved.lines().collect();
    assert_eq!(all.len(), 150, "{saved}");
    assert_eq!(all[0], "c/f005.log");
    for (dir, count) in [("a", 100), ("b", 40), ("c", 10)] {
        for i in 0..count {
            let name = format!("{dir}/f{i:03}.log");
            assert!(all.contains(&name.as_str()), "{name} missing");
        }
    }
}

async fn glob_once_with(env: &TestEnv, args: serde_json::Value) -> String {
    env.mock.push_json(call("g1", "glob", args));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "find").await.unwrap();
    conn.finish().await;
    tool_result(env, "g1")
}

/// Over 250 matches: the first 250 inline, and the complete match list,
/// grouped by file, in the spill file.
#[tokio::test]
async fn grep_over_the_cap_saves_the_complete_match_list() {
    let env = TestEnv::new().await;
    let root = env.cwd();
    std::fs::create_dir(root.join("many")).unwrap();
    for file in 0..3 {
        let text: String = (0..100).map(|i| format!("needle {file}-{i}\n")).collect();
        std::fs::write(root.join(format!("many/f{file}.txt")), text).unwrap();
    }
    env.mock.push_json(calls(&[
        ("g1", "grep", json!({"pattern": "needle", "path": "many"})),
        (
            "g2",
            "grep",
            json!({"pattern": "needle 1-", "path": "many"}),
        ),
    ]));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "search").await.unwrap();
    conn.finish().await;

    let grepped = tool_result(&env, "g1");
    let is_match = |l: &&str| l.trim_start().split_once(": needle").is_some();
    assert_eq!(grepped.lines().filter(is_match).count(), 250, "{grepped}");
    assert!(
        grepped.contains("the first 250 of 300 matches are shown"),
        "{grepped}"
    );
    let spill = locator(&grepped);
    assert_private(&spill, &env);
    let saved = std::fs::read_to_string(&spill).unwrap();
    assert_eq!(saved.lines().filter(is_match).count(), 300, "{saved}");
    for file in 0..3 {
        assert!(saved.contains(&format!("many/f{file}.txt\n")), "{saved}");
        assert!(saved.contains(&format!("   100: needle {file}-99\n")));
    }
    assert!(saved.starts_with(&grepped[..grepped.find("\n(The result").unwrap()]));
    // Under the cap nothing is saved.
    let small = tool_result(&env, "g2");
    assert_eq!(small.lines().filter(is_match).count(), 100, "{small}");
    assert!(!small.contains("saved in"), "{small}");
}

/// A read cut by a cap (a long line) saves its lines whole; `offset` and
/// `limit` are JSON numbers (12.0 is line 12, 1.5 is refused).
#[tokio::test]
async fn read_over_a_cap_saves_the_whole_lines() {
    let env = TestEnv::new().await;
    let long = "y".repeat(5000);
    std::fs::write(
        env.cwd().join("long.txt"),
        format!("short\n{long}\nthird\n"),
    )
    .unwrap();
    env.mock.push_json(calls(&[
        ("r1", "read", json!({"file_path": "long.txt"})),
        (
            "r2",
            "read",
            json!({"file_path": "long.txt", "offset": 3.0, "limit": 1.0}),
        ),
        (
            "r3",
            "read",
            json!({"file_path": "long.txt", "offset": 1.5}),
        ),
    ]));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "read").await.unwrap();
    conn.finish().await;

    let read = tool_result(&env, "r1");
    assert!(read.contains("[line truncated: 5000 characters]"), "{read}");
    assert!(
        read.contains("The complete output of this read (lines 1-3, every line whole) is saved in"),
        "{read}"
    );
    let spill = locator(&read);
    assert_private(&spill, &env);
    assert_eq!(
        std::fs::read_to_string(&spill).unwrap(),
        format!("     1\tshort\n     2\t{long}\n     3\tthird\n")
    );
    assert_eq!(tool_result(&env, "r2"), "     3\tthird\n");
    let refused = tool_result(&env, "r3");
    assert!(refused.contains("1.5 is not a line number"), "{refused}");
}

/// An MCP result over its cap: the head inline, the whole text spilled.
#[tokio::test]
async fn an_mcp_result_over_the_cap_is_spilled() {
    let env = TestEnv::with_config(&format!(
        "[mcp_servers.fixture]\ncommand = {command:?}\nargs = [\"stdio\"]\n",
        command = test_mcp_binary().display().to_string(),
    ))
    .await;
    let text = format!("{}end", "0123456789".repeat(10_000));
    env.mock
        .push_json(call("m1", "mcp__fixture__echo", json!({ "text": text })));
    env.mock.push_json(reply("Echoed."));
    let output = env
        .dsh(&["run", "--approve", "all", "echo it"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = tool_result(&env, "m1");
    assert!(result.len() < 70_000, "{}", result.len());
    assert!(
        result.contains("[result truncated: showing the first 65536 of"),
        "{}",
        &result[65_000..]
    );
    let spill = locator(&result);
    assert_private(&spill, &env);
    assert!(std::fs::read_to_string(&spill).unwrap().starts_with(&text));
}

/// Reads `long.txt` (a 5,000-character line) in one prompt, so that it
/// spills to `call-r1.txt`, then makes `second`'s calls in a second
/// prompt (in full-access: the spill directory is outside the
/// workspace); the session's spill directory.
async fn spill_then(
    env: &TestEnv,
    second: impl Fn(&Path) -> serde_json::Value,
) -> std::path::PathBuf {
    std::fs::write(
        env.cwd().join("long.txt"),
        format!("short\n{}\nthird\n", "y".repeat(5000)),
    )
    .unwrap();
    env.mock
        .push_json(call("r1", "read", json!({"file_path": "long.txt"})));
    env.mock.push_json(reply("read"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    // Outside the workspace: not asked about.
    conn.set_mode(&session, "full-access").await;
    conn.prompt(&session, "read").await.unwrap();
    let dir = env.home.path().join("spill").join(session.0.as_ref());
    assert!(locator(&tool_result(env, "r1")).ends_with("call-r1.txt"));
    env.mock.push_json(second(&dir));
    env.mock.push_json(reply("done"));
    conn.prompt(&session, "again").await.unwrap();
    conn.finish().await;
    dir
}

/// Reading a spill file never spills again: the long line is cut, the
/// model told so (grep or offset), and no new file is written.
#[tokio::test]
async fn reading_a_spill_file_does_not_spill_again() {
    let env = TestEnv::new().await;
    let dir = spill_then(&env, |dir| {
        let file = dir.join("call-r1.txt").display().to_string();
        call("r2", "read", json!({ "file_path": file }))
    })
    .await;
    let read = tool_result(&env, "r2");
    assert!(read.contains("[line truncated: 5007 characters]"), "{read}");
    assert!(
        read.contains("a line was cut at 2000 characters; this is a spill file"),
        "{read}"
    );
    assert!(!read.contains("saved in"), "{read}");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "{files:?}");
}

/// `grep` and `glob` search the session's own spill directory, though
/// `$DSH_HOME` is a secret location walks skip.
#[tokio::test]
async fn grep_and_glob_search_the_sessions_spill_directory() {
    let env = TestEnv::new().await;
    spill_then(&env, |dir| {
        let path = dir.display().to_string();
        calls(&[
            ("g1", "grep", json!({"pattern": "third", "path": path})),
            ("g2", "glob", json!({"pattern": "*.txt", "path": path})),
        ])
    })
    .await;
    let grepped = tool_result(&env, "g1");
    assert!(grepped.contains("call-r1.txt"), "{grepped}");
    assert!(grepped.contains("third"), "{grepped}");
    let globbed = tool_result(&env, "g2");
    assert!(globbed.contains("call-r1.txt"), "{globbed}");
}
