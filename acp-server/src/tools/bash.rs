//! `bash`: one fresh `bash -c` per call, in its own process group with a
//! scrubbed environment. Runs in the client's terminal when it advertises
//! one (the editor shows it live), else locally. Timeout (default 2 min,
//! max 10) and cancellation kill the whole group. Output is capped keeping
//! the tail; the full output goes to a private file.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_protocol::tool::{ToolContent, ToolKind, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;
use tokio::io::AsyncReadExt;

use super::{Outcome, ToolEnv};
use crate::client::TerminalCommand;
use dsh_lsp_bridge::process::{kill_group, scrubbed_env};

pub const DESCRIPTION: &str = "Run a shell command with bash -c in a fresh shell (nothing persists between calls: pass workdir instead of using cd). Returns the output and [exit code: N]. Default timeout 2 minutes, at most 10 (timeoutMs). If a command is denied by policy, do not retry it another way.";

const DEFAULT_TIMEOUT_MS: u64 = 120_000;
const MAX_TIMEOUT_MS: u64 = 600_000;
const INLINE_BYTES: usize = 30_000;
const KEEP_BYTES: usize = 16 * 1024 * 1024;

pub fn schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "command": { "type": "string", "description": "The command line" },
            "description": { "type": "string", "description": "What it does, in 5-10 words (shown to the user)" },
            "timeoutMs": { "type": "integer", "description": "Timeout in milliseconds (default 120000, max 600000)" },
            "workdir": { "type": "string", "description": "Working directory (default: the session working directory)" }
        },
        "required": ["command", "description"],
        "additionalProperties": false
    })
}

#[derive(Debug, Deserialize)]
pub struct BashArgs {
    pub command: String,
    #[serde(default)]
    pub description: String,
    #[serde(default, rename = "timeoutMs")]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub workdir: Option<String>,
}

pub fn present(args: &BashArgs) -> ToolView {
    let first = args.command.lines().next().unwrap_or("");
    let short = dsh_protocol::content::truncate_chars(first, 80);
    let title = if args.command.lines().count() > 1 {
        format!("Run {short} …")
    } else {
        format!("Run {short}")
    };
    let content = if args.description.trim().is_empty() {
        Vec::new()
    } else {
        vec![ToolContent::Text {
            text: args.description.trim().to_owned(),
        }]
    };
    ToolView {
        title,
        kind: Some(ToolKind::Execute),
        locations: Vec::new(),
        content,
    }
}

/// Keeps the tail of the output for the model and writes the whole of it to
/// a private spill file when it is too long.
fn finish_output(raw: &[u8], total: usize, env: &ToolEnv<'_>) -> String {
    let text = String::from_utf8_lossy(raw);
    if total <= INLINE_BYTES {
        return text.into_owned();
    }
    let kept = dsh_protocol::content::tail_bytes(&text, INLINE_BYTES);
    let spill = spill(raw, env);
    format!(
        "[output truncated: showing the last {} of {total} bytes; {spill}]\n{}",
        kept.len(),
        kept
    )
}

fn spill(raw: &[u8], env: &ToolEnv<'_>) -> String {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let path = env.spill_dir.join(format!(
        "{}.log",
        env.call_id.replace(
            |c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_',
            "_"
        )
    ));
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    builder.mode(0o700);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(0o600);
    let written = builder
        .create(env.spill_dir)
        .and_then(|()| options.open(&path))
        .and_then(|mut file| file.write_all(raw));
    match written {
        Ok(()) if raw.len() >= KEEP_BYTES => format!(
            "the first {} MiB are in {}",
            KEEP_BYTES >> 20,
            path.display()
        ),
        Ok(()) => format!("full output in {}", path.display()),
        Err(err) => format!("the full output could not be saved: {err}"),
    }
}

pub async fn run(args: &BashArgs, workdir: &Path, env: &ToolEnv<'_>) -> Outcome {
    if args.command.trim().is_empty() {
        return Outcome::failed(ErrorCode::InvalidToolArgs, "The command is empty.");
    }
    if !workdir.is_dir() {
        return Outcome::failed(
            ErrorCode::InvalidToolArgs,
            format!("workdir {} is not a directory.", workdir.display()),
        );
    }
    let timeout = Duration::from_millis(
        args.timeout_ms
            .unwrap_or(DEFAULT_TIMEOUT_MS)
            .clamp(1, MAX_TIMEOUT_MS),
    );
    if env.frontend.caps().terminal {
        return run_in_client_terminal(args, workdir, timeout, env).await;
    }
    run_locally(args, workdir, timeout, env).await
}

async fn run_in_client_terminal(
    args: &BashArgs,
    workdir: &Path,
    timeout: Duration,
    env: &ToolEnv<'_>,
) -> Outcome {
    let command = TerminalCommand {
        command: args.command.clone(),
        cwd: workdir.to_path_buf(),
        output_limit: INLINE_BYTES as u64,
        timeout,
        call_id: env.call_id.to_owned(),
    };
    match env.frontend.run_in_terminal(command, env.cancel).await {
        Err(message) => Outcome::failed(
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
            let view = ToolView {
                content: vec![ToolContent::Terminal {
                    terminal_id: run.terminal_id,
                }],
                ..ToolView::default()
            };
            Outcome::ok(output, view)
        }
    }
}

/// The last `max` bytes of `text`, cut on a character boundary.
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("…{}", dsh_protocol::content::tail_bytes(text, max))
}

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

async fn run_locally(
    args: &BashArgs,
    workdir: &Path,
    timeout: Duration,
    env: &ToolEnv<'_>,
) -> Outcome {
    let mut command = tokio::process::Command::new("bash");
    command
        .arg("-c")
        .arg(&args.command)
        .current_dir(workdir)
        .env_clear()
        .envs(scrubbed_env())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    dsh_lsp_bridge::process::die_with_parent(&mut command);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            return Outcome::failed(ErrorCode::Internal, format!("Cannot start bash: {err}"))
        }
    };
    let pgid = child.id().unwrap_or(0);
    // Both streams go into one buffer in arrival order, keeping a bounded
    // amount; `total` counts everything.
    let buffer = Arc::new(Mutex::new((Vec::<u8>::new(), 0usize)));
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
        let buffer = buffer.clone();
        readers.push(tokio::spawn(async move {
            let mut stream = stream;
            let mut chunk = [0u8; 8192];
            loop {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut guard = buffer.lock().unwrap_or_else(|p| p.into_inner());
                        guard.1 += n;
                        if guard.0.len() < KEEP_BYTES {
                            guard.0.extend_from_slice(&chunk[..n]);
                        } else {
                            // Keep the tail: drop the oldest half once full.
                            let half = guard.0.len() / 2;
                            guard.0.drain(..half);
                            guard.0.extend_from_slice(&chunk[..n]);
                        }
                    }
                }
            }
        }));
    }
    let (status, timed_out, cancelled) = tokio::select! {
        status = child.wait() => (status.ok(), false, false),
        () = tokio::time::sleep(timeout) => (None, true, false),
        () = env.cancel.cancelled() => (None, false, true),
    };
    // Reap the whole group: a timed-out or cancelled command, and anything a
    // finished command left running in the background.
    if timed_out || cancelled {
        kill_group(pgid);
        let _ = child.wait().await;
    }
    let drained = tokio::time::timeout(
        Duration::from_millis(500),
        futures::future::join_all(readers.iter_mut()),
    )
    .await;
    kill_group(pgid);
    if drained.is_err() {
        for reader in &readers {
            reader.abort();
        }
    }
    let (raw, total) = {
        let guard = buffer.lock().unwrap_or_else(|p| p.into_inner());
        (guard.0.clone(), guard.1)
    };
    let mut output = finish_output(&raw, total, env);
    if !output.is_empty() && !output.ends_with('\n') {
        output.push('\n');
    }
    use std::os::unix::process::ExitStatusExt;
    let code = status.and_then(|s| s.code());
    let signal = status.and_then(|s| s.signal()).map(|s| format!("{s}"));
    output.push_str(&status_line(
        code,
        signal.as_deref(),
        timed_out,
        cancelled,
        timeout,
    ));
    let shown = tail(&output, 8000);
    let view = ToolView {
        content: vec![ToolContent::Text {
            text: format!("```\n{shown}\n```"),
        }],
        ..ToolView::default()
    };
    Outcome::ok(output, view)
}
