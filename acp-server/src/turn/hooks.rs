//! Hooks at a turn's points ([`crate::hooks`]): `SessionStart` (the
//! session's first prompt) and `UserPromptSubmit` before the prompt is
//! recorded, `PreToolUse` before a call's permission is decided,
//! `PostToolUse` after it ran, `Stop` when the model ends the turn. Each
//! run is recorded as `hook/result`.
//!
//! A project's hooks (`.dsh/hooks.json`) are code from the repository:
//! they run only once the user allowed that content of the file
//! ("Run this project's hooks?"). Every answer is bound to the content it
//! was given for (its SHA-256): "always" is remembered per hash in the log
//! (`hook/consent`), "this time" holds for that hash until the turn ends.
//! A turn reads the file once, at its first hook point; the subagents it
//! starts use that read and never read the file themselves, so a file
//! rewritten during the turn runs nothing until the next turn asks about
//! it. A foreground child is part of the turn and shares its one-time
//! answer; a background child outlives the turn, so it does not: it asks
//! again (in the parent's editor, like its other permissions). An allow
//! given outside `read-only` and `plan` does not cover those modes (they
//! ask again). No answer runs nothing.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use dsh_protocol::hook::{HookConsent, HookRun};
use dsh_protocol::log::{EventData, PermissionOutcome, PermissionRule};
use dsh_protocol::model::ToolCallRequest;
use dsh_protocol::tool::{ToolContent, ToolKind, ToolOutcome};
use dsh_protocol::{ErrorCode, Mode, ToolCallId, UserContent};
use serde_json::{json, Value};

use super::Turn;
use crate::error::AgentError;
use crate::frontend::Ask;
use crate::hooks::{HookEvent, Permission, ProjectHooks, Verdict};
use crate::permission::{self, AnswerOption, Decision};
use crate::tools::Planned;

/// How many times `Stop` hooks may keep one turn going.
const MAX_STOP_BLOCKS: u32 = 3;

/// The stderr kept in `hook/result`, bytes.
const STDERR_SUMMARY: usize = 1000;

/// A turn's hook state.
#[derive(Default)]
pub(super) struct TurnHooks {
    /// The project's hooks as this turn read them, and its one-time
    /// answer about them (shared with its foreground subagents).
    project: Arc<ProjectRead>,
    /// `Stop` hooks that blocked so far.
    stops: AtomicU32,
}

/// The project's hooks file as one turn read it, and the turn's one-time
/// answer about that content.
#[derive(Default)]
pub(super) struct ProjectRead {
    /// The file, read at the turn's first hook point (`None`: none, or
    /// invalid).
    file: tokio::sync::OnceCell<Option<ProjectHooks>>,
    /// The turn's answer when it was not remembered (once, or none).
    answered: std::sync::Mutex<Option<Answered>>,
}

/// A turn's one-time answer about the project's hooks.
#[derive(Debug, Clone)]
struct Answered {
    /// The SHA-256 of the content it was given for: it holds for no other.
    hash: String,
    /// Run them.
    allow: bool,
    /// It was given in read-only or plan mode (an allow given in another
    /// mode does not hold once the mode is one of those: asked again).
    read_only: bool,
}

impl TurnHooks {
    /// A subagent's turn's hooks: `project` is its parent turn's read
    /// ([`TurnHooks::for_child`]).
    pub(super) fn delegated(project: Arc<ProjectRead>) -> TurnHooks {
        TurnHooks {
            project,
            ..TurnHooks::default()
        }
    }

    /// What a subagent this turn starts gets of the project's hooks: this
    /// turn's read of the file (the child never reads it), and — in the
    /// foreground, which ends within this turn — this turn's one-time
    /// answer. A background child outlives the turn: no answer, so it asks
    /// again. A file this turn has not read (no hook point reached, project
    /// hooks off) is none to the child.
    pub(super) fn for_child(&self, background: bool) -> Arc<ProjectRead> {
        if !background {
            return self.project.clone();
        }
        let file = self.project.file.get().cloned().flatten();
        Arc::new(ProjectRead {
            file: tokio::sync::OnceCell::new_with(Some(file)),
            answered: std::sync::Mutex::default(),
        })
    }
}

impl ProjectRead {
    fn answered(&self) -> std::sync::MutexGuard<'_, Option<Answered>> {
        self.answered.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Turn<'_> {
    fn project_root(&self) -> PathBuf {
        self.session
            .roots
            .first()
            .cloned()
            .unwrap_or_else(|| PathBuf::from(&self.session.header.cwd))
    }

    /// The fields every event's input has.
    fn hook_input(&self, event: HookEvent) -> serde_json::Map<String, Value> {
        let mut input = serde_json::Map::new();
        input.insert("session_id".into(), json!(self.session.id.as_str()));
        input.insert("cwd".into(), json!(self.session.header.cwd));
        input.insert("hook_event_name".into(), json!(event.as_str()));
        input.insert(
            "permission_mode".into(),
            json!(self.session.mode().as_str()),
        );
        input
    }

    /// Runs the hooks of `event` that match `subject`, records each run,
    /// and returns what they said together.
    async fn run_hooks(
        &self,
        event: HookEvent,
        subject: &str,
        input: serde_json::Map<String, Value>,
        call_id: Option<&ToolCallId>,
    ) -> Result<Verdict, AgentError> {
        let settings = &self.config.hooks;
        let mut hooks = settings.user.matching(event, subject);
        if settings.settings.project {
            if let Some(project) = self.project_hooks().await? {
                let matched = project.set.matching(event, subject);
                if !matched.is_empty() && self.consented(project).await? {
                    hooks.extend(matched);
                }
            }
        }
        let mut verdict = Verdict::default();
        if hooks.is_empty() {
            return Ok(verdict);
        }
        let input = Value::Object(input);
        let root = self.project_root();
        let runs = hooks.iter().map(|hook| {
            crate::hooks::run(crate::hooks::Invocation {
                hook,
                input: &input,
                project: &root,
                spawner: &self.config.spawner,
                cancel: self.cancel,
            })
        });
        let reports = futures::future::join_all(runs).await;
        for (hook, report) in hooks.iter().zip(&reports) {
            let before = verdict.block.is_some() || verdict.permission == Some(Permission::Deny);
            verdict.add(report, event);
            let blocked = !before
                && (verdict.block.is_some() || verdict.permission == Some(Permission::Deny));
            let stderr = report.stderr.trim();
            let stderr = if stderr.len() > STDERR_SUMMARY {
                format!(
                    "…{}",
                    dsh_protocol::content::tail_bytes(stderr, STDERR_SUMMARY)
                )
            } else {
                stderr.to_owned()
            };
            tracing::info!(event = event.as_str(), code = ?report.exit_code, blocked, "hook ran");
            self.record(EventData::HookResult(HookRun {
                event: event.as_str().to_owned(),
                command: dsh_protocol::content::visible_title(&hook.command, 200),
                source: hook.source.as_str().to_owned(),
                call_id: call_id.cloned(),
                exit_code: report.exit_code,
                failure: report.failure.clone(),
                blocked,
                duration_ms: u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX),
                stderr,
            }))?;
        }
        Ok(verdict)
    }

    /// The project's hooks file, read once per turn; an invalid one is
    /// reported once and runs nothing.
    async fn project_hooks(&self) -> Result<Option<&ProjectHooks>, AgentError> {
        let root = self.project_root();
        let timeout = self.config.hooks.settings.timeout();
        let mut failed = None;
        let failed_at = &mut failed;
        let project = self
            .hooks
            .project
            .file
            .get_or_init(|| async move {
                let read =
                    tokio::task::spawn_blocking(move || crate::hooks::read_project(&root, timeout))
                        .await
                        .unwrap_or_else(|err| Err(err.to_string()));
                read.unwrap_or_else(|err| {
                    *failed_at = Some(err);
                    None
                })
            })
            .await;
        if let Some(err) = failed {
            self.notice(&format!("The project's hooks were not run: {err}"))?;
        }
        Ok(project.as_ref().filter(|project| !project.set.is_empty()))
    }

    /// Whether the project's hooks may run: remembered for this content,
    /// answered for this content earlier in this turn, or asked now.
    async fn consented(&self, project: &ProjectHooks) -> Result<bool, AgentError> {
        let read_only = matches!(self.session.mode(), Mode::ReadOnly | Mode::Plan);
        let remembered = self
            .session
            .locked()
            .state
            .hook_consents
            .get(&project.hash)
            .cloned();
        if let Some(consent) = remembered {
            if !consent.allow {
                return Ok(false);
            }
            if !read_only || consent.read_only {
                return Ok(true);
            }
        }
        let answered = self.hooks.project.answered().clone();
        match answered {
            // Given for other content: it holds for none of this.
            Some(answer) if answer.hash != project.hash => {}
            // A refusal holds; an allow given outside read-only and plan
            // does not cover them (the mode changed during the turn).
            Some(answer) if !answer.allow || !read_only || answer.read_only => {
                return Ok(answer.allow)
            }
            Some(_) | None => {}
        }
        let path = project.path.display().to_string();
        let short = &project.hash[..12];
        let option = |outcome, label: &str| AnswerOption {
            outcome,
            label: label.to_owned(),
        };
        let question = Ask {
            call_id: ToolCallId::new(format!("hooks-{}-{short}", self.number)),
            title: format!("Run this project's hooks? ({path}, sha256 {short})"),
            kind: ToolKind::Execute,
            raw_input: json!({ "file": path, "sha256": project.hash }),
            locations: Vec::new(),
            content: vec![ToolContent::Text {
                text: format!(
                    "{path} (sha256 {}) runs these commands on this machine, with your rights and without the sandbox (every one, in full; files they run are not covered by this answer and may change):\n\n{}",
                    project.hash,
                    project.set.listing()
                ),
            }],
            question: permission::Question::Permission(vec![
                option(PermissionOutcome::AllowOnce, "Run them this time"),
                option(
                    PermissionOutcome::AllowAlways,
                    "Always run this version of them",
                ),
                option(PermissionOutcome::RejectOnce, "Don't run them"),
                option(
                    PermissionOutcome::RejectAlways,
                    "Never run this version of them",
                ),
            ]),
            unattended: permission::Unattended::PersonOnly,
        };
        let answer = tokio::select! {
            biased;
            () = self.cancel.cancelled() => PermissionOutcome::Cancelled,
            answer = self.frontend.ask(question) => answer.permission_outcome(),
        };
        tracing::info!(?answer, hash = %project.hash, "project hooks answered");
        let allow = answer.allows();
        if matches!(
            answer,
            PermissionOutcome::AllowAlways | PermissionOutcome::RejectAlways
        ) {
            self.record(EventData::HookConsent(HookConsent {
                path,
                hash: project.hash.clone(),
                allow,
                read_only,
            }))?;
        } else {
            *self.hooks.project.answered() = Some(Answered {
                hash: project.hash.clone(),
                allow,
                read_only,
            });
        }
        Ok(allow)
    }

    /// `SessionStart` (first turn) and `UserPromptSubmit`: the context
    /// they add, or `None` when a hook refused the prompt.
    pub(super) async fn prompt_hooks(
        &self,
        content: &[UserContent],
    ) -> Result<Option<Vec<String>>, AgentError> {
        let mut context = Vec::new();
        // A subagent's prompt is the model's, not the user's: the parent's
        // turn ran these.
        if self.delegated.is_some() {
            return Ok(Some(context));
        }
        if self.number == 1 {
            let mut input = self.hook_input(HookEvent::SessionStart);
            input.insert("source".into(), json!("startup"));
            let verdict = self
                .run_hooks(HookEvent::SessionStart, "startup", input, None)
                .await?;
            context.extend(verdict.context);
        }
        let prompt: Vec<&str> = content
            .iter()
            .filter_map(|block| match block {
                UserContent::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let mut input = self.hook_input(HookEvent::UserPromptSubmit);
        input.insert("prompt".into(), json!(prompt.join("\n")));
        let verdict = self
            .run_hooks(HookEvent::UserPromptSubmit, "", input, None)
            .await?;
        if verdict.block.is_some() {
            return Ok(None);
        }
        context.extend(verdict.context);
        Ok(Some(context))
    }

    /// Hands the hooks' context to the model, after the prompt.
    pub(super) fn record_hook_context(&self, context: &[String]) -> Result<(), AgentError> {
        if context.is_empty() {
            return Ok(());
        }
        self.record(EventData::Instructions {
            text: format!(
                "{}\nContext from hooks:\n{}\n</system-reminder>",
                dsh_protocol::history::CONTEXT_OPEN,
                context.join("\n\n")
            ),
            files: Vec::new(),
        })
    }

    /// `PreToolUse`: the decision to act on, or the refusal to record. A
    /// hook's `deny` (or exit 2) always wins; its `ask` asks where the
    /// policy would allow; its `allow` skips the prompt only where an
    /// "always allow" answer could have (the decision with that rule
    /// added), never past what the mode forbids.
    pub(super) async fn pre_tool_use(
        &self,
        call: &ToolCallRequest,
        planned: &Planned,
        decision: Decision,
    ) -> Result<Result<Decision, ToolOutcome>, AgentError> {
        let mut input = self.hook_input(HookEvent::PreToolUse);
        input.insert("tool_name".into(), json!(call.name));
        input.insert("tool_input".into(), tool_input(call));
        let verdict = self
            .run_hooks(HookEvent::PreToolUse, &call.name, input, Some(&call.id))
            .await?;
        if let Some(reason) = verdict.block {
            return Ok(Err(ToolOutcome::failed(
                ErrorCode::PermissionDenied,
                format!("A PreToolUse hook blocked this call; it did not run:\n{reason}"),
            )));
        }
        Ok(match (verdict.permission, decision) {
            (Some(Permission::Deny), _) => Err(ToolOutcome::failed(
                ErrorCode::PermissionDenied,
                format!(
                    "A PreToolUse hook denied this call; it did not run: {}",
                    verdict.reason.as_deref().unwrap_or("no reason given")
                ),
            )),
            (Some(Permission::Ask), Decision::Allow) => Ok(Decision::Ask(
                verdict.reason.unwrap_or_else(|| "a hook asks".to_owned()),
            )),
            (Some(Permission::Allow), Decision::Ask(reason)) => Ok(self
                .as_if_always_allowed(planned)
                .unwrap_or(Decision::Ask(reason))),
            (_, decision) => Ok(decision),
        })
    }

    /// The decision had the user answered "always allow" for this call;
    /// `None` where no such answer is offered.
    fn as_if_always_allowed(&self, planned: &Planned) -> Option<Decision> {
        let policy = self.session.policy();
        let scope = permission::rule_scope(&planned.access, &policy)?;
        let locked = self.session.locked();
        let mut rules = locked.state.rules.clone();
        rules.push(PermissionRule {
            tool: planned.name.clone(),
            scope,
            allow: true,
        });
        Some(permission::decide(
            locked.state.settings.mode,
            &planned.name,
            &planned.access,
            &policy,
            &rules,
        ))
    }

    /// `PostToolUse`: a block (exit 2 or `decision: block`) and added
    /// context are appended to the result the model sees.
    pub(super) async fn post_tool_use(
        &self,
        call: &ToolCallRequest,
        mut outcome: ToolOutcome,
    ) -> ToolOutcome {
        let mut input = self.hook_input(HookEvent::PostToolUse);
        input.insert("tool_name".into(), json!(call.name));
        input.insert("tool_input".into(), tool_input(call));
        input.insert("tool_response".into(), json!(outcome.output));
        let verdict = match self
            .run_hooks(HookEvent::PostToolUse, &call.name, input, Some(&call.id))
            .await
        {
            Ok(verdict) => verdict,
            Err(error) => {
                tracing::warn!(%error, "PostToolUse hooks not recorded");
                return outcome;
            }
        };
        if let Some(reason) = verdict.block {
            outcome
                .output
                .push_str(&format!("\n\nPostToolUse hook feedback:\n{reason}"));
        }
        for context in verdict.context {
            outcome.output.push_str(&format!("\n\n{context}"));
        }
        outcome
    }

    /// `Stop`: whether a hook asks the model to go on (its reason recorded
    /// as a message for the model), at most [`MAX_STOP_BLOCKS`] times a turn.
    pub(super) async fn stop_hooks(&self) -> Result<bool, AgentError> {
        if self.delegated.is_some() {
            return Ok(false);
        }
        let stops = self.hooks.stops.load(Ordering::Relaxed);
        if stops >= MAX_STOP_BLOCKS {
            return Ok(false);
        }
        let mut input = self.hook_input(HookEvent::Stop);
        input.insert("stop_hook_active".into(), json!(stops > 0));
        let verdict = self.run_hooks(HookEvent::Stop, "", input, None).await?;
        let Some(reason) = verdict.block else {
            return Ok(false);
        };
        self.hooks.stops.fetch_add(1, Ordering::Relaxed);
        self.record(EventData::UserMessage {
            turn: self.number,
            content: vec![UserContent::text(format!(
                "{}\nA Stop hook asks you to continue:\n{reason}\n</system-reminder>",
                dsh_protocol::history::CONTEXT_OPEN
            ))],
            steered: true,
            source: dsh_protocol::log::MessageSource::User,
        })?;
        Ok(true)
    }
}

/// The call's arguments as JSON (a string when they are not JSON).
fn tool_input(call: &ToolCallRequest) -> Value {
    serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!(call.arguments))
}
