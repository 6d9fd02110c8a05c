//! Questions for the user (`ask_user_question`): what the model asks, and
//! the answers — as every front end gives them and the log keeps them
//! (`question/decision`).
//!
//! One answer per question id: `selected` holds the option labels chosen
//! (a label is both what the user sees and what the model gets back),
//! `custom` a free-text answer ("Other"). For a single-select question
//! `custom` replaces the selection; for a multi-select one it may
//! accompany it. No selection and no text: the question was skipped.

use serde::{Deserialize, Serialize};

/// One choice a question offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionOption {
    /// What the user sees, and the model gets back when it is chosen.
    pub label: String,
    /// One sentence on its tradeoff or impact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One question. The model writes `multi_select` (the tool's schema);
/// dsh's own wires write `multiSelect`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserQuestion {
    /// Stable id, echoed in the answer.
    pub id: String,
    /// The question.
    pub question: String,
    /// A short heading ("Confirm", "Choose mode").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// The choices; none: a free-text question.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<QuestionOption>,
    /// Several options may be chosen.
    #[serde(
        default,
        alias = "multi_select",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub multi_select: bool,
}

impl UserQuestion {
    /// Its heading, or else the question itself.
    pub fn title(&self) -> &str {
        match self.header.as_deref().map(str::trim) {
            Some(header) if !header.is_empty() => header,
            _ => &self.question,
        }
    }

    /// Whether `label` is one of its options.
    pub fn offers(&self, label: &str) -> bool {
        self.options.iter().any(|option| option.label == label)
    }
}

/// Why an answer is partial or missing, when the front end knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerNote {
    /// A multi-select question asked as a single choice (the editor has
    /// no forms: it was asked as a permission prompt).
    OneChoice,
    /// A free-text question the editor could not ask (no forms).
    NotAsked,
    /// No one is there to answer (`dsh run` without an answer for it, an
    /// SDK session whose approvals are not `client`).
    NoUser,
}

/// The answer to one question.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionAnswer {
    /// The question's id.
    pub id: String,
    /// The option labels chosen.
    #[serde(default)]
    pub selected: Vec<String>,
    /// Free text ("Other").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<String>,
    /// Why it is partial or missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<AnswerNote>,
}

impl QuestionAnswer {
    /// No selection and no text.
    pub fn is_skipped(&self) -> bool {
        self.selected.is_empty() && self.custom.is_none()
    }

    /// The answer `note` for question `id`: nothing chosen or typed.
    pub fn unanswered(id: &str, note: Option<AnswerNote>) -> QuestionAnswer {
        QuestionAnswer {
            id: id.to_owned(),
            note,
            ..QuestionAnswer::default()
        }
    }
}

/// How a call's questions were answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionOutcome {
    /// Answered (each question answered or skipped).
    Answered,
    /// The user declined to answer.
    Declined,
    /// The question was cancelled (so is the turn).
    Cancelled,
    /// No answer could be had (no client, a broken channel).
    Unavailable,
    /// No answer within the call's wait (`[questions] timeout_s`): the
    /// question stays open, and a later answer is logged then (another
    /// `question/decision` for the call) and given to the model as a user
    /// message before its next step.
    Pending,
}

/// `given` as exactly one answer per question, in the questions' order: a
/// question with no answer is skipped, blank text is no text, and a
/// single-select question's text replaces its selection.
///
/// # Errors
/// An answer to no question, two answers to one, a label the question
/// does not offer, or several labels for a single-select question: a
/// message for whoever answered.
pub fn settle(
    questions: &[UserQuestion],
    given: Vec<QuestionAnswer>,
) -> Result<Vec<QuestionAnswer>, String> {
    let mut answers: Vec<Option<QuestionAnswer>> = vec![None; questions.len()];
    for mut answer in given {
        let Some(at) = questions.iter().position(|q| q.id == answer.id) else {
            let ids: Vec<&str> = questions.iter().map(|q| q.id.as_str()).collect();
            return Err(format!(
                "no question has the id {:?}; the ids are {ids:?}",
                answer.id
            ));
        };
        if answers[at].is_some() {
            return Err(format!("question {:?} is answered twice", answer.id));
        }
        let question = &questions[at];
        if let Some(label) = answer.selected.iter().find(|l| !question.offers(l)) {
            let offered: Vec<&str> = question.options.iter().map(|o| o.label.as_str()).collect();
            return Err(format!(
                "question {:?} offers no option {label:?}; its options are {offered:?} (free text goes in `custom`)",
                question.id
            ));
        }
        answer.selected.dedup();
        if !question.multi_select && answer.selected.len() > 1 {
            return Err(format!(
                "question {:?} takes one option, not {}",
                question.id,
                answer.selected.len()
            ));
        }
        answer.custom = answer.custom.filter(|text| !text.trim().is_empty());
        if answer.custom.is_some() && !question.multi_select {
            answer.selected.clear();
        }
        answers[at] = Some(answer);
    }
    Ok(answers
        .into_iter()
        .zip(questions)
        .map(|(answer, question)| {
            answer.unwrap_or_else(|| QuestionAnswer::unanswered(&question.id, None))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(id: &str, labels: &[&str], multi_select: bool) -> UserQuestion {
        UserQuestion {
            id: id.into(),
            question: format!("{id}?"),
            header: None,
            options: labels
                .iter()
                .map(|label| QuestionOption {
                    label: (*label).into(),
                    description: None,
                })
                .collect(),
            multi_select,
        }
    }

    fn answer(id: &str, selected: &[&str], custom: Option<&str>) -> QuestionAnswer {
        QuestionAnswer {
            id: id.into(),
            selected: selected.iter().map(|s| (*s).into()).collect(),
            custom: custom.map(Into::into),
            note: None,
        }
    }

    #[test]
    fn answers_are_settled_one_per_question_in_order() {
        let questions = [
            question("db", &["Postgres", "SQLite"], false),
            question("name", &[], false),
            question("extras", &["a", "b"], true),
            question("style", &["x"], false),
        ];
        let settled = settle(
            &questions,
            vec![
                answer("extras", &["a", "b"], Some("c")),
                answer("db", &["SQLite"], Some("  ")),
                answer("style", &["x"], Some("my own")),
            ],
        )
        .unwrap();
        assert_eq!(
            settled,
            [
                answer("db", &["SQLite"], None),
                answer("name", &[], None),
                answer("extras", &["a", "b"], Some("c")),
                // Single-select: the text replaces the selection.
                answer("style", &[], Some("my own")),
            ]
        );
        assert!(settled[1].is_skipped() && !settled[0].is_skipped());
    }

    #[test]
    fn answers_that_fit_no_question_are_refused() {
        let questions = [question("db", &["Postgres", "SQLite"], false)];
        let refused = |given| settle(&questions, given).unwrap_err();
        assert!(refused(vec![answer("nope", &[], None)]).contains("no question has the id"));
        assert!(refused(vec![answer("db", &["MySQL"], None)]).contains("offers no option"));
        assert!(refused(vec![answer("db", &["Postgres", "SQLite"], None)]).contains("one option"));
        assert!(refused(vec![answer("db", &[], None), answer("db", &[], None)]).contains("twice"));
    }

    #[test]
    fn the_model_writes_multi_select_and_dsh_writes_multiselect() {
        let parsed: UserQuestion = serde_json::from_str(
            r#"{"id":"a","question":"A?","multi_select":true,"options":[{"label":"x","extra":1}],"other":2}"#,
        )
        .unwrap();
        assert!(parsed.multi_select);
        assert_eq!(
            serde_json::to_value(&parsed).unwrap(),
            serde_json::json!({"id":"a","question":"A?","options":[{"label":"x"}],"multiSelect":true})
        );
        assert_eq!(parsed.title(), "A?");
    }
}
