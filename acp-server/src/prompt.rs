//! The system prompt. It is a pure function of the session header and the
//! dsh version, so the exact text the model saw can be rebuilt from the log.

use dsh_protocol::log::SessionHeader;

/// Builds the system prompt for a session.
pub fn system_prompt(header: &SessionHeader) -> String {
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
    text
}
