//! Context dsh adds on its own account, end to end: the repeat-tool
//! reminder (`[tools.repeat_reminder]`) and the time context (`[time]`),
//! both in the log, so history and `session/load` derive them.

use std::time::Duration;

use agent_client_protocol::v1::schema::{SessionId, StopReason};
use serde_json::{json, Value};

use crate::support::{call, message_text, reply, TestEnv};

/// What every repeat reminder says.
const REMINDER: &str = "with the same arguments";

/// The texts of a request's messages (system prompt first).
fn texts(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(message_text)
        .collect()
}

/// How often `needle` occurs in a request's messages.
fn count(request: &Value, needle: &str) -> usize {
    texts(request)
        .iter()
        .map(|text| text.matches(needle).count())
        .sum()
}

/// Whether the request's last message (what is new in it) reminds.
fn reminds_last(request: &Value) -> bool {
    texts(request)
        .last()
        .is_some_and(|text| text.contains(REMINDER))
}

/// Issue 39: the same `read` 8 times in a row: the requests after the 3rd,
/// 5th and 8th call carry a reminder, and only those; it quotes the tool,
/// the count and the canonical arguments. The log keeps the reminders: a
/// new process that loads the session sends them again.
#[tokio::test]
async fn identical_calls_remind_at_three_five_and_eight_and_survive_load() {
    let env = TestEnv::new().await;
    for n in 1..=8 {
        // Key order varies: the arguments compare canonically.
        let args = if n % 2 == 0 {
            json!({"file_path": "hello.txt", "limit": 5})
        } else {
            json!({"limit": 5, "file_path": "hello.txt"})
        };
        env.mock.push_json(call(&format!("r{n}"), "read", args));
    }
    env.mock.push_json(reply("done"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    let stop = conn.prompt(&session, "look").await.unwrap().stop_reason;
    assert_eq!(stop, StopReason::EndTurn);

    let requests = env.mock.requests();
    assert_eq!(requests.len(), 9);
    let reminding: Vec<usize> = (0..requests.len())
        .filter(|&at| reminds_last(&requests[at]))
        .collect();
    assert_eq!(reminding, [3, 5, 8], "the requests after those calls");
    let counts: Vec<usize> = requests.iter().map(|r| count(r, REMINDER)).collect();
    assert_eq!(counts, [0, 0, 0, 1, 1, 2, 2, 2, 3], "each once, and kept");
    let last = texts(&requests[8]).join("\n");
    for n in [3, 5, 8] {
        assert!(
            last.contains(&format!(
                "You have called `read` with the same arguments {n} times in a row:\n{{\"file_path\":\"hello.txt\",\"limit\":5}}\n"
            )),
            "{last}"
        );
    }
    assert!(last.contains("ask the user"), "{last}");
    let logged = logged_contexts(&env, &session, REMINDER);
    assert_eq!(logged, 3, "the log keeps each reminder");
    conn.finish().await;

    // Another process loads the session: the history it sends is the log's.
    env.mock.push_json(reply("again"));
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &env.cwd()).await;
    let stop = conn.prompt(&session, "and now?").await.unwrap().stop_reason;
    assert_eq!(stop, StopReason::EndTurn);
    let requests = env.mock.requests();
    let after_load = requests.last().unwrap();
    assert_eq!(count(after_load, REMINDER), 3);
    assert_eq!(
        texts(after_load)[..texts(&requests[8]).len()],
        texts(&requests[8])[..],
        "the loaded history is the one the turn sent"
    );
}

/// Issue 39: a different call ends a run; an excluded tool neither counts
/// nor ends it; a prompt from the user starts counting afresh.
#[tokio::test]
async fn a_different_call_resets_the_run_and_an_excluded_one_does_not() {
    let env =
        TestEnv::with_config("[tools.repeat_reminder]\nexclude = [\"gl*\", \"mcp__*\"]\n").await;
    let a = || json!({"file_path": "hello.txt"});
    let b = || json!({"file_path": "hello.txt", "offset": 1});
    let script = [
        ("read", a()),
        ("read", a()),
        ("read", b()), // ends the run of a
        ("read", a()),
        ("glob", json!({"pattern": "*"})), // transparent
        ("read", a()),
        ("read", a()), // the 3rd a in a row
    ];
    for (n, (tool, args)) in script.into_iter().enumerate() {
        env.mock.push_json(call(&format!("c{n}"), tool, args));
    }
    env.mock.push_json(reply("done"));
    // The next turn: two more of the same are no run of 4 or 5.
    env.mock.push_json(call("d1", "read", a()));
    env.mock.push_json(call("d2", "read", a()));
    env.mock.push_json(reply("done again"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "look").await.unwrap();
    conn.prompt(&session, "look again").await.unwrap();

    let requests = env.mock.requests();
    assert_eq!(requests.len(), 11);
    let reminding: Vec<usize> = (0..requests.len())
        .filter(|&at| reminds_last(&requests[at]))
        .collect();
    assert_eq!(reminding, [7], "only after the 7th call");
    assert!(texts(&requests[7])
        .last()
        .unwrap()
        .contains("`read` with the same arguments 3 times in a row"));
    assert_eq!(count(&requests[10], REMINDER), 1);
}

/// Issue 39: invalid thresholds fail the load, naming the key.
#[tokio::test]
async fn invalid_thresholds_fail_the_load() {
    let env = TestEnv::new().await;
    let config = env.home.path().join("config.toml");
    let base = std::fs::read_to_string(&config).unwrap();
    for (thresholds, expected) in [
        ("[]", "is empty"),
        ("[1, 3]", "1 is below 2"),
        ("[3, 5, 3]", "3 is listed twice"),
    ] {
        std::fs::write(
            &config,
            format!("{base}\n[tools.repeat_reminder]\nthresholds = {thresholds}\n"),
        )
        .unwrap();
        let output = tokio::time::timeout(
            Duration::from_secs(30),
            env.dsh(&["config", "check"]).output(),
        )
        .await
        .expect("dsh ends")
        .unwrap();
        let out = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(1), "{thresholds}: {out}");
        assert!(
            out.contains(&format!("[tools.repeat_reminder] thresholds: {expected}"))
                || out.contains(&format!("[tools.repeat_reminder] thresholds {expected}")),
            "{thresholds}: {out}"
        );
    }
}

/// What the fake clock shows in Berlin.
const BERLIN: &str = "Current time: Friday 2026-12-04 12:34 (Europe/Berlin, UTC+01:00)";

async fn time_env(refresh_ms: u64) -> TestEnv {
    let mut env = TestEnv::with_config(&format!(
        "[time]\nzone = \"Europe/Berlin\"\nrefresh_interval_ms = {refresh_ms}\n"
    ))
    .await;
    env.extra_env
        .push(("DSH_FAKE_NOW".into(), "2026-12-04T11:34:56Z".into()));
    env
}

/// How many turn-only contexts in the session's log contain `needle`.
fn logged_contexts(env: &TestEnv, session: &SessionId, needle: &str) -> usize {
    env.log_events(session)
        .into_iter()
        .filter(|event| {
            event["type"] == "context/instructions"
                && event["data"]["text"]
                    .as_str()
                    .unwrap_or("")
                    .contains(needle)
        })
        .count()
}

/// Two turns ("first", "second") under `[time] refresh_interval_ms =
/// interval`: the environment, the session and the model's requests.
async fn two_turns(interval: u64) -> (TestEnv, SessionId, Vec<Value>) {
    let env = time_env(interval).await;
    env.mock.push_json(reply("one"));
    env.mock.push_json(reply("two"));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "first").await.unwrap();
    conn.prompt(&session, "second").await.unwrap();
    let requests = env.mock.requests();
    (env, session, requests)
}

/// Issue 39: the first request of a turn carries the (fake) time in the
/// configured zone, with the prompt; a second turn within the interval adds
/// none; the system prompt stays the same byte for byte.
#[tokio::test]
async fn the_time_context_opens_a_turn_within_its_interval() {
    let (env, session, requests) = two_turns(3_600_000).await;
    assert_eq!(requests.len(), 2);
    let first = texts(&requests[0]);
    let prompt = first.last().unwrap();
    assert!(
        prompt.contains(BERLIN) && prompt.ends_with("first"),
        "{prompt}"
    );
    assert_eq!(count(&requests[0], "Current time:"), 1);
    assert_eq!(
        count(&requests[1], "Current time:"),
        1,
        "none within the interval"
    );
    assert!(!texts(&requests[1])
        .last()
        .unwrap()
        .contains("Current time:"));
    assert_eq!(requests[0]["messages"][0], requests[1]["messages"][0]);
    assert!(!message_text(&requests[0]["messages"][0]).contains("Current time"));
    let logged = logged_contexts(&env, &session, BERLIN);
    assert_eq!(logged, 1);
}

/// Issue 39: with no interval (the default) every turn gets the time.
#[tokio::test]
async fn without_an_interval_every_turn_gets_the_time() {
    let (_env, _session, requests) = two_turns(0).await;
    assert_eq!(count(&requests[1], BERLIN), 2);
    assert!(texts(&requests[1]).last().unwrap().contains(BERLIN));
    assert_eq!(requests[0]["messages"][0], requests[1]["messages"][0]);
}
