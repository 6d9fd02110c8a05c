//! The `terminal_*` tools (seeds: `dsh-tool-terminal`, opt-in): persistent
//! shells on pseudo-terminals the model opens, feeds, reads, signals and
//! closes ([`registry`]; the output's text: [`text`]). Opening one is judged like launching
//! the shell, each sent text like a command line in the terminal's
//! directory: the policy sees both as `bash`'s commands are seen.

use std::path::PathBuf;

use dsh_protocol::tool::{ToolContent, ToolKind, ToolOutcome, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use super::{parse, paths, whole_number, PlanEnv, Refusal, Tool, ToolEnv};
use crate::frontend::{CommandLive, Output, Transient};
use crate::permission::{Access, Shell};
use registry as terminals;
use registry::{Settled, Terminal};

mod registry;
mod text;

pub use registry::Terminals;

pub const CLOSE_DESCRIPTION: &str = "Close a persistent terminal and wait until its shell and every process it started have exited.";
pub const LIST_DESCRIPTION: &str =
    "List your persistent terminals: id, name, working directory, whether the shell is alive, and the command running in the foreground.";
pub const OPEN_DESCRIPTION: &str = "Open a persistent terminal (an interactive shell on a pseudo-terminal) and return its id. Use it when shell or REPL state must survive between tool calls: the working directory, variables, a running dev server or interpreter. type is \"shell\". Its commands run in the same sandbox as bash's.";
pub const READ_DESCRIPTION: &str = "Read a bounded page of a persistent terminal's retained output (escape sequences removed) without sending any input. offset counts lines back from the newest.";
pub const SEND_DESCRIPTION: &str = "Send text to a persistent terminal. By default Enter is submitted after it, and the call waits until the shell shows its prompt again, the output goes quiet, a timeout, or the terminal exits; it returns the new output. In background mode it returns a job id to use with job_output or job_kill.";
pub const SEND_DESCRIPTION_NO_JOBS: &str = "Send text to a persistent terminal. By default Enter is submitted after it, and the call waits until the shell shows its prompt again, the output goes quiet, a timeout, or the terminal exits; it returns the new output.";
pub const SIGNAL_DESCRIPTION: &str = "Send an allowed signal to the foreground process group of a persistent terminal (SIGINT stops a running command as Ctrl-C would). SIGKILL aimed at the shell itself is refused; use terminal_close.";

/// `terminal_send`'s description, with or without background jobs.
pub fn send_description(jobs: bool) -> &'static str {
    if jobs {
        SEND_DESCRIPTION
    } else {
        SEND_DESCRIPTION_NO_JOBS
    }
}

/// How long opening waits for the shell's first prompt.
const READY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// Lines one read returns at most.
const MAX_READ_LINES: u64 = 2_000;
/// Bytes one result holds at most (its tail is kept).
const MAX_RESULT_BYTES: usize = 30_000;

#[derive(Debug, Deserialize)]
pub struct OpenArgs {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct IdArgs {
    #[serde(rename = "sessionId")]
    pub id: String,
}

#[derive(Debug, Deserialize)]
pub struct ReadArgs {
    #[serde(rename = "sessionId")]
    pub id: String,
    #[serde(default)]
    pub offset: Option<f64>,
    #[serde(default)]
    pub count: Option<f64>,
}

#[derive(Debug, Deserialize)]
pub struct SendArgs {
    #[serde(rename = "sessionId")]
    pub id: String,
    pub text: String,
    #[serde(default)]
    pub submit: Option<bool>,
    #[serde(default)]
    pub run_in_background: bool,
}

#[derive(Debug, Deserialize)]
pub struct SignalArgs {
    #[serde(rename = "sessionId")]
    pub id: String,
    pub signal: String,
}

/// A terminal tool's call.
#[derive(Debug)]
pub enum TerminalCall {
    Open(OpenArgs, PathBuf),
    List,
    Read(ReadArgs),
    Send(SendArgs),
    Signal(SignalArgs),
    Close(IdArgs),
}

fn view(title: String) -> ToolView {
    ToolView {
        title,
        kind: Some(ToolKind::Execute),
        ..ToolView::default()
    }
}

fn visible(text: &str) -> String {
    dsh_protocol::content::visible_title(text, 80)
}

pub fn plan(
    tool: Tool,
    name: &str,
    arguments: &str,
    env: &PlanEnv<'_>,
) -> Result<(TerminalCall, ToolView, Access), Refusal> {
    Ok(match tool {
        Tool::TerminalOpen => {
            let args: OpenArgs = parse(name, arguments)?;
            if args.kind != "shell" {
                return Err(Refusal::new(
                    ErrorCode::InvalidToolArgs,
                    format!(
                        "Unknown terminal type {:?}; the one type here is \"shell\".",
                        args.kind
                    ),
                ));
            }
            let cwd = paths::resolve(env.cwd, args.cwd.as_deref().unwrap_or("."))?;
            let mut shown = view(format!(
                "Open a terminal{} (bash) in {}",
                args.name
                    .as_deref()
                    .map(|n| format!(" \"{}\"", visible(n)))
                    .unwrap_or_default(),
                super::display_path(&cwd, env.cwd)
            ));
            shown.content = vec![ToolContent::Text {
                text: "An interactive bash that stays open: later terminal_send calls run commands in it.".to_owned(),
            }];
            // Judged as launching the shell: its later lines are judged
            // one by one (terminal_send).
            let access = Access::Execute {
                command: super::shell::launch(Tool::Bash).program.clone(),
                workdir: cwd.clone(),
                shell: Shell::Bash,
            };
            (TerminalCall::Open(args, cwd), shown, access)
        }
        Tool::TerminalList => (
            TerminalCall::List,
            view("List terminals".to_owned()),
            Access::None,
        ),
        Tool::TerminalRead => {
            let args: ReadArgs = parse(name, arguments)?;
            let shown = view(format!("Read terminal {}", visible(&args.id)));
            (TerminalCall::Read(args), shown, Access::None)
        }
        Tool::TerminalSignal => {
            let args: SignalArgs = parse(name, arguments)?;
            if terminals::signal_named(&args.signal).is_none() {
                return Err(Refusal::new(
                    ErrorCode::InvalidToolArgs,
                    format!(
                        "Unknown signal {:?}; use SIGINT, SIGTERM, SIGKILL, SIGTSTP or SIGHUP.",
                        args.signal
                    ),
                ));
            }
            let shown = view(format!(
                "Send {} to terminal {}",
                visible(&args.signal),
                visible(&args.id)
            ));
            (TerminalCall::Signal(args), shown, Access::None)
        }
        Tool::TerminalSend => {
            let args: SendArgs = parse(name, arguments)?;
            if let Some(why) = text::refused_input(&args.text) {
                return Err(Refusal::new(ErrorCode::InvalidToolArgs, why));
            }
            let (workdir, shell) = match env.terminals.get(&args.id) {
                // No such terminal: the run refuses it.
                None => (env.cwd.to_path_buf(), Shell::Bash),
                Some(terminal) => send_context(&terminal, env.roots),
            };
            let shown = present_send(&args);
            let access = Access::Execute {
                command: args.text.clone(),
                workdir,
                shell,
            };
            (TerminalCall::Send(args), shown, access)
        }
        _ => {
            let args: IdArgs = parse(name, arguments)?;
            let shown = view(format!("Close terminal {}", visible(&args.id)));
            (TerminalCall::Close(args), shown, Access::None)
        }
    })
}

/// Where a sent text is judged and who reads it: in the shell's live
/// directory (the one it opened in where that is unknown), by a reader
/// unknown to the policy ([`Shell::Unknown`]: asked below full-access, no
/// allow rule, no "always"). A terminal keeps its state between sends —
/// aliases, functions, variables, `exec`, a REPL in the foreground, a
/// background send still typing — so a rule judged on one line's words
/// cannot say what the shell will do with the next: each send is shown
/// and asked for as it is.
fn send_context(terminal: &Terminal, _roots: &[PathBuf]) -> (PathBuf, Shell) {
    let workdir = terminal.live_cwd().unwrap_or_else(|| terminal.cwd.clone());
    (workdir, Shell::Unknown)
}

/// The text as the user sees it before it is typed: the title its first
/// line (escaped), the content all of it in a code block.
fn present_send(args: &SendArgs) -> ToolView {
    let first = args.text.lines().next().unwrap_or("");
    let more = args.text.trim_end().lines().count() > 1;
    let title = format!(
        "Type in terminal {}: {}{}{}",
        visible(&args.id),
        visible(first),
        if more { " …" } else { "" },
        if args.run_in_background {
            " (in the background)"
        } else {
            ""
        }
    );
    let mut shown = view(title);
    shown.content = vec![ToolContent::Text {
        text: dsh_protocol::content::fenced(
            &dsh_protocol::content::visible(args.text.trim_end(), true),
            "sh",
        ),
    }];
    shown
}

pub async fn run(call: &TerminalCall, env: &ToolEnv<'_>) -> ToolOutcome {
    match call {
        TerminalCall::Open(args, cwd) => open(args, cwd, env).await,
        TerminalCall::List => list(env),
        TerminalCall::Read(args) => read(args, env),
        TerminalCall::Send(args) => send(args, env).await,
        TerminalCall::Signal(args) => signal(args, env),
        TerminalCall::Close(args) => close(args, env).await,
    }
}

fn text_outcome(text: String) -> ToolOutcome {
    let shown = ToolView::text(dsh_protocol::content::fenced(
        &dsh_protocol::content::tail_marked(&text, 8000),
        "",
    ));
    ToolOutcome::ok(text, shown)
}

fn unknown(id: &str, env: &ToolEnv<'_>) -> ToolOutcome {
    let known: Vec<String> = env.terminals.list().iter().map(|t| t.id.clone()).collect();
    ToolOutcome::failed(
        ErrorCode::InvalidToolArgs,
        format!(
            "No terminal {id:?} in this session{}. Terminals do not survive a restart of dsh.",
            if known.is_empty() {
                String::new()
            } else {
                format!(" (its terminals: {})", known.join(", "))
            }
        ),
    )
}

async fn open(args: &OpenArgs, cwd: &std::path::Path, env: &ToolEnv<'_>) -> ToolOutcome {
    if let Some(refused) = &env.command.refused {
        return ToolOutcome::failed(ErrorCode::PermissionDenied, refused.clone());
    }
    if !cwd.is_dir() {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            format!("cwd {} is not a directory.", cwd.display()),
        );
    }
    let spec = terminals::OpenSpec {
        name: args.name.clone(),
        cwd: cwd.to_path_buf(),
        mode: env.command.mode,
        spill_dir: env.spill_dir.to_path_buf(),
        budget: env.jobs.spill_budget(),
    };
    let opened = env.terminals.open(spec, |[stdin, stdout, stderr]| {
        let mut command = env.spawner.guarded(
            &super::shell::launch(Tool::Bash).program,
            terminals::SHELL_ARGS,
            env.command.sandbox.as_ref(),
        )?;
        if let Some(tmp) = &env.command.tmp {
            command.env("TMPDIR", tmp);
        }
        if env.command.mode == dsh_protocol::Mode::FullAccess && env.command.sandbox.is_none() {
            command.envs(env.spawner.full_access_env());
        }
        command
            .envs(env.command.env())
            .env_remove("PS1")
            .env_remove("PS2")
            .envs(terminals::shell_env())
            .current_dir(cwd)
            .stdin(stdin)
            .stdout(stdout)
            .stderr(stderr);
        command
            .spawn()
            .map_err(|err| format!("Cannot start the shell: {err}"))
    });
    match opened {
        Err(err) => ToolOutcome::failed(ErrorCode::Internal, err),
        Ok(terminal) => {
            terminal.ready(READY_WAIT).await;
            if let Some(exit) = terminal.exit() {
                let (_, lines, _, _) = terminal.page(0, 20);
                env.terminals.close(&terminal.id).await;
                return ToolOutcome::failed(
                    ErrorCode::Internal,
                    format!("The terminal's shell {exit} at once:\n{}", lines.join("\n")),
                );
            }
            ToolOutcome::ok(
            format!(
                "Opened terminal {} (bash) in {}. Send input with terminal_send {{\"sessionId\": \"{}\", \"text\": \"...\"}}; close it with terminal_close when done.",
                terminal.id,
                terminal.cwd.display(),
                terminal.id
            ),
            ToolView::text(format!("Terminal {} is open", terminal.id)),
        )
        }
    }
}

fn list(env: &ToolEnv<'_>) -> ToolOutcome {
    let terminals = env.terminals.list();
    if terminals.is_empty() {
        return ToolOutcome::ok(
            "No terminals are open.".to_owned(),
            ToolView::text("No terminals"),
        );
    }
    let mut text = String::from("id\tname\tcwd\tstate\tforeground\n");
    for terminal in &terminals {
        let state = terminal
            .exit()
            .map_or_else(|| "alive".to_owned(), |exit| format!("shell {exit}"));
        let foreground = terminal
            .foreground()
            .map(|(_, line)| visible(&line))
            .unwrap_or_default();
        text.push_str(&format!(
            "{}\t{}\t{}\t{state}\t{foreground}\n",
            terminal.id,
            visible(terminal.name.as_deref().unwrap_or("")),
            visible(&terminal.cwd.display().to_string()),
        ));
    }
    text_outcome(text)
}

fn number(value: Option<f64>, default: u64, what: &str) -> Result<u64, String> {
    match value {
        None => Ok(default),
        Some(value) => {
            whole_number(value).ok_or_else(|| format!("{what} must be a whole number ≥ 0."))
        }
    }
}

fn read(args: &ReadArgs, env: &ToolEnv<'_>) -> ToolOutcome {
    let Some(terminal) = env.terminals.get(&args.id) else {
        return unknown(&args.id, env);
    };
    let offset = match number(args.offset, 0, "offset") {
        Ok(offset) => offset,
        Err(err) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, err),
    };
    let count = match number(args.count, 500, "count") {
        Ok(count) => count.min(MAX_READ_LINES),
        Err(err) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, err),
    };
    let (first, lines, total, spill) = terminal.page(offset, count as usize);
    let body = lines.join("\n");
    let shown = dsh_protocol::content::tail_bytes(&body, MAX_RESULT_BYTES);
    let last = first + lines.len() as u64;
    // Numbered from 1; `first` counts the lines before the page.
    let mut text = if lines.is_empty() && total == 0 {
        "[no lines yet]\n".to_owned()
    } else if lines.is_empty() {
        format!(
            "[no lines there: the terminal keeps lines {}–{total}]\n",
            first + 1
        )
    } else if shown.len() < body.len() {
        // The page's start was cut to fit: the first line shown may be
        // its end only.
        let kept = shown.split('\n').count() as u64;
        format!(
            "[lines {}–{last} of {total}; the page's earlier lines were cut to fit {MAX_RESULT_BYTES} bytes]\n",
            last + 1 - kept
        )
    } else {
        format!("[lines {}–{last} of {total}]\n", first + 1)
    };
    text.push_str(shown);
    if !body.is_empty() {
        text.push('\n');
    }
    if let Some(path) = spill {
        text.push_str(&format!(
            "[older lines are in {}; read or grep that file]\n",
            path.display()
        ));
    }
    text.push_str(&state_line(&terminal));
    text_outcome(text)
}

/// `[terminal t1: …]`: whether the shell lives and what runs in it.
fn state_line(terminal: &Terminal) -> String {
    match (terminal.exit(), terminal.foreground()) {
        (Some(exit), _) => format!("[terminal {}: its shell {exit}]", terminal.id),
        (None, Some((_, line))) if !line.is_empty() => {
            format!("[terminal {}: running {}]", terminal.id, visible(&line))
        }
        (None, Some(_)) => format!("[terminal {}: a command is running]", terminal.id),
        (None, None) => format!("[terminal {}: at the shell's prompt]", terminal.id),
    }
}

/// What the model is told after a send.
fn sent_text(terminal: &Terminal, sent: &terminals::Sent) -> String {
    let mut text = String::new();
    if sent.cut {
        text.push_str("[the start of the output left the terminal's scrollback]\n");
    }
    text.push_str(dsh_protocol::content::tail_bytes(
        &sent.text,
        MAX_RESULT_BYTES,
    ));
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let how = match &sent.settled {
        Settled::Prompt => "the shell is back at its prompt".to_owned(),
        Settled::Idle => "the output went quiet".to_owned(),
        Settled::Timeout => format!("no prompt after {} s", terminals::SEND_TIMEOUT.as_secs()),
        Settled::Exited(exit) => format!("the shell {exit}"),
        Settled::Cancelled => {
            "stopped waiting: cancelled (what runs in it keeps running)".to_owned()
        }
    };
    text.push_str(&format!("[settled: {how}]\n"));
    text.push_str(&state_line(terminal));
    text
}

/// Refuses a terminal opened in a looser mode than the session's now: its
/// shell keeps the sandbox it was opened with.
fn mode_check(terminal: &Terminal, env: &ToolEnv<'_>) -> Option<ToolOutcome> {
    use crate::jobs::rank;
    (rank(env.command.mode) < rank(terminal.mode)).then(|| {
        ToolOutcome::failed(
            ErrorCode::PermissionDenied,
            format!(
                "Terminal {} was opened in {} mode and its shell has that mode's sandbox; the session is now in {} mode. Close it with terminal_close and open a new one.",
                terminal.id,
                terminal.mode.as_str(),
                env.command.mode.as_str()
            ),
        )
    })
}

async fn send(args: &SendArgs, env: &ToolEnv<'_>) -> ToolOutcome {
    let Some(terminal) = env.terminals.get(&args.id) else {
        return unknown(&args.id, env);
    };
    if let Some(refused) = mode_check(&terminal, env) {
        return refused;
    }
    let submit = args.submit.unwrap_or(true);
    if args.run_in_background {
        return send_in_background(args, terminal, submit, env);
    }
    let emit = |live: CommandLive| {
        env.frontend.emit(Output::Transient(Transient::Command {
            call_id: env.call_id.clone(),
            live,
        }));
    };
    emit(CommandLive::Started {
        cwd: terminal.cwd.display().to_string(),
    });
    let sampler = std::sync::Mutex::new(dsh_protocol::tool::OutputSampler::default());
    let live = |text: &str| {
        let sampled = sampler
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .sample(text.len() as u64, text.as_bytes(), MAX_RESULT_BYTES);
        if let Some(output) = sampled {
            emit(output);
        }
    };
    match terminal
        .send(&args.text, submit, false, env.cancel, &live)
        .await
    {
        Err(err) => ToolOutcome::failed(ErrorCode::InvalidToolArgs, err),
        Ok(sent) => text_outcome(sent_text(&terminal, &sent)),
    }
}

/// `run_in_background`: the send runs as a job whose output is the
/// terminal's new output; the call returns the job's id at once.
fn send_in_background(
    args: &SendArgs,
    terminal: std::sync::Arc<Terminal>,
    submit: bool,
    env: &ToolEnv<'_>,
) -> ToolOutcome {
    if !env.jobs.settings().enabled {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            "Background jobs are disabled here; send without run_in_background.",
        );
    }
    let spec = crate::jobs::JobSpec {
        call_id: env.call_id.clone(),
        command: args.text.clone(),
        description: format!("input to terminal {}", terminal.id),
        mode: env.command.mode,
        kind: crate::jobs::JobKind::Bash,
        tool: Tool::TerminalSend.name(),
    };
    let on_live = (env.on_job_live)(env.call_id);
    on_live(CommandLive::Started {
        cwd: terminal.cwd.display().to_string(),
    });
    let text = args.text.clone();
    let started = env.jobs.start_task(
        spec,
        move |job| async move {
            let sampler = std::sync::Mutex::new(dsh_protocol::tool::OutputSampler::default());
            let live = |now: &str| {
                let sampled = sampler
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .sample(now.len() as u64, now.as_bytes(), MAX_RESULT_BYTES);
                if let Some(output) = sampled {
                    on_live(output);
                }
            };
            let end = match terminal
                .send(&text, submit, true, job.killed(), &live)
                .await
            {
                Err(err) => {
                    job.feed(&format!("{err}\n"));
                    crate::jobs::End::Failed(err)
                }
                Ok(sent) => {
                    job.feed(&sent_text(&terminal, &sent));
                    match sent.settled {
                        Settled::Cancelled => {
                            crate::jobs::End::Killed(job.kill_reason().unwrap_or_default())
                        }
                        _ => crate::jobs::End::Done,
                    }
                }
            };
            (end, None)
        },
        (env.on_job_end)(),
    );
    match started {
        Err(err) => ToolOutcome::failed(ErrorCode::Internal, err),
        Ok(job) => super::jobs::started(&job, "background job", "the terminal's new output"),
    }
}

fn signal(args: &SignalArgs, env: &ToolEnv<'_>) -> ToolOutcome {
    let Some(terminal) = env.terminals.get(&args.id) else {
        return unknown(&args.id, env);
    };
    let Some(signal) = terminals::signal_named(&args.signal) else {
        return ToolOutcome::failed(ErrorCode::InvalidToolArgs, "Unknown signal.");
    };
    match terminal.signal(signal) {
        Err(err) => ToolOutcome::failed(ErrorCode::InvalidToolArgs, err),
        Ok(group) => ToolOutcome::ok(
            format!(
                "Sent {} to process group {group} of terminal {}. Read the result with terminal_read.",
                args.signal, terminal.id
            ),
            ToolView::text(format!("Sent {}", args.signal)),
        ),
    }
}

async fn close(args: &IdArgs, env: &ToolEnv<'_>) -> ToolOutcome {
    match env.terminals.close(&args.id).await {
        None => unknown(&args.id, env),
        Some(terminal) => ToolOutcome::ok(
            format!(
                "Closed terminal {}: its shell and every process it started have exited.",
                terminal.id
            ),
            ToolView::text(format!("Terminal {} is closed", terminal.id)),
        ),
    }
}
