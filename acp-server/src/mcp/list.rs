//! Names and tool lists: how a server and its tools are named for the model
//! (`mcp__<server>__<tool>`, one name per tool, never two tools under one
//! name), and `tools/list` collected within bounds — pages, tools, bytes
//! per tool and in all — so a server that never stops paging, or sends
//! huge descriptions, costs a bounded amount of memory and of every model
//! request.

use std::collections::BTreeSet;
use std::time::Duration;

use rmcp::model::PaginatedRequestParams;
use rmcp::service::Peer;
use rmcp::RoleClient;

use super::{McpServerConfig, McpTool};

/// Pages of one `tools/list`.
pub const MAX_PAGES: usize = 50;
/// Tools one server may list.
pub const MAX_TOOLS: usize = 1000;
/// A description longer than this is cut (and says so).
pub const MAX_DESCRIPTION_BYTES: usize = 8 * 1024;
/// A tool whose input schema is longer than this is skipped.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// The bytes of every tool one listing brings, as received.
pub const MAX_LIST_BYTES: usize = 4 * 1024 * 1024;
/// How long a whole listing may take.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(15);

/// `[A-Za-z0-9_-]{1,32}`: other characters become `_`, long names are cut.
pub fn sanitize(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(32)
        .collect();
    if cleaned.is_empty() {
        "server".to_owned()
    } else {
        cleaned
    }
}

/// A server's name as the model sees it: sanitized, without `__` and
/// without a trailing `_`, so the first `__` after `mcp__` in a tool's
/// name always ends the server's part — server `a` with tool `b__c` and
/// server `a__b` (offered as `a_b`) with tool `c` cannot meet.
fn server_name(name: &str) -> String {
    let mut cleaned = String::new();
    for c in sanitize(name).chars() {
        if !(c == '_' && cleaned.ends_with('_')) {
            cleaned.push(c);
        }
    }
    let cleaned = cleaned.trim_end_matches('_');
    if cleaned.is_empty() {
        "server".to_owned()
    } else {
        cleaned.to_owned()
    }
}

/// One model-facing name per server, in order: [`server_name`], and a name
/// already taken gets `_2`, `_3`… (the first free one). Returns the names
/// and a notice for each server whose name changed for more than its
/// characters (a `__`, a trailing `_`, a repeat).
pub fn server_names(configs: &[McpServerConfig]) -> (Vec<String>, Vec<String>) {
    let mut taken = BTreeSet::new();
    let mut notices = Vec::new();
    let names = configs
        .iter()
        .map(|config| {
            let base = server_name(&config.name);
            let mut name = base.clone();
            let mut count = 1;
            while taken.contains(&name) {
                count += 1;
                let suffix = format!("_{count}");
                let head = base[..base.len().min(32 - suffix.len())].trim_end_matches('_');
                name = format!("{head}{suffix}");
            }
            taken.insert(name.clone());
            if name != sanitize(&config.name) {
                notices.push(format!(
                    "MCP server \"{}\" is offered as \"{name}\" (its tools are mcp__{name}__<tool>): {}",
                    config.name,
                    if name == base {
                        "a server's name may not hold \"__\" or end in \"_\", so that no two tools share a name"
                    } else {
                        "another server has that name"
                    }
                ));
            }
            name
        })
        .collect();
    (names, notices)
}

/// The model's name for a server's tool.
pub fn model_name(server: &str, tool: &str) -> String {
    format!("mcp__{server}__{}", sanitize(tool))
}

/// A listing that went over a bound: the server is marked failed.
#[derive(Debug)]
pub struct OverBound(pub String);

/// Why a listing gave nothing.
#[derive(Debug)]
pub enum ListError {
    /// The server did not answer, or answered an error: the last known
    /// list stays.
    Failed(String),
    /// Past a bound: the server is failed.
    Bound(OverBound),
}

/// What one listing gave: the tools to offer, and what was cut or skipped
/// (for the user).
#[derive(Debug, Default)]
pub struct Listed {
    /// The tools, in the server's order.
    pub tools: Vec<McpTool>,
    /// What was cut or skipped, one sentence each.
    pub notes: Vec<String>,
}

/// Lists a server's tools, every page, within the bounds above.
pub async fn list(
    peer: &Peer<RoleClient>,
    server: &str,
    index: usize,
) -> Result<Listed, ListError> {
    match tokio::time::timeout(LIST_TIMEOUT, list_pages(peer, server, index)).await {
        Ok(result) => result,
        Err(_) => Err(ListError::Failed(format!(
            "it did not list its tools within {} s",
            LIST_TIMEOUT.as_secs()
        ))),
    }
}

async fn list_pages(
    peer: &Peer<RoleClient>,
    server: &str,
    index: usize,
) -> Result<Listed, ListError> {
    let mut collector = Collector::new(server, index);
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .map_err(|err| ListError::Failed(format!("it did not list its tools: {err}")))?;
        for tool in page.tools {
            collector.add(tool).map_err(ListError::Bound)?;
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(collector.listed),
        }
    }
    Err(ListError::Bound(OverBound(format!(
        "its tool list did not end within {MAX_PAGES} pages"
    ))))
}

/// The tools of one listing as they come, against the bounds.
struct Collector<'a> {
    server: &'a str,
    index: usize,
    seen: BTreeSet<String>,
    received: usize,
    count: usize,
    listed: Listed,
}

impl<'a> Collector<'a> {
    fn new(server: &'a str, index: usize) -> Collector<'a> {
        Collector {
            server,
            index,
            seen: BTreeSet::new(),
            received: 0,
            count: 0,
            listed: Listed::default(),
        }
    }

    fn note(&mut self, note: String) {
        self.listed.notes.push(note);
    }

    fn add(&mut self, tool: rmcp::model::Tool) -> Result<(), OverBound> {
        self.count += 1;
        if self.count > MAX_TOOLS {
            return Err(OverBound(format!("it lists more than {MAX_TOOLS} tools")));
        }
        self.received += json_len(&tool);
        if self.received > MAX_LIST_BYTES {
            return Err(OverBound(format!(
                "its tool list is larger than {} MiB",
                MAX_LIST_BYTES / (1024 * 1024)
            )));
        }
        let rmcp::model::Tool {
            name,
            description,
            input_schema,
            ..
        } = tool;
        let name = name.to_string();
        let schema = serde_json::Value::Object(std::sync::Arc::unwrap_or_clone(input_schema));
        if schema.get("type").and_then(|t| t.as_str()) != Some("object") {
            tracing::warn!(server = %self.server, tool = %name, "skipping MCP tool: its input schema is not an object");
            return Ok(());
        }
        let schema_bytes = json_len(&schema);
        if schema_bytes > MAX_SCHEMA_BYTES {
            self.note(format!(
                "MCP tool \"{name}\" of server \"{}\" is skipped: its input schema has {schema_bytes} bytes (at most {} KiB)",
                self.server,
                MAX_SCHEMA_BYTES / 1024
            ));
            return Ok(());
        }
        let model_name = model_name(self.server, &name);
        if !self.seen.insert(model_name.clone()) {
            self.note(format!(
                "MCP tool \"{name}\" of server \"{}\" is skipped: an earlier tool of that server is already offered as {model_name}",
                self.server
            ));
            return Ok(());
        }
        let mut description = description.as_deref().unwrap_or("").to_owned();
        if description.len() > MAX_DESCRIPTION_BYTES {
            let whole = description.len();
            description = format!(
                "{}\n[description cut: {whole} bytes in all]",
                dsh_protocol::content::head_bytes(&description, MAX_DESCRIPTION_BYTES)
            );
            self.note(format!(
                "The description of MCP tool \"{name}\" of server \"{}\" is cut to {} KiB (it has {whole} bytes)",
                self.server,
                MAX_DESCRIPTION_BYTES / 1024
            ));
        }
        self.listed.tools.push(McpTool {
            model_name,
            server: self.server.to_owned(),
            tool: name,
            description,
            schema,
            index: self.index,
        });
        Ok(())
    }
}

/// The length of `value` as compact JSON, counted as it is written (no
/// copy of it is made).
fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).map_or(0, |()| count.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::McpTransport;

    fn config(name: &str) -> McpServerConfig {
        McpServerConfig {
            name: name.to_owned(),
            transport: McpTransport::Http {
                url: "http://127.0.0.1:1/mcp".to_owned(),
                headers: Vec::new(),
            },
        }
    }

    fn tool(name: &str, description: &str, schema: serde_json::Value) -> rmcp::model::Tool {
        let serde_json::Value::Object(schema) = schema else {
            unreachable!()
        };
        rmcp::model::Tool::new(name.to_owned(), description.to_owned(), schema)
    }

    fn object() -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {}})
    }

    #[test]
    fn a_server_lists_at_most_so_many_tools() {
        let mut collector = Collector::new("many", 0);
        for n in 0..MAX_TOOLS {
            collector.add(tool(&format!("t{n}"), "", object())).unwrap();
        }
        let over = collector.add(tool("one-more", "", object())).unwrap_err();
        assert_eq!(over.0, "it lists more than 1000 tools");
    }

    #[test]
    fn a_listing_brings_at_most_so_many_bytes() {
        let mut collector = Collector::new("big", 0);
        let description = "d".repeat(100 * 1024);
        let over = (0..100)
            .find_map(|n| {
                collector
                    .add(tool(&format!("t{n}"), &description, object()))
                    .err()
            })
            .expect("a bound");
        assert_eq!(over.0, "its tool list is larger than 4 MiB");
        assert!(collector.listed.tools.len() < 41);
    }

    #[test]
    fn long_descriptions_are_cut_big_schemas_and_repeated_names_skipped() {
        let mut collector = Collector::new("odd", 0);
        let big =
            serde_json::json!({"type": "object", "description": "s".repeat(MAX_SCHEMA_BYTES)});
        collector
            .add(tool("long", &"é".repeat(10_000), object()))
            .unwrap();
        collector.add(tool("schema", "", big)).unwrap();
        collector.add(tool("a.b", "first", object())).unwrap();
        collector.add(tool("a_b", "second", object())).unwrap();
        let listed = collector.listed;
        let names: Vec<&str> = listed.tools.iter().map(|t| t.model_name.as_str()).collect();
        assert_eq!(names, ["mcp__odd__long", "mcp__odd__a_b"]);
        assert_eq!(listed.tools[1].description, "first");
        let long = &listed.tools[0].description;
        assert!(long.len() <= MAX_DESCRIPTION_BYTES + 64, "{}", long.len());
        assert!(long.ends_with("[description cut: 20000 bytes in all]"));
        assert_eq!(listed.notes.len(), 3, "{:?}", listed.notes);
    }

    #[test]
    fn names_are_sanitized() {
        assert_eq!(sanitize("my server.v2"), "my_server_v2");
        assert_eq!(sanitize(&"x".repeat(40)).len(), 32);
        assert_eq!(sanitize(""), "server");
    }

    #[test]
    fn repeated_names_get_deterministic_suffixes() {
        let (names, _) = server_names(&[
            config("docs"),
            config("docs"),
            config("do cs"),
            config(&"y".repeat(40)),
            config(&"y".repeat(40)),
            config("docs_2"),
        ]);
        assert_eq!(
            names,
            [
                "docs",
                "docs_2",
                "do_cs",
                &"y".repeat(32),
                &format!("{}_2", "y".repeat(30)),
                "docs_2_2",
            ]
        );
    }

    /// Server `a` with tool `b__c` and server `a__b` with tool `c` would
    /// both be `mcp__a__b__c`.
    #[test]
    fn no_two_servers_tools_share_a_model_name() {
        let (names, notices) = server_names(&[config("a"), config("a__b"), config("x_")]);
        assert_eq!(names, ["a", "a_b", "x"]);
        assert_ne!(model_name(&names[0], "b__c"), model_name(&names[1], "c"));
        assert_eq!(notices.len(), 2, "{notices:?}");
        assert!(
            notices[0].contains("\"a__b\" is offered as \"a_b\""),
            "{notices:?}"
        );
        // The first `__` after the prefix ends the server's part, whatever
        // the tool is called.
        for (server, tool) in [("a", "b__c"), ("a_b", "c"), ("x", "_y"), ("-", "__")] {
            let name = model_name(&server_name(server), tool);
            let rest = name.strip_prefix("mcp__").unwrap();
            assert_eq!(&rest[..rest.find("__").unwrap()], server_name(server));
        }
    }
}
