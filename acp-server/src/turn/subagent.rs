//! `subagent`: a child session in this process. It has its own log (its
//! header names the parent session and call), a fresh conversation whose
//! first user message is the task, the parent's mode, model and permission
//! rules (recorded in its log), the parent's language and MCP servers, and
//! the same tools but `subagent` past `[subagents] max_depth`. Its turn
//! runs here, through a [`Relay`]: the editor sees the parent's one call
//! stay in progress while the child's steps show on it as short lines;
//! the child's permission asks go to the parent's editor labelled with the
//! task; its questions and plans reach no one (it says so in its answer).
//! Its final reply is the call's result, its tokens the call's usage.
//! Cancelling the parent's turn cancels the child's; a child that fails is
//! a failed call. With `run_in_background` it is a continuable child
//! instead (`turn/agents.rs`): its turn runs as a job, and it stays after
//! its answer, for `send_message`, until the parent closes.

use std::sync::Arc;

use dsh_protocol::log::{ConfigKey, EventData, SubagentOrigin};
use dsh_protocol::model::ToolCallRequest;
use dsh_protocol::tool::ToolOutcome;
use dsh_protocol::{ErrorCode, ToolCallId, UserContent};

use super::relay::{run_child, Relay};
use super::{Delegation, Turn};
use crate::error::AgentError;
use crate::session::Session;
use crate::tools::SubagentArgs;

/// How long a child's turn may take to stop once cancelled.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

impl Turn<'_> {
    /// Runs a `subagent` call: the child in the foreground (the call's
    /// result is its answer), or as a background job.
    pub(super) async fn delegate(
        &self,
        call: &ToolCallRequest,
        args: &SubagentArgs,
    ) -> ToolOutcome {
        let description = present_description(args);
        if args.run_in_background {
            return self.delegate_in_background(call, args, description).await;
        }
        let child = match start_child(self.session, &call.id, &description).await {
            Ok(child) => child,
            Err(error) => {
                return ToolOutcome::failed(
                    error.code(),
                    format!("The subagent could not start: {error}"),
                )
            }
        };
        let ticket = match child.begin_turn().await {
            Ok(ticket) => ticket,
            Err(error) => {
                child.close(CLOSE_GRACE).await;
                return ToolOutcome::failed(
                    error.code(),
                    format!("The subagent could not start: {error}"),
                );
            }
        };
        // Its changes are this turn's: `/undo` of this turn undoes them.
        let delegation = Delegation {
            checkpoint: Some((self.capture.clone(), self.checkpoint_store())),
            project_hooks: self.hooks.for_child(false),
        };
        let relay = Relay::new(
            self.frontend,
            self.session.clone(),
            &child,
            (call.id.clone(), description),
            None,
            self.cancel.clone(),
        );
        let ran = run_child(
            ticket,
            self.provider.clone(),
            vec![UserContent::text(&args.prompt)],
            &relay,
            self.cancel,
            delegation,
        )
        .await;
        child.close(CLOSE_GRACE).await;
        relay.outcome(ran, &child)
    }

    /// `run_in_background`: a continuable child (checked against the job
    /// limit before it exists). Its task's turn runs as a job of the
    /// parent's ([`super::agents::start_turn`]); its agent id is its
    /// session id, which the result gives.
    async fn delegate_in_background(
        &self,
        call: &ToolCallRequest,
        args: &SubagentArgs,
        description: String,
    ) -> ToolOutcome {
        let resume = match self.resume().await {
            Ok(resume) => resume,
            Err(outcome) => return *outcome,
        };
        let jobs = &self.session.jobs;
        let running = jobs.list().iter().filter(|job| !job.has_ended()).count();
        if running >= jobs.settings().max_jobs {
            return ToolOutcome::failed(
                ErrorCode::Internal,
                format!("{running} background jobs are running, the most a session may have; stop one with job_kill or wait for one to end."),
            );
        }
        let max_kept = self.config.subagents.max_kept;
        let displaced = match self.session.make_room_for_agent(max_kept) {
            Ok(displaced) => displaced,
            Err(kept) => {
                return ToolOutcome::failed(
                    ErrorCode::Internal,
                    format!("{kept} background subagents are kept and all are working, the most a session may keep ([subagents] max_kept); wait for one's answer (an idle one is closed to make room) or stop one with interrupt_agent."),
                )
            }
        };
        let closed = match displaced {
            Some(old) => {
                old.close(CLOSE_GRACE).await;
                format!(
                    "\nAgent {} (\"{}\") was closed to make room: at most {} background subagents are kept ([subagents] max_kept), and it was the oldest idle one; it no longer takes messages.",
                    old.id,
                    old.header
                        .subagent_of
                        .as_ref()
                        .map(|origin| origin.description.as_str())
                        .unwrap_or(""),
                    max_kept.max(1)
                )
            }
            None => String::new(),
        };
        let child = match start_child(self.session, &call.id, &description).await {
            Ok(child) => child,
            Err(error) => {
                return ToolOutcome::failed(
                    error.code(),
                    format!("The subagent could not start: {error}{closed}"),
                )
            }
        };
        // Kept before its turn starts: the turn's answer is noted.
        self.session.keep_agent(child.clone());
        let started = child
            .begin_turn()
            .await
            .map_err(|error| error.to_string())
            .and_then(|ticket| {
                super::agents::start_turn(
                    &resume,
                    &child,
                    ticket,
                    args.prompt.clone(),
                    &call.id,
                    crate::tools::Tool::Subagent,
                )
            });
        match started {
            Err(error) => {
                self.session.forget_agent(child.id.as_str());
                child.close(CLOSE_GRACE).await;
                ToolOutcome::failed(ErrorCode::Internal, format!("{error}{closed}"))
            }
            Ok(job) => {
                let mut outcome = crate::tools::job_started(
                    &job,
                    "the subagent as background job",
                    "its progress and answer",
                );
                outcome.output.push_str(&format!(
                    "\nAgent id: {id}. It stays after its answer: send_message {{\"agent_id\": \"{id}\"}} gives it more to do (each answer ends a job of its own), interrupt_agent stops its current turn, list_agents lists it.",
                    id = child.id
                ));
                outcome.output.push_str(&closed);
                outcome
            }
        }
    }
}

fn present_description(args: &SubagentArgs) -> String {
    dsh_protocol::content::visible_title(args.described(), 80)
}

/// Creates the child's log and session ([`seed`]); it follows the
/// parent's mode while it lives.
async fn start_child(
    parent: &Arc<Session>,
    call_id: &ToolCallId,
    description: &str,
) -> Result<Arc<Session>, AgentError> {
    let config = parent.config().clone();
    let mut header =
        crate::session::new_header(parent.header.cwd.clone(), parent.header.roots.clone());
    header.subagent_of = Some(SubagentOrigin {
        session: parent.id.clone(),
        call_id: call_id.clone(),
        description: description.to_owned(),
        depth: parent.depth() + 1,
    });
    let store = crate::store::SessionStore::new(config.sessions_dir());
    let created = header.clone();
    let log = tokio::task::spawn_blocking(move || store.create(&created))
        .await
        .map_err(|err| AgentError::bug("creating a subagent's log", &err))??;
    // Its step limit is never above the parent's; it starts no background
    // jobs of its own (they would multiply the session's budgets).
    let child_config = Arc::new(crate::config::Config {
        max_steps: config
            .subagents
            .max_steps
            .map_or(config.max_steps, |steps| steps.clamp(1, config.max_steps)),
        jobs: crate::jobs::JobSettings {
            enabled: false,
            ..config.jobs.clone()
        },
        ..(*config).clone()
    });
    let child = Session::new(
        child_config,
        header,
        crate::session::state::SessionState::new(&config.choices),
        log,
        &parent.closing(),
        parent.residency(),
    );
    child.borrow_servers(parent);
    parent.adopt(&child);
    if let Err(error) = seed(&child, parent, description) {
        // Not a session anyone can use: closed, its log left as it is.
        child.close(CLOSE_GRACE).await;
        return Err(error);
    }
    Ok(child)
}

/// A child's first events: the parent's mode, model (or `[subagents]
/// model`), reasoning effort, permission rules and consents to the
/// project's hooks, then its title (the description: no title request).
fn seed(child: &Session, parent: &Session, description: &str) -> Result<(), AgentError> {
    let config = parent.config();
    let (settings, rules, consents) = {
        let locked = parent.locked();
        (
            locked.state.settings.clone(),
            locked.state.rules.clone(),
            locked
                .state
                .hook_consents
                .values()
                .cloned()
                .collect::<Vec<_>>(),
        )
    };
    let model = config
        .subagents
        .model
        .clone()
        .filter(|model| config.choices.model(model).is_some())
        .unwrap_or(settings.model);
    let mut seed = vec![
        (ConfigKey::Mode, settings.mode.as_str().to_owned()),
        (ConfigKey::Model, model),
        (
            ConfigKey::ThoughtLevel,
            settings.thought_level.as_str().to_owned(),
        ),
    ];
    // A child of a session whose web switch is off stays off the web.
    if !settings.web {
        seed.push((
            ConfigKey::Web,
            crate::settings::switch_value(false).to_owned(),
        ));
    }
    let nobody = crate::frontend::Nobody;
    for (key, value) in seed {
        child.record(EventData::Config { key, value }, &nobody)?;
    }
    for rule in rules {
        child.record(EventData::PermissionRule(rule), &nobody)?;
    }
    for consent in consents {
        child.record(EventData::HookConsent(consent), &nobody)?;
    }
    child.record(
        EventData::Title {
            title: description.to_owned(),
            usage: None,
        },
        &nobody,
    )?;
    Ok(())
}
