//! `create_goal`, `get_goal`, `update_goal` (seeds: `dsh-tool-goal`):
//! parsed and presented here, with the goal's rules (who may change it,
//! which revision, when `blocked` is allowed) and its texts; the turn runs
//! them (they need the session's goal and the turn's authority).

use dsh_protocol::log::{Goal, GoalChangeKind, GoalPhase};
use dsh_protocol::tool::{ToolKind, ToolView};
use serde::Deserialize;

use super::{parse, Refusal, Tool};

pub const CREATE_DESCRIPTION: &str = "Create a durable goal for this session when the current direct human request is long-lived work that should keep going over autonomous goal rounds. You may infer this intent even when the user does not literally say \"create a goal\". Do not use it for simple work that one turn can finish. Refused unless the request comes directly from the human (never from a subagent or an automatic round).";
pub const GET_DESCRIPTION: &str = "Read the session's current goal: its exact id and revision, the objective, the phase, how many continuation rounds it has used, its round cap, the blocked reason when there is one, and whether the next continuation is armed. Call it before updating the goal.";
pub const UPDATE_DESCRIPTION: &str = "Update the exact current revision of the goal. edit, pause and resume need a direct top-level human request. During an automatic continuation round of the current goal, complete and blocked are also allowed. blocked is refused until the configured minimum number of rounds has run; you must still judge that the same condition persisted over those rounds, and say what it is in blocked_reason.";

#[derive(Debug, Deserialize)]
pub struct CreateArgs {
    pub objective: String,
    #[serde(default)]
    pub max_goal_rounds: Option<f64>,
}

#[derive(Debug, Deserialize)]
pub struct UpdateArgs {
    pub goal_id: String,
    pub revision: f64,
    pub action: String,
    #[serde(default)]
    pub objective: Option<String>,
    #[serde(default)]
    pub max_goal_rounds: Option<f64>,
    #[serde(default)]
    pub blocked_reason: Option<String>,
}

/// A goal tool's call.
#[derive(Debug)]
pub enum GoalCall {
    Create(CreateArgs),
    Get,
    Update(UpdateArgs),
}

pub fn plan(tool: Tool, name: &str, arguments: &str) -> Result<(GoalCall, ToolView), Refusal> {
    let call = match tool {
        Tool::CreateGoal => GoalCall::Create(parse(name, arguments)?),
        Tool::UpdateGoal => GoalCall::Update(parse(name, arguments)?),
        _ => GoalCall::Get,
    };
    let title = match &call {
        GoalCall::Create(args) => format!(
            "Set goal: {}",
            dsh_protocol::content::visible_title(&args.objective, 80)
        ),
        GoalCall::Get => "Read the goal".to_owned(),
        GoalCall::Update(args) => format!(
            "Goal: {}",
            dsh_protocol::content::visible_title(&args.action, 40)
        ),
    };
    let view = ToolView {
        title,
        kind: Some(ToolKind::Think),
        ..ToolView::default()
    };
    Ok((call, view))
}

/// `[goals]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalSettings {
    /// Offer the goal tools and `/goal` (a session a person drives).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The round cap of a goal created without one, and the most rounds
    /// any goal may have: a larger cap the model asks for is cut to it.
    #[serde(default = "twenty")]
    pub max_goal_rounds: u32,
    /// Goal rounds that must run in a row before the model may report
    /// the goal blocked.
    #[serde(default = "three")]
    pub blocked_after_rounds: u32,
    /// The most rounds any goal may have (`dsh run --max-goal-rounds`):
    /// a cap the model asks for is cut to it.
    #[serde(skip)]
    pub ceiling: Option<u32>,
}

fn yes() -> bool {
    true
}
/// Twenty rounds: enough for a multi-step task to make real progress on
/// its own, few enough that a goal the model cannot finish stops within
/// minutes of model calls rather than running up a bill unattended.
fn twenty() -> u32 {
    20
}
fn three() -> u32 {
    3
}

impl Default for GoalSettings {
    fn default() -> Self {
        GoalSettings {
            enabled: true,
            max_goal_rounds: twenty(),
            blocked_after_rounds: three(),
            ceiling: None,
        }
    }
}

impl GoalSettings {
    /// The settings, checked.
    ///
    /// # Errors
    /// A zero `max_goal_rounds`.
    pub fn checked(self) -> Result<GoalSettings, String> {
        if self.max_goal_rounds == 0 {
            return Err("[goals] max_goal_rounds must be at least 1".to_owned());
        }
        Ok(self)
    }

    /// The cap of a goal that asks for `asked` rounds (none: the default):
    /// never above `max_goal_rounds` nor the run's ceiling, so a model
    /// cannot give itself an unbounded number of unattended rounds.
    pub fn cap(&self, asked: Option<u32>) -> u32 {
        let cap = asked
            .unwrap_or(self.max_goal_rounds)
            .min(self.max_goal_rounds);
        self.ceiling.map_or(cap, |ceiling| cap.min(ceiling))
    }

    /// What the model is told when the cap it asked for was cut.
    pub fn lowered(&self, asked: Option<u32>) -> Option<String> {
        let asked = asked?;
        let cap = self.cap(Some(asked));
        (cap < asked).then(|| {
            format!("max_goal_rounds {asked} was lowered to {cap}, the most rounds a goal may have here.")
        })
    }
}

/// On whose behalf a change is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authority {
    /// A direct prompt of the person in a top-level session (or `/goal`).
    Human,
    /// A goal round of the current goal.
    Round,
    /// Anything else: a subagent, a wake-up.
    Other,
}

/// `update_goal`'s actions (the catalog's enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Action {
    Edit,
    Pause,
    Resume,
    Complete,
    Blocked,
}

/// A change to the session's goal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Create {
        objective: String,
        max_rounds: Option<u32>,
    },
    Edit {
        objective: Option<String>,
        max_rounds: Option<u32>,
    },
    Pause,
    Resume,
    Complete,
    Blocked {
        reason: String,
    },
    Clear,
}

impl Change {
    /// An `update_goal` call's change.
    ///
    /// # Errors
    /// An unknown action, or fields that do not fit it.
    pub fn of_update(args: &UpdateArgs) -> Result<Change, String> {
        let action = serde_json::from_value(serde_json::Value::String(args.action.clone()))
            .map_err(|_| {
                format!(
                    "Unknown action {:?}: use edit, pause, resume, complete or blocked.",
                    args.action
                )
            })?;
        let cap = args.max_goal_rounds.map(rounds).transpose()?;
        let objective = args.objective.as_deref().map(str::trim);
        if action != Action::Edit && (objective.is_some() || cap.is_some()) {
            return Err("objective and max_goal_rounds go only with action edit.".to_owned());
        }
        Ok(match action {
            Action::Edit => {
                if objective.is_some_and(str::is_empty) {
                    return Err("The objective is empty.".to_owned());
                }
                if objective.is_none() && cap.is_none() {
                    return Err("edit needs an objective or max_goal_rounds.".to_owned());
                }
                Change::Edit {
                    objective: objective.map(str::to_owned),
                    max_rounds: cap,
                }
            }
            Action::Pause => Change::Pause,
            Action::Resume => Change::Resume,
            Action::Complete => Change::Complete,
            Action::Blocked => match args.blocked_reason.as_deref().map(str::trim) {
                Some(reason) if !reason.is_empty() => Change::Blocked {
                    reason: reason.to_owned(),
                },
                _ => return Err(
                    "blocked needs a blocked_reason: the concrete condition that stops the work."
                        .to_owned(),
                ),
            },
        })
    }

    fn human_only(&self) -> bool {
        !matches!(self, Change::Complete | Change::Blocked { .. })
    }
}

/// A cap given as a JSON number: a whole number from 1 on.
///
/// # Errors
/// Anything else.
pub fn rounds(value: f64) -> Result<u32, String> {
    super::whole_number(value)
        .filter(|n| *n >= 1)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| format!("max_goal_rounds must be a positive whole number, not {value}."))
}

/// The exact goal an update names (`update_goal`'s id and revision).
pub struct Named<'a> {
    pub id: &'a str,
    pub revision: f64,
}

/// The goal after `change`, asked for by `who` on `current` (the
/// session's goal; cleared goals are none), and what to log it as; or
/// why not, in words for the model (or the person).
///
/// # Errors
/// The change is not `who`'s to make, names another goal or revision, or
/// does not fit the goal's phase.
pub fn apply(
    current: Option<&Goal>,
    change: Change,
    who: Authority,
    named: Option<Named<'_>>,
    settings: &GoalSettings,
    new_id: impl FnOnce() -> String,
) -> Result<(GoalChangeKind, Goal), String> {
    let allowed = match who {
        Authority::Human => true,
        Authority::Round => !change.human_only(),
        Authority::Other => false,
    };
    if !allowed {
        return Err(match who {
            Authority::Round => "Only the person can do this (in a prompt of their own, or with /goal); during a goal round only complete and blocked are allowed.".to_owned(),
            _ => "Only the person can change the goal (in a prompt of their own, or with /goal); this turn was not started by them.".to_owned(),
        });
    }
    if let Change::Create {
        objective,
        max_rounds,
    } = change
    {
        if let Some(goal) =
            current.filter(|goal| matches!(goal.phase, GoalPhase::Active | GoalPhase::Paused))
        {
            return Err(format!(
                "The session already has a goal ({}, {}): {}. Change it with update_goal (edit), or the person can clear it with /goal clear.",
                goal.id,
                goal.phase.as_str(),
                goal.objective
            ));
        }
        let objective = objective.trim();
        if objective.is_empty() {
            return Err("The objective is empty.".to_owned());
        }
        let goal = Goal {
            id: new_id(),
            revision: 1,
            objective: objective.to_owned(),
            phase: GoalPhase::Active,
            rounds_used: 0,
            max_rounds: settings.cap(max_rounds),
            consecutive_rounds: 0,
            blocked_reason: None,
        };
        return Ok((GoalChangeKind::Created, goal));
    }
    let Some(current) = current else {
        return Err("The session has no goal.".to_owned());
    };
    if let Some(named) = named {
        if named.id != current.id || named.revision != current.revision as f64 {
            return Err(format!(
                "Stale goal: the current goal is {} at revision {} (phase {}). Read it with get_goal and try again if the change still applies.",
                current.id,
                current.revision,
                current.phase.as_str()
            ));
        }
    }
    let mut goal = current.clone();
    goal.revision = next_revision(current)?;
    let phase = current.phase;
    let kind = match change {
        Change::Create { .. } => unreachable!("handled above"),
        Change::Edit {
            objective,
            max_rounds,
        } => {
            if phase == GoalPhase::Complete {
                return Err("The goal is complete; create a new one instead.".to_owned());
            }
            if let Some(objective) = objective {
                goal.objective = objective;
            }
            if let Some(cap) = max_rounds {
                goal.max_rounds = settings.cap(Some(cap));
            }
            goal.consecutive_rounds = 0;
            GoalChangeKind::Edited
        }
        Change::Pause => {
            if phase != GoalPhase::Active {
                return Err(format!("The goal is {}, not active.", phase.as_str()));
            }
            goal.phase = GoalPhase::Paused;
            GoalChangeKind::Paused
        }
        Change::Resume => {
            if phase == GoalPhase::Complete {
                return Err("The goal is complete; create a new one instead.".to_owned());
            }
            if goal.rounds_used >= goal.max_rounds {
                return Err(format!(
                    "The goal used all its {} rounds; raise its cap first (update_goal edit with max_goal_rounds, at most [goals] max_goal_rounds), or the person starts a new goal (/goal <objective>).",
                    goal.max_rounds
                ));
            }
            goal.phase = GoalPhase::Active;
            goal.blocked_reason = None;
            goal.consecutive_rounds = 0;
            GoalChangeKind::Resumed
        }
        Change::Complete => {
            if phase == GoalPhase::Complete
                || (who == Authority::Round && phase != GoalPhase::Active)
            {
                return Err(format!("The goal is {}.", phase.as_str()));
            }
            goal.phase = GoalPhase::Complete;
            goal.blocked_reason = None;
            GoalChangeKind::Completed
        }
        Change::Blocked { reason } => {
            if phase != GoalPhase::Active {
                return Err(format!("The goal is {}, not active.", phase.as_str()));
            }
            if current.consecutive_rounds < settings.blocked_after_rounds {
                return Err(format!(
                    "Not yet: blocked is allowed after {} goal rounds in a row, and {} ran. Keep working on it; if the same condition still stops you after those rounds, report it then.",
                    settings.blocked_after_rounds, current.consecutive_rounds
                ));
            }
            goal.phase = GoalPhase::Blocked;
            goal.blocked_reason = Some(reason);
            GoalChangeKind::Blocked
        }
        Change::Clear => GoalChangeKind::Cleared,
    };
    Ok((kind, goal))
}

/// The revision after `goal`'s.
///
/// # Errors
/// The revision is at its largest (only a hand-made log gets there).
fn next_revision(goal: &Goal) -> Result<u64, String> {
    goal.revision.checked_add(1).ok_or_else(|| {
        format!(
            "The goal's revision {} cannot go higher; clear it with /goal clear.",
            goal.revision
        )
    })
}

/// The goal as a round starts: one more round used.
///
/// # Errors
/// The revision or the round count cannot go higher.
pub fn next_round(goal: &Goal) -> Result<Goal, String> {
    let mut next = goal.clone();
    next.revision = next_revision(goal)?;
    next.rounds_used = goal
        .rounds_used
        .checked_add(1)
        .ok_or_else(|| "the goal's round count cannot go higher".to_owned())?;
    next.consecutive_rounds = goal.consecutive_rounds.saturating_add(1);
    Ok(next)
}

/// Whether an active goal may run another round (under its cap).
pub fn has_rounds_left(goal: &Goal) -> bool {
    goal.phase == GoalPhase::Active && goal.rounds_used < goal.max_rounds
}

/// `get_goal`'s answer (and `/goal`'s): the goal's fields, one a line.
pub fn describe(goal: Option<&Goal>, armed: bool) -> String {
    let Some(goal) = goal else {
        return "The session has no goal.".to_owned();
    };
    let mut text = format!(
        "goal_id: {}\nrevision: {}\nobjective: {}\nphase: {}\nrounds_used: {}\nmax_goal_rounds: {}\nconsecutive_rounds: {}\n",
        goal.id,
        goal.revision,
        goal.objective,
        goal.phase.as_str(),
        goal.rounds_used,
        goal.max_rounds,
        goal.consecutive_rounds
    );
    if let Some(reason) = &goal.blocked_reason {
        text.push_str(&format!("blocked_reason: {reason}\n"));
    }
    let next = armed && has_rounds_left(goal);
    text.push_str(&format!("next_round_armed: {next}\n"));
    text
}

/// The user message of a goal round: what the model is asked to do.
pub fn continuation(goal: &Goal) -> String {
    format!(
        "[Goal round {round} of {max}] Continue working toward the session's goal on your own; the user is not answering during goal rounds.\n\nObjective: {objective}\n\n(goal_id {id}, revision {revision}.) When the objective is fully met and checked, call update_goal with action \"complete\". If a concrete condition you cannot resolve has stopped the work over several rounds, call update_goal with action \"blocked\" and that condition as blocked_reason. Otherwise do the next part of the work; another round follows until the goal is complete or its {max} rounds are used.",
        round = goal.rounds_used,
        max = goal.max_rounds,
        objective = goal.objective,
        id = goal.id,
        revision = goal.revision,
    )
}

#[cfg(test)]
#[path = "goal_tests.rs"]
mod tests;
