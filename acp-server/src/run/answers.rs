//! `dsh run --answers`: the answers given to the model's questions
//! (`ask_user_question`) when no one is there to answer them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dsh_protocol::question::{AnswerNote, QuestionAnswer, UserQuestion};

/// An answer `--answers` gives a question: a label (or free text, when the
/// question offers no such label), labels, or free text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(untagged)]
pub enum GivenAnswer {
    /// `"label"`.
    One(String),
    /// `["a", "b"]`.
    Several(Vec<String>),
    /// `{"custom": "…"}`.
    Custom {
        /// The text.
        custom: String,
    },
}

/// The most `--answers @FILE` reads: answers to a few questions are a few
/// hundred bytes.
pub(super) const MAX_ANSWERS_BYTES: u64 = 1 << 20;

/// `--answers`' value: JSON, or `@FILE` holding it. A file is read as dsh
/// reads the workspace's files: one the path places inside `root` (the
/// run's directory) is opened beneath it, so a link in the repository
/// cannot lead the read out of it; a path the user wrote outside `root` is
/// theirs to follow. Only a regular file of at most [`MAX_ANSWERS_BYTES`].
/// Errors never quote the file: it may hold anything.
pub(super) fn parse_answers(
    value: &str,
    root: &Path,
) -> Result<BTreeMap<String, GivenAnswer>, String> {
    let text = match value.strip_prefix('@') {
        Some(path) => read_answers_file(Path::new(path), root)
            .map_err(|err| format!("--answers @{path}: {err}"))?,
        None => value.to_owned(),
    };
    serde_json::from_str(&text).map_err(|err| {
        let what = match err.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                "not valid JSON"
            }
            _ => "not answers",
        };
        format!(
            "give an object of question ids to \"label\", [\"a\", \"b\"] or {{\"custom\": \"text\"}} ({what} at line {}, column {})",
            err.line(),
            err.column()
        )
    })
}

/// The text of the answers file `given` (see [`parse_answers`]).
fn read_answers_file(given: &Path, root: &Path) -> Result<String, String> {
    let here = std::env::current_dir().map_err(|err| format!("no current directory: {err}"))?;
    let full = crate::beneath::lexical(&here.join(given));
    let file = match beneath_root(&full, root) {
        Some(relative) => crate::beneath::open_beneath(root, &relative)
            .map(|(file, _)| file)
            .map_err(|err| match err {
                crate::beneath::FsError::Escapes(_) | crate::beneath::FsError::Symlink(_) => {
                    "a symbolic link leads it out of the workspace; give the file's own path"
                        .to_owned()
                }
                crate::beneath::FsError::NotRegular(_, kind) => {
                    format!("{kind}; only a regular file can be read")
                }
                crate::beneath::FsError::Io(_, err) => err.to_string(),
                other => other.to_string(),
            })?,
        None => open_outside(&full)?,
    };
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, MAX_ANSWERS_BYTES + 1),
        &mut bytes,
    )
    .map_err(|err| err.to_string())?;
    if bytes.len() as u64 > MAX_ANSWERS_BYTES {
        return Err(format!(
            "larger than {} MiB, the most --answers reads",
            MAX_ANSWERS_BYTES >> 20
        ));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())
}

/// Where `full` is below `root`, as a path relative to it: by the path as
/// written, or because its directory is (a path through a link to the
/// workspace).
fn beneath_root(full: &Path, root: &Path) -> Option<PathBuf> {
    if let Ok(relative) = full.strip_prefix(root) {
        return Some(relative.to_path_buf());
    }
    let name = full.file_name()?;
    let dir = dunce::canonicalize(full.parent()?).ok()?;
    Some(dir.strip_prefix(root).ok()?.join(name))
}

/// Opens a file the user named outside the workspace: links followed, a
/// FIFO never waited on (Unix; Windows has none in its file system), a
/// regular file only.
fn open_outside(path: &Path) -> Result<std::fs::File, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path).map_err(|err| err.to_string())?;
    let metadata = file.metadata().map_err(|err| err.to_string())?;
    if !metadata.is_file() {
        let kind = crate::beneath::kind_name(metadata.file_type());
        return Err(format!("{kind}; only a regular file can be read"));
    }
    Ok(file)
}

/// The answers `given` makes to `questions`: a label a question offers is
/// chosen, anything else is its free text; a question `given` has nothing
/// for (or every question, without `--answers`) is told no one is there.
pub(super) fn answers_to(
    questions: &[UserQuestion],
    given: Option<&BTreeMap<String, GivenAnswer>>,
) -> Vec<QuestionAnswer> {
    questions
        .iter()
        .map(|question| {
            let texts = match given.and_then(|given| given.get(&question.id)) {
                None => return QuestionAnswer::unanswered(&question.id, Some(AnswerNote::NoUser)),
                Some(GivenAnswer::One(text)) => vec![text.clone()],
                Some(GivenAnswer::Several(texts)) => texts.clone(),
                Some(GivenAnswer::Custom { custom }) => {
                    return QuestionAnswer {
                        id: question.id.clone(),
                        custom: Some(custom.clone()),
                        ..QuestionAnswer::default()
                    }
                }
            };
            let (mut selected, typed): (Vec<String>, Vec<String>) =
                texts.into_iter().partition(|text| question.offers(text));
            if !question.multi_select {
                selected.truncate(1);
            }
            QuestionAnswer {
                id: question.id.clone(),
                selected,
                custom: (!typed.is_empty()).then(|| typed.join("; ")),
                note: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_labels_free_text_or_no_one() {
        let question = |id: &str, multi_select| UserQuestion {
            id: id.into(),
            question: format!("{id}?"),
            header: None,
            options: ["a", "b"]
                .into_iter()
                .map(|label| dsh_protocol::question::QuestionOption {
                    label: label.into(),
                    description: None,
                })
                .collect(),
            multi_select,
        };
        let questions = [
            question("one", false),
            question("many", true),
            question("typed", false),
            question("custom", false),
            question("missing", false),
            question("first", false),
        ];
        let given = parse_answers(
            r#"{"one": "b", "many": ["a", "b", "c"], "typed": "my own", "custom": {"custom": "a"}, "first": ["b", "a"], "other_call": "x"}"#,
            Path::new("/"),
        )
        .unwrap();
        let answers = answers_to(&questions, Some(&given));
        let summary: Vec<(Vec<String>, Option<String>, Option<AnswerNote>)> = answers
            .into_iter()
            .map(|answer| (answer.selected, answer.custom, answer.note))
            .collect();
        let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            summary,
            [
                (strings(&["b"]), None, None),
                (strings(&["a", "b"]), Some("c".to_owned()), None),
                (Vec::new(), Some("my own".to_owned()), None),
                (Vec::new(), Some("a".to_owned()), None),
                (Vec::new(), None, Some(AnswerNote::NoUser)),
                (strings(&["b"]), None, None),
            ]
        );
        assert!(answers_to(&questions, None)
            .iter()
            .all(|answer| answer.note == Some(AnswerNote::NoUser)));
        assert!(parse_answers("[1]", Path::new("/"))
            .unwrap_err()
            .contains("give an object of question ids"));
        let err = parse_answers("@/nonexistent/answers.json", Path::new("/tmp")).unwrap_err();
        assert!(
            err.starts_with("--answers @/nonexistent/answers.json: ")
                && (err.contains("No such file") || err.contains("not found")),
            "{err}"
        );
    }

    #[test]
    fn errors_never_quote_what_the_answers_hold() {
        for text in [
            r#""-----BEGIN d5h-secret""#,
            "12345",
            r#"{"a": {"b": "d5h-secret"}}"#,
            r#"{"a": "d5h-secret"} trailing"#,
            "d5h-secret",
        ] {
            let err = parse_answers(text, Path::new("/")).unwrap_err();
            assert!(
                !err.contains("d5h-secret") && !err.contains("12345"),
                "{err}"
            );
            assert!(err.contains("at line 1, column"), "{err}");
        }
    }

    #[test]
    fn paths_are_taken_as_written() {
        assert_eq!(
            crate::beneath::lexical(Path::new("/a/./b/../c")),
            Path::new("/a/c")
        );
        assert_eq!(
            crate::beneath::lexical(Path::new("/a/../../c")),
            Path::new("/c")
        );
        assert_eq!(
            beneath_root(Path::new("/w/x/answers.json"), Path::new("/w")),
            Some(PathBuf::from("x/answers.json"))
        );
        assert_eq!(
            beneath_root(Path::new("/nonexistent/a"), Path::new("/w")),
            None
        );
    }
}
