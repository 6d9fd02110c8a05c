//! What a session finds in files besides instructions: its skills and
//! custom commands ([`crate::context::skills`],
//! [`crate::context::custom_commands`]), looked for when it opens and at
//! each prompt's start through its cache ([`crate::context::discovery`]:
//! only files that changed are read again), and the slash commands it
//! last offered the editor (offered again when they change).

use std::path::PathBuf;
use std::sync::Arc;

use crate::context::commands::Offered;
use crate::context::discovery::{self, Source};
use crate::context::files::Roots;

use super::{lock, Session};

/// The skills and custom commands found.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// Where they were looked for, with the session's cache (the `skill`
    /// tool loads from there).
    pub(crate) roots: Source,
    /// The skills (with their instructions) and the custom commands.
    pub(crate) files: Arc<discovery::Found>,
}

impl Found {
    /// The slash commands these make the session offer (built-ins first).
    pub(crate) fn offered(&self) -> Vec<Offered> {
        crate::context::commands::offered(&self.files.commands, &self.files.skills)
    }
}

impl Session {
    /// Its skills and custom commands as the files are now (those that
    /// did not change since the last look are not read again; on a
    /// blocking thread; a failure finds nothing).
    pub(crate) async fn discover(&self) -> Found {
        let cwd = PathBuf::from(&self.header.cwd);
        let source = Source {
            roots: Roots {
                home: self.config.home.clone(),
                project: cwd.clone(),
                hidden: self.config.protected.hidden().to_vec(),
            },
            cache: self.discovery.clone(),
        };
        let (looked, settings) = (source.clone(), self.config.instructions.clone());
        tokio::task::spawn_blocking(move || {
            // The project root as for instruction files.
            let project = crate::context::instructions::project_root(&settings, &cwd);
            let mut roots = looked.roots;
            roots.project = project;
            let source = Source { roots, ..looked };
            Found {
                files: source.refresh(),
                roots: source,
            }
        })
        .await
        .unwrap_or_else(|error| {
            tracing::error!(%error, "looking for skills and commands failed");
            Found {
                roots: source,
                files: Arc::default(),
            }
        })
    }

    /// Notes `offered` as what the editor was offered; `Some` (the list)
    /// when it differs from what it was offered before (the first list is
    /// the one a front end sends when the session opens).
    pub(crate) fn offer(&self, offered: Vec<Offered>) -> Option<Vec<Offered>> {
        let mut last = lock(&self.offered);
        if last.as_ref() == Some(&offered) {
            return None;
        }
        let first = last.is_none();
        *last = Some(offered.clone());
        (!first).then_some(offered)
    }
}
