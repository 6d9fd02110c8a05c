//! `dsh sdk`: the JSON-RPC API for programs, over stdio and WebSocket,
//! driven by a plain JSON-RPC client against the scripted model.

use std::os::unix::process::CommandExt;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::sdk_client::{SdkClient, SdkProcess, SdkServer};
use crate::support::*;

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// The session log's events as stored (header skipped).
fn logged(env: &TestEnv, session: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(env.sessions_dir().join(format!("{session}.jsonl")))
        .expect("session log");
    text.lines()
        .skip(1)
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Whether the log has a `turn/end` yet (read while dsh writes it: a line
/// still being written is not one).
fn turn_ended(env: &TestEnv, session: &str) -> bool {
    std::fs::read_to_string(env.sessions_dir().join(format!("{session}.jsonl")))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .any(|e| e["type"] == "turn/end")
}

async fn new_session(client: &SdkClient, env: &TestEnv, extra: Value) -> String {
    let mut params = json!({"cwd": env.cwd()});
    for (key, value) in extra.as_object().unwrap() {
        params[key] = value.clone();
    }
    let result = client.ok("session/new", params).await;
    result["sessionId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn stdio_streams_deltas_events_and_status_and_events_are_the_log() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("r1", "read", json!({"file_path":"hello.txt"})));
    env.mock.push_json(json!({"chunks":[{"reasoning":"Look."},{"text":"It says "},{"text":"hello."}],"finish":"stop"}));
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    let init = client
        .ok("initialize", json!({"clientInfo": {"name": "test"}}))
        .await;
    assert_eq!(init["serverInfo"]["name"], "dsh");
    assert_eq!(init["protocolVersion"], 3);
    let session = new_session(client, &env, json!({})).await;
    let sub = client.subscribe(&session, None).await;
    let message_id = client.prompt(&session, "read hello.txt").await;
    let idle = client.wait_idle(&sub).await;
    assert_eq!(idle["stopReason"], "end_turn");
    assert_eq!(idle["messageId"], message_id.as_str());

    let items = client.items(&sub);
    assert_eq!(items[0], json!({"kind": "status", "status": "idle"}));
    assert_eq!(
        items[1],
        json!({"kind": "status", "status": "running", "messageId": message_id})
    );
    let deltas = |channel: &str| -> String {
        items
            .iter()
            .filter(|i| i["kind"] == "delta" && i["channel"] == channel)
            .map(|i| i["text"].as_str().unwrap())
            .collect()
    };
    assert_eq!(deltas("text"), "It says hello.");
    assert_eq!(deltas("thought"), "Look.");
    let events = client.events(&sub);
    assert_eq!(
        kinds(&events),
        [
            "user/message",
            "session/title",
            "turn/start",
            "assistant/message",
            "tool/call",
            "tool/result",
            "assistant/message",
            "turn/end"
        ]
    );
    // Events are the log's, as stored.
    assert_eq!(events, logged(&env, &session));
    // stdin's end stops it; nothing of it is left.
    assert!(sdk.exit().await.success());
    let cwd = env.cwd().canonicalize().unwrap();
    assert_eq!(procs::live_pids("", &cwd), Vec::<u32>::new());
}

#[tokio::test]
async fn mcp_servers_given_at_session_new_are_tools() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "m1",
        "mcp__fixture__echo",
        json!({"text": "through the sdk"}),
    ));
    env.mock.push_json(reply("Echoed."));
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    let server = json!({
        "name": "fixture",
        "command": test_mcp_binary(),
        "args": ["stdio"],
        "env": {"MCP_FIXTURE_LOG": env.home.path().join("mcp.log")},
    });
    let session = new_session(
        client,
        &env,
        json!({"approvals": "all", "mcpServers": [server]}),
    )
    .await;
    let sub = client.subscribe(&session, None).await;
    client.prompt(&session, "echo").await;
    assert_eq!(client.wait_idle(&sub).await["stopReason"], "end_turn");
    let result = client
        .events(&sub)
        .into_iter()
        .find(|e| e["type"] == "tool/result")
        .unwrap();
    assert_eq!(result["data"]["status"], "completed", "{result}");
    assert!(
        result["data"]["output"]
            .to_string()
            .contains("through the sdk"),
        "{result}"
    );
    // The server's secrets-free record: names and commands only.
    let header =
        std::fs::read_to_string(env.sessions_dir().join(format!("{session}.jsonl"))).unwrap();
    assert!(!header.contains("mcp.log"), "env values are not logged");
    assert!(sdk.exit().await.success());
}

#[tokio::test]
async fn websocket_subscribers_agree_and_a_late_one_replays_the_same_events() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(call("r1", "read", json!({"file_path":"hello.txt"})));
    env.mock.push_json(reply("Read it."));
    let server = SdkServer::start(&env, &[]).await;
    let a = server.connect().await;
    let b = server.connect().await;
    let session = new_session(&a, &env, json!({})).await;
    let sub_a = a.subscribe(&session, None).await;
    // Another connection watches the same session.
    let sub_b = b.subscribe(&session, None).await;
    a.prompt(&session, "go").await;
    a.wait_idle(&sub_a).await;
    b.wait_idle(&sub_b).await;
    let live = a.events(&sub_a);
    assert!(live.len() >= 7, "{live:#?}");
    assert_eq!(live, b.events(&sub_b));

    // A late subscriber from seq 1 sees exactly what the live ones saw.
    let c = server.connect().await;
    let sub_c = c.subscribe(&session, Some(1)).await;
    c.wait_items(&sub_c, "the replay", |items| {
        items.iter().filter(|i| i["kind"] == "event").count() >= live.len()
    })
    .await;
    assert_eq!(c.events(&sub_c), live);
    // From the middle: the tail.
    let d = server.connect().await;
    let sub_d = d.subscribe(&session, Some(4)).await;
    d.wait_items(&sub_d, "the tail", |items| {
        items.iter().any(|i| i["kind"] == "status")
    })
    .await;
    let tail: Vec<Value> = live
        .iter()
        .filter(|e| e["seq"].as_u64() >= Some(4))
        .cloned()
        .collect();
    assert_eq!(d.events(&sub_d), tail);

    // The next turn reaches every subscriber, the replayed one too.
    env.mock.push_json(reply("Again."));
    b.prompt(&session, "again").await;
    for (client, sub) in [(&a, &sub_a), (&c, &sub_c)] {
        client
            .wait_items(sub, "the second turn", |items| {
                items
                    .iter()
                    .filter(|i| i["kind"] == "event" && i["event"]["type"] == "turn/end")
                    .count()
                    == 2
            })
            .await;
    }
    assert_eq!(a.events(&sub_a), c.events(&sub_c));
    assert_eq!(a.events(&sub_a), logged(&env, &session));
    let unsubscribed = a.ok("session/unsubscribe", json!([sub_a])).await;
    assert_eq!(unsubscribed, true);
    a.ok("shutdown", json!({})).await;
    let mut child = server.child;
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the server exits after shutdown")
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn a_subscriber_that_stops_reading_catches_up_from_the_log() {
    let env = TestEnv::relaxed().await;
    let chunk = "x".repeat(100);
    env.mock
        .push_json(json!({"repeat":{"text":chunk,"count":20000},"finish":"stop","pace_us":50}));
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    let session = new_session(client, &env, json!({})).await;
    let sub = client.subscribe(&session, None).await;
    // The client stops reading: the pipe fills, then dsh's queues behind
    // it; the broadcast moves on without it, and the turn is not held up.
    client.pause(true);
    let _receipt = client.send(
        "session/prompt",
        json!({"sessionId": session, "text": "flood"}),
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !turn_ended(&env, &session) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn was held up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.pause(false);
    client.wait_idle(&sub).await;
    let seen: usize = client
        .items(&sub)
        .iter()
        .filter(|i| i["kind"] == "delta")
        .map(|i| i["text"].as_str().unwrap().len())
        .sum();
    assert!(
        seen < 20000 * 100,
        "the subscriber never fell behind ({seen} bytes of deltas)"
    );
    assert!(sdk
        .stderr
        .lock()
        .unwrap()
        .contains("a subscriber fell behind"));
    // It lost deltas, never events.
    let events = client.events(&sub);
    assert_eq!(events, logged(&env, &session));
    assert_eq!(events.last().unwrap()["data"]["stop"], "end_turn");
    assert!(sdk.exit().await.success());
}

#[tokio::test]
async fn a_client_answers_permission_asks_with_respond() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path": "new.txt", "content": "made\n"}),
    ));
    env.mock.push_json(call(
        "w2",
        "write",
        json!({"file_path": "other.txt", "content": "no\n"}),
    ));
    env.mock.push_json(reply("One written, one refused."));
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    let session = new_session(client, &env, json!({"approvals": "client"})).await;
    let sub = client.subscribe(&session, None).await;
    client.prompt(&session, "write two files").await;
    let asks = |items: &[Value]| -> Vec<Value> {
        items
            .iter()
            .filter(|i| i["kind"] == "permission")
            .cloned()
            .collect()
    };
    let items = client
        .wait_items(&sub, "the first ask", |items| asks(items).len() == 1)
        .await;
    let ask = asks(&items).remove(0);
    assert_eq!(ask["toolCall"]["callId"], "w1");
    assert_eq!(ask["toolCall"]["kind"], "edit");
    assert_eq!(ask["question"], "permission");
    assert_eq!(ask["options"][0]["kind"], "allow_once");
    let options: Vec<&str> = ask["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert!(
        options.contains(&"allow_once") && options.contains(&"reject_once"),
        "{options:?}"
    );
    let request = ask["requestId"].as_str().unwrap();
    // An option that was not offered, or an unknown request, is an error
    // and answers nothing.
    let wrong = client
        .call(
            "session/respond",
            json!({"sessionId": session, "requestId": request, "optionId": "yes"}),
        )
        .await;
    assert_eq!(wrong["error"]["code"], -32602);
    assert_eq!(wrong["error"]["data"]["code"], "request.invalid_params");
    let unknown = client
        .call(
            "session/respond",
            json!({"sessionId": session, "requestId": "perm-99", "optionId": "allow_once"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32602);
    client
        .ok(
            "session/respond",
            json!({"sessionId": session, "requestId": request, "optionId": "allow_once"}),
        )
        .await;
    let items = client
        .wait_items(&sub, "the second ask", |items| asks(items).len() == 2)
        .await;
    let second = asks(&items).remove(1);
    client
        .ok(
            "session/respond",
            json!({"sessionId": session, "requestId": second["requestId"], "optionId": "reject_once"}),
        )
        .await;
    assert_eq!(client.wait_idle(&sub).await["stopReason"], "end_turn");
    assert_eq!(
        std::fs::read_to_string(env.cwd().join("new.txt")).unwrap(),
        "made\n"
    );
    assert!(!env.cwd().join("other.txt").exists());
    let decisions: Vec<Value> = client
        .events(&sub)
        .into_iter()
        .filter(|e| e["type"] == "permission/decision")
        .map(|e| e["data"]["outcome"].clone())
        .collect();
    assert_eq!(decisions, [json!("allow_once"), json!("reject_once")]);
    assert!(sdk.exit().await.success());
}

/// A prompt and an interrupt written back to back, neither waiting for
/// the other's answer: the prompt reaches the session's owner first, so the
/// interrupt cancels it (it does not run to its end).
#[tokio::test]
async fn an_interrupt_right_behind_a_prompt_cancels_it() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(json!({"repeat":{"text":"slow ","count":400},"finish":"stop","delay_ms":25}));
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    let session = new_session(client, &env, json!({})).await;
    let sub = client.subscribe(&session, None).await;
    let mut answers = client
        .send_together(&[
            (
                "session/prompt",
                json!({"sessionId": session, "text": "talk"}),
            ),
            ("session/interrupt", json!({"sessionId": session})),
        ])
        .into_iter();
    let (prompt, interrupt) = (answers.next().unwrap(), answers.next().unwrap());
    let receipt = prompt.await.unwrap();
    assert!(receipt["result"]["messageId"].is_string(), "{receipt}");
    let interrupted = interrupt.await.unwrap();
    assert!(interrupted.get("error").is_none(), "{interrupted}");
    let idle = client.wait_idle(&sub).await;
    assert_eq!(idle["stopReason"], "cancelled", "{idle}");
    assert_eq!(idle["messageId"], receipt["result"]["messageId"], "{idle}");
}

#[tokio::test]
async fn interrupt_cancels_the_turn_and_denies_its_open_ask() {
    let env = TestEnv::new().await;
    env.mock
        .push_json(json!({"repeat":{"text":"slow ","count":400},"finish":"stop","delay_ms":25}));
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    let session = new_session(client, &env, json!({"approvals": "client"})).await;
    let sub = client.subscribe(&session, None).await;
    client.prompt(&session, "talk").await;
    client
        .wait_items(&sub, "some text", |items| {
            items.iter().filter(|i| i["kind"] == "delta").count() >= 3
        })
        .await;
    // A second prompt while one runs waits in line, as over ACP; the
    // interrupt ends both.
    let queued = client
        .ok(
            "session/prompt",
            json!({"sessionId": session, "text": "more"}),
        )
        .await;
    let queued = queued["messageId"].as_str().unwrap().to_owned();
    client
        .wait_items(&sub, "the queued status", |items| {
            items.iter().any(|i| {
                i["kind"] == "status"
                    && i["status"] == "queued"
                    && i["messageId"] == queued.as_str()
            })
        })
        .await;
    client
        .ok("session/interrupt", json!({"sessionId": session}))
        .await;
    assert_eq!(client.wait_idle(&sub).await["stopReason"], "cancelled");
    client
        .wait_items(&sub, "the queued prompt answered", |items| {
            items.iter().any(|i| {
                i["status"] == "answered"
                    && i["messageId"] == queued.as_str()
                    && i["stopReason"] == "cancelled"
            })
        })
        .await;
    assert_eq!(env.mock.requests().len(), 1, "the queued prompt never ran");

    // An open ask is denied by an interrupt, and nothing runs.
    env.mock.push_json(call(
        "w1",
        "write",
        json!({"file_path": "x.txt", "content": "x"}),
    ));
    client.prompt(&session, "write").await;
    client
        .wait_items(&sub, "the ask", |items| {
            items.iter().any(|i| i["kind"] == "permission")
        })
        .await;
    client
        .ok("session/interrupt", json!({"sessionId": session}))
        .await;
    let items = client
        .wait_items(&sub, "the second idle", |items| {
            items
                .iter()
                .filter(|i| {
                    i["kind"] == "status" && i["status"] == "idle" && i.get("messageId").is_some()
                })
                .count()
                == 2
        })
        .await;
    assert_eq!(items.last().unwrap()["stopReason"], "cancelled");
    assert!(!env.cwd().join("x.txt").exists());
    let decision = client
        .events(&sub)
        .into_iter()
        .find(|e| e["type"] == "permission/decision")
        .unwrap();
    assert_eq!(decision["data"]["outcome"], "cancelled");
    assert!(sdk.exit().await.success());
}

#[tokio::test]
async fn bad_lines_get_errors_and_the_connection_lives_on() {
    let env = TestEnv::new().await;
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    client.send_raw("this is not json");
    client.send_raw(r#"{"jsonrpc":"2.0","id":77,"method":"initialize","#);
    client.send_raw(r#"[{"jsonrpc":"2.0","id":78,"method":"initialize"}]"#);
    client.send_raw(r#"{"jsonrpc":"2.0","method":"initialize"}"#);
    let stray = client.wait_stray(3).await;
    assert_eq!(stray[0]["error"]["code"], -32700);
    assert_eq!(stray[0]["id"], Value::Null);
    assert_eq!(stray[1]["error"]["code"], -32700);
    assert_eq!(stray[1]["id"], 77);
    assert_eq!(stray[2]["error"]["code"], -32600);
    let unknown = client.call("session/teleport", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601);
    let bad = client.call("session/new", json!({"cwd": 5})).await;
    assert_eq!(bad["error"]["code"], -32602);
    assert_eq!(bad["error"]["data"]["code"], "request.invalid_params");
    let relative = client.call("session/new", json!({"cwd": "rel/dir"})).await;
    assert_eq!(relative["error"]["data"]["code"], "request.invalid_params");
    for bad in [
        json!({"cwd": env.cwd(), "model": "no-such-model"}),
        json!({"cwd": env.cwd(), "approvals": "sometimes"}),
        json!({"cwd": env.cwd(), "thoughtLevel": "extreme"}),
        json!({"cwd": env.cwd(), "colour": "blue"}),
    ] {
        let answer = client.call("session/new", bad.clone()).await;
        assert_eq!(answer["error"]["code"], -32602, "{bad}: {answer}");
    }
    // Refused settings create nothing.
    let list = client.ok("session/list", json!({})).await;
    assert_eq!(list["sessions"], json!([]));
    let missing = client
        .call(
            "session/prompt",
            json!({"sessionId": "no-such", "text": "hi"}),
        )
        .await;
    assert_eq!(missing["error"]["data"]["code"], "session.not_found");
    let neither = client
        .call("session/prompt", json!({"sessionId": "x"}))
        .await;
    assert_eq!(neither["error"]["code"], -32602);
    let sub = client
        .call("session/subscribe", json!({"sessionId": "no-such"}))
        .await;
    assert_eq!(sub["error"]["data"]["code"], "session.not_found");
    // Nothing but protocol came out, and it still answers.
    client.ok("initialize", json!({})).await;
    assert_eq!(client.stray().len(), 3);
    assert!(sdk.exit().await.success());
}

#[tokio::test]
async fn sessions_are_listed_closed_resumed_and_deleted() {
    let env = TestEnv::new().await;
    env.mock.push_json(reply("First."));
    env.mock.push_json(reply("Second."));
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    let session = new_session(client, &env, json!({"model": "deepseek-v4-pro"})).await;
    let sub = client.subscribe(&session, None).await;
    client.prompt(&session, "one").await;
    client.wait_idle(&sub).await;
    let list = client.ok("session/list", json!({"cwd": env.cwd()})).await;
    assert_eq!(list["sessions"][0]["sessionId"], session.as_str());
    client
        .ok("session/close", json!({"sessionId": session}))
        .await;
    client
        .wait_items(&sub, "closed", |items| {
            items.iter().any(|i| i["status"] == "closed")
        })
        .await;
    // A prompt to a stored session opens it again, with its history.
    let sub = client.subscribe(&session, None).await;
    client.prompt(&session, "two").await;
    client.wait_idle(&sub).await;
    let messages = env.mock.requests().pop().unwrap()["messages"].to_string();
    assert!(
        messages.contains("one") && messages.contains("First."),
        "{messages}"
    );
    client
        .ok("session/delete", json!({"sessionId": session}))
        .await;
    let list = client.ok("session/list", json!({})).await;
    assert_eq!(list["sessions"], json!([]));
    assert!(sdk.exit().await.success());
}

/// Issue 23, item 4: a loopback port is no boundary — any local process
/// (another user, a command allowed the network) could connect. Every
/// start makes its own token, in a 0600 file stderr names.
#[tokio::test]
async fn every_connection_authenticates_even_on_loopback() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new().await;
    let server = SdkServer::start(&env, &[]).await;
    let file = server.token_file.clone().expect("dsh names its token file");
    let token = server.token.clone().unwrap();
    assert!(token.len() >= 32, "{token}");
    assert!(file.starts_with(env.home.path()), "{}", file.display());
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    assert!(
        !server.stderr.lock().unwrap().contains(&token),
        "the token itself is never printed"
    );
    let none = SdkClient::websocket(&server.url, None).await;
    assert!(
        none.as_ref().err().is_some_and(|e| e.contains("401")),
        "{:?}",
        none.err()
    );
    let wrong = SdkClient::websocket(&server.url, Some("guess")).await;
    assert!(wrong.as_ref().err().is_some_and(|e| e.contains("401")));
    let page =
        SdkClient::websocket_with(&server.url, Some(&token), Some("https://evil.example")).await;
    assert!(
        page.as_ref().err().is_some_and(|e| e.contains("403")),
        "a web page is refused even with the token: {:?}",
        page.err()
    );
    // Another user on the machine: cannot read the token, and is refused.
    let test = "sdk::every_connection_authenticates_even_on_loopback";
    if nix::unistd::geteuid().is_root() {
        dsh_test_support::skip::ran(test);
        let port = server.url.rsplit(':').next().unwrap().to_owned();
        let probe = format!(
            r#"
import socket, sys
try:
    open({file:?}).read(); print("read-token")
except OSError:
    print("no-token")
s = socket.create_connection(("127.0.0.1", {port}))
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
print(s.recv(100).split(b"\r\n")[0].decode())
"#,
            file = file.display().to_string()
        );
        let output = std::process::Command::new("python3")
            .args(["-c", &probe])
            .uid(65534)
            .gid(65534)
            .output()
            .expect("python3 as uid 65534");
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(said.contains("no-token"), "{said} {:?}", output.stderr);
        assert!(said.contains("401"), "{said}");
    } else {
        dsh_test_support::skip::note(
            test,
            "its part as a second uid (cannot read the token, is refused) needs root: run the test as root",
        );
    }
    let client = server.connect().await;
    client.ok("initialize", json!({})).await;
    client.ok("shutdown", json!({})).await;
    let mut child = server.child;
    assert!(tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap()
        .success());
    assert!(!file.exists(), "the token file goes with the server");
}

#[tokio::test]
async fn an_explicit_token_is_used_kept_from_children_and_needed_off_loopback() {
    let env = TestEnv::new().await;
    let refused = env
        .dsh(&["sdk", "--listen", "0.0.0.0:0"])
        .output()
        .await
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("not a loopback address"), "{stderr}");
    assert!(refused.stdout.is_empty());

    let mut env = env;
    env.extra_env
        .push(("DSH_SDK_BEARER".into(), "s3cret-token".into()));
    env.mock.push_json(call(
        "e1",
        "bash",
        json!({"command": "env > seen-env.txt", "description": "env"}),
    ));
    env.mock.push_json(reply("Done."));
    // A name no secret pattern matches: only its removal keeps it from
    // children.
    let server = SdkServer::start(&env, &["--token-env", "DSH_SDK_BEARER"]).await;
    assert!(server.token_file.is_none(), "no file for an explicit token");
    let none = SdkClient::websocket(&server.url, None).await;
    assert!(none.as_ref().err().is_some_and(|e| e.contains("401")));
    let client = SdkClient::websocket(&server.url, Some("s3cret-token"))
        .await
        .expect("the right token connects");
    client.ok("initialize", json!({})).await;
    let session = new_session(&client, &env, json!({"approvals": "all"})).await;
    let sub = client.subscribe(&session, None).await;
    client.prompt(&session, "show the environment").await;
    client.wait_idle(&sub).await;
    let seen = std::fs::read_to_string(env.cwd().join("seen-env.txt")).unwrap();
    assert!(seen.contains("PATH="), "{seen}");
    assert!(
        !seen.contains("s3cret-token") && !seen.contains("DSH_SDK_BEARER"),
        "the token's variable reaches no child: {seen}"
    );
    assert!(!server.stderr.lock().unwrap().contains("s3cret-token"));
    let log = std::fs::read_to_string(env.sessions_dir().join(format!("{session}.jsonl"))).unwrap();
    assert!(!log.contains("s3cret-token"));
    client.ok("shutdown", json!({})).await;
    let mut child = server.child;
    assert!(tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap()
        .success());
}

/// Issue 23, item 5: connections that never send their upgrade request
/// must not take every descriptor: they are capped, timed out, and the
/// token holder still gets in.
#[tokio::test]
async fn half_open_connections_do_not_lock_out_the_token_holder() {
    // This test opens more sockets than a default soft limit allows.
    dsh_process::raise_fd_limit();
    let env = TestEnv::new().await;
    env.mock.push_json(reply("Still here."));
    let server = SdkServer::start(&env, &[]).await;
    let addr = server.url.strip_prefix("ws://").unwrap().to_owned();
    let mut idle = Vec::new();
    for _ in 0..1_100 {
        match tokio::net::TcpStream::connect(&addr).await {
            Ok(socket) => idle.push(socket),
            Err(err) => panic!("connect: {err}"),
        }
    }
    let started = std::time::Instant::now();
    let client = tokio::time::timeout(Duration::from_secs(8), server.connect())
        .await
        .expect("the token holder connects while 1,100 connections sit idle");
    client.ok("initialize", json!({})).await;
    let session = new_session(&client, &env, json!({})).await;
    let sub = client.subscribe(&session, None).await;
    client.prompt(&session, "hello").await;
    assert_eq!(client.wait_idle(&sub).await["stopReason"], "end_turn");
    eprintln!("token holder served in {:?}", started.elapsed());
    // Every idle connection is closed: over the cap at once, the others
    // after the header timeout.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for socket in &mut idle {
        use tokio::io::AsyncReadExt;
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout_at(deadline, socket.read(&mut byte))
            .await
            .expect("an idle connection is closed within the header timeout");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }
    client.ok("shutdown", json!({})).await;
}

#[tokio::test]
async fn a_dropped_connection_denies_its_asks_and_leaves_no_process() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": "touch ran.txt", "description": "touch"}),
    ));
    env.mock.push_json(reply("Could not."));
    let server = SdkServer::start(&env, &[]).await;
    let a = server.connect().await;
    let watcher = server.connect().await;
    let session = new_session(&a, &env, json!({"approvals": "client"})).await;
    let sub = watcher.subscribe(&session, None).await;
    a.prompt(&session, "touch it").await;
    watcher
        .wait_items(&sub, "the ask", |items| {
            items.iter().any(|i| i["kind"] == "permission")
        })
        .await;
    // The prompting connection goes: its ask is denied, and the turn goes
    // on for the connection still watching.
    drop(a);
    assert_eq!(watcher.wait_idle(&sub).await["stopReason"], "end_turn");
    let decision = watcher
        .events(&sub)
        .into_iter()
        .find(|e| e["type"] == "permission/decision")
        .unwrap();
    assert_eq!(decision["data"]["outcome"], "unavailable");
    assert!(!env.cwd().join("ran.txt").exists());
    // The last holder goes: the session is closed, its lock let go, and a
    // new connection can take it up again.
    drop(watcher);
    let again = server.connect().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let resumed = again
            .call("session/resume", json!({"sessionId": session}))
            .await;
        if resumed.get("result").is_some() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{resumed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A command is running when SIGTERM comes: the server stops it and
    // exits, and nothing of either is left.
    env.mock.push_json(call(
        "s1",
        "bash",
        json!({"command": "sleep 30", "description": "wait"}),
    ));
    again
        .ok(
            "session/resume",
            json!({"sessionId": session, "approvals": "all"}),
        )
        .await;
    let sub = again.subscribe(&session, None).await;
    again.prompt(&session, "wait").await;
    again
        .wait_items(&sub, "the command", |items| {
            items.iter().any(|i| i["event"]["type"] == "tool/call")
        })
        .await;
    let cwd = env.cwd().canonicalize().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while procs::live_pids("sleep", &cwd).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut child = server.child;
    nix_kill(child.id().unwrap());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(procs::live_pids("", &cwd), Vec::<u32>::new());
}

fn nix_kill(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
}

/// Over WebSocket as over stdio (docs/sdk.md, Errors): a batch is refused
/// with one -32600 error (id null: a batch has no single id) and nothing
/// in it runs; a request up to the frame limit (64 MiB) is taken and
/// answered with its id.
#[tokio::test]
async fn websocket_refuses_batches_and_takes_requests_up_to_the_frame_limit() {
    let env = TestEnv::new().await;
    let server = SdkServer::start(&env, &[]).await;
    let client = server.connect().await;
    let batch = json!([
        {"jsonrpc": "2.0", "id": 78, "method": "session/new", "params": {"cwd": env.cwd()}},
        {"jsonrpc": "2.0", "id": 79, "method": "initialize", "params": {}},
    ]);
    client.send_raw(&batch.to_string());
    let stray = client.wait_stray(1).await;
    assert_eq!(stray[0]["error"]["code"], -32600, "{stray:?}");
    assert_eq!(stray[0]["id"], Value::Null, "{stray:?}");
    assert!(
        stray[0]["error"]["data"]["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("batch")),
        "{stray:?}"
    );
    // Nothing in the batch ran.
    let list = client.ok("session/list", json!({})).await;
    assert_eq!(list["sessions"], json!([]), "a batched session/new ran");
    // 12 MB: over jsonrpsee's own 10 MB default, under dsh's limit.
    let name = "x".repeat(12 * 1024 * 1024);
    let answer = client
        .call("initialize", json!({"clientInfo": {"name": name}}))
        .await;
    assert!(
        answer.get("result").is_some(),
        "{}",
        &answer.to_string()[..answer.to_string().len().min(300)]
    );
    assert_eq!(client.stray().len(), 1);
    client.ok("initialize", json!({})).await;
}

/// Over the limit (`DSH_MAX_FRAME_BYTES`, here 1 MiB) a WebSocket message
/// is discarded unread, so its id cannot be known: the answer is jsonrpsee's
/// -32007 "Request is too big" with id null, and the connection lives on.
#[tokio::test]
async fn websocket_answers_a_message_over_the_frame_limit_with_a_null_id_and_lives_on() {
    let mut env = TestEnv::new().await;
    env.extra_env
        .push(("DSH_MAX_FRAME_BYTES".to_owned(), "1048576".to_owned()));
    let server = SdkServer::start(&env, &[]).await;
    let client = server.connect().await;
    let under = "x".repeat(900 * 1024);
    let answer = client
        .call("initialize", json!({"clientInfo": {"name": under}}))
        .await;
    assert!(answer.get("result").is_some(), "under the limit: taken");
    let over = "x".repeat(2 * 1024 * 1024);
    let _never = client.send("initialize", json!({"clientInfo": {"name": over}}));
    let stray = client.wait_stray(1).await;
    assert_eq!(stray[0]["error"]["code"], -32007, "{stray:?}");
    assert_eq!(stray[0]["id"], Value::Null, "{stray:?}");
    client.ok("initialize", json!({})).await;
    assert!(!client.closed());
}

#[tokio::test]
async fn a_steered_prompt_joins_the_turn_and_a_fork_carries_the_conversation() {
    let env = TestEnv::new().await;
    env.mock.push_json(json!({
        "chunks":[{"tool_call":{"index":0,"id":"r1","name":"read","arguments":"{\"file_path\":\"hello.txt\"}"}}],
        "finish":"tool_calls","delay_ms":300
    }));
    env.mock
        .push_json(json!({"chunks":[{"text":"Fait."}],"finish":"stop"}));
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    let session = new_session(client, &env, json!({})).await;
    let sub = client.subscribe(&session, None).await;
    let first = client.prompt(&session, "read hello.txt").await;
    while env.mock.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let steered = client
        .ok(
            "session/prompt",
            json!({"sessionId": session, "text": "in French", "delivery": "steer"}),
        )
        .await;
    let steered = steered["messageId"].as_str().unwrap().to_owned();
    let idle = client.wait_idle(&sub).await;
    assert_eq!(idle["messageId"], first.as_str());
    assert_eq!(idle["stopReason"], "end_turn");
    client
        .wait_items(&sub, "the steer answered with its turn", |items| {
            items.iter().any(|i| {
                i["status"] == "answered"
                    && i["messageId"] == steered.as_str()
                    && i["stopReason"] == "end_turn"
            })
        })
        .await;
    let items = client.items(&sub);
    let statuses: Vec<&str> = items
        .iter()
        .filter(|i| i["messageId"] == steered.as_str())
        .map(|i| i["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["steering", "answered"]);
    let second = &env.mock.requests()[1];
    let last = second["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(last.to_string().contains("in French"), "{last}");
    let bad = client
        .call(
            "session/prompt",
            json!({"sessionId": session, "text": "x", "delivery": "later"}),
        )
        .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");

    // The fork (in the parent's cwd) starts from the same conversation.
    let fork = client
        .ok("session/fork", json!({"sessionId": session}))
        .await;
    let fork = fork["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(fork, session);
    env.mock.push_json(reply("Oui."));
    let fork_sub = client.subscribe(&fork, None).await;
    client.prompt(&fork, "encore?").await;
    client.wait_idle(&fork_sub).await;
    let third = env.mock.requests()[2].to_string();
    assert!(
        third.contains("read hello.txt")
            && third.contains("in French")
            && third.contains("encore?")
    );
    assert!(sdk.exit().await.success());
}

#[tokio::test]
async fn a_running_commands_output_streams_as_output_deltas_on_its_call() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "c1",
        "bash",
        json!({"command": "for i in 1 2 3; do echo line$i; sleep 0.3; done", "description": "Print three lines slowly"}),
    ));
    env.mock.push_json(reply("Printed."));
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    client
        .ok("initialize", json!({"clientInfo": {"name": "test"}}))
        .await;
    let session = new_session(client, &env, json!({"mode": "full-access"})).await;
    let sub = client.subscribe(&session, None).await;
    client.prompt(&session, "print three lines").await;
    client.wait_idle(&sub).await;
    let items = client.items(&sub);
    let outputs: Vec<&Value> = items
        .iter()
        .filter(|i| i["kind"] == "delta" && i["channel"] == "output")
        .collect();
    assert!(outputs.len() >= 2, "{items:#?}");
    assert!(outputs.iter().all(|i| i["callId"] == "c1"), "{outputs:#?}");
    let text: String = outputs
        .iter()
        .map(|i| i["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "line1\nline2\nline3\n");
    // Before the call's result.
    let result = items
        .iter()
        .position(|i| i["kind"] == "event" && i["event"]["type"] == "tool/result")
        .unwrap();
    let last_output = items
        .iter()
        .rposition(|i| i["kind"] == "delta" && i["channel"] == "output")
        .unwrap();
    assert!(last_output < result);
    assert!(sdk.exit().await.success());
}
