//! The ACP registry entry (editor-extensions/registry/) and the terminal
//! login a registry install relies on.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::*;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs the packaging script on the built binary.
fn package(out: &Path) -> Value {
    let entry = out.join("agent.json");
    let status = std::process::Command::new("bash")
        .arg(root().join("editor-extensions/registry/package.sh"))
        .args(["--binary", DSH, "--out"])
        .arg(out)
        .arg("--entry")
        .arg(&entry)
        .env_remove("DSH_RELEASE_URL")
        .env_remove("DSH_REPOSITORY")
        .stdout(Stdio::null())
        .status()
        .expect("run package.sh");
    assert!(status.success());
    serde_json::from_str(&std::fs::read_to_string(entry).unwrap()).unwrap()
}

/// What the registry's verifier does (its `verify_agents.py` and
/// `client.py`): extract the host archive, start its command with its args
/// in the extraction directory under an empty HOME, send `initialize` with
/// its capabilities, and require an `agent` or `terminal` auth method.
async fn verify_like_the_registry(archive: &Path, target: &Value) -> Vec<Value> {
    let scratch = tempfile::tempdir().unwrap();
    let extracted = scratch.path().join("extracted");
    std::fs::create_dir(&extracted).unwrap();
    let status = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(&extracted)
        .status()
        .unwrap();
    assert!(status.success());
    let cmd = target["cmd"].as_str().unwrap().trim_start_matches("./");
    let args: Vec<String> = serde_json::from_value(target["args"].clone()).unwrap();
    let home = scratch.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let mut child = tokio::process::Command::new(extracted.join(cmd))
        .args(&args)
        .current_dir(&extracted)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("TERM", "dumb")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the archive's command starts");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": 1,
        "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
        "clientCapabilities": {
            "terminal": true,
            "fs": {"readTextFile": true, "writeTextFile": true},
            "_meta": {"terminal_output": true, "terminal-auth": true},
        },
    }});
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(format!("{initialize}\n").as_bytes())
        .await
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("an answer within the verifier's timeout")
        .unwrap()
        .expect("a line");
    let response: Value = serde_json::from_str(&line).unwrap();
    assert!(response.get("error").is_none(), "{response}");
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    serde_json::from_value(response["result"]["authMethods"].clone()).unwrap()
}

#[tokio::test]
async fn the_registry_entry_is_generated_valid_and_its_archive_passes_the_verifier() {
    let out = tempfile::tempdir().unwrap();
    let entry = package(out.path());

    // The committed entry is what the script writes (regenerate, compare).
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("editor-extensions/registry/dsh/agent.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        entry, committed,
        "editor-extensions/registry/dsh/agent.json is stale: run editor-extensions/registry/package.sh"
    );

    // The registry's own schema (vendored from agentclientprotocol/registry).
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("fixtures/registry/agent.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&entry)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let version = String::from_utf8(
        std::process::Command::new(DSH)
            .arg("--version")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(
        version.trim(),
        format!("dsh {}", entry["version"].as_str().unwrap())
    );
    let binary = entry["distribution"]["binary"].as_object().unwrap();
    for platform in [
        "linux-x86_64",
        "linux-aarch64",
        "darwin-x86_64",
        "darwin-aarch64",
    ] {
        let target = &binary[platform];
        assert_eq!(target["args"], json!(["acp"]), "{platform}");
        assert_eq!(target["cmd"], "./dsh", "{platform}");
        let archive = target["archive"].as_str().unwrap();
        assert!(
            archive.contains(&format!("/v{}/", entry["version"].as_str().unwrap()))
                && !archive.contains("/latest/"),
            "{archive}"
        );
    }

    // The icon: 16×16, monochrome through currentColor.
    let icon =
        std::fs::read_to_string(root().join("editor-extensions/registry/dsh/icon.svg")).unwrap();
    assert!(icon.contains(r#"width="16""#) && icon.contains(r#"height="16""#));
    assert!(icon.contains("currentColor"));
    for attribute in ["fill=\"", "stroke=\""] {
        for value in icon.split(attribute).skip(1) {
            let value = value.split('"').next().unwrap();
            assert!(
                matches!(value, "currentColor" | "none"),
                "{attribute}{value}"
            );
        }
    }

    // The host archive and its checksum.
    let host = &binary["linux-x86_64"];
    let name = host["archive"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap();
    let archive = out.path().join(name);
    let sums = std::fs::read_to_string(out.path().join(format!("{name}.sha256"))).unwrap();
    let check = std::process::Command::new("sha256sum")
        .arg("-c")
        .arg("-")
        .current_dir(out.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(sums.as_bytes())?;
            child.wait()
        })
        .unwrap();
    assert!(check.success(), "the archive matches its .sha256");

    let methods = verify_like_the_registry(&archive, host).await;
    let types: Vec<&str> = methods
        .iter()
        .map(|m| m.get("type").and_then(Value::as_str).unwrap_or("agent"))
        .collect();
    assert!(types.contains(&"terminal"), "{methods:#?}");
    let login = methods.iter().find(|m| m["type"] == "terminal").unwrap();
    assert_eq!(login["args"], json!(["login"]));
    assert_eq!(login["_meta"]["terminal-auth"]["args"], json!(["login"]));
}

/// `dsh login` or `dsh logout` with `stdin`.
async fn login(env: &TestEnv, command: &str, stdin: &str) -> std::process::Output {
    let mut child = env.dsh(&[command]).spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn dsh_login_stores_the_key_that_sessions_then_use_and_logout_forgets_it() {
    use std::os::unix::fs::PermissionsExt;
    let mut env = TestEnv::new().await;
    env.api_key = None;
    let key = "sk-login-d5h-0123456789";

    // Without a key: the login method is offered, and authenticating with
    // it says what to do (at an endpoint away from this machine: the
    // loopback mock would take requests without a key).
    env.extra_env
        .push(("DEEPSEEK_BASE_URL".into(), "https://example.invalid".into()));
    let conn = env.connect().await;
    env.extra_env.clear();
    conn.initialize().await;
    let refused = conn
        .cx
        .send_request(agent_client_protocol::v1::schema::AuthenticateRequest::new(
            "dsh-login",
        ))
        .block_task()
        .await
        .unwrap_err();
    assert!(refused.message.contains("dsh login"), "{refused:?}");
    conn.finish().await;

    let empty = login(&env, "login", "\n").await;
    assert_eq!(empty.status.code(), Some(2));
    let stored = login(&env, "login", &format!("{key}\n")).await;
    assert!(stored.status.success(), "{stored:?}");
    assert!(stored.stdout.is_empty());
    assert!(!String::from_utf8_lossy(&stored.stderr).contains(key));
    let file = env.home.path().join(".credentials.yaml");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(std::fs::read_to_string(&file).unwrap().contains(key));

    // A session with no key in the environment uses the stored one.
    env.mock.push_json(reply("Logged in."));
    let conn = env.connect().await;
    conn.initialize().await;
    conn.cx
        .send_request(agent_client_protocol::v1::schema::AuthenticateRequest::new(
            "dsh-login",
        ))
        .block_task()
        .await
        .expect("authenticate succeeds once a key is stored");
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "hi").await.expect("the prompt ends");
    let heads = env.mock.heads().join("\n").to_lowercase();
    assert!(
        heads.contains(&format!("authorization: bearer {key}")),
        "{heads}"
    );
    let frames = conn.finish().await.join("\n");
    assert!(!frames.contains(key), "the key never reaches the editor");
    let log = std::fs::read_to_string(env.log_path(&session)).unwrap();
    assert!(!log.contains(key), "nor the session log");

    let out = login(&env, "logout", "").await;
    assert!(out.status.success());
    assert!(!file.exists());
}
