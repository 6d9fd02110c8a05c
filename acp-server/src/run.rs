//! `dsh run`: one task, unattended — the front end for CI jobs.
//!
//! The same core as ACP (session log, tools, policy, language servers);
//! what it shows comes from the same places: the logged events (`--json`
//! prints them as they are recorded, and the final text is the last
//! reply's, or a slash command's answer) and the projected updates (one
//! stderr line per tool call). Settings are checked before a session
//! opens, and a run that fails before its turn leaves no session.
//! Permission asks are decided by `--approve`, never by a person; the
//! model's questions are answered from `--answers`, or told no one is
//! there.
//!
//! What the model controls (the answer, tool titles and errors) is written
//! as it is to a file or a pipe, and with its control sequences written out
//! (`\u{1b}`, [`dsh_protocol::content::visible`]) to a terminal, where
//! they could write the clipboard (OSC 52), hide text or move the cursor:
//! [`for_stream`]. `--json` is JSON either way, and always ends with the
//! result object, also when the run fails before its turn.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use dsh_protocol::log::{ConfigKey, Event, EventData, StopReason};
use dsh_protocol::model::Usage;
use dsh_protocol::tool::ToolStatus;
use dsh_protocol::{SessionId, UserContent};
use futures::future::BoxFuture;

use crate::agent::Agent;
use crate::context::commands::Invocation;
use crate::error::AgentError;
use crate::frontend::{Ask, Frontend, Output};
use crate::permission::Approvals;
use crate::update::AgentUpdate;

mod answers;
mod progress;
mod result;

use result::result_object;
mod wakeups;

pub use answers::GivenAnswer;
use answers::{answers_to, parse_answers};

/// `dsh run`'s flags.
#[derive(Debug, Clone)]
pub struct RunArgs {
    /// Working directory (default: the current one).
    pub cwd: PathBuf,
    /// How asks are answered (never `Client`: no one is there).
    pub approve: Approvals,
    /// Model id.
    pub model: Option<String>,
    /// Thinking level.
    pub thought_level: Option<String>,
    /// A session to continue.
    pub session: Option<String>,
    /// NDJSON on stdout.
    pub json: bool,
    /// No progress on stderr (tool lines, spinner, command output).
    pub quiet: bool,
    /// Give up (and cancel) after this long.
    pub timeout: Option<Duration>,
    /// Model calls per turn.
    pub max_steps: Option<u64>,
    /// Answers to the model's questions, by question id.
    pub answers: Option<std::collections::BTreeMap<String, GivenAnswer>>,
    /// The task.
    pub task: String,
}

/// `dsh run`'s command line as written (clap parses it; values are checked
/// as they are parsed). [`RunFlags::into_args`] makes the [`RunArgs`].
#[derive(Debug, Clone, clap::Args)]
pub struct RunFlags {
    /// Working directory (default: the current one)
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// How permission asks are decided: never rejects them all, edits
    /// accepts file edits only, sandboxed accepts edits and commands (run
    /// in the kernel sandbox: writes in the workspace only, no network),
    /// all is full access (no sandbox)
    #[arg(long, value_name = "never|edits|sandboxed|all", value_parser = parse_approve)]
    pub approve: Option<Approvals>,
    /// Model id
    #[arg(long, value_name = "ID")]
    pub model: Option<String>,
    /// Thinking level
    #[arg(long, value_name = "off|low|high|max")]
    pub thought_level: Option<String>,
    /// Continue this session
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// The session log's events as NDJSON on stdout, then a result object
    #[arg(long)]
    pub json: bool,
    /// No progress on stderr: no line per tool call, spinner or command
    /// output (on a terminal, commands' output is shown as it comes)
    #[arg(long, short)]
    pub quiet: bool,
    /// Give up (and cancel) after this many seconds
    #[arg(long, value_name = "SECS", value_parser = parse_timeout, allow_negative_numbers = true)]
    pub timeout: Option<Duration>,
    /// Model calls per turn
    #[arg(long, value_name = "N", value_parser = parse_max_steps, allow_negative_numbers = true)]
    pub max_steps: Option<u64>,
    /// Answers to the model's questions, by question id: {"id": "label"},
    /// ["a", "b"] or {"custom": "text"}; @FILE reads them from FILE
    #[arg(long, value_name = "JSON|@FILE")]
    pub answers: Option<String>,
    /// The task (quote it); `-`, or none when stdin is not a terminal,
    /// reads it from stdin
    #[arg(value_name = "TASK")]
    pub task: Option<String>,
}

impl RunFlags {
    /// The run these flags ask for: reads the task from stdin when it is
    /// `-`, or absent and stdin is not a terminal; resolves `--cwd`.
    ///
    /// # Errors
    /// A usage error, as a message: an empty task, a `--cwd` that is not a
    /// directory, stdin that cannot be read.
    pub fn into_args(self) -> Result<RunArgs, String> {
        let mut task = self.task;
        let from_stdin = match task.as_deref() {
            Some("-") => true,
            None => !std::io::stdin().is_terminal(),
            Some(_) => false,
        };
        if from_stdin {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|err| format!("cannot read the task from stdin: {err}"))?;
            task = Some(text);
        }
        let task = task.unwrap_or_default();
        if task.trim().is_empty() {
            return Err("the task is empty".to_owned());
        }
        let cwd = match self.cwd {
            Some(cwd) => cwd,
            None => {
                std::env::current_dir().map_err(|err| format!("no current directory: {err}"))?
            }
        };
        let cwd = dunce::canonicalize(&cwd)
            .ok()
            .filter(|dir| dir.is_dir())
            .ok_or_else(|| format!("--cwd {}: not a directory", cwd.display()))?;
        let answers = self
            .answers
            .map(|answers| parse_answers(&answers, &cwd))
            .transpose()?;
        Ok(RunArgs {
            cwd,
            approve: self.approve.unwrap_or(Approvals::Never),
            model: self.model,
            thought_level: self.thought_level,
            session: self.session,
            json: self.json,
            quiet: self.quiet,
            timeout: self.timeout,
            max_steps: self.max_steps,
            answers,
            task,
        })
    }
}

/// `--approve`'s value (never `client`: no one is there).
fn parse_approve(text: &str) -> Result<Approvals, String> {
    Approvals::parse(text)
        .filter(|approve| *approve != Approvals::Client)
        .ok_or_else(|| "use never, edits, sandboxed or all".to_owned())
}

/// `--timeout`'s value: a positive number of seconds.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| "give a number of seconds".to_owned())?;
    if !(secs > 0.0 && secs.is_finite()) {
        return Err("give a positive number of seconds".to_owned());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `--max-steps`' value: a positive number.
fn parse_max_steps(text: &str) -> Result<u64, String> {
    text.parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| "give a positive number".to_owned())
}

/// What the run showed and saw.
struct Seen {
    /// The run's text: a slash command's answer (the notices recorded
    /// before a turn starts: `/help`, `/skills`, a setting changed), then,
    /// once a turn starts, its last reply's.
    text: String,
    /// Whether a turn started (its replies are the text from then on).
    turn_started: bool,
    /// Whether the run recorded anything but its settings: until then it
    /// has failed before its turn ([`turn`]).
    recorded: bool,
    /// Usage summed over the run's model calls.
    usage: Usage,
    /// What the session's model calls cost so far (the latest usage
    /// update's, from the session's fold).
    cost: Option<dsh_protocol::model::Cost>,
    /// Tool call titles, until they finish.
    titles: std::collections::HashMap<String, String>,
    /// The goal after the run's last change of it (cleared: none).
    goal: Option<dsh_protocol::log::Goal>,
}

impl Seen {
    fn add(&mut self, usage: Option<&Usage>) {
        if let Some(usage) = usage {
            self.usage.add(usage);
        }
    }
}

/// `text` as written to a stream: as it is, unless the stream is a
/// terminal, where control characters (escape sequences among them), bidi
/// overrides and zero-width characters are written out as `\u{…}`
/// (newlines and tabs stay).
pub fn for_stream(text: &str, is_tty: bool) -> Cow<'_, str> {
    if is_tty {
        Cow::Owned(dsh_protocol::content::visible(text, true))
    } else {
        Cow::Borrowed(text)
    }
}

/// Writes one line to stderr, escaped: on a terminal what could drive it,
/// and piped a line break too — a CI log reads each line on its own
/// (`::add-mask::`, `##vso[…]`), and text from the model or a workspace
/// must not start one. `--json` carries the text as it is.
fn stderr_line(text: &str) {
    write_stderr_line(text, std::io::stderr().is_terminal());
}

/// [`stderr_line`] when whether stderr is a terminal is known.
fn write_stderr_line(text: &str, terminal: bool) {
    let text = dsh_protocol::content::visible(text, terminal);
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// The front end: stderr for people, stdout for the result.
struct RunFrontend {
    approve: Approvals,
    answers: Option<std::collections::BTreeMap<String, GivenAnswer>>,
    json: bool,
    seen: Mutex<Seen>,
    progress: progress::Progress,
}

impl RunFrontend {
    fn line(&self, text: &str) {
        self.progress.line(text);
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl RunFrontend {
    /// A tool call's progress on stderr (and the spinner's message).
    fn show_update(&self, update: AgentUpdate) {
        match update {
            AgentUpdate::ToolCall { call_id, view, .. } => {
                self.progress.waiting_for(&view.title);
                self.seen().titles.insert(call_id.to_string(), view.title);
            }
            AgentUpdate::ToolCallUpdate {
                call_id, status, ..
            } if matches!(status, ToolStatus::Completed | ToolStatus::Failed) => {
                let title = self
                    .seen()
                    .titles
                    .remove(call_id.as_str())
                    .unwrap_or_else(|| call_id.to_string());
                let mark = if status == ToolStatus::Completed {
                    "✓"
                } else {
                    "✗"
                };
                self.progress.tool_line(&format!("{mark} {title}"));
                self.progress.waiting_for("waiting for the model");
            }
            AgentUpdate::Usage {
                cost: Some(cost), ..
            } => self.seen().cost = Some(cost),
            _ => {}
        }
    }

    /// The event on stdout (`--json`), the final text and usage, and a
    /// failed tool's error on stderr.
    fn show_event(&self, event: &Event) {
        if self.json {
            if let Ok(line) = serde_json::to_string(event) {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{line}");
                let _ = stdout.flush();
            }
        }
        if !matches!(event.data, EventData::Config { .. }) {
            self.seen().recorded = true;
        }
        match &event.data {
            EventData::Notice { text } => {
                let mut seen = self.seen();
                if !seen.turn_started {
                    if !seen.text.is_empty() {
                        seen.text.push('\n');
                    }
                    seen.text.push_str(text);
                }
            }
            EventData::TurnStart { .. } => {
                let mut seen = self.seen();
                seen.turn_started = true;
                seen.text.clear();
            }
            EventData::AssistantMessage { text, usage, .. } => {
                let mut seen = self.seen();
                if !text.is_empty() {
                    seen.text.clone_from(text);
                }
                seen.add(usage.as_ref());
            }
            // The side request that named the session counts too.
            EventData::Title { usage, .. } => self.seen().add(usage.as_ref()),
            EventData::ToolResult {
                call_id,
                error,
                usage,
                ..
            } => {
                // A subagent's tokens count too.
                self.seen().add(usage.as_ref());
                if let Some(error) = error {
                    let title = self
                        .seen()
                        .titles
                        .get(call_id.as_str())
                        .cloned()
                        .unwrap_or_default();
                    self.progress
                        .tool_line(&format!("  {title}: {}", error.message));
                }
            }
            EventData::JobEnd { usage, .. } => self.seen().add(usage.as_ref()),
            EventData::GoalChange { change, goal } => {
                let cleared = *change == dsh_protocol::log::GoalChangeKind::Cleared;
                self.seen().goal = (!cleared).then(|| goal.clone());
                let line = crate::projection::goal_line(*change, goal);
                self.progress.tool_line(&line);
            }
            _ => {}
        }
    }
}

impl Frontend for RunFrontend {
    fn emit(&self, output: Output<'_>) {
        match output {
            Output::Recorded { event, updates } => {
                self.show_event(event);
                updates
                    .into_iter()
                    .for_each(|update| self.show_update(update));
            }
            Output::Transient(crate::frontend::Transient::Command { call_id, live }) => {
                self.progress.command(call_id.as_str(), &live);
            }
            Output::Transient(transient) => self.show_update(transient.into_update()),
            // The final text comes from the recorded reply; a run replays
            // nothing.
            Output::Delta(_) | Output::Replayed(_) => {}
        }
    }

    fn ask(&self, ask: Ask) -> BoxFuture<'_, crate::permission::Answer> {
        if let crate::permission::Question::User(questions) = &ask.question {
            let answers = answers_to(questions, self.answers.as_ref());
            for (question, answer) in questions.iter().zip(&answers) {
                let said = match (answer.selected.as_slice(), &answer.custom) {
                    ([], None) => format!("({})", crate::tools::NO_USER),
                    ([], Some(custom)) => custom.clone(),
                    (selected, None) => selected.join(", "),
                    (selected, Some(custom)) => format!("{}; {custom}", selected.join(", ")),
                };
                self.line(&format!("question {}: {}", question.id, question.question));
                self.line(&format!("  answer: {said}"));
            }
            return Box::pin(std::future::ready(crate::permission::Answer::Questions(
                answers,
            )));
        }
        let outcome = ask
            .standing_answer(self.approve)
            .unwrap_or(crate::permission::Answer::Unavailable);
        let why = format!(
            "{} (--approve {}{})",
            if outcome.allows() {
                "allowed"
            } else {
                "rejected"
            },
            self.approve.name(),
            match (self.approve, ask.unattended) {
                (_, crate::permission::Unattended::PersonOnly) => {
                    ": only a person may allow this"
                }
                (Approvals::Sandboxed, crate::permission::Unattended::FullAccessOnly) => {
                    ": it names a protected path, which only --approve all allows"
                }
                (Approvals::Edits, _) => " allows edits only",
                (Approvals::Sandboxed, _) => " allows edits and sandboxed commands",
                _ => "",
            },
        );
        tracing::info!(call = %ask.call_id, title = %ask.title, ?outcome, "permission decided by --approve");
        self.line(&format!("permission {why}: {}", ask.title));
        Box::pin(std::future::ready(outcome))
    }
}

/// The configuration did not load, so nothing runs: said once, plainly, on
/// stderr (with `--json`, the result object too); exit status 2, as for a
/// usage error.
pub fn misconfigured(args: &RunArgs, error: &crate::config::ConfigError) -> u8 {
    let error = AgentError::Config(error.to_string());
    if args.json {
        let result = result_object(
            None,
            "error".into(),
            None,
            0,
            Some((error.code().as_str(), &error.to_string())),
        );
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{result}");
        let _ = stdout.flush();
    }
    stderr_line(&format!("dsh run: {error}"));
    2
}

/// Runs the task; the process's exit status.
pub async fn run(agent: Arc<Agent>, mut args: RunArgs) -> u8 {
    let started = Instant::now();
    let frontend = Arc::new(RunFrontend {
        approve: args.approve,
        answers: std::mem::take(&mut args.answers),
        json: args.json,
        seen: Mutex::new(Seen {
            text: String::new(),
            turn_started: false,
            recorded: false,
            usage: Usage::default(),
            cost: None,
            titles: Default::default(),
            goal: None,
        }),
        progress: progress::Progress::new(args.quiet),
    });
    let outcome = turn(&agent, &args, &frontend).await;
    frontend.progress.finish();
    let (session, result) = match outcome {
        Ok(done) => done,
        Err((session, error)) => {
            agent.shutdown().await;
            if args.json {
                let result = result_object(
                    session.as_deref(),
                    "error".into(),
                    None,
                    started.elapsed().as_millis() as u64,
                    Some((error.code().as_str(), &error.to_string())),
                );
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{result}");
                let _ = stdout.flush();
            }
            stderr_line(&format!("dsh run: {}: {error}", error.code()));
            return match error {
                AgentError::InvalidParams(_) => 2,
                _ => 1,
            };
        }
    };
    agent.shutdown().await;
    let (stop, error, interrupted) = result;
    let seen = frontend.seen();
    let duration = started.elapsed().as_millis() as u64;
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let stop_name = match (&stop, &error) {
            (Some(stop), _) => serde_json::to_value(stop).unwrap_or_default(),
            (None, _) => "error".into(),
        };
        let result = result_object(
            Some(&session),
            stop_name,
            Some(&seen),
            duration,
            error
                .as_ref()
                .map(|(code, message)| (code.as_str(), message.as_str())),
        );
        let _ = writeln!(stdout, "{result}");
    } else if stop == Some(StopReason::EndTurn) && !seen.text.is_empty() {
        let text = for_stream(seen.text.trim_end(), std::io::stdout().is_terminal());
        let _ = writeln!(stdout, "{text}");
    }
    let _ = stdout.flush();
    if interrupted {
        stderr_line(&format!(
            "dsh run: interrupted; continue with --session {session}"
        ));
        return 130;
    }
    match (stop, error) {
        (Some(StopReason::EndTurn), _) => result::ended(seen.goal.as_ref()),
        (_, Some((code, message))) => {
            stderr_line(&format!("dsh run: {code}: {message}"));
            1
        }
        (Some(stop), None) => {
            stderr_line(&format!(
                "dsh run: the turn stopped: {}",
                serde_json::to_value(stop).unwrap_or_default()
            ));
            1
        }
        (None, None) => 1,
    }
}

/// How the turn ended: its stop reason, the failure (stable code and
/// message), and whether a signal interrupted it.
type Finished = (Option<StopReason>, Option<(String, String)>, bool);

/// Opens (or continues) the session and runs the task in it. A session
/// the run opened is removed again when the run fails before its turn.
async fn turn(
    agent: &Arc<Agent>,
    args: &RunArgs,
    frontend: &Arc<RunFrontend>,
) -> Result<(String, Finished), (Option<String>, AgentError)> {
    if args.approve == Approvals::Sandboxed
        && !matches!(
            agent.config().command_guard(),
            crate::sandbox::Guard::Kernel { .. }
        )
    {
        return Err((
            None,
            AgentError::InvalidParams(
            "--approve sandboxed: this kernel cannot sandbox commands (no usable Landlock); use --approve edits, or all for full access".to_owned(),
            ),
        ));
    }
    // Allowed without a person, commands must be off the network for
    // real: without a namespace of their own only TCP is stopped.
    if args.approve == Approvals::Sandboxed && !agent.config().spawner.own_namespaces().await {
        return Err((
            None,
            AgentError::InvalidParams(
                "--approve sandboxed: commands cannot get network and mount namespaces of their own here (unprivileged user namespaces are off: a container's default profile, AppArmor or a sysctl), so the sandbox would stop TCP only and leave UDP, DNS and local sockets open; use --approve edits, or allow user namespaces".to_owned(),
            ),
        ));
    }
    // Checked before a session is opened: a run that fails here leaves
    // none behind.
    let content = vec![UserContent::text(args.task.clone())];
    let settings = settings(agent, args, &content)
        .await
        .map_err(|error| (None, error))?;
    let opened = match &args.session {
        Some(id) => {
            agent
                .resume_session(&SessionId::new(id.as_str()), Vec::new())
                .await
        }
        None => agent.new_session(&args.cwd, &[], Vec::new()).await,
    }
    .map_err(|error| (None, error))?;
    let id = opened.session.id.clone();
    // Said once, as soon as there is one: a later step continues it with
    // --session (and a run killed on the way still named it).
    frontend.line(&format!("session: {id}"));
    match in_session(agent, args, frontend, &id, &settings, content).await {
        Ok(finished) => Ok((id.to_string(), finished)),
        // Nothing of the turn was recorded: the session this run opened
        // goes again (an empty "(untitled)" one helps no one).
        Err(error) if args.session.is_none() => match agent.delete_session(&id).await {
            Ok(()) => Err((None, error)),
            Err(err) => {
                tracing::warn!(session = %id, %err, "the failed run's session was not removed");
                Err((Some(id.to_string()), error))
            }
        },
        Err(error) => Err((Some(id.to_string()), error)),
    }
}

/// The settings the run gives its session — `--approve`'s mode, `--model`,
/// `--thought-level` — each checked as the session checks it; and a task
/// that is `/mode` or `/model` checked the same way (in a chat a bad value
/// is answered with the choices; unattended it is a usage error).
async fn settings<'a>(
    agent: &Agent,
    args: &'a RunArgs,
    content: &[UserContent],
) -> Result<Vec<(ConfigKey, &'a str)>, AgentError> {
    let settings: Vec<(ConfigKey, &'a str)> = [
        (ConfigKey::Mode, args.approve.mode()),
        (ConfigKey::Model, args.model.as_deref()),
        (ConfigKey::ThoughtLevel, args.thought_level.as_deref()),
    ]
    .into_iter()
    .filter_map(|(key, value)| Some((key, value?)))
    .collect();
    let task = match crate::context::commands::parse(content) {
        Some(Invocation::Set { key, value }) => Some((key, value)),
        _ => None,
    };
    let checked: Vec<(ConfigKey, &str)> = settings
        .iter()
        .copied()
        .chain(task.as_ref().map(|(key, value)| (*key, value.as_str())))
        .collect();
    agent.validate_settings(&checked).await?;
    Ok(settings)
}

/// Sets the settings and runs the task in the open session `id`.
///
/// # Errors
/// What failed before the turn recorded anything: the run failed before
/// its turn.
async fn in_session(
    agent: &Arc<Agent>,
    args: &RunArgs,
    frontend: &Arc<RunFrontend>,
    id: &SessionId,
    settings: &[(ConfigKey, &str)],
    content: Vec<UserContent>,
) -> Result<Finished, AgentError> {
    for (key, value) in settings {
        agent.set_config_option(id, *key, value, frontend.as_ref())?;
    }
    let waking = wakeups::RunWakeups::install(agent, id, frontend, args)?;
    let ticket = agent.begin_prompt(id).await?;
    let prompt = agent.prompt(
        ticket,
        content,
        crate::session::Subscriber::new(frontend.clone()),
    );
    tokio::pin!(prompt);
    let deadline = async {
        match args.timeout {
            Some(timeout) => tokio::time::sleep(timeout).await,
            None => std::future::pending().await,
        }
    };
    let mut interrupted = false;
    let mut timed_out = false;
    let outcome = tokio::select! {
        outcome = &mut prompt => outcome,
        signal = shutdown_signal() => {
            tracing::info!(signal, "interrupted: cancelling the turn");
            interrupted = true;
            agent.cancel(id);
            prompt.await
        }
        () = deadline => {
            timed_out = true;
            agent.cancel(id);
            prompt.await
        }
    };
    let outcome = wakeups::go_on(waking, agent, outcome, [&mut interrupted, &mut timed_out]).await;
    Ok(match outcome {
        Ok(stop) if timed_out => (
            Some(stop),
            Some((
                dsh_protocol::ErrorCode::RunTimeout.as_str().to_owned(),
                format!(
                    "the task did not finish within --timeout {} s; the turn was cancelled",
                    args.timeout.unwrap_or_default().as_secs_f64()
                ),
            )),
            false,
        ),
        Ok(stop) => (Some(stop), None, interrupted),
        // A project's hooks that do not load, a key gone meanwhile.
        Err(error) if !interrupted && !frontend.seen().recorded => return Err(error),
        Err(error) => (
            None,
            Some((error.code().as_str().to_owned(), error.to_string())),
            interrupted,
        ),
    })
}

/// The first SIGTERM or SIGINT; its name.
#[cfg(unix)]
pub async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

/// The first console control event that asks dsh to stop — Ctrl+C,
/// Ctrl+Break, or the console window closing (Windows then allows a few
/// seconds to clean up) — by name. Windows' stand-in for SIGINT and
/// SIGTERM: a process is stopped there by these or forcibly, never by a
/// signal it could handle.
#[cfg(windows)]
pub async fn shutdown_signal() -> &'static str {
    use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
    let (Ok(mut int), Ok(mut brk), Ok(mut close)) = (ctrl_c(), ctrl_break(), ctrl_close()) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "CTRL_C",
        _ = brk.recv() => "CTRL_BREAK",
        _ = close.recv() => "CTRL_CLOSE",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sequences_are_written_out_on_a_terminal_only() {
        let hostile =
            "ok \u{1b}]52;c;ZXZpbA==\u{7} \u{1b}[8mhidden\u{1b}[0m \u{9b}2J \u{202e}abc\r\n\tnext";
        assert_eq!(
            for_stream(hostile, true),
            "ok \\u{1b}]52;c;ZXZpbA==\\u{7} \\u{1b}[8mhidden\\u{1b}[0m \\u{9b}2J \\u{202e}abc\\u{d}\n\tnext"
        );
        // Piped or to a file: byte for byte.
        assert!(matches!(for_stream(hostile, false), Cow::Borrowed(text) if text == hostile));
        assert_eq!(
            for_stream("plain text, ünïcode", true),
            "plain text, ünïcode"
        );
    }

    #[test]
    fn the_result_object_has_one_shape() {
        let early = result_object(
            None,
            "error".into(),
            None,
            7,
            Some(("session.not_found", "session x not found")),
        );
        assert_eq!(
            early,
            serde_json::json!({
                "type": "result",
                "sessionId": null,
                "stopReason": "error",
                "text": "",
                "usage": Usage::default(),
                "cost": null,
                "durationMs": 7,
                "error": {"code": "session.not_found", "message": "session x not found"},
            })
        );
    }
}
