//! The system prompt. It is a pure function of the session header, the
//! permission mode (folded from the log's `session/config` events) and the
//! dsh version, so the exact text the model saw can be rebuilt from the
//! log.

use dsh_protocol::log::SessionHeader;

use dsh_protocol::Mode;

/// The system prompt of the side request that names a session.
pub const TITLE_PROMPT: &str = "You name coding sessions. Reply with a title for the session the user's first message below starts: at most six words, in the message's language, no quotes, no final punctuation, nothing else.";

/// The model's answer as a title: its first non-empty line without
/// quotes, heading marks or a final full stop; `None` when empty or over
/// `max_bytes`.
pub fn clean_title(answer: &str, max_bytes: usize) -> Option<String> {
    let line = answer
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    let title = line
        .trim_start_matches('#')
        .trim()
        .trim_matches(|c| matches!(c, '"' | '\'' | '`' | '*' | '“' | '”'))
        .trim_end_matches('.')
        .trim();
    let title = dsh_protocol::content::visible_title(title, 200);
    (!title.is_empty() && title.len() <= max_bytes).then_some(title)
}

/// What plan mode adds to the system prompt.
const PLAN_MODE: &str = "\n# Plan mode\n\
Plan mode is on: the user wants a plan before any change. Study the code with the \
read-only tools (read, glob, grep, lsp; todo_write to outline the steps). Do not try to \
edit files: edits are refused until the plan is approved. A command runs only read-only \
(in the kernel sandbox, where this machine has one) and after the user agrees. When you \
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
