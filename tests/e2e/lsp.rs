//! The `lsp` tool end to end, with the deterministic test language server.

use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{CloseSessionRequest, SessionUpdate, ToolCallStatus};
use serde_json::json;

use crate::support::{call, test_lsp_binary, test_lsp_pids, tool_result, TestEnv};

const SOURCE: &str = "fn helper() {}\nfn main() {\n    helper();\n    helper();\n}\n";

async fn lsp_env() -> TestEnv {
    let server = test_lsp_binary();
    let env = TestEnv::with_config(&format!(
        "[lsp]\nbuiltin = false\nready_timeout_ms = 2000\n[[lsp.servers]]\nname = \"test-lsp\"\ncommand = \"{}\"\nextensions = {{ toy = \"toy\" }}\n",
        server.display()
    ))
    .await;
    std::fs::write(env.cwd().join("main.toy"), SOURCE).unwrap();
    env
}

#[tokio::test]
async fn lsp_navigation_reaches_the_model_and_the_editor() {
    let env = lsp_env().await;
    let root = env.cwd().canonicalize().unwrap();
    env.mock.push_json(call(
        "d1",
        "lsp",
        json!({"operation":"goToDefinition","file_path":"main.toy","line":3,"symbol":"helper"}),
    ));
    env.mock.push_json(call(
        "r1",
        "lsp",
        json!({"operation":"findReferences","file_path":"main.toy","line":1,"character":4}),
    ));
    env.mock.push_json(call(
        "h1",
        "lsp",
        json!({"operation":"hover","file_path":"main.toy","line":4,"symbol":"helper"}),
    ));
    env.mock.push_json(call(
        "s1",
        "lsp",
        json!({"operation":"documentSymbol","file_path":"main.toy","line":1}),
    ));
    env.mock.push_json(call(
        "x1",
        "lsp",
        json!({"operation":"goToDefinition","file_path":"main.toy","line":2,"symbol":"nothere"}),
    ));
    env.mock.push_json(call(
        "u1",
        "lsp",
        json!({"operation":"hover","file_path":"notes.zig","line":1,"character":1}),
    ));
    env.mock
        .push_json(json!({"chunks":[{"text":"found it"}],"finish":"stop"}));
    std::fs::write(root.join("notes.zig"), "const x = 1;\n").unwrap();
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "where is helper defined?")
        .await
        .unwrap();

    assert_eq!(tool_result(&env, "d1"), "main.toy\n  1:4  fn helper() {}\n");
    assert_eq!(
        tool_result(&env, "r1"),
        "main.toy\n  1:4  fn helper() {}\n  3:5  helper();\n  4:5  helper();\n"
    );
    assert_eq!(tool_result(&env, "h1"), "**helper**: a toy symbol");
    assert!(
        tool_result(&env, "s1").contains("  2:4  function main"),
        "{}",
        tool_result(&env, "s1")
    );
    let missing = tool_result(&env, "x1");
    assert!(
        missing.contains("`nothere` does not appear on line 2") && missing.contains("fn main() {"),
        "{missing}"
    );
    let unavailable = tool_result(&env, "u1");
    assert!(
        unavailable.starts_with("LSP_UNAVAILABLE") && unavailable.contains(".zig"),
        "{unavailable}"
    );

    // The editor gets every result location (absolute path, 1-based line).
    let references = conn
        .updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::ToolCallUpdate(update)
                if update.tool_call_id.0.as_ref() == "r1"
                    && update.fields.status == Some(ToolCallStatus::Completed) =>
            {
                update.fields.locations
            }
            _ => None,
        })
        .next_back()
        .unwrap();
    let lines: Vec<(std::path::PathBuf, Option<u32>)> =
        references.into_iter().map(|l| (l.path, l.line)).collect();
    assert_eq!(
        lines,
        [
            (root.join("main.toy"), Some(1)),
            (root.join("main.toy"), Some(3)),
            (root.join("main.toy"), Some(4))
        ]
    );
    let calls = conn
        .updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::ToolCall(call) => Some(call),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(calls[0].title, "Go to definition of `helper` in main.toy");

    // Closing the session stops its language server.
    assert_eq!(test_lsp_pids(&root).len(), 1);
    conn.cx
        .send_request(CloseSessionRequest::new(session.clone()))
        .block_task()
        .await
        .unwrap();
    assert!(
        test_lsp_pids(&root).is_empty(),
        "session/close stops the server"
    );
    conn.finish().await;
}

#[tokio::test]
async fn an_edit_that_breaks_the_file_reports_fresh_errors() {
    let env = lsp_env().await;
    env.mock.push_json(call(
        "s1",
        "lsp",
        json!({"operation":"diagnostics","file_path":"main.toy","line":1}),
    ));
    env.mock.push_json(call("e1", "edit", json!({"file_path":"main.toy","old_string":"    helper();\n    helper();","new_string":"    helper();\n    ERROR();"})));
    env.mock.push_json(call(
        "e2",
        "edit",
        json!({"file_path":"main.toy","old_string":"    ERROR();","new_string":"    helper();"}),
    ));
    env.mock
        .push_json(json!({"chunks":[{"text":"fixed"}],"finish":"stop"}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.cx
        .send_request(
            agent_client_protocol::v1::schema::SetSessionConfigOptionRequest::new(
                session.clone(),
                "mode",
                "accept-edits",
            ),
        )
        .block_task()
        .await
        .unwrap();
    conn.prompt(&session, "change it").await.unwrap();
    assert!(
        tool_result(&env, "s1").contains("No diagnostics"),
        "{}",
        tool_result(&env, "s1")
    );
    let broken = tool_result(&env, "e1");
    assert!(
        broken.contains("test-lsp now reports 1 error(s)")
            && broken.contains("4:5  found ERROR on line 4"),
        "{broken}"
    );
    let fixed = tool_result(&env, "e2");
    assert!(!fixed.contains("error(s)"), "{fixed}");
    conn.finish().await;
}

#[tokio::test]
async fn language_servers_die_with_dsh_on_eof_and_on_sigkill() {
    let env = lsp_env().await;
    let root = env.cwd().canonicalize().unwrap();
    env.mock.push_json(call(
        "d1",
        "lsp",
        json!({"operation":"hover","file_path":"main.toy","line":1,"symbol":"helper"}),
    ));
    env.mock
        .push_json(json!({"chunks":[{"text":"ok"}],"finish":"stop"}));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "hover").await.unwrap();
    assert_eq!(test_lsp_pids(&root).len(), 1);
    conn.finish().await; // stdin EOF
    assert!(
        test_lsp_pids(&root).is_empty(),
        "client EOF stops the server"
    );

    env.mock.push_json(call(
        "d2",
        "lsp",
        json!({"operation":"hover","file_path":"main.toy","line":1,"symbol":"helper"}),
    ));
    env.mock
        .push_json(json!({"chunks":[{"text":"ok"}],"finish":"stop"}));
    let mut conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "hover").await.unwrap();
    assert_eq!(test_lsp_pids(&root).len(), 1);
    conn.child.start_kill().unwrap(); // SIGKILL: no chance to clean up
    let deadline = Instant::now() + Duration::from_secs(2);
    while !test_lsp_pids(&root).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the server outlived a SIGKILLed dsh by 2 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
