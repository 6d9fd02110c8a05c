//! Tool presentation vocabulary: how a tool call looks in an editor. It maps
//! one-for-one onto ACP tool calls but does not depend on ACP.

use serde::{Deserialize, Serialize};

/// What kind of work a tool call does; editors pick icons from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolKind {
    /// Reads files or data.
    Read,
    /// Modifies files.
    Edit,
    /// Deletes files.
    Delete,
    /// Moves or renames files.
    Move,
    /// Searches.
    Search,
    /// Runs a command.
    Execute,
    /// Fetches from the network.
    Fetch,
    /// Internal reasoning or planning.
    Think,
    /// Anything else.
    Other,
}

/// A file position the editor can jump to. `path` is absolute, `line` 1-based.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileLocation {
    /// Absolute path.
    pub path: String,
    /// 1-based line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// A whole-file diff. `old_text` is `None` for a new file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDiff {
    /// Absolute path.
    pub path: String,
    /// Text before, or `None` when the file is new.
    pub old_text: Option<String>,
    /// Text after.
    pub new_text: String,
}

/// Status of a tool call as the editor shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// Waiting (for permission or a slot).
    Pending,
    /// Running.
    InProgress,
    /// Finished successfully.
    Completed,
    /// Failed, rejected or cancelled.
    Failed,
}

/// One piece of tool-call content shown in the editor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolContent {
    /// Text (markdown).
    Text {
        /// The text.
        text: String,
    },
    /// A diff.
    Diff(FileDiff),
    /// A client terminal embedded by id.
    Terminal {
        /// The client's terminal id.
        terminal_id: String,
    },
    /// An image (MCP tool results), base64.
    Image {
        /// MIME type.
        mime_type: String,
        /// Base64 data.
        data: String,
    },
    /// A resource (MCP tool results): embedded text, or a link when `text`
    /// is absent.
    Resource {
        /// Its URI.
        uri: String,
        /// Its text, when the result embedded it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
}

/// How a tool call is presented: title, kind, locations and content.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ToolView {
    /// A title a person can scan ("Edit src/main.rs").
    #[serde(default)]
    pub title: String,
    /// Kind, for the icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolKind>,
    /// Files touched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<FileLocation>,
    /// Content blocks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ToolContent>,
}

/// What a tool call produced: what the model sees, the error when it
/// failed, the editor's final view, and what else it feeds the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    /// What the model sees.
    pub output: String,
    /// The error, when it failed.
    pub error: Option<crate::error::ErrorInfo>,
    /// The final presentation.
    pub view: ToolView,
    /// A new plan (`todo_write`).
    pub plan: Option<Vec<crate::plan::PlanEntry>>,
    /// Content the model sees after the tool results (images `read`
    /// loaded).
    pub attachments: Vec<crate::content::UserContent>,
    /// The client terminal that showed a command live (see
    /// `EventData::ToolResult::live_terminal`).
    pub live_terminal: Option<String>,
    /// The background job it started (see `EventData::ToolResult::job`).
    pub job: Option<String>,
    /// Tokens it spent on model requests of its own (a subagent's).
    pub usage: Option<crate::model::Usage>,
}

impl ToolView {
    /// A view that shows only `text` (no title, kind or locations).
    pub fn text(text: impl Into<String>) -> ToolView {
        ToolView {
            content: vec![ToolContent::Text { text: text.into() }],
            ..ToolView::default()
        }
    }
}

impl ToolOutcome {
    /// A successful result.
    pub fn ok(output: String, view: ToolView) -> ToolOutcome {
        ToolOutcome {
            output,
            error: None,
            view,
            plan: None,
            attachments: Vec::new(),
            live_terminal: None,
            job: None,
            usage: None,
        }
    }

    /// A failure the model sees; the editor shows the same text.
    pub fn failed(code: crate::error::ErrorCode, message: impl Into<String>) -> ToolOutcome {
        let message = message.into();
        ToolOutcome {
            output: message.clone(),
            error: Some(crate::error::ErrorInfo {
                code,
                message: message.clone(),
            }),
            view: ToolView::text(message),
            plan: None,
            attachments: Vec::new(),
            live_terminal: None,
            job: None,
            usage: None,
        }
    }

    /// Completed or failed.
    pub fn status(&self) -> ToolStatus {
        if self.error.is_some() {
            ToolStatus::Failed
        } else {
            ToolStatus::Completed
        }
    }
}

/// A running command, live: what a front end may show of it before its
/// result is recorded (never logged). Output is sampled ([`OutputSampler`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandLive {
    /// It started, in `cwd`.
    Started {
        /// Its working directory.
        cwd: String,
    },
    /// New output.
    Output {
        /// The output since the last sample (`…` first when some of it
        /// was not kept).
        delta: String,
        /// The output so far, bounded to the tail its result keeps.
        tail: String,
    },
    /// It ended.
    Exited {
        /// Its exit code, when it exited.
        exit_code: Option<i32>,
        /// The signal that killed it.
        signal: Option<String>,
    },
}

/// Turns a command's growing output into [`CommandLive::Output`] samples:
/// what came since the last one, whole characters only (a character cut
/// by the sample waits for the next).
#[derive(Debug, Default)]
pub struct OutputSampler {
    /// Output bytes sampled so far.
    sent: u64,
}

impl OutputSampler {
    /// The sample of the output now, if any came: `total` bytes came in
    /// all, the last of which `kept` holds; the tail is at most `max_tail`
    /// bytes.
    pub fn sample(&mut self, total: u64, kept: &[u8], max_tail: usize) -> Option<CommandLive> {
        let new = total.saturating_sub(self.sent);
        if new == 0 {
            return None;
        }
        let start = kept
            .len()
            .saturating_sub(usize::try_from(new).unwrap_or(usize::MAX));
        let fresh = &kept[start..];
        let whole = match std::str::from_utf8(fresh) {
            Ok(_) => fresh.len(),
            // An incomplete character at the end waits; an invalid one is
            // shown as a replacement character.
            Err(err) if err.error_len().is_none() => err.valid_up_to(),
            Err(_) => fresh.len(),
        };
        if whole == 0 {
            return None;
        }
        self.sent = total - (fresh.len() - whole) as u64;
        let mut delta = String::from_utf8_lossy(&fresh[..whole]).into_owned();
        if new > kept.len() as u64 {
            delta.insert(0, '…');
        }
        let so_far = String::from_utf8_lossy(&kept[..start + whole]);
        let tail = crate::content::tail_bytes(&so_far, max_tail).to_owned();
        Some(CommandLive::Output { delta, tail })
    }
}

#[cfg(test)]
mod sampler_tests {
    use super::*;

    #[test]
    fn samples_are_the_new_whole_characters() {
        let mut sampler = OutputSampler::default();
        assert_eq!(sampler.sample(0, b"", 10), None);
        let text = "a\u{e9}b".as_bytes(); // é is two bytes
                                          // Cut inside é: only "a" goes.
        assert_eq!(
            sampler.sample(2, &text[..2], 10),
            Some(CommandLive::Output {
                delta: "a".into(),
                tail: "a".into()
            })
        );
        assert_eq!(
            sampler.sample(4, text, 10),
            Some(CommandLive::Output {
                delta: "\u{e9}b".into(),
                tail: "a\u{e9}b".into()
            })
        );
        assert_eq!(sampler.sample(4, text, 10), None);
        // More came than was kept: marked, and the tail is bounded.
        let kept = b"wxyz";
        assert_eq!(
            sampler.sample(20, kept, 2),
            Some(CommandLive::Output {
                delta: "\u{2026}wxyz".into(),
                tail: "yz".into()
            })
        );
    }
}
