//! `ask_user_question`: the model asks the user one or more questions —
//! a choice among options (one or several) or free text — and waits for
//! the answers. The schema and description are the seeds'. The turn runs
//! it ([`crate::turn`]): it needs the front end (the asking) and the log
//! (`question/decision`); here are the arguments, how the call is shown
//! while it waits and once answered, and what the model is told.

use dsh_protocol::question::{AnswerNote, QuestionAnswer, QuestionOutcome, UserQuestion};
use dsh_protocol::tool::{ToolContent, ToolKind, ToolOutcome, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;

pub const DESCRIPTION: &str = "Ask the user concise questions when you need a confirmation, a choice or missing information before continuing. Send one or more questions, each with a stable id that is echoed back unchanged in the answer.";

/// At most this many questions in one call.
const MAX_QUESTIONS: usize = 20;

/// At most this many options per question.
const MAX_OPTIONS: usize = 30;

/// What the model is told when no one can answer (`dsh run` without
/// `--answers`, an SDK session without a client answering).
pub const NO_USER: &str =
    "no user is present; proceed with your best judgement and state your assumptions";

/// The longest wait a call may ask for, seconds.
pub const MAX_TIMEOUT_S: u64 = 3600;

#[derive(Debug, Clone, Deserialize)]
pub struct AskArgs {
    pub questions: Vec<UserQuestion>,
    /// Seconds to wait (timed questions only).
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// The model is told what is wrong with questions that cannot be asked:
/// none, too many, a blank id, question or label, two questions with one
/// id, two options with one label, or an id that is another question's
/// free-text field (`<id>_other`, in an editor's form).
pub fn validate(args: &AskArgs) -> Result<(), super::Refusal> {
    let refuse = |message: String| {
        Err(super::Refusal::new(
            ErrorCode::InvalidToolArgs,
            format!("{message} Call ask_user_question again with the questions fixed."),
        ))
    };
    if args.questions.is_empty() || args.questions.len() > MAX_QUESTIONS {
        return refuse(format!(
            "Send between 1 and {MAX_QUESTIONS} questions (got {}).",
            args.questions.len()
        ));
    }
    let mut ids = std::collections::HashSet::new();
    for question in &args.questions {
        if question.id.trim().is_empty() || question.question.trim().is_empty() {
            return refuse("Every question needs a non-empty id and question.".to_owned());
        }
        if !ids.insert(question.id.as_str()) {
            return refuse(format!("Two questions have the id {:?}.", question.id));
        }
        if question.options.len() > MAX_OPTIONS {
            return refuse(format!(
                "Question {:?} has {} options; offer at most {MAX_OPTIONS}.",
                question.id,
                question.options.len()
            ));
        }
        let mut labels = std::collections::HashSet::new();
        for option in &question.options {
            if option.label.trim().is_empty() || !labels.insert(option.label.as_str()) {
                return refuse(format!(
                    "The options of question {:?} need distinct, non-empty labels.",
                    question.id
                ));
            }
        }
    }
    for question in args.questions.iter().filter(|q| !q.options.is_empty()) {
        let other = other_field(&question.id);
        if ids.contains(other.as_str()) {
            return refuse(format!(
                "The id {other:?} is reserved for the free-text answer to question {:?}; use another id.",
                question.id
            ));
        }
    }
    Ok(())
}

/// The free-text field of a question with options, in an editor's form.
pub fn other_field(id: &str) -> String {
    format!("{id}_other")
}

/// How the call is shown while it waits: titled by its first question's
/// heading (or text), with every question and its options as content. The
/// model's text is shown with its control characters written out, as a
/// plan is.
pub fn present(args: &AskArgs) -> ToolView {
    let visible = |text: &str| dsh_protocol::content::visible(text, true);
    let mut text = String::new();
    for question in &args.questions {
        if !text.is_empty() {
            text.push('\n');
        }
        match question.header.as_deref().filter(|h| !h.trim().is_empty()) {
            Some(header) => text.push_str(&format!(
                "{}: {}\n",
                visible(header),
                visible(&question.question)
            )),
            None => text.push_str(&format!("{}\n", visible(&question.question))),
        }
        for option in &question.options {
            text.push_str(&format!("  • {}", visible(&option.label)));
            if let Some(description) = &option.description {
                text.push_str(&format!(" — {}", visible(description)));
            }
            text.push('\n');
        }
        if question.multi_select {
            text.push_str("  (several may be chosen)\n");
        }
    }
    ToolView {
        title: args
            .questions
            .first()
            .map_or_else(|| "Questions".to_owned(), |q| q.title().to_owned()),
        kind: Some(ToolKind::Other),
        content: vec![ToolContent::Text { text }],
        ..ToolView::default()
    }
}

/// One answer in words: what was chosen or typed, or why there is none.
fn said(answer: &QuestionAnswer) -> String {
    let quoted = |labels: &[String]| {
        labels
            .iter()
            .map(|label| format!("{label:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut text = match (&answer.note, answer.selected.as_slice(), &answer.custom) {
        (Some(AnswerNote::NoUser), [], None) => NO_USER.to_owned(),
        (Some(AnswerNote::NotAsked), [], None) => {
            "not asked: the editor cannot ask free-text questions; ask it in your reply instead"
                .to_owned()
        }
        (_, [], None) => "skipped (no answer)".to_owned(),
        (_, [], Some(custom)) => format!("answered in their own words: {custom:?}"),
        (_, selected, None) => format!("chose {}", quoted(selected)),
        (_, selected, Some(custom)) => {
            format!(
                "chose {}, and added in their own words: {custom:?}",
                quoted(selected)
            )
        }
    };
    if answer.note == Some(AnswerNote::OneChoice) {
        text.push_str(" (asked as a single choice: the editor cannot offer several)");
    }
    text
}

/// What the model is told, and the call's final view, for the answers
/// (`answers`: one per question, in order, when answered).
pub fn result(
    questions: &[UserQuestion],
    outcome: QuestionOutcome,
    answers: &[QuestionAnswer],
) -> ToolOutcome {
    match outcome {
        QuestionOutcome::Answered => {
            let mut output = "The user's answers:\n".to_owned();
            let mut shown = String::new();
            for (question, answer) in questions.iter().zip(answers) {
                let said = said(answer);
                output.push_str(&format!("- {}: {said}\n", question.id));
                shown.push_str(&format!("{}\n→ {said}\n", question.question));
            }
            let shown = dsh_protocol::content::visible(shown.trim_end(), true);
            ToolOutcome::ok(
                output.trim_end().to_owned(),
                ToolView {
                    title: dsh_protocol::content::visible_title(
                        questions.first().map(|q| q.title()).unwrap_or_default(),
                        200,
                    ),
                    kind: Some(ToolKind::Other),
                    content: vec![ToolContent::Text { text: shown }],
                    ..ToolView::default()
                },
            )
        }
        QuestionOutcome::Declined => ToolOutcome::ok(
            "The user declined to answer. Do not ask the same questions again; proceed with your best judgement and state your assumptions, or stop and say what you need.".to_owned(),
            ToolView::text("The user declined to answer."),
        ),
        QuestionOutcome::Cancelled => ToolOutcome::failed(
            ErrorCode::PermissionCancelled,
            "The questions were cancelled, so the turn was cancelled.",
        ),
        QuestionOutcome::Unavailable => ToolOutcome::failed(
            ErrorCode::PermissionUnavailable,
            "The questions could not be put to the user (the editor did not answer). Ask them in your reply instead, and stop there.",
        ),
        QuestionOutcome::Pending => ToolOutcome::ok(
            "No answer yet: the user did not answer within the wait. The questions stay open; if the user answers later, the answers arrive as a user message. Go on with what does not depend on them (state your assumptions), or end your turn to wait.".to_owned(),
            ToolView::text("No answer yet: the questions stay open."),
        ),
    }
}

/// The user message that brings a late answer to the model.
pub fn late_answer(call: &str, outcome: &ToolOutcome) -> String {
    format!(
        "[dsh: the user answered your earlier questions (ask_user_question call {call}) after the call had returned]\n{}",
        outcome.output
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(json: serde_json::Value) -> AskArgs {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn questions_that_cannot_be_asked_are_refused() {
        let refused = |json| validate(&args(json)).unwrap_err().message;
        assert!(refused(serde_json::json!({"questions": []})).contains("between 1 and"));
        assert!(refused(serde_json::json!({"questions": [
            {"id": "a", "question": "A?"}, {"id": "a", "question": "B?"}
        ]}))
        .contains("Two questions"));
        assert!(refused(serde_json::json!({"questions": [
            {"id": "a", "question": "A?", "options": [{"label": "x"}, {"label": "x"}]}
        ]}))
        .contains("distinct"));
        assert!(refused(serde_json::json!({"questions": [
            {"id": "a", "question": "A?", "options": [{"label": "x"}]},
            {"id": "a_other", "question": "B?"}
        ]}))
        .contains("reserved"));
        assert!(
            refused(serde_json::json!({"questions": [{"id": " ", "question": "A?"}]}))
                .contains("non-empty")
        );
        assert!(validate(&args(serde_json::json!({"questions": [
            {"id": "a", "question": "A?"}, {"id": "a_other", "question": "B?"}
        ]})))
        .is_ok());
    }

    #[test]
    fn the_call_shows_the_questions_then_the_answers() {
        let args = args(serde_json::json!({"questions": [
            {"id": "db", "header": "Database", "question": "Which database?",
             "options": [{"label": "Postgres (Recommended)", "description": "Scales."}, {"label": "SQLite"}]},
            {"id": "name", "question": "What \u{1b}[8mname?"},
            {"id": "extras", "question": "Extras?", "options": [{"label": "a"}, {"label": "b"}], "multi_select": true},
            {"id": "style", "question": "Style?", "options": [{"label": "x"}]},
            {"id": "notes", "question": "Notes?"},
        ]}));
        let view = present(&args);
        assert_eq!(view.title, "Database");
        let [ToolContent::Text { text }] = view.content.as_slice() else {
            panic!("{view:?}")
        };
        assert!(text.starts_with(
            "Database: Which database?\n  • Postgres (Recommended) — Scales.\n  • SQLite\n\nWhat \\u{1b}[8mname?\n"
        ), "{text}");
        assert!(text.contains("(several may be chosen)"));
        let answers = [
            QuestionAnswer {
                id: "db".into(),
                selected: vec!["SQLite".into()],
                ..QuestionAnswer::default()
            },
            QuestionAnswer {
                id: "name".into(),
                custom: Some("dsh".into()),
                ..QuestionAnswer::default()
            },
            QuestionAnswer {
                id: "extras".into(),
                selected: vec!["a".into()],
                custom: Some("c".into()),
                note: Some(AnswerNote::OneChoice),
            },
            QuestionAnswer::unanswered("style", None),
            QuestionAnswer::unanswered("notes", Some(AnswerNote::NotAsked)),
        ];
        let outcome = result(&args.questions, QuestionOutcome::Answered, &answers);
        assert_eq!(
            outcome.output,
            "The user's answers:\n\
             - db: chose \"SQLite\"\n\
             - name: answered in their own words: \"dsh\"\n\
             - extras: chose \"a\", and added in their own words: \"c\" (asked as a single choice: the editor cannot offer several)\n\
             - style: skipped (no answer)\n\
             - notes: not asked: the editor cannot ask free-text questions; ask it in your reply instead"
        );
        assert!(outcome.error.is_none());
        assert_eq!(outcome.view.title, "Database");
        let no_user = result(
            &args.questions[..1],
            QuestionOutcome::Answered,
            &[QuestionAnswer::unanswered("db", Some(AnswerNote::NoUser))],
        );
        assert_eq!(
            no_user.output,
            format!("The user's answers:\n- db: {NO_USER}")
        );
        assert!(result(&args.questions, QuestionOutcome::Declined, &[])
            .output
            .contains("declined"));
        assert_eq!(
            result(&args.questions, QuestionOutcome::Cancelled, &[])
                .error
                .unwrap()
                .code,
            ErrorCode::PermissionCancelled
        );
        assert_eq!(
            result(&args.questions, QuestionOutcome::Unavailable, &[])
                .error
                .unwrap()
                .code,
            ErrorCode::PermissionUnavailable
        );
    }
}
