//! A session's persistent terminals (the opt-in `terminal_*` tools): each
//! an interactive bash on a pseudo-terminal (`dsh_process::pty`), started
//! under the command guard in the sandbox of the session's mode when it
//! was opened, its output read continuously into a bounded ring of
//! escape-free lines ([`Ring`]; older lines go to a spill file).
//! The registry is the session's: a terminal dies with `terminal_close`,
//! with the session's close (dsh's orderly exit closes every session),
//! and with dsh itself (the guard's death signal, then its sweep of the
//! tree).
//!
//! Unix only: on Windows a terminal is refused when it is opened (ConPTY
//! is not wired).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use dsh_protocol::Mode;
use tokio_util::sync::CancellationToken;

#[cfg(unix)]
use dsh_process::pty::{Pty, PtySignal};
#[cfg(not(unix))]
use platform::{Pty, PtySignal};

/// Terminals a session may have open at once.
pub const MAX_TERMINALS: usize = 8;
/// Lines a terminal keeps (older ones are spilled).
pub const SCROLLBACK_LINES: usize = 2_000;
/// Bytes of text a terminal keeps, about.
pub const SCROLLBACK_BYTES: usize = 1 << 20;
/// How long output must pause for a send to settle without a prompt.
pub const IDLE_SILENCE: Duration = Duration::from_millis(300);
/// The same while a program other than the shell runs in the foreground
/// (a REPL, a build): it may be working, not waiting. A program that has
/// printed nothing past the echo of the input is waited for until the
/// prompt (or [`SEND_TIMEOUT`]).
pub const BUSY_SILENCE: Duration = Duration::from_secs(2);
/// How long a send waits at most.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the shell's prompt must be quiet before a send settles on it.
const PROMPT_QUIET: Duration = Duration::from_millis(50);
/// How long `close` waits for the guard to sweep the tree before it kills
/// the guard's group itself.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

use super::text::{Ring, Stripper, PROMPT_MARK};

/// The arguments of a terminal's shell (`bash`'s program): interactive,
/// without the user's startup files, without history expansion (`!$`,
/// `!#:s/a/b/` would make the line that runs differ from the one judged).
pub const SHELL_ARGS: &[&str] = &["--noprofile", "--norc", "+H", "-i"];

/// The variables a terminal's shell gets besides the command's: a plain
/// terminal type, a prompt with the mark ([`PROMPT_MARK`]), programs
/// that do not page.
pub fn shell_env() -> Vec<(&'static str, String)> {
    vec![
        ("TERM", "dumb".to_owned()),
        // Set before each prompt, not exported: a program the shell
        // starts (`sh`, a REPL) keeps its own prompt. Readline as dsh
        // types to it: no completion, no meta keys (a byte over 0x7f is
        // inserted as it is), whatever an inputrc said.
        (
            "PROMPT_COMMAND",
            format!(
                "PS1='\\[\\e]{PROMPT_MARK}\\a\\]$ '; PS2='> '; \
                 bind 'set disable-completion on' 'set convert-meta off' 'set enable-meta-key off' 2>/dev/null"
            ),
        ),
        // Not the user's key bindings.
        ("INPUTRC", "/dev/null".to_owned()),
        ("PAGER", "cat".to_owned()),
        // The user's history is neither read nor written.
        ("HISTFILE", "/dev/null".to_owned()),
        ("GIT_PAGER", "cat".to_owned()),
    ]
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where lines that leave a terminal's ring go: `terminal-<n>.log` in
/// the session's spill directory (made on first use, by the one maker of
/// spill files), counted in the session's spill budget, at most
/// [`crate::tools::spill::SPILL_BYTES`].
struct Spill {
    dir: PathBuf,
    number: u64,
    budget: crate::jobs::SpillBudget,
    key: u64,
    file: Option<Result<(std::fs::File, PathBuf), String>>,
    written: u64,
}

impl Spill {
    fn write(&mut self, lines: Vec<String>) {
        use std::io::Write;
        let mut bytes = lines.join("\n").into_bytes();
        bytes.push(b'\n');
        let path = self.dir.join(format!("terminal-{}.log", self.number));
        let Ok((file, path)) = self
            .file
            .get_or_insert_with(|| crate::jobs::spill_file::create_fresh(&path))
        else {
            return;
        };
        let room = crate::tools::spill::SPILL_BYTES.saturating_sub(self.written);
        bytes.truncate(room as usize);
        let granted = self.budget.reserve(self.key, path, bytes.len() as u64) as usize;
        bytes.truncate(granted);
        if file.write_all(&bytes).is_ok() {
            self.written += bytes.len() as u64;
        }
    }

    fn path(&self) -> Option<PathBuf> {
        match &self.file {
            Some(Ok((_, path))) => Some(path.clone()),
            _ => None,
        }
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        self.budget.done(self.key);
    }
}

/// What a terminal's output has come to.
struct Output {
    ring: Ring,
    stripper: Stripper,
    /// Prompt marks seen.
    prompts: u64,
    last: Instant,
    spill: Spill,
}

impl Output {
    fn take(&mut self, chunk: &[u8]) {
        let (clean, prompts) = self.stripper.strip(chunk);
        self.prompts += prompts as u64;
        self.last = Instant::now();
        let gone = self.ring.push(&clean);
        if !gone.is_empty() {
            self.spill.write(gone);
        }
    }
}

/// One terminal.
pub struct Terminal {
    /// `t1`, `t2`, …
    pub id: String,
    /// The model's name for it.
    pub name: Option<String>,
    /// Where its shell started.
    pub cwd: PathBuf,
    /// The mode whose sandbox its shell runs in.
    pub mode: Mode,
    pty: Pty,
    writer: Mutex<std::fs::File>,
    output: Arc<Mutex<Output>>,
    /// Bumped at each chunk read and when the shell exits.
    changed: tokio::sync::watch::Sender<u64>,
    /// How the guard exited, once it did (`exited N`, `signal N`).
    exit: tokio::sync::watch::Sender<Option<String>>,
    guard: u32,
    /// One send at a time.
    busy: tokio::sync::Mutex<()>,
}

/// How a send settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// The shell printed its prompt again.
    Prompt,
    /// The output paused ([`IDLE_SILENCE`]).
    Idle,
    /// [`SEND_TIMEOUT`] passed.
    Timeout,
    /// The shell exited (its status).
    Exited(String),
    /// The call was cancelled (or the job killed).
    Cancelled,
}

/// What a send brought back.
pub struct Sent {
    /// The output since the send, from the line it was typed on.
    pub text: String,
    /// Older parts of it were spilled.
    pub cut: bool,
    /// How it settled.
    pub settled: Settled,
}

impl Terminal {
    /// How its shell ended, if it did.
    pub fn exit(&self) -> Option<String> {
        self.exit.borrow().clone()
    }

    /// The shell's pid (the leader of the terminal's session).
    pub fn shell_pid(&self) -> Option<u32> {
        self.pty.session_leader()
    }

    /// The command running in the foreground (not the shell), if any: its
    /// process group and command line (Linux; elsewhere its group only).
    pub fn foreground(&self) -> Option<(u32, String)> {
        let group = self.pty.foreground_group()?;
        if Some(group) == self.shell_pid() || self.exit().is_some() {
            return None;
        }
        let line = std::fs::read(format!("/proc/{group}/cmdline"))
            .map(|raw| {
                raw.split(|b| *b == 0)
                    .filter(|part| !part.is_empty())
                    .map(String::from_utf8_lossy)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        Some((group, line))
    }

    /// The shell's working directory now (after its `cd`s): Linux's
    /// `/proc/<pid>/cwd`; `None` where that is not known.
    pub fn live_cwd(&self) -> Option<PathBuf> {
        if self.exit().is_some() {
            return None;
        }
        let pid = self.shell_pid()?;
        std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
    }

    /// Whether a process group other than the shell's has the terminal.
    pub fn program_in_foreground(&self) -> bool {
        self.pty
            .foreground_group()
            .is_some_and(|group| Some(group) != self.shell_pid())
    }

    /// At most `count` lines ending `offset` lines before the newest: the
    /// number of the first, the lines, the number of lines kept, and the
    /// spill file of older ones.
    pub fn page(&self, offset: u64, count: usize) -> (u64, Vec<String>, u64, Option<PathBuf>) {
        let output = lock(&self.output);
        let (first, lines) = output.ring.page(offset, count);
        (
            first,
            lines.into_iter().map(str::to_owned).collect(),
            output.ring.first() + output.ring.kept(),
            output.spill.path(),
        )
    }

    /// Sends `signal` to the foreground job; `Err` says why not (no job
    /// control, or SIGKILL aimed at the shell itself).
    pub fn signal(&self, signal: PtySignal) -> Result<u32, String> {
        if self.exit().is_some() {
            return Err("Its shell has exited; close it with terminal_close.".to_owned());
        }
        let group = self.pty.foreground_group().ok_or(
            "The terminal has no foreground process group (its shell runs without job control).",
        )?;
        if signal == PtySignal::Kill && Some(group) == self.shell_pid() {
            return Err(
                "SIGKILL would kill the terminal's shell itself; use terminal_close to end the terminal."
                    .to_owned(),
            );
        }
        self.pty
            .signal_foreground(signal)
            .ok_or_else(|| "The foreground process group is gone.".to_owned())
    }

    /// Types `text` (and Enter, if `submit`), then waits until the shell
    /// is back at its prompt, the output pauses (not with `until_prompt`:
    /// a background send ends when its command does), [`SEND_TIMEOUT`]
    /// passes, the shell exits or `cancel` fires; `live` is told the new
    /// output as it comes (the text so far, sampled).
    ///
    /// Back at its prompt: no program holds the foreground and the shell
    /// has shown as many prompts as lines were submitted (one more if a
    /// program still ran when the text was typed: its own prompt comes
    /// first), or at least one and it has stayed quiet there
    /// ([`IDLE_SILENCE`]; a construct over several lines, input a
    /// program took). Output is what comes after the echo of the typed
    /// text (after its first line's end).
    pub async fn send(
        &self,
        text: &str,
        submit: bool,
        until_prompt: bool,
        cancel: &CancellationToken,
        live: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Sent, String> {
        let _busy = tokio::select! {
            busy = self.busy.lock() => busy,
            () = cancel.cancelled() => return Ok(Self::unsent(Settled::Cancelled)),
            () = tokio::time::sleep(SEND_TIMEOUT) => return Err(format!(
                "The terminal is still busy with another send after {} s.",
                SEND_TIMEOUT.as_secs()
            )),
        };
        if let Some(exit) = self.exit() {
            return Err(format!(
                "Its shell has {exit}; close it with terminal_close and open a new one."
            ));
        }
        let (mark, prompts) = {
            let output = lock(&self.output);
            (output.ring.mark(), output.prompts)
        };
        let mut typed = text.as_bytes().to_vec();
        if submit {
            typed.push(b'\r');
        }
        let lines = text.matches('\n').count() as u64 + u64::from(submit);
        let needed = lines + u64::from(self.program_in_foreground());
        let started = Instant::now();
        tokio::select! {
            written = self.type_in(typed) => written?,
            () = cancel.cancelled() => return Ok(self.since_settled(mark, Settled::Cancelled)),
            () = tokio::time::sleep(SEND_TIMEOUT) => return Ok(self.since_settled(mark, Settled::Timeout)),
        }
        let mut changed = self.changed.subscribe();
        let mut shown = String::new();
        // When a program was last seen in the foreground: a shell running
        // a loop holds it between the loop's commands, for an instant.
        let mut last_busy = Instant::now();
        let settled = loop {
            let (quiet, prompted) = {
                let output = lock(&self.output);
                (output.last.elapsed(), output.prompts - prompts)
            };
            if let Some(exit) = self.exit() {
                break Settled::Exited(exit);
            }
            let now = self.since(mark).0;
            let busy = self.program_in_foreground();
            if busy {
                last_busy = Instant::now();
            }
            let free = last_busy.elapsed();
            if !busy
                && ((prompted >= needed && quiet >= PROMPT_QUIET)
                    || (prompted >= 1 && quiet >= IDLE_SILENCE && free >= IDLE_SILENCE))
            {
                break Settled::Prompt;
            }
            // Past the echo of the typed text: what its first line's end
            // is followed by.
            let output_came = now
                .split_once('\n')
                .is_some_and(|(_, rest)| !rest.trim().is_empty());
            let silence = if busy { BUSY_SILENCE } else { IDLE_SILENCE };
            let idle = if busy {
                output_came
            } else {
                free >= silence && (output_came || started.elapsed() >= silence * 4)
            };
            if !until_prompt && idle && quiet >= silence {
                break Settled::Idle;
            }
            if !until_prompt && started.elapsed() >= SEND_TIMEOUT {
                break Settled::Timeout;
            }
            if now != shown {
                live(&now);
                shown = now;
            }
            tokio::select! {
                _ = changed.changed() => {}
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
                () = cancel.cancelled() => break Settled::Cancelled,
            }
        };
        let sent = self.since_settled(mark, settled);
        if sent.text != shown {
            live(&sent.text);
        }
        Ok(sent)
    }

    /// What came since `mark`, settled as `settled`.
    fn since_settled(&self, mark: u64, settled: Settled) -> Sent {
        let (text, cut) = self.since(mark);
        Sent { text, cut, settled }
    }

    /// A send that typed nothing.
    fn unsent(settled: Settled) -> Sent {
        Sent {
            text: String::new(),
            cut: false,
            settled,
        }
    }

    /// Waits until the shell has shown its first prompt (or exited), at
    /// most `timeout`: a send typed before it could take the start-up
    /// prompt for its own.
    pub async fn ready(&self, timeout: Duration) {
        let mut changed = self.changed.subscribe();
        let _ = tokio::time::timeout(
            timeout,
            changed.wait_for(|_| lock(&self.output).prompts > 0 || self.exit().is_some()),
        )
        .await;
    }

    fn since(&self, mark: u64) -> (String, bool) {
        lock(&self.output).ring.since(mark)
    }

    /// Writes to the terminal off the async workers (a full input queue
    /// blocks the write).
    async fn type_in(&self, bytes: Vec<u8>) -> Result<(), String> {
        use std::io::Write;
        let writer = lock(&self.writer).try_clone().map_err(|e| e.to_string())?;
        tokio::task::spawn_blocking(move || {
            let mut writer = writer;
            writer.write_all(&bytes)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("Cannot write to the terminal: {e}"))
    }

    /// Stops the shell and everything it started (the guard sweeps the
    /// tree) and waits until the guard has exited: every process of the
    /// tree is gone.
    pub async fn close(&self) {
        let mut exit = self.exit.subscribe();
        if exit.borrow().is_none() {
            dsh_process::signal_process(self.guard, dsh_process::Signal::Terminate);
            let ended = tokio::time::timeout(CLOSE_GRACE, exit.wait_for(Option::is_some))
                .await
                .is_ok();
            if !ended {
                dsh_process::kill_group(self.guard);
                let _ = exit.wait_for(Option::is_some).await;
            }
        }
    }
}

/// What opening a terminal needs.
pub struct OpenSpec {
    /// The model's name for it.
    pub name: Option<String>,
    /// Where its shell starts.
    pub cwd: PathBuf,
    /// The session's mode (its sandbox's).
    pub mode: Mode,
    /// The session's spill directory (lines that leave the ring).
    pub spill_dir: PathBuf,
    /// The session's spill budget.
    pub budget: crate::jobs::SpillBudget,
}

/// A session's terminals.
#[derive(Default)]
pub struct Terminals {
    registry: Mutex<Registry>,
}

#[derive(Default)]
struct Registry {
    next: u64,
    open: BTreeMap<u64, Arc<Terminal>>,
    /// The session closed: nothing more opens.
    closed: bool,
}

impl Terminals {
    /// The terminal `id`.
    pub fn get(&self, id: &str) -> Option<Arc<Terminal>> {
        let number: u64 = id.strip_prefix('t')?.parse().ok()?;
        lock(&self.registry).open.get(&number).cloned()
    }

    /// Every terminal, oldest first.
    pub fn list(&self) -> Vec<Arc<Terminal>> {
        lock(&self.registry).open.values().cloned().collect()
    }

    /// Opens a terminal: a pty, and its shell started by `start` (given
    /// the terminal as stdin, stdout and stderr, it returns the guarded
    /// command's child). `Err` is what the model is told.
    pub fn open(
        &self,
        spec: OpenSpec,
        start: impl FnOnce([std::process::Stdio; 3]) -> Result<tokio::process::Child, String>,
    ) -> Result<Arc<Terminal>, String> {
        {
            let registry = lock(&self.registry);
            if registry.closed {
                return Err("The session is closing.".to_owned());
            }
            if registry.open.len() >= MAX_TERMINALS {
                return Err(format!(
                    "{MAX_TERMINALS} terminals are open, the most a session may have; close one with terminal_close."
                ));
            }
        }
        let mut pty = Pty::open(50, 200).map_err(|e| format!("Cannot open a terminal: {e}"))?;
        let stdio = pty
            .stdio()
            .map_err(|e| format!("Cannot open a terminal: {e}"))?;
        let reader = pty.reader().map_err(|e| e.to_string())?;
        let writer = pty.writer().map_err(|e| e.to_string())?;
        let mut child = start(stdio)?;
        pty.release_slave();
        let guard = child.id().unwrap_or(0);
        let number = {
            let mut registry = lock(&self.registry);
            registry.next += 1;
            registry.next
        };
        let output = Arc::new(Mutex::new(Output {
            ring: Ring::new(SCROLLBACK_LINES, SCROLLBACK_BYTES),
            stripper: Stripper::default(),
            prompts: 0,
            last: Instant::now(),
            spill: Spill {
                dir: spec.spill_dir,
                number,
                key: spec.budget.key(),
                budget: spec.budget,
                file: None,
                written: 0,
            },
        }));
        let (changed, _) = tokio::sync::watch::channel(0u64);
        let (exit, _) = tokio::sync::watch::channel(None);
        let terminal = Arc::new(Terminal {
            id: format!("t{number}"),
            name: spec.name,
            cwd: spec.cwd,
            mode: spec.mode,
            pty,
            writer: Mutex::new(writer),
            output: output.clone(),
            changed: changed.clone(),
            exit: exit.clone(),
            guard,
            busy: tokio::sync::Mutex::new(()),
        });
        // The reader: blocking reads of the master until every process
        // that had the slave is gone.
        let read_changed = changed.clone();
        let reading = std::thread::Builder::new()
            .name(format!("dsh-terminal-{number}"))
            .spawn(move || {
                use std::io::Read;
                let mut reader = reader;
                let mut chunk = vec![0u8; 16 * 1024];
                loop {
                    match reader.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            lock(&output).take(&chunk[..n]);
                            read_changed.send_modify(|n| *n += 1);
                        }
                    }
                }
            });
        if let Err(err) = reading {
            // The shell started: its tree goes with the guard's group.
            dsh_process::kill_group(guard);
            return Err(format!("Cannot read the terminal: {err}"));
        }
        tokio::spawn(async move {
            let status = child.wait().await;
            let text = match status {
                Ok(status) => match (status.code(), dsh_process::exit_signal(&status)) {
                    (Some(code), _) => format!("exited {code}"),
                    (None, Some(signal)) => format!("signal {signal}"),
                    (None, None) => "exited".to_owned(),
                },
                Err(err) => format!("exited ({err})"),
            };
            exit.send_replace(Some(text));
            changed.send_modify(|n| *n += 1);
        });
        let mut registry = lock(&self.registry);
        if registry.closed {
            drop(registry);
            dsh_process::signal_process(guard, dsh_process::Signal::Terminate);
            return Err("The session is closing.".to_owned());
        }
        registry.open.insert(number, terminal.clone());
        Ok(terminal)
    }

    /// Closes `id` and waits until its tree is gone; `None` if there is
    /// no such terminal.
    pub async fn close(&self, id: &str) -> Option<Arc<Terminal>> {
        let number: u64 = id.strip_prefix('t')?.parse().ok()?;
        let terminal = lock(&self.registry).open.remove(&number)?;
        terminal.close().await;
        Some(terminal)
    }

    /// The session's mode became `to`: every terminal opened in a looser
    /// mode (its shell has that mode's sandbox, or none, and its
    /// environment) is taken out and closed — its tree stopped now, the
    /// wait for it on a task. Returns them as the notice of what a mode
    /// change stopped names them (`terminal t1 (opened in full-access)`).
    pub fn mode_changed(&self, to: Mode) -> Vec<String> {
        use crate::jobs::rank;
        let doomed: Vec<Arc<Terminal>> = {
            let mut registry = lock(&self.registry);
            let numbers: Vec<u64> = registry
                .open
                .iter()
                .filter(|(_, terminal)| rank(terminal.mode) > rank(to))
                .map(|(number, _)| *number)
                .collect();
            numbers
                .iter()
                .filter_map(|number| registry.open.remove(number))
                .collect()
        };
        for terminal in &doomed {
            dsh_process::signal_process(terminal.guard, dsh_process::Signal::Terminate);
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let terminal = terminal.clone();
                runtime.spawn(async move { terminal.close().await });
            }
        }
        doomed
            .iter()
            .map(|t| format!("terminal {} (opened in {})", t.id, t.mode.as_str()))
            .collect()
    }

    /// Closes every terminal (the session closes): nothing more opens.
    pub async fn shutdown(&self) {
        let all: Vec<Arc<Terminal>> = {
            let mut registry = lock(&self.registry);
            registry.closed = true;
            std::mem::take(&mut registry.open).into_values().collect()
        };
        for terminal in &all {
            terminal.close().await;
        }
    }
}

/// Parses a signal's name as the tools take it.
pub fn signal_named(name: &str) -> Option<PtySignal> {
    Some(match name {
        "SIGINT" => PtySignal::Interrupt,
        "SIGTERM" => PtySignal::Terminate,
        "SIGKILL" => PtySignal::Kill,
        "SIGTSTP" => PtySignal::Stop,
        "SIGHUP" => PtySignal::Hangup,
        _ => return None,
    })
}

/// Windows: no pseudo-terminal here; opening one is refused.
#[cfg(not(unix))]
mod platform {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum PtySignal {
        Interrupt,
        Terminate,
        Kill,
        Stop,
        Hangup,
    }

    pub struct Pty;

    impl Pty {
        pub fn open(_rows: u16, _cols: u16) -> std::io::Result<Pty> {
            Err(std::io::Error::other(
                "persistent terminals need a Unix pseudo-terminal; dsh on Windows has none (ConPTY is not wired): use the shell tool instead",
            ))
        }
        pub fn stdio(&self) -> std::io::Result<[std::process::Stdio; 3]> {
            Err(std::io::Error::other("no terminal"))
        }
        pub fn release_slave(&mut self) {}
        pub fn reader(&self) -> std::io::Result<std::fs::File> {
            Err(std::io::Error::other("no terminal"))
        }
        pub fn writer(&self) -> std::io::Result<std::fs::File> {
            Err(std::io::Error::other("no terminal"))
        }
        pub fn foreground_group(&self) -> Option<u32> {
            None
        }
        pub fn session_leader(&self) -> Option<u32> {
            None
        }
        pub fn signal_foreground(&self, _signal: PtySignal) -> Option<u32> {
            None
        }
    }
}
