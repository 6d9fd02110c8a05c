//! Every frame dsh writes, validated against the vendored ACP v1 schema
//! (`fixtures/acp-schema/schema.json`): the JSON-RPC envelope against the
//! schema's agent branch, then strictly by method.

use std::sync::{Arc, Mutex, OnceLock};

struct Schemas {
    envelope: jsonschema::Validator,
    defs: serde_json::Value,
    by_def: Mutex<std::collections::HashMap<String, Arc<jsonschema::Validator>>>,
}

fn schemas() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let path = format!(
            "{}/../../fixtures/acp-schema/schema.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let schema: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        // Frames the agent sends: the schema's "Agent" branch (its requests,
        // responses and notifications) or a protocol-level notification.
        let branches = schema["anyOf"].as_array().unwrap();
        let agent_schema = serde_json::json!({
            "$schema": schema["$schema"],
            "$defs": schema["$defs"],
            "anyOf": [branches[0], branches[2]],
        });
        Schemas {
            envelope: jsonschema::validator_for(&agent_schema).expect("schema compiles"),
            defs: schema["$defs"].clone(),
            by_def: Mutex::new(Default::default()),
        }
    })
}

fn validate_def(def: &str, value: &serde_json::Value, frame: &str) {
    let schemas = schemas();
    let validator = schemas
        .by_def
        .lock()
        .unwrap()
        .entry(def.to_owned())
        .or_insert_with(|| {
            assert!(
                schemas.defs.get(def).is_some(),
                "schema has no definition {def}"
            );
            let schema =
                serde_json::json!({ "$defs": schemas.defs, "$ref": format!("#/$defs/{def}") });
            Arc::new(jsonschema::validator_for(&schema).expect("definition compiles"))
        })
        .clone();
    if let Err(error) = validator.validate(value) {
        panic!("stdout frame does not validate as {def}: {error}\nframe: {frame}");
    }
}

/// The schema definition of the params of a method the agent may call.
fn agent_method_def(method: &str) -> Option<&'static str> {
    Some(match method {
        "session/update" => "SessionNotification",
        "session/request_permission" => "RequestPermissionRequest",
        "elicitation/create" => "CreateElicitationRequest",
        "fs/read_text_file" => "ReadTextFileRequest",
        "fs/write_text_file" => "WriteTextFileRequest",
        "terminal/create" => "CreateTerminalRequest",
        "terminal/output" => "TerminalOutputRequest",
        "terminal/release" => "ReleaseTerminalRequest",
        "terminal/wait_for_exit" => "WaitForTerminalExitRequest",
        "terminal/kill" => "KillTerminalRequest",
        "$/cancel_request" => "CancelRequestNotification",
        _ => return None,
    })
}

/// The schema definition of the result of a method the client calls.
fn client_method_result_def(method: &str) -> Option<&'static str> {
    Some(match method {
        "initialize" => "InitializeResponse",
        "authenticate" => "AuthenticateResponse",
        "logout" => "LogoutResponse",
        "session/new" => "NewSessionResponse",
        // Unstable (no definition in the stable schema vendored here); its
        // response has the same fields as session/new's in schema 1.17.
        "session/fork" => "NewSessionResponse",
        "session/load" => "LoadSessionResponse",
        "session/list" => "ListSessionsResponse",
        "session/delete" => "DeleteSessionResponse",
        "session/resume" => "ResumeSessionResponse",
        "session/close" => "CloseSessionResponse",
        "session/set_mode" => "SetSessionModeResponse",
        "session/set_config_option" => "SetSessionConfigOptionResponse",
        "session/prompt" => "PromptResponse",
        _ => return None,
    })
}

/// Validates every frame dsh wrote: the JSON-RPC envelope against the ACP
/// v1 schema, then strictly by method — params of the agent's requests and
/// notifications, results by the method of the client request they answer
/// (from `sent`), error objects against `Error`.
pub fn validate_exchange(sent: &[String], frames: &[String]) {
    let mut methods = std::collections::HashMap::new();
    for line in sent {
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(line) {
            if let (Some(id), Some(method)) = (
                value.get("id"),
                value.get("method").and_then(|m| m.as_str()),
            ) {
                methods.insert(id.to_string(), method.to_owned());
            }
        }
    }
    for frame in frames {
        let value: serde_json::Value = serde_json::from_str(frame)
            .unwrap_or_else(|e| panic!("stdout frame is not JSON ({e}): {frame}"));
        if is_unstable_update(&value) {
            continue;
        }
        if let Err(error) = schemas().envelope.validate(&value) {
            panic!(
                "stdout frame does not validate against the ACP v1 schema: {error}\nframe: {frame}"
            );
        }
        if let Some(method) = value.get("method").and_then(|m| m.as_str()) {
            let def = agent_method_def(method)
                .unwrap_or_else(|| panic!("dsh sent an unexpected method {method}: {frame}"));
            validate_def(
                def,
                value.get("params").unwrap_or(&serde_json::Value::Null),
                frame,
            );
        } else if let Some(error) = value.get("error") {
            validate_def("Error", error, frame);
        } else if let Some(result) = value.get("result") {
            let id = value.get("id").map(|id| id.to_string()).unwrap_or_default();
            if let Some(def) = methods
                .get(&id)
                .and_then(|method| client_method_result_def(method))
            {
                validate_def(def, result, frame);
            } else if !sent.is_empty() {
                panic!("dsh answered id {id}, which the client never sent: {frame}");
            }
        }
    }
    // Only exchanges that validate (the validator's self-test feeds it
    // broken ones).
    keep_for_compat_check(sent, frames);
}

/// With `DSH_ACP_FRAMES_DIR` set (`.ci/run`), a valid exchange is also
/// written there, for `tests/acp-compat` to decode with the ACP schema
/// 1.20 types once the tests have run.
fn keep_for_compat_check(sent: &[String], frames: &[String]) {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let Some(dir) = std::env::var_os("DSH_ACP_FRAMES_DIR") else {
        return;
    };
    let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::path::Path::new(&dir).join(format!("{}-{number}.txt", std::process::id()));
    let mut text = sent.join("\n");
    text.push_str("\n--- frames ---\n");
    text.push_str(&frames.join("\n"));
    text.push('\n');
    if let Err(err) = std::fs::write(&path, text) {
        panic!("cannot keep the exchange in {}: {err}", path.display());
    }
}

/// A `session/update` of an unstable kind (`subagent_update`: no
/// definition in the stable schema vendored here), checked by the SDK's
/// own types instead: it must deserialize strictly as a notification.
fn is_unstable_update(value: &serde_json::Value) -> bool {
    if value["method"] != "session/update"
        || value["params"]["update"]["sessionUpdate"] != "subagent_update"
    {
        return false;
    }
    let parsed: Result<agent_client_protocol::v1::schema::SessionNotification, _> =
        serde_json::from_value(value["params"].clone());
    match parsed {
        Ok(notification) => assert!(
            matches!(
                notification.update,
                agent_client_protocol::v1::schema::SessionUpdate::SubagentUpdate(_)
            ),
            "not a subagent_update: {value}"
        ),
        Err(error) => panic!("subagent_update does not parse ({error}): {value}"),
    }
    assert_eq!(value["jsonrpc"], "2.0", "{value}");
    true
}

/// Validates frames without knowing the requests (envelope and methods only).
pub fn validate_frames(frames: &[String]) {
    validate_exchange(&[], frames);
}
