//! Goal rounds: after a prompt's turn ends normally and the session's goal
//! is active and armed, the session goes on by itself — a goal round is a
//! turn whose user message (source `goal`) is the goal's continuation,
//! preceded by its marker (a `goal/change` of kind `round`, shown as
//! "Goal round 2/5: …"). It runs here, in [`super::Agent::prompt`], which
//! every front end goes through, holding the prompt's ticket: over ACP the
//! rounds run inside the prompt request that created or resumed the goal
//! (its answer comes when they stop), and its cancel stops them at once.
//!
//! The rounds stop when the model completes or blocks the goal, the person
//! pauses it, the turn is cancelled or stops otherwise than by ending
//! (these disarm it: only the person's resume goes on), or the cap is
//! reached. A prompt of the person waiting in line goes first: the rounds
//! give way (still armed) and go on after that prompt's turn, inside its
//! request.

use std::sync::Arc;

use dsh_protocol::log::{EventData, GoalChangeKind, GoalPhase, StopReason};
use dsh_protocol::UserContent;

use crate::error::AgentError;
use crate::frontend::Frontend;
use crate::model::Provider;
use crate::session::TurnTicket;
use crate::tools::goal as rules;

/// Runs the goal's rounds after a turn that ended with `ended`, as long
/// as they may run; the last turn's stop reason.
///
/// # Errors
/// The turn or a round's turn failed (the rounds are disarmed), or a log
/// write.
pub(super) async fn run(
    ticket: &TurnTicket,
    provider: &Arc<Provider>,
    ended: Result<StopReason, AgentError>,
    frontend: &dyn Frontend,
) -> Result<StopReason, AgentError> {
    let session = &ticket.session;
    let mut stop = match ended {
        Ok(stop) => stop,
        Err(error) => {
            session.locked().state.goal_armed = false;
            return Err(error);
        }
    };
    loop {
        let goal = {
            let locked = session.locked();
            match &locked.state.goal {
                Some(goal) if locked.state.goal_armed && goal.phase == GoalPhase::Active => {
                    goal.clone()
                }
                _ => return Ok(stop),
            }
        };
        if stop == StopReason::EndTurn
            && !ticket.cancel.is_cancelled()
            && session.has_waiting().await
        {
            tracing::info!(goal = %goal.id, "goal rounds give way to a waiting prompt");
            return Ok(stop);
        }
        let why = if ticket.cancel.is_cancelled() || stop == StopReason::Cancelled {
            stop = StopReason::Cancelled;
            Some("the turn was cancelled".to_owned())
        } else if stop != StopReason::EndTurn {
            Some(format!("the turn stopped ({})", stop_words(stop)))
        } else if !rules::has_rounds_left(&goal) {
            Some(format!("all its {} rounds were used", goal.max_rounds))
        } else {
            None
        };
        if let Some(why) = why {
            session.locked().state.goal_armed = false;
            let resume = if rules::has_rounds_left(&goal) {
                "`/goal resume` continues it"
            } else {
                "a larger cap (at most `[goals] max_goal_rounds`) or a new goal (`/goal <objective>`) continues the work"
            };
            // Best effort: a session closing under the rounds writes nothing.
            let text = format!("\n\n_Goal rounds stopped: {why}; {resume}._\n\n");
            if let Err(error) = session.record(EventData::Notice { text }, frontend) {
                tracing::debug!(%error, "the goal rounds' stop was not recorded");
            }
            tracing::info!(goal = %goal.id, why, "goal rounds stopped");
            return Ok(stop);
        }
        let next = match rules::next_round(&goal) {
            Ok(next) => next,
            Err(why) => {
                session.locked().state.goal_armed = false;
                let text = format!("\n\n_Goal rounds stopped: {why}._\n\n");
                session.record(EventData::Notice { text }, frontend)?;
                return Ok(stop);
            }
        };
        session.record(
            EventData::GoalChange {
                change: GoalChangeKind::Round,
                goal: next.clone(),
            },
            frontend,
        )?;
        tracing::info!(goal = %next.id, round = next.rounds_used, "goal round");
        let content = vec![UserContent::text(rules::continuation(&next))];
        let round = crate::turn::run_from(
            ticket,
            provider.clone(),
            content,
            frontend,
            dsh_protocol::log::MessageSource::Goal,
        )
        .await;
        stop = match round {
            Ok(stop) => stop,
            Err(error) => {
                session.locked().state.goal_armed = false;
                return Err(error);
            }
        };
    }
}

/// A stop reason in words.
fn stop_words(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "it ended",
        StopReason::MaxTokens => "the reply reached its token limit",
        StopReason::MaxTurnRequests => "it reached its step limit",
        StopReason::Refusal => "the model refused",
        StopReason::Cancelled => "cancelled",
    }
}

/// A prompt whose turn never ran (its content refused, no credential,
/// cancelled as the turn came to it): the rounds that gave way to it
/// cannot go on inside it, so an armed goal is disarmed, with a notice
/// saying why, rather than left armed with nothing to run it.
pub(super) fn stop_before(ticket: &TurnTicket, why: &str, frontend: &dyn Frontend) {
    let session = &ticket.session;
    let stopped = {
        let mut locked = session.locked();
        let active = locked
            .state
            .goal
            .as_ref()
            .is_some_and(|goal| goal.phase == GoalPhase::Active);
        let armed = std::mem::replace(&mut locked.state.goal_armed, false);
        active && armed
    };
    if stopped {
        let text = format!("\n\n_Goal rounds stopped: {why}; `/goal resume` continues it._\n\n");
        if let Err(error) = session.record(EventData::Notice { text }, frontend) {
            tracing::debug!(%error, "the goal rounds' stop was not recorded");
        }
    }
}
