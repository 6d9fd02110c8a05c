//! `dsh run` and an MCP server over stdio under Wine.

use std::path::PathBuf;

use dsh_test_support::mock_model::{call, reply};
use dsh_test_support::skip;
use serde_json::json;

use super::{prompt, succeeded, target_dir, until_answer, windows_path, wine, Session};

/// `wine dsh.exe run TASK` in the workspace: the model's reply on stdout,
/// exit 0; with `--approve edits` a write the model asks for is made.
#[tokio::test]
async fn dsh_run_answers_and_writes_under_wine() {
    let Some(wine) = wine(&skip::this_test()) else {
        return;
    };
    let session = Session::new(wine).await;
    let run = |args: &[&str]| {
        let mut command = session
            .wine
            .command(&session.exe, args, &session.workspace());
        command
            .env(
                "DSH_HOME",
                windows_path(&session.scratch.path().join("home")),
            )
            .env("DEEPSEEK_BASE_URL", &session.mock.url)
            .env("DEEPSEEK_API_KEY", "test-key-d5h");
        command
    };

    session.mock.push_json(reply("Hi from the mock."));
    let stdout = succeeded(run(&["run", "say hi"]), 120).await;
    assert_eq!(stdout.trim(), "Hi from the mock.");
    let asked = serde_json::to_string(&session.mock.requests()).unwrap();
    assert!(asked.contains("say hi"), "{asked}");

    session.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path": "run.txt", "content": "made by dsh run\n"}),
    ));
    session.mock.push_json(reply("Written."));
    let stdout = succeeded(
        run(&["run", "--approve", "edits", "--quiet", "write run.txt"]),
        120,
    )
    .await;
    assert_eq!(stdout.trim(), "Written.");
    assert_eq!(
        std::fs::read_to_string(session.workspace().join("run.txt")).unwrap(),
        "made by dsh run\n"
    );
}

/// The MCP fixture server built for Windows (`.ci/cross` builds it).
fn mcp_fixture() -> Option<PathBuf> {
    ["debug", "dist", "release"]
        .iter()
        .map(|profile| {
            target_dir().join(format!("x86_64-pc-windows-gnu/{profile}/dsh-test-mcp.exe"))
        })
        .find(|exe| exe.exists())
}

/// An MCP server over stdio, named by its Windows path in config.toml:
/// started under the guard, its tool offered to the model, called (after a
/// permission request) and its result back to the model and the editor.
#[tokio::test]
async fn an_mcp_server_over_stdio_runs_under_wine() {
    let test = skip::this_test();
    let Some(wine) = wine(&test) else {
        return;
    };
    let Some(fixture) = mcp_fixture() else {
        skip::skip(
            &test,
            "no Windows dsh-test-mcp.exe: cargo build --target x86_64-pc-windows-gnu -p dsh-test-mcp (or run .ci/cross)",
            std::env::var_os("DSH_WINE").is_some(),
        );
        return;
    };
    let servers = tempfile::tempdir().unwrap();
    let exe = servers.path().join("dsh-test-mcp.exe");
    std::fs::copy(&fixture, &exe).unwrap();
    std::fs::copy(&wine.shim, servers.path().join("bcryptprimitives.dll")).unwrap();
    let log = servers.path().join("mcp.log");
    // A Rust program: Wine needs the shim beside it too (the override,
    // WINEDLLOVERRIDES, comes down from dsh's environment).
    let config = format!(
        "[mcp_servers.fixture]\ncommand = '{}'\nargs = [\"stdio\"]\n\
         env = {{ MCP_FIXTURE_LOG = '{}' }}\n",
        windows_path(&exe),
        windows_path(&log)
    );
    let session = Session::with_config(wine, &config).await;
    let (mut raw, id) = session.start().await;
    session.mock.push_json(call(
        "m1",
        "mcp__fixture__echo",
        json!({"text": "echoed on Windows"}),
    ));
    session.mock.push_json(reply("Echoed."));
    raw.send(prompt(3, &id, "echo it")).await;
    let (done, frames) = until_answer(&mut raw, 3).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let offered = serde_json::to_string(&session.mock.requests()[0]["tools"]).unwrap();
    assert!(
        offered.contains("mcp__fixture__echo"),
        "the server's tools are offered: {offered}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let told = session.mock.tool_result("m1");
    assert!(told.contains("echoed on Windows"), "{told}");
    let shown = serde_json::to_string(&frames).unwrap();
    assert!(shown.contains("echoed on Windows"), "{shown}");
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(logged.contains("call echo"), "{logged}");
    raw.finish().await;
}
