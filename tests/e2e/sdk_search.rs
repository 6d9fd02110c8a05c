//! `session/search` (issue 42): the SDK's search of stored sessions — one
//! workspace or all, a fork found like its parent, no subagent's log, bad
//! params refused — against sessions made over the SDK with the scripted
//! model.

use serde_json::{json, Value};

use crate::support::sdk_client::{SdkClient, SdkProcess};
use crate::support::*;

/// A session in `cwd` with one prompt answered; its id.
async fn session_with(client: &SdkClient, cwd: &std::path::Path, prompt: &str) -> String {
    let result = client.ok("session/new", json!({"cwd": cwd})).await;
    let session = result["sessionId"].as_str().unwrap().to_owned();
    let sub = client.subscribe(&session, None).await;
    client.prompt(&session, prompt).await;
    client.wait_idle(&sub).await;
    session
}

fn ids(result: &Value) -> Vec<String> {
    let mut ids: Vec<String> = result["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("no hits in {result}"))
        .iter()
        .map(|hit| hit["sessionId"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

#[tokio::test]
async fn session_search_finds_a_workspaces_sessions_or_every_ones() {
    let env = TestEnv::new().await;
    for answer in ["Noted.", "Done.", "Counted."] {
        env.mock.push_json(reply(answer));
    }
    let other = tempfile::tempdir().unwrap();
    let sdk = SdkProcess::stdio(&env);
    let client = &sdk.client;
    let init = client.ok("initialize", json!({})).await;
    assert_eq!(init["protocolVersion"], 3, "session/search is new in 3");

    let first = session_with(client, &env.cwd(), "Remember the axolotl migration").await;
    let second = session_with(client, &env.cwd(), "Tidy the imports").await;
    let elsewhere = session_with(client, other.path(), "An axolotl elsewhere").await;

    let result = client
        .ok(
            "session/search",
            json!({"query": "axolotl", "cwd": env.cwd()}),
        )
        .await;
    assert_eq!(ids(&result), vec![first.clone()], "{result}");
    let hit = &result["hits"][0];
    assert_eq!(hit["title"], "Remember the axolotl migration");
    assert_eq!(
        hit["cwd"],
        env.cwd().canonicalize().unwrap().to_string_lossy().as_ref()
    );
    assert!(
        hit["snippet"].as_str().unwrap().contains("axolotl"),
        "{hit}"
    );
    for field in ["createdAt", "seq", "time"] {
        assert!(hit[field].is_u64(), "{field}: {hit}");
    }
    for field in ["eventType", "surface"] {
        assert!(hit[field].is_string(), "{field}: {hit}");
    }

    let result = client
        .ok("session/search", json!({"query": "axolotl", "all": true}))
        .await;
    assert_eq!(
        ids(&result),
        sorted(vec![first.clone(), elsewhere.clone()]),
        "{result}"
    );
    let result = client
        .ok(
            "session/search",
            json!({"query": "axolotl", "all": true, "limit": 1}),
        )
        .await;
    assert_eq!(result["hits"].as_array().unwrap().len(), 1, "{result}");
    let result = client
        .ok(
            "session/search",
            json!({"query": "imports", "cwd": other.path()}),
        )
        .await;
    assert_eq!(result, json!({"hits": []}));

    // A fork is a person's session too: found with the conversation it
    // carries.
    let fork = client.ok("session/fork", json!({"sessionId": first})).await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let result = client
        .ok(
            "session/search",
            json!({"query": "axolotl migration", "cwd": env.cwd()}),
        )
        .await;
    assert_eq!(
        ids(&result),
        sorted(vec![first.clone(), fork.clone()]),
        "{result}"
    );
    assert!(!ids(&result).contains(&second));

    // A deleted session is gone from the results at once.
    client
        .ok("session/delete", json!({"sessionId": first}))
        .await;
    let result = client
        .ok("session/search", json!({"query": "axolotl", "all": true}))
        .await;
    assert!(!ids(&result).contains(&first), "{result}");

    // Bad params are refused with -32602.
    for params in [
        json!({"query": "axolotl"}),
        json!({"query": "axolotl", "all": true, "cwd": env.cwd()}),
        json!({"query": "axolotl", "all": true, "limit": 0}),
        json!({"query": "axolotl", "all": true, "limit": 101}),
        json!({"query": "  ", "all": true}),
        json!({"query": "axolotl", "all": true, "bogus": 1}),
    ] {
        let answer = client.call("session/search", params.clone()).await;
        assert_eq!(answer["error"]["code"], -32602, "{params}: {answer}");
    }
    assert!(sdk.exit().await.success());
}
