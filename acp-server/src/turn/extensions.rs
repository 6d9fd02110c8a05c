//! The turn's side of skills and custom commands
//! ([`crate::session::extensions`]): at a prompt's start the commands the
//! editor is offered again when their files changed, a `/name` that runs a
//! custom command or a skill, `/skills`, and the skill catalog recorded
//! once per session (`context/skills`, before `turn/start`, as the
//! instructions are).

use dsh_protocol::log::EventData;
use dsh_protocol::UserContent;

use super::Turn;
use crate::context::{custom_commands, skills};
use crate::error::AgentError;
use crate::frontend::{Frontend, Output, Transient};
use crate::session::extensions::Found;
use crate::session::Session;

/// What the session finds at a prompt's start; the editor is offered the
/// commands again when they changed since it was last offered them.
pub(super) async fn look(session: &Session, frontend: &dyn Frontend) -> Found {
    let found = session.discover().await;
    if let Some(commands) = session.offer(found.offered()) {
        tracing::debug!(count = commands.len(), "the slash commands changed");
        frontend.emit(Output::Transient(Transient::Commands(commands)));
    }
    found
}

impl Turn<'_> {
    /// The tools offered: the configured ones, and `skill` once the
    /// session was given a catalog.
    pub(super) fn offer(&self) -> crate::tools::Offer {
        self.offer_in(&self.session.locked().state)
    }

    /// [`Self::offer`] with the session's state already locked.
    pub(super) fn offer_in(
        &self,
        state: &crate::session::state::SessionState,
    ) -> crate::tools::Offer {
        let mut offer = self.config.offer();
        offer.skills = state
            .skills
            .as_ref()
            .is_some_and(|skills| !skills.is_empty());
        offer.subagents = self.config.subagents.may_delegate(self.session.depth());
        // Goals are the person's: never a subagent's.
        offer.goals &= self.delegated.is_none() && self.session.depth() == 0;
        // The session's `web` switch.
        offer.web_fetch &= state.settings.web;
        offer.web_search &= state.settings.web;
        // `read_image`: the session's current model takes images.
        offer.images = self
            .config
            .choices
            .model(&state.settings.model)
            .is_some_and(|model| model.images);
        offer
    }

    /// The prompt a `/name` from files stands for: a custom command's
    /// expanded body, or a skill's instructions with the task; `None`
    /// when the prompt is not one (built-in commands were tried first).
    pub(super) fn prompt_from_files(&self, content: &[UserContent]) -> Option<Vec<UserContent>> {
        let (name, arguments) = crate::context::commands::named(content)?;
        let found = &self.found.files;
        let text = if let Some(command) = found.commands.iter().find(|c| c.name == name) {
            custom_commands::expand(&command.body, arguments)
        } else {
            // As found at the prompt's start (the body was read then).
            let (skill, body) = found.skill(name)?;
            let task = if arguments.is_empty() {
                "Use this skill now.".to_owned()
            } else {
                format!("Use this skill for this task: {arguments}")
            };
            format!("{}\n{task}", skills::loaded(skill, body))
        };
        tracing::info!(command = name, "a prompt from files");
        let mut prompt = vec![UserContent::text(text)];
        prompt.extend(content[1..].iter().cloned());
        Some(prompt)
    }

    /// `/skills`: the skills, as a notice.
    pub(super) fn list_skills(&self) -> Result<(), AgentError> {
        self.notice(&skills::listing(&self.found.files.skills))
    }

    /// The skill catalog, the first time the session has skills.
    pub(super) fn skills_at_start(&self) -> Result<(), AgentError> {
        if self.session.locked().state.skills.is_some() {
            return Ok(());
        }
        let Some((text, skills)) = skills::catalog(&self.found.files.skills) else {
            return Ok(());
        };
        tracing::info!(skills = skills.len(), bytes = text.len(), "skill catalog");
        self.record(EventData::Skills { text, skills })
    }
}
