//! Custom slash commands: Markdown files whose name is the command and
//! whose body is the prompt, with `$ARGUMENTS` (and `$1` … `$9`) replaced
//! by what the user typed after the name.
//!
//! Found in the project's `.dsh/commands/` and `.claude/commands/`, then
//! in `$DSH_HOME/commands/` (`<name>.md`, top level only); a name found
//! first shadows the same name later, and a built-in command
//! ([`super::commands`]) wins over any file. Optional front matter:
//! `description` (else the body's first line) and `argument-hint`; other
//! keys are ignored. Files are read with [`super::files`]' policy; an
//! invalid one is logged and skipped; [`super::discovery`] finds them
//! all, and keeps them for a session.

use std::path::Path;

use super::files;

/// The compatibility directories searched in a project after `.dsh`.
pub const COMPAT: &[&str] = &[".claude"];
/// A command name's cap, bytes.
const MAX_NAME: usize = 64;
/// A description's cap in the menu, characters.
pub(super) const DESCRIPTION_CHARS: usize = 200;

/// One command found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCommand {
    /// The name (the file's, without `.md`).
    pub name: String,
    /// For the menu.
    pub description: String,
    /// What goes after the name (`argument-hint`).
    pub hint: Option<String>,
    /// The prompt, with its placeholders.
    pub body: String,
}

/// The command `name` from the file at `path` holding `text`; logs why an
/// invalid one is skipped.
pub(super) fn checked(path: &Path, name: &str, text: &str) -> Option<CustomCommand> {
    parse(name, text)
        .map_err(
            |why| tracing::warn!(path = %path.display(), "invalid command file skipped: {why}"),
        )
        .ok()
}

/// A command file's content.
///
/// # Errors
/// Bad front matter, or an empty body.
pub fn parse(name: &str, text: &str) -> Result<CustomCommand, String> {
    let parsed = files::front_matter(text)?;
    let body = parsed.body.trim().to_owned();
    if body.is_empty() {
        return Err("the prompt is empty".to_owned());
    }
    let description = parsed
        .get("description")
        .filter(|description| !description.trim().is_empty())
        .unwrap_or_else(|| body.lines().next().unwrap_or_default());
    Ok(CustomCommand {
        name: name.to_owned(),
        description: files::one_line(description, DESCRIPTION_CHARS),
        hint: parsed
            .get("argument-hint")
            .map(|hint| files::one_line(hint, DESCRIPTION_CHARS))
            .filter(|hint| !hint.is_empty()),
        body,
    })
}

/// A command name: ASCII letters, digits, `-` and `_`, starting with a
/// letter or digit.
pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The prompt `body` with `arguments` in: `$ARGUMENTS` is the whole text,
/// `$1` … `$9` its whitespace-separated words (empty when missing), in
/// one pass (an argument holding `$1` is not expanded again). A body
/// without `$ARGUMENTS` gets non-empty arguments appended on a line of
/// their own, `ARGUMENTS: …`.
pub fn expand(body: &str, arguments: &str) -> String {
    let arguments = arguments.trim();
    let words: Vec<&str> = arguments.split_whitespace().collect();
    let mut out = String::with_capacity(body.len() + arguments.len());
    let mut rest = body;
    let mut whole = false;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(arguments);
            whole = true;
            rest = tail;
        } else if let Some(digit @ b'1'..=b'9') = after.bytes().next() {
            let index = usize::from(digit - b'1');
            out.push_str(words.get(index).copied().unwrap_or_default());
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if !whole && !arguments.is_empty() {
        out.push_str(&format!("\n\nARGUMENTS: {arguments}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_substituted_once() {
        assert_eq!(
            expand(
                "Fix issue #$1 ($2): $ARGUMENTS. $3 costs $",
                "42 high  now please"
            ),
            "Fix issue #42 (high): 42 high  now please. now costs $"
        );
        assert_eq!(
            expand("Say $1 and $2", "$2 x"),
            "Say $2 and x\n\nARGUMENTS: $2 x"
        );
        assert_eq!(expand("Review the diff", ""), "Review the diff");
        assert_eq!(expand("Review $ARGUMENTS", ""), "Review ");
    }

    #[test]
    fn front_matter_is_optional() {
        let plain = parse("review", "Review the staged diff.\nBe brief.\n").unwrap();
        assert_eq!(plain.description, "Review the staged diff.");
        assert_eq!(plain.hint, None);
        let full = parse(
            "fix",
            "---\ndescription: Fix an issue\nargument-hint: <issue> [priority]\nmodel: x\n---\nFix #$1\n",
        )
        .unwrap();
        assert_eq!(full.description, "Fix an issue");
        assert_eq!(full.hint.as_deref(), Some("<issue> [priority]"));
        assert_eq!(full.body, "Fix #$1");
        assert!(parse("x", "---\ndescription: only\n---\n  \n").is_err());
    }
}
