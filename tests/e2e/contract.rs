//! Issue 39: the design's tool catalog is the model's contract. What the
//! model is sent — the tools of a real request, as the mock model received
//! it — is compared with the catalog (protocol/catalog/tools.json, itself
//! checked against the seed by protocol/tests/catalog.rs): every tool with
//! a catalog name has that entry's schema exactly (keys, their order, every
//! description), with the default configuration and with every opt-in
//! tool enabled; every other built-in is a documented dsh extension.

use dsh_acp_server::tools::TABLE;
use dsh_protocol::catalog;
use serde_json::Value;

use crate::support::{reply, TestEnv};

/// The variant dsh implements of a name the catalog gives more than once.
/// The continuable children's controls are `dsh-tool-subagent-control`'s
/// (not the agent team's).
const VARIANTS: &[(&str, &str)] = &[
    ("bash", "dsh-tool-bash"),
    ("pwsh", "dsh-tool-pwsh"),
    ("interrupt_agent", "dsh-tool-subagent-control"),
    ("list_agents", "dsh-tool-subagent-control"),
    ("send_message", "dsh-tool-subagent-control"),
];

/// dsh's opt-in tools (`[tools] enable`); `pwsh` is one except on Windows
/// with PowerShell, where it replaces `bash` (whose schema and variant
/// the contract checks the same way).
const OPT_IN: &[&str] = &[
    "dsh_lsp",
    "pwsh",
    "session_event_read",
    "session_event_search",
    "session_event_trace",
    "session_search",
    "session_trace",
    "str_replace_editor",
    "terminal_close",
    "terminal_list",
    "terminal_open",
    "terminal_read",
    "terminal_send",
    "terminal_signal",
];

/// The tools of the first request of a one-prompt session under `config`,
/// by name, with a user skill present (so `skill` is offered).
async fn offered(config: &str, model: Option<&str>) -> Vec<(String, String, Value)> {
    let env = TestEnv::with_config(config).await;
    let skill = env.home.path().join("skills/tidy-up/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: tidy-up\ndescription: Remove dead code\n---\nDelete what nothing calls.\n",
    )
    .unwrap();
    env.mock.push_json(reply("ok"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    if let Some(model) = model {
        conn.set_option(&session, "model", model).await;
    }
    conn.prompt(&session, "hello").await.unwrap();
    conn.finish().await;
    let request = env.mock.requests().remove(0);
    request["tools"]
        .as_array()
        .expect("the request offers tools")
        .iter()
        .map(|tool| {
            let function = &tool["function"];
            (
                function["name"].as_str().unwrap().to_owned(),
                function["description"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                function["parameters"].clone(),
            )
        })
        .collect()
}

/// Every difference between what was offered and the catalog.
fn differences(offered: &[(String, String, Value)], jobs: bool) -> Vec<String> {
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/tools.md"),
    )
    .expect("docs/tools.md");
    let mut found = Vec::new();
    for (name, description, parameters) in offered {
        let chinese = |c: char| ('\u{3000}'..='\u{9fff}').contains(&c);
        if description.trim().is_empty() || description.chars().any(chinese) {
            found.push(format!("{name}: no English description"));
        }
        let variants: Vec<&catalog::Entry> = catalog::entries()
            .iter()
            .filter(|entry| &entry.name == name)
            .collect();
        if variants.is_empty() {
            // Not a catalog name: dsh's own, named apart and documented.
            if !name.starts_with("dsh_") || !docs.contains(&format!("`{name}`")) {
                found.push(format!(
                    "{name}: neither a catalog tool nor a documented dsh_ extension"
                ));
            }
            continue;
        }
        // A name the catalog gives twice (one-shot and persistent `bash`,
        // …) is compared with the variant dsh implements, and only it.
        let entry = match variants[..] {
            [entry] => entry,
            _ => match VARIANTS.iter().find(|(tool, _)| tool == name) {
                Some((_, package)) => catalog::entry(package, name),
                None => {
                    found.push(format!("{name}: which of its catalog variants? (VARIANTS)"));
                    continue;
                }
            },
        };
        let expected = if jobs {
            entry.parameters.clone()
        } else {
            catalog::parameters_without(&entry.package, name, "run_in_background")
        };
        let (wire, expected) = (
            serde_json::to_string(parameters).unwrap(),
            serde_json::to_string(&expected).unwrap(),
        );
        if wire != expected {
            found.push(format!(
                "{name}: offered {wire}\n  catalog ({}) {expected}",
                entry.package
            ));
        }
    }
    found
}

#[tokio::test]
async fn the_default_tools_are_the_catalogs() {
    let offered = offered("", None).await;
    let names: Vec<&str> = offered.iter().map(|(name, ..)| name.as_str()).collect();
    for expected in [
        "ask_user_question",
        "bash",
        "create_goal",
        "edit",
        "exit_plan_mode",
        "get_goal",
        "glob",
        "grep",
        "interrupt_agent",
        "job_kill",
        "job_list",
        "job_output",
        "list_agents",
        "list_subagent_models",
        "lsp",
        "read",
        "send_message",
        "skill",
        "subagent",
        "todo_write",
        "update_goal",
        "web_fetch",
        "write",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} not offered: {names:?}"
        );
    }
    for opt_in in OPT_IN {
        assert!(!names.contains(opt_in), "{opt_in} is opt-in: {names:?}");
    }
    let found = differences(&offered, true);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[tokio::test]
async fn with_every_opt_in_enabled_every_tool_is_offered_as_the_catalog_says() {
    let enable = OPT_IN
        .iter()
        .map(|name| format!("{name:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let offered = offered(
        &format!(
            "[web.search]\nprovider = \"searxng\"\nurl = \"http://127.0.0.1:9\"\n\
         [tools]\nenable = [{enable}]"
        ),
        Some("deepseek-v4-flash-vision-exp"),
    )
    .await;
    let names: std::collections::BTreeSet<&str> =
        offered.iter().map(|(name, ..)| name.as_str()).collect();
    let built_in: std::collections::BTreeSet<&str> = TABLE.iter().map(|spec| spec.name).collect();
    assert_eq!(
        names, built_in,
        "every built-in tool is offered once everything is on"
    );
    let found = differences(&offered, true);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[tokio::test]
async fn without_background_jobs_the_catalog_drops_run_in_background() {
    let offered = offered("[jobs]\nenabled = false", None).await;
    let bash = offered.iter().find(|(name, ..)| name == "bash").unwrap();
    assert!(bash.2["properties"].get("run_in_background").is_none());
    assert!(!bash.1.contains("run_in_background"));
    let found = differences(&offered, false);
    assert!(found.is_empty(), "{}", found.join("\n"));
}
