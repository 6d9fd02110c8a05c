//! The `lsp` tool (the catalog's four operations) and `dsh_lsp` (dsh's
//! other queries, opt-in) end to end, with the deterministic test language
//! server.

use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    CloseSessionRequest, PermissionOptionKind, SessionUpdate, ToolCallStatus,
};
use serde_json::{json, Value};

use crate::support::{
    call, plant_workspace_server, reply, test_lsp_binary, test_lsp_pids, tool_names, tool_result,
    Answer, ClientSim, TestEnv,
};

const SOURCE: &str = "fn helper() {}\nfn main() {\n    helper();\n    helper();\n}\n";

/// `[tools]` that offers `dsh_lsp`.
const ENABLE_DSH_LSP: &str = "[tools]\nenable = [\"dsh_lsp\"]\n";

async fn lsp_env() -> TestEnv {
    lsp_env_with("").await
}

async fn lsp_env_with(extra: &str) -> TestEnv {
    let server = test_lsp_binary();
    let env = TestEnv::with_config(&format!(
        "[lsp]\nbuiltin = false\nready_timeout_ms = 2000\n[[lsp.servers]]\nname = \"test-lsp\"\ncommand = \"{}\"\nextensions = {{ toy = \"toy\" }}\n{extra}",
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
        json!({"operation":"goToDefinition","file_path":"main.toy","line":3.0,"character":5.0}),
    ));
    env.mock.push_json(call(
        "r1",
        "lsp",
        json!({"operation":"findReferences","file_path":"main.toy","line":1,"character":4}),
    ));
    env.mock.push_json(call(
        "h1",
        "lsp",
        json!({"operation":"hover","file_path":"main.toy","line":4,"character":5}),
    ));
    env.mock.push_json(call(
        "x1",
        "lsp",
        json!({"operation":"goToDefinition","file_path":"main.toy","line":2,"character":2.5}),
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
    let fractional = tool_result(&env, "x1");
    assert!(
        fractional.contains("character must be a whole number") && fractional.contains("2.5"),
        "{fractional}"
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
    assert_eq!(calls[0].title, "Go to definition of main.toy:3:5");

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
    let env = lsp_env_with(ENABLE_DSH_LSP).await;
    env.mock.push_json(call(
        "s1",
        "dsh_lsp",
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
        json!({"operation":"hover","file_path":"main.toy","line":1,"character":4}),
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
        json!({"operation":"hover","file_path":"main.toy","line":1,"character":4}),
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

/// The tools of a model request, by name: (name, parameters).
fn offered(request: &Value, name: &str) -> Option<Value> {
    request["tools"]
        .as_array()?
        .iter()
        .find(|tool| tool["function"]["name"] == name)
        .map(|tool| tool["function"]["parameters"].clone())
}

/// Issue 39: `lsp` is the catalog's: its schema, its four operations and
/// required `character`; dsh's other queries are not offered by default.
#[tokio::test]
async fn lsp_is_the_catalogs_four_operations() {
    let env = lsp_env().await;
    for (id, args) in [
        (
            "s1",
            json!({"operation":"documentSymbol","file_path":"main.toy","line":1,"character":1}),
        ),
        (
            "n1",
            json!({"operation":"goToDefinition","file_path":"main.toy","line":3,"symbol":"helper"}),
        ),
        (
            "z1",
            json!({"operation":"hover","file_path":"main.toy","line":0,"character":1}),
        ),
    ] {
        env.mock.push_json(call(id, "lsp", args));
    }
    env.mock.push_json(call(
        "o1",
        "dsh_lsp",
        json!({"operation":"documentSymbol","file_path":"main.toy"}),
    ));
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "navigate").await.unwrap();
    conn.finish().await;

    let refused = tool_result(&env, "s1");
    assert!(
        refused.contains("\"documentSymbol\"")
            && refused.contains("goToDefinition, findReferences, goToImplementation or hover")
            && !refused.contains("dsh_lsp"),
        "{refused}"
    );
    let no_character = tool_result(&env, "n1");
    assert!(
        no_character.contains("missing field `character`"),
        "{no_character}"
    );
    let zero = tool_result(&env, "z1");
    assert!(
        zero.contains("line must be a whole number of at least 1"),
        "{zero}"
    );
    let unknown = tool_result(&env, "o1");
    assert!(unknown.contains("Unknown tool \"dsh_lsp\""), "{unknown}");

    let request = env.mock.requests().remove(0);
    assert_eq!(
        offered(&request, "lsp"),
        Some(dsh_protocol::catalog::parameters("dsh-tool-lsp", "lsp"))
    );
    assert!(!tool_names(&request).contains(&"dsh_lsp".to_owned()));
}

/// dsh's other queries, through `dsh_lsp` once `[tools] enable` names it:
/// a file's symbols and diagnostics, a name looked up on the line; the
/// catalog's four stay `lsp`'s (and `lsp` points at `dsh_lsp` for its).
#[tokio::test]
async fn dsh_lsp_when_enabled_lists_symbols_and_diagnostics() {
    let env = lsp_env_with(ENABLE_DSH_LSP).await;
    for (id, tool, args) in [
        (
            "s1",
            "dsh_lsp",
            json!({"operation":"documentSymbol","file_path":"main.toy"}),
        ),
        (
            "g1",
            "dsh_lsp",
            json!({"operation":"diagnostics","file_path":"main.toy","line":1}),
        ),
        (
            "x1",
            "dsh_lsp",
            json!({"operation":"incomingCalls","file_path":"main.toy","line":2,"symbol":"nothere"}),
        ),
        (
            "h1",
            "dsh_lsp",
            json!({"operation":"hover","file_path":"main.toy","line":1,"character":4}),
        ),
        (
            "l1",
            "lsp",
            json!({"operation":"documentSymbol","file_path":"main.toy","line":1,"character":1}),
        ),
    ] {
        env.mock.push_json(call(id, tool, args));
    }
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "symbols").await.unwrap();

    let symbols = tool_result(&env, "s1");
    assert!(
        symbols.starts_with("main.toy\n") && symbols.contains("  2:4  function main"),
        "{symbols}"
    );
    let diagnostics = tool_result(&env, "g1");
    assert!(diagnostics.contains("No diagnostics"), "{diagnostics}");
    let missing = tool_result(&env, "x1");
    assert!(
        missing.contains("`nothere` does not appear on line 2") && missing.contains("fn main() {"),
        "{missing}"
    );
    let hover = tool_result(&env, "h1");
    assert!(
        hover.contains("Unknown dsh_lsp operation \"hover\"") && hover.contains("are lsp's"),
        "{hover}"
    );
    let pointed = tool_result(&env, "l1");
    assert!(
        pointed.contains("For \"documentSymbol\", call dsh_lsp."),
        "{pointed}"
    );
    let titles: Vec<String> = conn
        .updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::ToolCall(call) => Some(call.title),
            _ => None,
        })
        .collect();
    assert!(
        titles.contains(&"List symbols in main.toy".to_owned()),
        "{titles:?}"
    );
    conn.finish().await;

    let request = env.mock.requests().remove(0);
    let schema = offered(&request, "dsh_lsp").expect("dsh_lsp is offered when enabled");
    assert_eq!(
        schema["properties"]["operation"]["enum"],
        json!([
            "documentSymbol",
            "workspaceSymbol",
            "diagnostics",
            "incomingCalls",
            "outgoingCalls"
        ])
    );
    assert_eq!(
        offered(&request, "lsp"),
        Some(dsh_protocol::catalog::parameters("dsh-tool-lsp", "lsp"))
    );
}

/// A language server from the workspace that the user allowed for a
/// `dsh_lsp` call starts (the bridge honours either tool's "allow").
#[tokio::test]
async fn a_workspace_server_allowed_for_dsh_lsp_starts() {
    let mut env = TestEnv::with_config(ENABLE_DSH_LSP).await;
    let ran = env.cwd().join("ran.txt");
    plant_workspace_server(
        &mut env,
        &format!("echo \"ran $*\" >> '{}'\nexit 1\n", ran.display()),
    );
    env.mock.push_json(call(
        "l1",
        "dsh_lsp",
        json!({"operation":"documentSymbol","file_path":"src/main.rs"}),
    ));
    env.mock.push_json(reply("ok"));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowAlways));
    let conn = env.connect_with(sim.clone()).await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "ask").await;
    conn.prompt(&session, "symbols").await.unwrap();
    conn.finish().await;
    assert_eq!(sim.asked(), ["l1"]);
    let log = std::fs::read_to_string(&ran).unwrap_or_default();
    assert!(
        log.contains("ran --version"),
        "the allowed server did not start: {log:?}\n{}",
        tool_result(&env, "l1")
    );
}
