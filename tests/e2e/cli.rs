//! The `dsh` command line itself (issue 27, "The first hour"): help and
//! version do nothing else, usage errors exit 2 with the usage, completions
//! and the man page print, `--listen localhost:PORT`, a config error said
//! once, and quiet logs by default.

use std::process::Output;
use std::time::Duration;

use tokio::io::AsyncBufReadExt;

use crate::support::*;

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
        assert_exit(&output, 0, &format!("{args:?}"));
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
            "use never, edits, sandboxed or all",
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
/// `dsh run TASK` as a user starts it (no `DSH_LOG`), within 30 s.
async fn run_without_log(env: &TestEnv, task: &str) -> std::process::Output {
    let mut command = env.dsh(&["run", task]);
    command.env_remove("DSH_LOG");
    tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn dsh_run_says_a_config_error_once() {
    let env = env_with_broken_config().await;
    let output = run_without_log(&env, "hi").await;
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
    let output = run_without_log(&env, "say done").await;
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

/// Runs `dsh ARGS` with `config` as config.toml (None: as the test
/// environment wrote it) and `env` added to its environment.
async fn dsh_with(
    env: &TestEnv,
    config: Option<&str>,
    vars: &[(&str, &str)],
    args: &[&str],
) -> (Option<i32>, String, String) {
    if let Some(config) = config {
        std::fs::write(env.home.path().join("config.toml"), config).unwrap();
    }
    let mut command = env.dsh(args);
    for (name, value) in vars {
        command.env(name, value);
    }
    let output = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .expect("dsh ends")
        .unwrap();
    (
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr),
    )
}

/// `dsh config check`: OK and where, or the problem with its line and
/// column, the nearest valid name for an unknown key, wrong types and the
/// environment's overrides; exit 1 when not OK.
#[tokio::test]
async fn config_check_says_where_and_what() {
    let env = TestEnv::new().await;
    let (code, out, err) = dsh_with(&env, None, &[], &["config", "check"]).await;
    assert_eq!(code, Some(0), "{out}{err}");
    let path = env.home.path().join("config.toml");
    assert!(
        out.starts_with(&format!("config.toml: OK ({})", path.display())),
        "{out}"
    );
    assert!(
        out.contains("DEEPSEEK_BASE_URL is set: it overrides [provider] base_url"),
        "{out}"
    );

    for (config, expect) in [
        // An unknown key: where, and the nearest valid name.
        (
            "[provider]\nkind = \"openai\"\nbse_url = \"http://127.0.0.1:1\"\n",
            &[":3:1: unknown field `bse_url`", "did you mean `base_url`?"][..],
        ),
        (
            "defualt_model = \"x\"\n",
            &[
                ":1:1: unknown field `defualt_model`",
                "did you mean `default_model`?",
            ][..],
        ),
        // A wrong type.
        (
            "[session]\nmax_steps = \"ten\"\n",
            &[":2:13: invalid type: string \"ten\", expected u64"][..],
        ),
        // Not TOML.
        ("[provider\n", &[":1:10:", "  1 | [provider"][..]),
        // A value the loader refuses.
        (
            "default_mode = \"yolo\"\n",
            &["default_mode \"yolo\" is not one of"][..],
        ),
    ] {
        let (code, out, err) = dsh_with(&env, Some(config), &[], &["config", "check"]).await;
        assert_eq!(code, Some(1), "{config}: {out}{err}");
        assert!(out.starts_with("config.toml: error\n"), "{config}: {out}");
        for expected in expect {
            assert!(out.contains(expected), "{config}: {expected} in {out}");
        }
    }
    // An environment override the loader refuses.
    let (code, out, _) = dsh_with(
        &env,
        Some(""),
        &[("DEEPSEEK_BASE_URL", "localhost:8080")],
        &["config", "check"],
    )
    .await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("DEEPSEEK_BASE_URL"), "{out}");
    // No file: the defaults.
    std::fs::remove_file(&path).unwrap();
    let (code, out, _) = dsh_with(&env, None, &[], &["config", "check"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("does not exist: the defaults apply"), "{out}");
    assert!(env.mock.requests().is_empty());
}

/// `dsh doctor` against the mock model: reachable, the key's source but
/// never the key, exit 0; a refused port, a broken config and a missing
/// key for a remote endpoint: exit 1 with what to fix. Nothing is sent
/// to the model.
#[tokio::test]
async fn doctor_checks_the_setup_and_never_shows_the_key() {
    let env = TestEnv::new().await;
    let key = env.api_key.clone().unwrap();
    let (code, out, err) = dsh_with(&env, None, &[], &["doctor"]).await;
    assert_eq!(code, Some(0), "{out}{err}");
    for expected in [
        "config:       ",
        "credentials:  ",
        "sessions:     ",
        "API key:      from the environment variable DEEPSEEK_API_KEY",
        &format!("endpoint:     {} — reachable", env.mock.url),
        "language servers: ",
        "sandbox:      kernel allows ",
    ] {
        assert!(out.contains(expected), "{expected} in {out}");
    }
    assert!(!out.contains(&key) && !err.contains(&key), "{out}{err}");

    // Language servers on PATH: one that answers --version, one that does
    // not (a rustup proxy without its component, say).
    let bin = tempfile::tempdir().unwrap();
    for (name, status) in [("clangd", 0), ("gopls", 1)] {
        use std::os::unix::fs::PermissionsExt;
        let path = bin.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\nexit {status}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (code, out, _) = dsh_with(&env, None, &[("PATH", &path)], &["doctor"]).await;
    assert_eq!(code, Some(0), "{out}");
    let clangd = format!("clangd: {}\n", bin.path().join("clangd").display());
    assert!(out.contains(&clangd), "{out}");
    assert!(
        out.contains(&format!(
            "gopls: {} — does not answer --version",
            bin.path().join("gopls").display()
        )),
        "{out}"
    );

    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refused = format!(
        "http://127.0.0.1:{}/v1",
        closed.local_addr().unwrap().port()
    );
    drop(closed);
    let (code, out, err) =
        dsh_with(&env, None, &[("DEEPSEEK_BASE_URL", &refused)], &["doctor"]).await;
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("unreachable"), "{out}");
    assert!(out.contains("To fix:\n  - the model endpoint"), "{out}");
    assert!(!out.contains(&key) && !err.contains(&key), "{out}{err}");

    // A broken config is named; the other checks still run.
    let (code, out, _) = dsh_with(&env, Some("bogus = 1\n"), &[], &["doctor"]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("unknown field `bogus`"), "{out}");
    assert!(out.contains("reachable"), "{out}");

    // No key for an endpoint that needs one.
    let mut keyless = TestEnv::new().await;
    keyless.api_key = None;
    let (code, out, _) = dsh_with(
        &keyless,
        None,
        &[("DEEPSEEK_BASE_URL", "https://api.deepseek.invalid")],
        &["doctor"],
    )
    .await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("API key:      missing (DEEPSEEK_API_KEY)"),
        "{out}"
    );
    assert!(out.contains("no API key: run `dsh login`"), "{out}");
    assert!(env.mock.requests().is_empty());
}

/// `dsh sessions list|show|delete` on a session `dsh run` made.
#[tokio::test]
async fn sessions_are_listed_shown_and_deleted_from_a_terminal() {
    let env = TestEnv::new().await;
    let (code, out, _) = dsh_with(&env, None, &[], &["sessions", "list"]).await;
    assert_eq!((code, out.as_str()), (Some(0), "no stored sessions\n"));

    env.mock.push_json(call(
        "r1",
        "read",
        serde_json::json!({"file_path": "hello.txt"}),
    ));
    env.mock.push_json(reply("It says hello."));
    let (code, _, err) = dsh_with(&env, None, &[], &["run", "What does hello.txt say?"]).await;
    assert_eq!(code, Some(0), "{err}");
    let id = err
        .lines()
        .find_map(|line| line.strip_prefix("session: "))
        .unwrap()
        .to_owned();

    let (code, out, _) = dsh_with(&env, None, &[], &["sessions", "list"]).await;
    assert_eq!(code, Some(0), "{out}");
    let row = out.lines().nth(1).unwrap_or_default();
    assert!(out.starts_with("ID "), "{out}");
    assert!(row.starts_with(&id), "{out}");
    assert!(row.contains("What does hello.txt say?"), "{out}");
    assert!(
        row.ends_with(&*env.cwd().canonicalize().unwrap().to_string_lossy()),
        "{out}"
    );

    let (code, out, _) = dsh_with(&env, None, &[], &["sessions", "show", &id]).await;
    assert_eq!(code, Some(0), "{out}");
    for expected in [
        &format!("session {id}"),
        "> What does hello.txt say?",
        "  ✓ Read hello.txt",
        "It says hello.",
    ] {
        assert!(out.contains(expected), "{expected} in {out}");
    }

    let (code, out, _) = dsh_with(&env, None, &[], &["sessions", "delete", &id]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(!env.sessions_dir().join(format!("{id}.jsonl")).exists());
    let (_, out, _) = dsh_with(&env, None, &[], &["sessions", "list"]).await;
    assert_eq!(out, "no stored sessions\n");
    for args in [["sessions", "delete", &id], ["sessions", "show", &id]] {
        let (code, out, _) = dsh_with(&env, None, &[], &args).await;
        assert_eq!(code, Some(1), "{args:?}: {out}");
    }
}

/// Runs only inside [`a_skip_is_said_and_listed_and_fails_under_dsh_ci`]:
/// `DSH_SKIP_PROBE=skip` skips, `=ran` runs (as `DSH_SKIP_PROBE_AS`, else
/// under its own name).
#[test]
fn skip_probe() {
    let test =
        std::env::var("DSH_SKIP_PROBE_AS").unwrap_or_else(|_| dsh_test_support::skip::this_test());
    match std::env::var("DSH_SKIP_PROBE").as_deref() {
        Ok("skip") => dsh_test_support::skip::skip(&test, "the probe skips", false),
        Ok("ran") => dsh_test_support::skip::ran(&test),
        _ => {}
    }
}

/// A test that cannot run here says `SKIPPED: <test>: <reason>` on stderr
/// (seen without `--nocapture`, as README says) and is listed in
/// target/test-skips.txt, which holds the last run's skips only: a test
/// that skips again is listed once, one that then runs is not listed, and
/// an earlier run's lines go; test binaries writing at once lose no line.
/// Under `DSH_CI=1` (`.ci/run`) a skip fails; `CI` alone changes nothing.
#[test]
fn a_skip_is_said_and_listed_and_fails_under_dsh_ci() {
    let target = tempfile::tempdir().unwrap();
    let file = target.path().join("test-skips.txt");
    let command = |vars: &[(&str, &str)]| {
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", "cli::skip_probe", "--test-threads=1"])
            .env_remove("DSH_CI")
            .env_remove("DSH_SKIP_PROBE_AS")
            .env("CARGO_TARGET_DIR", target.path());
        for (name, value) in vars {
            command.env(name, value);
        }
        command
    };
    let probe = |vars: &[(&str, &str)]| command(vars).output().unwrap();
    // The listed lines, without the run's `# run …` line.
    let listed = || {
        std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .filter(|line| !line.starts_with('#'))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let output = probe(&[("DSH_SKIP_PROBE", "skip"), ("CI", "true")]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("SKIPPED: cli::skip_probe: the probe skips"),
        "{}",
        text(&output.stderr)
    );
    assert_eq!(listed(), ["cli::skip_probe: the probe skips"]);
    // Again: still one line.
    assert!(probe(&[("DSH_SKIP_PROBE", "skip")]).status.success());
    assert_eq!(listed(), ["cli::skip_probe: the probe skips"]);
    // Its tool is there now: the line goes.
    assert!(probe(&[("DSH_SKIP_PROBE", "ran")]).status.success());
    assert!(listed().is_empty(), "{:?}", listed());

    // An earlier run's lines (another parent process) go at this run's
    // first report.
    std::fs::write(&file, "# run 1@1\nother::test: an old reason\n").unwrap();
    assert!(probe(&[("DSH_SKIP_PROBE", "skip")]).status.success());
    assert_eq!(listed(), ["cli::skip_probe: the probe skips"]);

    // Eight test binaries of one run at once: every line, whole.
    let names: Vec<String> = (0..8).map(|n| format!("probe::n{n}")).collect();
    let children: Vec<_> = names
        .iter()
        .map(|name| {
            command(&[("DSH_SKIP_PROBE", "skip"), ("DSH_SKIP_PROBE_AS", name)])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let mut expected: Vec<String> = names
        .iter()
        .map(|name| format!("{name}: the probe skips"))
        .collect();
    expected.insert(0, "cli::skip_probe: the probe skips".to_owned());
    let mut got = listed();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);

    let output = probe(&[("DSH_SKIP_PROBE", "skip"), ("DSH_CI", "1")]);
    assert!(!output.status.success());
    assert!(
        text(&output.stdout).contains("must run here"),
        "{}",
        text(&output.stdout)
    );
}
