//! The docs as a user reads them (issue 27, §4): README's commands and
//! examples are taken from README.md itself and run verbatim against the
//! built `dsh` where that can be done here — `dsh demo`, `--help` and the
//! commands it lists, `--version`, completions and the man page, Zed's
//! `settings.json` entry, the CI step's `dsh run`, the SDK exchange — and
//! every `config.toml` example in docs/ is loaded by dsh's own loader.
//! README's local-server example is run by `run.rs`
//! (`readmes_local_server_example_works_without_a_key`), not here.
//! Not run: `cargo test --workspace` (this suite is part of it), the
//! editor setups (`npm run package`, `code --install-extension`) and
//! `git diff` in the CI step (no repository here).

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::*;

fn read_doc(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path))
        .unwrap_or_else(|err| panic!("{path}: {err}"))
}

/// The fenced blocks of a Markdown text: (info string, body), in order.
fn fenced(markdown: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in markdown.lines() {
        match open.as_mut() {
            None => {
                if let Some(info) = line.strip_prefix("```") {
                    open = Some((info.trim().to_owned(), String::new()));
                }
            }
            Some((_, body)) => {
                if line.starts_with("```") {
                    blocks.push(open.take().unwrap());
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "an unclosed fence");
    blocks
}

/// The first fenced block of kind `info` after `marker` in README.
fn readme_block(marker: &str, info: &str) -> String {
    let readme = read_doc("README.md");
    let after = readme
        .split_once(marker)
        .unwrap_or_else(|| panic!("README has {marker:?}"))
        .1;
    fenced(after)
        .into_iter()
        .find(|(kind, _)| kind == info)
        .unwrap_or_else(|| panic!("a ```{info} block after {marker:?}"))
        .1
}

/// A shell line's words, for the simple lines README shows: quotes, `\`
/// line continuations, and a comment or a redirection ending the command.
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                let word = word.get_or_insert_with(String::new);
                for inner in chars.by_ref() {
                    if inner == c {
                        break;
                    }
                    word.push(inner);
                }
            }
            '\\' if chars.peek() == Some(&'\n') => {
                chars.next();
            }
            '#' | '>' | '|' if word.is_none() => break,
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// Runs the built `dsh ARGS…` to its end with an empty stdin.
async fn dsh(env: &TestEnv, args: &[String]) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let child = env.dsh(&args).spawn().expect("spawn dsh");
    tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("dsh ends")
        .unwrap()
}

/// The commands `dsh --help` lists (without `help`).
fn help_commands(help: &str) -> Vec<String> {
    help.split_once("Commands:\n")
        .expect("a Commands section")
        .1
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// "Run it": README's `cargo run --bin dsh -- demo` is the built `dsh`
/// with what follows `--`; it plays the whole scripted session with no key
/// and no network, and says so.
#[tokio::test]
async fn readmes_demo_runs_as_written() {
    let block = readme_block("Run it —", "sh");
    let words = words(block.trim());
    assert_eq!(words[..4], ["cargo", "run", "--bin", "dsh"], "{block}");
    let dash = words.iter().position(|word| word == "--").unwrap();
    let mut env = TestEnv::new().await;
    env.api_key = None;
    let output = dsh(&env, &words[dash + 1..]).await;
    let stdout = text(&output.stdout);
    assert_exit(&output, 0, "the README's demo");
    assert!(
        stdout.starts_with(
            "dsh demo: a scripted session over ACP (replay model, no network, no API key)"
        ),
        "{stdout}"
    );
    assert_eq!(stdout.matches("[stop: end_turn]").count(), 2, "{stdout}");
    assert!(
        stdout.contains("A fresh dsh process reloads the session from its log"),
        "{stdout}"
    );
    assert!(stdout.contains("session/load replayed"), "{stdout}");
    assert!(env.mock.requests().is_empty(), "the demo asked a model");
}

/// "The command line": the commands README lists are the ones `dsh --help`
/// lists, each takes `--help`, `--version` prints the version, and the
/// completion and man-page lines run as written, in a HOME where their
/// directories do not exist yet.
#[tokio::test]
async fn readmes_command_line_is_the_programs() {
    let readme = read_doc("README.md");
    let listed: Vec<String> = readme
        .split_once("`dsh --help` lists the commands (")
        .expect("README lists the commands")
        .1
        .split_once(')')
        .unwrap()
        .0
        .split('`')
        .skip(1)
        .step_by(2)
        // `config check`: the command is its first word.
        .map(|listed| listed.split_whitespace().next().unwrap().to_owned())
        .collect();
    let env = TestEnv::new().await;
    let help = dsh(&env, &["--help".into()]).await;
    assert_eq!(help.status.code(), Some(0));
    let commands = help_commands(&text(&help.stdout));
    assert_eq!(
        listed, commands,
        "README's list of commands and `dsh --help`'s differ"
    );
    for command in &commands {
        let output = dsh(&env, &[command.clone(), "--help".into()]).await;
        assert_eq!(output.status.code(), Some(0), "dsh {command} --help");
        assert!(
            text(&output.stdout).contains(&format!("Usage: dsh {command}")),
            "dsh {command} --help: {}",
            text(&output.stdout)
        );
    }
    let version = dsh(&env, &["--version".into()]).await;
    assert_eq!(version.status.code(), Some(0));
    assert_eq!(
        text(&version.stdout),
        format!("dsh {}\n", env!("CARGO_PKG_VERSION"))
    );

    // The completion and man-page lines, run as written by sh in a fresh
    // HOME (none of their directories exists yet), the built dsh on PATH.
    let block = readme_block("Shell\ncompletions and the man page", "sh");
    let home = tempfile::tempdir().unwrap();
    let path = format!(
        "{}:{}",
        Path::new(DSH).parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let man = std::process::Command::new("sh")
        .args(["-c", "command -v man"])
        .output()
        .is_ok_and(|found| found.status.success());
    let mut ran = 0;
    for line in block.lines().filter(|line| !line.trim().is_empty()) {
        // The dsh command: after the `mkdir -p … &&`, up to its
        // redirection or pipe.
        let words = words(line.rsplit("&& ").next().unwrap());
        assert_eq!(words[0], "dsh", "{line}");
        let into_man = line.contains("| man ");
        if into_man && !man {
            // No man(1) here to render the page: what it is given is.
            let output = dsh(&env, &words[1..]).await;
            assert_exit(&output, 0, line);
            assert!(text(&output.stdout).contains(".TH"), "{line}");
            ran += 1;
            continue;
        }
        let output = tokio::process::Command::new("sh")
            .args(["-c", line])
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", &path)
            .env("DSH_HOME", env.home.path())
            .output()
            .await
            .unwrap();
        assert_exit(&output, 0, line);
        // What the line made: the file it redirects into, else its output.
        let written = match line.split_once(" > ") {
            Some((_, target)) => {
                let target = target.split_whitespace().next().unwrap();
                let file = home.path().join(target.strip_prefix("~/").unwrap());
                std::fs::read_to_string(&file)
                    .unwrap_or_else(|err| panic!("{line}: {}: {err}", file.display()))
            }
            None => text(&output.stdout),
        };
        match words[1].as_str() {
            "completions" => {
                assert!(written.contains("dsh"), "{line}: {written}");
                if words[2] == "bash" {
                    let file = env.workspace.path().join("dsh.bash");
                    std::fs::write(&file, &written).unwrap();
                    let check = std::process::Command::new("bash")
                        .arg("-n")
                        .arg(&file)
                        .output()
                        .unwrap();
                    assert!(check.status.success(), "{}", text(&check.stderr));
                }
            }
            // Rendered by man(1), or the page itself.
            "man" if into_man => assert!(written.contains("dsh run"), "{line}: {written}"),
            "man" => assert!(written.contains(".TH"), "not a man page: {written}"),
            other => panic!("an unexpected command in README: {other}"),
        }
        ran += 1;
    }
    assert_eq!(ran, 5, "{block}");
}

/// "Any editor, by hand": Zed's `settings.json` entry is JSON, and the
/// command it names, with its args, is an ACP agent: it answers
/// `initialize`.
#[tokio::test]
async fn readmes_zed_settings_start_an_acp_agent() {
    let block = readme_block("Zed's `settings.json`:", "json");
    let settings: serde_json::Value = serde_json::from_str(&block).expect("README's JSON");
    let entry = &settings["agent_servers"]["dsh"];
    assert_eq!(entry["type"], "custom");
    assert_eq!(entry["command"], "/path/to/dsh");
    assert!(entry["env"]["DEEPSEEK_API_KEY"].is_string());
    let args: Vec<String> = entry["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|arg| arg.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(args, ["acp"]);

    let env = TestEnv::new().await;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = env.dsh(&args).spawn().expect("spawn dsh");
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{}}}\n")
        .await
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("an answer")
        .unwrap()
        .expect("a line");
    let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["id"], 1, "{line}");
    assert_eq!(answer["result"]["protocolVersion"], 1, "{line}");
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("dsh exits on EOF")
        .unwrap();
    assert!(status.success());
}

/// "Run it in CI": the workflow step's `dsh run` line, as written (its
/// redirection to `dsh-review.ndjson` too), against the mock model:
/// NDJSON events, then the result line.
#[tokio::test]
async fn readmes_ci_step_runs_as_written() {
    let block = readme_block("## Run it in CI", "yaml");
    let script = block.split_once("run: |\n").expect("a run script").1;
    let start = script.find("dsh run").expect("a dsh run line");
    let command = &script[start..];
    let end = command.find(".ndjson").expect("its output file") + ".ndjson".len();
    let command = &command[..end];
    let words = words(command);
    let output_file = command
        .rsplit_once('>')
        .expect("a redirection")
        .1
        .trim()
        .to_owned();
    assert_eq!(words[..2], ["dsh", "run"], "{command}");
    assert!(words.contains(&"--json".to_owned()), "{command}");

    let env = TestEnv::new().await;
    env.mock.push_json(reply("The diff looks right."));
    let output = dsh(&env, &words[1..]).await;
    let stderr = text(&output.stderr);
    if output.status.code() == Some(2) && stderr.contains("sandbox") {
        // `--approve sandboxed` where the kernel cannot sandbox commands.
        dsh_test_support::skip::skip(
            "docs::readmes_ci_step_runs_as_written",
            &format!("README's CI step needs the kernel sandbox: {stderr}"),
            false,
        );
        return;
    }
    dsh_test_support::skip::ran("docs::readmes_ci_step_runs_as_written");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    std::fs::write(env.workspace.path().join(&output_file), &output.stdout).unwrap();
    let written = std::fs::read_to_string(env.workspace.path().join(&output_file)).unwrap();
    let lines: Vec<serde_json::Value> = written
        .lines()
        .map(|line| serde_json::from_str(line).expect("NDJSON"))
        .collect();
    let result = lines.last().expect("a result line");
    assert_eq!(result["type"], "result", "{result}");
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    assert_eq!(result["text"], "The diff looks right.", "{result}");
    assert!(result["sessionId"].is_string(), "{result}");
    // README's shape of the result line: every key it names is there.
    let readme = read_doc("README.md");
    let shape = readme
        .split_once("`{\"type\":\"result\",")
        .expect("README shows the result line")
        .1
        .split_once('}')
        .unwrap()
        .0;
    for key in shape.split(',') {
        let key = key.trim_matches('"');
        assert!(result.get(key).is_some(), "README names {key}: {result}");
    }
    let task = words.last().unwrap();
    let request = &env.mock.requests()[0];
    assert!(
        request.to_string().contains(&task.replace('"', "\\\"")),
        "the task reached the model"
    );
}

/// "Drive it from a program": README's `→` lines sent to `dsh sdk` over
/// stdio (only the cwd and the session id are this test's) get the
/// answers README shows: `{sessionId}`, then `session.event` deltas.
#[tokio::test]
async fn readmes_sdk_exchange_works() {
    let block = readme_block("## Drive it from a program", "");
    let sent: Vec<serde_json::Value> = block
        .lines()
        .filter_map(|line| line.strip_prefix("→ "))
        .map(|line| serde_json::from_str(line).expect("README's request is JSON"))
        .collect();
    let shown: Vec<serde_json::Value> = block
        .lines()
        .filter_map(|line| line.strip_prefix("← "))
        .map(|line| serde_json::from_str(line).expect("README's answer is JSON"))
        .collect();
    assert_eq!(sent.len(), 3, "{block}");
    assert_eq!(shown.len(), 2, "{block}");

    let env = TestEnv::new().await;
    env.mock
        .push_json(json_reply_in_chunks(&["Looking", " at the test."]));
    let mut child = env.dsh(&["sdk"]).spawn().expect("spawn dsh sdk");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();

    let mut new = sent[0].clone();
    assert_eq!(new["method"], "session/new");
    new["params"]["cwd"] = env.cwd().display().to_string().into();
    stdin
        .write_all(format!("{new}\n").as_bytes())
        .await
        .unwrap();
    let opened = next_frame(&mut lines).await;
    assert_eq!(opened["id"], shown[0]["id"], "{opened}");
    let session = opened["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("README's result shape: {opened}"))
        .to_owned();
    for request in &sent[1..] {
        let mut request = request.clone();
        request["params"]["sessionId"] = session.clone().into();
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
    }
    let expected = &shown[1];
    let mut text = String::new();
    let mut answered = Vec::new();
    while !(text == "Looking at the test." && answered.len() == 2) {
        let frame = next_frame(&mut lines).await;
        if let Some(id) = frame.get("id") {
            assert!(frame.get("error").is_none(), "{frame}");
            answered.push(id.clone());
        } else if frame["method"] == expected["method"] {
            let params = &frame["params"];
            assert!(params["subscription"].is_number(), "{frame}");
            let event = &params["result"];
            if event["kind"] == expected["params"]["result"]["kind"]
                && event["channel"] == expected["params"]["result"]["channel"]
            {
                text.push_str(event["text"].as_str().expect("a delta's text"));
            }
        }
    }
    assert_eq!(text, "Looking at the test.");
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
}

/// The next line `dsh sdk` writes, as JSON.
async fn next_frame(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) -> serde_json::Value {
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("dsh sdk answers")
        .unwrap()
        .expect("a line");
    serde_json::from_str(&line).unwrap()
}

/// A reply streamed in these text chunks.
fn json_reply_in_chunks(chunks: &[&str]) -> serde_json::Value {
    let chunks: Vec<serde_json::Value> = chunks
        .iter()
        .map(|text| serde_json::json!({"text": text}))
        .collect();
    serde_json::json!({"chunks": chunks, "finish": "stop"})
}

/// The environment `Config::load` sees: a scratch `DSH_HOME` and nothing
/// else.
struct Home<'a>(&'a Path);

impl dsh_acp_server::credentials::Env for Home<'_> {
    fn var(&self, name: &str) -> Option<String> {
        match name {
            "DSH_HOME" | "HOME" => Some(self.0.display().to_string()),
            _ => None,
        }
    }
}

/// Every `config.toml` example in docs/ is a configuration dsh loads, as
/// written: each block is the whole file of a scratch `DSH_HOME`, read by
/// `Config::load`, and by `dsh config check` where the command exists.
#[tokio::test]
async fn the_docs_config_examples_load() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut pages: Vec<_> = std::fs::read_dir(&docs)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.sort();
    let env = TestEnv::new().await;
    let help = text(&dsh(&env, &["--help".into()]).await.stdout);
    let config_check = help_commands(&help).iter().any(|name| name == "config");
    let mut loaded = Vec::new();
    for page in pages {
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        for (index, (_, body)) in fenced(&std::fs::read_to_string(&page).unwrap())
            .into_iter()
            .filter(|(info, _)| info == "toml")
            .enumerate()
        {
            let home = tempfile::tempdir().unwrap();
            std::fs::write(home.path().join("config.toml"), &body).unwrap();
            // `[hooks] config = "hooks.json"` names a file of the home.
            std::fs::write(home.path().join("hooks.json"), "{\"hooks\": {}}").unwrap();
            if let Err(error) = dsh_acp_server::config::Config::load(&Home(home.path())) {
                panic!("{name}, toml block {}: {error}\n{body}", index + 1);
            }
            if config_check {
                let output = tokio::process::Command::new(DSH)
                    .args(["config", "check"])
                    .env_clear()
                    .env("PATH", std::env::var("PATH").unwrap_or_default())
                    .env("HOME", home.path())
                    .env("DSH_HOME", home.path())
                    .output()
                    .await
                    .unwrap();
                let what = format!("dsh config check on {name}, toml block {}", index + 1);
                assert_exit(&output, 0, &what);
            }
            loaded.push(format!("{name}#{}", index + 1));
        }
    }
    // configuration.md's full example and its hooks block, lsp.md, mcp.md,
    // extending.md's subagents and hooks.
    assert!(loaded.len() >= 6, "{loaded:?}");
    assert!(
        loaded.contains(&"configuration.md#1".to_owned()),
        "{loaded:?}"
    );
}

/// A table in README or docs/ is not cut in two by a blank line (the rows
/// after it would show as a paragraph of pipes: context.md's commands
/// table had one).
#[test]
fn no_table_is_split_by_a_blank_line() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut pages: Vec<_> = std::fs::read_dir(&docs)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"));
    let mut split = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for at in 2..lines.len() {
            let (row, blank, next) = (lines[at - 2], lines[at - 1], lines[at]);
            let is_row = |line: &str| line.starts_with('|') && line.trim_end().ends_with('|');
            // A row after a blank line that is not a new table's header.
            let header = lines.get(at + 1).is_some_and(|line| {
                line.starts_with("|--")
                    || line.starts_with("|:-")
                    || line.starts_with("| --")
                    || line.starts_with("|---")
            });
            if is_row(row) && blank.trim().is_empty() && is_row(next) && !header {
                split.push(format!("{}:{}", page.display(), at + 1));
            }
        }
    }
    assert!(split.is_empty(), "tables split by a blank line: {split:?}");
}

/// Issue 38 §4: README's install line uses `Cargo.lock` (`--locked`;
/// without it cargo resolves every dependency again, over the network),
/// installs the `dsh` binary of `acp-server`'s package, and says where it
/// builds (with `--path`, the workspace's `target/release`, kept) — not
/// in a temporary directory. The uninstall line names that package.
#[test]
fn readmes_install_line_is_locked_and_says_where_it_builds() {
    let block = readme_block("## Install it", "sh");
    let lines: Vec<Vec<String>> = block.lines().map(words).collect();
    let install = lines
        .iter()
        .find(|words| words[..2] == ["cargo", "install"])
        .expect("a cargo install line");
    for flag in ["--locked", "--path", "acp-server", "--bin", "dsh"] {
        assert!(install.contains(&flag.to_owned()), "{flag} in {install:?}");
    }
    let manifest: toml::Table = toml::from_str(&read_doc("acp-server/Cargo.toml")).unwrap();
    let package = manifest["package"]["name"].as_str().unwrap();
    let bins: Vec<&str> = manifest["bin"]
        .as_array()
        .map(|bins| bins.iter().filter_map(|bin| bin["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        bins.contains(&"dsh") || manifest["package"]["name"].as_str() == Some("dsh"),
        "acp-server builds a dsh binary: {bins:?}"
    );
    let uninstall = lines
        .iter()
        .find(|words| words[..2] == ["cargo", "uninstall"])
        .expect("a cargo uninstall line");
    assert_eq!(uninstall[2], package);
    let readme = read_doc("README.md");
    let section = readme
        .split_once("## Install it")
        .unwrap()
        .1
        .split_once("\n## ")
        .unwrap()
        .0;
    assert!(
        section.contains("`target/release/`") && !section.contains("temporary directory"),
        "{section}"
    );
}

/// Issue 38 §10 and §12: README says a skip is shown without
/// `--nocapture` and listed in `target/test-skips.txt`: a skipping test run
/// without `--nocapture` shows its line, and that is the file it is listed
/// in (`cli::skip_probe`, the probe of `cli.rs`).
#[test]
fn readmes_skips_are_shown_without_nocapture() {
    let readme = read_doc("README.md");
    assert!(
        readme.contains("(no `--nocapture` needed)")
            && readme.contains("`target/test-skips.txt`, rewritten by each run"),
        "README's skip sentence"
    );
    let target = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "cli::skip_probe"])
        .env_remove("DSH_CI")
        .env_remove("DSH_SKIP_PROBE_AS")
        .env("DSH_SKIP_PROBE", "skip")
        .env("CARGO_TARGET_DIR", target.path())
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("SKIPPED: cli::skip_probe: the probe skips"),
        "{stderr}"
    );
    let listed = dsh_test_support::skip::skips_file();
    assert_eq!(listed.file_name().unwrap(), "test-skips.txt");
    assert!(
        std::fs::read_to_string(target.path().join("test-skips.txt"))
            .unwrap()
            .contains("cli::skip_probe: the probe skips")
    );
}

/// Issue 38 §12: editors.md lists the key's sources in the order dsh
/// reads them (`credentials::missing` names them so), and `./.env` last,
/// only with `[credentials] dotenv = true`, which is off by default.
#[test]
fn editors_md_lists_the_key_sources_as_the_code_reads_them() {
    use dsh_acp_server::credentials::{missing, CredentialSettings, Lookup};
    let editors = read_doc("docs/editors.md");
    let list = editors
        .split_once("## The API key")
        .unwrap()
        .1
        .split_once("\n\n`initialize`")
        .expect("the list of sources, then the auth methods")
        .0;
    let items: Vec<&str> = list.split("\n1. ").nth(1).unwrap().split("\n4. ").collect();
    let (first_three, dotenv) = (items[0], items[1]);
    let home = std::path::Path::new("/home");
    let said = missing(Lookup {
        home,
        name: "DEEPSEEK_API_KEY",
        dotenv: false,
    });
    let said = said.strip_prefix("sources checked: ").unwrap();
    let (read, not_read) = said.split_once("; ").unwrap();
    let mut at = 0;
    for (source, in_docs) in read.split(", ").zip([
        "`DEEPSEEK_API_KEY`",
        "`$DSH_HOME/.credentials.yaml`",
        "`$DSH_HOME/.env`",
    ]) {
        let found = first_three[at..].find(in_docs).unwrap_or_else(|| {
            panic!("{in_docs} (the code: {source}) after {at} in {first_three}")
        });
        at += found + in_docs.len();
    }
    assert!(not_read.contains("./.env") && not_read.contains("[credentials] dotenv = true"));
    assert!(!CredentialSettings::default().dotenv, "./.env is opt-in");
    assert!(
        dotenv.starts_with("`./.env`")
            && dotenv.contains("only with\n   `[credentials] dotenv = true`"),
        "{dotenv}"
    );
}

/// Issue 38 §12: the auth methods acp-mapping.md's `initialize` row
/// describes are the ones `initialize` offers at DeepSeek's endpoint
/// (which needs a key): as many, with their ids and types.
#[tokio::test]
async fn acp_mappings_auth_methods_are_the_ones_initialize_offers() {
    let mut env = TestEnv::new().await;
    env.api_key = None;
    env.extra_env.push((
        "DEEPSEEK_BASE_URL".into(),
        "https://api.deepseek.com".into(),
    ));
    let mut child = env.dsh(&["acp"]).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    stdin
        .write_all(format!("{initialize}\n").as_bytes())
        .await
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("initialize is answered")
        .unwrap()
        .expect("a line");
    drop(stdin);
    let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
    let methods = answer["result"]["authMethods"].as_array().unwrap().clone();
    assert!(!methods.is_empty(), "{answer}");
    let mapping = read_doc("docs/acp-mapping.md");
    let row = mapping
        .lines()
        .find(|line| line.starts_with("| `initialize` |"))
        .expect("the initialize row");
    let said = row
        .split_once("`authMethods`")
        .expect("the row names authMethods")
        .1
        .split_once(". ")
        .unwrap()
        .0;
    let count = ["none", "one", "two", "three", "four"][methods.len()];
    assert!(said.contains(count), "{count} methods: {said}");
    for method in &methods {
        let id = method["id"].as_str().unwrap();
        assert!(said.contains(&format!("`{id}`")), "{id} in {said}");
        let kind = method["type"].as_str().unwrap_or("agent");
        let named = said.split_once(&format!("`{id}`")).unwrap().1;
        let named: String = named.chars().take(60).collect();
        assert!(named.contains(kind), "{id} is {kind}: {named}");
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
}

/// Issue 38 §12: error-codes.md's `run.timeout` row says the exit status
/// `dsh run --timeout` has, and README's exit statuses count a timeout
/// among the failures.
#[tokio::test]
async fn a_timeout_exits_as_error_codes_md_says() {
    let doc = read_doc("docs/error-codes.md");
    let row = doc
        .lines()
        .find(|line| line.starts_with("| `run.timeout` |"))
        .expect("the run.timeout row");
    let exits: i32 = row
        .split_once("exits ")
        .expect("the row says how dsh run exits")
        .1
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let readme = read_doc("README.md");
    let failed = readme
        .split_once(&format!("{exits} failed ("))
        .expect("README's exit statuses")
        .1
        .split_once(')')
        .unwrap()
        .0;
    assert!(failed.contains("`--timeout`"), "{failed}");

    let env = TestEnv::new().await;
    env.mock
        .push_json(serde_json::json!({"chunks":[{"text":"slow"}],"hang_after":1,"finish":"stop"}));
    let output = dsh(
        &env,
        &[
            "run".into(),
            "--timeout".into(),
            "0.5".into(),
            "slow".into(),
        ],
    )
    .await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(exits), "{stderr}");
    assert!(stderr.contains("run.timeout"), "{stderr}");
}

/// Issue 38 §1: configuration.md's Local servers say what the code does:
/// how long the server's model list is waited for (`model::served`), and
/// that a `[[models]] id` is sent as the server's model name.
#[test]
fn configuration_md_says_how_a_local_servers_model_is_found() {
    let doc = read_doc("docs/configuration.md");
    let section = doc
        .split_once("### Local servers")
        .expect("the Local servers section")
        .1;
    let seconds = dsh_acp_server::model::served::LIST_TIMEOUT.as_secs();
    assert!(
        section.contains(&format!("within {seconds} s")),
        "{section}"
    );
    assert!(section.contains("`GET\n  {base_url}/models`"), "{section}");
    assert!(
        doc.contains("`id` is sent\n# as the request's `model`: the server's own name for it"),
        "the [[models]] example says what id is"
    );
}
