//! `dsh-acp-compat DIR`: every exchange the e2e tests recorded in DIR (one
//! file per connection: the client's lines, a line `--- frames ---`, then
//! dsh's frames; written when `DSH_ACP_FRAMES_DIR` is set) is decoded with
//! the ACP schema 1.20 types: a request or notification by its method, a
//! result by the method of the request it answers. Exits 1 naming the first
//! frame a 1.20 client could not read.

use std::collections::HashMap;
use std::process::ExitCode;

use agent_client_protocol_schema::v1::{AgentNotification, AgentRequest, AgentResponse};

fn main() -> ExitCode {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: dsh-acp-compat DIR");
        return ExitCode::from(2);
    };
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(err) => {
            eprintln!("dsh-acp-compat: {dir}: {err}");
            return ExitCode::from(2);
        }
    };
    let (mut exchanges, mut frames, mut failures) = (0, 0, 0);
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        exchanges += 1;
        let (sent, written) = text.split_once("\n--- frames ---\n").unwrap_or(("", &text));
        let methods = requests(sent);
        for frame in written.lines().filter(|line| !line.is_empty()) {
            frames += 1;
            if let Err(error) = check(frame, &methods) {
                failures += 1;
                if failures <= 20 {
                    eprintln!("{}: {error}\n  frame: {frame}", path.display());
                }
            }
        }
    }
    println!(
        "ACP schema 1.20: {frames} frames of {exchanges} e2e exchanges checked, {failures} not readable"
    );
    if failures > 0 || frames == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The client's requests: id → method.
fn requests(sent: &str) -> HashMap<String, String> {
    sent.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|value| {
            let method = value.get("method")?.as_str()?.to_owned();
            Some((value.get("id")?.to_string(), method))
        })
        .collect()
}

fn check(frame: &str, methods: &HashMap<String, String>) -> Result<(), String> {
    let value: serde_json::Value =
        serde_json::from_str(frame).map_err(|err| format!("not JSON: {err}"))?;
    let params = value
        .get("params")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    match (
        value.get("method").and_then(|m| m.as_str()),
        value.get("id"),
    ) {
        // dsh's own fence frames never reach stdout; `$/` notifications
        // are protocol-level.
        (Some(method), _) if method.starts_with("$/") => Ok(()),
        (Some(method), Some(_)) => AgentRequest::from_method_and_params(method, &params)
            .map(drop)
            .map_err(|err| format!("request {method}: {err}")),
        (Some(method), None) => AgentNotification::from_method_and_params(method, &params)
            .map(drop)
            .map_err(|err| format!("notification {method}: {err}")),
        (None, Some(id)) => {
            if value.get("error").is_some() {
                return Ok(());
            }
            let Some(method) = methods.get(&id.to_string()) else {
                return Ok(());
            };
            let result = value
                .get("result")
                .cloned()
                .unwrap_or(serde_json::Value::Null);
            AgentResponse::from_method_and_result(method, result)
                .map(drop)
                .map_err(|err| format!("result of {method}: {err}"))
        }
        (None, None) => Err("neither a message nor a response".to_owned()),
    }
}
