//! An idle session's model history leaves memory (`[session]
//! idle_evict_s`) and is folded again from the log when next needed: the
//! model is sent byte for byte what it would have been sent without the
//! eviction, a busy session keeps its history, and load and the log's
//! readers do not notice.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_acp_server::model::replay::Requests;
use dsh_acp_server::session::Session;
use dsh_protocol::log::ConfigKey;
use serde_json::json;

use crate::{settled, Recorder, World};

/// A world whose scripted model records the body of every request.
fn recording(config: &str, script: &[serde_json::Value]) -> (World, Requests) {
    let (world, requests, _) = evicting(config, script);
    (world, requests)
}

/// The sessions whose histories leave memory after every request is sent,
/// before its reply streams.
type Evicting = Arc<Mutex<Vec<Arc<Session>>>>;

/// [`recording`], where the sessions put in the [`Evicting`] lose their
/// history after every request — mid-turn, as the budget may do it.
fn evicting(config: &str, script: &[serde_json::Value]) -> (World, Requests, Evicting) {
    let requests = Requests::default();
    let evicting = Evicting::default();
    let (kept, evicted) = (requests.clone(), evicting.clone());
    let world = World::build_with(config, script, true, |provider| {
        provider.observed(move |body| {
            kept.lock().unwrap().push(body);
            for session in evicted.lock().unwrap().iter() {
                session.evict_history();
            }
        })
    });
    (world, requests, evicting)
}

fn call(id: &str, name: &str, args: serde_json::Value) -> serde_json::Value {
    json!({"chunks":[{"tool_call":{"index":0,"id":id,"name":name,"arguments":args.to_string()}}],"finish":"tool_calls"})
}

fn reply(text: &str) -> serde_json::Value {
    json!({"chunks":[{"text":text}],"finish":"stop"})
}

/// The prompts of [`turns`] and the model's answers to them.
fn turns() -> Vec<(&'static str, Vec<serde_json::Value>)> {
    vec![
        (
            "Read hello.txt",
            vec![
                call("r1", "read", json!({"file_path":"hello.txt"})),
                reply("It says hello."),
            ],
        ),
        (
            "Run echo one",
            vec![
                call(
                    "b1",
                    "bash",
                    json!({"command":"echo one","description":"say one"}),
                ),
                json!({"chunks":[{"reasoning":"It ran."},{"text":"Done."}],"finish":"stop","usage":{"prompt_tokens":900,"completion_tokens":9}}),
            ],
        ),
        // A stream cut mid-reply: the turn fails with what was delivered.
        (
            "Write a story",
            vec![
                json!({"chunks":[{"text":"Once upon "},{"text":"a time"},{"text":" there was"}],"drop_after":2}),
            ],
        ),
        ("Go on", vec![reply("The end.")]),
        // A compaction: its summary replaces what came before.
        (
            "/compact",
            vec![reply("We read hello.txt, ran echo one and began a story.")],
        ),
        ("And now?", vec![reply("Still here.")]),
    ]
}

/// [`bodies`], the world's workspace path written `<cwd>` (two worlds'
/// requests compare equal).
fn bodies_in(world: &World, requests: &Requests) -> Vec<String> {
    let cwd = world.cwd().display().to_string();
    let raw = world.workspace.path().display().to_string();
    bodies(requests)
        .into_iter()
        .map(|body| body.replace(&cwd, "<cwd>").replace(&raw, "<cwd>"))
        .collect()
}

fn bodies(requests: &Requests) -> Vec<String> {
    requests
        .lock()
        .unwrap()
        .iter()
        .map(|body| String::from_utf8(body.clone()).unwrap())
        .collect()
}

#[tokio::test]
async fn a_turn_after_eviction_sends_the_model_the_same_request() {
    // Two sessions of one workspace take the same turns; the second's
    // history is evicted before each of its prompts and after a setting
    // recorded while it was out of memory.
    let script: Vec<serde_json::Value> = (0..2)
        .flat_map(|_| turns().into_iter().flat_map(|(_, answers)| answers))
        .collect();
    let (world, requests) = recording("", &script);
    let mut sent = Vec::new();
    for evict in [false, true] {
        let session = world.session().await;
        let live = world.agent.session(&session).unwrap();
        let out = Recorder::default();
        let before = bodies(&requests).len();
        if evict {
            assert!(world.agent.evict_idle(Duration::ZERO).await >= 1);
            assert!(live.history_evicted());
        }
        world
            .agent
            .set_config_option(&session, ConfigKey::Mode, "full-access", &out)
            .unwrap();
        let mut stops = Vec::new();
        for (prompt, _) in turns() {
            if evict {
                world.agent.evict_idle(Duration::ZERO).await;
                assert!(live.history_evicted(), "evicted before {prompt:?}");
            }
            stops.push(world.prompt(&session, prompt, &out).await);
            assert!(!live.history_evicted());
        }
        assert_eq!(
            stops,
            [
                "EndTurn",
                "EndTurn",
                "model.stream_closed",
                "EndTurn",
                "EndTurn",
                "EndTurn"
            ]
        );
        sent.push(bodies(&requests)[before..].to_vec());
    }
    assert_eq!(sent[0].len(), 8);
    assert!(sent[0][7].contains("We read hello.txt"), "{}", sent[0][7]);
    for (without, with) in sent[0].iter().zip(&sent[1]) {
        assert_eq!(without, with, "the request after eviction differs");
    }
    assert_eq!(sent[0], sent[1]);
}

#[tokio::test]
async fn a_crash_repaired_on_load_is_repaired_at_the_same_place_after_eviction() {
    // A log whose last call was cut off by a crash: the load closed it as
    // "outcome unknown"; a rebuild must close it at the same place, before
    // the setting and the prompt that came after the load.
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/logs/v1-2026-11-30.jsonl");
    let text = std::fs::read_to_string(&fixture).unwrap();
    let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let id = header["id"].as_str().unwrap();
    let script = [
        reply("Continuing."),
        call("r9", "read", json!({"file_path":"hello.txt"})),
        reply("Gone."),
    ];
    let mut sent = Vec::new();
    let mut histories = Vec::new();
    for evict in [false, true] {
        let (world, requests) = recording("", &script);
        let sessions = world.home.path().join("sessions");
        std::fs::create_dir_all(&sessions).unwrap();
        std::fs::write(sessions.join(format!("{id}.jsonl")), &text).unwrap();
        let opened = world
            .agent
            .resume_session(&id.into(), Vec::new())
            .await
            .unwrap();
        let out = Recorder::default();
        let evicted = |world: &World| {
            let (agent, session) = (world.agent.clone(), opened.session.clone());
            async move {
                if evict {
                    assert_eq!(agent.evict_idle(Duration::ZERO).await, 1);
                    assert!(session.history_evicted());
                }
            }
        };
        evicted(&world).await;
        world
            .agent
            .set_config_option(&id.into(), ConfigKey::ThoughtLevel, "max", &out)
            .unwrap();
        assert_eq!(world.prompt(id, "Go on", &out).await, "EndTurn");
        evicted(&world).await;
        assert_eq!(world.prompt(id, "Read it", &out).await, "EndTurn");
        evicted(&world).await;
        histories.push(format!(
            "{:?}",
            world.agent.history(&id.into()).await.unwrap()
        ));
        sent.push(bodies(&requests));
    }
    assert_eq!(sent[0].len(), 3);
    assert_eq!(sent[0], sent[1]);
    assert_eq!(histories[0], histories[1]);
    assert!(histories[0].contains("The outcome of this tool call is unknown"));
}

#[tokio::test]
async fn an_idle_session_is_evicted_and_its_next_prompt_rebuilds_it() {
    let world = World::with_config(
        "[session]\nidle_evict_s = 1\n",
        &[reply("First."), reply("Second.")],
    );
    let session = world.session().await;
    let live = world.agent.session(&session).unwrap();
    let out = Recorder::default();
    assert_eq!(world.prompt(&session, "One", &out).await, "EndTurn");
    assert!(!live.history_evicted());
    // The eviction task looks every second; the session has been idle for
    // one second when it drops the history.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !live.history_evicted() {
        assert!(std::time::Instant::now() < deadline, "never evicted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(world.prompt(&session, "Two", &out).await, "EndTurn");
    assert!(!live.history_evicted());
    let history = world.agent.history(&session).await.unwrap();
    assert_eq!(history.len(), 4, "{history:?}");

    // 0 is never. Beside it, a world that evicts after a second, whose
    // session rests later: once that one is evicted, a sweep of the first
    // (had it one) would have found its session idle for longer.
    let never = World::with_config("[session]\nidle_evict_s = 0\n", &[reply("Only.")]);
    let session = never.session().await;
    assert_eq!(never.prompt(&session, "One", &out).await, "EndTurn");
    let soon = World::with_config("[session]\nidle_evict_s = 1\n", &[reply("Only.")]);
    let later = soon.session().await;
    assert_eq!(soon.prompt(&later, "One", &out).await, "EndTurn");
    let later = soon.agent.session(&later).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !later.history_evicted() {
        assert!(std::time::Instant::now() < deadline, "never evicted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!never.agent.session(&session).unwrap().history_evicted());
}

#[tokio::test]
async fn a_session_with_a_running_turn_or_job_keeps_its_history() {
    let world = World::new(&[
        json!({"chunks":[{"text":"slow "},{"text":"reply"}],"delay_ms":300,"finish":"stop"}),
        call(
            "b1",
            "bash",
            json!({"command":"sleep 1","description":"wait","run_in_background":true}),
        ),
        reply("Started."),
    ]);
    let session = world.session().await;
    let live = world.agent.session(&session).unwrap();
    let out = Recorder::default();
    world
        .agent
        .set_config_option(&session, ConfigKey::Mode, "full-access", &out)
        .unwrap();
    // A turn runs: never evicted.
    let turn = {
        let (agent, session, out) = (world.agent.clone(), session.clone(), out.clone());
        tokio::spawn(async move {
            let ticket = agent.begin_prompt(&session).await.unwrap();
            agent
                .prompt(
                    ticket,
                    vec![dsh_protocol::UserContent::text("Slowly")],
                    Arc::new(out),
                )
                .await
        })
    };
    // Mid-reply: its first words were shown, the rest is on its way.
    let replying = || {
        out.updates.lock().unwrap().iter().any(|update| {
            matches!(
                update,
                dsh_acp_server::update::AgentUpdate::MessageChunk(..)
            )
        })
    };
    while !replying() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(live.is_busy());
    assert_eq!(world.agent.evict_idle(Duration::ZERO).await, 0);
    turn.await.unwrap().unwrap();
    // A background job runs after its turn: never evicted until it ends.
    assert_eq!(world.prompt(&session, "Start a job", &out).await, "EndTurn");
    assert_eq!(world.agent.evict_idle(Duration::ZERO).await, 0);
    assert!(!live.history_evicted());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while world.agent.evict_idle(Duration::ZERO).await == 0 {
        assert!(std::time::Instant::now() < deadline, "the job never ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(live.history_evicted());
    // Its end was recorded before the eviction and is in the rebuilt
    // history.
    let history = format!("{:?}", world.agent.history(&session).await.unwrap());
    assert!(history.contains("j1"), "{history}");
}

#[tokio::test]
async fn load_and_the_log_readers_work_on_an_evicted_session() {
    let world = World::new(&[
        call("r1", "read", json!({"file_path":"hello.txt"})),
        reply("It says hello."),
    ]);
    let session = world.session().await;
    let out = Recorder::default();
    assert_eq!(world.prompt(&session, "Read it", &out).await, "EndTurn");
    let (_, before) = world.load(&session).await;
    assert_eq!(world.agent.evict_idle(Duration::ZERO).await, 1);
    // session/load of the live, evicted session replays the same view and
    // leaves the history out of memory.
    let (opened, after) = world.load(&session).await;
    assert_eq!(settled(&after), settled(&before));
    assert!(opened.session.history_evicted());
    // What an SDK subscriber reads: every logged event, as in the file.
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    world.agent.read_events(&session, 0, tx).await.unwrap();
    let mut seqs = Vec::new();
    while let Ok(event) = rx.try_recv() {
        seqs.push(event.seq);
    }
    assert_eq!(seqs.len(), world.log_types(&session).len());
    assert!(seqs.windows(2).all(|pair| pair[1] == pair[0] + 1));
    // Closed and opened again by another load: nothing lost.
    world.agent.close_session(&session).await.unwrap();
    let (_, reloaded) = world.load(&session).await;
    assert_eq!(settled(&reloaded), settled(&before));
}

#[tokio::test]
async fn a_history_evicted_mid_turn_is_rebuilt_for_the_next_request() {
    // The same turns as above, the history dropped after every request is
    // sent: the reply, the tool results and the compaction's summary are
    // recorded while it is out of memory, and every next request of the
    // turn folds it again from the log — byte for byte what it would have
    // been.
    let mut sent = Vec::new();
    for evict in [false, true] {
        let script: Vec<serde_json::Value> = turns()
            .into_iter()
            .flat_map(|(_, answers)| answers)
            .collect();
        let (world, requests, evicting) = evicting("", &script);
        let session = world.session().await;
        let live = world.agent.session(&session).unwrap();
        if evict {
            evicting.lock().unwrap().push(live.clone());
        }
        let out = Recorder::default();
        world
            .agent
            .set_config_option(&session, ConfigKey::Mode, "full-access", &out)
            .unwrap();
        for (prompt, _) in turns() {
            world.prompt(&session, prompt, &out).await;
        }
        // Dropped after the last request, and nothing has read it since.
        assert_eq!(live.history_evicted(), evict);
        sent.push(bodies_in(&world, &requests));
    }
    assert_eq!(sent[0].len(), 8);
    for (without, with) in sent[0].iter().zip(&sent[1]) {
        assert_eq!(
            without, with,
            "the request after a mid-turn eviction differs"
        );
    }
    assert_eq!(sent[0], sent[1]);
}

#[tokio::test]
async fn over_the_budget_the_least_recently_active_histories_leave() {
    // Three sessions of about 2,000 bytes each under a budget of 5,600:
    // the third one's reply puts the process over it, and the next read (the
    // first session's request) drops the least recently active other
    // history — the second's — which brings it under three quarters of the
    // budget, so the third's stays. The model is sent what it would have
    // been sent without a budget.
    let long = "x".repeat(2000);
    let mut sent = Vec::new();
    for budget in ["max_history_bytes = 0", "max_history_bytes = 5600"] {
        let script: Vec<serde_json::Value> = (0..5).map(|_| reply(&long)).collect();
        let (world, requests) = recording(&format!("[session]\n{budget}\n"), &script);
        let out = Recorder::default();
        let mut sessions = Vec::new();
        for name in ["A", "B", "C"] {
            let session = world.session().await;
            assert_eq!(world.prompt(&session, name, &out).await, "EndTurn");
            sessions.push(session);
        }
        let live = |index: usize| world.agent.session(&sessions[index]).unwrap();
        assert!((0..3).all(|index| !live(index).history_evicted()));
        assert_eq!(world.prompt(&sessions[0], "A again", &out).await, "EndTurn");
        let limited = budget.ends_with("5600");
        assert!(!live(0).history_evicted());
        assert_eq!(live(1).history_evicted(), limited);
        assert!(!live(2).history_evicted());
        // The second session's next request folds it again; now the third
        // is the least recently active.
        assert_eq!(world.prompt(&sessions[1], "B again", &out).await, "EndTurn");
        assert!(!live(1).history_evicted());
        assert_eq!(live(2).history_evicted(), limited);
        let mut held = 0;
        for index in 0..3 {
            if !live(index).history_evicted() {
                let history = live(index).history().await.unwrap();
                held += history.iter().map(|m| m.bytes()).sum::<usize>();
            }
        }
        if limited {
            assert!(held <= 5600, "{held} bytes held");
        }
        sent.push(bodies_in(&world, &requests));
    }
    assert_eq!(sent[0].len(), 5);
    assert_eq!(sent[0], sent[1]);
}
