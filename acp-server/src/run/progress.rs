//! What `dsh run` shows on stderr while it works: the one line per tool
//! call, and — when stderr is a terminal — a spinner with the time spent
//! waiting (for the model, or on a tool) and each command's output as it
//! comes, a line at a time, indented under its call. `--quiet` keeps only
//! the lines that say what was decided (permissions, answers) and the
//! outcome.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use dsh_protocol::tool::CommandLive;

use super::{for_stream, write_stderr_line};

/// The longest partial line held for a command before it is shown anyway
/// (a progress bar that never prints a newline).
const MAX_PARTIAL: usize = 4096;

/// The terminal view of a run.
pub(super) struct Progress {
    /// The spinner (a terminal without `NO_COLOR` or `CI`, and not
    /// `--quiet`).
    spinner: Option<indicatif::ProgressBar>,
    /// stderr is a terminal.
    terminal: bool,
    /// Show tool lines (not `--quiet`).
    tools: bool,
    /// Show commands' output (a terminal, not `--quiet`).
    live: bool,
    /// Each running command's output after its last newline.
    partial: Mutex<HashMap<String, String>>,
}

impl Progress {
    /// The view for this process's stderr.
    pub(super) fn new(quiet: bool) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let spinner = (terminal
            && !quiet
            && std::env::var_os("NO_COLOR").is_none()
            && std::env::var_os("CI").is_none())
        .then(|| {
            let spinner = indicatif::ProgressBar::new_spinner();
            if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            {
                spinner.set_style(style);
            }
            spinner.set_message("waiting for the model");
            spinner.enable_steady_tick(Duration::from_millis(120));
            spinner
        });
        Progress {
            spinner,
            terminal,
            tools: !quiet,
            live: terminal && !quiet,
            partial: Mutex::new(HashMap::new()),
        }
    }

    /// A line that is always shown (escaped on a terminal).
    pub(super) fn line(&self, text: &str) {
        match &self.spinner {
            // The spinner is only shown on a terminal.
            Some(spinner) => spinner.println(for_stream(text, true)),
            None => write_stderr_line(text, self.terminal),
        }
    }

    /// A tool's line: not with `--quiet`.
    pub(super) fn tool_line(&self, text: &str) {
        if self.tools {
            self.line(text);
        }
    }

    /// What the run waits for now; the spinner's clock starts again.
    pub(super) fn waiting_for(&self, what: &str) {
        if let Some(spinner) = &self.spinner {
            spinner.set_message(for_stream(what, true).into_owned());
            spinner.reset_elapsed();
        }
    }

    /// A command's live output: its complete lines, indented.
    pub(super) fn command(&self, call_id: &str, live: &CommandLive) {
        if !self.live {
            return;
        }
        let mut partial = self.partial.lock().unwrap_or_else(PoisonError::into_inner);
        match live {
            CommandLive::Started { .. } => {
                partial.insert(call_id.to_owned(), String::new());
            }
            CommandLive::Output { delta, .. } => {
                let held = partial.entry(call_id.to_owned()).or_default();
                held.push_str(delta);
                let shown = match held.rfind('\n') {
                    Some(end) => held.drain(..=end).collect::<String>(),
                    None if held.len() > MAX_PARTIAL => std::mem::take(held),
                    None => return,
                };
                drop(partial);
                self.output_lines(&shown);
            }
            CommandLive::Exited { .. } => {
                let rest = partial.remove(call_id).unwrap_or_default();
                drop(partial);
                if !rest.is_empty() {
                    self.output_lines(&rest);
                }
            }
        }
    }

    fn output_lines(&self, text: &str) {
        for line in text.trim_end_matches('\n').split('\n') {
            self.line(&format!("  │ {}", line.trim_end_matches('\r')));
        }
    }

    /// The run ended: the spinner goes.
    pub(super) fn finish(&self) {
        if let Some(spinner) = &self.spinner {
            spinner.finish_and_clear();
        }
    }
}
