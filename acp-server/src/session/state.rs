//! A session's state as a fold of its events: settings, title, turns,
//! permission rules, the tool-call ids in use, the model's history and the
//! editor's projection. Every event — recorded live or read from the log —
//! goes through [`SessionState::fold`], after the repairs due before it.
//!
//! The model's history is the one part that grows with the conversation:
//! an idle session drops it ([`SessionState::evict_history`]) and folds it
//! again from the log when it is next needed ([`SessionState::fold_history`]),
//! with the same repairs at the same places, so the rebuilt history equals
//! the one it replaces.

use std::collections::HashSet;

use dsh_protocol::history::{History, Repair};
use dsh_protocol::log::{Event, EventData, InstructionStatus, PermissionRule};
use dsh_protocol::model::{Cost, Usage};
use dsh_protocol::ToolCallId;

use crate::error::AgentError;
use crate::frontend::Frontend;
use crate::projection::{Delivery, Projection};
use crate::settings::Choices;
use crate::settings::Settings;
use crate::update::AgentUpdate;

/// Everything a session knows, derived from its log.
#[derive(Debug, Clone)]
pub(crate) struct SessionState {
    pub(crate) settings: Settings,
    pub(crate) title: Option<String>,
    /// The highest turn number so far.
    pub(crate) turns: u64,
    pub(crate) rules: Vec<PermissionRule>,
    /// Every tool-call id used in the session (ids shown to the editor are
    /// unique).
    pub(crate) call_ids: HashSet<ToolCallId>,
    /// What the next model request carries.
    pub(crate) history: History,
    /// Instruction files given to the model, with their fingerprints.
    pub(crate) instructions: crate::context::instructions::Known,
    /// The skills of the catalog given to the model (`context/skills`,
    /// once per session); `None` until it was given.
    pub(crate) skills: Option<Vec<String>>,
    /// When the last time context was recorded (epoch ms).
    pub(crate) time_context: Option<u64>,
    /// Tokens in the context window at the last model call (the
    /// provider's usage, else dsh's estimate); unknown after a compaction.
    pub(crate) last_context: Option<u64>,
    /// What the session's model calls cost so far (see [`Self::charge`]);
    /// none until a call of a priced model.
    pub(crate) cost: Option<Cost>,
    /// The turns' checkpoints, oldest first, and the turns undone since.
    pub(crate) checkpoints: Vec<(u64, Vec<dsh_protocol::checkpoint::CheckpointFile>)>,
    pub(crate) undone: HashSet<u64>,
    /// Answers about project hooks files, by content hash (the latest).
    pub(crate) hook_consents: std::collections::HashMap<String, dsh_protocol::hook::HookConsent>,
    /// The session's goal (`goal/change`); none, or cleared.
    pub(crate) goal: Option<dsh_protocol::log::Goal>,
    /// Whether goal rounds may run now: armed when the person creates or
    /// resumes the goal in this process, disarmed when it stops being
    /// active or its rounds stop (a cancel). Never logged, so a loaded
    /// session waits for the person's resume.
    pub(crate) goal_armed: bool,
    /// Goals created in the session so far (the next one's id is
    /// `goal-<n + 1>`: a goal is the session's, its id only unique there).
    pub(crate) goals_created: u32,
    repair: Repair,
    projection: Projection,
    /// The history was dropped from memory: events are not folded into it
    /// until it is rebuilt from the log.
    evicted: bool,
    /// The seq of the last event read when the state was restored from the
    /// log (0 for a new session): the calls still open there were closed
    /// then, and a rebuild closes them at the same place.
    restored_at: u64,
}

/// A replay's updates on their way to the front end: in runs of up to
/// [`Replay::RUN`] (one hand-off each, held while the front end is
/// behind), with the context use shown once, at the end — a usage update
/// says what the context holds now, so only the last one is news.
struct Replay<'a> {
    out: &'a dyn Frontend,
    runtime: tokio::runtime::Handle,
    run: Vec<AgentUpdate>,
    usage: Option<AgentUpdate>,
}

impl<'a> Replay<'a> {
    const RUN: usize = 64;

    fn new(out: &'a dyn Frontend, runtime: tokio::runtime::Handle) -> Replay<'a> {
        Replay {
            out,
            runtime,
            run: Vec::with_capacity(Self::RUN),
            usage: None,
        }
    }

    fn show(&mut self, updates: Vec<AgentUpdate>) {
        for update in updates {
            if matches!(update, AgentUpdate::Usage { .. }) {
                self.usage = Some(update);
                continue;
            }
            self.run.push(update);
            if self.run.len() >= Self::RUN {
                self.send();
            }
        }
    }

    fn send(&mut self) {
        if self.run.is_empty() {
            return;
        }
        if let Some(hold) = self.out.hold() {
            self.runtime.block_on(hold);
        }
        let run = std::mem::replace(&mut self.run, Vec::with_capacity(Self::RUN));
        self.out.emit(crate::frontend::Output::Replayed(run));
    }

    fn finish(mut self) {
        self.run.extend(self.usage.take());
        self.send();
    }
}

impl SessionState {
    /// A new session's state.
    pub(crate) fn new(choices: &Choices) -> SessionState {
        SessionState {
            settings: Settings::defaults(choices),
            title: None,
            turns: 0,
            rules: Vec::new(),
            call_ids: HashSet::new(),
            history: History::default(),
            instructions: Default::default(),
            skills: None,
            time_context: None,
            last_context: None,
            cost: None,
            checkpoints: Vec::new(),
            undone: HashSet::new(),
            hook_consents: Default::default(),
            goal: None,
            goal_armed: false,
            goals_created: 0,
            repair: Repair::default(),
            projection: Projection::default(),
            evicted: false,
            restored_at: 0,
        }
    }

    /// A stored session's state, folded from its events as they are read
    /// (never all held at once): every event, then the calls a crash cut
    /// off closed. With `replay`, the updates that show the session go
    /// there as they come, waiting whenever the editor is behind — call it
    /// on a blocking thread. A replayed session's history is not folded:
    /// it starts evicted, and its first prompt folds it from the log
    /// ([`Self::fold_history`]), so a load that nobody prompts after pays
    /// neither its time nor its memory.
    ///
    /// # Errors
    /// A corrupt or unreadable log.
    pub(crate) fn restore(
        choices: &Choices,
        events: impl Iterator<Item = Result<Event, AgentError>>,
        replay: Option<&dyn Frontend>,
        running: &dyn Fn(&dsh_protocol::ToolCallId) -> bool,
    ) -> Result<SessionState, AgentError> {
        let mut state = SessionState::new(choices);
        state.evicted = replay.is_some();
        // Replay goes out as the front end lets it (behind whatever was
        // sent before; an editor that reads slowly holds it).
        let mut replay = replay.map(|out| Replay::new(out, tokio::runtime::Handle::current()));
        for event in events {
            let event = event?;
            state.restored_at = event.seq;
            let updates = state.fold(&event, choices, Delivery::Replay);
            if let Some(replay) = &mut replay {
                replay.show(updates);
            }
        }
        let cut_off = state.close_cut_off_calls(choices, Delivery::Replay);
        if let Some(mut replay) = replay {
            replay.show(cut_off);
            replay.show(state.projection.finish_replay(running));
            replay.finish();
        }
        Ok(state)
    }

    /// Whether the history was dropped from memory.
    pub(crate) fn evicted(&self) -> bool {
        self.evicted
    }

    /// Where the state was restored from the log (see [`Self::fold_history`]).
    pub(crate) fn restored_at(&self) -> u64 {
        self.restored_at
    }

    /// Drops the model's history from memory; events recorded meanwhile
    /// are folded into every other view, and into the history when it is
    /// rebuilt from the log.
    pub(crate) fn evict_history(&mut self) {
        self.history = History::default();
        self.evicted = true;
    }

    /// Puts back the history [`Self::fold_history`] rebuilt from every
    /// event recorded so far.
    pub(crate) fn restore_history(&mut self, history: History) {
        self.history = history;
        self.evicted = false;
    }

    /// The model's history folded from a session's events as they are
    /// read, exactly as the live fold built it: every event after the
    /// repairs due before it, and the calls still open at `restored_at`
    /// (where the live state was restored from the log, see
    /// [`Self::restore`]) closed there. Blocking: call it on a blocking
    /// thread.
    ///
    /// # Errors
    /// A corrupt or unreadable log.
    pub(crate) fn fold_history(
        events: impl Iterator<Item = Result<Event, AgentError>>,
        restored_at: u64,
    ) -> Result<History, AgentError> {
        let mut repair = Repair::default();
        let mut history = History::default();
        let mut closed = false;
        for event in events {
            let event = event?;
            if !closed && event.seq > restored_at {
                closed = true;
                for repaired in repair.finish() {
                    history.apply(&repaired);
                }
            }
            for repaired in repair.before(&event) {
                history.apply(&repaired);
            }
            history.apply(&event);
        }
        if !closed {
            for repaired in repair.finish() {
                history.apply(&repaired);
            }
        }
        Ok(history)
    }

    /// Folds one event (and the repairs due before it) into every view;
    /// returns the updates it projects to. The caller keeps the event.
    pub(crate) fn fold(
        &mut self,
        event: &Event,
        choices: &Choices,
        delivery: Delivery,
    ) -> Vec<AgentUpdate> {
        let mut updates = Vec::new();
        for repaired in self.repair.before(event) {
            updates.extend(self.apply(&repaired, choices, delivery));
        }
        updates.extend(self.apply(event, choices, delivery));
        updates
    }

    /// Closes the calls still open (a log that ends mid-call).
    fn close_cut_off_calls(&mut self, choices: &Choices, delivery: Delivery) -> Vec<AgentUpdate> {
        let mut updates = Vec::new();
        for repaired in self.repair.finish() {
            updates.extend(self.apply(&repaired, choices, delivery));
        }
        updates
    }

    /// Adds one model call's usage to the session's cost, at the prices of
    /// the model that served it. A model without pricing adds nothing; a
    /// call priced in another currency than the session's first is not
    /// added (the cost has one currency).
    fn charge(&mut self, model: &str, usage: &Usage, choices: &Choices) -> bool {
        let model = if model.is_empty() {
            self.settings.model.as_str()
        } else {
            model
        };
        let Some(pricing) = choices.pricing(model) else {
            return false;
        };
        let amount = pricing.cost(usage);
        match &mut self.cost {
            None => {
                self.cost = Some(Cost {
                    amount,
                    currency: pricing.currency.clone(),
                });
                true
            }
            Some(cost) if cost.currency == pricing.currency => {
                cost.amount += amount;
                true
            }
            Some(_) => false,
        }
    }

    fn apply(&mut self, event: &Event, choices: &Choices, delivery: Delivery) -> Vec<AgentUpdate> {
        // The session's cost: every model call's usage — the steps', the
        // title's, a subagent's (on its call's result or its job's end) —
        // at the price of the model that served it (the session's model at
        // the time when the event does not name one).
        let mut charged = false;
        match &event.data {
            EventData::Config { key, value } => self.settings.apply(*key, value, choices),
            EventData::PermissionRule(rule) => self.rules.push(rule.clone()),
            EventData::Title { title, usage } => {
                self.title = Some(title.clone());
                if let Some(usage) = usage {
                    charged = self.charge("", usage, choices);
                }
            }
            EventData::TurnStart { turn } => self.turns = self.turns.max(*turn),
            EventData::AssistantMessage {
                tool_calls,
                usage,
                estimated_context,
                model,
                ..
            } => {
                self.call_ids
                    .extend(tool_calls.iter().map(|call| call.id.clone()));
                if let Some(usage) = usage {
                    charged = self.charge(model, usage, choices);
                }
                if let Some(used) = usage.map(|u| u.context_tokens()).or(*estimated_context) {
                    self.last_context = Some(used);
                }
            }
            EventData::Instructions { files, text } => {
                if files.is_empty() && crate::context::time::Clock::is_context(text) {
                    self.time_context = Some(event.time);
                }
                for file in files {
                    match (&file.status, &file.fingerprint) {
                        (InstructionStatus::Removed, _) => {
                            self.instructions.remove(&file.path);
                        }
                        (_, Some(fingerprint)) => {
                            self.instructions
                                .insert(file.path.clone(), fingerprint.clone());
                        }
                        (_, None) => {}
                    }
                }
            }
            EventData::Skills { skills, .. } => self.skills = Some(skills.clone()),
            EventData::ToolResult {
                usage: Some(usage), ..
            }
            | EventData::JobEnd {
                usage: Some(usage), ..
            } => charged = self.charge("", usage, choices),
            EventData::CompactionSummary { .. } | EventData::CompactionPrune { .. } => {
                self.last_context = None;
            }
            EventData::Checkpoint { turn, files } => {
                self.checkpoints.push((*turn, files.clone()));
            }
            EventData::Undo { turn, .. } => {
                self.undone.insert(*turn);
            }
            EventData::HookConsent(consent) => {
                self.hook_consents
                    .insert(consent.hash.clone(), consent.clone());
            }
            EventData::GoalChange { change, goal } => {
                if *change == dsh_protocol::log::GoalChangeKind::Created {
                    self.goals_created += 1;
                }
                let active = goal.phase == dsh_protocol::log::GoalPhase::Active;
                self.goal_armed &= active && *change != dsh_protocol::log::GoalChangeKind::Cleared;
                self.goal =
                    (*change != dsh_protocol::log::GoalChangeKind::Cleared).then(|| goal.clone());
            }
            // Only the history and the projection make something of these.
            EventData::UserMessage { .. }
            | EventData::TurnEnd { .. }
            | EventData::ToolCall { .. }
            | EventData::ToolResult { usage: None, .. }
            | EventData::JobEnd { usage: None, .. }
            | EventData::PermissionDecision { .. }
            | EventData::PlanDecision { .. }
            | EventData::QuestionDecision { .. }
            | EventData::Plan { .. }
            | EventData::CompactionStart { .. }
            | EventData::CompactionFailed { .. }
            | EventData::Notice { .. }
            | EventData::LlmRetry { .. }
            | EventData::HookResult(_) => {}
        }
        if !self.evicted {
            self.history.apply(event);
        }
        let mut updates = self
            .projection
            .project(event, &self.settings, choices, delivery);
        // Every usage update carries the cost so far; a cost that changed
        // without one (a title, a subagent's result) gets one of its own.
        let mut usage_shown = false;
        for update in &mut updates {
            if let AgentUpdate::Usage { cost, .. } = update {
                cost.clone_from(&self.cost);
                usage_shown = true;
            }
        }
        if charged && !usage_shown {
            if let Some(used) = self.last_context {
                updates.push(AgentUpdate::Usage {
                    used,
                    size: self.settings.context_window(choices),
                    cost: self.cost.clone(),
                });
            }
        }
        updates
    }
}

#[cfg(test)]
mod goal_tests {
    use dsh_protocol::log::{Goal, GoalChangeKind, GoalPhase};
    use dsh_protocol::model::{ModelInfo, ThoughtLevel};

    use super::*;

    fn choices() -> Choices {
        Choices {
            models: vec![ModelInfo {
                id: "m".to_owned(),
                name: None,
                description: None,
                context_window: 8_000,
                max_tokens: None,
                images: false,
                pricing: None,
            }],
            default_model: "m".to_owned(),
            default_thought_level: ThoughtLevel::High,
            default_mode: dsh_protocol::Mode::Ask,
            web: false,
        }
    }

    fn change(state: &mut SessionState, change: GoalChangeKind, phase: GoalPhase) {
        let goal = Goal {
            id: "goal-1".to_owned(),
            revision: 1,
            objective: "x".to_owned(),
            phase,
            rounds_used: 0,
            max_rounds: 3,
            consecutive_rounds: 0,
            blocked_reason: None,
        };
        let event = Event {
            seq: 1,
            time: 0,
            ignorable: true,
            data: EventData::GoalChange { change, goal },
        };
        let shown = state.fold(&event, &choices(), Delivery::Live);
        assert_eq!(shown.len(), 1, "a goal's change is one line");
    }

    /// The goal folds from its changes; only the process arms it, and a
    /// change out of `active` (or a clear) disarms it.
    #[test]
    fn the_goal_folds_and_only_an_active_goal_stays_armed() {
        let mut state = SessionState::new(&choices());
        change(&mut state, GoalChangeKind::Created, GoalPhase::Active);
        assert!(state.goal.is_some() && !state.goal_armed);
        assert_eq!(state.goals_created, 1);
        state.goal_armed = true;
        change(&mut state, GoalChangeKind::Round, GoalPhase::Active);
        assert!(state.goal_armed);
        change(&mut state, GoalChangeKind::Paused, GoalPhase::Paused);
        assert!(!state.goal_armed);
        assert_eq!(state.goal.as_ref().unwrap().phase, GoalPhase::Paused);
        state.goal_armed = true;
        change(&mut state, GoalChangeKind::Cleared, GoalPhase::Active);
        assert!(state.goal.is_none() && !state.goal_armed);
        // Nothing of it reaches the model's history.
        assert!(state.history.messages().is_empty());
    }
}
