//! The tool pipeline: for each call the model asked for, record `tool/call`
//! (the editor shows it pending), plan it, ask the permission policy (and
//! the user when it says ask), execute, record `tool/result` (the editor
//! shows the final view). Runs of parallel-safe calls the policy allows
//! without asking execute together (at most `[tools] max_parallel_calls`
//! at once), their results recorded in model order; any other call waits
//! for the run before it to end and runs alone.

use std::path::{Path, PathBuf};

use dsh_protocol::log::{EventData, PermissionOutcome, PermissionRule, PlanOutcome};
use dsh_protocol::model::ToolCallRequest;
use dsh_protocol::tool::{ToolContent, ToolKind, ToolOutcome, ToolStatus, ToolView};
use dsh_protocol::ErrorCode;
use futures::StreamExt;
use tracing::Instrument;

use super::Turn;
use crate::error::AgentError;
use crate::frontend::{Ask, Output, Transient};
use crate::permission::{self, Access, Decision};
use crate::tools::{self, Planned, ToolEnv};

/// The user's answer to a permission prompt, as the pipeline acts on it.
enum Asked {
    /// Run it; `network`: with network for a sandboxed command.
    Run {
        /// "Allow once, with network".
        network: bool,
    },
    /// Do not run it: record this.
    Refused(Box<ToolOutcome>),
}

impl Turn<'_> {
    /// Runs the model's calls. Returns true when the turn was cancelled.
    pub(super) async fn run_tools(&self, calls: &[ToolCallRequest]) -> Result<bool, AgentError> {
        let session = self.session;
        let cwd = PathBuf::from(&session.header.cwd);
        let plan_env = tools::PlanEnv {
            cwd: &cwd,
            roots: &session.roots,
            lsp: &self.config.lsp,
            offer: self.offer(),
            terminals: &session.terminals,
        };
        let reminder = self.repeated(calls);
        let mut batch: Vec<(&ToolCallRequest, Planned)> = Vec::new();
        for call in calls {
            // A call that never runs is still recorded and answered, so the
            // history stays valid and the editor sees why.
            let planned = if self.cancel.is_cancelled() {
                Err(ToolOutcome::failed(
                    ErrorCode::ToolAborted,
                    "Not run: the user cancelled the turn.",
                ))
            } else {
                match session.mcp().and_then(|hub| hub.tool(&call.name)) {
                    Some(tool) => Ok(tools::plan_mcp(tool, &call.arguments)),
                    None => tools::plan(&call.name, &call.arguments, &plan_env)
                        .map_err(ToolOutcome::from),
                }
            };
            let planned = match planned {
                Ok(planned) => planned,
                Err(outcome) => {
                    self.flush_batch(&cwd, &mut batch).await?;
                    self.record_call(call, tools::fallback_view(&call.name))?;
                    self.record_result(call, outcome)?;
                    continue;
                }
            };
            // The mode and rules are read per call: a change applies to the
            // very next one.
            let decision = session.decide(&planned.name, &planned.access);
            let decision = match self.pre_tool_use(call, &planned, decision).await? {
                Ok(decision) => decision,
                Err(refusal) => {
                    self.flush_batch(&cwd, &mut batch).await?;
                    self.record_call(call, planned.view.clone())?;
                    self.record_result(call, refusal)?;
                    continue;
                }
            };
            if planned.parallel && decision == Decision::Allow {
                self.record_call(call, planned.view.clone())?;
                batch.push((call, planned));
                continue;
            }
            self.flush_batch(&cwd, &mut batch).await?;
            self.record_call(call, planned.view.clone())?;
            let outcome = match decision {
                Decision::Allow => self.execute(&cwd, call, &planned, false).await,
                Decision::Deny(reason) => ToolOutcome::failed(ErrorCode::PermissionDenied, reason),
                Decision::Ask(_) => match self.ask(call, &planned).await? {
                    Asked::Refused(refusal) => *refusal,
                    Asked::Run { network } => self.execute(&cwd, call, &planned, network).await,
                },
            };
            self.record_result(call, outcome)?;
        }
        self.flush_batch(&cwd, &mut batch).await?;
        self.instructions_after_tools().await?;
        self.remind(reminder)?;
        Ok(self.cancel.is_cancelled())
    }

    async fn flush_batch(
        &self,
        cwd: &Path,
        batch: &mut Vec<(&ToolCallRequest, Planned)>,
    ) -> Result<(), AgentError> {
        if batch.is_empty() {
            return Ok(());
        }
        let items = std::mem::take(batch);
        let runs: Vec<futures::future::BoxFuture<'_, (usize, ToolOutcome)>> = items
            .iter()
            .enumerate()
            .map(|(index, (call, planned))| {
                Box::pin(async move { (index, self.execute(cwd, call, planned, false).await) }) as _
            })
            .collect();
        // At most `[tools] max_parallel_calls` run at once, and a call that
        // ends frees its place whatever its position (a slow first call does
        // not hold the others back); results are recorded in call order.
        let mut results =
            futures::stream::iter(runs).buffer_unordered(self.config.tools.max_parallel_calls);
        let mut ended = std::collections::BTreeMap::new();
        let mut next = 0;
        while let Some((index, outcome)) = results.next().await {
            ended.insert(index, outcome);
            while let Some(outcome) = ended.remove(&next) {
                self.record_result(items[next].0, outcome)?;
                next += 1;
            }
        }
        Ok(())
    }

    /// Asks the user: run it (with network, when the user chose that), or
    /// the refusal to record. Everything but an allow denies (fail closed), and
    /// an allow is checked against the policy again: the mode and rules at
    /// the moment of the answer decide (a switch to read-only while the
    /// prompt was open voids it).
    async fn ask(&self, call: &ToolCallRequest, planned: &Planned) -> Result<Asked, AgentError> {
        let session = self.session;
        let choices = permission::choices(&planned.access, &session.policy());
        let question = Ask {
            call_id: call.id.clone(),
            title: planned.view.title.clone(),
            kind: planned.view.kind.unwrap_or(ToolKind::Other),
            raw_input: serde_json::from_str(&call.arguments)
                .unwrap_or(serde_json::Value::String(call.arguments.clone())),
            locations: planned.view.locations.clone(),
            content: planned.view.content.clone(),
            question: permission::Question::Permission(choices.options()),
            unattended: choices.unattended,
        };
        let answer = tokio::select! {
            biased;
            () = self.cancel.cancelled() => PermissionOutcome::Cancelled,
            answer = self.frontend.ask(question) => answer.permission_outcome(),
        };
        tracing::info!(?answer, "permission answered");
        self.record(EventData::PermissionDecision {
            call_id: call.id.clone(),
            outcome: answer,
        })?;
        let remember = |allow: bool| -> Result<(), AgentError> {
            // Only what the prompt offered to remember is remembered.
            if let Some(scope) = permission::rule_scope(&planned.access, &session.policy()) {
                self.record(EventData::PermissionRule(PermissionRule {
                    tool: planned.name.clone(),
                    scope,
                    allow,
                }))?;
            }
            Ok(())
        };
        Ok(match answer {
            PermissionOutcome::AllowOnce
            | PermissionOutcome::AllowOnceNetwork
            | PermissionOutcome::AllowAlways => {
                // Starting a workspace program is allowed for the session
                // (it keeps running): there is no "once" for it.
                if answer == PermissionOutcome::AllowAlways || !choices.once {
                    remember(true)?;
                }
                match session.decide(&planned.name, &planned.access) {
                    Decision::Deny(reason) => {
                        Asked::Refused(Box::new(ToolOutcome::failed(ErrorCode::PermissionDenied, reason)))
                    }
                    Decision::Allow | Decision::Ask(_) => Asked::Run {
                        network: answer == PermissionOutcome::AllowOnceNetwork,
                    },
                }
            }
            PermissionOutcome::RejectOnce | PermissionOutcome::RejectAlways => {
                if answer == PermissionOutcome::RejectAlways {
                    remember(false)?;
                }
                Asked::Refused(Box::new(ToolOutcome::failed(
                    ErrorCode::PermissionRejected,
                    "The user rejected this tool call. Do not retry it or do the same thing another way; ask the user how to proceed if it is still needed.",
                )))
            }
            PermissionOutcome::Cancelled => {
                self.cancel.cancel();
                Asked::Refused(Box::new(ToolOutcome::failed(ErrorCode::PermissionCancelled, "The permission prompt was cancelled, so the call did not run and the turn was cancelled.")))
            }
            PermissionOutcome::Unavailable => Asked::Refused(Box::new(ToolOutcome::failed(
                ErrorCode::PermissionUnavailable,
                "Permission could not be requested (the editor did not answer), so the call was denied. Do not retry it another way.",
            ))),
        })
    }

    /// Runs a call the policy or the user allowed; `with_network`: the
    /// user allowed a command the network its sandbox would deny.
    async fn execute(
        &self,
        cwd: &Path,
        call: &ToolCallRequest,
        planned: &Planned,
        with_network: bool,
    ) -> ToolOutcome {
        let span = tracing::info_span!("tool", call = %call.id, tool = %planned.name);
        async {
            let session = self.session;
            // Transient: the call is running (not a logged fact).
            self.frontend
                .emit(Output::Transient(Transient::ToolRunning {
                    call_id: call.id.clone(),
                }));
            let command = if matches!(planned.access, Access::Execute { .. }) {
                self.command_run(with_network)
            } else {
                crate::sandbox::CommandRun::unsandboxed(session.mode())
            };
            let env = ToolEnv {
                cwd,
                roots: &session.roots,
                frontend: self.frontend,
                cancel: self.cancel,
                spill_dir: &session.spill_dir,
                call_id: &call.id,
                mcp: session.mcp(),
                lsp: &|| session.bridge(),
                spawner: &self.config.spawner,
                command: &command,
                jobs: &session.jobs,
                terminals: &session.terminals,
                on_job_end: &|| session.on_job_end(),
                on_job_live: &|call| session.on_job_live(call),
                web: &self.config.web,
                hidden: self.config.protected.hidden(),
                glob: &self.config.tools.glob,
                skills: &self.found.roots,
                recall: tools::session_query::Caller {
                    store: session.store(),
                    id: session.id.as_str(),
                    cwd: &session.header.cwd,
                    live: &|| session.residency().live(),
                },
            };
            if let Some(plan) = planned.submitted_plan() {
                return self.submit_plan(call, planned, plan).await;
            }
            if let Some(questions) = planned.questions() {
                return self.ask_user(call, planned, questions).await;
            }
            if let Some(goal) = planned.goal() {
                let outcome = self.run_goal_tool(goal);
                return self.post_tool_use(call, outcome).await;
            }
            if let Some(task) = planned.delegated() {
                let outcome = self.delegate(call, task).await;
                return self.post_tool_use(call, outcome).await;
            }
            if let Some(agents) = planned.agents() {
                let outcome = self.agents(call, agents).await;
                return self.post_tool_use(call, outcome).await;
            }
            let scan = self.before_change(planned).await;
            let mut outcome = tokio::select! {
                biased;
                outcome = tools::run(planned, &env) => outcome,
                () = self.cancel.cancelled(), if !planned.stops_itself => {
                    ToolOutcome::failed(ErrorCode::ToolAborted, "Cancelled by the user while it ran; its effect is unknown.")
                }
            };
            if let Some(scan) = scan {
                self.after_command(scan).await;
            }
            if outcome.error.is_none() && planned.edits_files {
                self.append_new_errors(planned, &mut outcome).await;
            }
            tracing::debug!(failed = outcome.error.is_some(), "tool finished");
            self.post_tool_use(call, outcome).await
        }
        .instrument(span)
        .await
    }

    /// How a command runs now; where the kernel cannot sandbox it, the
    /// user is told once per session that the prompt is the only guard.
    fn command_run(&self, with_network: bool) -> crate::sandbox::CommandRun {
        let session = self.session;
        if self.config.command_guard() == crate::sandbox::Guard::PromptOnly
            && session.mode() != dsh_protocol::Mode::FullAccess
            && session.first_unsandboxed_command()
        {
            let _ = self.record(EventData::Notice {
                text: "Commands run without a kernel sandbox on this machine (no usable Landlock, or no way to keep them off the network): the permission prompt is their only guard. Set `[sandbox] required = true` in config.toml to refuse them instead.".to_owned(),
            });
        }
        session.command_run(with_network)
    }

    /// Before a call that may change files: what `write`/`edit` will
    /// overwrite is kept; for a command, the workspace is scanned (the
    /// scan is returned for [`Self::after_command`]).
    async fn before_change(&self, planned: &Planned) -> Option<crate::checkpoint::Scan> {
        match &planned.access {
            Access::Write(paths) if planned.edits_files => {
                for path in paths {
                    let wanted = self
                        .capture
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .wants(path);
                    if !wanted {
                        continue;
                    }
                    let now = self.current(&path.display().to_string()).await;
                    let (capture, store, path) =
                        (self.capture.clone(), self.checkpoint_store(), path.clone());
                    let _ = tokio::task::spawn_blocking(move || {
                        capture
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .keep(&store, &path, &now);
                    })
                    .await;
                }
                None
            }
            Access::Execute { .. } => {
                let roots = self.session.roots.clone();
                let capture = self.capture.clone();
                tokio::task::spawn_blocking(move || {
                    let scan = crate::checkpoint::Scan::of(&roots);
                    // The turn's first command: its small files are read,
                    // in case a command changes or deletes them.
                    let mut capture = capture.lock().unwrap_or_else(|p| p.into_inner());
                    if capture.wants_precopy() {
                        capture.precopy(&scan);
                    }
                    scan
                })
                .await
                .ok()
            }
            _ => None,
        }
    }

    /// After a command: what it created, changed or removed.
    async fn after_command(&self, before: crate::checkpoint::Scan) {
        let capture = self.capture.clone();
        let roots = self.session.roots.clone();
        let store = self.checkpoint_store();
        let _ = tokio::task::spawn_blocking(move || {
            let after = crate::checkpoint::Scan::of(&roots);
            capture
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .after_command(&store, &before, &after);
        })
        .await;
    }

    /// `exit_plan_mode`: outside plan mode it is refused; in plan mode the
    /// user is shown the plan and asked to start on it (in `accept-edits`
    /// or `ask`) or keep planning. An approval records the mode change
    /// now, between this step and the next, so the plan runs under it. No
    /// answer (cancelled, no editor) keeps plan mode.
    async fn submit_plan(
        &self,
        call: &ToolCallRequest,
        planned: &Planned,
        plan: &str,
    ) -> ToolOutcome {
        use dsh_protocol::Mode;
        let mode = self.session.mode();
        if mode != Mode::Plan {
            return ToolOutcome::failed(
                ErrorCode::PermissionDenied,
                format!(
                    "exit_plan_mode is only for plan mode, and the session is in {} mode: carry on with the task (no plan approval is needed).",
                    mode.as_str()
                ),
            );
        }
        let question = Ask {
            call_id: call.id.clone(),
            title: planned.view.title.clone(),
            kind: ToolKind::Think,
            raw_input: serde_json::json!({ "plan": plan }),
            locations: Vec::new(),
            content: planned.view.content.clone(),
            question: permission::Question::Plan,
            unattended: permission::Unattended::Covered,
        };
        let (answer, feedback) = tokio::select! {
            biased;
            () = self.cancel.cancelled() => (PlanOutcome::Cancelled, None),
            answer = self.frontend.ask(question) => match answer {
                permission::Answer::PlanChange(feedback) => (PlanOutcome::KeepPlanning, Some(feedback)),
                answer => (answer.plan_outcome(), None),
            },
        };
        tracing::info!(?answer, "plan answered");
        let recorded = self.record(EventData::PlanDecision {
            call_id: call.id.clone(),
            outcome: answer,
            feedback: feedback.clone(),
        });
        let start = |next: Mode, how: &str| -> ToolOutcome {
            // The mode changes only once the decision is in the log.
            let changed = recorded.and_then(|_| {
                self.record(EventData::Config {
                    key: dsh_protocol::log::ConfigKey::Mode,
                    value: next.as_str().to_owned(),
                })
            });
            match changed {
                Ok(_) => ToolOutcome::ok(
                    format!("The user approved the plan and switched to {} mode: {how}. Carry out the plan now, step by step.", next.as_str()),
                    ToolView::default(),
                ),
                Err(error) => ToolOutcome::failed(error.code(), error.to_string()),
            }
        };
        match answer {
            PlanOutcome::AcceptEdits => start(Mode::AcceptEdits, "edits in the workspace no longer ask; commands still do"),
            PlanOutcome::AskEach => start(Mode::Ask, "each change and command is asked about"),
            PlanOutcome::KeepPlanning => match feedback {
                Some(feedback) => ToolOutcome::failed(
                    ErrorCode::PermissionRejected,
                    format!("The user wants to keep planning: plan mode stays on. What they want changed:\n{feedback}\nRevise the plan accordingly and submit it again with exit_plan_mode."),
                ),
                None => ToolOutcome::failed(
                    ErrorCode::PermissionRejected,
                    "The user wants to keep planning: plan mode stays on. Ask what to change if it is not clear (their feedback may come in their next message), revise the plan, and submit it again with exit_plan_mode.",
                ),
            },
            PlanOutcome::Cancelled => {
                self.cancel.cancel();
                ToolOutcome::failed(
                    ErrorCode::PermissionCancelled,
                    "The plan review was cancelled: plan mode stays on and the turn was cancelled.",
                )
            }
            PlanOutcome::Unavailable => ToolOutcome::failed(
                ErrorCode::PermissionUnavailable,
                "The plan could not be shown to the user (the editor did not answer): plan mode stays on. Stop and tell the user the plan is ready.",
            ),
        }
    }

    /// `ask_user_question`: the front end asks (no permission is needed:
    /// asking is the point), the answers are logged as
    /// `question/decision`, and the model gets them as the call's result.
    /// A cancel cancels the turn, as a cancelled permission does; no answer
    /// (no editor, a broken channel, answers that fit no question) tells
    /// the model to ask in its reply.
    async fn ask_user(
        &self,
        call: &ToolCallRequest,
        planned: &Planned,
        questions: &[dsh_protocol::question::UserQuestion],
    ) -> ToolOutcome {
        use dsh_protocol::question::QuestionOutcome;
        let ask = Ask {
            call_id: call.id.clone(),
            title: planned.view.title.clone(),
            kind: ToolKind::Other,
            raw_input: serde_json::from_str(&call.arguments)
                .unwrap_or(serde_json::Value::String(call.arguments.clone())),
            locations: Vec::new(),
            content: planned.view.content.clone(),
            question: permission::Question::User(questions.to_vec()),
            unattended: permission::Unattended::Covered,
        };
        let wait = planned.question_wait(self.config.question_timeout);
        let prompter = match wait {
            Some(_) => self.session.prompter().await,
            None => None,
        };
        let answer = match (wait, prompter.map(|prompter| prompter.frontend().clone())) {
            (Some(wait), Some(outlet)) => {
                match self.ask_timed(call, questions, ask, wait, outlet).await {
                    Ok(answer) => answer,
                    Err(pending) => {
                        tracing::info!(
                            wait_s = wait.as_secs(),
                            "no answer within the wait; the questions stay open"
                        );
                        if let Err(error) = self.record(EventData::QuestionDecision {
                            call_id: call.id.clone(),
                            outcome: QuestionOutcome::Pending,
                            answers: Vec::new(),
                        }) {
                            return ToolOutcome::failed(error.code(), error.to_string());
                        }
                        // A late answer is logged after this.
                        let _ = pending.send(());
                        return tools::question_result(questions, QuestionOutcome::Pending, &[]);
                    }
                }
            }
            _ => tokio::select! {
                biased;
                () = self.cancel.cancelled() => permission::Answer::Cancelled,
                answer = self.frontend.ask(ask) => answer,
            },
        };
        let (outcome, answers) = answer.settled_questions(questions);
        tracing::info!(?outcome, "questions answered");
        if outcome == QuestionOutcome::Cancelled {
            self.cancel.cancel();
        }
        if let Err(error) = self.record(EventData::QuestionDecision {
            call_id: call.id.clone(),
            outcome,
            answers: answers.clone(),
        }) {
            return ToolOutcome::failed(error.code(), error.to_string());
        }
        tools::question_result(questions, outcome, &answers)
    }

    /// A timed question: asked on a task of its own so it outlives the
    /// call. The answer within `wait` (or the turn's cancel, which
    /// withdraws it), else the question stays open: the task logs a later
    /// answer (once the caller has logged the call pending, through the
    /// returned sender) and hands it to the model before its next step
    /// (until the session closes).
    async fn ask_timed(
        &self,
        call: &ToolCallRequest,
        questions: &[dsh_protocol::question::UserQuestion],
        ask: Ask,
        wait: std::time::Duration,
        outlet: std::sync::Arc<dyn crate::frontend::Frontend>,
    ) -> Result<permission::Answer, tokio::sync::oneshot::Sender<()>> {
        let (answered, mut answer) = tokio::sync::oneshot::channel();
        let (pending, logged) = tokio::sync::oneshot::channel::<()>();
        let (session, closing) = (self.session.clone(), self.session.closing());
        let (call_id, questions) = (call.id.clone(), questions.to_vec());
        let asking = tokio::spawn(async move {
            let answer = tokio::select! {
                answer = outlet.ask(ask) => answer,
                () = closing.cancelled() => return,
            };
            let Err(late) = answered.send(answer) else {
                return;
            };
            // After the call's own "pending" (or its failure to log it).
            let _ = logged.await;
            // The call returned without it: logged now, and given to the
            // model before its next step.
            let (outcome, answers) = late.settled_questions(&questions);
            if matches!(
                outcome,
                dsh_protocol::question::QuestionOutcome::Cancelled
                    | dsh_protocol::question::QuestionOutcome::Unavailable
            ) {
                return;
            }
            let recorded = session.record(
                EventData::QuestionDecision {
                    call_id: call_id.clone(),
                    outcome,
                    answers: answers.clone(),
                },
                &*outlet,
            );
            if recorded.is_ok() {
                let result = tools::question_result(&questions, outcome, &answers);
                let text = format!(
                    "{}\n{}\n</system-reminder>",
                    dsh_protocol::history::CONTEXT_OPEN,
                    tools::late_answer(call_id.as_str(), &result)
                );
                session.deliver_late(text);
            }
        });
        let timer = tokio::time::sleep(wait);
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => {
                asking.abort();
                Ok(permission::Answer::Cancelled)
            }
            answer = &mut answer => Ok(answer.unwrap_or(permission::Answer::Unavailable)),
            () = timer => {
                // An answer that came as the wait ended is still this call's.
                answer.close();
                answer.try_recv().map_err(|_| pending)
            }
        }
    }

    /// After an edit, a language server already running for the file is
    /// asked for fresh diagnostics (bounded wait); new errors are appended so
    /// the model sees what it broke.
    async fn append_new_errors(&self, planned: &Planned, outcome: &mut ToolOutcome) {
        let (Some(bridge), Access::Write(paths)) =
            (self.session.existing_bridge(), &planned.access)
        else {
            return;
        };
        let Some(path) = paths.first() else { return };
        let new_text = outcome
            .view
            .content
            .iter()
            .find_map(|content| match content {
                ToolContent::Diff(diff) => Some(diff.new_text.clone()),
                _ => None,
            });
        let Some(new_text) = new_text else { return };
        let Some((server, diagnostics)) = bridge.diagnostics_if_running(path, &new_text).await
        else {
            return;
        };
        let errors: Vec<_> = diagnostics
            .iter()
            .filter(|d| d.severity == dsh_lsp_bridge::Severity::Error)
            .collect();
        if errors.is_empty() {
            return;
        }
        outcome.output.push_str(&format!(
            "\n\n{server} now reports {} error(s) in this file:\n",
            errors.len()
        ));
        for error in errors.iter().take(20) {
            outcome.output.push_str(&format!(
                "  {}:{}  {}\n",
                error.location.line + 1,
                error.location.character + 1,
                error.message
            ));
        }
        if errors.len() > 20 {
            outcome
                .output
                .push_str(&format!("  ({} more)\n", errors.len() - 20));
        }
    }

    fn record_call(&self, call: &ToolCallRequest, view: ToolView) -> Result<(), AgentError> {
        if crate::tools::touches_files(&call.name) {
            self.touched
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .planned
                .insert(
                    call.id.clone(),
                    view.locations
                        .iter()
                        .map(|location| PathBuf::from(&location.path))
                        .collect(),
                );
        }
        self.record(EventData::ToolCall {
            turn: self.number,
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            view,
        })
    }

    fn record_result(
        &self,
        call: &ToolCallRequest,
        outcome: ToolOutcome,
    ) -> Result<(), AgentError> {
        if let Some(entries) = outcome.plan.clone() {
            self.record(EventData::Plan { entries })?;
        }
        let status = outcome.status();
        // Paths a tool that touches files worked on, for the nested
        // instructions of their directories.
        let planned = self
            .touched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .planned
            .remove(&call.id)
            .unwrap_or_default();
        if status == ToolStatus::Completed && crate::tools::touches_files(&call.name) {
            let mut touched = self.touched.lock().unwrap_or_else(|e| e.into_inner());
            touched.paths.extend(planned);
            touched.paths.extend(
                outcome
                    .view
                    .locations
                    .iter()
                    .map(|location| PathBuf::from(&location.path)),
            );
        }
        self.record(EventData::ToolResult {
            turn: self.number,
            call_id: call.id.clone(),
            status,
            output: outcome.output,
            error: outcome.error,
            view: outcome.view,
            attachments: outcome.attachments,
            live_terminal: outcome.live_terminal,
            job: outcome.job,
            usage: outcome.usage,
        })
    }
}
