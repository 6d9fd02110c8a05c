//! `dsh doctor`: where dsh keeps its state, where the API key comes from
//! (never the key), whether the model endpoint answers, which language
//! servers are on PATH, the sandbox the kernel allows, and what to fix.
//! Exit status 1 when something is broken: the configuration, no key for
//! an endpoint that needs one, an endpoint that cannot be reached.

use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::config::{Config, RawConfig};
use crate::credentials::{self, Env, Lookup};
use crate::model::settings::KeyPolicy;
use crate::model::ProviderKind;
use crate::sandbox::Guard;

/// How long the endpoint gets to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// What the checks found wrong (exit 1) and what could be better (exit 0).
#[derive(Default)]
struct Findings {
    broken: Vec<String>,
    advice: Vec<String>,
}

/// Runs the checks; the exit status.
pub fn run(env: &dyn Env, out: &mut dyn Write) -> u8 {
    let mut found = Findings::default();
    let Some(home) = super::home(env) else {
        let _ = writeln!(out, "config:       no home: set DSH_HOME or HOME");
        return 1;
    };
    let config_path = home.join("config.toml");
    let config = match Config::load(env) {
        Ok(config) => {
            let state = if config_path.exists() {
                "OK"
            } else {
                "absent (the defaults apply)"
            };
            let _ = writeln!(out, "config:       {} — {state}", config_path.display());
            Some(config)
        }
        Err(error) => {
            let place = match super::from_env(&error, env) {
                Some(name) => format!("the environment variable {name}"),
                None => config_path.display().to_string(),
            };
            let _ = writeln!(out, "config:       {place} — broken");
            for line in super::explain(&error, env).lines() {
                let _ = writeln!(out, "              {line}");
            }
            found.broken.push(format!(
                "fix the configuration (`dsh config check` says where): {place}"
            ));
            // The other checks go on with the defaults (and the
            // environment's overrides), if those load.
            Config::from_raw(RawConfig::default(), home.clone(), env).ok()
        }
    };
    let credentials = credentials::credentials_file(&home);
    let _ = writeln!(
        out,
        "credentials:  {} — {}",
        credentials.display(),
        if credentials.exists() {
            "present"
        } else {
            "absent"
        }
    );
    let sessions = home.join("sessions");
    let count = std::fs::read_dir(&sessions).map_or(0, |dir| {
        dir.filter_map(Result::ok)
            .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "jsonl"))
            .count()
    });
    let _ = writeln!(
        out,
        "sessions:     {} — {count} stored (`dsh sessions list`)",
        sessions.display()
    );
    if let Some(config) = &config {
        key_and_endpoint(config, env, out, &mut found);
        models(config, out, &mut found);
        language_servers(config, out);
        sandbox(config, out, &mut found);
    }
    let _ = writeln!(out);
    if found.broken.is_empty() && found.advice.is_empty() {
        let _ = writeln!(out, "Nothing to fix.");
    }
    for (title, items) in [("To fix:", &found.broken), ("Advice:", &found.advice)] {
        if !items.is_empty() {
            let _ = writeln!(out, "{title}");
            for item in items {
                let _ = writeln!(out, "  - {item}");
            }
        }
    }
    u8::from(!found.broken.is_empty())
}

/// Where the key comes from (the source, never the key), and whether the
/// endpoint accepts a TCP connection (nothing is sent).
fn key_and_endpoint(config: &Config, env: &dyn Env, out: &mut dyn Write, found: &mut Findings) {
    let model = &config.model;
    let name = &model.key.name;
    let key_line = match model.key_policy {
        KeyPolicy::None => "none used (the endpoint is declared keyless, or replayed)".to_owned(),
        policy => {
            let lookup = Lookup::of(&model.key);
            // The key itself is dropped here, unread.
            match credentials::resolve(lookup, env).map(|(_, source)| source) {
                Some(source) => format!("from {}", source.describe(name)),
                None if policy == KeyPolicy::Optional => {
                    format!("none (not needed: a loopback endpoint; {name} would be sent if set)")
                }
                None => {
                    found.broken.push(format!(
                        "no API key: run `dsh login`, or set {name} ({})",
                        credentials::missing(lookup)
                    ));
                    format!("missing ({name})")
                }
            }
        }
    };
    let _ = writeln!(out, "API key:      {key_line}");
    if model.provider == ProviderKind::Replay {
        let file = model
            .replay_file
            .as_deref()
            .map_or_else(|| "(none)".to_owned(), |file| file.display().to_string());
        let _ = writeln!(out, "endpoint:     replay of {file} (no network)");
        return;
    }
    let base = &model.base_url;
    match probe(base) {
        Ok((target, took)) => {
            let _ = writeln!(
                out,
                "endpoint:     {base} — reachable (TCP connect to {target} in {} ms)",
                took.as_millis()
            );
        }
        Err(why) => {
            let _ = writeln!(out, "endpoint:     {base} — unreachable: {why}");
            // A server on this machine may just not be running; a remote
            // one is behind the network (this check connects directly;
            // model requests go through HTTPS_PROXY when it is set).
            let check = if crate::model::settings::is_loopback(base) {
                "start the server"
            } else {
                "check the network (DNS, a firewall; behind a proxy, set HTTPS_PROXY)"
            };
            found.broken.push(format!(
                "the model endpoint {base} cannot be reached ({why}): {check}, or set DEEPSEEK_BASE_URL / [provider] base_url"
            ));
        }
    }
}

/// The catalog: the models `config.toml` lists (or the built-in ones), or
/// — for an OpenAI-compatible endpoint with none listed — those it serves
/// (`GET {base}/models`, as the first session asks) and the one sessions
/// would use.
fn models(config: &Config, out: &mut dyn Write, found: &mut Findings) {
    use crate::model::served;
    let model = &config.model;
    if model.provider == ProviderKind::Replay {
        return;
    }
    if !model.served_catalog {
        let ids: Vec<&str> = config
            .choices
            .models
            .iter()
            .map(|m| m.id.as_str())
            .collect();
        let _ = writeln!(
            out,
            "models:       {} (default {})",
            ids.join(", "),
            config.choices.default_model
        );
        return;
    }
    let asked = crate::model::Provider::from_settings(&config.model)
        .map_err(|err| err.to_string())
        .and_then(|provider| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|err| err.to_string())?;
            Ok(runtime.block_on(provider.served_models()))
        });
    let listed = match asked {
        Ok(Ok(listed)) => listed,
        // Unreachable, or no key: the lines above said so.
        Ok(Err(error))
            if matches!(
                error.code,
                dsh_protocol::ErrorCode::ModelTransport
                    | dsh_protocol::ErrorCode::MissingCredential
            ) =>
        {
            let _ = writeln!(
                out,
                "models:       not asked (see the endpoint and the key)"
            );
            return;
        }
        Ok(Err(error)) => {
            let _ = writeln!(out, "models:       cannot be listed: {error}");
            found.broken.push(error.message);
            return;
        }
        Err(error) => {
            let _ = writeln!(out, "models:       cannot be listed: {error}");
            return;
        }
    };
    let wanted = Some(config.choices.default_model.as_str()).filter(|id| !id.is_empty());
    let line = match served::pick(&listed, wanted, &model.base_url) {
        Ok(used) if wanted.is_some() => format!("using {} (default_model)", used.id),
        Ok(used) => format!("using {} (the only one)", used.id),
        Err(why) => {
            found.broken.push(why.message);
            "none chosen".to_owned()
        }
    };
    let _ = writeln!(
        out,
        "models:       served by the endpoint: {} — {line}",
        served::names(&listed)
    );
}

/// A TCP connection to the base URL's host and port, within
/// [`CONNECT_TIMEOUT`]: the address it reached and how long it took.
fn probe(base_url: &str) -> Result<(String, Duration), String> {
    let url = reqwest::Url::parse(base_url).map_err(|err| format!("not a URL: {err}"))?;
    let host = url.host_str().ok_or("the URL has no host")?;
    let port = url
        .port_or_known_default()
        .ok_or("the URL has no port and no known default")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let started = Instant::now();
    // A slow resolver is part of the same budget: the lookup runs on a
    // thread of its own, and is left behind when it takes too long.
    let (sender, answer) = std::sync::mpsc::channel();
    let name = host.to_owned();
    std::thread::spawn(move || {
        let _ = sender.send(
            (name.as_str(), port)
                .to_socket_addrs()
                .map(Iterator::collect),
        );
    });
    let addrs: Vec<std::net::SocketAddr> = match answer.recv_timeout(CONNECT_TIMEOUT) {
        Ok(resolved) => resolved.map_err(|err| format!("cannot resolve {host}: {err}"))?,
        Err(_) => {
            return Err(format!(
                "cannot resolve {host} within {} s",
                CONNECT_TIMEOUT.as_secs()
            ))
        }
    };
    let mut last = format!("{host} has no address");
    for addr in addrs.iter().take(3) {
        let left = CONNECT_TIMEOUT.saturating_sub(started.elapsed());
        if left.is_zero() {
            last = format!("no answer within {} s", CONNECT_TIMEOUT.as_secs());
            break;
        }
        match TcpStream::connect_timeout(addr, left) {
            Ok(_) => return Ok((format!("{host}:{port}"), started.elapsed())),
            Err(err) if err.kind() == std::io::ErrorKind::TimedOut => {
                last = format!(
                    "no answer within {} s from {addr}",
                    CONNECT_TIMEOUT.as_secs()
                );
            }
            Err(err) => last = format!("{addr}: {err}"),
        }
    }
    Err(last)
}

/// The language servers dsh knows (built-in and configured): found on
/// PATH and answering `--version` (as dsh checks before it starts one), or
/// not. A program found only in the workspace (`node_modules/.bin`, …) is
/// named, never run: it is the repository's code.
fn language_servers(config: &Config, out: &mut dyn Write) {
    use dsh_lsp_bridge::registry;
    let builtin = if config.lsp.builtin {
        registry::builtin()
    } else {
        Vec::new()
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let mut located = Vec::new();
    let mut missing = Vec::new();
    for spec in registry::merge(builtin, &config.lsp.servers) {
        match registry::locate(&spec, &cwd, std::slice::from_ref(&cwd)) {
            Some(found) => located.push((spec, found)),
            None => missing.push(format!("{} ({})", spec.name, spec.command)),
        }
    }
    let answers: Vec<bool> = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(futures::future::join_all(located.iter().map(
            |(spec, found)| async move {
                !found.in_workspace
                    && registry::verify(spec, &found.program, &config.spawner, None).await
            },
        ))),
        Err(_) => vec![false; located.len()],
    };
    let mut lines = Vec::new();
    let mut working = 0;
    for ((spec, found), answers) in located.iter().zip(answers) {
        let program = found.program.display();
        lines.push(if found.in_workspace {
            format!(
                "{}: {program} — in the workspace (started only with your permission; not run here)",
                spec.name
            )
        } else if answers {
            working += 1;
            format!("{}: {program}", spec.name)
        } else {
            format!(
                "{}: {program} — does not answer --version (a rustup proxy without its component?)",
                spec.name
            )
        });
    }
    let _ = writeln!(
        out,
        "language servers: {working} working{}",
        if lines.is_empty() { "" } else { ":" }
    );
    for line in &lines {
        let _ = writeln!(out, "              {line}");
    }
    if !missing.is_empty() {
        let _ = writeln!(
            out,
            "              not on PATH: {} (install one to use the `lsp` tool in its language; docs/lsp.md)",
            missing.join(", ")
        );
    }
}

/// The sandbox the kernel allows, and what commands get below full-access.
fn sandbox(config: &Config, out: &mut dyn Write, found: &mut Findings) {
    let support = dsh_process::sandbox::probe();
    let guard = config
        .sandbox
        .guard(Some(support).filter(|support| support.files));
    let commands = match guard {
        Guard::Kernel { network: false } => "commands run in the kernel sandbox, without network",
        Guard::Kernel { network: true } => {
            "commands run in the kernel sandbox, with network ([sandbox] network)"
        }
        Guard::PromptOnly => {
            found.advice.push(NO_SANDBOX.to_owned());
            "commands run unsandboxed (the permission prompt is the only guard)"
        }
        Guard::Refused => {
            found.broken.push(
                "[sandbox] required is set and this kernel cannot sandbox commands: every command below full-access is refused".to_owned(),
            );
            "commands are refused below full-access ([sandbox] required)"
        }
    };
    let _ = writeln!(
        out,
        "sandbox:      kernel allows {}; {commands}",
        support.describe()
    );
}

/// Why commands run without a sandbox here, and what guards them.
const NO_SANDBOX: &str = if cfg!(target_os = "linux") {
    "this kernel cannot sandbox commands (Landlock, Linux 5.13+): the permission prompt is their only guard"
} else if cfg!(target_os = "macos") {
    "/usr/bin/sandbox-exec (Seatbelt) is missing: the permission prompt is the only guard of commands"
} else {
    "dsh has no command sandbox on Windows: the permission prompt is the only guard of commands (docs/platforms.md)"
};
