//! `dsh demo`: a complete scripted session with no API key. It copies a
//! small fixture workspace to a scratch directory, starts `dsh acp` as a
//! child with the replay model, drives it as an editor would over ACP
//! ([`crate::acp::demo_client`]), and prints the conversation as a person
//! would see it. A second child then reloads the session from disk to show
//! that the log is the truth.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::acp::demo_client::{self, Child, Out, Printer};

const SCRIPT: &str = include_str!("../../fixtures/transcripts/demo.jsonl");
const WORKSPACE: &[(&str, &str)] = &[
    (
        "README.md",
        include_str!("../../fixtures/workspaces/demo/README.md"),
    ),
    (
        "src/main.rs",
        include_str!("../../fixtures/workspaces/demo/src/main.rs"),
    ),
];
const PROMPTS: &[&str] = &[
    "What does this project do?",
    "Make count_words skip tokens that have no letters or digits, and check it.",
];

/// Runs the demo, printing to `out`.
///
/// # Errors
/// The scratch directory cannot be written, the child cannot start, or the
/// protocol exchange fails.
pub async fn run(out: Box<dyn Write + Send>) -> anyhow::Result<()> {
    let buffer: Out = Arc::new(Mutex::new(out));
    let scratch = std::env::temp_dir().join(format!("dsh-demo-{}", std::process::id()));
    let result = run_in(&scratch, buffer).await;
    if let Err(err) = std::fs::remove_dir_all(&scratch) {
        tracing::debug!(%err, "cannot remove the demo scratch directory");
    }
    result
}

async fn run_in(scratch: &Path, out: Out) -> anyhow::Result<()> {
    let workspace = scratch.join("workspace");
    for (path, text) in WORKSPACE {
        let path = workspace.join(path);
        std::fs::create_dir_all(path.parent().unwrap_or(&workspace))?;
        std::fs::write(&path, text)?;
    }
    let script = scratch.join("demo.jsonl");
    std::fs::write(&script, SCRIPT)?;
    let home = scratch.join("home");
    let child = Child {
        home: &home,
        script: &script,
    };

    let printer = Arc::new(Printer::new(out));
    printer.line("dsh demo: a scripted session over ACP (replay model, no network, no API key)");
    printer.line(&format!("workspace: {}", workspace.display()));
    printer.line("");

    let session_id = demo_client::first_session(&child, &printer, &workspace, PROMPTS).await?;

    printer.line("\nA fresh dsh process reloads the session from its log:");
    demo_client::reload(&child, &printer, &workspace, &session_id).await?;
    let replayed = printer.replayed();
    printer.line(&format!(
        "  session/load replayed {replayed} updates (prompts, thoughts, replies, tool calls with their diffs, the plan, usage) before answering"
    ));
    let log = home.join("sessions").join(format!("{session_id}.jsonl"));
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    printer.line(&format!(
        "\nsession log: {} lines, {} bytes of JSONL (header + events); the scratch directory is removed now",
        log_text.lines().count(),
        log_text.len()
    ));
    Ok(())
}
