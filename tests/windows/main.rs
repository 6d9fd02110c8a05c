//! dsh for Windows, run under Wine on Linux: the `windows-x86_64` archive
//! that `editor-extensions/registry/package.sh --target windows-x86_64`
//! writes (else the built `dsh.exe`), extracted and started with `wine`.
//! What the ACP registry's verifier does, `--version`, `demo`, and ACP
//! sessions against the mock model on 127.0.0.1 (Wine shares the host's
//! network) with Windows paths (`Z:\tmp\…`): streaming, writes with
//! diffs, cancel, load; cmd commands, their process trees, timeouts, jobs
//! and `/undo` (`commands.rs`); `dsh run` and an MCP server over stdio
//! (`run.rs`).
//!
//! Wine 8 lacks `bcryptprimitives.dll!ProcessPrng`, which Rust's std
//! calls: `fixtures/wine/build.sh` builds a shim that each test puts beside
//! its extracted `dsh.exe` (never into the archive). The Wine prefix is
//! made once, in `.ci/cache/wineprefix` (`DSH_WINEPREFIX` to choose).
//!
//! Without Wine or a Windows build each test skips, and says so
//! (`tests/support/src/skip.rs`); with `DSH_WINE=1` or `DSH_CI=1` that is
//! a failure. `.ci/cross` installs Wine and builds the archive first.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use dsh_test_support::mock_model::{call, reply, MockModel};
use dsh_test_support::raw::Raw;
use dsh_test_support::skip;
use serde_json::{json, Value};

mod commands;
mod run;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// A Linux path as the Windows program sees it: Wine's `Z:` drive is `/`.
fn windows_path(path: &Path) -> String {
    format!("Z:{}", path.display()).replace('/', "\\")
}

/// What to run: the Windows archive (or bare `dsh.exe`), the shim, Wine
/// and its prefix.
struct Wine {
    wine: PathBuf,
    prefix: PathBuf,
    /// The `.zip` the registry would download, when it is built.
    archive: Option<PathBuf>,
    exe: PathBuf,
    shim: PathBuf,
    /// One test at a time: several `dsh.exe` started at once in one Wine
    /// prefix were seen to hang at start under Wine 8 (docs/testing.md).
    _turn: std::sync::MutexGuard<'static, ()>,
}

/// Whose turn it is to run Windows programs (see [`Wine`]).
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The Windows build, newest first among the archive and the built binaries.
fn windows_build() -> Option<(Option<PathBuf>, PathBuf)> {
    let version = env!("CARGO_PKG_VERSION");
    let archive = std::env::var_os("DSH_WINDOWS_ARCHIVE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            target_dir().join(format!("dist/dsh-{version}-x86_64-pc-windows-gnu.zip"))
        });
    if archive.exists() {
        return Some((Some(archive), PathBuf::new()));
    }
    ["dist", "release", "debug"]
        .iter()
        .map(|profile| target_dir().join(format!("x86_64-pc-windows-gnu/{profile}/dsh.exe")))
        .find(|exe| exe.exists())
        .map(|exe| (None, exe))
}

/// Wine and the Windows build, or `None` after a skip (a failure under
/// `DSH_WINE=1` or `DSH_CI=1`).
fn wine(test: &str) -> Option<Wine> {
    let required = std::env::var_os("DSH_WINE").is_some();
    let Some(wine) = which("wine") else {
        skip::skip(
            test,
            "no wine on PATH: apt-get install wine64 (or run .ci/cross)",
            required,
        );
        return None;
    };
    let Some((archive, exe)) = windows_build() else {
        skip::skip(
            test,
            "no Windows build: editor-extensions/registry/package.sh --target windows-x86_64 (or run .ci/cross)",
            required,
        );
        return None;
    };
    let shim = std::process::Command::new("bash")
        .arg(root().join("fixtures/wine/build.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run fixtures/wine/build.sh");
    assert!(
        shim.status.success(),
        "building the ProcessPrng shim failed"
    );
    let shim = PathBuf::from(String::from_utf8(shim.stdout).unwrap().trim());
    skip::ran(test);
    // A test that failed while it held the turn leaves it poisoned: the
    // next one runs all the same.
    let turn = TURN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Some(Wine {
        prefix: prefix(&wine),
        wine,
        archive,
        exe,
        shim,
        _turn: turn,
    })
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
}

/// The Wine prefix, made once (`wineboot -i`, some seconds) under a lock,
/// so that the tests running at once share it.
fn prefix(wine: &Path) -> PathBuf {
    let prefix = std::env::var_os("DSH_WINEPREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".ci/cache/wineprefix"));
    std::fs::create_dir_all(&prefix).unwrap();
    let lock = std::fs::File::create(prefix.with_extension("lock")).unwrap();
    lock.lock().unwrap();
    if !prefix.join("system.reg").exists() {
        let status = std::process::Command::new(wine.with_file_name("wineboot"))
            .arg("-i")
            .env("WINEPREFIX", &prefix)
            .env("WINEDEBUG", "-all")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run wineboot");
        assert!(status.success(), "wineboot -i failed");
        // wineboot returns before the server has written the registry.
        let _ = std::process::Command::new(wine.with_file_name("wineserver"))
            .arg("-w")
            .env("WINEPREFIX", &prefix)
            .status();
    }
    prefix
}

impl Wine {
    /// The archive extracted (as the registry's verifier does) into
    /// `dir`, with the shim beside `dsh.exe`; the `dsh.exe` to run.
    fn install(&self, dir: &Path) -> PathBuf {
        let exe = dir.join("dsh.exe");
        match &self.archive {
            Some(archive) => {
                let status = std::process::Command::new("python3")
                    .args(["-m", "zipfile", "-e"])
                    .arg(archive)
                    .arg(dir)
                    .status()
                    .expect("python3 extracts the archive");
                assert!(status.success());
                let listed = std::process::Command::new("python3")
                    .args(["-m", "zipfile", "-l"])
                    .arg(archive)
                    .output()
                    .unwrap();
                let listed = String::from_utf8_lossy(&listed.stdout);
                assert!(
                    !listed.contains("bcryptprimitives"),
                    "the shim is for the tests only: {listed}"
                );
            }
            None => {
                std::fs::copy(&self.exe, &exe).unwrap();
            }
        }
        assert!(exe.exists(), "the archive holds dsh.exe");
        std::fs::copy(&self.shim, dir.join("bcryptprimitives.dll")).unwrap();
        exe
    }

    /// `wine dsh.exe args…` in `cwd`, with Wine's noise off and an empty
    /// environment besides.
    fn command(&self, exe: &Path, args: &[&str], cwd: &Path) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.wine);
        command
            .arg(exe)
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", std::env::var("HOME").unwrap_or_default())
            .env("WINEPREFIX", &self.prefix)
            .env("WINEDEBUG", "-all")
            .env("WINEDLLOVERRIDES", "bcryptprimitives=n;mscoree,mshtml=")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }
}

/// The profile Wine gives Windows programs (`%USERPROFILE%`) in the prefix.
fn wine_profile(prefix: &Path) -> Option<PathBuf> {
    std::fs::read_dir(prefix.join("drive_c/users"))
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .find(|path| !path.ends_with("Public"))
}

/// Runs `command` to its end (within `secs`).
/// Runs `command` to its end within `secs`, which must succeed: its stdout.
async fn succeeded(command: tokio::process::Command, secs: u64) -> String {
    let out = output(command, secs).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

async fn output(mut command: tokio::process::Command, secs: u64) -> std::process::Output {
    command.stdin(Stdio::null());
    tokio::time::timeout(Duration::from_secs(secs), command.output())
        .await
        .unwrap_or_else(|_| panic!("finished within {secs} s"))
        .expect("wine runs")
}

/// The registry verifier's steps on the Windows archive: extract it, start
/// `dsh.exe acp` in the extraction directory with no dsh state (the
/// prefix's profile holds no `.dsh`: Wine sets `%USERPROFILE%` itself, so
/// an empty profile is the prefix's), send its `initialize`, and require
/// the `terminal` login method.
#[tokio::test]
async fn the_windows_archive_passes_the_registry_verifier_under_wine() {
    let Some(wine) = wine(&skip::this_test()) else {
        return;
    };
    assert!(wine.archive.is_some(), "the verifier needs the .zip");
    let scratch = tempfile::tempdir().unwrap();
    let exe = wine.install(scratch.path());
    if let Some(profile) = wine_profile(&wine.prefix) {
        let _ = std::fs::remove_dir_all(profile.join(".dsh"));
    }
    let mut command = wine.command(&exe, &["acp"], scratch.path());
    command.env("TERM", "dumb");
    let mut raw = Raw::spawn(command);
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": 1,
            "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
            "clientCapabilities": {
                "terminal": true,
                "fs": {"readTextFile": true, "writeTextFile": true},
                "_meta": {"terminal_output": true, "terminal-auth": true},
            },
        }}),
    )
    .await;
    // The verifier waits 10 s; Wine's first start in a prefix takes some.
    let response = raw.recv().await;
    assert!(response.get("error").is_none(), "{response}");
    let methods = response["result"]["authMethods"].as_array().unwrap();
    let login = methods
        .iter()
        .find(|method| method["type"] == "terminal")
        .unwrap_or_else(|| panic!("a terminal login method: {methods:#?}"));
    assert_eq!(login["args"], json!(["login"]));
    raw.finish().await;
}

#[tokio::test]
async fn dsh_exe_prints_its_version_under_wine() {
    let Some(wine) = wine(&skip::this_test()) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let exe = wine.install(scratch.path());
    let out = output(wine.command(&exe, &["--version"], scratch.path()), 60).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("dsh {}", env!("CARGO_PKG_VERSION"))
    );
}

#[tokio::test]
async fn dsh_exe_demo_runs_to_its_end_under_wine() {
    let Some(wine) = wine(&skip::this_test()) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let exe = wine.install(scratch.path());
    let mut command = wine.command(&exe, &["demo"], scratch.path());
    command.env("DSH_HOME", windows_path(&scratch.path().join("home")));
    let stdout = succeeded(command, 120).await;
    assert!(stdout.lines().count() > 5, "{stdout}");
}

/// One session's world under Wine: a DSH_HOME and a workspace in a
/// temporary directory, seen as `Z:\tmp\…`, and the mock model.
struct Session {
    wine: Wine,
    scratch: tempfile::TempDir,
    exe: PathBuf,
    mock: MockModel,
}

impl Session {
    async fn new(wine: Wine) -> Session {
        Session::with_config(wine, "").await
    }

    /// A session whose config.toml ends with `extra` (tables of its own).
    async fn with_config(wine: Wine, extra: &str) -> Session {
        let scratch = tempfile::tempdir().unwrap();
        let exe = wine.install(scratch.path());
        for dir in ["home", "workspace"] {
            std::fs::create_dir(scratch.path().join(dir)).unwrap();
        }
        std::fs::write(
            scratch.path().join("home/config.toml"),
            format!("[titles]\nfrom_model = false\n[time]\nenabled = false\n[provider]\nkind = \"deepseek\"\n\
             request_timeout_ms = 30000\nmax_retries = 1\nretry_initial_delay_ms = 10\n{extra}"),
        )
        .unwrap();
        std::fs::write(scratch.path().join("workspace/hello.txt"), "hello\n").unwrap();
        Session {
            wine,
            scratch,
            exe,
            mock: MockModel::start().await,
        }
    }

    fn workspace(&self) -> PathBuf {
        self.scratch.path().join("workspace")
    }

    /// `dsh.exe acp`, initialized.
    async fn connect(&self) -> Raw {
        let mut command = self.wine.command(&self.exe, &["acp"], self.scratch.path());
        command
            .env("DSH_HOME", windows_path(&self.scratch.path().join("home")))
            .env("DEEPSEEK_BASE_URL", &self.mock.url)
            .env("DEEPSEEK_API_KEY", "test-key-d5h")
            .env("DSH_LOG", "debug");
        let mut raw = Raw::spawn(command);
        raw.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}))
            .await;
        let answer = raw.recv().await;
        assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
        raw
    }

    /// `dsh.exe acp`, initialized, with a new session in the workspace:
    /// the connection and the session's id.
    async fn start(&self) -> (Raw, Value) {
        let mut raw = self.connect().await;
        raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
            "params": {"cwd": windows_path(&self.workspace()), "mcpServers": []}}))
            .await;
        let (new, _) = until_answer(&mut raw, 2).await;
        let id = new["result"]["sessionId"].clone();
        assert!(id.is_string(), "{new}");
        (raw, id)
    }
}

/// Reads frames until the answer to `id`, answering permission requests
/// with their first allowing option; the answer and the notifications.
async fn until_answer(raw: &mut Raw, id: u64) -> (Value, Vec<Value>) {
    let mut seen = Vec::new();
    loop {
        let frame = raw.recv().await;
        if frame["id"] == id && frame.get("method").is_none() {
            return (frame, seen);
        }
        if frame["method"] == "session/request_permission" {
            allow(raw, &frame).await;
        }
        seen.push(frame);
    }
}

/// Answers a permission request with its `allow_once` option.
async fn allow(raw: &mut Raw, request: &Value) {
    let option = request["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|option| option["kind"] == "allow_once")
        .expect("an allow_once option")["optionId"]
        .clone();
    raw.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {
        "outcome": {"outcome": "selected", "optionId": option}}}))
        .await;
}

fn prompt(id: u64, session: &Value, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {
        "sessionId": session, "prompt": [{"type": "text", "text": text}]}})
}

/// The agent's streamed text among `frames`.
fn said(frames: &[Value]) -> String {
    frames
        .iter()
        .filter(|frame| frame["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|frame| frame["params"]["update"]["content"]["text"].as_str())
        .collect()
}

/// A turn (request `id`) in which the model writes `file` in the
/// workspace with the write tool: a permission request, a diff of the
/// file's Windows path, the file on disk. The turn's frames.
async fn write_turn(
    session: &Session,
    raw: &mut Raw,
    id: &Value,
    request: u64,
    file: &str,
) -> Vec<Value> {
    let cwd = windows_path(&session.workspace());
    let old = std::fs::read_to_string(session.workspace().join(file)).ok();
    session.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path": file, "content": "made on Windows\n"}),
    ));
    session.mock.push_json(reply("Written."));
    raw.send(prompt(request, id, &format!("write {file}")))
        .await;
    let (done, frames) = until_answer(raw, request).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(
        frames
            .iter()
            .any(|frame| frame["method"] == "session/request_permission"),
        "ask mode asks before a write: {frames:#?}"
    );
    if let Some(failed) = frames
        .iter()
        .find(|frame| frame["params"]["update"]["status"] == "failed")
    {
        panic!(
            "the write failed: {}",
            failed["params"]["update"]["rawOutput"]
        );
    }
    let diff = frames
        .iter()
        .filter_map(|frame| frame["params"]["update"]["content"].as_array())
        .flatten()
        .chain(
            frames
                .iter()
                .filter_map(|frame| frame["params"]["toolCall"]["content"].as_array())
                .flatten(),
        )
        .find(|content| content["type"] == "diff")
        .unwrap_or_else(|| panic!("a diff: {frames:#?}"))
        .clone();
    assert_eq!(diff["newText"], "made on Windows\n", "{diff}");
    assert_eq!(diff["oldText"].as_str(), old.as_deref(), "{diff}");
    let path = diff["path"].as_str().unwrap();
    assert!(
        path.trim_start_matches(r"\\?\").starts_with(&cwd) && path.ends_with(file),
        "{path} is the file's Windows path in {cwd}"
    );
    assert_eq!(
        std::fs::read_to_string(session.workspace().join(file)).unwrap(),
        "made on Windows\n"
    );
    frames
}

/// A file the write tool creates (the path does not exist yet, so it is
/// resolved part by part rather than canonicalized).
#[tokio::test]
async fn the_write_tool_creates_a_new_file_under_wine() {
    let Some(wine) = wine(&skip::this_test()) else {
        return;
    };
    let session = Session::new(wine).await;
    let (mut raw, id) = session.start().await;
    write_turn(&session, &mut raw, &id, 3, "made.txt").await;
    raw.finish().await;
}

/// A session in a Windows path: a streamed reply, a file written through
/// the `write` tool (with its diff, after a permission request), a
/// cancelled turn, and the session loaded again by another `dsh.exe`.
#[tokio::test]
async fn an_acp_session_with_windows_paths_runs_under_wine() {
    let Some(wine) = wine(&skip::this_test()) else {
        return;
    };
    let session = Session::new(wine).await;
    let (mut raw, id) = session.start().await;

    // Streamed text.
    session.mock.push_json(
        json!({"chunks": [{"text": "Hello "}, {"text": "from "}, {"text": "Wine."}],
        "finish": "stop", "delay_ms": 20}),
    );
    raw.send(prompt(3, &id, "hi")).await;
    let (done, frames) = until_answer(&mut raw, 3).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(said(&frames), "Hello from Wine.");

    // The workspace's file rewritten by the write tool, shown as a diff.
    let frames = write_turn(&session, &mut raw, &id, 4, "hello.txt").await;
    assert!(said(&frames).contains("Written."));

    // A turn cancelled while the model streams.
    session
        .mock
        .push_json(json!({"chunks": [{"text": "Thinking"}, {"text": " more"}],
        "finish": "stop", "hang_after": 1}));
    raw.send(prompt(5, &id, "take your time")).await;
    loop {
        let frame = raw.recv().await;
        if said(std::slice::from_ref(&frame)).contains("Thinking") {
            break;
        }
    }
    raw.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": id}}))
        .await;
    let (done, _) = until_answer(&mut raw, 5).await;
    assert_eq!(done["result"]["stopReason"], "cancelled", "{done}");
    raw.finish().await;

    // Another dsh.exe loads the session: its history comes back.
    let mut raw = session.connect().await;
    raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/load",
        "params": {"sessionId": id, "cwd": windows_path(&session.workspace()), "mcpServers": []}}))
        .await;
    let (loaded, frames) = until_answer(&mut raw, 2).await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    assert!(said(&frames).contains("Hello from Wine."), "{frames:#?}");
    let replayed = serde_json::to_string(&frames).unwrap();
    for text in ["write hello.txt", "hello.txt"] {
        assert!(replayed.contains(text), "{text} replayed: {replayed}");
    }
    raw.finish().await;
}
