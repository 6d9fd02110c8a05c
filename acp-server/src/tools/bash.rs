//! `bash`: one fresh `bash -c` per call. Runs in the client's terminal when
//! it advertises one (the editor shows it live), else locally under dsh's
//! command guard (`dsh_process::guard`): its own process group, a scrubbed
//! environment, and everything it starts — background jobs, `setsid`
//! daemons — killed when it ends. Timeout (default 2 min, max 10) and
//! cancellation stop it the same way. The model sees the tail of the
//! output; the output is also written to a private file as it arrives (up
//! to 64 MiB), whose path and contents the result names.
//!
//! `pwsh` and, on Windows, a `bash` that is cmd run here too: the program
//! and its arguments are the call's [`Launch`] ([`super::shell`]), and only
//! Unix's `bash` runs in the client's terminal.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dsh_protocol::tool::{ToolContent, ToolKind, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::shell::Launch;
use super::spill::{SpillTarget, SPILL_BYTES};
use super::ToolEnv;
use crate::frontend::{CommandLive, Output, TerminalCommand, Transient};
use dsh_protocol::tool::ToolOutcome;

pub const DESCRIPTION: &str = "Execute a bash command (bash -c) and return its stdout/stderr. Each call runs in a fresh shell: no state (cwd, variables, functions) persists between calls, so pass workdir instead of using cd. A non-zero exit is reported as [exit code: N]. The current harness environment is exposed through managed $DSH_* variables; check them when needed. Commands may run in a file sandbox; a blocked file operation is reported as [sandbox: file access denied under <mode> mode], which is a policy denial, not a defect of the command: do not retry it another way. Long output is truncated, keeping only its tail; when available, the full output is saved to a file and its path is reported. For long-running commands set run_in_background: true: the call returns a job id immediately; read its output with job_output and stop it with job_kill.";

/// Without background jobs (`[jobs] enabled = false`) the parameter is
/// not offered, and the description does not mention it.
pub const DESCRIPTION_NO_JOBS: &str = "Execute a bash command (bash -c) and return its stdout/stderr. Each call runs in a fresh shell: no state (cwd, variables, functions) persists between calls, so pass workdir instead of using cd. A non-zero exit is reported as [exit code: N]. The current harness environment is exposed through managed $DSH_* variables; check them when needed. Commands may run in a file sandbox; a blocked file operation is reported as [sandbox: file access denied under <mode> mode], which is a policy denial, not a defect of the command: do not retry it another way. Long output is truncated, keeping only its tail; when available, the full output is saved to a file and its path is reported.";

/// `bash` on Windows without PowerShell and Git Bash: cmd.exe, said.
pub const CMD_DESCRIPTION: &str = "Execute a command with Windows' cmd.exe (cmd /D /S /C) and return its stdout/stderr: this machine has neither PowerShell nor Git Bash, so command is a cmd command line, not bash. Each call runs in a fresh cmd process: no state (cwd, variables) persists between calls, so pass workdir instead of using cd. Paths are in native Windows form (C:\\...); read environment variables with %NAME%. A non-zero exit is reported as [exit code: N]; a command that is forcibly stopped settles as [exit code: 1]. The current harness environment is exposed through managed %DSH_*% variables; check them when needed. Long output is truncated, keeping only its tail; when available, the full output is saved to a file and its path is reported. For long-running commands set run_in_background: true: the call returns a job id immediately; read its output with job_output and stop it with job_kill.";

/// [`CMD_DESCRIPTION`] without background jobs.
pub const CMD_DESCRIPTION_NO_JOBS: &str = "Execute a command with Windows' cmd.exe (cmd /D /S /C) and return its stdout/stderr: this machine has neither PowerShell nor Git Bash, so command is a cmd command line, not bash. Each call runs in a fresh cmd process: no state (cwd, variables) persists between calls, so pass workdir instead of using cd. Paths are in native Windows form (C:\\...); read environment variables with %NAME%. A non-zero exit is reported as [exit code: N]; a command that is forcibly stopped settles as [exit code: 1]. The current harness environment is exposed through managed %DSH_*% variables; check them when needed. Long output is truncated, keeping only its tail; when available, the full output is saved to a file and its path is reported.";

/// The `bash` tool's description here: bash's, or cmd's where `bash` is
/// cmd (Windows without Git Bash).
pub fn description(jobs: bool) -> &'static str {
    match (super::shell::launch(super::Tool::Bash).shell, jobs) {
        (crate::permission::Shell::Cmd, true) => CMD_DESCRIPTION,
        (crate::permission::Shell::Cmd, false) => CMD_DESCRIPTION_NO_JOBS,
        (_, true) => DESCRIPTION,
        (_, false) => DESCRIPTION_NO_JOBS,
    }
}

const DEFAULT_TIMEOUT_MS: u64 = 120_000;
const MAX_TIMEOUT_MS: u64 = 600_000;
/// The tail of the output the model sees.
const INLINE_BYTES: usize = 30_000;

#[derive(Debug, Deserialize)]
pub struct BashArgs {
    pub command: String,
    #[serde(default)]
    pub description: String,
    #[serde(default, rename = "timeoutMs", deserialize_with = "millis")]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub workdir: Option<String>,
    #[serde(default)]
    pub run_in_background: bool,
}

/// `timeoutMs` is a JSON number: an integer or not.
fn millis<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<u64>, D::Error> {
    let value: Option<f64> = Option::deserialize(de)?;
    Ok(value.map(|ms| {
        if ms.is_finite() && ms > 0.0 {
            ms.min(u64::MAX as f64) as u64
        } else {
            1
        }
    }))
}

/// The command as the user sees it before it runs: the title is its first
/// line (invisible characters escaped, whitespace runs collapsed — a title
/// cannot hide what follows), the content the whole command, escaped, and
/// then the model's description, labelled as such: it never replaces the
/// command.
pub fn present(args: &BashArgs, launch: &Launch) -> ToolView {
    let first = args.command.lines().next().unwrap_or("");
    let more = args.command.trim_end().lines().count() > 1;
    let title = format!(
        "Run {}{}{}",
        dsh_protocol::content::visible_title(first, 80),
        if more { " …" } else { "" },
        if args.run_in_background {
            " (in the background)"
        } else {
            ""
        }
    );
    let mut content = vec![ToolContent::Text {
        text: dsh_protocol::content::fenced(
            &dsh_protocol::content::visible(args.command.trim_end(), true),
            launch.fence(),
        ),
    }];
    let description = args.description.trim();
    if !description.is_empty() {
        content.push(ToolContent::Text {
            text: format!(
                "The model says it will: {}",
                dsh_protocol::content::visible(description, false)
            ),
        });
    }
    ToolView {
        title,
        kind: Some(ToolKind::Execute),
        locations: Vec::new(),
        content,
    }
}

pub async fn run(
    args: &BashArgs,
    workdir: &Path,
    launch: &Launch,
    env: &ToolEnv<'_>,
) -> ToolOutcome {
    if args.command.trim().is_empty() {
        return ToolOutcome::failed(ErrorCode::InvalidToolArgs, "The command is empty.");
    }
    if !workdir.is_dir() {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            format!("workdir {} is not a directory.", workdir.display()),
        );
    }
    let timeout = Duration::from_millis(
        args.timeout_ms
            .unwrap_or(DEFAULT_TIMEOUT_MS)
            .clamp(1, MAX_TIMEOUT_MS),
    );
    if let Some(refused) = &env.command.refused {
        return ToolOutcome::failed(ErrorCode::PermissionDenied, refused.clone());
    }
    if args.run_in_background {
        return start_job(args, workdir, launch, env);
    }
    let sandboxed = env.command.sandbox.is_some();
    if env.frontend.caps().terminal
        && launch.in_client_terminal()
        && !(sandboxed && env.command.local_only)
    {
        return run_in_client_terminal(args, workdir, timeout, env).await;
    }
    run_locally(args, workdir, timeout, launch, env).await
}

async fn run_in_client_terminal(
    args: &BashArgs,
    workdir: &Path,
    timeout: Duration,
    env: &ToolEnv<'_>,
) -> ToolOutcome {
    let command = TerminalCommand {
        command: args.command.clone(),
        cwd: workdir.to_path_buf(),
        output_limit: INLINE_BYTES as u64,
        timeout,
        call_id: env.call_id.clone(),
    };
    match env.frontend.run_in_terminal(command, env.cancel).await {
        Err(message) => ToolOutcome::failed(
            ErrorCode::Internal,
            format!("The command could not be started in the editor's terminal: {message}"),
        ),
        Ok(run) => {
            let mut output = run.output;
            if run.truncated {
                output = format!(
                    "[output truncated by the terminal to the last {INLINE_BYTES} bytes]\n{output}"
                );
            }
            if !output.is_empty() && !output.ends_with('\n') {
                output.push('\n');
            }
            output.push_str(&status_line(
                run.exit_code.map(|c| c as i32),
                run.signal.as_deref(),
                run.timed_out,
                run.cancelled,
                timeout,
            ));
            // Live, the editor keeps showing its terminal; the log keeps the
            // output, which is what a reload shows (the terminal is gone).
            ToolOutcome {
                live_terminal: Some(run.terminal_id),
                ..ToolOutcome::ok(output.clone(), output_view(&output))
            }
        }
    }
}

/// The output as the editor shows it: the tail, in a code block.
fn output_view(output: &str) -> ToolView {
    ToolView::text(dsh_protocol::content::fenced(
        &dsh_protocol::content::tail_marked(output, 8000),
        "",
    ))
}

/// The last `max` bytes of `text`, cut on a character boundary.
fn status_line(
    code: Option<i32>,
    signal: Option<&str>,
    timed_out: bool,
    cancelled: bool,
    timeout: Duration,
) -> String {
    if timed_out {
        format!(
            "[timed out after {} s; the command and its children were killed]",
            timeout.as_secs_f64()
        )
    } else if cancelled {
        "[cancelled by the user; the command and its children were killed]".to_owned()
    } else if let Some(code) = code {
        format!("[exit code: {code}]")
    } else {
        format!("[killed by signal {}]", signal.unwrap_or("unknown"))
    }
}

/// How often a running command's output is shown (at most).
const LIVE_EVERY: Duration = Duration::from_millis(100);

/// What the editor has been shown of a running local command.
struct Live<'a> {
    env: &'a ToolEnv<'a>,
    sampler: dsh_protocol::tool::OutputSampler,
}

impl<'a> Live<'a> {
    /// Tells the editor the command started.
    fn new(env: &'a ToolEnv<'a>, workdir: &Path) -> Live<'a> {
        let live = Live {
            env,
            sampler: dsh_protocol::tool::OutputSampler::default(),
        };
        live.emit(CommandLive::Started {
            cwd: workdir.display().to_string(),
        });
        live
    }

    fn emit(&self, live: CommandLive) {
        self.env
            .frontend
            .emit(Output::Transient(Transient::Command {
                call_id: self.env.call_id.clone(),
                live,
            }));
    }

    /// Shows the output that came since the last sample, if any.
    fn sample(&mut self, capture: &Capture) {
        if let Some(output) = self
            .sampler
            .sample(capture.total, &capture.tail, INLINE_BYTES)
        {
            self.emit(output);
        }
    }

    fn exited(&self, exit_code: Option<i32>, signal: Option<String>) {
        self.emit(CommandLive::Exited { exit_code, signal });
    }
}

/// The output of a local command as it arrives: the tail for the model,
/// the head in a private spill file once it outgrows the tail.
struct Capture {
    total: u64,
    tail: Vec<u8>,
    /// The output until the spill file exists.
    head: Vec<u8>,
    spill: Option<(tokio::fs::File, std::path::PathBuf)>,
    spilled: u64,
    spill_error: Option<String>,
    /// The session's spill budget (bytes) stopped the spill file.
    over_budget: Option<u64>,
}

impl Capture {
    fn new() -> Capture {
        Capture {
            total: 0,
            tail: Vec::new(),
            head: Vec::new(),
            spill: None,
            spilled: 0,
            spill_error: None,
            over_budget: None,
        }
    }

    async fn take(&mut self, chunk: &[u8], env_spill: &SpillTarget) {
        self.total += chunk.len() as u64;
        self.tail.extend_from_slice(chunk);
        if self.tail.len() > 2 * INLINE_BYTES {
            let cut = self.tail.len() - INLINE_BYTES;
            self.tail.drain(..cut);
        }
        if self.spill.is_none() && self.spill_error.is_none() {
            self.head.extend_from_slice(chunk);
            if self.head.len() <= INLINE_BYTES {
                return;
            }
            match env_spill.open().await {
                Ok(spill) => self.spill = Some(spill),
                Err(err) => {
                    self.spill_error = Some(err);
                    self.head = Vec::new();
                    return;
                }
            }
            let head = std::mem::take(&mut self.head);
            self.write_spill(&head, env_spill).await;
        } else if self.spill.is_some() {
            self.write_spill(chunk, env_spill).await;
        }
    }

    async fn write_spill(&mut self, bytes: &[u8], target: &SpillTarget) {
        let room = SPILL_BYTES.saturating_sub(self.spilled) as usize;
        let Some((file, _)) = self.spill.as_mut() else {
            return;
        };
        let mut part = &bytes[..bytes.len().min(room)];
        if self.over_budget.is_some() {
            return;
        }
        let granted = target.reserve(part.len() as u64) as usize;
        if granted < part.len() {
            part = &part[..granted];
            self.over_budget = target.budget();
        }
        if part.is_empty() {
            return;
        }
        match file.write_all(part).await {
            Ok(()) => self.spilled += part.len() as u64,
            Err(err) => self.spill_error = Some(err.to_string()),
        }
    }

    /// The text the model sees: all of a short output, else the tail with a
    /// note saying what the spill file holds.
    async fn finish(mut self) -> String {
        if let Some((file, _)) = self.spill.as_mut() {
            if let Err(err) = file.flush().await {
                self.spill_error.get_or_insert(err.to_string());
            }
        }
        let total = self.total;
        if total <= INLINE_BYTES as u64 {
            let all = if self.spill.is_some() {
                &self.tail
            } else {
                &self.head
            };
            return String::from_utf8_lossy(all).into_owned();
        }
        let text = String::from_utf8_lossy(&self.tail);
        let kept = dsh_protocol::content::tail_bytes(&text, INLINE_BYTES);
        let saved = match (&self.spill, &self.spill_error) {
            (_, Some(err)) => format!("the full output could not be saved: {err}"),
            (Some((_, path)), None) if self.over_budget.is_some() => format!(
                "this session's spill budget ({} bytes, [jobs] max_spill_bytes_per_session) is used up: only the first {} bytes of it are in {}",
                self.over_budget.unwrap_or(0),
                self.spilled,
                path.display()
            ),
            (Some((_, path)), None) if self.spilled < total => format!(
                "the first {} MiB of it are in {}",
                SPILL_BYTES >> 20,
                path.display()
            ),
            (Some((_, path)), None) => format!("the full output is in {}", path.display()),
            (None, None) => "the full output was not saved".to_owned(),
        };
        format!(
            "[output truncated: showing the last {} of {total} bytes; {saved}]\n{kept}",
            kept.len()
        )
    }
}

/// `bash -c COMMAND` under the guard, in the call's sandbox, with its
/// private `TMPDIR`. (`bash -c COMMAND` is the launch of Unix's `bash`;
/// others are their shell's.)
fn local_command(
    args: &BashArgs,
    workdir: &Path,
    launch: &Launch,
    env: &ToolEnv<'_>,
) -> Result<tokio::process::Command, String> {
    let mut command = env.spawner.guarded(
        &launch.program,
        launch.args.iter().copied().chain([args.command.as_str()]),
        env.command.sandbox.as_ref(),
    )?;
    if let Some(tmp) = &env.command.tmp {
        for variable in launch.temp_variables() {
            command.env(variable, tmp);
        }
    }
    // The SSH agent's socket, which git over SSH needs: full-access only.
    if env.command.mode == dsh_protocol::Mode::FullAccess && env.command.sandbox.is_none() {
        command.envs(env.spawner.full_access_env());
    }
    command.envs(env.command.env());
    command.current_dir(workdir);
    Ok(command)
}

/// `run_in_background`: starts the command as a job (always locally: a
/// job outlives the turn, an editor's terminal does not) and returns its
/// id at once.
fn start_job(args: &BashArgs, workdir: &Path, launch: &Launch, env: &ToolEnv<'_>) -> ToolOutcome {
    if !env.jobs.settings().enabled {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            "Background jobs are disabled here; run the command without run_in_background.",
        );
    }
    let command = match local_command(args, workdir, launch, env) {
        Ok(command) => command,
        Err(err) => return ToolOutcome::failed(ErrorCode::PermissionDenied, err),
    };
    let spec = crate::jobs::JobSpec {
        call_id: env.call_id.clone(),
        command: args.command.clone(),
        description: args.description.clone(),
        mode: env.command.mode,
        kind: crate::jobs::JobKind::Bash,
        tool: launch.tool.name(),
    };
    let on_live = (env.on_job_live)(env.call_id);
    on_live(CommandLive::Started {
        cwd: workdir.display().to_string(),
    });
    match env
        .jobs
        .start(spec, command, (env.on_job_end)(), Some(on_live))
    {
        Err(err) => ToolOutcome::failed(ErrorCode::Internal, err),
        Ok(job) => super::jobs::started(&job, "background job", "its output"),
    }
}

async fn run_locally(
    args: &BashArgs,
    workdir: &Path,
    timeout: Duration,
    launch: &Launch,
    env: &ToolEnv<'_>,
) -> ToolOutcome {
    let mut command = match local_command(args, workdir, launch, env) {
        Ok(command) => command,
        Err(err) => return ToolOutcome::failed(ErrorCode::PermissionDenied, err),
    };
    command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            return ToolOutcome::failed(
                ErrorCode::Internal,
                format!("Cannot start {}: {err}", launch.program),
            )
        }
    };
    let pgid = child.id().unwrap_or(0);
    // Both streams go into one capture in arrival order.
    let capture = Arc::new(tokio::sync::Mutex::new(Capture::new()));
    let spill = Arc::new(SpillTarget::new(env, "log"));
    let mut readers = Vec::new();
    for stream in [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
        child.stderr.take().map(|s| Box::new(s) as _),
    ]
    .into_iter()
    .flatten()
    {
        let capture = capture.clone();
        let spill = spill.clone();
        readers.push(tokio::spawn(async move {
            let mut stream = stream;
            let mut chunk = vec![0u8; 16 * 1024];
            loop {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => capture.lock().await.take(&chunk[..n], &spill).await,
                }
            }
        }));
    }
    // The editor sees the output as it comes, sampled: the readers above
    // take it at full speed whatever the editor does.
    let mut live = Live::new(env, workdir);
    let mut sample = tokio::time::interval(LIVE_EVERY);
    sample.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let (status, timed_out, cancelled) = loop {
        tokio::select! {
            // Cancel-safe: waiting again picks up where it was.
            status = child.wait() => break (status.ok(), false, false),
            () = &mut deadline => break (None, true, false),
            () = env.cancel.cancelled() => break (None, false, true),
            _ = sample.tick() => live.sample(&*capture.lock().await),
        }
    };
    // A timed-out or cancelled command: the guard kills everything it
    // started; its group is killed if it does not exit in time.
    if timed_out || cancelled {
        dsh_process::stop_guarded(&mut child, pgid, Duration::from_millis(1000)).await;
    }
    dsh_process::settle(pgid, &mut readers, Duration::from_millis(500)).await;
    live.sample(&*capture.lock().await);
    let capture = std::mem::replace(&mut *capture.lock().await, Capture::new());
    let mut output = capture.finish().await;
    if !output.is_empty() && !output.ends_with('\n') {
        output.push('\n');
    }
    let code = status.and_then(|s| s.code());
    let signal = status
        .as_ref()
        .and_then(dsh_process::exit_signal)
        .map(|s| format!("{s}"));
    live.exited(code, signal.clone());
    let note = env.command.sandbox.as_ref().and_then(|sandbox| {
        (code != Some(0))
            .then(|| crate::sandbox::denial_note(&output, env.command.mode, sandbox))
            .flatten()
    });
    output.push_str(&status_line(
        code,
        signal.as_deref(),
        timed_out,
        cancelled,
        timeout,
    ));
    if let Some(note) = note {
        output.push('\n');
        output.push_str(&note);
    }
    let view = output_view(&output);
    ToolOutcome::ok(output, view)
}
