//! How a question to the user is put and answered, whoever answers it:
//! the options a prompt offers (an editor's dialog, an SDK client's
//! `permission` notice), and the standing answers of the front ends that
//! run without a person (`dsh run --approve`, `dsh sdk`'s `approvals`).

use dsh_protocol::log::{PermissionOutcome, PlanOutcome};
use dsh_protocol::question::{AnswerNote, QuestionAnswer, QuestionOutcome, UserQuestion};

use super::{Choices, Remember};

/// One answer a prompt offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerOption {
    /// The outcome it stands for; its id on every wire
    /// ([`AnswerOption::id`]).
    pub outcome: PermissionOutcome,
    /// The label to show.
    pub label: String,
}

impl AnswerOption {
    /// The option's id: `allow_once`, `allow_once_network`,
    /// `allow_always`, `reject_once` or `reject_always`.
    pub fn id(&self) -> &'static str {
        outcome_id(self.outcome)
    }
}

fn outcome_id(outcome: PermissionOutcome) -> &'static str {
    match outcome {
        PermissionOutcome::AllowOnce => "allow_once",
        PermissionOutcome::AllowOnceNetwork => "allow_once_network",
        PermissionOutcome::AllowAlways => "allow_always",
        PermissionOutcome::RejectOnce => "reject_once",
        PermissionOutcome::RejectAlways => "reject_always",
        PermissionOutcome::Cancelled => "cancelled",
        PermissionOutcome::Unavailable => "unavailable",
    }
}

impl Choices {
    /// The answers to offer: what the policy allows (no "always" where a
    /// rule could not match again; no "once" for starting a workspace
    /// program, whose approval lasts the session). Reject is always there.
    pub fn options(&self) -> Vec<AnswerOption> {
        let scope = match &self.remember {
            Remember::Scope(scope) => {
                format!(" ({})", dsh_protocol::content::visible_title(scope, 120))
            }
            _ => String::new(),
        };
        let remember = self.remember != Remember::Never;
        let mut options = Vec::new();
        let mut offer = |outcome, label: String| options.push(AnswerOption { outcome, label });
        if self.once {
            offer(PermissionOutcome::AllowOnce, "Allow once".to_owned());
        }
        if self.with_network {
            offer(
                PermissionOutcome::AllowOnceNetwork,
                "Allow once, with network".to_owned(),
            );
        }
        if remember {
            let label = if self.once {
                format!("Always allow{scope}")
            } else {
                format!("Allow for this session{scope}")
            };
            offer(PermissionOutcome::AllowAlways, label);
        }
        offer(PermissionOutcome::RejectOnce, "Reject".to_owned());
        if remember {
            offer(
                PermissionOutcome::RejectAlways,
                format!("Always reject{scope}"),
            );
        }
        options
    }
}

/// The outcome of the option `id` among `options`; `None` when it is not
/// one of them.
pub fn answer(options: &[AnswerOption], id: &str) -> Option<PermissionOutcome> {
    options
        .iter()
        .find(|option| option.id() == id)
        .map(|option| option.outcome)
}

/// What a question asks, with its own typed answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Question {
    /// May this tool call run? The options the policy offers
    /// ([`Choices::options`]).
    Permission(Vec<AnswerOption>),
    /// Start on this plan (`exit_plan_mode`), and how — or keep planning?
    Plan,
    /// The model's own questions (`ask_user_question`): choices and free
    /// text, answered per question.
    User(Vec<UserQuestion>),
}

/// An answer to a [`Question`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// One of a permission question's options.
    Permission(PermissionOutcome),
    /// One of a plan review's choices.
    Plan(PlanOutcome),
    /// A plan review answered with what to change: keep planning, and
    /// this is what the user wants changed (an editor's form).
    PlanChange(String),
    /// The answers to the model's questions (one per question; see
    /// [`dsh_protocol::question::settle`]).
    Questions(Vec<QuestionAnswer>),
    /// The user declined to answer the model's questions.
    Declined,
    /// The question was cancelled (the turn is).
    Cancelled,
    /// No answer could be had: denied (fail closed).
    Unavailable,
}

/// What kind of answer an option is: the hint a wire gives its UI (ACP's
/// option kinds), never its meaning — that is the option's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    /// Allows, this time.
    AllowOnce,
    /// Allows, and more than this time.
    AllowAlways,
    /// Rejects, this time.
    RejectOnce,
    /// Rejects, and more than this time.
    RejectAlways,
}

/// One option as every wire offers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offered {
    /// Its id (what the client answers with).
    pub id: &'static str,
    /// What to show.
    pub label: String,
    /// What kind of answer it is.
    pub hint: Hint,
}

impl Hint {
    /// Its name on the wires: `allow_once`, `allow_always`, `reject_once`,
    /// `reject_always` (ACP's option kinds).
    pub fn as_str(self) -> &'static str {
        match self {
            Hint::AllowOnce => "allow_once",
            Hint::AllowAlways => "allow_always",
            Hint::RejectOnce => "reject_once",
            Hint::RejectAlways => "reject_always",
        }
    }
}

impl Question {
    /// What is asked: `permission`, `plan` or `question`.
    pub fn kind(&self) -> &'static str {
        match self {
            Question::Permission(_) => "permission",
            Question::Plan => "plan",
            Question::User(_) => "question",
        }
    }

    /// The options offered, in menu order (the model's questions have
    /// their own, per question).
    pub fn options(&self) -> Vec<Offered> {
        match self {
            Question::Permission(options) => options
                .iter()
                .map(|option| Offered {
                    id: option.id(),
                    label: option.label.clone(),
                    hint: match option.outcome {
                        PermissionOutcome::AllowAlways => Hint::AllowAlways,
                        PermissionOutcome::RejectAlways => Hint::RejectAlways,
                        outcome if outcome.allows() => Hint::AllowOnce,
                        _ => Hint::RejectOnce,
                    },
                })
                .collect(),
            Question::Plan => PlanOutcome::CHOICES
                .iter()
                .map(|&outcome| Offered {
                    id: outcome.as_str(),
                    label: match outcome {
                        PlanOutcome::AcceptEdits => "Start, and accept edits",
                        PlanOutcome::AskEach => "Start, and ask for each change",
                        _ => "Keep planning",
                    }
                    .to_owned(),
                    hint: match outcome {
                        PlanOutcome::AcceptEdits => Hint::AllowAlways,
                        PlanOutcome::AskEach => Hint::AllowOnce,
                        _ => Hint::RejectOnce,
                    },
                })
                .collect(),
            Question::User(_) => Vec::new(),
        }
    }

    /// The answer the option `id` stands for; `None` when it was not
    /// offered.
    pub fn answer(&self, id: &str) -> Option<Answer> {
        match self {
            Question::Permission(options) => answer(options, id).map(Answer::Permission),
            Question::Plan => PlanOutcome::CHOICES
                .into_iter()
                .find(|outcome| outcome.as_str() == id)
                .map(Answer::Plan),
            Question::User(_) => None,
        }
    }

    /// The standing answer of `approvals` (no person answers); `None` for
    /// [`Approvals::Client`]. A plan starts in `ask` mode under `all` and
    /// stays a plan otherwise, as a permission is allowed or rejected; the
    /// model's questions are told no one is there to answer.
    pub fn standing_answer(&self, approvals: Approvals) -> Option<Answer> {
        let allows = match approvals {
            Approvals::All => true,
            // `Sandboxed` allows commands, reads and searches in
            // `Ask::standing_answer`, from the call's kind.
            Approvals::Edits | Approvals::Never | Approvals::Sandboxed => false,
            Approvals::Client => return None,
        };
        Some(match (self, allows) {
            (Question::Permission(_), true) => PermissionOutcome::AllowOnce.into(),
            (Question::Permission(_), false) => PermissionOutcome::RejectOnce.into(),
            (Question::Plan, true) => Answer::Plan(PlanOutcome::AskEach),
            (Question::Plan, false) => Answer::Plan(PlanOutcome::KeepPlanning),
            (Question::User(questions), _) => Answer::Questions(
                questions
                    .iter()
                    .map(|question| {
                        QuestionAnswer::unanswered(&question.id, Some(AnswerNote::NoUser))
                    })
                    .collect(),
            ),
        })
    }
}

/// A permission outcome as an answer: `cancelled` and `unavailable` are
/// no choice of an option.
impl From<PermissionOutcome> for Answer {
    fn from(outcome: PermissionOutcome) -> Answer {
        match outcome {
            PermissionOutcome::Cancelled => Answer::Cancelled,
            PermissionOutcome::Unavailable => Answer::Unavailable,
            chosen => Answer::Permission(chosen),
        }
    }
}

impl Answer {
    /// The answer to a permission question as its outcome: another
    /// question's answer is no answer to it (denied).
    pub fn permission_outcome(&self) -> PermissionOutcome {
        match self {
            Answer::Permission(outcome) => *outcome,
            Answer::Cancelled => PermissionOutcome::Cancelled,
            Answer::Plan(_)
            | Answer::PlanChange(_)
            | Answer::Questions(_)
            | Answer::Declined
            | Answer::Unavailable => PermissionOutcome::Unavailable,
        }
    }

    /// The answer to a plan review as its outcome: another question's
    /// answer is no answer to it (plan mode stays).
    pub fn plan_outcome(&self) -> PlanOutcome {
        match self {
            Answer::Plan(outcome) => *outcome,
            Answer::PlanChange(_) => PlanOutcome::KeepPlanning,
            Answer::Cancelled => PlanOutcome::Cancelled,
            Answer::Permission(_)
            | Answer::Questions(_)
            | Answer::Declined
            | Answer::Unavailable => PlanOutcome::Unavailable,
        }
    }

    /// The answer to the model's questions as its outcome and answers:
    /// another question's answer is no answer to them (unavailable).
    pub fn question_outcome(self) -> (QuestionOutcome, Vec<QuestionAnswer>) {
        match self {
            Answer::Questions(answers) => (QuestionOutcome::Answered, answers),
            Answer::Declined => (QuestionOutcome::Declined, Vec::new()),
            Answer::Cancelled => (QuestionOutcome::Cancelled, Vec::new()),
            Answer::Permission(_)
            | Answer::Plan(_)
            | Answer::PlanChange(_)
            | Answer::Unavailable => (QuestionOutcome::Unavailable, Vec::new()),
        }
    }

    /// [`Self::question_outcome`], with the answers settled against
    /// `questions` (one per question, in order): answers that fit no
    /// question are no answer (unavailable).
    pub fn settled_questions(
        self,
        questions: &[dsh_protocol::question::UserQuestion],
    ) -> (QuestionOutcome, Vec<QuestionAnswer>) {
        match self.question_outcome() {
            (QuestionOutcome::Answered, answers) => {
                match dsh_protocol::question::settle(questions, answers) {
                    Ok(answers) => (QuestionOutcome::Answered, answers),
                    Err(error) => {
                        tracing::warn!(%error, "the front end's answers fit no question; unavailable");
                        (QuestionOutcome::Unavailable, Vec::new())
                    }
                }
            }
            other => other,
        }
    }

    /// Whether it lets the call (or the plan) go ahead; answered questions
    /// do (the model goes on with the answers).
    pub fn allows(&self) -> bool {
        match self {
            Answer::Permission(outcome) => outcome.allows(),
            Answer::Plan(outcome) => {
                matches!(outcome, PlanOutcome::AcceptEdits | PlanOutcome::AskEach)
            }
            Answer::Questions(_) => true,
            Answer::PlanChange(_) | Answer::Declined | Answer::Cancelled | Answer::Unavailable => {
                false
            }
        }
    }

    /// Its id on the wires (`allow_once`, `accept_edits`, `answered`,
    /// `cancelled`, ...).
    pub fn id(&self) -> &'static str {
        match self {
            Answer::Permission(outcome) => outcome_id(*outcome),
            Answer::Plan(outcome) => outcome.as_str(),
            Answer::PlanChange(_) => PlanOutcome::KeepPlanning.as_str(),
            Answer::Questions(_) => "answered",
            Answer::Declined => "declined",
            Answer::Cancelled => "cancelled",
            Answer::Unavailable => "unavailable",
        }
    }
}

/// Which standing answers — those of no person: `dsh run --approve`, an
/// SDK session's approvals — may allow a call. One fact of the call, set
/// where it is asked ([`super::Choices::unattended`] for a tool call) and
/// read by the front end's standing answer (`frontend::Ask`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unattended {
    /// Those whose approvals cover it (`sandboxed`: a command, a read or
    /// a search; `all`: anything).
    #[default]
    Covered,
    /// Only `all` (full access): a command that names a protected path.
    /// `sandboxed` stands for the kernel sandbox, which holds only the
    /// protected paths that exist at a root when a command starts (not a
    /// `.dsh/` it makes, nor one deeper in the tree).
    FullAccessOnly,
    /// None: only a person may allow it (a repository's own code, such
    /// as its hooks).
    PersonOnly,
}

/// Who answers a session's permission asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Approvals {
    /// Every ask is rejected (the default: nothing runs that would ask).
    #[default]
    Never,
    /// Mode `accept-edits`; what would still ask is rejected.
    Edits,
    /// Mode `full-access`; anything that still asks is allowed.
    All,
    /// Mode `accept-edits`, and commands that ask are allowed once: they
    /// run in that mode's kernel sandbox (writes only in the roots and the
    /// private temp dir, no network unless `[sandbox] network`); reads and
    /// searches outside the roots too (what such a command may read); what
    /// else would ask (edits outside the roots, protected paths — a
    /// command that names one too —, fetches) is rejected. `dsh run` answers so (the SDK does not take it).
    Sandboxed,
    /// A client answers (the SDK's `session/respond`).
    Client,
}

impl Approvals {
    /// Parses `never`, `edits`, `sandboxed`, `all` or `client`.
    pub fn parse(text: &str) -> Option<Approvals> {
        Some(match text {
            "never" => Approvals::Never,
            "edits" => Approvals::Edits,
            "all" => Approvals::All,
            "sandboxed" => Approvals::Sandboxed,
            "client" => Approvals::Client,
            _ => return None,
        })
    }

    /// The permission mode these approvals run in, when not the default.
    pub fn mode(self) -> Option<&'static str> {
        match self {
            Approvals::Never | Approvals::Client => None,
            Approvals::Edits | Approvals::Sandboxed => Some("accept-edits"),
            Approvals::All => Some("full-access"),
        }
    }

    /// Its name: `never`, `edits`, `sandboxed`, `all` or `client`.
    pub fn name(self) -> &'static str {
        match self {
            Approvals::Never => "never",
            Approvals::Edits => "edits",
            Approvals::All => "all",
            Approvals::Sandboxed => "sandboxed",
            Approvals::Client => "client",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_follow_the_choices_and_answer_only_what_was_offered() {
        let ids = |choices: &Choices| {
            choices
                .options()
                .iter()
                .map(AnswerOption::id)
                .collect::<Vec<_>>()
        };
        let scoped = Choices {
            with_network: false,
            once: true,
            remember: Remember::Scope("cargo test".to_owned()),
            unattended: Unattended::Covered,
        };
        assert_eq!(
            ids(&scoped),
            ["allow_once", "allow_always", "reject_once", "reject_always"]
        );
        assert_eq!(scoped.options()[1].label, "Always allow (cargo test)");
        let never = Choices {
            with_network: false,
            once: true,
            remember: Remember::Never,
            unattended: Unattended::Covered,
        };
        assert_eq!(ids(&never), ["allow_once", "reject_once"]);
        assert_eq!(answer(&never.options(), "allow_always"), None);
        assert_eq!(
            answer(&never.options(), "reject_once"),
            Some(PermissionOutcome::RejectOnce)
        );
        let launch = Choices {
            with_network: false,
            once: false,
            remember: Remember::Scope("/w/bin/ls".to_owned()),
            unattended: Unattended::Covered,
        };
        assert_eq!(
            ids(&launch),
            ["allow_always", "reject_once", "reject_always"]
        );
        assert_eq!(answer(&launch.options(), "allow_once"), None);
    }

    #[test]
    fn a_plan_review_has_its_own_answers() {
        let plan = Question::Plan;
        let ids: Vec<&str> = plan.options().iter().map(|o| o.id).collect();
        assert_eq!(ids, ["accept_edits", "ask_each", "keep_planning"]);
        assert_eq!(plan.options()[0].hint, Hint::AllowAlways);
        assert_eq!(
            plan.answer("accept_edits"),
            Some(Answer::Plan(PlanOutcome::AcceptEdits))
        );
        // A permission's ids mean nothing to a plan, and the other way round.
        assert_eq!(plan.answer("allow_always"), None);
        let permission = Question::Permission(
            Choices {
                with_network: false,
                once: true,
                remember: Remember::Never,
                unattended: Unattended::Covered,
            }
            .options(),
        );
        assert_eq!(permission.answer("accept_edits"), None);
        assert_eq!(
            permission.answer("allow_once"),
            Some(Answer::Permission(PermissionOutcome::AllowOnce))
        );
        assert_eq!(
            plan.standing_answer(Approvals::All),
            Some(Answer::Plan(PlanOutcome::AskEach))
        );
        assert_eq!(
            plan.standing_answer(Approvals::Edits),
            Some(Answer::Plan(PlanOutcome::KeepPlanning))
        );
        assert_eq!(permission.standing_answer(Approvals::Client), None);
        assert!(!Answer::Plan(PlanOutcome::KeepPlanning).allows());
        // A wrong-kind answer is no answer to either question.
        assert_eq!(
            Answer::Plan(PlanOutcome::AcceptEdits).permission_outcome(),
            PermissionOutcome::Unavailable
        );
        assert_eq!(
            Answer::from(PermissionOutcome::AllowAlways).plan_outcome(),
            PlanOutcome::Unavailable
        );
        assert_eq!(
            Answer::from(PermissionOutcome::Cancelled).plan_outcome(),
            PlanOutcome::Cancelled
        );
    }
}
