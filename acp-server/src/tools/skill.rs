//! `skill`: loads a skill's instructions ([`crate::context::skills`]) —
//! its `SKILL.md` body and its directory, so the model can read the other
//! files there. An unknown name is answered with the skills there are
//! (the session's cache looks again: only changed files are read).
//! The file is read by dsh itself, with the skills' own path policy (no
//! symlink out of the place it was found in, no hidden location), so the
//! call touches nothing the permission policy decides on.

use dsh_protocol::tool::{ToolKind, ToolOutcome, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use crate::context::discovery::Source;
use crate::context::skills;

/// The seeds' description (`dsh-tool-skill`).
pub const DESCRIPTION: &str = "Load the full instructions of an available skill. Before a task that names or clearly matches a skill, call this with the exact name from the session skill catalog.";

#[derive(Debug, Deserialize)]
pub struct SkillArgs {
    pub name: String,
}

pub fn present(args: &SkillArgs) -> ToolView {
    ToolView {
        title: format!("Load skill {}", args.name.trim()),
        kind: Some(ToolKind::Read),
        ..ToolView::default()
    }
}

/// Reads the skill (blocking work on its own thread).
pub async fn run(args: &SkillArgs, source: &Source) -> ToolOutcome {
    let (source, name) = (source.clone(), args.name.trim().to_owned());
    let found = tokio::task::spawn_blocking(move || match skills::load(&source.roots, &name) {
        Some(loaded) => Ok(loaded),
        None => Err((name, source.refresh())),
    })
    .await;
    match found {
        Ok(Ok((skill, body))) => {
            let view = ToolView {
                title: format!("Load skill {}", skill.name),
                kind: Some(ToolKind::Read),
                locations: vec![dsh_protocol::tool::FileLocation {
                    path: skill.dir.join("SKILL.md").display().to_string(),
                    line: None,
                }],
                ..ToolView::default()
            };
            ToolOutcome::ok(skills::loaded(&skill, &body), view)
        }
        Ok(Err((name, available))) => {
            let names: Vec<&str> = available
                .skills
                .iter()
                .map(|skill| skill.name.as_str())
                .collect();
            let list = if names.is_empty() {
                "There are no skills in this session.".to_owned()
            } else {
                format!("Available skills: {}.", names.join(", "))
            };
            ToolOutcome::failed(
                ErrorCode::InvalidToolArgs,
                format!("There is no skill named {name:?}. {list}"),
            )
        }
        Err(error) => ToolOutcome::failed(
            ErrorCode::Internal,
            format!("Loading the skill failed: {error}"),
        ),
    }
}
