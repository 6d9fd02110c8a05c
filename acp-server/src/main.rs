//! The `dsh` command: flags, logging, runtime. Everything else lives in the
//! library so tests and other front ends can drive it.
#![deny(clippy::print_stdout)]

use std::io::Write;
use std::process::ExitCode;

use dsh_acp_server::acp::transport;
use dsh_acp_server::agent::Agent;
use dsh_acp_server::config::Config;
use dsh_acp_server::credentials::ProcessEnv;

const HELP: &str = "\
dsh — a coding agent for editors, served over the Agent Client Protocol (ACP)

USAGE:
    dsh acp        Serve ACP on stdin/stdout (editors run this)
    dsh run TASK   Run one task unattended (CI): the final text on stdout, progress
                   on stderr; flags: --approve never|edits|all, --json, --session ID,
                   --cwd DIR, --model ID, --thought-level L, --timeout S, --max-steps N
    dsh sdk        Serve the SDK's JSON-RPC API on stdin/stdout (programs run this);
                   --listen 127.0.0.1:PORT serves it over WebSocket instead,
                   --token-env VAR requires `Authorization: Bearer $VAR`
    dsh login      Store the API key for editors that start dsh without one in the
                   environment (read without echo; from stdin when it is not a terminal)
    dsh logout     Remove the stored key
    dsh demo       Run a scripted demo session (no API key needed) and print it
    dsh --help     Show this help
    dsh --version  Show the version

ENVIRONMENT:
    DEEPSEEK_API_KEY    API key for DeepSeek (or the variable named in config.toml)
    DEEPSEEK_BASE_URL   OpenAI-compatible base URL (default https://api.deepseek.com)
    DSH_HOME            State directory (default ~/.dsh); holds config.toml and sessions/
    DSH_LOG             Log filter for stderr, e.g. info or dsh_acp_server=debug

Zed: add to settings.json
    \"agent_servers\": { \"dsh\": { \"type\": \"custom\", \"command\": \"/path/to/dsh\", \"args\": [\"acp\"],
                               \"env\": { \"DEEPSEEK_API_KEY\": \"sk-...\" } } }
";

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
    let args: Vec<String> = raw
        .iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let mut stdout = std::io::stdout();
    match args.first().map(String::as_str) {
        Some("acp") if args.len() == 1 => run(serve_acp),
        Some("run") => match dsh_acp_server::run::RunArgs::parse(&args[1..]) {
            Ok(parsed) => run(|| serve_run(parsed)),
            Err(message) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "dsh run: {message}\n{}",
                    dsh_acp_server::run::USAGE
                );
                ExitCode::from(2)
            }
        },
        Some("sdk") => match dsh_acp_server::sdk::SdkArgs::parse(&args[1..]) {
            Ok(parsed) => run(|| serve_sdk(parsed)),
            Err(message) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "dsh sdk: {message}\n{}",
                    dsh_acp_server::sdk::USAGE
                );
                ExitCode::from(2)
            }
        },
        Some(command @ ("login" | "logout")) if args.len() == 1 => {
            init_tracing();
            let config = match Config::load(&ProcessEnv) {
                Ok(config) => config,
                Err(err) => {
                    let _ = writeln!(std::io::stderr(), "dsh {command}: {err}");
                    return ExitCode::FAILURE;
                }
            };
            ExitCode::from(if command == "login" {
                dsh_acp_server::login::login(&config)
            } else {
                dsh_acp_server::login::logout(&config)
            })
        }
        Some("demo") if args.len() == 1 => run(|| async move {
            match dsh_acp_server::demo::run(Box::new(std::io::stdout())).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    tracing::error!("{err:#}");
                    // The user ran this in a terminal; tell them plainly.
                    let _ = writeln!(std::io::stderr(), "dsh demo failed: {err:#}");
                    ExitCode::FAILURE
                }
            }
        }),
        Some("--version" | "-V" | "version") => {
            let _ = writeln!(stdout, "dsh {}", dsh_acp_server::VERSION);
            ExitCode::SUCCESS
        }
        Some("--help" | "-h" | "help") | None => {
            let _ = write!(stdout, "{HELP}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            let _ = writeln!(
                std::io::stderr(),
                "dsh: unknown command {other:?}\n\n{HELP}"
            );
            ExitCode::from(2)
        }
    }
}

fn run<F, Fut>(body: F) -> ExitCode
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ExitCode>,
{
    init_tracing();
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
/// full disk. Children get the default action back at exec.
fn catch_file_size_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::from_raw(
        nix::sys::signal::Signal::SIGXFSZ as i32,
    )) {
        // Keep the handler installed for the life of the process.
        Ok(stream) => std::mem::forget(stream),
        Err(err) => tracing::debug!(%err, "cannot handle SIGXFSZ"),
    }
}

fn init_tracing() {
    let filter = std::env::var("DSH_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "warn,dsh_acp_server=info".to_owned());
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
async fn serve_run(args: dsh_acp_server::run::RunArgs) -> ExitCode {
    dsh_process::forbid_inspection();
    let config = load_config().map(|mut config| {
        if let Some(steps) = args.max_steps {
            config.max_steps = steps;
        }
        config
    });
    let agent = Agent::new(config);
    ExitCode::from(dsh_acp_server::run::run(agent, args).await)
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
