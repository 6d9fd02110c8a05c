//! `subagent` (seeds: `dsh-tool-subagent`): delegates a self-contained
//! task to a child session with a fresh conversation. The call is parsed
//! and presented here; the turn runs the child (`turn/subagent.rs`), since
//! a child is a session of its own.

use dsh_protocol::tool::{ToolKind, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use super::Refusal;

/// The seeds' description.
pub const DESCRIPTION: &str = "Delegate a self-contained task to a subagent (an independent agent working in its own context), to offload focused, independent work such as research, a scoped implementation or an analysis without using up the current conversation's context. The subagent returns its result but not its intermediate steps. Give it a complete, self-contained prompt, since it cannot see the current conversation. The call waits for the result by default. Set run_in_background: true to get a job id instead; collect the result with job_output and stop the task with job_kill. A background subagent stays after its answer: the result gives its agent id, for send_message (more work, each answer a job of its own), interrupt_agent and list_agents.";
/// Without background jobs (`[jobs] enabled = false`).
pub const DESCRIPTION_NO_JOBS: &str = "Delegate a self-contained task to a subagent (an independent agent working in its own context), to offload focused, independent work such as research, a scoped implementation or an analysis without using up the current conversation's context. The subagent returns its result but not its intermediate steps. Give it a complete, self-contained prompt, since it cannot see the current conversation. The call waits for the result by default.";

/// The call's arguments.
#[derive(Debug, Clone, Deserialize)]
pub struct SubagentArgs {
    /// For display.
    pub description: String,
    /// The child's first user message.
    pub prompt: String,
    /// Run as a background job.
    #[serde(default)]
    pub run_in_background: bool,
}

/// `[subagents]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentSettings {
    /// Offer `subagent`.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The children's model (default: the parent's current one).
    #[serde(default)]
    pub model: Option<String>,
    /// How deep subagents may nest: 3 (the default, as the design says)
    /// lets a session's children and grandchildren start children of
    /// their own, the great-grandchildren none; 1 allows children only;
    /// 0 turns subagents off.
    #[serde(default = "three")]
    pub max_depth: u32,
    /// A child's step limit (default: the session's `max_steps`).
    #[serde(default)]
    pub max_steps: Option<u64>,
    /// Background (continuable) children a session keeps at once, each a
    /// live session; past it the oldest idle one is closed for a new one,
    /// and none is started while all of them work.
    #[serde(default = "sixteen")]
    pub max_kept: usize,
}

fn yes() -> bool {
    true
}
fn three() -> u32 {
    3
}
fn sixteen() -> usize {
    16
}

impl Default for SubagentSettings {
    fn default() -> Self {
        SubagentSettings {
            enabled: true,
            model: None,
            max_depth: three(),
            max_steps: None,
            max_kept: sixteen(),
        }
    }
}

impl SubagentSettings {
    /// Whether a session `depth` deep (0: top level) may start children.
    pub fn may_delegate(&self, depth: u32) -> bool {
        self.enabled && depth < self.max_depth
    }
}

/// Checks the arguments.
///
/// # Errors
/// An empty description or prompt.
pub fn validate(args: &SubagentArgs, jobs: bool) -> Result<(), Refusal> {
    if args.prompt.trim().is_empty() {
        return Err(Refusal::new(
            ErrorCode::InvalidToolArgs,
            "The subagent's prompt is empty: give it the complete task, with everything it needs to know.",
        ));
    }
    if args.run_in_background && !jobs {
        return Err(Refusal::new(
            ErrorCode::InvalidToolArgs,
            "Background jobs are off in this session: call subagent without run_in_background.",
        ));
    }
    Ok(())
}

/// The pending view: a `think` call titled with the description.
pub fn present(args: &SubagentArgs) -> ToolView {
    ToolView {
        title: args.described().to_owned(),
        kind: Some(ToolKind::Think),
        ..ToolView::default()
    }
}

impl SubagentArgs {
    /// What the call is shown as: its description, or "Subagent".
    pub fn described(&self) -> &str {
        match self.description.trim() {
            "" => "Subagent",
            description => description,
        }
    }
}
