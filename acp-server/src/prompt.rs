//! The system prompt. It is a pure function of the session header, the
//! permission mode (folded from the log's `session/config` events) and the
//! dsh version, so the exact text the model saw can be rebuilt from the
//! log.

use dsh_protocol::log::SessionHeader;

use crate::permission::Mode;

/// What plan mode adds to the system prompt.
const PLAN_MODE: &str = "\n# Plan mode\n\
Plan mode is on: the user wants a plan before any change. Study the code with the \
read-only tools (read, glob, grep, lsp; todo_write to outline the steps). Do not try to \
edit files or run commands: they are refused until the plan is approved. When you \
understand the work, submit the complete plan with exit_plan_mode — markdown, starting \
with a # heading that names it, listing the files you will change and how you will check \
the result. If the user asks to keep planning, revise the plan with their feedback and \
submit it again.\n";

/// Builds the system prompt for a session in `mode`.
pub fn system_prompt(header: &SessionHeader, mode: Mode) -> String {
    let date = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(header.created_at),
    )
    .to_string();
    let date = date.get(..10).unwrap_or(&date);
    let mut text = String::from(
        "You are dsh, a coding agent working inside the user's editor. Be direct and precise. \
         Prefer small, verifiable steps. When you change code, say what you changed and why. \
         If a request is ambiguous, state your assumption and proceed.\n\n",
    );
    text.push_str("# Environment\n");
    text.push_str(&format!("- Working directory: {}\n", header.cwd));
    for root in &header.roots {
        text.push_str(&format!("- Additional workspace root: {root}\n"));
    }
    text.push_str(&format!(
        "- Platform: {} {}\n",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));
    text.push_str(&format!("- Session started: {date}\n"));
    if mode == Mode::Plan {
        text.push_str(PLAN_MODE);
    }
    text
}
