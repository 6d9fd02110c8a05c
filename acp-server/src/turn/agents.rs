//! Continuable children: a background subagent stays, idle, after its
//! turn's answer, with its own session and log, until its parent closes.
//! Each of its turns — the task, then each message that finds it idle —
//! runs as a background job of the parent's (kind subagent), whose end
//! reports the answer (`job/end`, with the turn's tokens, counted in the
//! parent's cost). `send_message` queues a message like a prompt: it
//! steers the running turn at its next step, or starts a turn;
//! `interrupt_agent` stops a turn and leaves the agent; `list_agents`
//! lists them; `list_subagent_models` reads the model catalog.
//!
//! A child's agent id is its session id. Only direct children take
//! messages (children run no background jobs, so they have no continuable
//! children of their own and do not message their parent); any live
//! descendant may be interrupted.

use std::sync::Arc;

use dsh_protocol::model::ToolCallRequest;
use dsh_protocol::tool::{ToolOutcome, ToolView};
use dsh_protocol::{ErrorCode, ToolCallId, UserContent};
use futures::future::BoxFuture;

use super::relay::{run_child, Relay};
use super::{hooks, Delegation, Turn};
use crate::frontend::Frontend;
use crate::model::Provider;
use crate::session::{Admission, Session, TurnTicket, Waited};
use crate::tools::agents::{self, AgentRow, AgentsCall, Scope};
use crate::tools::Tool;

/// What a continuable child's turn takes from the parent's turn that
/// starts it (it outlives that turn).
#[derive(Clone)]
pub(super) struct Resume {
    pub(super) parent: Arc<Session>,
    /// Where the child's steps and asks go: the latest prompt's front end.
    pub(super) outlet: Arc<dyn Frontend>,
    pub(super) provider: Arc<Provider>,
    /// The parent turn's read of the project's hooks.
    pub(super) project_hooks: Arc<hooks::ProjectRead>,
}

impl Turn<'_> {
    /// What a child's turn started by this turn takes.
    pub(super) async fn resume(&self) -> Result<Resume, Box<ToolOutcome>> {
        let Some(outlet) = self.session.prompter().await else {
            return Err(Box::new(ToolOutcome::failed(
                ErrorCode::Internal,
                "no front end to report a background subagent to",
            )));
        };
        Ok(Resume {
            parent: self.session.clone(),
            outlet: outlet.frontend().clone(),
            provider: self.provider.clone(),
            // Without its one-time answer (the child outlives the turn).
            project_hooks: self.hooks.for_child(true),
        })
    }

    /// Runs a continuable children's tool's call.
    pub(super) async fn agents(&self, call: &ToolCallRequest, agents: &AgentsCall) -> ToolOutcome {
        match agents {
            AgentsCall::Send(args) => self.send_message(call, &args.agent_id, &args.message).await,
            AgentsCall::Interrupt(args) => interrupt(self.session, args.agent_id.trim()).await,
            AgentsCall::List(args) => {
                let scope = match Scope::of(args.scope.as_deref()) {
                    Ok(scope) => scope,
                    Err(refusal) => return refusal.into(),
                };
                let rows = rows(self.session, scope);
                text(agents::render_rows(&rows, scope))
            }
            AgentsCall::Models(args) => {
                let config = self.config;
                let current = self.session.locked().state.settings.model.clone();
                let catalog = agents::Catalog {
                    provider: match config.model.provider {
                        crate::model::settings::ProviderKind::Deepseek => "deepseek",
                        crate::model::settings::ProviderKind::Openai => "openai",
                        crate::model::settings::ProviderKind::Replay => "replay",
                    },
                    models: &config.choices.models,
                    children_model: config
                        .subagents
                        .model
                        .as_deref()
                        .filter(|model| config.choices.model(model).is_some())
                        .unwrap_or(&current),
                };
                match agents::render_models(&catalog, args) {
                    Ok(answer) => text(answer),
                    Err(refusal) => refusal.into(),
                }
            }
        }
    }

    /// `send_message`: the message steers the child's running turn at its
    /// next step, or starts a turn (a job) when it is idle. Messages an
    /// interrupt held open it.
    async fn send_message(
        &self,
        call: &ToolCallRequest,
        agent_id: &str,
        message: &str,
    ) -> ToolOutcome {
        let agent_id = agent_id.trim();
        let Some(child) = self.session.agent(agent_id) else {
            return agents::unknown_agent(
                agent_id,
                "one of your continuable children (send_message reaches direct children only)",
                &self.session.agent_ids(),
            )
            .into();
        };
        let resume = match self.resume().await {
            Ok(resume) => resume,
            Err(outcome) => return *outcome,
        };
        let held = self.session.take_held(agent_id);
        let words = held
            .iter()
            .map(String::as_str)
            .chain([message])
            .collect::<Vec<_>>()
            .join("\n\n");
        // Read before the message is in line: an interrupt after this
        // holds it.
        let interrupts = self.session.agent_interrupts(agent_id);
        let admitted = child
            .admit(Some(vec![UserContent::text(&words)]))
            .admitted()
            .await;
        let with_held = match held.len() {
            0 => String::new(),
            1 => " (after the message held since its interrupt)".to_owned(),
            n => format!(" (after the {n} messages held since its interrupt)"),
        };
        let outcome = match admitted {
            Err(error) => Err(format!("{error}")),
            Ok(Admission::Cancelled) => Err(format!("agent {agent_id} closed")),
            Ok(Admission::Now(ticket)) => {
                start_turn(&resume, &child, ticket, words.clone(), &call.id, Tool::SendMessage)
                    .map(|job| {
                        let mut outcome = text(format!(
                            "Delivered{with_held}: agent {agent_id} was idle, so the message started its turn as background job {}. You will be told when it ends (its answer ends the job).",
                            job.id
                        ));
                        outcome.job = Some(job.id.clone());
                        outcome
                    })
            }
            Ok(Admission::Waiting(waiting)) => {
                let running = self.session.agent_job(agent_id);
                queue(resume, child.clone(), waiting, words.clone(), call.id.clone(), interrupts);
                Ok(text(format!(
                    "Queued{with_held}: agent {agent_id} is working; the message joins its running turn at its next step{}, or starts its next turn if that one ends first. You will be told when that turn ends. If it is interrupted first, or its next turn cannot start (too many background jobs run), the message is held instead and opens the turn of your next send_message to it (list_agents shows held messages).",
                    running.map(|job| format!(" (job {})", job.id)).unwrap_or_default()
                )))
            }
        };
        outcome.unwrap_or_else(|why| {
            // Not delivered: what was held stays held.
            for held in held {
                self.session.hold_message(agent_id, held);
            }
            ToolOutcome::failed(
                ErrorCode::Internal,
                format!("The message was not delivered to agent {agent_id}: {why}"),
            )
        })
    }
}

fn text(answer: String) -> ToolOutcome {
    let view = ToolView::text(answer.clone());
    ToolOutcome::ok(answer, view)
}

/// A message waiting behind the child's running turn: taken in by that
/// turn at its next step (its job reports the answer), or, if the turn
/// ended first, given a turn (a job) of its own when its place in line
/// comes — unless the child was interrupted meanwhile, which holds it for
/// the next message. The wait ends when the child closes.
fn queue(
    resume: Resume,
    child: Arc<Session>,
    waiting: crate::session::Waiting,
    text: String,
    call_id: ToolCallId,
    interrupts: u64,
) {
    tokio::spawn(async move {
        let Waited::Turn(ticket) = waiting.wait().await else {
            return;
        };
        let id = child.id.to_string();
        if resume.parent.agent_interrupts(&id) != interrupts {
            resume.parent.hold_message(&id, text);
            return;
        }
        if let Err(why) = start_turn(
            &resume,
            &child,
            ticket,
            text.clone(),
            &call_id,
            Tool::SendMessage,
        ) {
            tracing::warn!(agent = %id, %why, "a queued message's turn did not start; it is held");
            resume.parent.hold_message(&id, text);
        }
    });
}

/// Starts `child`'s turn (`ticket`) on `text` as a job of the parent's
/// for `call_id`: the child's steps are the job's output, its answer ends
/// it; `job_kill`, `interrupt_agent`, a stricter mode or the parent
/// closing cancels the turn (the child stays).
///
/// # Errors
/// The job could not start (too many run, the mode became stricter).
pub(super) fn start_turn(
    resume: &Resume,
    child: &Arc<Session>,
    ticket: TurnTicket,
    text: String,
    call_id: &ToolCallId,
    tool: Tool,
) -> Result<Arc<crate::jobs::Job>, String> {
    let description = child
        .header
        .subagent_of
        .as_ref()
        .map(|origin| origin.description.clone())
        .unwrap_or_default();
    let spec = crate::jobs::JobSpec {
        call_id: call_id.clone(),
        command: description.clone(),
        description: description.clone(),
        mode: resume.parent.mode(),
        kind: crate::jobs::JobKind::Subagent,
        tool: tool.name(),
    };
    let (parent, child_in_job, call_id) = (resume.parent.clone(), child.clone(), call_id.clone());
    let resume_in_job = resume.clone();
    resume.parent.jobs.start_task(
        spec,
        move |job| {
            // Known as the child's turn before the turn can end.
            parent.agent_turn(child_in_job.id.as_str(), &job);
            Box::pin(async move {
                let child = child_in_job;
                let resume = resume_in_job;
                let cancel = job.killed().clone();
                let relay = Relay::new(
                    &*resume.outlet,
                    parent.clone(),
                    &child,
                    (call_id, description),
                    Some(job),
                    cancel.clone(),
                );
                let delegation = Delegation {
                    checkpoint: None,
                    project_hooks: resume.project_hooks.clone(),
                };
                let content = vec![UserContent::text(&text)];
                let ran = run_child(
                    ticket,
                    resume.provider.clone(),
                    content,
                    &relay,
                    &cancel,
                    delegation,
                )
                .await;
                let ended = relay.job_end(ran, &child);
                parent.agent_answered(child.id.as_str(), &relay.answer());
                ended
            }) as BoxFuture<'static, _>
        },
        resume.parent.on_job_end(),
    )
}

/// `interrupt_agent`: stops the current turn of a live agent below the
/// caller (a continuable child's job is killed, named as interrupted; a
/// deeper agent's turn is cancelled); the agent stays.
async fn interrupt(session: &Arc<Session>, agent_id: &str) -> ToolOutcome {
    let mut found = None;
    walk(session, 1, &mut |parent, child, _| {
        if found.is_none() && child.id.as_str() == agent_id {
            found = Some((parent.clone(), child.clone()));
        }
    });
    let Some((parent, child)) = found else {
        let valid: Vec<String> = rows(session, Scope::Descendants)
            .into_iter()
            .map(|row| row.id)
            .collect();
        return agents::unknown_agent(agent_id, "a live agent below you", &valid).into();
    };
    if parent.is_agent(&child) {
        parent.agent_interrupted(agent_id);
    }
    let stopped = match parent.agent_job(agent_id) {
        Some(job) => {
            job.kill(Some("interrupted with interrupt_agent".to_owned()));
            Some(format!(" (job {})", job.id))
        }
        None => child.interrupt_turn().await.then(String::new),
    };
    text(match stopped {
        Some(job) => format!(
            "Asked agent {agent_id} to stop its current turn{job}; it stays, and messages queued for it wait for your next send_message. You will be told when the turn ends."
        ),
        None => format!("Agent {agent_id} is not running a turn: nothing to interrupt (it stays)."),
    })
}

/// The agents below `session`: direct children for [`Scope::Children`],
/// the whole tree in pre-order for [`Scope::Descendants`].
fn rows(session: &Arc<Session>, scope: Scope) -> Vec<AgentRow> {
    let mut rows = Vec::new();
    walk(session, 1, &mut |parent, child, depth| {
        if scope == Scope::Descendants || depth == 1 {
            rows.push(AgentRow {
                id: child.id.to_string(),
                parent: parent.id.to_string(),
                depth,
                description: child
                    .header
                    .subagent_of
                    .as_ref()
                    .map(|origin| origin.description.clone())
                    .unwrap_or_default(),
                running: child.is_busy(),
                continuable: parent.is_agent(child),
                last_answer: parent.agent_answer(child.id.as_str()),
                held: parent.held_count(child.id.as_str()),
            });
        }
    });
    rows
}

/// What [`walk`] calls: parent, child, depth.
type Visit<'a> = dyn FnMut(&Arc<Session>, &Arc<Session>, u32) + 'a;

/// Visits every live child below `session`, depth first, in the order
/// they started: `each(parent, child, depth)`.
fn walk(session: &Arc<Session>, depth: u32, each: &mut Visit<'_>) {
    for child in session.live_children() {
        each(session, &child, depth);
        walk(&child, depth + 1, each);
    }
}
