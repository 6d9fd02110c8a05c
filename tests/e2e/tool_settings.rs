//! `[tools]`: which tools the model is offered (`enable`, `disable`), in
//! what order (`order`), and how many parallel-safe calls run at once
//! (`max_parallel_calls`), end to end.

use std::time::Duration;

use agent_client_protocol::v1::schema::StopReason;
use serde_json::json;

use crate::support::{call, reply, text, tool_names, tool_result, TestEnv};

/// Runs one prompt to its end in a fresh session.
async fn prompt(env: &TestEnv) {
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    assert_eq!(
        conn.prompt(&session, "go").await.unwrap().stop_reason,
        StopReason::EndTurn
    );
}

/// `disable` takes tools out of the request (a call to one is an unknown
/// tool); `enable` offers an opt-in tool, here by its catalog package.
#[tokio::test]
async fn disabled_tools_are_not_offered_and_enabled_ones_are() {
    let env = TestEnv::with_config(
        "[tools]\ndisable = [\"web_fetch\", \"todo_write\"]\nenable = [\"@deepseek-ai/dsh-tool-str-replace-editor\"]",
    )
    .await;
    env.mock
        .push_json(call("t1", "todo_write", json!({"todos": []})));
    env.mock.push_json(reply("done"));
    prompt(&env).await;
    let offered = tool_names(&env.mock.requests()[0]);
    assert!(
        !offered.iter().any(|name| name == "web_fetch"),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|name| name == "todo_write"),
        "{offered:?}"
    );
    assert!(
        offered.iter().any(|name| name == "str_replace_editor"),
        "{offered:?}"
    );
    assert!(offered.iter().any(|name| name == "read"), "{offered:?}");
    let refused = tool_result(&env, "t1");
    assert!(refused.contains("Unknown tool \"todo_write\""), "{refused}");

    // By default: both offered, the opt-in one not.
    let env = TestEnv::new().await;
    env.mock.push_json(reply("done"));
    prompt(&env).await;
    let offered = tool_names(&env.mock.requests()[0]);
    assert!(
        offered.iter().any(|name| name == "web_fetch"),
        "{offered:?}"
    );
    assert!(
        offered.iter().any(|name| name == "todo_write"),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|name| name == "str_replace_editor"),
        "{offered:?}"
    );
}

/// `order` puts the tools it names first, the rest (by name) at its `*`;
/// without it the tools are by name.
#[tokio::test]
async fn order_puts_the_named_tools_where_it_says() {
    let env =
        TestEnv::with_config("[tools]\norder = [\"bash\", \"read\", \"*\", \"ask_user_question\"]")
            .await;
    env.mock.push_json(reply("done"));
    prompt(&env).await;
    let offered = tool_names(&env.mock.requests()[0]);
    assert_eq!(offered[..2], ["bash", "read"], "{offered:?}");
    assert_eq!(offered.last().unwrap(), "ask_user_question", "{offered:?}");
    let rest = &offered[2..offered.len() - 1];
    let mut sorted = rest.to_vec();
    sorted.sort();
    assert_eq!(rest, sorted, "{offered:?}");
    assert!(rest.iter().any(|name| name == "write"), "{offered:?}");

    let env = TestEnv::new().await;
    env.mock.push_json(reply("done"));
    prompt(&env).await;
    let offered = tool_names(&env.mock.requests()[0]);
    let mut sorted = offered.clone();
    sorted.sort();
    assert_eq!(offered, sorted);
}

/// A bad name in `[tools]` is a config error naming the key and the
/// nearest valid name: `dsh config check` says it, `dsh run` stops before
/// asking the model.
#[tokio::test]
async fn a_bad_tool_name_is_a_config_error_with_the_nearest_name() {
    for (tools, expected) in [
        (
            "enable = [\"str_replace_edtor\"]",
            "[tools] enable: unknown tool or package \"str_replace_edtor\": did you mean \"str_replace_editor\"?",
        ),
        (
            "enable = [\"terminal\"]",
            "[tools] enable: \"terminal\" (the catalog's dsh-tool-terminal: terminal_close,",
        ),
        (
            "disable = [\"bash\"]\nenable = [\"bash\"]",
            "[tools] \"bash\" is both in enable and in disable",
        ),
        (
            "order = [\"bash\", \"raed\", \"*\"]",
            "[tools] order: unknown tool \"raed\": did you mean \"read\"?",
        ),
        (
            "max_parallel_calls = 0",
            "[tools] max_parallel_calls must be at least 1",
        ),
    ] {
        let env = TestEnv::with_config(&format!("[tools]\n{tools}")).await;
        let output = tokio::time::timeout(
            Duration::from_secs(30),
            env.dsh(&["config", "check"]).output(),
        )
        .await
        .unwrap()
        .unwrap();
        let out = text(&output.stdout);
        assert_eq!(output.status.code(), Some(1), "{tools}: {out}");
        assert!(out.contains(expected), "{tools}: {expected} in {out}");

        let output = tokio::time::timeout(
            Duration::from_secs(30),
            env.dsh(&["run", "hi"]).output(),
        )
        .await
        .unwrap()
        .unwrap();
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{tools}: {stderr}");
        assert!(stderr.contains(expected), "{tools}: {expected} in {stderr}");
        assert!(env.mock.requests().is_empty());
    }
}
