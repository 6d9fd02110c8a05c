//! The session's permission mode: how much the agent may do without
//! asking. Logged as the `mode` setting; every front end shows it.

/// Session permission mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Reads inside roots only.
    ReadOnly,
    /// Study and propose a plan: reads as in `Ask`; no edits, commands or
    /// MCP tools until the user approves the plan (`exit_plan_mode`).
    Plan,
    /// Ask for writes, commands and outside access.
    Ask,
    /// Writes inside roots are automatic.
    AcceptEdits,
    /// No prompts.
    FullAccess,
}

impl Mode {
    /// All modes, in menu order.
    pub const ALL: [Mode; 5] = [
        Mode::ReadOnly,
        Mode::Plan,
        Mode::Ask,
        Mode::AcceptEdits,
        Mode::FullAccess,
    ];

    /// The option value id.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::Plan => "plan",
            Mode::Ask => "ask",
            Mode::AcceptEdits => "accept-edits",
            Mode::FullAccess => "full-access",
        }
    }

    /// Parses an option value id.
    pub fn parse(value: &str) -> Option<Mode> {
        Self::ALL.into_iter().find(|mode| mode.as_str() == value)
    }

    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::ReadOnly => "Read only",
            Mode::Plan => "Plan",
            Mode::Ask => "Ask",
            Mode::AcceptEdits => "Accept edits",
            Mode::FullAccess => "Full access",
        }
    }

    /// One-line description.
    pub fn description(self) -> &'static str {
        match self {
            Mode::ReadOnly => "Reads inside the workspace only; no edits, no commands",
            Mode::Plan => {
                "Studies the code and proposes a plan; nothing changes until you approve it"
            }
            Mode::Ask => "Reads are free; edits, commands and outside access ask first",
            Mode::AcceptEdits => "Edits inside the workspace are automatic; commands ask",
            Mode::FullAccess => "Everything runs without asking",
        }
    }
}
