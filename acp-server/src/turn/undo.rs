//! `/undo`: puts back the files the most recent turn with a checkpoint
//! changed ([`crate::checkpoint`]), after checking that nobody changed
//! them since; `/undo` again goes one more turn back. Files are written
//! through the editor when it offers `fs/write_text_file` (its buffers and
//! review list see the change), else on disk. The editor sees a tool call
//! with a diff per file; the model is told with the next prompt. Below
//! full-access, an undo that would change a protected file (a hooks file,
//! a skill, an instruction file, `.git/…`) is asked about first.

use std::path::Path;

use dsh_protocol::checkpoint::CheckpointFile;
use dsh_protocol::log::{EventData, PermissionOutcome};
use dsh_protocol::tool::{FileDiff, FileLocation, ToolContent, ToolKind, ToolView};
use dsh_protocol::ToolCallId;

use super::Turn;
use crate::checkpoint::{hash, Snapshot};
use crate::error::AgentError;
use crate::frontend::Ask;
use crate::permission::{self, AnswerOption};

/// What a file is now: its text, `None` when it does not exist.
type Now = Option<Vec<u8>>;

impl Turn<'_> {
    pub(super) async fn undo(&self) -> Result<(), AgentError> {
        let target = {
            let locked = self.session.locked();
            let state = &locked.state;
            state
                .checkpoints
                .iter()
                .rev()
                .find(|(turn, _)| !state.undone.contains(turn))
                .cloned()
        };
        let mode = self.session.mode();
        if matches!(
            mode,
            dsh_protocol::Mode::ReadOnly | dsh_protocol::Mode::Plan
        ) {
            return self.notice(&format!(
                "/undo changes files, and this session is in {} mode: nothing was changed. Switch to ask, accept-edits or full-access (/mode) to undo.",
                mode.as_str()
            ));
        }
        let Some((turn, files)) = target else {
            return self.notice(
                "Nothing to undo: no turn of this session changed files, or every change was undone already.",
            );
        };
        if let Some(file) = files.iter().find(|file| !file.restorable()) {
            return self.notice(&format!(
                "Cannot undo turn {turn}: `{}` cannot be put back ({}). Nothing was changed.",
                file.path,
                file.lost
                    .as_deref()
                    .unwrap_or("its earlier content was not kept")
            ));
        }
        if let Some(refusal) = self.evicted(turn, &files).await {
            return self.notice(&refusal);
        }
        let mut now = Vec::with_capacity(files.len());
        for file in &files {
            let snapshot = self.current(&file.path).await;
            let content = match snapshot {
                Snapshot::Content(bytes) => Some(bytes),
                Snapshot::Missing => None,
                Snapshot::Unkept(why) => {
                    return self.notice(&format!(
                        "Cannot undo turn {turn}: `{}`: {why}. Nothing was changed.",
                        file.path
                    ))
                }
            };
            if content.as_deref().map(hash) != file.after {
                return self.notice(&format!(
                    "Cannot undo turn {turn}: `{}` changed after it (by you, the editor or a later command). Nothing was changed.",
                    file.path
                ));
            }
            now.push(content);
        }
        if let Some(refusal) = self.confirm_protected(turn, &files, mode).await? {
            return self.notice(&refusal);
        }
        let mut view = ToolView {
            title: format!("Undo turn {turn}"),
            kind: Some(ToolKind::Edit),
            ..ToolView::default()
        };
        let mut done = Vec::new();
        for (file, now) in files.iter().zip(now) {
            match self.restore(file, now).await {
                Ok((line, content)) => {
                    done.push(line);
                    view.locations.push(FileLocation {
                        path: file.path.clone(),
                        line: Some(1),
                    });
                    view.content.push(content);
                }
                Err(message) => {
                    done.push(format!("could not put back {}: {message}", file.path));
                    view.content.push(ToolContent::Text {
                        text: format!("Could not put back {}: {message}", file.path),
                    });
                }
            }
        }
        let summary = format!(
            "The user undid the file changes of turn {turn} with /undo: {}. Those files are as they were before that turn; do not assume the reverted changes are there.",
            done.join("; ")
        );
        self.record(EventData::Undo {
            turn,
            call_id: ToolCallId::new(format!("dsh-undo-{turn}")),
            view,
            summary,
        })
        .map(drop)
    }

    /// Below full-access, an undo that would write or delete a protected
    /// file (one that runs code or steers later sessions,
    /// [`crate::permission::protected`]) is asked about first, as a tool's
    /// change of it would be, with no "always": `None` when it may go on,
    /// else what the user is told (nothing was changed).
    async fn confirm_protected(
        &self,
        turn: u64,
        files: &[CheckpointFile],
        mode: dsh_protocol::Mode,
    ) -> Result<Option<String>, AgentError> {
        if mode == dsh_protocol::Mode::FullAccess {
            return Ok(None);
        }
        let protected = &self.config.protected;
        let (reasons, locations): (Vec<String>, Vec<FileLocation>) = files
            .iter()
            .filter_map(|file| {
                let reason = protected.reason(Path::new(&file.path))?;
                let location = FileLocation {
                    path: file.path.clone(),
                    line: None,
                };
                Some((reason, location))
            })
            .unzip();
        if reasons.is_empty() {
            return Ok(None);
        }
        let option = |outcome, label: &str| AnswerOption {
            outcome,
            label: label.to_owned(),
        };
        let question = Ask {
            call_id: ToolCallId::new(format!("dsh-undo-{turn}-protected")),
            title: format!("Undo turn {turn}: put back protected files?"),
            kind: ToolKind::Edit,
            raw_input: serde_json::json!({ "undo": turn, "files": files.iter().map(|file| &file.path).collect::<Vec<_>>() }),
            locations,
            content: vec![ToolContent::Text {
                text: format!(
                    "/undo of turn {turn} would write or delete {}.",
                    reasons.join("; ")
                ),
            }],
            question: permission::Question::Permission(vec![
                option(PermissionOutcome::AllowOnce, "Undo, these files too"),
                option(PermissionOutcome::RejectOnce, "Don't undo"),
            ]),
            unattended: permission::Unattended::FullAccessOnly,
        };
        let answer = tokio::select! {
            biased;
            () = self.cancel.cancelled() => PermissionOutcome::Cancelled,
            answer = self.frontend.ask(question) => answer.permission_outcome(),
        };
        tracing::info!(?answer, turn, "undo of protected files answered");
        // The mode at the moment of the answer decides, as for tools.
        let mode = self.session.mode();
        Ok(if !answer.allows() {
            Some(format!(
                "Turn {turn} was not undone: it would change protected files and was not allowed. Nothing was changed."
            ))
        } else if matches!(
            mode,
            dsh_protocol::Mode::ReadOnly | dsh_protocol::Mode::Plan
        ) {
            Some(format!(
                "Turn {turn} was not undone: the session is in {} mode now. Nothing was changed.",
                mode.as_str()
            ))
        } else {
            None
        })
    }

    /// Why turn `turn` cannot be undone for want of its kept contents:
    /// they were evicted for the checkpoint budget, or are gone. Checked
    /// before anything is changed.
    async fn evicted(&self, turn: u64, files: &[CheckpointFile]) -> Option<String> {
        let store = self.checkpoint_store();
        let hashes: Vec<(String, String)> = files
            .iter()
            .filter_map(|file| Some((file.path.clone(), file.before.clone()?)))
            .collect();
        let (evicted, missing) = tokio::task::spawn_blocking(move || {
            let missing = hashes
                .into_iter()
                .find(|(_, hash)| !store.has(hash))
                .map(|(path, _)| path);
            (store.evicted(turn), missing)
        })
        .await
        .ok()?;
        if evicted {
            return Some(format!(
                "Cannot undo turn {turn}: the earlier content of turn {turn} was evicted to stay within the checkpoint budget ({} bytes per session, [checkpoints] max_bytes_per_session). Nothing was changed.",
                self.config.checkpoints.max_bytes_per_session
            ));
        }
        missing.map(|path| {
            format!("Cannot undo turn {turn}: the kept earlier content of `{path}` is gone. Nothing was changed.")
        })
    }

    /// A file as the tools see it: through the editor when it reads files
    /// for dsh (unsaved changes included), else on disk. The disk is
    /// looked at first either way: what is not a small regular file is not
    /// read at all.
    pub(super) async fn current(&self, path: &str) -> Snapshot {
        let owned = std::path::PathBuf::from(path);
        let disk = tokio::task::spawn_blocking(move || Snapshot::on_disk(&owned))
            .await
            .unwrap_or_else(|err| Snapshot::Unkept(err.to_string()));
        if matches!(disk, Snapshot::Unkept(_)) || !self.frontend.caps().read_text_file {
            return disk;
        }
        match self.frontend.read_text_file(Path::new(path)).await {
            Ok(text) if text.len() as u64 <= crate::checkpoint::MAX_FILE => {
                Snapshot::Content(text.into_bytes())
            }
            Ok(_) => {
                Snapshot::Unkept("the editor's copy is over what a checkpoint keeps".to_owned())
            }
            Err(_) => disk,
        }
    }

    /// Puts one file back; a line for the model and the editor's content.
    async fn restore(
        &self,
        file: &CheckpointFile,
        now: Now,
    ) -> Result<(String, ToolContent), String> {
        let path = file.path.clone();
        let Some(before) = &file.before else {
            // The turn created it. Removed through a handle of its
            // directory: a link in its place (or on the way) is refused.
            let removed = std::path::PathBuf::from(&path);
            tokio::task::spawn_blocking(move || crate::beneath::remove(&removed))
                .await
                .map_err(|err| err.to_string())?
                .map_err(|err| err.to_string())?;
            return Ok((
                format!("removed {path} (the turn created it)"),
                ToolContent::Text {
                    text: format!("Removed {path} (the turn created it)."),
                },
            ));
        };
        let store = self.checkpoint_store();
        let hash = before.clone();
        let bytes = tokio::task::spawn_blocking(move || store.get(&hash))
            .await
            .map_err(|err| err.to_string())?
            .map_err(|err| format!("its kept content is gone ({err})"))?;
        let text = String::from_utf8(bytes.clone()).ok();
        let through_editor = self.frontend.caps().write_text_file && text.is_some();
        if through_editor {
            self.frontend
                .write_text_file(Path::new(&path), text.clone().unwrap_or_default())
                .await?;
        } else {
            let target = std::path::PathBuf::from(&path);
            tokio::task::spawn_blocking(move || crate::beneath::write(&target, &bytes, true))
                .await
                .map_err(|err| err.to_string())?
                .map_err(|err| err.to_string())?;
        }
        let line = if now.is_none() {
            format!("restored {path} (the turn deleted it)")
        } else {
            format!("restored {path}")
        };
        let content = match (text, now.and_then(|now| String::from_utf8(now).ok())) {
            (Some(new_text), old_text) => ToolContent::Diff(FileDiff {
                path: path.clone(),
                old_text,
                new_text,
            }),
            (None, _) => ToolContent::Text {
                text: format!("Restored {path} (binary)."),
            },
        };
        Ok((line, content))
    }
}
