//! What of a logged event is indexed: its searchable text and whether it
//! is a model-visible (surface) event; and the snippet a hit shows.
//!
//! Events are read as plain JSON, not as `EventData`: an index built by
//! this version reads the events of a newer one too (their strings are
//! indexed as they are), and a line it cannot read is skipped, never a
//! reason to refuse a log.

use serde_json::Value;

/// At most this much of one event's text is indexed (a 1 MB tool output
/// is found by its first 64 KiB; `session_event_read` returns it whole).
pub(super) const MAX_TEXT: usize = 64 * 1024;

/// One event line as the index sees it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Indexed {
    pub seq: u64,
    pub time: u64,
    pub kind: String,
    /// A model-visible event (`user/message`, `assistant/message`,
    /// `tool/result`, `compaction/summary`, and what the model is told of
    /// a `job/end` or an `undo`).
    pub surface: bool,
    /// Its searchable text (empty: nothing to index).
    pub text: String,
    /// A `compaction/summary`: the seqs it replaced.
    pub replaces: Option<(u64, u64)>,
    /// A `session/title`: the title.
    pub title: Option<String>,
}

/// Reads one event line; `None` when it is not an event.
pub(super) fn event(line: &[u8]) -> Option<Indexed> {
    let value: Value = serde_json::from_slice(line).ok()?;
    let seq = value.get("seq")?.as_u64()?;
    let time = value.get("time").and_then(Value::as_u64).unwrap_or(0);
    let kind = value.get("type")?.as_str()?.to_owned();
    let data = value.get("data").unwrap_or(&Value::Null);
    let mut text = Text::default();
    let mut replaces = None;
    let mut title = None;
    let surface = matches!(
        kind.as_str(),
        "user/message"
            | "assistant/message"
            | "tool/result"
            | "compaction/summary"
            | "job/end"
            | "undo"
    );
    match kind.as_str() {
        "user/message" => {
            if let Some(items) = data.get("content").and_then(Value::as_array) {
                for item in items {
                    for key in ["text", "name", "uri"] {
                        text.field(item, key);
                    }
                }
            }
        }
        "assistant/message" => {
            text.field(data, "text");
            text.field(data, "reasoning");
            if let Some(calls) = data.get("tool_calls").and_then(Value::as_array) {
                for call in calls {
                    text.field(call, "name");
                    text.field(call, "arguments");
                }
            }
        }
        "tool/call" => {
            text.field(data, "name");
            text.field(data, "arguments");
        }
        "tool/result" => {
            text.field(data, "output");
            if let Some(error) = data.get("error") {
                text.field(error, "message");
            }
        }
        "job/end" => text.field(data, "summary"),
        "session/title" => {
            title = data.get("title").and_then(Value::as_str).map(str::to_owned);
            text.field(data, "title");
        }
        "compaction/summary" => {
            text.field(data, "summary");
            let start = data.get("start").and_then(Value::as_u64);
            let end = data.get("end").and_then(Value::as_u64);
            replaces = start.zip(end);
        }
        "agent/notice" => text.field(data, "text"),
        "undo" => text.field(data, "summary"),
        "goal/change" => {
            if let Some(goal) = data.get("goal") {
                text.field(goal, "objective");
                text.field(goal, "blocked_reason");
            }
        }
        "plan" => {
            if let Some(entries) = data.get("entries").and_then(Value::as_array) {
                for entry in entries {
                    text.field(entry, "content");
                }
            }
        }
        "plan/decision" => text.field(data, "feedback"),
        // What steers the model, repeated in every session of a
        // workspace, and what has no words: not indexed.
        "context/instructions"
        | "context/skills"
        | "session/config"
        | "turn/start"
        | "turn/end"
        | "checkpoint"
        | "permission/decision"
        | "permission/rule"
        | "compaction/start"
        | "compaction/prune"
        | "llm/retry"
        | "hook/consent" => {}
        // Any other event (a newer version's too): its strings.
        _ => text.strings(data, 0),
    }
    Some(Indexed {
        seq,
        time,
        kind,
        surface,
        text: text.0,
        replaces,
        title,
    })
}

/// Text gathered from an event, at most [`MAX_TEXT`] bytes.
#[derive(Default)]
struct Text(String);

impl Text {
    fn push(&mut self, piece: &str) {
        let room = MAX_TEXT.saturating_sub(self.0.len());
        if room == 0 || piece.is_empty() {
            return;
        }
        if !self.0.is_empty() {
            self.0.push('\n');
        }
        self.0
            .push_str(dsh_protocol::content::head_bytes(piece, room));
    }

    fn field(&mut self, value: &Value, key: &str) {
        if let Some(text) = value.get(key).and_then(Value::as_str) {
            self.push(text);
        }
    }

    /// Every string under `value` but ids and encoded data.
    fn strings(&mut self, value: &Value, depth: usize) {
        if depth > 8 {
            return;
        }
        match value {
            Value::String(text) => self.push(text),
            Value::Array(items) => {
                for item in items {
                    self.strings(item, depth + 1);
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    if !matches!(
                        key.as_str(),
                        "call_id" | "id" | "job_id" | "data" | "mime_type" | "provider_id"
                    ) {
                        self.strings(item, depth + 1);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The terms of a literal query, lower-cased: its words as separated by
/// white space (`parse_header` is one term), each of which must occur.
/// Terms with no letter or digit (`--`) find nothing and are dropped.
pub(super) fn words(query: &str) -> Vec<String> {
    query
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|word| word.chars().any(char::is_alphanumeric))
        .map(str::to_lowercase)
        .collect()
}

/// The FTS5 expression of a literal query: each term a quoted string (a
/// phrase of its tokens: `parse_header` is `parse` then `header`; no
/// operator, column filter or prefix is ever read from the user's text),
/// all required.
pub(super) fn fts_expression(words: &[String]) -> String {
    words
        .iter()
        .map(|word| format!("\"{}\"", word.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// The text around the first word of `words` found in `text`, on one
/// line, at most `max` characters (an ellipsis marks a cut).
pub(super) fn snippet(text: &str, words: &[String], max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect();
    // Lower-cased, with the character of `flat` each byte comes from
    // (lower-casing may make one character several).
    let mut lower = String::with_capacity(flat.len());
    let mut origin = Vec::with_capacity(flat.len());
    for (index, c) in flat.chars().enumerate() {
        for low in c.to_lowercase() {
            lower.push(low);
            origin.resize(lower.len(), index);
        }
    }
    let at = words
        .iter()
        .filter_map(|word| lower.find(word.as_str()))
        .min()
        .map_or(0, |byte| origin[byte]);
    let total = flat.chars().count();
    let start = at.saturating_sub(max / 3).min(total.saturating_sub(max));
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    let room = max.saturating_sub(usize::from(start > 0) + 1);
    out.extend(flat.chars().skip(start).take(room));
    if start + room < total {
        out.push('…');
    }
    let squeezed = out.split(' ').filter(|w| !w.is_empty()).collect::<Vec<_>>();
    squeezed.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_give_their_words_and_surface() {
        let line = br#"{"seq":4,"time":9,"type":"user/message","data":{"turn":1,"content":[{"type":"text","text":"Fix the flaky parser"},{"type":"image","mime_type":"image/png","data":"QUJD"}]}}"#;
        let event = event(line).unwrap();
        assert_eq!((event.seq, event.time, event.surface), (4, 9, true));
        assert_eq!(event.text, "Fix the flaky parser");
        let line = br#"{"seq":5,"time":9,"type":"compaction/summary","data":{"start":2,"end":4,"summary":"Earlier: parser"}}"#;
        assert_eq!(super::event(line).unwrap().replaces, Some((2, 4)));
        let line = br#"{"seq":6,"time":9,"type":"future/thing","ignorable":true,"data":{"id":"x1","note":"zebra","nested":{"more":["quokka"]}}}"#;
        let event = super::event(line).unwrap();
        assert_eq!(
            (event.text.as_str(), event.surface),
            ("zebra\nquokka", false)
        );
        assert!(super::event(b"not json").is_none());
        assert!(super::event(br#"{"seq":1}"#).is_none());
    }

    #[test]
    fn text_is_capped() {
        let big = "a".repeat(MAX_TEXT * 2);
        let line =
            format!(r#"{{"seq":1,"time":1,"type":"tool/result","data":{{"output":"{big}"}}}}"#);
        assert_eq!(event(line.as_bytes()).unwrap().text.len(), MAX_TEXT);
    }

    #[test]
    fn queries_are_literal() {
        let words = words("NEAR(a b) \"x\" OR col:* -- parse_header\u{0}\u{1b}[31m");
        assert_eq!(
            words,
            [
                "near(a",
                "b)",
                "\"x\"",
                "or",
                "col:*",
                "parse_header",
                "[31m"
            ]
        );
        assert_eq!(fts_expression(&words[2..4]), r#""""x""" AND "or""#);
        assert!(super::words(" -- ").is_empty());
    }

    #[test]
    fn snippets_center_on_the_match() {
        let text = format!("{} needle {}", "left ".repeat(100), "right ".repeat(100));
        let cut = snippet(&text, &["needle".to_owned()], 60);
        assert!(
            cut.contains("needle") && cut.starts_with('…') && cut.ends_with('…'),
            "{cut}"
        );
        assert!(cut.chars().count() <= 60, "{cut}");
        assert_eq!(
            snippet("short\ntext", &["zzz".to_owned()], 60),
            "short text"
        );
        // `İ` lower-cases to two characters: the window stays on the match.
        let text = format!("{}needle{}", "İ".repeat(200), "x".repeat(200));
        assert!(snippet(&text, &["needle".to_owned()], 30).contains("needle"));
    }
}
