//! Language servers: first answer, a warm query through the bridge against
//! the same request sent straight to the server, and their memory.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::proc::{median, row};

/// (server command, workspace fixture, file, 1-based line, symbol)
const LSP_CASES: &[(&str, &str, &str, u32, &str)] = &[
    ("clangd", "c", "main.c", 5, "scale"),
    ("pyright-langserver", "python", "app/main.py", 3, "scale"),
    (
        "typescript-language-server",
        "ts",
        "src/main.ts",
        3,
        "scale",
    ),
];

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn utf16_position(text: &str, line: u32, symbol: &str) -> dsh_lsp_bridge::Position {
    let content = text.lines().nth(line as usize - 1).unwrap();
    let byte = content.find(symbol).unwrap();
    dsh_lsp_bridge::Position {
        line: line - 1,
        character: content[..byte].encode_utf16().count() as u32,
    }
}

/// RSS of the server's processes: those running in `root` (the scratch root
/// is unique to one server) or named after the command (pyright changes
/// its working directory).
fn tree_rss_kib(root: &Path, command: &str) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let named = String::from_utf8_lossy(&cmdline).contains(command);
        if (cwd == root || named) && pid != std::process::id() {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            total += status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    total
}

pub async fn lsp_rows(scratch: &Path) {
    use dsh_lsp_bridge::{Answer, Bridge, BridgeSettings, Operation, Query};
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/workspaces");
    for (command, fixture, file, line, symbol) in LSP_CASES {
        let Ok(program) = which_program(command) else {
            row(
                &format!("LSP {command}"),
                "—",
                "not installed (.ci/install-lsp)".into(),
            );
            continue;
        };
        let root = scratch.join(format!("lsp-{fixture}"));
        copy_dir(&fixtures.join(fixture), &root);
        let root = root.canonicalize().unwrap();
        let path = root.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let position = utf16_position(&text, *line, symbol);
        let query = Query {
            file: path.clone(),
            text: text.clone(),
            position: Some(position),
            operation: Operation::Definition,
        };
        let settings = BridgeSettings {
            ready_timeout_ms: 60_000,
            request_timeout_ms: 30_000,
            ..BridgeSettings::default()
        };
        let bridge = Bridge::new(
            settings,
            vec![root.clone()],
            dsh_process::Spawner::default(),
            std::sync::Arc::new(|_: &std::path::Path| true),
        );
        let started = Instant::now();
        loop {
            match bridge.query(&query).await {
                Ok(Answer::Locations(found)) if !found.is_empty() => break,
                _ if started.elapsed() > Duration::from_secs(60) => break,
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        let first = started.elapsed();
        let mut warm = Vec::new();
        for _ in 0..50 {
            let t = Instant::now();
            let _ = bridge.query(&query).await;
            warm.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let rss = tree_rss_kib(&root, command);
        bridge.shutdown().await;
        let direct = direct_definition_ms(&program, command, &root, &path, &text, position).await;
        let bridged = median(warm);
        row(
            &format!("LSP {command}: first definition"),
            "—",
            format!("{:.0} ms", first.as_secs_f64() * 1000.0),
        );
        row(
            &format!("LSP {command}: warm definition, bridge vs direct"),
            "≤ 2 ms added",
            match direct {
                Some(direct) => {
                    format!("{bridged:.2} vs {direct:.2} ms (+{:.2})", bridged - direct)
                }
                None => format!("{bridged:.2} ms (direct failed)"),
            },
        );
        row(
            &format!("LSP {command}: RSS"),
            "—",
            format!("{:.0} MB", rss as f64 / 1024.0),
        );
    }
}

fn which_program(command: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(command))
                .find(|p| p.is_file())
        })
        .ok_or(())
}

/// The same definition request over a minimal hand-written LSP client, for
/// the overhead comparison: median of 50 warm requests.
async fn direct_definition_ms(
    program: &Path,
    command: &str,
    root: &Path,
    file: &Path,
    text: &str,
    position: dsh_lsp_bridge::Position,
) -> Option<f64> {
    use tokio::io::{AsyncReadExt, BufReader as TokioBufReader};
    let args: Vec<&str> = match command {
        "clangd" => vec![],
        _ => vec!["--stdio"],
    };
    let mut child = tokio::process::Command::new(program)
        .args(&args)
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let mut stdout = TokioBufReader::new(child.stdout.take()?);
    let root_uri = format!("file://{}", root.display());
    let file_uri = format!("file://{}", file.display());
    let init_options = if command == "typescript-language-server" {
        json!({"tsserver":{"useSyntaxServer":"never"}})
    } else {
        Value::Null
    };
    async fn send(stdin: &mut tokio::process::ChildStdin, value: Value) {
        let body = value.to_string();
        stdin
            .write_all(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }
    async fn recv(stdout: &mut TokioBufReader<tokio::process::ChildStdout>) -> Option<Value> {
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            stdout.read_line(&mut line).await.ok()?;
            if line.is_empty() {
                return None;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("Content-Length:") {
                length = value.trim().parse().ok()?;
            }
        }
        let mut body = vec![0u8; length];
        stdout.read_exact(&mut body).await.ok()?;
        serde_json::from_slice(&body).ok()
    }
    /// Sends a request and answers server requests until its response.
    async fn call(
        stdin: &mut tokio::process::ChildStdin,
        stdout: &mut TokioBufReader<tokio::process::ChildStdout>,
        id: u64,
        method: &str,
        params: Value,
    ) -> Option<Value> {
        send(
            stdin,
            json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}),
        )
        .await;
        loop {
            let message = recv(stdout).await?;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return Some(message);
            }
            if let (Some(request_id), Some(method)) = (
                message.get("id"),
                message.get("method").and_then(|m| m.as_str()),
            ) {
                let result = if method == "workspace/configuration" {
                    Value::Array(vec![
                        Value::Null;
                        message["params"]["items"]
                            .as_array()
                            .map(|a| a.len())
                            .unwrap_or(1)
                    ])
                } else {
                    Value::Null
                };
                send(
                    stdin,
                    json!({"jsonrpc":"2.0","id":request_id,"result":result}),
                )
                .await;
            }
        }
    }
    call(&mut stdin, &mut stdout, 1, "initialize", json!({"processId":std::process::id(),"rootUri":root_uri,"capabilities":{"window":{"workDoneProgress":true}},"initializationOptions":init_options})).await?;
    send(
        &mut stdin,
        json!({"jsonrpc":"2.0","method":"initialized","params":{}}),
    )
    .await;
    let language = match command {
        "clangd" => "c",
        "pyright-langserver" => "python",
        _ => "typescript",
    };
    send(&mut stdin, json!({"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":file_uri,"languageId":language,"version":1,"text":text}}})).await;
    let params = json!({"textDocument":{"uri":file_uri},"position":{"line":position.line,"character":position.character}});
    let mut id = 2;
    let started = Instant::now();
    loop {
        let response = call(
            &mut stdin,
            &mut stdout,
            id,
            "textDocument/definition",
            params.clone(),
        )
        .await?;
        id += 1;
        let result = &response["result"];
        if !(result.is_null() || result.as_array().is_some_and(|a| a.is_empty()))
            || started.elapsed() > Duration::from_secs(60)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut samples = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        call(
            &mut stdin,
            &mut stdout,
            id,
            "textDocument/definition",
            params.clone(),
        )
        .await?;
        id += 1;
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let _ = child.start_kill();
    Some(median(samples))
}
