//! `[tools]`: which tools the model is offered (`enable`, `disable`), in
//! what order (`order`), and how many parallel-safe calls run at once
//! (`max_parallel_calls`), end to end.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::StopReason;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::support::{
    call, calls, http_answer_text, http_request_path, reply, text, tool_names, tool_result, TestEnv,
};

/// Runs one prompt to its end in a fresh session.
async fn prompt(env: &TestEnv) {
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    assert_eq!(
        conn.prompt(&session, "go").await.unwrap().stop_reason,
        StopReason::EndTurn
    );
}

/// `disable` takes tools out of the request (a call to one is an unknown
/// tool); `enable` offers an opt-in tool, here by its catalog package.
#[tokio::test]
async fn disabled_tools_are_not_offered_and_enabled_ones_are() {
    let env = TestEnv::with_config(
        "[tools]\ndisable = [\"web_fetch\", \"todo_write\"]\nenable = [\"@deepseek-ai/dsh-tool-str-replace-editor\"]",
    )
    .await;
    env.mock
        .push_json(call("t1", "todo_write", json!({"todos": []})));
    env.mock.push_json(reply("done"));
    prompt(&env).await;
    let offered = tool_names(&env.mock.requests()[0]);
    assert!(
        !offered.iter().any(|name| name == "web_fetch"),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|name| name == "todo_write"),
        "{offered:?}"
    );
    assert!(
        offered.iter().any(|name| name == "str_replace_editor"),
        "{offered:?}"
    );
    assert!(offered.iter().any(|name| name == "read"), "{offered:?}");
    let refused = tool_result(&env, "t1");
    assert!(refused.contains("Unknown tool \"todo_write\""), "{refused}");

    // By default: both offered, the opt-in one not.
    let env = TestEnv::new().await;
    env.mock.push_json(reply("done"));
    prompt(&env).await;
    let offered = tool_names(&env.mock.requests()[0]);
    assert!(
        offered.iter().any(|name| name == "web_fetch"),
        "{offered:?}"
    );
    assert!(
        offered.iter().any(|name| name == "todo_write"),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|name| name == "str_replace_editor"),
        "{offered:?}"
    );
}

/// `order` puts the tools it names first, the rest (by name) at its `*`;
/// without it the tools are by name.
#[tokio::test]
async fn order_puts_the_named_tools_where_it_says() {
    let env =
        TestEnv::with_config("[tools]\norder = [\"bash\", \"read\", \"*\", \"ask_user_question\"]")
            .await;
    env.mock.push_json(reply("done"));
    prompt(&env).await;
    let offered = tool_names(&env.mock.requests()[0]);
    assert_eq!(offered[..2], ["bash", "read"], "{offered:?}");
    assert_eq!(offered.last().unwrap(), "ask_user_question", "{offered:?}");
    let rest = &offered[2..offered.len() - 1];
    let mut sorted = rest.to_vec();
    sorted.sort();
    assert_eq!(rest, sorted, "{offered:?}");
    assert!(rest.iter().any(|name| name == "write"), "{offered:?}");

    let env = TestEnv::new().await;
    env.mock.push_json(reply("done"));
    prompt(&env).await;
    let offered = tool_names(&env.mock.requests()[0]);
    let mut sorted = offered.clone();
    sorted.sort();
    assert_eq!(offered, sorted);
}

/// A bad name in `[tools]` is a config error naming the key and the
/// nearest valid name: `dsh config check` says it, `dsh run` stops before
/// asking the model.
#[tokio::test]
async fn a_bad_tool_name_is_a_config_error_with_the_nearest_name() {
    for (tools, expected) in [
        (
            "enable = [\"str_replace_edtor\"]",
            "[tools] enable: unknown tool or package \"str_replace_edtor\": did you mean \"str_replace_editor\"?",
        ),
        (
            "enable = [\"run_code\"]",
            "[tools] enable: \"run_code\" (the catalog's dsh-tools: run_code) is not available in this dsh version",
        ),
        (
            "disable = [\"bash\"]\nenable = [\"bash\"]",
            "[tools] \"bash\" is both in enable and in disable",
        ),
        (
            "order = [\"bash\", \"raed\", \"*\"]",
            "[tools] order: unknown tool \"raed\": did you mean \"read\"?",
        ),
        (
            "max_parallel_calls = 0",
            "[tools] max_parallel_calls must be at least 1",
        ),
    ] {
        let env = TestEnv::with_config(&format!("[tools]\n{tools}")).await;
        let dsh = |args: &[&str]| {
            let mut command = env.dsh(args);
            async move {
                tokio::time::timeout(Duration::from_secs(30), command.output())
                    .await
                    .unwrap()
                    .unwrap()
            }
        };
        let output = dsh(&["config", "check"]).await;
        let out = text(&output.stdout);
        assert_eq!(output.status.code(), Some(1), "{tools}: {out}");
        assert!(out.contains(expected), "{tools}: {expected} in {out}");

        let output = dsh(&["run", "hi"]).await;
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{tools}: {stderr}");
        assert!(stderr.contains(expected), "{tools}: {expected} in {stderr}");
        assert!(env.mock.requests().is_empty());
    }
}

/// What [`Gate`] saw.
#[derive(Default)]
struct Seen {
    /// Connections accepted and not answered yet.
    open: usize,
    /// The most open at once.
    peak: usize,
    /// Requests read and held, oldest first.
    held: VecDeque<oneshot::Sender<()>>,
    /// Requests answered so far.
    answered: usize,
    /// Each request's path, and whether the marker file existed when it
    /// came.
    arrived: Vec<(String, bool)>,
}

impl Seen {
    /// Answers the oldest held request while every open connection's
    /// request is held and at least `min(limit, left in the group)` are.
    fn release(&mut self, limit: usize, groups: &[usize]) {
        loop {
            let mut before = 0;
            let left = groups
                .iter()
                .find_map(|size| {
                    before += size;
                    (self.answered < before).then(|| before - self.answered)
                })
                .unwrap_or(0);
            if left == 0 || self.held.len() != self.open || self.held.len() < limit.min(left) {
                return;
            }
            let oldest = self.held.pop_front().unwrap();
            self.answered += 1;
            self.open -= 1;
            let _ = oldest.send(());
        }
    }
}

/// A local HTTP server that answers only when as many requests as the
/// client should run at once have come: the oldest is answered when
/// `min(limit, left in its group)` are held and no other connection is
/// open. A client running fewer at once never gets an answer (its fetches
/// time out); one running more has more connections open, which `peak`
/// shows (they open together, before any request is written). No timer
/// decides anything. `groups`: the numbers of requests between barriers.
struct Gate {
    port: u16,
    seen: Arc<Mutex<Seen>>,
}

impl Gate {
    async fn start(limit: usize, groups: Vec<usize>, marker: PathBuf) -> Gate {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                {
                    let mut seen = shared.lock().unwrap();
                    seen.open += 1;
                    seen.peak = seen.peak.max(seen.open);
                }
                let (seen, groups, marker) = (shared.clone(), groups.clone(), marker.clone());
                tokio::spawn(async move {
                    let Some(path) = http_request_path(&mut socket).await else {
                        let mut seen = seen.lock().unwrap();
                        seen.open -= 1;
                        seen.release(limit, &groups);
                        return;
                    };
                    let (send, answer) = oneshot::channel();
                    {
                        let mut seen = seen.lock().unwrap();
                        seen.arrived.push((path.clone(), marker.exists()));
                        seen.held.push_back(send);
                        seen.release(limit, &groups);
                    }
                    let _ = answer.await;
                    let body = format!("page {}", path.trim_start_matches('/'));
                    http_answer_text(&mut socket, &body).await;
                });
            }
        });
        Gate { port, seen }
    }

    fn fetch(&self, id: &str) -> (String, &'static str, Value) {
        let url = format!("http://127.0.0.1:{}/{id}", self.port);
        (id.to_owned(), "web_fetch", json!({ "url": url }))
    }
}

/// Runs a prompt in full-access (fetches are not asked) and returns the
/// ids of the tool results, in the log's order.
async fn run_full_access(env: &TestEnv) -> Vec<String> {
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, "full-access").await;
    assert_eq!(
        conn.prompt(&session, "go").await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    env.log_events(&session)
        .into_iter()
        .filter(|event| event["type"] == "tool/result")
        .map(|event| event["data"]["call_id"].as_str().unwrap().to_owned())
        .collect()
}

fn as_calls(list: &[(String, &'static str, Value)]) -> Value {
    let list: Vec<(&str, &str, Value)> = list
        .iter()
        .map(|(id, name, args)| (id.as_str(), *name, args.clone()))
        .collect();
    calls(&list)
}

/// Twelve parallel-safe calls in one step (`web_fetch`) run
/// `max_parallel_calls` at once — never fewer (the server answers only
/// then), never more — and their results are recorded in call order.
#[tokio::test]
async fn parallel_safe_calls_run_max_parallel_calls_at_once_in_call_order() {
    for (limit, tools) in [
        (3, "max_parallel_calls = 3"),
        (10, ""),
        (1, "max_parallel_calls = 1"),
    ] {
        let env = TestEnv::with_config(&format!(
            "[web]\nallow_private = [\"127.0.0.1\"]\ntimeout_ms = 20000\n[tools]\n{tools}"
        ))
        .await;
        let gate = Gate::start(limit, vec![12], env.cwd().join("none")).await;
        let ids: Vec<String> = (1..=12).map(|n| format!("f{n}")).collect();
        let fetches: Vec<_> = ids.iter().map(|id| gate.fetch(id)).collect();
        env.mock.push_json(as_calls(&fetches));
        env.mock.push_json(reply("done"));
        assert_eq!(run_full_access(&env).await, ids, "limit {limit}");
        for id in &ids {
            let result = tool_result(&env, id);
            assert!(
                result.contains(&format!("page {id}")),
                "limit {limit}: {id}: {result}"
            );
        }
        let seen = gate.seen.lock().unwrap();
        assert_eq!(seen.arrived.len(), 12, "limit {limit}");
        assert_eq!(seen.peak, limit, "limit {limit}");
    }
}

/// A call that is not parallel-safe (`write`) is a barrier: the fetches
/// before it all end before it runs, the ones after it start after it.
#[tokio::test]
async fn an_exclusive_call_is_a_barrier_between_parallel_runs() {
    let env =
        TestEnv::with_config("[web]\nallow_private = [\"127.0.0.1\"]\ntimeout_ms = 20000").await;
    let marker = env.cwd().join("marker.txt");
    let gate = Gate::start(10, vec![4, 4], marker.clone()).await;
    let mut list: Vec<_> = ["a1", "a2", "a3", "a4"].map(|id| gate.fetch(id)).into();
    list.push((
        "w".to_owned(),
        "write",
        json!({"file_path": "marker.txt", "content": "x\n"}),
    ));
    list.extend(["b1", "b2", "b3", "b4"].map(|id| gate.fetch(id)));
    env.mock.push_json(as_calls(&list));
    env.mock.push_json(reply("done"));
    let order: Vec<String> = list.iter().map(|(id, _, _)| id.clone()).collect();
    assert_eq!(run_full_access(&env).await, order);
    assert!(marker.exists());
    let seen = gate.seen.lock().unwrap();
    let arrived: Vec<(String, bool)> = seen
        .arrived
        .iter()
        .map(|(path, marked)| (path.trim_start_matches('/').to_owned(), *marked))
        .collect();
    assert_eq!(arrived.len(), 8, "{arrived:?}");
    for (path, marked) in &arrived {
        assert_eq!(*marked, path.starts_with('b'), "{arrived:?}");
    }
    assert_eq!(seen.peak, 4, "{arrived:?}");
}

/// A parallel-safe call that ends frees its place at once, whatever its
/// position: with `max_parallel_calls = 2`, `f1` is answered only once `f3`
/// has come, and `f2` at once — so `f3` must start while `f1` still runs
/// (when places were freed in call order, `f1` waited for a `f3` that never
/// started). Results are still recorded in call order.
#[tokio::test]
async fn a_slow_first_call_does_not_hold_the_others_back() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let third = Arc::new(tokio::sync::Notify::new());
    let waker = third.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (third, waker) = (third.clone(), waker.clone());
            tokio::spawn(async move {
                let Some(path) = http_request_path(&mut socket).await else {
                    return;
                };
                match path.as_str() {
                    "/f1" => third.notified().await,
                    "/f3" => waker.notify_one(),
                    _ => {}
                }
                let body = format!("page {}", path.trim_start_matches('/'));
                http_answer_text(&mut socket, &body).await;
            });
        }
    });
    let env = TestEnv::with_config(
        "[web]\nallow_private = [\"127.0.0.1\"]\ntimeout_ms = 20000\n[tools]\nmax_parallel_calls = 2",
    )
    .await;
    let ids = ["f1", "f2", "f3"];
    let fetches: Vec<_> = ids
        .iter()
        .map(|id| {
            let url = format!("http://127.0.0.1:{port}/{id}");
            (id.to_string(), "web_fetch", json!({ "url": url }))
        })
        .collect();
    env.mock.push_json(as_calls(&fetches));
    env.mock.push_json(reply("done"));
    assert_eq!(run_full_access(&env).await, ids);
    for id in ids {
        let result = tool_result(&env, id);
        assert!(result.contains(&format!("page {id}")), "{id}: {result}");
    }
}
