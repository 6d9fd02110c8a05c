//! The design's tool catalog: the model's contract. Every tool the seeds
//! define, by package and name, with its JSON schema exactly as the seed
//! gives it (`catalog/tools.json`, generated from the seed's catalog and
//! checked against it by `protocol/tests/catalog.rs`). A built-in tool
//! offers its entry's schema unchanged; its English description lives with
//! the tool.

use std::sync::OnceLock;

use serde::Deserialize;

/// The vendored catalog, as generated from the seed.
pub const TOOLS_JSON: &str = include_str!("../catalog/tools.json");

/// One catalog entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Entry {
    /// Its package (`dsh-tool-fs`; the seed's `@deepseek-ai/` dropped).
    pub package: String,
    /// The model-visible name.
    pub name: String,
    /// The seed line of its name (`seeds/003_*.txt`).
    pub line: u32,
    /// Its JSON schema, verbatim (keys in the seed's order).
    pub parameters: serde_json::Value,
}

/// Every entry, in the seed's order (parsed once).
pub fn entries() -> &'static [Entry] {
    static ENTRIES: OnceLock<Vec<Entry>> = OnceLock::new();
    ENTRIES.get_or_init(|| serde_json::from_str(TOOLS_JSON).expect("the vendored catalog parses"))
}

/// The entry of `name` in `package`.
///
/// # Panics
/// When the catalog has no such entry (a built-in tool names its entry
/// as a constant, and a test checks every one).
pub fn entry(package: &str, name: &str) -> &'static Entry {
    entries()
        .iter()
        .find(|entry| entry.package == package && entry.name == name)
        .unwrap_or_else(|| panic!("the catalog has no {package} {name}"))
}

/// The schema of `name` in `package` (see [`entry`]).
pub fn parameters(package: &str, name: &str) -> serde_json::Value {
    entry(package, name).parameters.clone()
}

/// The schema of `name` in `package` without the property `property`
/// (and out of `required`): the variant the catalog describes for a
/// disabled option (`run_in_background` when background jobs are off).
pub fn parameters_without(package: &str, name: &str, property: &str) -> serde_json::Value {
    let mut schema = parameters(package, name);
    if let Some(properties) = schema
        .get_mut("properties")
        .and_then(serde_json::Value::as_object_mut)
    {
        properties.shift_remove(property);
    }
    if let Some(required) = schema
        .get_mut("required")
        .and_then(serde_json::Value::as_array_mut)
    {
        required.retain(|name| name != property);
    }
    schema
}

/// Parses the tool catalog out of the seed document's text: each entry is
/// a line holding only a tool name, its (translated) description, then
/// its schema from a line `{` to the next line `}`; a line naming an
/// `@deepseek-ai/` package starts that package's entries. `from` and `to`
/// are the 1-based lines the catalog spans.
pub fn parse_seed(seed: &str, from: usize, to: usize) -> Result<Vec<Entry>, String> {
    let lines: Vec<&str> = seed.lines().collect();
    let is_name = |line: &str| {
        let name = line.strip_prefix(' ').unwrap_or(line);
        let name = name.strip_suffix(' ').unwrap_or(name);
        let mut chars = name.chars();
        chars
            .next()
            .is_some_and(|first| first.is_ascii_lowercase() || first == '_')
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    let mut entries = Vec::new();
    let mut package: Option<String> = None;
    let mut index = from.saturating_sub(1);
    let end = to.min(lines.len());
    while index < end {
        let line = lines[index];
        if let Some(name) = line.trim().strip_prefix("@deepseek-ai/") {
            package = Some(name.to_owned());
        }
        if line.trim_start() == "{" {
            let name_at = (0..index)
                .rev()
                .find(|&at| is_name(lines[at]))
                .ok_or_else(|| format!("line {}: a schema with no name before it", index + 1))?;
            let close = (index..lines.len())
                .find(|&at| lines[at] == "}")
                .ok_or_else(|| format!("line {}: a schema that does not end", index + 1))?;
            let text = lines[index..=close].join("\n");
            let parameters = serde_json::from_str(&text)
                .map_err(|error| format!("line {}: {error}", index + 1))?;
            entries.push(Entry {
                package: package
                    .clone()
                    .ok_or_else(|| format!("line {}: a tool before any package", index + 1))?,
                name: lines[name_at].trim().to_owned(),
                line: u32::try_from(name_at + 1).unwrap_or(u32::MAX),
                parameters,
            });
            index = close + 1;
            continue;
        }
        index += 1;
    }
    Ok(entries)
}

/// The vendored file's text for `entries` (what `catalog/tools.json`
/// holds: one-space indentation, keys in the seed's order).
pub fn render(entries: &[Entry]) -> String {
    let value: Vec<serde_json::Value> = entries
        .iter()
        .map(|entry| {
            serde_json::json!({
                "package": entry.package,
                "name": entry.name,
                "line": entry.line,
                "parameters": entry.parameters,
            })
        })
        .collect();
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(&value, &mut serializer).expect("JSON serializes");
    let mut text = String::from_utf8(out).expect("JSON is UTF-8");
    text.push('\n');
    text
}
