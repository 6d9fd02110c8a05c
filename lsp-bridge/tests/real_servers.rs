//! The bridge against real language servers — pyright, typescript-language-
//! server (with TypeScript), clangd — on the small projects in
//! `fixtures/workspaces/`. `.ci/run` installs the servers and sets
//! `DSH_REAL_LSP=1`, which makes a missing server a failure; without it a
//! missing server skips its test with a message.

use std::path::{Path, PathBuf};

use dsh_lsp_bridge::{Answer, Bridge, BridgeSettings, Location, Operation, Position, Query};

mod common;
use common::new_bridge;

fn required() -> bool {
    std::env::var("DSH_REAL_LSP").is_ok_and(|v| v == "1")
}

/// Copies a fixture workspace to a scratch directory (servers may write caches).
fn workspace(name: &str) -> (tempfile::TempDir, PathBuf) {
    let source = common::fixture_workspace(name);
    let dir = tempfile::tempdir().unwrap();
    copy(&source, dir.path());
    let root = dunce::canonicalize(dir.path()).unwrap();
    (dir, root)
}

fn copy(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Whether `command` is on PATH; if not, the calling test skips (fails
/// under `DSH_REAL_LSP=1`), naming the command that installs it.
fn available(command: &str) -> bool {
    let found = which::which(command).is_ok();
    let test = format!("real_servers::{}", dsh_test_support::skip::this_test());
    if found {
        dsh_test_support::skip::ran(&test);
    } else {
        let install = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the workspace")
            .join(".ci/install-lsp");
        dsh_test_support::skip::skip(
            &test,
            &format!(
                "{command} not on PATH; install it (with the other servers these tests use) and put it on PATH: export PATH=\"$(bash {})\":$PATH",
                install.display()
            ),
            required(),
        );
    }
    found
}

fn bridge(root: &Path) -> std::sync::Arc<Bridge> {
    let settings = BridgeSettings {
        ready_timeout_ms: 60_000,
        request_timeout_ms: 30_000,
        diagnostics_wait_ms: 20_000,
        ..BridgeSettings::default()
    };
    new_bridge(settings, vec![root.to_path_buf()])
}

/// The position of `symbol` on 1-based `line`, in UTF-16 units.
fn at(text: &str, line: u32, symbol: &str) -> Position {
    let content = text.lines().nth(line as usize - 1).unwrap();
    let byte = content
        .find(symbol)
        .unwrap_or_else(|| panic!("{symbol} not on line {line}: {content}"));
    Position {
        line: line - 1,
        character: content[..byte].encode_utf16().count() as u32,
    }
}

fn query(file: &Path, position: Option<Position>, operation: Operation) -> Query {
    Query {
        file: file.to_path_buf(),
        text: std::fs::read_to_string(file).unwrap(),
        position,
        operation,
    }
}

/// Retries while the server is still loading (real servers differ in how
/// they report readiness).
async fn ask(bridge: &Bridge, query: &Query) -> Answer {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        match bridge.query(query).await {
            Ok(Answer::Locations(found))
                if found.is_empty() && std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            Ok(answer) => return answer,
            Err(dsh_lsp_bridge::LspError::NotReady { .. })
                if std::time::Instant::now() < deadline => {}
            Err(err) => panic!("{err}"),
        }
    }
}

fn lines(answer: &Answer) -> Vec<(String, u32)> {
    match answer {
        Answer::Locations(found) => found
            .iter()
            .map(|Location { path, line, .. }| {
                (
                    path.file_name().unwrap().to_string_lossy().into_owned(),
                    line + 1,
                )
            })
            .collect(),
        other => panic!("locations expected, got {other:?}"),
    }
}

#[tokio::test]
async fn pyright_navigates_python() {
    if !available("pyright-langserver") {
        return;
    }
    let (_dir, root) = workspace("python");
    let bridge = bridge(&root);
    let main = root.join("app/main.py");
    let text = std::fs::read_to_string(&main).unwrap();
    // `scale` on line 3 comes after "héllo 😀": UTF-16 columns must be right.
    let definition = ask(
        &bridge,
        &query(&main, Some(at(&text, 3, "scale")), Operation::Definition),
    )
    .await;
    assert_eq!(lines(&definition), [("geometry.py".to_string(), 15)]);
    let references = ask(
        &bridge,
        &query(&main, Some(at(&text, 5, "scale")), Operation::References),
    )
    .await;
    let mut found = lines(&references);
    found.sort();
    assert!(
        found.contains(&("main.py".into(), 1))
            && found.contains(&("main.py".into(), 3))
            && found.contains(&("main.py".into(), 5))
            && found.contains(&("geometry.py".into(), 15)),
        "{found:?}"
    );
    match ask(
        &bridge,
        &query(&main, Some(at(&text, 4, "Rect")), Operation::Hover),
    )
    .await
    {
        Answer::Hover(text) => assert!(text.contains("Rect"), "{text}"),
        other => panic!("{other:?}"),
    }
    let geometry = root.join("app/geometry.py");
    match ask(&bridge, &query(&geometry, None, Operation::DocumentSymbol)).await {
        Answer::Symbols(symbols) => {
            let names: Vec<&str> = symbols.iter().map(|s| s.name.as_str()).collect();
            assert!(
                names.contains(&"Shape") && names.contains(&"Rect") && names.contains(&"scale"),
                "{names:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    match ask(
        &bridge,
        &query(&main, None, Operation::WorkspaceSymbol("Rect".into())),
    )
    .await
    {
        Answer::Symbols(symbols) => assert!(
            symbols.iter().any(|s| s.name == "Rect"
                && s.location.path.ends_with("app/geometry.py")
                && s.location.line == 5),
            "{symbols:?}"
        ),
        other => panic!("{other:?}"),
    }
    match ask(
        &bridge,
        &query(&main, Some(at(&text, 3, "scale")), Operation::IncomingCalls),
    )
    .await
    {
        Answer::Calls(calls) => assert!(
            calls.iter().all(|c| c.location.path.ends_with("main.py")),
            "{calls:?}"
        ),
        other => panic!("{other:?}"),
    }
    // A bad edit: the fresh text's diagnostics, not the file on disk.
    let broken = Query {
        text: text.replace("scale(2.0, 3.0)", "scale(2.0)"),
        ..query(&main, None, Operation::Diagnostics)
    };
    match ask(&bridge, &broken).await {
        Answer::Diagnostics(found) => assert!(
            found
                .iter()
                .any(|d| d.severity == dsh_lsp_bridge::Severity::Error && d.location.line == 2),
            "{found:?}"
        ),
        other => panic!("{other:?}"),
    }
    bridge.shutdown().await;
}

#[tokio::test]
async fn typescript_language_server_navigates_typescript() {
    if !available("typescript-language-server") {
        return;
    }
    let (_dir, root) = workspace("ts");
    let bridge = bridge(&root);
    let main = root.join("src/main.ts");
    let text = std::fs::read_to_string(&main).unwrap();
    let definition = ask(
        &bridge,
        &query(&main, Some(at(&text, 3, "scale")), Operation::Definition),
    )
    .await;
    assert_eq!(lines(&definition), [("geometry.ts".to_string(), 12)]);
    let geometry = root.join("src/geometry.ts");
    let geometry_text = std::fs::read_to_string(&geometry).unwrap();
    let implementations = ask(
        &bridge,
        &query(
            &geometry,
            Some(at(&geometry_text, 2, "area")),
            Operation::Implementation,
        ),
    )
    .await;
    assert!(
        lines(&implementations).contains(&("geometry.ts".to_string(), 7)),
        "{implementations:?}"
    );
    let broken = Query {
        text: text.replace("scale(2, 3)", "scale(\"2\", 3)"),
        ..query(&main, None, Operation::Diagnostics)
    };
    match ask(&bridge, &broken).await {
        Answer::Diagnostics(found) => assert!(
            found
                .iter()
                .any(|d| d.severity == dsh_lsp_bridge::Severity::Error && d.location.line == 2),
            "{found:?}"
        ),
        other => panic!("{other:?}"),
    }
    bridge.shutdown().await;
}

#[tokio::test]
async fn clangd_navigates_c() {
    if !available("clangd") {
        return;
    }
    let (_dir, root) = workspace("c");
    let bridge = bridge(&root);
    let main = root.join("main.c");
    let text = std::fs::read_to_string(&main).unwrap();
    let definition = ask(
        &bridge,
        &query(&main, Some(at(&text, 5, "scale")), Operation::Definition),
    )
    .await;
    let found = lines(&definition);
    assert!(
        found == [("geometry.h".to_string(), 4)] || found == [("geometry.c".to_string(), 3)],
        "{found:?}"
    );
    match ask(
        &bridge,
        &query(&main, Some(at(&text, 5, "scale")), Operation::Hover),
    )
    .await
    {
        Answer::Hover(text) => assert!(text.contains("double scale"), "{text}"),
        other => panic!("{other:?}"),
    }
    let broken = Query {
        text: text.replace("scale(2.0, 3.0)", "scale(2.0)"),
        ..query(&main, None, Operation::Diagnostics)
    };
    match ask(&bridge, &broken).await {
        Answer::Diagnostics(found) => assert!(
            found
                .iter()
                .any(|d| d.severity == dsh_lsp_bridge::Severity::Error && d.location.line == 4),
            "{found:?}"
        ),
        other => panic!("{other:?}"),
    }
    bridge.shutdown().await;
}

#[tokio::test]
async fn a_rustup_proxy_without_the_component_does_not_count() {
    // On this machine image ~/.cargo/bin/rust-analyzer is such a stub.
    let stub =
        Path::new(&std::env::var("HOME").unwrap_or_default()).join(".cargo/bin/rust-analyzer");
    let test = "real_servers::a_rustup_proxy_without_the_component_does_not_count";
    if !stub.exists() {
        dsh_test_support::skip::note(test, "no rustup proxy for rust-analyzer here");
        return;
    }
    let spec = dsh_lsp_bridge::registry::builtin()
        .into_iter()
        .find(|s| s.name == "rust-analyzer")
        .unwrap();
    if dsh_lsp_bridge::registry::verify(&spec, &stub, &dsh_process::Spawner::default(), None).await
    {
        dsh_test_support::skip::note(test, "rust-analyzer is really installed here");
        return;
    }
    dsh_test_support::skip::ran(test);
    let (_dir, root) = workspace("python");
    std::fs::write(root.join("lib.rs"), "fn main() {}\n").unwrap();
    let settings = BridgeSettings {
        servers: vec![dsh_lsp_bridge::ServerSpec {
            command: stub.display().to_string(),
            ..spec
        }],
        ..BridgeSettings::default()
    };
    let bridge = new_bridge(settings, vec![root.clone()]);
    let err = bridge
        .query(&query(
            &root.join("lib.rs"),
            None,
            Operation::DocumentSymbol,
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(err, dsh_lsp_bridge::LspError::Unavailable { .. }),
        "{err:?}"
    );
}
