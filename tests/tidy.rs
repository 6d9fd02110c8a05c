//! Tidy: checks that keep the map true, in the style of rust-analyzer's
//! `xtask/src/tidy.rs`. Each check collects every offender and fails once
//! with the list, and proves it saw something (a broken scanner must not
//! pass empty).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

struct File {
    /// Path relative to the workspace, with `/`.
    rel: String,
    text: String,
}

/// Every `.rs` file of the workspace (not `target/`, not this file).
fn rust_files() -> Vec<File> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<File>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(name.as_str(), "target" | ".git" | "node_modules" | ".ci") {
                    walk(&path, root, out);
                }
            } else if name.ends_with(".rs") {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                if rel != "tests/tidy.rs" {
                    out.push(File {
                        rel,
                        text: std::fs::read_to_string(&path).unwrap(),
                    });
                }
            }
        }
    }
    let root = workspace();
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    assert!(
        files.len() > 50,
        "the scanner found only {} files",
        files.len()
    );
    files
}

/// Crates that only one part of dsh may name: the wire protocol stays in
/// its adapter, language servers in the bridge, and so on. A row per
/// landed crate.
const HOMES: &[(&str, &[&str])] = &[
    (
        "agent_client_protocol",
        &["acp-server/src/acp/", "tests/e2e/"],
    ),
    ("async_lsp", &["lsp-bridge/src/"]),
    ("rmcp", &["acp-server/src/mcp.rs", "fixtures/test-mcp/"]),
    ("brush_parser", &["acp-server/src/permission/shell.rs"]),
    ("tower_lsp", &["fixtures/test-lsp/"]),
    ("jsonrpsee", &["acp-server/src/sdk/"]),
    ("indicatif", &["acp-server/src/run.rs"]),
];

#[test]
fn crates_stay_home() {
    let mut bad = Vec::new();
    let mut seen = BTreeSet::new();
    for file in rust_files() {
        for (krate, homes) in HOMES {
            // A use, not a mention in a comment.
            if !file.text.contains(&format!("{krate}::")) {
                continue;
            }
            seen.insert(*krate);
            if !homes.iter().any(|home| file.rel.starts_with(home)) {
                bad.push(format!("{}: names {krate}", file.rel));
            }
        }
    }
    assert_eq!(seen.len(), HOMES.len(), "the scanner saw only {seen:?}");
    assert!(bad.is_empty(), "outside their home:\n{}", bad.join("\n"));
}

/// Source files (not tests) stay under 800 lines: split by responsibility.
const MAX_LINES: usize = 800;

#[test]
fn no_source_file_is_over_800_lines() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for file in rust_files() {
        let source = file.rel.contains("/src/") && !file.rel.starts_with("tests/");
        if !source {
            continue;
        }
        checked += 1;
        let lines = file.text.lines().count();
        if lines > MAX_LINES {
            bad.push(format!("{}: {lines} lines", file.rel));
        }
    }
    assert!(checked > 40, "checked only {checked} source files");
    assert!(
        bad.is_empty(),
        "over {MAX_LINES} lines:\n{}",
        bad.join("\n")
    );
}

/// The error-code table in `docs/error-codes.md` and `ErrorCode::ALL` are
/// the same set.
#[test]
fn error_codes_and_their_docs_agree() {
    let docs = std::fs::read_to_string(workspace().join("docs/error-codes.md")).unwrap();
    let documented: BTreeSet<String> = docs
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_owned)
        .collect();
    let defined: BTreeSet<String> = dsh_protocol::ErrorCode::ALL
        .iter()
        .map(|code| code.as_str().to_owned())
        .collect();
    assert!(defined.len() > 30);
    let undocumented: Vec<_> = defined.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&defined).collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "docs/error-codes.md is out of date: undocumented {undocumented:?}, no longer defined {stale:?}"
    );
}

/// `docs/architecture.md` names only paths that exist, and names every
/// module of the agent crate.
#[test]
fn the_codemap_is_true() {
    let root = workspace();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    // Paths in backticks: `acp-server/src/session/`, `tools/fs/`, `turn/step.rs`.
    let mut missing = Vec::new();
    let mut named = 0;
    for quoted in doc.split('`').skip(1).step_by(2) {
        let path = quoted.trim();
        if !(path.ends_with(".rs") || path.ends_with('/')) || path.contains(' ') {
            continue;
        }
        named += 1;
        let candidates = [
            root.join(path),
            root.join("acp-server/src").join(path),
            root.join("protocol/src").join(path),
            root.join("lsp-bridge/src").join(path),
            root.join("process/src").join(path),
        ];
        if !candidates.iter().any(|candidate| candidate.exists()) {
            missing.push(path.to_owned());
        }
    }
    assert!(named > 20, "the codemap names only {named} paths");
    assert!(
        missing.is_empty(),
        "docs/architecture.md names paths that do not exist: {missing:?}"
    );

    let lib = std::fs::read_to_string(root.join("acp-server/src/lib.rs")).unwrap();
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|line| {
            line.trim()
                .strip_prefix("pub mod ")
                .or_else(|| line.trim().strip_prefix("mod "))
        })
        .map(|name| name.trim_end_matches(';'))
        .collect();
    assert!(modules.len() > 10);
    let unlisted: Vec<&&str> = modules
        .iter()
        .filter(|module| {
            !doc.contains(&format!("`{module}.rs`")) && !doc.contains(&format!("`{module}/`"))
        })
        .collect();
    assert!(
        unlisted.is_empty(),
        "modules of acp-server missing from docs/architecture.md: {unlisted:?}"
    );
}

/// The SDK's methods (from the module itself) and the `### \`name\``
/// headings of `docs/sdk.md` are the same set, plus its one notification.
#[test]
fn sdk_methods_and_their_docs_agree() {
    let docs = std::fs::read_to_string(workspace().join("docs/sdk.md")).unwrap();
    let documented: BTreeSet<String> = docs
        .lines()
        .filter_map(|line| line.strip_prefix("### `"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_owned)
        .collect();
    let agent = dsh_acp_server::agent::Agent::new(Err("tidy".to_owned()));
    let module = dsh_acp_server::sdk::module(dsh_acp_server::sdk::hub::Hub::new(agent));
    let mut defined: BTreeSet<String> = module.method_names().map(str::to_owned).collect();
    defined.insert("session.event".to_owned());
    assert!(defined.len() > 10, "the module has only {defined:?}");
    let undocumented: Vec<_> = defined.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&defined).collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "docs/sdk.md is out of date: undocumented {undocumented:?}, no longer defined {stale:?}"
    );
}
