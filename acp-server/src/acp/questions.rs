//! `ask_user_question` over ACP. A client that advertised
//! `elicitation.form` gets one `elicitation/create` per call: a form with
//! one field per question (a choice of its labels, several for a
//! multi-select question, free text without options) and an optional
//! free-text `<id>_other` field beside each question with options.
//! `accept` → the answers, `decline` → declined, `cancel` → cancelled (as
//! a cancelled permission). A client that answers `elicitation/create`
//! with "method not found" (-32601: the official Python SDK does unless
//! its unstable flag is on) is asked as one without forms, for that call
//! and the rest of the connection. Any other client gets one
//! `session/request_permission` per question, in order: the labels
//! (`allow_once`) and "Skip" (`reject_once`); a multi-select question is
//! a single choice there, and a free-text one cannot be asked at all —
//! the answers say so.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use agent_client_protocol::v1::schema::{
    CreateElicitationRequest, CreateElicitationResponse, ElicitationAction,
    ElicitationContentValue, ElicitationFormMode, ElicitationSchema, ElicitationSessionScope,
    EnumOption, MultiSelectPropertySchema, PermissionOption, PermissionOptionKind,
    RequestPermissionOutcome, RequestPermissionRequest, StringPropertySchema, ToolCallUpdate,
    ToolCallUpdateFields,
};
use agent_client_protocol::{JsonRpcMessage, UntypedMessage};
use dsh_protocol::question::{AnswerNote, QuestionAnswer, UserQuestion};

use super::convert;
use super::sink::AcpSink;
use crate::frontend::Ask;
use crate::permission::Answer;

/// The plan review's field in a form.
const PLAN_FIELD: &str = "plan";

/// How much of the plan the form's message carries (the tool call shows it
/// whole).
const PLAN_SHOWN_BYTES: usize = 8000;

/// How much of the user's "what to change" is kept.
const FEEDBACK_BYTES: usize = 16 * 1024;

/// The fallback's "Skip" option.
const SKIP: &str = "skip";

impl AcpSink {
    /// Asks the model's questions: a form when the client has them, else
    /// one permission prompt per question.
    pub(super) async fn ask_questions(&self, ask: Ask, questions: Vec<UserQuestion>) -> Answer {
        if self.forms() {
            if let Some(answer) = self.elicit(&ask, &questions).await {
                return answer;
            }
        }
        self.ask_one_by_one(&ask, &questions).await
    }

    /// Whether the client takes forms: it advertised `elicitation.form`
    /// and never answered one "method not found".
    pub(super) fn forms(&self) -> bool {
        self.caps.elicitation_form && !self.forms_refused.load(Ordering::Relaxed)
    }

    /// A plan review, for a client with forms: a question of the same kind
    /// as the model's (the design's plan-review intent) — one choice among
    /// the three answers, and free text that keeps planning and says what
    /// to change. Declining keeps planning. `None` when the client does not
    /// know forms after all (ask it as a permission).
    pub(super) async fn ask_plan(&self, ask: &Ask) -> Option<Answer> {
        let question = crate::permission::Question::Plan;
        let offered = question.options();
        let plan = ask
            .raw_input
            .get("plan")
            .and_then(|plan| plan.as_str())
            .unwrap_or_default();
        let review = UserQuestion {
            id: PLAN_FIELD.to_owned(),
            question: {
                let shown = dsh_protocol::content::head_bytes(plan, PLAN_SHOWN_BYTES);
                format!(
                    "Start on this plan? Or write what to change (dsh keeps planning).\n\n{shown}{}",
                    if shown.len() < plan.len() {
                        "\n\n[… the plan goes on: read it whole in the tool call before you start it]"
                    } else {
                        ""
                    }
                )
            },
            header: Some("Plan".to_owned()),
            options: offered
                .iter()
                .map(|option| dsh_protocol::question::QuestionOption {
                    label: option.label.clone(),
                    description: None,
                })
                .collect(),
            multi_select: false,
        };
        let questions = [review];
        Some(match self.elicit(ask, &questions).await? {
            Answer::Questions(answers) => {
                let Some(answer) = answers.into_iter().find(|a| a.id == PLAN_FIELD) else {
                    return Some(Answer::Unavailable);
                };
                if let Some(change) = answer.custom.filter(|text| !text.trim().is_empty()) {
                    let kept = dsh_protocol::content::head_bytes(&change, FEEDBACK_BYTES);
                    return Some(Answer::PlanChange(kept.to_owned()));
                }
                let chosen = answer
                    .selected
                    .first()
                    .and_then(|label| offered.iter().find(|option| &option.label == label));
                match chosen {
                    Some(option) => question.answer(option.id).unwrap_or(Answer::Unavailable),
                    // Nothing chosen, nothing written: not a go-ahead.
                    None => Answer::Plan(dsh_protocol::log::PlanOutcome::KeepPlanning),
                }
            }
            Answer::Declined => Answer::Plan(dsh_protocol::log::PlanOutcome::KeepPlanning),
            other => other,
        })
    }

    /// One `elicitation/create`, scoped to the session and the call. Sent
    /// untyped so the form's fields keep the questions' order (the typed
    /// schema keeps them sorted by id). `None` when the client answers
    /// that it has no such method: it is never sent another form.
    async fn elicit(&self, ask: &Ask, questions: &[UserQuestion]) -> Option<Answer> {
        let scope = ElicitationSessionScope::new(self.session_id.clone())
            .tool_call_id(ask.call_id.as_str());
        let request = CreateElicitationRequest::new(
            ElicitationFormMode::new(scope, form(questions)),
            message(questions),
        );
        let sent = request.to_untyped_message().and_then(|message| {
            let (method, mut params) = message.into_parts();
            in_order(&mut params, questions);
            UntypedMessage::new(&method, params)
        });
        let message = match sent {
            Ok(message) => message,
            Err(err) => {
                tracing::error!(error = ?err, "cannot build the elicitation; unavailable");
                return Some(Answer::Unavailable);
            }
        };
        let response = match self.cx.send_request(message).block_task().await {
            Ok(response) => serde_json::from_value::<CreateElicitationResponse>(response),
            Err(err) if err.code == agent_client_protocol::ErrorCode::METHOD_NOT_FOUND => {
                tracing::info!("the client has no elicitation/create after all; asking without forms from now on");
                self.forms_refused.store(true, Ordering::Relaxed);
                return None;
            }
            Err(err) => {
                tracing::warn!(error = ?err, "elicitation failed; unavailable");
                return Some(Answer::Unavailable);
            }
        };
        Some(match response.map(|response| response.action) {
            Ok(ElicitationAction::Accept(accepted)) => Answer::Questions(form_answers(
                questions,
                accepted.content.unwrap_or_default(),
            )),
            Ok(ElicitationAction::Decline) => Answer::Declined,
            Ok(ElicitationAction::Cancel) => Answer::Cancelled,
            Ok(other) => {
                tracing::warn!(action = ?other, "unknown elicitation action; unavailable");
                Answer::Unavailable
            }
            Err(err) => {
                tracing::warn!(%err, "the client's elicitation answer is not one; unavailable");
                Answer::Unavailable
            }
        })
    }

    /// One `session/request_permission` per question with options; a
    /// cancel ends the asking (cancelled), a failure too (unavailable).
    async fn ask_one_by_one(&self, ask: &Ask, questions: &[UserQuestion]) -> Answer {
        let mut answers = Vec::new();
        for question in questions {
            if question.options.is_empty() {
                answers.push(QuestionAnswer::unanswered(
                    &question.id,
                    Some(AnswerNote::NotAsked),
                ));
                continue;
            }
            let fields = ToolCallUpdateFields::new()
                .title(dsh_protocol::content::visible_title(question.title(), 200))
                .kind(agent_client_protocol::v1::schema::ToolKind::Other)
                .content(convert::tool_content(vec![
                    dsh_protocol::tool::ToolContent::Text {
                        text: prompt_text(question),
                    },
                ]))
                .raw_input(ask.raw_input.clone());
            let request = RequestPermissionRequest::new(
                self.session_id.clone(),
                ToolCallUpdate::new(ask.call_id.to_string(), fields),
                fallback_options(question),
            );
            let chosen = match self.cx.send_request(request).block_task().await {
                Ok(response) => match response.outcome {
                    RequestPermissionOutcome::Selected(selected) => {
                        fallback_answer(question, selected.option_id.0.as_ref())
                    }
                    RequestPermissionOutcome::Cancelled => return Answer::Cancelled,
                    _ => None,
                },
                Err(err) => {
                    tracing::warn!(error = ?err, "question prompt failed; unavailable");
                    None
                }
            };
            match chosen {
                Some(answer) => answers.push(answer),
                None => return Answer::Unavailable,
            }
        }
        Answer::Questions(answers)
    }
}

/// The form's message: the questions, one per line.
pub(super) fn message(questions: &[UserQuestion]) -> String {
    questions
        .iter()
        .map(|question| dsh_protocol::content::visible(&question.question, false))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The form: one field per question id (titled by its heading or text),
/// and `<id>_other` for free text beside a question with options. Options
/// with a description are titled enum options (`oneOf`/`anyOf`, each with
/// its description); otherwise a plain `enum` of the labels. No field is
/// required: an empty one is a skipped question.
pub(super) fn form(questions: &[UserQuestion]) -> ElicitationSchema {
    let mut schema = ElicitationSchema::new();
    for question in questions {
        let title = question.title().to_owned();
        let description = (title != question.question).then(|| question.question.clone());
        let labels: Vec<String> = question.options.iter().map(|o| o.label.clone()).collect();
        let described = question.options.iter().any(|o| o.description.is_some());
        let titled = || -> Vec<EnumOption> {
            question
                .options
                .iter()
                .map(|option| {
                    EnumOption::new(option.label.clone(), option.label.clone())
                        .description(option.description.clone())
                })
                .collect()
        };
        if question.options.is_empty() {
            schema = schema.property(
                question.id.clone(),
                StringPropertySchema::new()
                    .title(title)
                    .description(description),
                false,
            );
            continue;
        }
        schema = if question.multi_select {
            let field = if described {
                MultiSelectPropertySchema::titled(titled())
            } else {
                MultiSelectPropertySchema::new(labels)
            };
            schema.property(
                question.id.clone(),
                field.title(title.clone()).description(description),
                false,
            )
        } else {
            let field = if described {
                StringPropertySchema::new().one_of(titled())
            } else {
                StringPropertySchema::new().enum_values(labels)
            };
            schema.property(
                question.id.clone(),
                field.title(title.clone()).description(description),
                false,
            )
        };
        let other = if question.multi_select {
            "Your own answer, besides the choices above (optional)."
        } else {
            "Your own answer, instead of a choice above (optional)."
        };
        schema = schema.property(
            crate::tools::other_field(&question.id),
            StringPropertySchema::new()
                .title(format!("{title}: other"))
                .description(other.to_owned()),
            false,
        );
    }
    schema
}

/// Puts the form's fields in the questions' order (each question, then
/// its `_other` field).
fn in_order(params: &mut serde_json::Value, questions: &[UserQuestion]) {
    let Some(properties) = params
        .pointer_mut("/requestedSchema/properties")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return;
    };
    let mut sorted = std::mem::take(properties);
    for question in questions {
        for key in [question.id.clone(), crate::tools::other_field(&question.id)] {
            if let Some(value) = sorted.remove(&key) {
                properties.insert(key, value);
            }
        }
    }
    properties.append(&mut sorted);
}

/// An accepted form's content as answers: a label of the question is
/// chosen; free text (its own field, `<id>_other`, or a value the
/// question does not offer) is its `custom` answer.
pub(super) fn form_answers(
    questions: &[UserQuestion],
    content: BTreeMap<String, ElicitationContentValue>,
) -> Vec<QuestionAnswer> {
    let text = |value: &ElicitationContentValue| -> Vec<String> {
        match value {
            ElicitationContentValue::String(text) => vec![text.clone()],
            ElicitationContentValue::StringArray(items) => items.clone(),
            ElicitationContentValue::Integer(n) => vec![n.to_string()],
            ElicitationContentValue::Number(n) => vec![n.to_string()],
            ElicitationContentValue::Boolean(b) => vec![b.to_string()],
            _ => Vec::new(),
        }
    };
    questions
        .iter()
        .map(|question| {
            let values = content.get(&question.id).map(text).unwrap_or_default();
            let (selected, typed): (Vec<String>, Vec<String>) = values
                .into_iter()
                .filter(|value| !value.trim().is_empty())
                .partition(|value| question.offers(value));
            let mut custom: Vec<String> = typed;
            if !question.options.is_empty() {
                if let Some(other) = content.get(&crate::tools::other_field(&question.id)) {
                    custom.extend(text(other).into_iter().filter(|t| !t.trim().is_empty()));
                }
            }
            QuestionAnswer {
                id: question.id.clone(),
                selected,
                custom: (!custom.is_empty()).then(|| custom.join("; ")),
                note: None,
            }
        })
        .collect()
}

/// The question as a permission prompt shows it.
fn prompt_text(question: &UserQuestion) -> String {
    let mut text = dsh_protocol::content::visible(&question.question, true);
    if question.multi_select {
        text.push_str("\n(Several could be chosen; this editor offers one.)");
    }
    for option in question.options.iter().filter(|o| o.description.is_some()) {
        text.push_str(&format!(
            "\n• {}: {}",
            dsh_protocol::content::visible(&option.label, false),
            dsh_protocol::content::visible(option.description.as_deref().unwrap_or(""), false)
        ));
    }
    text
}

/// The fallback's options: each label (`option-N`, `allow_once`), then
/// "Skip" (`reject_once`).
pub(super) fn fallback_options(question: &UserQuestion) -> Vec<PermissionOption> {
    question
        .options
        .iter()
        .enumerate()
        .map(|(n, option)| {
            PermissionOption::new(
                format!("option-{n}"),
                dsh_protocol::content::visible_title(&option.label, 200),
                PermissionOptionKind::AllowOnce,
            )
        })
        .chain(std::iter::once(PermissionOption::new(
            SKIP,
            "Skip",
            PermissionOptionKind::RejectOnce,
        )))
        .collect()
}

/// The answer the fallback option `id` stands for; `None` when it was not
/// offered.
pub(super) fn fallback_answer(question: &UserQuestion, id: &str) -> Option<QuestionAnswer> {
    if id == SKIP {
        return Some(QuestionAnswer::unanswered(&question.id, None));
    }
    let n: usize = id.strip_prefix("option-")?.parse().ok()?;
    let option = question.options.get(n)?;
    Some(QuestionAnswer {
        id: question.id.clone(),
        selected: vec![option.label.clone()],
        custom: None,
        note: question.multi_select.then_some(AnswerNote::OneChoice),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_protocol::question::QuestionOption;

    fn questions() -> Vec<UserQuestion> {
        let option = |label: &str, description: Option<&str>| QuestionOption {
            label: label.into(),
            description: description.map(Into::into),
        };
        vec![
            UserQuestion {
                id: "db".into(),
                question: "Which database?".into(),
                header: Some("Database".into()),
                options: vec![
                    option("Postgres (Recommended)", Some("Scales.")),
                    option("SQLite", None),
                ],
                multi_select: false,
            },
            UserQuestion {
                id: "name".into(),
                question: "What name?".into(),
                header: None,
                options: Vec::new(),
                multi_select: false,
            },
            UserQuestion {
                id: "extras".into(),
                question: "Extras?".into(),
                header: None,
                options: vec![option("a", None), option("b", None)],
                multi_select: true,
            },
        ]
    }

    #[test]
    fn the_form_has_a_field_per_question_and_free_text_beside_choices() {
        let questions = questions();
        let request = CreateElicitationRequest::new(
            ElicitationFormMode::new(
                ElicitationSessionScope::new("s1").tool_call_id("call_q"),
                form(&questions),
            ),
            message(&questions),
        );
        let mut params = serde_json::to_value(&request).unwrap();
        in_order(&mut params, &questions);
        assert_eq!(
            params,
            serde_json::json!({
                "mode": "form",
                "sessionId": "s1",
                "toolCallId": "call_q",
                "message": "Which database?\nWhat name?\nExtras?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "db": {
                            "type": "string",
                            "title": "Database",
                            "description": "Which database?",
                            "oneOf": [
                                {"const": "Postgres (Recommended)", "title": "Postgres (Recommended)", "description": "Scales."},
                                {"const": "SQLite", "title": "SQLite"}
                            ]
                        },
                        "db_other": {
                            "type": "string",
                            "title": "Database: other",
                            "description": "Your own answer, instead of a choice above (optional)."
                        },
                        "name": {"type": "string", "title": "What name?"},
                        "extras": {
                            "type": "array",
                            "title": "Extras?",
                            "items": {"type": "string", "enum": ["a", "b"]}
                        },
                        "extras_other": {
                            "type": "string",
                            "title": "Extras?: other",
                            "description": "Your own answer, besides the choices above (optional)."
                        }
                    }
                }
            })
        );
        // The order is the questions'.
        let keys: Vec<&String> = params["requestedSchema"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(keys, ["db", "db_other", "name", "extras", "extras_other"]);
    }

    #[test]
    fn form_content_maps_to_answers() {
        let questions = questions();
        let content: BTreeMap<String, ElicitationContentValue> =
            serde_json::from_value(serde_json::json!({
                "db": "SQLite",
                "db_other": "",
                "name": "dsh",
                "extras": ["b", "zzz"],
                "extras_other": "c",
            }))
            .unwrap();
        let answers = form_answers(&questions, content);
        let plain = |id: &str, selected: &[&str], custom: Option<&str>| QuestionAnswer {
            id: id.into(),
            selected: selected.iter().map(|s| (*s).into()).collect(),
            custom: custom.map(Into::into),
            note: None,
        };
        assert_eq!(
            answers,
            [
                plain("db", &["SQLite"], None),
                plain("name", &[], Some("dsh")),
                plain("extras", &["b"], Some("zzz; c")),
            ]
        );
        // Nothing filled in: every question skipped.
        assert!(form_answers(&questions, BTreeMap::new())
            .iter()
            .all(QuestionAnswer::is_skipped));
    }

    #[test]
    fn the_fallback_offers_the_labels_and_skip() {
        let questions = questions();
        let ids: Vec<String> = fallback_options(&questions[0])
            .iter()
            .map(|o| format!("{}:{:?}", o.option_id.0, o.kind))
            .collect();
        assert_eq!(
            ids,
            [
                "option-0:AllowOnce",
                "option-1:AllowOnce",
                "skip:RejectOnce"
            ]
        );
        assert_eq!(
            fallback_answer(&questions[0], "option-1").unwrap().selected,
            ["SQLite"]
        );
        assert!(fallback_answer(&questions[0], "skip").unwrap().is_skipped());
        assert_eq!(fallback_answer(&questions[0], "option-9"), None);
        assert_eq!(fallback_answer(&questions[0], "allow_once"), None);
        // A multi-select question answered with one choice says so.
        assert_eq!(
            fallback_answer(&questions[2], "option-0").unwrap().note,
            Some(AnswerNote::OneChoice)
        );
    }
}
