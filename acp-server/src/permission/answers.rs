//! How a permission ask is put and answered, whoever answers it: the
//! options a prompt offers (an editor's dialog, an SDK client's
//! `permission` notice), and the standing answers of the front ends that
//! run without a person (`dsh run --approve`, `dsh sdk`'s `approvals`).

use dsh_protocol::log::PermissionOutcome;

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

/// The answers to a plan submitted with `exit_plan_mode`: start in
/// `accept-edits` (allow, remembered as the mode), start in `ask` (allow,
/// each change asked about), or keep planning (reject).
pub fn plan_options() -> Vec<AnswerOption> {
    vec![
        AnswerOption {
            outcome: PermissionOutcome::AllowAlways,
            label: "Start, and accept edits".to_owned(),
        },
        AnswerOption {
            outcome: PermissionOutcome::AllowOnce,
            label: "Start, and ask for each change".to_owned(),
        },
        AnswerOption {
            outcome: PermissionOutcome::RejectOnce,
            label: "Keep planning".to_owned(),
        },
    ]
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
    /// A client answers (the SDK's `session/respond`).
    Client,
}

impl Approvals {
    /// Parses `never`, `edits`, `all` or `client`.
    pub fn parse(text: &str) -> Option<Approvals> {
        Some(match text {
            "never" => Approvals::Never,
            "edits" => Approvals::Edits,
            "all" => Approvals::All,
            "client" => Approvals::Client,
            _ => return None,
        })
    }

    /// The permission mode these approvals run in, when not the default.
    pub fn mode(self) -> Option<&'static str> {
        match self {
            Approvals::Never | Approvals::Client => None,
            Approvals::Edits => Some("accept-edits"),
            Approvals::All => Some("full-access"),
        }
    }

    /// Its name: `never`, `edits`, `all` or `client`.
    pub fn name(self) -> &'static str {
        match self {
            Approvals::Never => "never",
            Approvals::Edits => "edits",
            Approvals::All => "all",
            Approvals::Client => "client",
        }
    }

    /// The standing answer of the approvals no person gives; `None` for
    /// [`Approvals::Client`]. In `edits`, what still asks is not an edit
    /// (edits no longer ask), so it is rejected.
    pub fn standing_answer(self) -> Option<PermissionOutcome> {
        match self {
            Approvals::All => Some(PermissionOutcome::AllowOnce),
            Approvals::Edits | Approvals::Never => Some(PermissionOutcome::RejectOnce),
            Approvals::Client => None,
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
        };
        assert_eq!(
            ids(&launch),
            ["allow_always", "reject_once", "reject_always"]
        );
        assert_eq!(answer(&launch.options(), "allow_once"), None);
    }
}
