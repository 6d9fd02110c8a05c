//! The `dsh` command line itself (issue 27, "The first hour"): help and
//! version do nothing else, usage errors exit 2 with the usage, completions
//! and the man page print, `--listen localhost:PORT`, a config error said
//! once, and quiet logs by default.

use std::process::Output;
use std::time::Duration;

use tokio::io::AsyncBufReadExt;

use crate::support::*;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `dsh ARGS` to its end with an empty stdin.
async fn dsh(env: &TestEnv, args: &[&str]) -> Output {
    let child = env.dsh(args).spawn().expect("spawn dsh");
    tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("dsh ends")
        .unwrap()
}

/// An environment whose config.toml does not parse: a command that reads
/// it fails.
async fn env_with_broken_config() -> TestEnv {
    let env = TestEnv::new().await;
    std::fs::write(env.home.path().join("config.toml"), "bogus = [\n").unwrap();
    env
}

#[tokio::test]
async fn every_command_has_help_and_help_does_nothing_else() {
    // A broken config and a mock model: help reads neither.
    let env = env_with_broken_config().await;
    for (args, usage) in [
        (&["--help"][..], "Usage: dsh [COMMAND]"),
        (&["-h"][..], "Usage: dsh [COMMAND]"),
        (&["help"][..], "Usage: dsh [COMMAND]"),
        (&["help", "run"][..], "Usage: dsh run"),
        (&["run", "-h"][..], "Usage: dsh run [OPTIONS] [TASK]"),
        (&["run", "--help"][..], "Usage: dsh run [OPTIONS] [TASK]"),
        (&["run", "--json", "a task", "--help"][..], "Usage: dsh run"),
        (&["sdk", "--help"][..], "Usage: dsh sdk [OPTIONS]"),
        (&["sdk", "-h"][..], "Usage: dsh sdk [OPTIONS]"),
        (&["acp", "--help"][..], "Usage: dsh acp"),
        (&["login", "--help"][..], "Usage: dsh login"),
        (&["logout", "-h"][..], "Usage: dsh logout"),
        (&["demo", "--help"][..], "Usage: dsh demo"),
        (
            &["completions", "--help"][..],
            "Usage: dsh completions <SHELL>",
        ),
        (&["man", "--help"][..], "Usage: dsh man"),
    ] {
        let output = dsh(&env, args).await;
        let stdout = text(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&output.stderr)
        );
        assert!(stdout.contains(usage), "{args:?}: {stdout}");
        assert!(
            output.stderr.is_empty(),
            "{args:?}: {}",
            text(&output.stderr)
        );
    }
    let run = text(&dsh(&env, &["run", "--help"]).await.stdout);
    for flag in [
        "--cwd",
        "--approve",
        "--model",
        "--thought-level",
        "--session",
        "--json",
        "--timeout",
        "--max-steps",
        "--answers",
    ] {
        assert!(run.contains(flag), "dsh run --help names {flag}: {run}");
    }
    let sdk = text(&dsh(&env, &["sdk", "--help"]).await.stdout);
    assert!(
        sdk.contains("--listen") && sdk.contains("--token-env"),
        "{sdk}"
    );
    let top = text(&dsh(&env, &["--help"]).await.stdout);
    for command in [
        "acp",
        "run",
        "sdk",
        "login",
        "logout",
        "demo",
        "completions",
        "man",
    ] {
        assert!(
            top.contains(&format!("  {command} ")),
            "dsh --help lists {command}: {top}"
        );
    }
    assert!(top.contains("DEEPSEEK_API_KEY"), "{top}");
    assert!(
        env.mock.requests().is_empty(),
        "help sent a model request: {:?}",
        env.mock.requests()
    );
    assert!(!env.sessions_dir().exists(), "help opened no session");
}

#[tokio::test]
async fn version_prints_the_version() {
    let env = env_with_broken_config().await;
    for args in [&["--version"][..], &["-V"][..], &["version"][..]] {
        let output = dsh(&env, args).await;
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert_eq!(
            text(&output.stdout),
            format!("dsh {}\n", env!("CARGO_PKG_VERSION")),
            "{args:?}"
        );
    }
}

#[tokio::test]
async fn unknown_flags_and_commands_exit_2_with_the_usage_on_stderr() {
    let env = TestEnv::new().await;
    // Unknown flags, arguments and commands, and what is wrong only once
    // parsed: the message and the usage.
    for (args, usage) in [
        (&["run", "--bogus", "x"][..], "Usage: dsh run"),
        (&["run", "   "][..], "Usage: dsh run"),
        (&["run", "one", "two"][..], "Usage: dsh run"),
        (&["sdk", "--bogus"][..], "Usage: dsh sdk"),
        (
            &["sdk", "--token-env", "NOPE_NOT_SET"][..],
            "Usage: dsh sdk",
        ),
        (&["acp", "--bogus"][..], "Usage: dsh acp"),
        (&["demo", "extra"][..], "Usage: dsh demo"),
        (&["bogus"][..], "Usage: dsh [COMMAND]"),
    ] {
        let output = dsh(&env, args).await;
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(usage), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
    // A bad value: what is wrong with it.
    for (args, message) in [
        (
            &["run", "--approve", "maybe", "x"][..],
            "use never, edits or all",
        ),
        (
            &["run", "--timeout", "-1", "x"][..],
            "positive number of seconds",
        ),
        (&["run", "--max-steps", "0", "x"][..], "positive number"),
        (
            &["run", "--answers", "[1]", "x"][..],
            "give an object of question ids",
        ),
        (
            &["run", "--cwd", "/nonexistent", "x"][..],
            "--cwd /nonexistent: not a directory",
        ),
        (&["sdk", "--listen", "example.com:80"][..], "localhost:7777"),
        (&["completions", "tcsh"][..], "invalid value 'tcsh'"),
    ] {
        let output = dsh(&env, args).await;
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
    assert!(env.mock.requests().is_empty());
}

#[tokio::test]
async fn completions_and_the_man_page_print() {
    let env = env_with_broken_config().await;
    for (shell, mark) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef dsh"),
        ("fish", "complete -c dsh"),
    ] {
        let output = dsh(&env, &["completions", shell]).await;
        assert_eq!(output.status.code(), Some(0), "{shell}");
        let script = text(&output.stdout);
        assert!(
            script.contains(mark) && script.contains("dsh"),
            "{shell}: {script}"
        );
        assert!(script.contains("approve"), "{shell}: subcommand flags too");
    }
    let output = dsh(&env, &["man"]).await;
    assert_eq!(output.status.code(), Some(0));
    let page = text(&output.stdout);
    assert!(page.contains(".TH dsh 1"), "{page}");
    for command in ["dsh run", "dsh sdk", "dsh completions"] {
        assert!(page.contains(&format!(".SS \"{command}\"")), "{page}");
    }
    assert!(
        page.contains("--approve") && page.contains("DSH_LOG"),
        "{page}"
    );
}

/// `--listen localhost:PORT` is 127.0.0.1 (no token needed: loopback).
#[tokio::test]
async fn sdk_listens_on_localhost() {
    let env = TestEnv::new().await;
    let mut child = env
        .dsh(&["sdk", "--listen", "localhost:0"])
        .spawn()
        .expect("spawn dsh sdk");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let listening = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("dsh sdk: listening on ") {
                return url.to_owned();
            }
        }
        panic!("dsh sdk ended without listening");
    })
    .await
    .expect("dsh sdk says where it listens");
    assert!(listening.starts_with("ws://127.0.0.1:"), "{listening}");
    assert!(!listening.ends_with(":0"), "{listening}");
    child.start_kill().unwrap();
    let _ = child.wait().await;
}

/// A config file that does not parse: `dsh run` says so once, plainly
/// (no `internal:`), sends nothing and exits 2.
#[tokio::test]
async fn dsh_run_says_a_config_error_once() {
    let env = env_with_broken_config().await;
    let mut command = env.dsh(&["run", "hi"]);
    command.env_remove("DSH_LOG");
    let output = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .unwrap()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.matches("invalid config file").count(), 1, "{stderr}");
    assert!(!stderr.contains("internal"), "{stderr}");
    assert!(stderr.starts_with("dsh run: "), "{stderr}");
    assert!(output.stdout.is_empty());
    assert!(env.mock.requests().is_empty());
}

/// Without `DSH_LOG`, `dsh run`'s stderr is its own lines: no log lines.
#[tokio::test]
async fn dsh_run_logs_only_with_dsh_log() {
    let env = TestEnv::new().await;
    env.mock.push_json(reply("Done."));
    let mut command = env.dsh(&["run", "say done"]);
    command.env_remove("DSH_LOG");
    let output = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .unwrap()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&output.stdout), "Done.\n");
    assert!(
        !stderr.contains(" INFO ") && !stderr.contains(" WARN ") && !stderr.contains(" DEBUG "),
        "{stderr}"
    );
    assert!(stderr.starts_with("session: "), "{stderr}");
}

/// `dsh acp` with a terminal on stdin (a person, never an editor) says what
/// it is on stderr and keeps serving; with a pipe it says nothing.
#[tokio::test]
async fn dsh_acp_on_a_terminal_says_what_it_is_and_serves_on() {
    use std::process::Stdio;
    const SAYS: &str = "dsh acp speaks the Agent Client Protocol on stdin/stdout; editors start it. Try `dsh demo`.";
    let env = TestEnv::new().await;
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let mut command = env.command();
    command.stdin(Stdio::from(pty.slave));
    let mut child = command.spawn().expect("spawn dsh acp");
    drop(command);
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("dsh acp writes to stderr")
        .unwrap();
    assert_eq!(first.as_deref(), Some(SAYS));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(child.try_wait().unwrap().is_none(), "dsh acp keeps serving");
    child.start_kill().unwrap();
    let _ = child.wait().await;
    drop(pty.master);

    // An editor's pipe: no such line.
    let conn = env.connect().await;
    conn.initialize().await;
    conn.new_session(&env.cwd()).await;
    let stderr = conn.stderr.lock().unwrap().clone();
    assert!(
        !stderr.contains("speaks the Agent Client Protocol"),
        "{stderr}"
    );
}
