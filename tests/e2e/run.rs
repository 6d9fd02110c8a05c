//! `dsh run`: one task, unattended, as a CI job runs it.

use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

/// Runs `dsh run ARGS` with `stdin` as its input.
async fn dsh_run(env: &TestEnv, args: &[&str], stdin: &str) -> Output {
    use tokio::io::AsyncWriteExt;
    let mut full = vec!["run"];
    full.extend_from_slice(args);
    let mut child = env.dsh(&full).spawn().expect("spawn dsh run");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("dsh run ends")
        .unwrap()
}

fn session_of(output: &Output) -> String {
    let stderr = text(&output.stderr);
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("session: "))
        .unwrap_or_else(|| panic!("no session line in {stderr}"))
        .to_owned()
}

#[tokio::test]
async fn stdout_is_the_final_text_and_the_session_can_continue() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("r1", "read", json!({"file_path":"hello.txt"})));
    env.mock.push_json(reply("It says hello."));
    let output = dsh_run(&env, &["read hello.txt and tell me"], "").await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "It says hello.\n");
    let stderr = text(&output.stderr);
    assert!(stderr.contains("✓ Read hello.txt"), "{stderr}");
    let session = session_of(&output);

    // --session continues with the earlier history; the task from stdin.
    env.mock.push_json(reply("Still hello."));
    let output = dsh_run(&env, &["--session", &session, "-"], "and again?").await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "Still hello.\n");
    let last = env.mock.requests().pop().unwrap();
    let messages = last["messages"].to_string();
    assert!(messages.contains("read hello.txt and tell me") && messages.contains("and again?"));
}

#[tokio::test]
async fn json_prints_the_log_events_then_the_result() {
    let env = TestEnv::new().await;
    env.mock.push_json(json!({"chunks":[{"text":"Done."}],"finish":"stop","usage":{"prompt_tokens":100,"completion_tokens":5}}));
    let output = dsh_run(&env, &["--json", "do it"], "").await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let lines: Vec<Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("every line is JSON"))
        .collect();
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "user/message",
            "session/title",
            "turn/start",
            "assistant/message",
            "turn/end",
            "result"
        ]
    );
    let result = lines.last().unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(result["text"], "Done.");
    assert_eq!(result["sessionId"], session_of(&output).as_str());
    assert_eq!(result["usage"]["output_tokens"], 5);
    assert!(result["durationMs"].is_u64());
    // The events are the log's.
    let logged = env.log_events(&session_id(&session_of(&output)));
    assert_eq!(logged.len(), lines.len() - 1);
}

fn session_id(id: &str) -> agent_client_protocol::v1::schema::SessionId {
    agent_client_protocol::v1::schema::SessionId::new(id)
}

#[tokio::test]
async fn approve_never_rejects_edits_and_edits_rejects_commands() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path":"new.txt","content":"x\n"}),
    ));
    env.mock.push_json(reply("Could not write."));
    let output = dsh_run(&env, &["write new.txt"], "").await;
    assert_eq!(output.status.code(), Some(0));
    assert!(!env.cwd().join("new.txt").exists());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("permission rejected (--approve never): Write new.txt"),
        "{stderr}"
    );

    env.mock.push_json(calls(&[
        (
            "w1",
            "write",
            json!({"file_path":"new.txt","content":"x\n"}),
        ),
        ("b1", "bash", json!({"command":"touch ran.txt"})),
    ]));
    env.mock.push_json(reply("Wrote it."));
    let output = dsh_run(&env, &["--approve", "edits", "write and run"], "").await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(
        std::fs::read_to_string(env.cwd().join("new.txt")).unwrap(),
        "x\n"
    );
    assert!(!env.cwd().join("ran.txt").exists());
    let stderr = text(&output.stderr);
    assert!(
        stderr
            .contains("permission rejected (--approve edits allows edits only): Run touch ran.txt"),
        "{stderr}"
    );
}

#[tokio::test]
async fn exit_codes_say_what_happened() {
    let env = TestEnv::new().await;
    // 2: usage errors.
    for args in [
        &["--bogus", "x"][..],
        &["   "][..],
        &["--cwd", "/nonexistent", "x"][..],
        &["--approve", "maybe", "x"][..],
    ] {
        let output = dsh_run(&env, args, "").await;
        assert_exit(&output, 2, &format!("{args:?}"));
        assert!(output.stdout.is_empty());
    }
    // 1: the model fails; the code is on stderr.
    env.mock
        .push_json(json!({"status":400,"body":"{\"error\":{\"message\":\"bad request\"}}"}));
    let output = dsh_run(&env, &["fail"], "").await;
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    assert!(
        text(&output.stderr).contains("model.invalid_request"),
        "{}",
        text(&output.stderr)
    );
    // 1: a timeout cancels the turn.
    env.mock.push_json(
        json!({"chunks":[{"text":"slow"},{"text":" reply"}],"hang_after":1,"finish":"stop"}),
    );
    let output = dsh_run(&env, &["--timeout", "0.5", "slow"], "").await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("run.timeout"));
}

#[tokio::test]
async fn sigint_cancels_cleanly_with_130() {
    let env = TestEnv::relaxed().await;
    env.mock.push_json(
        json!({"chunks":[{"text":"working"},{"text":" on it"}],"hang_after":1,"finish":"stop"}),
    );
    let mut child = env.dsh(&["run", "hang"]).spawn().unwrap();
    drop(child.stdin.take());
    // Wait for the model call, then interrupt.
    let started = std::time::Instant::now();
    while env.mock.requests().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let output = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", text(&output.stderr));
    let session = session_of(&output);
    let events = env.log_events(&session_id(&session));
    assert_eq!(events.last().unwrap()["type"], "turn/end");
    assert_eq!(events.last().unwrap()["data"]["stop"], "cancelled");
}

/// Runs `dsh run ARGS` with stdout and stderr on a new pseudo-terminal (no
/// spinner: `CI` is set; no log lines); its exit code and everything the
/// terminal received.
async fn dsh_run_on_a_terminal(env: &TestEnv, args: &[&str]) -> (Option<i32>, String) {
    dsh_run_on_a_terminal_with(env, args, &[("CI", "1")]).await
}

/// [`dsh_run_on_a_terminal`] with `vars` instead of `CI=1`.
async fn dsh_run_on_a_terminal_with(
    env: &TestEnv,
    args: &[&str],
    vars: &[(&str, &str)],
) -> (Option<i32>, String) {
    use std::io::Read;
    use std::process::Stdio;
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let mut full = vec!["run"];
    full.extend_from_slice(args);
    let mut command = env.dsh(&full);
    command
        .envs(vars.iter().copied())
        .env("DSH_LOG", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::from(pty.slave.try_clone().unwrap()))
        .stderr(Stdio::from(pty.slave));
    let mut child = command.spawn().expect("spawn dsh run");
    // The terminal ends (EIO) once no process holds its other side.
    drop(command);
    let mut master = std::fs::File::from(pty.master);
    let reader = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = master.read(&mut buf) {
            out.extend_from_slice(&buf[..n]);
        }
        out
    });
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("dsh run ends")
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .expect("the terminal closes")
        .unwrap();
    (status.code(), String::from_utf8_lossy(&out).into_owned())
}

/// A reply that writes the clipboard (OSC 52) and hides text (SGR 8), and a
/// tool title that sets the window title (OSC 0).
const HOSTILE_REPLY: &str =
    "Done \u{1b}]52;c;ZWNobyBwd25lZA==\u{7} and \u{1b}[8mhidden\u{1b}[0m.\u{9b}2J";
const HOSTILE_URL: &str = "http://example.invalid/\u{1b}]0;pwned\u{7}";

/// A file name that sets the window title; the error naming it is a
/// stderr line.
const HOSTILE_PATH: &str = "missing-\u{1b}]0;pwned\u{7}.txt";

fn script_hostile_output(env: &TestEnv) {
    env.mock.push_json(calls(&[
        ("f1", "web_fetch", json!({ "url": HOSTILE_URL })),
        ("r1", "read", json!({ "file_path": HOSTILE_PATH })),
    ]));
    env.mock.push_json(reply(HOSTILE_REPLY));
}

/// On a terminal, what the model controls — the answer, and tool titles
/// on stderr — is shown with its control sequences written out, so it can
/// neither write the clipboard nor hide text.
#[tokio::test]
async fn on_a_terminal_model_control_sequences_are_written_out() {
    let env = TestEnv::new().await;
    script_hostile_output(&env);
    let (code, shown) = dsh_run_on_a_terminal(&env, &["do it"]).await;
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        !shown.contains(['\u{1b}', '\u{7}', '\u{9b}']),
        "raw control sequences reached the terminal: {shown:?}"
    );
    for escaped in [
        "Done \\u{1b}]52;c;ZWNobyBwd25lZA==\\u{7} and \\u{1b}[8mhidden\\u{1b}[0m.\\u{9b}2J",
        "permission rejected (--approve never): Fetch http://example.invalid/\\u{1b}]0;pwned\\u{7}",
        "✗ Fetch http://example.invalid/\\u{1b}]0;pwned\\u{7}",
        "missing-\\u{1b}]0;pwned\\u{7}.txt",
    ] {
        assert!(shown.contains(escaped), "{escaped} in {shown:?}");
    }
}

/// Piped (a file, another program), the answer stays byte for byte what
/// the model wrote; the stderr lines are escaped (a CI log reads each line
/// on its own: text from the model must not drive it or start one).
#[tokio::test]
async fn piped_output_stays_byte_exact() {
    let env = TestEnv::new().await;
    script_hostile_output(&env);
    let output = dsh_run(&env, &["do it"], "").await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(output.stdout, format!("{HOSTILE_REPLY}\n").into_bytes());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(
            "permission rejected (--approve never): Fetch http://example.invalid/\\u{1b}]0;pwned\\u{7}\n"
        ),
        "{stderr:?}"
    );
    assert!(!stderr.contains(HOSTILE_PATH), "{stderr:?}");
    assert!(
        stderr.contains("missing-\\u{1b}]0;pwned\\u{7}.txt"),
        "{stderr:?}"
    );
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

/// A repository's `./.env` must not choose the key: the user's
/// `$DSH_HOME/.env` wins, and without it `./.env` is read only when
/// `[credentials] dotenv = true`. Which source was used is said (never
/// the key), and a missing key names the sources checked.
#[tokio::test]
async fn a_workspace_env_file_never_outranks_the_users_key_and_is_opt_in() {
    let mut env = TestEnv::new().await;
    env.api_key = None;
    let home_env = env.home.path().join(".env");
    std::fs::write(env.cwd().join(".env"), "DEEPSEEK_API_KEY=sk-repo-owner\n").unwrap();
    std::fs::write(&home_env, "DEEPSEEK_API_KEY=sk-users-own\n").unwrap();
    let bearer = |env: &TestEnv| {
        let head = env.mock.heads().last().unwrap().to_ascii_lowercase();
        head.lines()
            .find_map(|line| line.strip_prefix("authorization: "))
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    env.mock.push_json(reply("Hi."));
    let output = dsh_run(&env, &["hi"], "").await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(bearer(&env), "bearer sk-users-own");
    assert!(stderr.contains("$DSH_HOME/.env"), "{stderr}");
    assert!(!stderr.contains("sk-users-own") && !stderr.contains("sk-repo-owner"));

    // No key of the user's, dotenv off: ./.env is not read (an endpoint
    // away from this machine: the loopback mock would be asked without a
    // key).
    std::fs::remove_file(&home_env).unwrap();
    let sent = env.mock.requests().len();
    env.extra_env
        .push(("DEEPSEEK_BASE_URL".into(), "https://example.invalid".into()));
    let output = dsh_run(&env, &["hi"], "").await;
    env.extra_env.clear();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(env.mock.requests().len(), sent, "nothing was sent");
    assert!(stderr.contains("auth.missing_credential"), "{stderr}");
    for source in [
        "DEEPSEEK_API_KEY",
        ".credentials.yaml",
        "$DSH_HOME/.env",
        "[credentials] dotenv",
    ] {
        assert!(stderr.contains(source), "{source} in {stderr}");
    }
    assert!(!stderr.contains("sk-repo-owner"));

    // Opted in: ./.env is the last resort…
    let config = env.home.path().join("config.toml");
    let mut text_config = std::fs::read_to_string(&config).unwrap();
    text_config.push_str("\n[credentials]\ndotenv = true\n");
    std::fs::write(&config, text_config).unwrap();
    env.mock.push_json(reply("Hi."));
    let output = dsh_run(&env, &["hi"], "").await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(bearer(&env), "bearer sk-repo-owner");
    assert!(stderr.contains("./.env"), "{stderr}");
    // …after the user's own.
    std::fs::write(&home_env, "DEEPSEEK_API_KEY=sk-users-own\n").unwrap();
    env.mock.push_json(reply("Hi."));
    let output = dsh_run(&env, &["hi"], "").await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(bearer(&env), "bearer sk-users-own");
}

/// `--json` always ends with the result object, also when the run fails
/// before its turn (an unknown `--session`, a bad `--model`); the exit
/// status is the same as without `--json`.
#[tokio::test]
async fn json_ends_with_a_result_when_the_run_fails_before_the_turn() {
    let env = TestEnv::new().await;
    let output = dsh_run(&env, &["--json", "--session", "no-such-session", "x"], "").await;
    let plain = dsh_run(&env, &["--session", "no-such-session", "x"], "").await;
    assert_eq!(output.status.code(), plain.status.code());
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let result = last_json(&output);
    assert_eq!(result["type"], "result", "{result}");
    assert_eq!(result["stopReason"], "error");
    assert_eq!(result["sessionId"], Value::Null);
    assert_eq!(result["text"], "");
    assert_eq!(result["usage"]["output_tokens"], 0);
    assert!(result["durationMs"].is_u64());
    let code = result["error"]["code"].as_str().unwrap();
    assert!(text(&output.stderr).contains(code), "{result}");
    assert!(result["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no-such-session"));

    let output = dsh_run(&env, &["--json", "--model", "no-such-model", "x"], "").await;
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    let result = last_json(&output);
    assert_eq!(result["type"], "result", "{result}");
    assert_eq!(result["stopReason"], "error");
    // Checked before a session is opened: none is named, none is left.
    assert_eq!(result["sessionId"], Value::Null);
    assert!(result["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no-such-model"));
    assert!(env.mock.requests().is_empty());
}

/// Runs `dsh run ARGS` (no stdin); `adjust` edits the command first. The
/// output and how long the run took.
async fn dsh_run_timed(
    env: &TestEnv,
    args: &[&str],
    adjust: impl FnOnce(&mut tokio::process::Command),
) -> (Output, Duration) {
    let mut full = vec!["run"];
    full.extend_from_slice(args);
    let mut command = env.dsh(&full);
    adjust(&mut command);
    let started = std::time::Instant::now();
    let child = command.spawn().expect("spawn dsh run");
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("dsh run ends")
        .unwrap();
    (output, started.elapsed())
}

/// The `Authorization` header of the last request the mock model received.
fn authorization(env: &TestEnv) -> Option<String> {
    let head = env.mock.heads().last().cloned().expect("a request arrived");
    head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("authorization")
            .then(|| value.trim().to_owned())
    })
}

/// README's local-server example, as written there, with only the port
/// changed to the mock model's.
fn readme_local_server_example(port_url: &str) -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let after = readme
        .split_once("A local server, for example:")
        .expect("README has the local-server example")
        .1;
    let block = after
        .split_once("```toml\n")
        .unwrap()
        .1
        .split_once("```")
        .unwrap()
        .0;
    assert!(block.contains("http://127.0.0.1:8080/v1"), "{block}");
    block.replace("http://127.0.0.1:8080", port_url)
}

/// A local server (llama.cpp, Ollama) needs no key: README's example works
/// as written with no key anywhere, and the request carries no
/// `Authorization`. A key, when configured and set, is still sent; a
/// keyless declaration (`api_key_env = ""`) never sends one.
#[tokio::test]
async fn readmes_local_server_example_works_without_a_key() {
    let mut env = TestEnv::new().await;
    env.api_key = None;
    let config = env.home.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n[titles]\nfrom_model = false\n",
            readme_local_server_example(&env.mock.url)
        ),
    )
    .unwrap();
    assert!(!env.home.path().join(".credentials.yaml").exists());
    env.mock.push_json(reply("Hi from a local model."));
    let no_base_url = |command: &mut tokio::process::Command| {
        command.env_remove("DEEPSEEK_BASE_URL");
    };
    let (output, _) = dsh_run_timed(&env, &["hi"], no_base_url).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "Hi from a local model.\n");
    assert_eq!(authorization(&env), None);
    assert_eq!(env.mock.requests()[0]["model"], "qwen2.5-coder-32b");

    // A loopback server that wants a key gets the configured one.
    let mut text_config = std::fs::read_to_string(&config).unwrap();
    text_config = text_config.replace(
        "kind = \"openai\"\n",
        "kind = \"openai\"\napi_key_env = \"LOCAL_LLM_KEY\"\n",
    );
    std::fs::write(&config, &text_config).unwrap();
    env.mock.push_json(reply("Hi."));
    let (output, _) = dsh_run_timed(&env, &["hi"], |command| {
        command
            .env_remove("DEEPSEEK_BASE_URL")
            .env("LOCAL_LLM_KEY", "sk-local");
    })
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(authorization(&env).as_deref(), Some("Bearer sk-local"));

    // Declared keyless: a key in the environment is neither read nor sent.
    std::fs::write(
        &config,
        text_config.replace("api_key_env = \"LOCAL_LLM_KEY\"", "api_key_env = \"\""),
    )
    .unwrap();
    env.mock.push_json(reply("Hi."));
    let (output, _) = dsh_run_timed(&env, &["hi"], |command| {
        command
            .env_remove("DEEPSEEK_BASE_URL")
            .env("DEEPSEEK_API_KEY", "sk-not-for-this-server");
    })
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(authorization(&env), None);
}

/// Away from this machine a missing key still fails closed, before any
/// connection (`example.invalid` never resolves: the error is the key's).
#[tokio::test]
async fn a_remote_endpoint_without_a_key_is_refused_before_connecting() {
    let mut env = TestEnv::new().await;
    env.api_key = None;
    let (output, elapsed) = dsh_run_timed(&env, &["hi"], |command| {
        command.env("DEEPSEEK_BASE_URL", "https://example.invalid/v1");
    })
    .await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("auth.missing_credential"), "{stderr}");
    assert!(stderr.contains("DEEPSEEK_API_KEY"), "{stderr}");
    assert!(!stderr.contains("model.transport"), "{stderr}");
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
}

/// A base URL without `http://` is a configuration mistake, reported at
/// once with the key that holds it — not retried and blamed on the network.
#[tokio::test]
async fn a_base_url_without_a_scheme_fails_at_once_naming_its_key() {
    let env = TestEnv::new().await;
    let (output, elapsed) = dsh_run_timed(&env, &["hi"], |command| {
        command.env("DEEPSEEK_BASE_URL", "localhost:8080");
    })
    .await;
    let stderr = text(&output.stderr);
    // A configuration error: it fails, whatever its status.
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("DEEPSEEK_BASE_URL = \"localhost:8080\" has no scheme"),
        "{stderr}"
    );
    assert!(stderr.contains("http://localhost:8080"), "{stderr}");
    assert!(
        !stderr.contains("retrying") && !stderr.contains("network"),
        "{stderr}"
    );
    assert!(elapsed < Duration::from_secs(1), "{elapsed:?}");

    let config = env.home.path().join("config.toml");
    let mut text_config = std::fs::read_to_string(&config).unwrap();
    text_config = text_config.replace("[provider]\n", "[provider]\nbase_url = \"127.0.0.1:9\"\n");
    std::fs::write(&config, text_config).unwrap();
    let (output, elapsed) = dsh_run_timed(&env, &["--json", "hi"], |command| {
        command.env_remove("DEEPSEEK_BASE_URL");
    })
    .await;
    assert!(!output.status.success(), "{}", text(&output.stderr));
    let message = last_json(&output)["error"]["message"].to_string();
    assert!(message.contains("[provider] base_url"), "{message}");
    assert!(message.contains("no scheme"), "{message}");
    assert!(elapsed < Duration::from_secs(1), "{elapsed:?}");
    assert!(env.mock.requests().is_empty());
}

/// Nothing listening on this machine: no retries (waiting will not start
/// the server), an answer within 2 s with the default retry settings, and
/// a hint naming the address.
#[tokio::test]
async fn a_refused_loopback_connection_fails_fast_with_a_hint() {
    let env = TestEnv::new().await;
    // The default retry policy (5 retries from 500 ms) and model titles on.
    std::fs::write(env.home.path().join("config.toml"), "").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let (output, elapsed) = dsh_run_timed(&env, &["hi"], |command| {
        command.env("DEEPSEEK_BASE_URL", &url);
    })
    .await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("model.transport"), "{stderr}");
    assert!(
        stderr.contains(&format!("is the server running at {url}?")),
        "{stderr}"
    );
    assert!(!stderr.contains("retrying model request"), "{stderr}");
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
}

/// A retry is one log line, whatever else runs beside the turn.
#[tokio::test]
async fn each_retry_is_logged_once() {
    let env = TestEnv::new().await;
    env.mock.push_json(json!({"status":503}));
    env.mock.push_json(json!({"status":503}));
    env.mock.push_json(reply("Done."));
    let output = dsh_run(&env, &["go"], "").await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let retries: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("retrying model request"))
        .collect();
    assert_eq!(retries.len(), 2, "{stderr}");
    assert!(retries[0].contains("attempt=1") && retries[1].contains("attempt=2"));
}

/// Serves one canned HTTP response to every request on a loopback port.
async fn canned_server(response: &'static str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                // Read the whole request (head and body) before answering.
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    let text = String::from_utf8_lossy(&buf).to_ascii_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|line| line.strip_prefix("content-length:"))
                            .and_then(|value| value.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + length {
                            break;
                        }
                    }
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    url
}

/// A web page (or any body that is not an event stream) where the model
/// should be is `model.malformed_response`, not a dropped connection.
#[tokio::test]
async fn an_endpoint_answering_html_is_a_malformed_response() {
    let env = TestEnv::new().await;
    let check = |output: &Output| {
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        let error = &last_json(output)["error"];
        assert_eq!(error["code"], "model.malformed_response", "{stderr}");
        assert!(
            error["message"].as_str().unwrap().contains("base URL"),
            "{error}"
        );
        assert!(!stderr.contains("connection dropped"), "{stderr}");
        assert!(!stderr.contains("retrying model request"), "{stderr}");
    };
    // Labelled as HTML.
    let page = "<!doctype html><html><body>Welcome</body></html>";
    let response: &'static str = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
            page.len()
        )
        .into_boxed_str(),
    );
    let url = canned_server(response).await;
    let (output, _) = dsh_run_timed(&env, &["--json", "hi"], |command| {
        command.env("DEEPSEEK_BASE_URL", &url);
    })
    .await;
    check(&output);
    // Mislabelled: a 200 whose body holds no event at all.
    env.mock
        .push_json(json!({"status":200,"body":"<html><body>It works!</body></html>\n"}));
    let output = dsh_run(&env, &["--json", "hi"], "").await;
    check(&output);
    let message = last_json(&output)["error"]["message"].to_string();
    assert!(message.contains("It works!"), "{message}");
}

/// `--approve sandboxed`: edits and commands are allowed, and the commands
/// stay in accept-edits' kernel sandbox — one writing in the workspace
/// succeeds, one writing outside it fails; an edit outside is rejected.
/// (`--approve all` is full access: no sandbox.)
#[tokio::test]
async fn approve_sandboxed_runs_commands_in_the_sandbox() {
    let env = TestEnv::new().await;
    let outside = tempfile::tempdir().unwrap();
    let escaped = outside.path().join("escaped.txt");
    let edited = outside.path().join("edited.txt");
    let note = outside.path().join("note.txt");
    std::fs::write(&note, "read me\n").unwrap();
    // dsh's own home holds the key: never read by the file tools below
    // full-access, though reads outside the workspace are allowed here.
    let key_file = env.home.path().join(".credentials.yaml");
    std::fs::write(&key_file, "OTHER_KEY: SECRET-KEY-XYZ\n").unwrap();
    env.mock.push_json(calls(&[
        (
            "r2",
            "read",
            json!({"file_path": key_file.to_string_lossy()}),
        ),
        (
            "w1",
            "write",
            json!({"file_path":"new.txt","content":"x\n"}),
        ),
        (
            "w2",
            "write",
            json!({"file_path": edited.to_string_lossy(), "content":"x\n"}),
        ),
        ("b1", "bash", json!({"command":"touch ran.txt"})),
        ("r1", "read", json!({"file_path": note.to_string_lossy()})),
        (
            "b2",
            "bash",
            json!({"command": format!("touch {}", escaped.display())}),
        ),
    ]));
    env.mock.push_json(reply("Done."));
    let output = dsh_run(&env, &["--approve", "sandboxed", "write and run"], "").await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(env.cwd().join("new.txt").exists(), "{stderr}");
    assert!(env.cwd().join("ran.txt").exists(), "{stderr}");
    assert!(
        !escaped.exists(),
        "a sandboxed command wrote outside: {stderr}"
    );
    assert!(!edited.exists(), "{stderr}");
    assert!(
        stderr.contains(
            "permission allowed (--approve sandboxed allows edits and sandboxed commands): Run touch ran.txt"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "permission rejected (--approve sandboxed allows edits and sandboxed commands): Write"
        ),
        "{stderr}"
    );
    assert!(tool_result(&env, "r1").contains("read me"), "{stderr}");
    let refused = tool_result(&env, "r2");
    assert!(!refused.contains("SECRET-KEY-XYZ"), "{refused}");
    assert!(refused.contains("[permission:"), "{refused}");
    let result = tool_result(&env, "b2");
    assert!(
        result.contains("Permission denied") || result.contains("Read-only"),
        "{result}"
    );
}

/// Three lines 0.3 s apart, for the live-output tests.
const SLOW_LINES: &str = "echo one; sleep 0.3; echo two; sleep 0.3; printf three";

/// On a terminal, a command's output is shown as it comes, a line at a
/// time under its call, before the call's line; the spinner says what the
/// run waits for and for how long.
#[tokio::test]
async fn on_a_terminal_command_output_is_shown_live_with_a_spinner() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("b1", "bash", json!({ "command": SLOW_LINES })));
    env.mock.push_json(reply("Counted."));
    let (code, shown) = dsh_run_on_a_terminal_with(
        &env,
        &["--approve", "sandboxed", "count"],
        &[("TERM", "xterm")],
    )
    .await;
    assert_eq!(code, Some(0), "{shown:?}");
    let at = |needle: &str| {
        shown
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} in {shown:?}"))
    };
    let (one, two, three) = (at("  │ one"), at("  │ two"), at("  │ three"));
    let done = at("✓ Run echo one");
    assert!(one < two && two < three && three < done, "{shown:?}");
    // The spinner: what the run waits for, and for how long.
    for spinner in [
        "waiting for the model 0s",
        "Run echo one; sleep 0.3; echo two; sleep 0.3; printf three 0s",
    ] {
        assert!(shown.contains(spinner), "{spinner:?} in {shown:?}");
    }
    assert!(shown.contains("Counted."), "{shown:?}");
}

/// `--quiet`: no line per tool call and no command output, on a terminal
/// or piped; the answer and the session line stay.
#[tokio::test]
async fn quiet_keeps_only_the_outcome() {
    let env = TestEnv::new().await;
    for _ in 0..2 {
        env.mock
            .push_json(call("b1", "bash", json!({ "command": SLOW_LINES })));
        env.mock.push_json(reply("Counted."));
    }
    let output = dsh_run(&env, &["--quiet", "--approve", "sandboxed", "count"], "").await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&output.stdout), "Counted.\n");
    assert!(!stderr.contains("✓") && !stderr.contains("│"), "{stderr}");
    assert!(stderr.contains("session: "), "{stderr}");

    let (code, shown) =
        dsh_run_on_a_terminal(&env, &["-q", "--approve", "sandboxed", "count"]).await;
    assert_eq!(code, Some(0), "{shown:?}");
    assert!(!shown.contains("│") && !shown.contains("✓"), "{shown:?}");
    assert!(shown.contains("Counted."), "{shown:?}");
}
