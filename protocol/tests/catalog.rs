//! The vendored tool catalog (`catalog/tools.json`) is the seed's, exactly:
//! parsed out of `seeds/003_*.txt` it renders to the vendored file byte
//! for byte. `DSH_WRITE_CATALOG=1` writes the file from the seed.
//!
//! The seed is looked for in `$DSH_SEEDS`, then in `../shared/seeds` beside
//! the checkout (where the design documents live on the machines dsh is
//! built on). Without it the vendored file is still checked for what the
//! seed gives: 63 entries of 58 names, in 25 packages.

use std::path::PathBuf;

use dsh_protocol::catalog;

fn seed() -> Option<(PathBuf, String)> {
    let dirs = std::env::var_os("DSH_SEEDS")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/seeds")]);
    for dir in dirs {
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for file in read.flatten() {
            if file.file_name().to_string_lossy().starts_with("003_") {
                let text = std::fs::read_to_string(file.path()).expect("the seed reads");
                return Some((file.path(), text));
            }
        }
    }
    None
}

/// The catalog's lines: from its title to the next page's.
fn span(text: &str) -> (usize, usize) {
    let line_of = |title: &str| {
        text.lines()
            .position(|line| line.trim() == title)
            .unwrap_or_else(|| panic!("the seed has no line {title:?}"))
            + 1
    };
    (
        line_of("工具 Schema 目录"),
        line_of("能力 Seams 与核心服务"),
    )
}

#[test]
fn the_vendored_catalog_is_the_seeds() {
    let vendored = catalog::entries();
    let names: std::collections::BTreeSet<&str> =
        vendored.iter().map(|entry| entry.name.as_str()).collect();
    let packages: std::collections::BTreeSet<&str> = vendored
        .iter()
        .map(|entry| entry.package.as_str())
        .collect();
    assert_eq!(
        (vendored.len(), names.len(), packages.len()),
        (63, 58, 25),
        "entries, names, packages"
    );
    assert_eq!(catalog::render(vendored), catalog::TOOLS_JSON);
    let Some((path, text)) = seed() else {
        eprintln!(
            "note: no seed 003_*.txt (DSH_SEEDS, ../shared/seeds): the vendored catalog was checked alone"
        );
        return;
    };
    let (from, to) = span(&text);
    let parsed = catalog::parse_seed(&text, from, to).expect("the seed's catalog parses");
    let rendered = catalog::render(&parsed);
    if std::env::var_os("DSH_WRITE_CATALOG").is_some() {
        let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("catalog/tools.json");
        std::fs::write(&out, &rendered).expect("write the catalog");
    }
    assert!(
        rendered == catalog::TOOLS_JSON,
        "catalog/tools.json differs from the catalog in {} (DSH_WRITE_CATALOG=1 writes it)",
        path.display()
    );
}

#[test]
fn a_disabled_option_leaves_the_schema_and_its_required_list() {
    let bash = catalog::parameters_without("dsh-tool-bash", "bash", "run_in_background");
    assert!(bash["properties"].get("run_in_background").is_none());
    assert_eq!(
        bash["required"],
        serde_json::json!(["command", "description"])
    );
    let keys: Vec<&String> = bash["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["command", "description", "timeoutMs", "workdir"]);
}
