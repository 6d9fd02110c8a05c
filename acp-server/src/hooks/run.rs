//! Runs one hook: `sh -c COMMAND` under the command guard (its own
//! process group, a scrubbed environment, everything it leaves behind
//! killed — `setsid` daemons too), contained so that it cannot kill the
//! guard to escape that ([`dsh_process::Spawner::contained`]: the user's
//! rights, but no signal to anything outside the hook), the event's JSON
//! on stdin, `CLAUDE_PROJECT_DIR` and `DSH_PROJECT_DIR` set, in the project
//! root, within its timeout. Its output is read bounded.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Hook;

/// The most of stdout or stderr kept from a hook.
const MAX_OUTPUT: usize = 64 * 1024;

/// What a hook is run with.
pub struct Invocation<'a> {
    /// The hook.
    pub hook: &'a Hook,
    /// The event's JSON, for stdin.
    pub input: &'a serde_json::Value,
    /// The project root: the working directory and `CLAUDE_PROJECT_DIR`.
    pub project: &'a Path,
    /// How children start.
    pub spawner: &'a dsh_process::Spawner,
    /// Stops the hook early (the turn was cancelled).
    pub cancel: &'a tokio_util::sync::CancellationToken,
}

/// How one hook run went.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Its exit code; `None`: it did not start, timed out, was cancelled
    /// or died of a signal.
    pub exit_code: Option<i32>,
    /// Wall-clock time.
    pub duration: Duration,
    /// It ran out of time.
    pub timed_out: bool,
    /// Why it did not start or finish (no exit code).
    pub failure: Option<String>,
    /// What it wrote (bounded).
    pub stdout: String,
    /// What it wrote on stderr (bounded).
    pub stderr: String,
}

impl Report {
    /// Blocked: exit 2, with stderr as the reason.
    pub fn block_reason(&self) -> Option<String> {
        (self.exit_code == Some(2)).then(|| {
            let reason = self.stderr.trim();
            if reason.is_empty() {
                "Blocked by a hook (exit 2, no reason given).".to_owned()
            } else {
                reason.to_owned()
            }
        })
    }

    /// Stdout as a JSON object, when it is one.
    pub fn json(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        serde_json::from_str(self.stdout.trim()).ok()
    }

    /// It failed: no exit code, or one other than 0 and 2.
    pub fn failed(&self) -> bool {
        !matches!(self.exit_code, Some(0 | 2))
    }
}

/// Runs the hook.
pub async fn run(call: Invocation<'_>) -> Report {
    let started = Instant::now();
    let mut report = run_inner(&call).await;
    report.duration = started.elapsed();
    report
}

async fn run_inner(call: &Invocation<'_>) -> Report {
    let Some(sh) = crate::programs::posix_shell() else {
        // Windows without Git Bash: no hook can run. One that decides
        // whether something runs (PreToolUse, UserPromptSubmit) must not be
        // passed over: blocked. The others fail as a hook that cannot
        // start does.
        let why = "hooks run with a POSIX shell (Git for Windows' bash.exe) and there is none on this machine";
        let decides = matches!(
            call.input["hook_event_name"].as_str(),
            Some("PreToolUse" | "UserPromptSubmit")
        );
        return Report {
            exit_code: decides.then_some(2),
            stderr: if decides {
                format!("Blocked: {why}.")
            } else {
                String::new()
            },
            ..failure(why.to_owned())
        };
    };
    let mut command = call
        .spawner
        .contained(&sh.to_string_lossy(), ["-c", call.hook.command.as_str()]);
    command
        .current_dir(call.project)
        .env("CLAUDE_PROJECT_DIR", call.project)
        .env("DSH_PROJECT_DIR", call.project)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => return failure(format!("cannot start sh: {err}")),
    };
    let pgid = child.id().unwrap_or(0);
    let input = serde_json::to_vec(call.input).unwrap_or_default();
    let stdin = child.stdin.take().map(|mut stdin| {
        tokio::spawn(async move {
            // A hook that does not read its input is not an error.
            let _ = stdin.write_all(&input).await;
        })
    });
    let stdout = Arc::new(std::sync::Mutex::new(Vec::new()));
    let stderr = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut readers = Vec::new();
    for (stream, sink) in [
        (
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
            stdout.clone(),
        ),
        (
            child.stderr.take().map(|s| Box::new(s) as _),
            stderr.clone(),
        ),
    ] {
        let Some(mut stream) = stream else { continue };
        readers.push(tokio::spawn(async move {
            let mut chunk = vec![0u8; 8 * 1024];
            loop {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut kept = sink.lock().unwrap_or_else(|p| p.into_inner());
                        let room = MAX_OUTPUT.saturating_sub(kept.len());
                        kept.extend_from_slice(&chunk[..n.min(room)]);
                    }
                }
            }
        }));
    }
    let (status, timed_out, cancelled) = tokio::select! {
        status = child.wait() => (status.ok(), false, false),
        () = tokio::time::sleep(call.hook.timeout) => (None, true, false),
        () = call.cancel.cancelled() => (None, false, true),
    };
    if timed_out || cancelled {
        dsh_process::stop_guarded(&mut child, pgid, Duration::from_millis(500)).await;
    }
    if let Some(stdin) = stdin {
        stdin.abort();
    }
    dsh_process::settle(pgid, &mut readers, Duration::from_millis(300)).await;
    let text = |sink: &std::sync::Mutex<Vec<u8>>| {
        String::from_utf8_lossy(&sink.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    };
    let exit_code = status.and_then(|status| status.code());
    Report {
        exit_code,
        duration: Duration::ZERO,
        timed_out,
        failure: match (timed_out, cancelled, status) {
            (true, _, _) => Some(format!(
                "timed out after {}s",
                call.hook.timeout.as_secs_f64()
            )),
            (_, true, _) => Some("cancelled".to_owned()),
            (_, _, Some(status)) if exit_code.is_none() => Some(format!("ended by {status}")),
            (_, _, None) => Some("lost".to_owned()),
            _ => None,
        },
        stdout: text(&stdout),
        stderr: text(&stderr),
    }
}

fn failure(why: String) -> Report {
    Report {
        failure: Some(why),
        ..Report::default()
    }
}
