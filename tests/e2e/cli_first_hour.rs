//! The command line's small traps of issue 38 ("The first hour, again",
//! item 11): a reader that closes stdout (`dsh man | head -1`) is a normal
//! end, `session:` said once by `dsh run`, `dsh help --help`, session ids
//! by a unique prefix, and messages that name the real place to fix:
//! the environment variable a bad base URL came from, the network for a
//! remote endpoint, what `dsh run` needs for a key, and a top-level key
//! written under a table.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::process::{Output, Stdio};
use std::time::Duration;

use crate::support::*;

/// `dsh ARGS` (no `DSH_LOG`: stderr holds dsh's own lines only) with
/// `vars` added, to its end.
async fn dsh(env: &TestEnv, vars: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = env.dsh(args);
    command.env_remove("DSH_LOG");
    for (name, value) in vars {
        command.env(name, value);
    }
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("dsh ends")
        .unwrap()
}

/// A pipe, both ends close-on-exec (no other test's child holds them).
fn pipe() -> (OwnedFd, OwnedFd) {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe")
}

/// Runs `dsh ARGS` with stdout into `stdout` (the write end of a pipe; the
/// test keeps no copy of it) and everything else as [`dsh`]: its exit
/// status and stderr.
async fn dsh_into(env: &TestEnv, args: &[&str], stdout: OwnedFd) -> (Option<i32>, String) {
    let mut command = env.dsh(args);
    command.env_remove("DSH_LOG").stdout(Stdio::from(stdout));
    let child = command.spawn().expect("spawn dsh");
    // The command holds the write end until it goes.
    drop(command);
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("dsh ends")
        .unwrap();
    (output.status.code(), text(&output.stderr))
}

/// `dsh man | head -1`, and the same for a completion script: the reader
/// takes one line and closes the pipe while dsh still has more to write
/// (the pipe holds one page: the rest cannot fit), and dsh ends with
/// status 0 and nothing on stderr.
#[tokio::test]
async fn a_reader_that_closes_stdout_after_one_line_is_a_normal_end() {
    let env = TestEnv::new().await;
    for args in [&["man"][..], &["completions", "bash"][..]] {
        let whole = dsh(&env, &[], args).await;
        assert_exit(&whole, 0, &format!("{args:?}"));
        let (read, write) = pipe();
        let held = nix::fcntl::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&write),
            nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096),
        )
        .expect("F_SETPIPE_SZ");
        assert!(
            whole.stdout.len() > usize::try_from(held).unwrap() + 200,
            "{args:?}: the output must not fit in the pipe"
        );
        let dsh_run = dsh_into(&env, args, write);
        // head -1: one line, a byte at a time (nothing read past it), then
        // the pipe closed.
        let head = tokio::task::spawn_blocking(move || {
            let mut reader = std::fs::File::from(read);
            let mut line = Vec::new();
            let mut byte = [0u8; 1];
            while reader.read(&mut byte).expect("read") == 1 {
                line.push(byte[0]);
                if byte[0] == b'\n' {
                    break;
                }
            }
            line
        });
        let (ended, line) = tokio::join!(dsh_run, async {
            tokio::time::timeout(Duration::from_secs(60), head)
                .await
                .expect("a line")
                .unwrap()
        });
        let (code, stderr) = ended;
        assert!(
            whole.stdout.starts_with(&line) && line.ends_with(b"\n"),
            "{args:?}: {}",
            text(&line)
        );
        assert_eq!((code, stderr.as_str()), (Some(0), ""), "{args:?}");
    }
}

/// `dsh ARGS` with stdout a pipe whose reader has gone before it writes a
/// byte: its exit status and stderr.
async fn to_a_gone_reader(env: &TestEnv, args: &[&str]) -> (Option<i32>, String) {
    let (read, write) = pipe();
    drop(read);
    dsh_into(env, args, write).await
}

/// Every command a person runs, its reader gone before it writes: the exit
/// status it has with a reader, and nothing said of the pipe (`dsh run`'s
/// stderr is its session line).
#[tokio::test]
async fn every_command_ends_as_usual_when_its_reader_has_gone() {
    let env = TestEnv::new().await;
    env.mock.push_json(reply("Done."));
    let (code, stderr) = to_a_gone_reader(&env, &["run", "say done"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let session = stderr
        .strip_prefix("session: ")
        .and_then(|rest| rest.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("only the session line: {stderr}"))
        .to_owned();
    let show = ["sessions", "show", session.as_str()];
    let commands: [&[&str]; 13] = [
        &["man"],
        &["completions", "bash"],
        &["completions", "zsh"],
        &["completions", "fish"],
        &["demo"],
        &["sessions", "list"],
        &show,
        &["config", "check"],
        &["doctor"],
        &["--version"],
        &["--help"],
        &["help", "run"],
        &[],
    ];
    for args in commands {
        let open = dsh(&env, &[], args).await;
        let (code, stderr) = to_a_gone_reader(&env, args).await;
        assert_eq!(code, open.status.code(), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
}

/// The session lines on `dsh run`'s stderr.
fn session_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|line| line.starts_with("session: "))
        .collect()
}

/// `dsh run` names its session once: on success, with `--quiet`, and when
/// the turn fails.
#[tokio::test]
async fn dsh_run_names_its_session_once() {
    let env = TestEnv::new().await;
    env.mock.push_json(reply("Done."));
    env.mock.push_json(reply("Done."));
    env.mock.push_json(
        serde_json::json!({"status":400,"body":"{\"error\":{\"message\":\"bad request\"}}"}),
    );
    for (args, code) in [
        (&["run", "say done"][..], 0),
        (&["run", "--quiet", "say done"][..], 0),
        (&["run", "fail"][..], 1),
    ] {
        let output = dsh(&env, &[], args).await;
        let stderr = text(&output.stderr);
        assert_exit(&output, code, &format!("{args:?}"));
        assert_eq!(session_lines(&stderr).len(), 1, "{args:?}: {stderr}");
    }
}

/// `dsh help --help` (and `-h`) is help for `help`; `dsh help A B` is
/// `dsh A B --help`; an unknown command is a usage error.
#[tokio::test]
async fn help_takes_help_and_the_commands_it_names() {
    let env = TestEnv::new().await;
    for (args, usage) in [
        (&["help", "--help"][..], "Usage: dsh help [COMMAND]..."),
        (&["help", "-h"][..], "Usage: dsh help [COMMAND]..."),
        (&["help", "help"][..], "Usage: dsh help [COMMAND]..."),
        (&["help"][..], "Usage: dsh [COMMAND]"),
        (
            &["help", "sessions", "show"][..],
            "Usage: dsh sessions show <ID>",
        ),
        (&["help", "config", "check"][..], "Usage: dsh config check"),
    ] {
        let output = dsh(&env, &[], args).await;
        assert_exit(&output, 0, &format!("{args:?}"));
        let stdout = text(&output.stdout);
        assert!(stdout.contains(usage), "{args:?}: {stdout}");
        assert!(output.stderr.is_empty(), "{args:?}");
    }
    let long = dsh(&env, &[], &["run", "--help"]).await;
    let by_help = dsh(&env, &[], &["help", "run"]).await;
    assert_eq!(text(&by_help.stdout), text(&long.stdout));
    let output = dsh(&env, &[], &["help", "nope"]).await;
    assert_exit(&output, 2, "dsh help nope");
    assert!(
        text(&output.stderr).contains("'nope'"),
        "{}",
        text(&output.stderr)
    );
}

/// `dsh sessions show|delete` take the start of an id when exactly one
/// session's id starts with it; an ambiguous start lists the matches and
/// deletes nothing.
#[tokio::test]
async fn sessions_take_a_unique_start_of_an_id() {
    let env = TestEnv::new().await;
    env.mock.push_json(reply("It says hello."));
    let output = dsh(&env, &[], &["run", "What does hello.txt say?"]).await;
    assert_exit(&output, 0, "dsh run");
    let stderr = text(&output.stderr);
    let id = session_lines(&stderr)[0]
        .strip_prefix("session: ")
        .unwrap()
        .to_owned();
    // A second stored session whose id shares the first's first 30
    // characters, and not the 31st: the same log under another id.
    let twin = format!(
        "{}{}",
        &id[..30],
        if id.as_bytes()[30] == b'f' {
            "eeeeee"
        } else {
            "ffffff"
        }
    );
    let log = std::fs::read_to_string(env.sessions_dir().join(format!("{id}.jsonl"))).unwrap();
    std::fs::write(
        env.sessions_dir().join(format!("{twin}.jsonl")),
        log.replace(&id, &twin),
    )
    .unwrap();

    for command in ["show", "delete"] {
        let output = dsh(&env, &[], &["sessions", command, &id[..8]]).await;
        assert_exit(&output, 1, command);
        let said = text(&output.stdout);
        assert!(said.contains("ambiguous"), "{command}: {said}");
        assert!(
            said.contains(&id) && said.contains(&twin),
            "{command}: {said}"
        );
    }
    assert!(env.sessions_dir().join(format!("{id}.jsonl")).exists());
    assert!(env.sessions_dir().join(format!("{twin}.jsonl")).exists());

    let output = dsh(&env, &[], &["sessions", "show", &id[..31]]).await;
    assert_exit(&output, 0, "show by a unique start");
    let shown = text(&output.stdout);
    assert!(shown.starts_with(&format!("session {id}\n")), "{shown}");
    assert!(shown.contains("It says hello."), "{shown}");

    let output = dsh(&env, &[], &["sessions", "delete", &twin[..31]]).await;
    assert_exit(&output, 0, "delete by a unique start");
    assert_eq!(text(&output.stdout), format!("deleted session {twin}\n"));
    assert!(!env.sessions_dir().join(format!("{twin}.jsonl")).exists());
    assert!(env.sessions_dir().join(format!("{id}.jsonl")).exists());

    let output = dsh(&env, &[], &["sessions", "show", "zzzz"]).await;
    assert_exit(&output, 1, "no such session");
    assert!(text(&output.stdout).contains("no session zzzz"));
}

/// A base URL without a scheme from `DEEPSEEK_BASE_URL`, no config.toml:
/// `dsh config check` and `dsh doctor` name the variable, never a file.
#[tokio::test]
async fn a_bad_base_url_from_the_environment_is_the_variables() {
    let env = TestEnv::new().await;
    std::fs::remove_file(env.home.path().join("config.toml")).unwrap();
    let bad = [("DEEPSEEK_BASE_URL", "localhost:8080")];
    let output = dsh(&env, &bad, &["config", "check"]).await;
    assert_exit(&output, 1, "config check");
    let said = text(&output.stdout);
    assert!(said.starts_with("DEEPSEEK_BASE_URL: error\n"), "{said}");
    assert!(said.contains("has no scheme"), "{said}");
    assert!(!said.contains("config.toml"), "{said}");

    let output = dsh(&env, &bad, &["doctor"]).await;
    assert_exit(&output, 1, "doctor");
    let said = text(&output.stdout);
    assert!(
        said.contains("config:       the environment variable DEEPSEEK_BASE_URL — broken"),
        "{said}"
    );
    assert!(
        said.contains("says where): the environment variable DEEPSEEK_BASE_URL"),
        "{said}"
    );
    assert!(!said.contains("config.toml"), "{said}");
}

/// An endpoint `dsh doctor` cannot reach: start the server when it is on
/// this machine; check the network when it is not.
#[tokio::test]
async fn doctor_says_start_the_server_only_for_a_local_endpoint() {
    let env = TestEnv::new().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let local = format!(
        "http://127.0.0.1:{}/v1",
        closed.local_addr().unwrap().port()
    );
    drop(closed);
    let output = dsh(&env, &[("DEEPSEEK_BASE_URL", &local)], &["doctor"]).await;
    assert_exit(&output, 1, "doctor, local");
    let said = text(&output.stdout);
    assert!(said.contains("start the server"), "{said}");
    assert!(!said.contains("check the network"), "{said}");

    // `.invalid` never resolves.
    let remote = [("DEEPSEEK_BASE_URL", "https://api.deepseek.invalid")];
    let output = dsh(&env, &remote, &["doctor"]).await;
    assert_exit(&output, 1, "doctor, remote");
    let said = text(&output.stdout);
    assert!(said.contains("cannot be reached"), "{said}");
    assert!(said.contains("check the network"), "{said}");
    assert!(!said.contains("start the server"), "{said}");
}

/// `dsh run` without a key for an endpoint that needs one says what fits
/// it: the variable and `dsh login`, nothing of an editor's settings.
#[tokio::test]
async fn dsh_runs_missing_key_message_fits_dsh_run() {
    let mut env = TestEnv::new().await;
    env.api_key = None;
    let mut command = env.dsh(&["run", "hello"]);
    // The default endpoint, DeepSeek's: a key is needed (nothing is sent
    // without one).
    command
        .env_remove("DEEPSEEK_BASE_URL")
        .env_remove("DSH_LOG");
    let output = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .expect("dsh ends")
        .unwrap();
    assert_exit(&output, 1, "dsh run without a key");
    let stderr = text(&output.stderr);
    assert!(stderr.contains("auth.missing_credential"), "{stderr}");
    assert!(
        stderr.contains("set DEEPSEEK_API_KEY") && stderr.contains("`dsh login`"),
        "{stderr}"
    );
    for editorial in ["settings.json", "Zed", "editor", "Authenticate"] {
        assert!(!stderr.contains(editorial), "{editorial}: {stderr}");
    }
}

/// A top-level key written after `[provider]` belongs to that table in
/// TOML: `dsh config check` says to move it above the first table.
#[tokio::test]
async fn a_top_level_key_under_a_table_is_told_to_move_up() {
    let env = TestEnv::new().await;
    std::fs::write(
        env.home.path().join("config.toml"),
        "[provider]\nkind = \"deepseek\"\ndefault_mode = \"ask\"\n",
    )
    .unwrap();
    let output = dsh(&env, &[], &["config", "check"]).await;
    assert_exit(&output, 1, "config check");
    let said = text(&output.stdout);
    assert!(
        said.contains(":3:1: unknown field `default_mode`"),
        "{said}"
    );
    assert!(
        said.contains("hint: `default_mode` is a top-level key, but here it is under [provider]"),
        "{said}"
    );
    assert!(said.contains("move it above the first table"), "{said}");
}
