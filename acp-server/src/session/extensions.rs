//! What a session finds in files besides instructions: its skills and
//! custom commands ([`crate::context::skills`],
//! [`crate::context::custom_commands`]), looked for when it opens and at
//! each prompt's start, and the slash commands it last offered the editor
//! (offered again when they change).

use std::path::PathBuf;

use crate::context::commands::Offered;
use crate::context::custom_commands::{self, CustomCommand};
use crate::context::files::Roots;
use crate::context::skills::{self, Skill};

use super::{lock, Session};

/// The skills and custom commands found.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// Where they were looked for (the `skill` tool loads from there).
    pub(crate) roots: Roots,
    /// The skills, by name.
    pub(crate) skills: Vec<Skill>,
    /// The custom commands, by name.
    pub(crate) commands: Vec<CustomCommand>,
}

impl Found {
    /// The slash commands these make the session offer (built-ins first).
    pub(crate) fn offered(&self) -> Vec<Offered> {
        crate::context::commands::offered(&self.commands, &self.skills)
    }
}

impl Session {
    /// Its skills and custom commands as the files are now (read on a
    /// blocking thread; a failure finds nothing).
    pub(crate) async fn discover(&self) -> Found {
        let cwd = PathBuf::from(&self.header.cwd);
        let roots = Roots {
            home: self.config.home.clone(),
            project: cwd.clone(),
            hidden: self.config.protected.hidden().to_vec(),
        };
        let (looked, settings) = (roots.clone(), self.config.instructions.clone());
        tokio::task::spawn_blocking(move || {
            // The project root as for instruction files.
            let project = crate::context::instructions::project_root(&settings, &cwd);
            let roots = Roots { project, ..looked };
            Found {
                skills: skills::discover(&roots),
                commands: custom_commands::discover(&roots),
                roots,
            }
        })
        .await
        .unwrap_or_else(|error| {
            tracing::error!(%error, "looking for skills and commands failed");
            Found {
                roots,
                skills: Vec::new(),
                commands: Vec::new(),
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
