//! The VS Code extension's own tests (editor-extensions/vscode, node's test
//! runner), run against this build's `dsh`: its protocol layer over real
//! ACP with the scripted model (permissions, terminals, dsh's questions,
//! prompts queued and steered), the chat panel in Debian's Chromium, the
//! pure mappings (forms, the line of prompts), the manifest against the
//! code, and the settings a workspace cannot set. CI builds it first
//! (`.ci/run` sets DSH_VSCODE=1); elsewhere: `npm ci && npm run build` in
//! that directory.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::DSH;

#[tokio::test]
async fn the_vscode_extension_tests_pass_against_this_dsh() {
    let test = "vscode::the_vscode_extension_tests_pass_against_this_dsh";
    let required = std::env::var_os("DSH_VSCODE").is_some();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .join("editor-extensions/vscode");
    if !dir.join("dist/test/protocol.test.js").exists() {
        dsh_test_support::skip::skip(
            test,
            &format!(
                "the extension is not built; build it: (cd {} && npm ci && npm run build)",
                dir.display()
            ),
            required,
        );
        return;
    }
    // The panel test drives Chromium (test/webview.test.ts: `CHROMIUM`,
    // else /usr/bin/chromium).
    let chromium = std::env::var_os("CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    if !chromium.exists() {
        dsh_test_support::skip::skip(
            test,
            &format!(
                "no Chromium at {} for the panel test; install it: sudo apt-get install chromium (or set CHROMIUM to one)",
                chromium.display()
            ),
            required,
        );
        return;
    }
    dsh_test_support::skip::ran(test);
    // The test files only: `dist/test/` also holds their helpers.
    let mut files: Vec<String> = std::fs::read_dir(dir.join("dist").join("test"))
        .expect("dist/test")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".test.js"))
        .map(|name| format!("dist/test/{name}"))
        .collect();
    files.sort();
    let child = tokio::process::Command::new("node")
        .args(["--test", "--test-reporter=spec"])
        .args(&files)
        .current_dir(&dir)
        .env("DSH_BIN", DSH)
        .env_remove("DEEPSEEK_API_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let output = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .expect("the extension's tests finish in 3 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the extension's tests failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // Every test ran: none skipped, none missing.
    for name in [
        "a session end to end, then replayed into the view model",
        "the panel's chat: coalesced renders, an ask answered from the panel, settings",
        "the chat panel renders a recorded session and posts what the user does",
        "activation registers what package.json contributes",
        "client terminals: dsh runs a command in the editor's terminal when configured to",
        "settings that choose what runs or where data goes are machine-scoped in package.json",
        "userSetting and launchSettings take the user value or the default, never a workspace's",
        "activation starts the user's dsh with the user's environment, whatever the workspace sets",
        // Issue 25: dsh's questions and prompts sent while a turn runs.
        "an elicitation form becomes questions asked in order, with Other folded in",
        "QuickPick items and what picking them answers",
        "answers are checked, then sent as the form's content",
        "the line of prompts: steered and queued behind the running turn, cancelled with it",
        "dsh's questions: answered in the pickers, declined, dismissed, answered in the panel",
        "prompts while a turn runs: steered into it, queued after it, cancelled with it",
        // Issue 42: the session list's filter searches the sessions' text.
        "the session list's filter searches the workspace's sessions through dsh",
        "a log's control characters are shown escaped, times in UTC",
        "the open-session picker lists the sessions, searches as words are typed, opens a hit",
    ] {
        assert!(stdout.contains(name), "{name:?} did not run:\n{stdout}");
    }
    assert!(
        stdout.contains("ℹ fail 0") && stdout.contains("ℹ skipped 0"),
        "{stdout}"
    );
    assert!(dir.join("dist/screenshots/chat-panel.png").exists());
    assert!(dir
        .join("dist/screenshots/chat-panel-question.png")
        .exists());
}
