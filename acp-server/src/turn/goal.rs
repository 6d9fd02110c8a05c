//! The goal tools and `/goal`, run by the turn: they change the session's
//! goal (a `goal/change` each) on the authority of the turn — the
//! person's own prompt, a goal round, or neither ([`Authority`]). The
//! rules are [`crate::tools::goal::apply`]'s; arming the rounds is here
//! (a create or resume by the person arms them in this process).

use dsh_protocol::log::{EventData, Goal, GoalChangeKind, MessageSource, StopReason};
use dsh_protocol::tool::{ToolOutcome, ToolView};
use dsh_protocol::ErrorCode;

use super::Turn;
use crate::error::AgentError;
use crate::tools::goal::{self as rules, Authority, Change, GoalCall, Named};

impl Turn<'_> {
    /// On whose behalf this turn changes the goal: once the person's own
    /// words were steered into a top-level turn, theirs (a steer during a
    /// goal round can pause or edit the goal).
    fn goal_authority(&self) -> Authority {
        if self.delegated.is_some() || self.session.depth() > 0 {
            return Authority::Other;
        }
        if self
            .person_steered
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Authority::Human;
        }
        match self.source {
            MessageSource::User => Authority::Human,
            MessageSource::Goal => Authority::Round,
            MessageSource::Wakeup => Authority::Other,
        }
    }

    /// Runs a goal tool's call: its result is text the model reads.
    pub(super) fn run_goal_tool(&self, call: &GoalCall) -> ToolOutcome {
        let who = self.goal_authority();
        let asked = match call {
            GoalCall::Create(args) => args.max_goal_rounds,
            GoalCall::Update(args) => args.max_goal_rounds,
            GoalCall::Get => None,
        }
        .and_then(|asked| rules::rounds(asked).ok());
        let changed = match call {
            GoalCall::Get => {
                let text = {
                    let locked = self.session.locked();
                    rules::describe(locked.state.goal.as_ref(), locked.state.goal_armed)
                };
                return ToolOutcome::ok(text.clone(), ToolView::text(text));
            }
            GoalCall::Create(args) => match args.max_goal_rounds.map(rules::rounds).transpose() {
                Ok(max_rounds) => self.change_goal(
                    Change::Create {
                        objective: args.objective.clone(),
                        max_rounds,
                    },
                    who,
                    None,
                ),
                Err(refused) => Ok(Err(refused)),
            },
            GoalCall::Update(args) => match Change::of_update(args) {
                Ok(change) => self.change_goal(
                    change,
                    who,
                    Some(Named {
                        id: &args.goal_id,
                        revision: args.revision,
                    }),
                ),
                Err(refused) => Ok(Err(refused)),
            },
        };
        match changed {
            Ok(Ok((kind, goal))) => {
                let mut text = done(kind).to_owned();
                if let Some(lowered) = self.config.goals.lowered(asked) {
                    text.push(' ');
                    text.push_str(&lowered);
                }
                text.push('\n');
                text.push_str(&rules::describe(Some(&goal), self.armed()));
                ToolOutcome::ok(text.clone(), ToolView::text(text))
            }
            Ok(Err(refused)) => ToolOutcome::failed(ErrorCode::InvalidToolArgs, refused),
            Err(error) => ToolOutcome::failed(error.code(), error.to_string()),
        }
    }

    /// `/goal [objective | pause | resume | clear]`: the person's own
    /// change (or, bare, the goal shown).
    pub(super) fn goal_command(&self, args: &str) -> Result<StopReason, AgentError> {
        if !self.config.goals.enabled {
            self.notice("Goals are off here (`[goals] enabled = false` in config.toml).")?;
            return Ok(StopReason::EndTurn);
        }
        let args = args.trim();
        let (word, rest) = args
            .split_once(char::is_whitespace)
            .map_or((args, ""), |(word, rest)| (word, rest.trim()));
        let word = word.to_ascii_lowercase();
        if matches!(word.as_str(), "pause" | "resume" | "clear") && !rest.is_empty() {
            self.notice(&format!(
                "`/goal {word}` takes nothing after it. To set a goal, put the objective after `/goal` in other words (an objective cannot begin with `{word}`)."
            ))?;
            return Ok(StopReason::EndTurn);
        }
        let change = match word.as_str() {
            "" => {
                let text = {
                    let locked = self.session.locked();
                    match &locked.state.goal {
                        Some(goal) => shown(goal, locked.state.goal_armed),
                        None => "The session has no goal. `/goal <objective>` sets one; I then work on it in goal rounds until it is done.".to_owned(),
                    }
                };
                self.notice(&text)?;
                return Ok(StopReason::EndTurn);
            }
            "pause" => Change::Pause,
            "resume" => Change::Resume,
            "clear" => Change::Clear,
            _ => {
                self.replace_idle_goal()?;
                Change::Create {
                    objective: args.to_owned(),
                    max_rounds: None,
                }
            }
        };
        let creating = matches!(change, Change::Create { .. });
        if let Err(refused) = self.change_goal(change, self.goal_authority(), None)? {
            // The rules' words are the model's; the person is told what to type.
            let refused = if creating && refused.starts_with("The session already has a goal") {
                "The session's goal is still running its rounds: `/goal pause` or `/goal clear` it first; then `/goal <objective>` sets the new one.".to_owned()
            } else {
                refused
            };
            self.notice(&refused)?;
        }
        Ok(StopReason::EndTurn)
    }

    /// Applies a change and records it; a create or resume by the person
    /// arms the rounds. The refusal is the outer `Ok(Err)`.
    fn change_goal(
        &self,
        change: Change,
        who: Authority,
        named: Option<Named<'_>>,
    ) -> Result<Result<(GoalChangeKind, Goal), String>, AgentError> {
        let (current, created) = {
            let locked = self.session.locked();
            (locked.state.goal.clone(), locked.state.goals_created)
        };
        let applied = rules::apply(
            current.as_ref(),
            change,
            who,
            named,
            &self.config.goals,
            || format!("goal-{}", created + 1),
        );
        let Ok((kind, goal)) = applied else {
            return Ok(applied);
        };
        self.record(EventData::GoalChange {
            change: kind,
            goal: goal.clone(),
        })?;
        if matches!(kind, GoalChangeKind::Created | GoalChangeKind::Resumed) {
            self.session.locked().state.goal_armed = true;
        }
        tracing::info!(goal = %goal.id, change = ?kind, "goal changed");
        Ok(Ok((kind, goal)))
    }

    /// Before `/goal <objective>`: a goal whose rounds do not run (paused,
    /// its cap used, or not armed in this process) is cleared, so the
    /// person's new goal replaces it (the cleared note says so); a goal
    /// whose rounds run stays, and the create is refused.
    fn replace_idle_goal(&self) -> Result<(), AgentError> {
        let idle = {
            let locked = self.session.locked();
            locked.state.goal.as_ref().is_some_and(|goal| {
                matches!(
                    goal.phase,
                    dsh_protocol::log::GoalPhase::Active | dsh_protocol::log::GoalPhase::Paused
                ) && !(locked.state.goal_armed && rules::has_rounds_left(goal))
            })
        };
        if idle {
            if let Err(refused) = self.change_goal(Change::Clear, self.goal_authority(), None)? {
                self.notice(&refused)?;
            }
        }
        Ok(())
    }

    fn armed(&self) -> bool {
        self.session.locked().state.goal_armed
    }
}

/// What the model is told a change did.
fn done(kind: GoalChangeKind) -> &'static str {
    match kind {
        GoalChangeKind::Created => "Goal created. When this turn ends, goal rounds continue the work on their own until you mark it complete (or blocked), the user pauses it, or its rounds are used.",
        GoalChangeKind::Edited => "Goal updated.",
        GoalChangeKind::Paused => "Goal paused: no more rounds until the user resumes it.",
        GoalChangeKind::Resumed => "Goal resumed: goal rounds continue when this turn ends.",
        GoalChangeKind::Completed => "Goal marked complete: no more rounds. Finish this turn with a short summary for the user.",
        GoalChangeKind::Blocked => "Goal marked blocked: no more rounds until the user resumes it. Finish this turn by telling the user what blocks it.",
        GoalChangeKind::Round | GoalChangeKind::Cleared => "Goal changed.",
    }
}

/// `/goal`'s view of the goal.
fn shown(goal: &Goal, armed: bool) -> String {
    let mut text = format!(
        "**Goal**: {}\n\nPhase: {}; rounds used: {} of {}.",
        dsh_protocol::content::visible_title(&goal.objective, 200),
        goal.phase.as_str(),
        goal.rounds_used,
        goal.max_rounds
    );
    if let Some(reason) = &goal.blocked_reason {
        text.push_str(&format!(
            " Blocked: {}.",
            dsh_protocol::content::visible_title(reason, 200)
        ));
    }
    if goal.phase == dsh_protocol::log::GoalPhase::Active && !armed {
        text.push_str(
            " Rounds do not run on their own in this process until you `/goal resume` it.",
        );
    }
    text.push_str(" `/goal pause`, `/goal resume` and `/goal clear` change it.");
    text
}
