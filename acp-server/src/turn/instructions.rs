//! The turn's side of [`crate::context::instructions`]: the workspace
//! instruction files recorded at a turn's start and after tools.

use std::path::{Path, PathBuf};

use dsh_protocol::log::EventData;

use super::Turn;
use crate::context::instructions;
use crate::context::instructions::InstructionSettings;
use crate::error::AgentError;

impl Turn<'_> {
    /// Instruction files new to the session, changed or removed, before the
    /// turn's first model call.
    pub(super) async fn instructions_at_start(&self) -> Result<(), AgentError> {
        self.instructions(instructions::baseline).await
    }

    /// Instruction files of the directories the step's tools touched.
    pub(super) async fn instructions_after_tools(&self) -> Result<(), AgentError> {
        let touched =
            std::mem::take(&mut self.touched.lock().unwrap_or_else(|e| e.into_inner()).paths);
        if touched.is_empty() {
            return Ok(());
        }
        self.instructions(move |settings, home, cwd, known, hidden| {
            instructions::nested(settings, home, cwd, &touched, known, hidden)
        })
        .await
    }

    /// Runs `find` (it reads files) on a blocking thread with the session's
    /// settings, home, cwd and the files it has been given; records the
    /// batch it returns.
    async fn instructions(
        &self,
        find: impl FnOnce(
                &InstructionSettings,
                &Path,
                &Path,
                &instructions::Known,
                &[PathBuf],
            ) -> Option<instructions::Batch>
            + Send
            + 'static,
    ) -> Result<(), AgentError> {
        let settings = self.config.instructions.clone();
        let home = self.config.home.clone();
        let cwd = PathBuf::from(&self.session.header.cwd);
        let known = self.session.locked().state.instructions.clone();
        let hidden = self.config.protected.hidden().to_vec();
        let batch = match tokio::task::spawn_blocking(move || {
            find(&settings, &home, &cwd, &known, &hidden)
        })
        .await
        {
            Ok(batch) => batch,
            Err(error) => {
                tracing::error!(%error, "reading workspace instructions failed; going on without");
                None
            }
        };
        let Some(batch) = batch else {
            return Ok(());
        };
        tracing::info!(
            files = batch.files.len(),
            bytes = batch.text.len(),
            "workspace instructions"
        );
        self.record(EventData::Instructions {
            text: batch.text,
            files: batch.files,
        })
    }
}
