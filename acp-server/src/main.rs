//! The `dsh` command: flags, logging, runtime. Everything else lives in the
//! library so tests and other front ends can drive it.
#![deny(clippy::print_stdout)]

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use dsh_acp_server::acp::transport;
use dsh_acp_server::agent::Agent;
use dsh_acp_server::config::Config;
use dsh_acp_server::credentials::ProcessEnv;

/// What `dsh --help` shows after the commands.
const AFTER_HELP: &str = "\
Environment:
  DEEPSEEK_API_KEY   API key for DeepSeek (or the variable named in config.toml)
  DEEPSEEK_BASE_URL  OpenAI-compatible base URL (default https://api.deepseek.com); another
                     server is spoken to in OpenAI's dialect, with the model it serves
  DSH_HOME           State directory (default ~/.dsh); holds config.toml and sessions/
  DSH_LOG            Log filter for stderr, e.g. info or dsh_acp_server=debug

Zed: add to settings.json
  \"agent_servers\": { \"dsh\": { \"type\": \"custom\", \"command\": \"/path/to/dsh\", \"args\": [\"acp\"],
                             \"env\": { \"DEEPSEEK_API_KEY\": \"sk-...\" } } }";

/// A coding agent for editors, served over the Agent Client Protocol (ACP)
#[derive(Parser)]
#[command(
    name = "dsh",
    version = dsh_acp_server::VERSION,
    after_help = AFTER_HELP,
    // Ours (below): clap's own refuses `dsh help --help`.
    disable_help_subcommand = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

/// `dsh run`'s flags, and the goals' cap.
#[derive(clap::Args)]
struct RunCommand {
    #[command(flatten)]
    flags: dsh_acp_server::run::RunFlags,
    /// The most goal rounds a goal of this run may have (a goal runs to
    /// its end within the run)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_goal_rounds: Option<u32>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve ACP on stdin/stdout (editors run this)
    Acp,
    /// Run one task unattended (CI): the final text on stdout, progress on
    /// stderr
    ///
    /// Exit status: 0 done, 1 failed (model error, --timeout, max tokens or
    /// steps), 2 usage or configuration error, 3 the goal the run set or
    /// worked on is not complete (in any phase but complete), 130 interrupted
    /// (continue with --session). Background jobs still running after the
    /// last turn are waited for at most [jobs] run_wait_ms, then stopped
    /// (named on stderr; the status is the last turn's).
    Run(RunCommand),
    /// Serve the SDK's JSON-RPC API on stdin/stdout (programs run this), or
    /// over WebSocket with --listen
    Sdk(dsh_acp_server::sdk::SdkFlags),
    /// Store the API key for editors that start dsh without one in the
    /// environment (read without echo; from stdin when it is not a terminal)
    Login,
    /// Remove the stored key
    Logout,
    /// Run a scripted demo session (no API key needed) and print it
    Demo,
    /// Check $DSH_HOME/config.toml: syntax, unknown keys, wrong types
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Check the setup: state locations, where the API key comes from,
    /// whether the model endpoint answers, language servers, the sandbox
    ///
    /// Exit status 1 when something is broken (the configuration, no key
    /// for an endpoint that needs one, an endpoint that cannot be reached).
    /// The key itself is never printed nor sent.
    Doctor,
    /// List, show, search or delete stored sessions
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Print a shell completion script to stdout
    ///
    /// bash: `dsh completions bash > ~/.local/share/bash-completion/completions/dsh`;
    /// zsh: `dsh completions zsh > ~/.zfunc/_dsh` (with ~/.zfunc in fpath);
    /// fish: `dsh completions fish > ~/.config/fish/completions/dsh.fish`
    /// (make the directory first where it is missing: `mkdir -p`)
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print dsh's man page (roff) to stdout: `dsh man | man -l -`
    Man,
    /// Show the version
    #[command(hide = true)]
    Version,
    /// Print this message or the help of the given subcommand(s)
    Help {
        /// The subcommand(s): `dsh help sessions show` is `dsh sessions
        /// show --help`
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Load config.toml (and the environment's overrides) as dsh does and
    /// say what is wrong, with its line and column; exit 1 when it is not
    /// OK
    Check,
}

#[derive(Subcommand)]
enum SessionsCommand {
    /// The stored sessions, newest first: id, last update, title, cwd
    List,
    /// A session's conversation as text: prompts, replies, tool calls
    Show {
        /// The session id, or the start of exactly one
        id: String,
    },
    /// Delete a session, its checkpoints and its subagents' logs
    Delete {
        /// The session id, or the start of exactly one
        id: String,
    },
    /// Sessions whose events contain every word: id, time, title and the
    /// matching line, best first
    ///
    /// The current directory's sessions unless --all; subagents' logs are
    /// left out. Exit status 1 when the search fails.
    Search {
        /// The words (literal: no operators, no wildcards)
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// Print one JSON array of hits (id, cwd, title, created_at, seq,
        /// event_type, time, surface, snippet; times in epoch ms)
        #[arg(long)]
        json: bool,
        /// Search the sessions of every workspace
        #[arg(long)]
        all: bool,
        /// At most this many sessions (1 to 100)
        #[arg(long, value_name = "N", default_value_t = 20,
              value_parser = clap::value_parser!(u16).range(1..=dsh_acp_server::search::MAX_LIMIT as i64))]
        limit: u16,
    },
}

fn main() -> ExitCode {
    // The command guard runs shell commands for a dsh process; it must not
    // start a runtime or touch stdout (the command's).
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if raw
        .first()
        .is_some_and(|arg| arg == dsh_process::guard::ARG)
    {
        std::process::exit(dsh_process::guard::main(raw[1..].to_vec()));
    }
    // Help and version go to stdout (exit 0), usage errors to stderr
    // (exit 2); either way nothing else happens.
    let cli = Cli::parse();
    let mut stdout = Stdout::default();
    match cli.command {
        Some(Command::Acp) => run(SERVER_LOG, serve_acp),
        Some(Command::Run(command)) => match command.flags.into_args() {
            Ok(parsed) => run(QUIET_LOG, || serve_run(parsed, command.max_goal_rounds)),
            Err(message) => usage_error("run", message),
        },
        Some(Command::Sdk(flags)) => match flags.into_args() {
            Ok(parsed) => run(SERVER_LOG, || serve_sdk(parsed)),
            Err(message) => usage_error("sdk", message),
        },
        Some(command @ (Command::Login | Command::Logout)) => {
            let name = if matches!(command, Command::Login) {
                "login"
            } else {
                "logout"
            };
            init_tracing(QUIET_LOG);
            let config = match Config::load(&ProcessEnv) {
                Ok(config) => config,
                Err(err) => {
                    let _ = writeln!(std::io::stderr(), "dsh {name}: {err}");
                    return ExitCode::FAILURE;
                }
            };
            ExitCode::from(if matches!(command, Command::Login) {
                dsh_acp_server::login::login(&config)
            } else {
                dsh_acp_server::login::logout(&config)
            })
        }
        Some(Command::Demo) => run(QUIET_LOG, || async move {
            match dsh_acp_server::demo::run(Box::new(Stdout::default())).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    // The user ran this in a terminal; tell them plainly,
                    // once (not also as a log line).
                    let _ = writeln!(std::io::stderr(), "dsh demo failed: {err:#}");
                    ExitCode::FAILURE
                }
            }
        }),
        Some(Command::Config(ConfigCommand::Check)) => {
            init_tracing(QUIET_LOG);
            ExitCode::from(dsh_acp_server::admin::check_config(
                &ProcessEnv,
                &mut stdout,
            ))
        }
        Some(Command::Doctor) => {
            init_tracing(QUIET_LOG);
            ExitCode::from(dsh_acp_server::admin::doctor::run(&ProcessEnv, &mut stdout))
        }
        Some(Command::Sessions(command)) => run(QUIET_LOG, || sessions(command)),
        Some(Command::Completions { shell }) => {
            clap_complete::generate(shell, &mut Cli::command(), "dsh", &mut stdout);
            ExitCode::SUCCESS
        }
        Some(Command::Man) => match man_page(&mut stdout) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                let _ = writeln!(std::io::stderr(), "dsh man: {err}");
                ExitCode::FAILURE
            }
        },
        Some(Command::Version) => {
            let _ = writeln!(stdout, "dsh {}", dsh_acp_server::VERSION);
            ExitCode::SUCCESS
        }
        Some(Command::Help { command }) => {
            // `dsh help A B` is `dsh A B --help`: the same text (clap
            // prints it, past a closed stdout too), and an unknown command
            // the same usage error.
            let args = ["dsh".to_owned()]
                .into_iter()
                .chain(command)
                .chain(["--help".to_owned()]);
            match Cli::try_parse_from(args) {
                Err(err) => err.exit(),
                Ok(_) => ExitCode::SUCCESS,
            }
        }
        None => {
            let _ = write!(stdout, "{}", Cli::command().render_long_help());
            ExitCode::SUCCESS
        }
    }
}

/// Standard output for the commands a person runs (not `acp` and `sdk`:
/// their writers own stdout and end at its EOF). A reader that goes away
/// (`dsh man | head`) is a normal end of the output, not an error: the
/// rest is dropped, nothing is said on stderr, and the command ends with
/// its own exit status. (`dsh run` writes its result past any write error
/// already; clap's help and usage output too.)
#[derive(Default)]
struct Stdout {
    /// The reader went away (EPIPE): nothing more is written.
    gone: bool,
}

impl Stdout {
    /// `op` on the process's stdout; `done` (as if it had worked) once the
    /// reader is gone.
    fn unless_gone<T>(
        &mut self,
        op: impl FnOnce(&mut std::io::Stdout) -> std::io::Result<T>,
        done: T,
    ) -> std::io::Result<T> {
        if self.gone {
            return Ok(done);
        }
        match op(&mut std::io::stdout()) {
            Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {
                self.gone = true;
                Ok(done)
            }
            other => other,
        }
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.unless_gone(|out| out.write(buf), buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.unless_gone(Write::flush, ())
    }
}

/// `dsh man`: one page, dsh(1), with every command's help in it (clap_mangen
/// would refer to a page per command, which nothing installs).
fn man_page(out: &mut dyn Write) -> std::io::Result<()> {
    let mut command = Cli::command();
    command.build();
    let man = clap_mangen::Man::new(command.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    // Plain text, as `--help` shows it: escapes and control lines neutral.
    let verbatim = |out: &mut dyn Write, text: &str| -> std::io::Result<()> {
        writeln!(out, ".nf")?;
        for line in text.trim_end().lines() {
            let line = line.replace('\\', "\\e");
            let lead = if line.starts_with(['.', '\'']) {
                "\\&"
            } else {
                ""
            };
            writeln!(out, "{lead}{line}")?;
        }
        writeln!(out, ".fi")
    };
    writeln!(out, ".SH COMMANDS")?;
    for sub in command.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        writeln!(out, ".SS \"dsh {}\"", sub.get_name())?;
        verbatim(out, &sub.clone().render_long_help().to_string())?;
    }
    writeln!(out, ".SH ENVIRONMENT AND EDITORS")?;
    verbatim(out, AFTER_HELP)?;
    man.render_version_section(out)
}

/// A usage error found after parsing (an empty task, a missing token):
/// the message and the subcommand's usage on stderr, exit status 2.
fn usage_error(subcommand: &str, message: String) -> ExitCode {
    let mut command = Cli::command();
    command.build();
    let usage = command
        .find_subcommand_mut(subcommand)
        .map(|sub| sub.render_usage().to_string())
        .unwrap_or_default();
    let _ = writeln!(
        std::io::stderr(),
        "dsh {subcommand}: {message}\n\n{usage}\n\nFor more information, try 'dsh {subcommand} --help'."
    );
    ExitCode::from(2)
}

/// The default log filter of the servers, whose stderr editors and
/// programs collect.
const SERVER_LOG: &str = "warn,dsh_acp_server=info";
/// The default log filter of the commands a person runs in a terminal
/// (their own lines say what happens): errors only.
const QUIET_LOG: &str = "error";

fn run<F, Fut>(log: &str, body: F) -> ExitCode
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ExitCode>,
{
    // Before any thread: one arena for all (see the function).
    dsh_process::one_malloc_arena();
    init_tracing(log);
    // Many connections, language servers and logs: use the hard limit on
    // descriptors (children get the inherited one back).
    dsh_process::raise_fd_limit();
    // One thread runs every task: a streamed chunk passes the HTTP
    // connection, the turn, the SDK's actors and the stdout writer, and on
    // one thread those hand-offs are queue pushes, not futex wake-ups
    // (22.6 µs of CPU per chunk against 40.5 µs on a two-worker runtime;
    // docs/testing.md). Blocking and CPU-heavy work (files, search, logs)
    // goes to spawn_blocking's threads.
    let mut builder = tokio::runtime::Builder::new_current_thread();
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            let _ = writeln!(
                std::io::stderr(),
                "dsh: cannot start the async runtime: {err}"
            );
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async {
        #[cfg(unix)]
        catch_file_size_signal();
        body().await
    });
    // Blocking stdin reads cannot be interrupted; do not wait for them.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    code
}

/// With a file-size limit (`ulimit -f`) the kernel kills a process whose
/// write crosses it (SIGXFSZ). Handling the signal turns that into an
/// `EFBIG` write error, which the session log reports and survives like a
/// full disk. Children get the default action back at exec. Windows has
/// no such limit: a write there fails with an error, never a signal.
#[cfg(unix)]
fn catch_file_size_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::from_raw(libc::SIGXFSZ)) {
        // Keep the handler installed for the life of the process.
        Ok(stream) => std::mem::forget(stream),
        Err(err) => tracing::debug!(%err, "cannot handle SIGXFSZ"),
    }
}

/// Logs on stderr: `DSH_LOG` (or `RUST_LOG`) chooses what, else `default`.
fn init_tracing(default: &str) {
    let filter = std::env::var("DSH_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| default.to_owned());
    // jsonrpsee's trace level prints whole HTTP requests, bearer token
    // included: never above debug, whatever the filter asks.
    let filter = format!("{filter},jsonrpsee-server=debug");
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

/// The configuration, with shell commands guarded by this very binary.
fn load_config() -> Result<Config, dsh_acp_server::config::ConfigError> {
    let config = Config::load(&ProcessEnv)?;
    Ok(match std::env::current_exe() {
        Ok(executable) => config.with_command_guard(executable),
        Err(err) => {
            tracing::warn!(%err, "cannot find dsh's own executable; shell commands run without the command guard");
            config
        }
    })
}

/// `dsh run`: one task, unattended.
async fn serve_run(args: dsh_acp_server::run::RunArgs, goal_rounds: Option<u32>) -> ExitCode {
    dsh_process::forbid_inspection();
    let config = match load_config() {
        Ok(mut config) => {
            if let Some(steps) = args.max_steps {
                config.max_steps = steps;
            }
            // `--max-goal-rounds`: the default cap, and the most any goal has.
            if let Some(rounds) = goal_rounds {
                config.goals.max_goal_rounds = rounds;
                config.goals.ceiling = Some(rounds);
            }
            config
        }
        Err(err) => return ExitCode::from(dsh_acp_server::run::misconfigured(&args, &err)),
    };
    let agent = Agent::new(Ok(config));
    ExitCode::from(dsh_acp_server::run::run(agent, args).await)
}

/// `dsh sessions …`: the stored sessions, through the agent (which a
/// bad configuration stops, as for every command that reads sessions).
async fn sessions(command: SessionsCommand) -> ExitCode {
    use dsh_acp_server::admin::sessions;
    let config = match Config::load(&ProcessEnv) {
        Ok(config) => config,
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "dsh sessions: {err}");
            return ExitCode::from(2);
        }
    };
    let agent = Agent::new(Ok(config));
    let (mut stdout, mut stderr) = (Stdout::default(), std::io::stderr());
    let code = match &command {
        SessionsCommand::List => sessions::list(&agent, &mut stdout).await,
        SessionsCommand::Show { id } => sessions::show(&agent, id, &mut stdout).await,
        SessionsCommand::Delete { id } => sessions::delete(&agent, id, &mut stdout).await,
        SessionsCommand::Search {
            query,
            json,
            all,
            limit,
        } => {
            let args = dsh_acp_server::admin::search::SearchArgs {
                query: query.join(" "),
                json: *json,
                all: *all,
                limit: usize::from(*limit),
            };
            dsh_acp_server::admin::search::run(&agent, &args, &mut stdout).await
        }
    };
    if code != 0 {
        // The error went to stdout with the rest; nothing else to say.
        let _ = stderr.flush();
    }
    agent.shutdown().await;
    ExitCode::from(code)
}

/// `dsh sdk`: the JSON-RPC API, on stdio or WebSocket.
async fn serve_sdk(args: dsh_acp_server::sdk::SdkArgs) -> ExitCode {
    use dsh_acp_server::sdk;
    dsh_process::forbid_inspection();
    let hub = sdk::hub::Hub::new(Agent::new(load_config()));
    let served = async {
        match args.listen {
            Some(addr) => sdk::ws::serve(hub.clone(), addr, args.token).await,
            None => {
                let (input, output) = dsh_acp_server::ndjson::stdio();
                sdk::serve_stdio(hub.clone(), input, output, max_frame()).await;
                Ok(())
            }
        }
    };
    let served = tokio::select! {
        served = served => served,
        signal = dsh_acp_server::run::shutdown_signal() => {
            tracing::info!(signal, "shutting down");
            hub.shutdown().await;
            Ok(())
        }
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "dsh sdk: {message}");
            ExitCode::FAILURE
        }
    }
}

fn max_frame() -> usize {
    std::env::var("DSH_MAX_FRAME_BYTES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(transport::DEFAULT_MAX_FRAME)
}

async fn serve_acp() -> ExitCode {
    // Children of the same user must not read the API key from us.
    dsh_process::forbid_inspection();
    if std::io::stdin().is_terminal() {
        // An editor never gives a terminal: a person started this.
        let _ = writeln!(
            std::io::stderr(),
            "dsh acp speaks the Agent Client Protocol on stdin/stdout; editors start it. Try `dsh demo`."
        );
    }
    let agent = Agent::new(load_config());
    let (input, output) = transport::stdio();
    let transport = transport::transport(input, output, max_frame());
    // The connection runs as its own task: waking it (every frame) does
    // not poll the signal listeners too.
    let backlog = transport.backlog.clone();
    let mut connection = tokio::spawn(dsh_acp_server::acp::serve(
        agent.clone(),
        transport.lines,
        transport.backlog,
    ));
    let served = tokio::select! {
        served = &mut connection => match served {
            Ok(served) => served.map_err(|err| format!("{err:?}")),
            Err(err) => Err(format!("the connection task failed: {err}")),
        },
        signal = dsh_acp_server::run::shutdown_signal() => {
            tracing::info!(signal, "shutting down");
            connection.abort();
            Ok(())
        }
    };
    agent.shutdown().await;
    backlog.disconnect();
    if tokio::time::timeout(std::time::Duration::from_secs(2), transport.writer)
        .await
        .is_err()
    {
        tracing::warn!("stdout did not drain within 2 s");
    }
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "ACP connection failed");
            ExitCode::FAILURE
        }
    }
}
