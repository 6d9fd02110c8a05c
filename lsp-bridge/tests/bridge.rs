//! The LSP bridge against the deterministic test server (`fixtures/test-lsp`):
//! readiness, timeouts, crashes and restarts, idle reaping, process hygiene.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_lsp_bridge::{
    Answer, Bridge, BridgeSettings, LspError, Operation, Position, Query, ServerSpec,
};

mod common;
use common::new_bridge;

const SOURCE: &str = "fn helper() {}\nfn main() {\n    helper();\n    helper();\n}\n";

fn spec(env: &[(&str, &str)]) -> ServerSpec {
    ServerSpec {
        name: "test-lsp".into(),
        command: common::test_server().display().to_string(),
        args: vec![],
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        extensions: BTreeMap::from([("toy".to_string(), "toy".to_string())]),
        root_markers: vec!["toy.project".into()],
        initialization_options: None,
        settings: None,
        disabled: false,
        version_args: None,
    }
}

fn settings(env: &[(&str, &str)]) -> BridgeSettings {
    BridgeSettings {
        servers: vec![spec(env)],
        builtin: false,
        request_timeout_ms: 1_000,
        ready_timeout_ms: 300,
        idle_timeout_ms: 60_000,
        ..BridgeSettings::default()
    }
}

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    file: PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let root = dunce::canonicalize(dir.path()).unwrap();
    let file = root.join("main.toy");
    std::fs::write(&file, SOURCE).unwrap();
    World {
        _dir: dir,
        root,
        file,
    }
}

fn definition(file: &Path) -> Query {
    Query {
        file: file.to_path_buf(),
        text: SOURCE.into(),
        position: Some(Position {
            line: 2,
            character: 6,
        }),
        operation: Operation::Definition,
    }
}

use dsh_test_support::procs;

/// Processes of the test server running in this root.
fn server_pids(root: &Path) -> Vec<u32> {
    procs::live_pids("dsh-test-lsp", root)
}

#[tokio::test]
async fn answers_definitions_references_hover_symbols_and_diagnostics() {
    let w = world();
    let bridge = new_bridge(settings(&[]), vec![w.root.clone()]);
    let answer = bridge.query(&definition(&w.file)).await.unwrap();
    assert_eq!(
        answer,
        Answer::Locations(vec![dsh_lsp_bridge::Location {
            path: w.file.clone(),
            line: 0,
            character: 3
        }])
    );
    let mut refs = definition(&w.file);
    refs.operation = Operation::References;
    match bridge.query(&refs).await.unwrap() {
        Answer::Locations(found) => {
            assert_eq!(found.iter().map(|l| l.line).collect::<Vec<_>>(), [0, 2, 3])
        }
        other => panic!("{other:?}"),
    }
    let mut hover = definition(&w.file);
    hover.operation = Operation::Hover;
    assert_eq!(
        bridge.query(&hover).await.unwrap(),
        Answer::Hover("**helper**: a toy symbol".into())
    );
    let symbols = Query {
        position: None,
        operation: Operation::DocumentSymbol,
        ..definition(&w.file)
    };
    match bridge.query(&symbols).await.unwrap() {
        Answer::Symbols(found) => assert_eq!(
            found.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["helper", "main"]
        ),
        other => panic!("{other:?}"),
    }
    // Diagnostics follow the text we sync, not a stale copy.
    let broken = Query {
        text: format!("{SOURCE}ERROR here\n"),
        position: None,
        operation: Operation::Diagnostics,
        ..definition(&w.file)
    };
    match bridge.query(&broken).await.unwrap() {
        Answer::Diagnostics(found) => {
            assert_eq!(found.len(), 1);
            assert_eq!(found[0].location.line, 5);
            assert_eq!(found[0].severity, dsh_lsp_bridge::Severity::Error);
        }
        other => panic!("{other:?}"),
    }
    let fixed = Query {
        text: SOURCE.into(),
        position: None,
        operation: Operation::Diagnostics,
        ..definition(&w.file)
    };
    assert_eq!(
        bridge.query(&fixed).await.unwrap(),
        Answer::Diagnostics(vec![])
    );
    let after_edit = bridge
        .diagnostics_if_running(&w.file, &format!("ERROR\n{SOURCE}"))
        .await
        .unwrap();
    assert_eq!(after_edit.1.len(), 1);
    bridge.shutdown().await;
    assert!(server_pids(&w.root).is_empty());
}

#[tokio::test]
async fn not_ready_is_distinct_from_no_results_and_clears() {
    let w = world();
    let bridge = new_bridge(
        settings(&[("TEST_LSP_READY_DELAY_MS", "1500")]),
        vec![w.root.clone()],
    );
    let err = bridge.query(&definition(&w.file)).await.unwrap_err();
    assert!(matches!(err, LspError::NotReady { .. }), "{err:?}");
    assert!(err.to_string().contains("still loading"));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        matches!(bridge.query(&definition(&w.file)).await.unwrap(), Answer::Locations(found) if found.len() == 1)
    );
    // A real "no results" is an empty answer, not an error.
    let mut nowhere = definition(&w.file);
    nowhere.position = Some(Position {
        line: 1,
        character: 11,
    });
    assert_eq!(
        bridge.query(&nowhere).await.unwrap(),
        Answer::Locations(vec![])
    );
    bridge.shutdown().await;
}

#[tokio::test]
async fn slow_answers_time_out_distinctly() {
    let w = world();
    let bridge = new_bridge(
        settings(&[("TEST_LSP_SLOW_MS", "3000")]),
        vec![w.root.clone()],
    );
    let started = Instant::now();
    let err = bridge.query(&definition(&w.file)).await.unwrap_err();
    assert!(matches!(err, LspError::TimedOut { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_millis(2500));
    bridge.shutdown().await;
}

#[tokio::test]
async fn a_crash_restarts_once_then_answers() {
    let w = world();
    let marker = w.root.join("crash-marker");
    let mode = format!("once:{}", marker.display());
    let bridge = new_bridge(
        settings(&[("TEST_LSP_CRASH_ON_DEFINITION", &mode)]),
        vec![w.root.clone()],
    );
    let answer = bridge.query(&definition(&w.file)).await.unwrap();
    assert!(matches!(answer, Answer::Locations(found) if found.len() == 1));
    assert_eq!(
        server_pids(&w.root).len(),
        1,
        "the crashed server is gone, one restarted server runs"
    );
    bridge.shutdown().await;
}

#[tokio::test]
async fn crashing_twice_is_a_clear_error_and_no_process_is_left() {
    let w = world();
    let bridge = new_bridge(
        settings(&[("TEST_LSP_CRASH_ON_DEFINITION", "always")]),
        vec![w.root.clone()],
    );
    let err = bridge.query(&definition(&w.file)).await.unwrap_err();
    assert!(
        matches!(&err, LspError::Crashed { detail, .. } if detail.contains("crashed twice")),
        "{err:?}"
    );
    let err = bridge.query(&definition(&w.file)).await.unwrap_err();
    assert!(
        matches!(&err, LspError::Crashed { detail, .. } if detail.contains("will not restart")),
        "{err:?}"
    );
    assert!(server_pids(&w.root).is_empty());
    bridge.shutdown().await;
}

#[tokio::test]
async fn idle_servers_are_reaped() {
    let w = world();
    let mut settings = settings(&[]);
    settings.idle_timeout_ms = 300;
    let bridge = new_bridge(settings, vec![w.root.clone()]);
    bridge.query(&definition(&w.file)).await.unwrap();
    assert_eq!(server_pids(&w.root).len(), 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !server_pids(&w.root).is_empty() {
        assert!(Instant::now() < deadline, "idle server not reaped");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(bridge.running().is_empty());
    // The next query starts a fresh one.
    bridge.query(&definition(&w.file)).await.unwrap();
    bridge.shutdown().await;
}

#[tokio::test]
async fn one_server_per_root_even_under_concurrent_first_queries() {
    let w = world();
    let bridge = new_bridge(
        settings(&[("TEST_LSP_READY_DELAY_MS", "200")]),
        vec![w.root.clone()],
    );
    let mut slow = settings(&[]);
    slow.ready_timeout_ms = 2_000;
    let bridge2: Arc<Bridge> = new_bridge(slow, vec![w.root.clone()]);
    drop(bridge);
    let queries = (0..5).map(|_| {
        let bridge = bridge2.clone();
        let file = w.file.clone();
        tokio::spawn(async move { bridge.query(&definition(&file)).await })
    });
    for result in futures_join(queries.collect()).await {
        assert!(result.is_ok());
    }
    assert_eq!(server_pids(&w.root).len(), 1, "single flight");
    bridge2.shutdown().await;
}

async fn futures_join(
    handles: Vec<tokio::task::JoinHandle<Result<Answer, LspError>>>,
) -> Vec<Result<Answer, LspError>> {
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}

#[tokio::test]
async fn unknown_file_types_are_unavailable_with_a_hint() {
    let w = world();
    let bridge = new_bridge(settings(&[]), vec![w.root.clone()]);
    let query = Query {
        file: w.root.join("x.zig"),
        text: String::new(),
        position: None,
        operation: Operation::DocumentSymbol,
    };
    let err = bridge.query(&query).await.unwrap_err();
    assert!(
        matches!(&err, LspError::Unavailable { file_type, hint } if file_type == ".zig" && hint.contains("config.toml")),
        "{err:?}"
    );
}

#[tokio::test]
async fn pull_diagnostics_are_used_when_the_server_offers_them() {
    let w = world();
    let bridge = new_bridge(
        settings(&[("TEST_LSP_PULL_DIAGNOSTICS", "1")]),
        vec![w.root.clone()],
    );
    let broken = Query {
        text: format!("ERROR first\n{SOURCE}"),
        position: None,
        operation: Operation::Diagnostics,
        ..definition(&w.file)
    };
    match bridge.query(&broken).await.unwrap() {
        Answer::Diagnostics(found) => {
            assert_eq!(found.len(), 1);
            assert_eq!(
                (found[0].location.line, found[0].message.as_str()),
                (0, "found ERROR on line 1")
            );
        }
        other => panic!("{other:?}"),
    }
    let clean = Query {
        text: SOURCE.into(),
        position: None,
        operation: Operation::Diagnostics,
        ..definition(&w.file)
    };
    assert_eq!(
        bridge.query(&clean).await.unwrap(),
        Answer::Diagnostics(vec![])
    );
    bridge.shutdown().await;
}
