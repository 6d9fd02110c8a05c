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

/// Every `.rs` file of the workspace (not `target/`, not this file), read
/// once for all the checks.
fn rust_files() -> &'static [File] {
    static FILES: std::sync::OnceLock<Vec<File>> = std::sync::OnceLock::new();
    FILES.get_or_init(read_rust_files)
}

fn read_rust_files() -> Vec<File> {
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
        &["acp-server/src/acp/", "tests/e2e/", "tests/support/"],
    ),
    ("async_lsp", &["lsp-bridge/src/"]),
    ("rmcp", &["acp-server/src/mcp/", "fixtures/test-mcp/"]),
    ("brush_parser", &["acp-server/src/permission/shell.rs"]),
    ("tower_lsp", &["fixtures/test-lsp/"]),
    ("jsonrpsee", &["acp-server/src/sdk/"]),
    ("indicatif", &["acp-server/src/run/progress.rs"]),
    // The command line: main.rs and the flags of the front ends it parses.
    (
        "clap",
        &[
            "acp-server/src/main.rs",
            "acp-server/src/run.rs",
            "acp-server/src/sdk/mod.rs",
        ],
    ),
    ("clap_complete", &["acp-server/src/main.rs"]),
    ("clap_mangen", &["acp-server/src/main.rs"]),
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
    let agent = dsh_acp_server::agent::Agent::new(Err(
        dsh_acp_server::config::ConfigError::Invalid("tidy".to_owned()),
    ));
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

// ---------------------------------------------------------------------------
// The import graph: no circles, and no import that runs back up the layers.

/// The layers of the agent crate, bottom first: a module may import from
/// its own layer and the ones below, never from above. Every top-level
/// module of `acp-server/src/` sits in exactly one row (a new module needs
/// a row: see "Add a module" in `docs/architecture.md`).
const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundations",
        &[
            "beneath",
            "ndjson",
            "credentials",
            "private",
            "search",
            "programs",
            "prompt",
            "context",
            "checkpoint",
            "web",
            "jobs",
            "mcp",
            "sandbox",
            "model",
            "hooks",
        ],
    ),
    (
        "vocabulary and policy",
        &[
            "error",
            "store",
            "update",
            "permission",
            "settings",
            "projection",
            "frontend",
        ],
    ),
    ("tools", &["tools"]),
    ("composition", &["config"]),
    ("agent", &["session", "turn", "agent"]),
    (
        "front ends",
        &["acp", "sdk", "run", "login", "demo", "admin"],
    ),
];

/// Imports that run back up, each explained in `docs/architecture.md`
/// (`from → to`, quoted there as `` `from → to` ``). At most two.
const UP: &[&str] = &[];

/// One crate's modules (by path: `turn::step`) and the modules each one
/// imports through `crate::` and `super::` paths (tests left out).
struct Graph {
    edges: std::collections::BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    /// `files`: (path below `src/`, text).
    fn of(files: &[(String, String)]) -> Graph {
        let module_of = |rel: &str| -> String {
            let mut parts: Vec<&str> = rel.trim_end_matches(".rs").split('/').collect();
            if matches!(parts.last(), Some(&("mod" | "lib" | "main"))) {
                parts.pop();
            }
            parts.join("::")
        };
        let modules: BTreeSet<String> = files.iter().map(|(rel, _)| module_of(rel)).collect();
        let mut edges = std::collections::BTreeMap::new();
        for (rel, text) in files {
            let from = module_of(rel);
            let mut targets = BTreeSet::new();
            for path in imported_paths(&code_of(text), &from) {
                let parts: Vec<&str> = path.split("::").collect();
                let Some(to) = (1..=parts.len())
                    .rev()
                    .map(|len| parts[..len].join("::"))
                    .find(|candidate| modules.contains(candidate))
                else {
                    continue;
                };
                let related = to == from
                    || from.starts_with(&format!("{to}::"))
                    || to.starts_with(&format!("{from}::"));
                if !related {
                    targets.insert(to);
                }
            }
            edges.insert(from, targets);
        }
        Graph { edges }
    }

    fn imports(&self) -> usize {
        self.edges.values().map(BTreeSet::len).sum()
    }

    /// The strongly connected groups of more than one module (Tarjan).
    fn circles(&self) -> Vec<Vec<String>> {
        struct Walk<'a> {
            graph: &'a Graph,
            index: std::collections::HashMap<&'a str, (usize, usize)>,
            stack: Vec<&'a str>,
            next: usize,
            found: Vec<Vec<String>>,
        }
        impl<'a> Walk<'a> {
            fn visit(&mut self, node: &'a str) {
                self.index.insert(node, (self.next, self.next));
                self.next += 1;
                self.stack.push(node);
                for to in self.graph.edges.get(node).into_iter().flatten() {
                    let to = to.as_str();
                    match self.index.get(to).copied() {
                        None => {
                            self.visit(to);
                            let low = self.index[to].1.min(self.index[node].1);
                            self.index.get_mut(node).unwrap().1 = low;
                        }
                        Some((at, _)) if self.stack.contains(&to) => {
                            let low = at.min(self.index[node].1);
                            self.index.get_mut(node).unwrap().1 = low;
                        }
                        Some(_) => {}
                    }
                }
                let (at, low) = self.index[node];
                if at == low {
                    let split = self.stack.iter().rposition(|n| *n == node).unwrap();
                    let group: Vec<String> = self.stack.drain(split..).map(str::to_owned).collect();
                    if group.len() > 1 {
                        self.found.push(group);
                    }
                }
            }
        }
        let mut walk = Walk {
            graph: self,
            index: Default::default(),
            stack: Vec::new(),
            next: 0,
            found: Vec::new(),
        };
        for node in self.edges.keys() {
            if !walk.index.contains_key(node.as_str()) {
                walk.visit(node);
            }
        }
        walk.found
    }
}

/// The code of a file without comments and without its test module.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::…` and `super::…` path in `code` (in `use` trees too),
/// as a path from the crate root.
fn imported_paths(code: &str, module: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let from_root = |prefix: &str, rest: &str| -> Option<String> {
        if prefix == "crate" {
            return Some(rest.to_owned());
        }
        let ups = prefix.matches("super").count();
        let mut parts: Vec<&str> = module.split("::").filter(|p| !p.is_empty()).collect();
        if ups > parts.len() {
            return None;
        }
        parts.truncate(parts.len() - ups);
        parts.push(rest);
        Some(parts.join("::"))
    };
    // `use` trees from the crate or a parent, braces expanded.
    for (at, _) in code.match_indices("use ") {
        let tree = &code[at + 4..];
        let word = at == 0 || !code.as_bytes()[at - 1].is_ascii_alphanumeric();
        if !word || !(tree.starts_with("crate::") || tree.starts_with("super::")) {
            continue;
        }
        let tree: String = tree[..tree.find(';').unwrap_or(tree.len())]
            .split_whitespace()
            .collect();
        for path in expand(&tree) {
            paths.extend(split_prefix(&path).and_then(|(p, rest)| from_root(&p, &rest)));
        }
    }
    // Paths in expressions and types.
    let bytes = code.as_bytes();
    let mut starts: Vec<usize> = code.match_indices("crate::").map(|(at, _)| at).collect();
    starts.extend(code.match_indices("super::").map(|(at, _)| at));
    for start in starts {
        let before = start.checked_sub(1).map(|at| bytes[at]);
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
            continue;
        }
        let path: String = code[start..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        paths.extend(
            split_prefix(path.trim_end_matches(':')).and_then(|(p, rest)| from_root(&p, &rest)),
        );
    }
    paths
}

/// `crate::a::b` → ("crate", "a::b"); `super::super::a` → ("super::super", "a").
fn split_prefix(path: &str) -> Option<(String, String)> {
    let mut parts: Vec<&str> = path.split("::").collect();
    let heads = parts
        .iter()
        .take_while(|part| matches!(**part, "crate" | "super"))
        .count();
    if heads == 0 || heads == parts.len() {
        return None;
    }
    let rest = parts.split_off(heads);
    Some((parts.join("::"), rest.join("::")))
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e` (no spaces in input).
fn expand(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else {
        let path = tree.split("as").next().unwrap_or(tree);
        return vec![path.trim_end_matches("::self").to_owned()];
    };
    let prefix = &tree[..open];
    let body = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut items, mut depth, mut current) = (Vec::new(), 0, String::new());
    for c in body.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    items.push(current);
    items
        .iter()
        .filter(|item| !item.is_empty())
        .flat_map(|item| {
            if item == "self" {
                vec![prefix.trim_end_matches("::").to_owned()]
            } else {
                expand(item)
                    .into_iter()
                    .map(|path| format!("{prefix}{path}"))
                    .collect()
            }
        })
        .collect()
}

/// The source files of a crate below `src/`, tests and binaries left out.
fn crate_sources(krate: &str) -> Vec<(String, String)> {
    let prefix = format!("{krate}/src/");
    rust_files()
        .iter()
        .filter_map(|file| {
            let rel = file.rel.strip_prefix(&prefix)?.to_owned();
            let test = rel.ends_with("tests.rs") || rel.split('/').any(|part| part == "tests");
            let binary = rel == "main.rs" || rel.starts_with("bin/");
            (!test && !binary).then_some((rel, file.text.clone()))
        })
        .collect()
}

/// Issue 24: no crate of the workspace has an import circle.
#[test]
fn no_import_circles() {
    let mut bad = Vec::new();
    for krate in ["acp-server", "protocol", "process", "lsp-bridge"] {
        let graph = Graph::of(&crate_sources(krate));
        assert!(
            graph.imports() > 4,
            "{krate}: only {} imports seen",
            graph.imports()
        );
        for circle in graph.circles() {
            bad.push(format!("{krate}: {}", circle.join(" ↔ ")));
        }
        eprintln!(
            "{krate}: {} modules, {} imports, {} circles",
            graph.edges.len(),
            graph.imports(),
            graph.circles().len()
        );
    }
    assert!(bad.is_empty(), "import circles:\n{}", bad.join("\n"));
}

/// The scanner finds a circle where there is one (through a `use` tree, a
/// `super::` path and an inline `crate::` path), so the check above can fail.
#[test]
fn the_circle_check_sees_circles() {
    let files = [
        ("a.rs", "use crate::b::{self, inner::B};\n"),
        ("b/mod.rs", "mod inner;\n"),
        ("b/inner.rs", "fn f() { super::super::c::g(); }\n"),
        (
            "c.rs",
            "// use crate::a;\nfn g() -> crate::a::A { todo!() }\n",
        ),
        (
            "d.rs",
            "use crate::a::A;\n#[cfg(test)]\nmod tests { use crate::d; }\n",
        ),
    ]
    .map(|(rel, text)| (rel.to_owned(), text.to_owned()));
    let graph = Graph::of(&files);
    let mut circles = graph.circles();
    circles.iter_mut().for_each(|circle| circle.sort());
    assert_eq!(
        circles,
        vec![vec!["a", "b::inner", "c"]],
        "{:?}",
        graph.edges
    );
    assert_eq!(graph.edges["d"], BTreeSet::from(["a".to_owned()]));
}

/// Issue 24: every top-level module of the agent crate sits in one layer,
/// and imports run down the layers (or across one), except the few in
/// [`UP`], each explained in `docs/architecture.md`.
#[test]
fn imports_run_down_the_layers() {
    let graph = Graph::of(&crate_sources("acp-server"));
    let layer_of = |module: &str| {
        let top = module.split("::").next().unwrap_or(module);
        LAYERS
            .iter()
            .position(|(_, members)| members.contains(&top))
    };
    let mut unplaced: BTreeSet<&str> = BTreeSet::new();
    let mut up = Vec::new();
    for (from, targets) in &graph.edges {
        if from.is_empty() {
            continue;
        }
        let Some(low) = layer_of(from) else {
            unplaced.insert(from.split("::").next().unwrap());
            continue;
        };
        for to in targets {
            match layer_of(to) {
                None => {
                    unplaced.insert(to.split("::").next().unwrap());
                }
                Some(high) if high > low => up.push(format!("{from} → {to}")),
                Some(_) => {}
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules in no layer of tests/tidy.rs LAYERS: {unplaced:?}"
    );
    let unexplained: Vec<&String> = up
        .iter()
        .filter(|edge| !UP.contains(&edge.as_str()))
        .collect();
    assert!(
        unexplained.is_empty(),
        "imports that run back up the layers (move the type down, or pass a plain value):\n{}",
        unexplained
            .iter()
            .map(|e| e.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(UP.len() <= 2, "at most two imports may run back up");
    let doc = std::fs::read_to_string(workspace().join("docs/architecture.md")).unwrap();
    for edge in UP {
        assert!(
            doc.contains(&format!("`{edge}`")),
            "docs/architecture.md does not explain `{edge}`"
        );
    }
    for (name, _) in LAYERS {
        assert!(
            doc.contains(name),
            "docs/architecture.md does not name the layer {name:?}"
        );
    }
    eprintln!("acp-server: {} imports run back up", up.len());
}

// ---------------------------------------------------------------------------
// One tool table.

/// The string literals in the agent crate's code (tests left out) that are
/// a built-in tool's name and are that tool's name there — a program called
/// `bash` or the shell builtin `read` is not. Every other mention of a tool
/// goes through `tools::Tool`.
const PROGRAM_NAMES: &[(&str, &str)] = &[
    ("acp-server/src/tools/bash.rs", "bash"),
    ("acp-server/src/tools/shell.rs", "bash"),
    ("acp-server/src/tools/shell.rs", "pwsh"),
    ("acp-server/src/acp/sink.rs", "bash"),
    ("acp-server/src/permission/shell.rs", "bash"),
    ("acp-server/src/permission/code/mod.rs", "read"),
    ("acp-server/src/permission/code/mod.rs", "grep"),
    ("acp-server/src/permission/code/mod.rs", "pwsh"),
];

/// Issue 24: no literal tool name outside the tool table.
#[test]
fn no_tool_name_outside_the_tool_table() {
    let names: Vec<&str> = dsh_acp_server::tools::TABLE
        .iter()
        .map(|spec| spec.name)
        .collect();
    assert!(names.len() > 10);
    let mut bad = Vec::new();
    let mut checked = 0;
    for file in rust_files() {
        let Some(rel) = file.rel.strip_prefix("acp-server/src/") else {
            continue;
        };
        if rel == "tools/table.rs" || rel.ends_with("tests.rs") || rel.contains("/tests/") {
            continue;
        }
        checked += 1;
        let code = code_of(&file.text);
        for name in &names {
            if code.contains(&format!("\"{name}\""))
                && !PROGRAM_NAMES.contains(&(file.rel.as_str(), name))
            {
                bad.push(format!("{}: \"{name}\"", file.rel));
            }
        }
    }
    assert!(checked > 40, "checked only {checked} files");
    assert!(
        bad.is_empty(),
        "tool names outside acp-server/src/tools/table.rs (use tools::Tool):\n{}",
        bad.join("\n")
    );
}

/// The tool table of `docs/acp-mapping.md` documents exactly the tools of
/// the table (a row may document several: `job_output{…}`, `job_kill{…}`).
#[test]
fn the_tool_docs_list_the_tool_table() {
    let docs = std::fs::read_to_string(workspace().join("docs/acp-mapping.md")).unwrap();
    let documented: BTreeSet<String> = docs
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .flat_map(|row| {
            let cell = row.split(" | ").next().unwrap_or("");
            cell.split('`')
                .step_by(2)
                .filter_map(|part| part.split('{').next())
                .map(|name| name.trim_start_matches(", ").to_owned())
                .filter(|name| {
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let defined: BTreeSet<String> = dsh_acp_server::tools::TABLE
        .iter()
        .map(|spec| spec.name.to_owned())
        .collect();
    let undocumented: Vec<_> = defined.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "tools missing from docs/acp-mapping.md's tool table: {undocumented:?}"
    );
    let tool_rows: BTreeSet<String> = documented
        .into_iter()
        .filter(|name| docs.contains(&format!("`{name}{{")))
        .collect();
    let stale: Vec<_> = tool_rows.difference(&defined).collect();
    assert!(
        stale.is_empty(),
        "docs/acp-mapping.md documents tools that do not exist: {stale:?}"
    );
}

/// Every table and top-level key of `config.toml` (the fields of
/// `RawConfig`) is documented in `docs/configuration.md`.
#[test]
fn every_config_table_is_documented() {
    let source = std::fs::read_to_string(workspace().join("acp-server/src/config.rs")).unwrap();
    let body = source
        .split("pub struct RawConfig {")
        .nth(1)
        .and_then(|rest| rest.split("\n}").next())
        .expect("RawConfig in config.rs");
    let keys: Vec<&str> = body
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub "))
        .filter_map(|field| field.split(':').next())
        .collect();
    assert!(keys.len() > 10, "saw only {keys:?}");
    let docs = std::fs::read_to_string(workspace().join("docs/configuration.md")).unwrap();
    let missing: Vec<&&str> = keys
        .iter()
        .filter(|key| {
            !docs.contains(&format!("[{key}]"))
                && !docs.contains(&format!("[{key}."))
                && !docs.contains(&format!("[[{key}]]"))
                && !docs.contains(&format!("{key} ="))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "config.toml keys missing from docs/configuration.md: {missing:?}"
    );
}

/// Issue 24: the folds over log events decide for every event type (no
/// catch-all arm that would swallow a new one silently).
#[test]
fn the_folds_have_no_catch_all() {
    let folds = [
        "protocol/src/history.rs",
        "protocol/src/repair.rs",
        "acp-server/src/session/state.rs",
        "acp-server/src/projection.rs",
    ];
    let mut bad = Vec::new();
    for fold in folds {
        let text = std::fs::read_to_string(workspace().join(fold)).unwrap();
        assert!(text.contains("EventData::"), "{fold} folds no events");
        for (number, line) in code_of(&text).lines().enumerate() {
            let arm = line.trim();
            if arm == "_ => {}" || arm == "_ => Vec::new()," || arm == "_ => vec![]," {
                bad.push(format!("{fold}:{}: {arm}", number + 1));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "catch-all arms in the folds:\n{}",
        bad.join("\n")
    );
}

/// `cargo metadata` of the locked tree, offline (it builds nothing), for
/// the host: dsh builds on Linux only, and a clone holds the sources of its
/// platform's packages, not every platform's.
fn locked_metadata() -> &'static serde_json::Value {
    static METADATA: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    METADATA.get_or_init(|| {
        let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
        let version = std::process::Command::new(rustc)
            .arg("-vV")
            .output()
            .expect("rustc -vV");
        let version = String::from_utf8(version.stdout).unwrap();
        let host = version
            .lines()
            .find_map(|line| line.strip_prefix("host: "))
            .expect("rustc names its host");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let output = std::process::Command::new(cargo)
            .args(["metadata", "--locked", "--offline", "--format-version", "1"])
            .args(["--filter-platform", host])
            .current_dir(workspace())
            .output()
            .expect("cargo metadata");
        assert!(
            output.status.success(),
            "cargo metadata --locked --offline: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    })
}

/// `1.89`, `1.89.0` → (1, 89, 0).
fn rust_version(text: &str) -> (u32, u32, u32) {
    let mut parts = text.split('.').map(|part| part.parse::<u32>().unwrap());
    let major = parts.next().unwrap();
    (major, parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// Issue 38 §3: the workspace's `rust-version` is the Rust dsh needs. No
/// locked package needs a newer one; every member inherits it (so cargo
/// checks it: without `rust-version.workspace = true` a member has none);
/// README's "Rust toolchain (… or later)" says the same.
#[test]
fn the_rust_version_covers_the_locked_tree_and_readme_states_it() {
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap()).unwrap();
    let declared = manifest["workspace"]["package"]["rust-version"]
        .as_str()
        .expect("[workspace.package] rust-version")
        .to_owned();
    let ours = rust_version(&declared);
    let metadata = locked_metadata();
    let members: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    let packages = metadata["packages"].as_array().unwrap();
    assert!(packages.len() > 100, "saw only {} packages", packages.len());
    let mut newer = Vec::new();
    let mut uninherited = Vec::new();
    let mut highest = (0, 0, 0);
    for package in packages {
        let name = package["name"].as_str().unwrap();
        let needs = package["rust_version"].as_str().map(rust_version);
        if members.contains(package["id"].as_str().unwrap()) {
            if needs != Some(ours) {
                uninherited.push(format!("{name}: {:?}", package["rust_version"]));
            }
        } else if let Some(needs) = needs {
            highest = highest.max(needs);
            if needs > ours {
                newer.push(format!("{name} {}: {needs:?}", package["version"]));
            }
        }
    }
    assert!(
        newer.is_empty(),
        "locked packages need a newer Rust than rust-version {declared}:\n{}",
        newer.join("\n")
    );
    assert!(
        uninherited.is_empty(),
        "members without rust-version.workspace = true:\n{}",
        uninherited.join("\n")
    );
    assert!(highest > (1, 80, 0), "saw no package's rust-version");
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let stated = readme
        .split_once("Rust toolchain (")
        .and_then(|(_, rest)| rest.split_once(" or later"))
        .expect("README: a Rust toolchain (X or later)")
        .0;
    assert_eq!(
        rust_version(stated),
        ours,
        "README states Rust {stated}, Cargo.toml {declared}"
    );
}

/// Issue 38 §11: a plain `cargo build --release` (README's "Build it")
/// builds dsh and the crates it is made of — `default-members` is the
/// `dsh` package and its path dependencies — not the benchmark, the test
/// support or the fixture servers.
#[test]
fn a_plain_build_builds_dsh_and_its_crates_only() {
    let metadata = locked_metadata();
    let packages = metadata["packages"].as_array().unwrap();
    let by_name = |name: &str| {
        packages
            .iter()
            .find(|package| package["name"] == name)
            .unwrap_or_else(|| panic!("no package {name}"))
    };
    // dsh's package and, transitively, its normal path dependencies.
    let mut wanted = BTreeSet::new();
    let mut queue = vec!["dsh-acp-server".to_owned()];
    while let Some(name) = queue.pop() {
        if !wanted.insert(name.clone()) {
            continue;
        }
        for dependency in by_name(&name)["dependencies"].as_array().unwrap() {
            if dependency["path"].is_string() && dependency["kind"].is_null() {
                queue.push(dependency["name"].as_str().unwrap().to_owned());
            }
        }
    }
    assert!(wanted.len() >= 4, "{wanted:?}");
    let default: BTreeSet<String> = metadata["workspace_default_members"]
        .as_array()
        .expect("cargo metadata names the default members")
        .iter()
        .map(|id| {
            let id = id.as_str().unwrap();
            let package = packages.iter().find(|package| package["id"] == id).unwrap();
            package["name"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(default, wanted, "[workspace] default-members");
}
