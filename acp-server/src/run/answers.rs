//! `dsh run --answers`: the answers given to the model's questions
//! (`ask_user_question`) when no one is there to answer them.

use std::collections::BTreeMap;

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

/// `--answers`' value: JSON, or `@FILE` holding it.
pub(super) fn parse_answers(value: &str) -> Result<BTreeMap<String, GivenAnswer>, String> {
    let text = match value.strip_prefix('@') {
        Some(path) => {
            std::fs::read_to_string(path).map_err(|err| format!("cannot read {path}: {err}"))?
        }
        None => value.to_owned(),
    };
    serde_json::from_str(&text).map_err(|err| {
        format!("give an object of question ids to \"label\", [\"a\", \"b\"] or {{\"custom\": \"text\"}} ({err})")
    })
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
        assert!(parse_answers("[1]")
            .unwrap_err()
            .contains("give an object of question ids"));
        assert!(parse_answers("@/nonexistent/answers.json")
            .unwrap_err()
            .contains("cannot read"));
    }
}
