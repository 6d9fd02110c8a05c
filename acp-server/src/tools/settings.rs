//! `[tools]`: which tools are offered and how (the catalog's knobs).

use dsh_protocol::catalog;
use dsh_protocol::model::ToolSchema;
use serde::Deserialize;

use super::table::{Tool, ToolSet, TABLE};

/// `[tools]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSettings {
    /// Opt-in tools or packages to offer (`str_replace_editor`, …).
    #[serde(default)]
    pub enable: Vec<String>,
    /// Tools or packages never offered.
    #[serde(default)]
    pub disable: Vec<String>,
    /// The order tools are offered in (the catalog's `toolOrder`); empty:
    /// by name.
    #[serde(default)]
    pub order: Vec<String>,
    /// Parallel-safe calls run at once in a step (the catalog's
    /// `maxParallelToolCalls`; 1 is serial).
    #[serde(default = "max_parallel_calls")]
    pub max_parallel_calls: usize,
    /// `glob`.
    #[serde(default)]
    pub glob: GlobSettings,
    /// The repeat-tool reminder (`[tools.repeat_reminder]`).
    #[serde(default)]
    pub repeat_reminder: RepeatReminderSettings,
    /// What `enable` and `disable` stand for ([`ToolSettings::checked`]).
    #[serde(skip)]
    sets: (ToolSet, ToolSet),
}

impl Default for ToolSettings {
    fn default() -> ToolSettings {
        ToolSettings {
            enable: Vec::new(),
            disable: Vec::new(),
            order: Vec::new(),
            max_parallel_calls: max_parallel_calls(),
            glob: GlobSettings::default(),
            repeat_reminder: RepeatReminderSettings::default(),
            sets: (ToolSet::default(), ToolSet::default()),
        }
    }
}

/// `order`'s marker for the tools it does not name (the catalog's
/// `TOOL_ORDER_REST`).
pub const ORDER_REST: &str = "*";

impl ToolSettings {
    /// These settings with their names checked (`enable`, `disable`,
    /// `order`) and `max_parallel_calls`, and the tools `enable` and
    /// `disable` stand for worked out (at load).
    ///
    /// # Errors
    /// The message names the key and the value: an unknown name (with the
    /// nearest valid one), a catalog tool or package this dsh does not
    /// have, a name in both lists, a bad `order`.
    pub fn checked(mut self) -> Result<ToolSettings, String> {
        if self.max_parallel_calls == 0 {
            return Err(
                "[tools] max_parallel_calls must be at least 1 (1: one call at a time)".to_owned(),
            );
        }
        let mut sets = [ToolSet::default(); 2];
        for (set, (key, names)) in sets
            .iter_mut()
            .zip([("enable", &self.enable), ("disable", &self.disable)])
        {
            for name in names {
                for tool in tools_named(name).map_err(|err| format!("[tools] {key}: {err}"))? {
                    *set = set.with(tool);
                }
            }
        }
        if let Some(name) = self
            .enable
            .iter()
            .find(|name| self.disable.iter().any(|other| same_name(name, other)))
        {
            return Err(format!(
                "[tools] {name:?} is both in enable and in disable: keep one"
            ));
        }
        self.sets = (sets[0], sets[1]);
        check_order(&self.order).map_err(|err| format!("[tools] order: {err}"))?;
        Ok(self)
    }

    /// The built-in tools `enable` names (itself or by its package).
    pub fn enabled(&self) -> ToolSet {
        self.sets.0
    }

    /// The built-in tools `disable` names.
    pub fn disabled(&self) -> ToolSet {
        self.sets.1
    }

    /// `tools` (the built-in ones by name, then MCP tools) in `order`:
    /// the tools it names where it names them, the rest in their order at
    /// its `*`.
    pub fn arrange(&self, tools: &mut [ToolSchema]) {
        let Some(rest) = self.order.iter().position(|name| name == ORDER_REST) else {
            return;
        };
        tools.sort_by_key(|tool| {
            self.order
                .iter()
                .position(|name| *name == tool.name)
                .unwrap_or(rest)
        });
    }
}

/// Without the scope the catalog writes packages with.
fn unscoped(name: &str) -> &str {
    name.strip_prefix("@deepseek-ai/").unwrap_or(name)
}

/// `a` and `b` name the same tool or package (a package's short name is
/// its name).
fn same_name(a: &str, b: &str) -> bool {
    let canonical = |name: &str| match catalog::entries()
        .iter()
        .find(|entry| unscoped(name) == entry.package)
    {
        Some(entry) => short(&entry.package),
        None => name.to_owned(),
    };
    canonical(a) == canonical(b)
}

/// A package's short name: `dsh-tool-session-query` is `session_query`.
fn short(package: &str) -> String {
    let bare = package
        .strip_prefix("dsh-tool-")
        .or_else(|| package.strip_prefix("dsh-"))
        .unwrap_or(package);
    bare.replace('-', "_")
}

/// Whether `name` is `package`, with or without its scope, or its short
/// name.
fn names_package(name: &str, package: &str) -> bool {
    unscoped(name) == package || name == short(package)
}

/// The built-in tools `name` stands for in `enable` or `disable`: a tool,
/// or the tools of a catalog package (by its name, with or without
/// `@deepseek-ai/`, or its short name).
fn tools_named(name: &str) -> Result<Vec<Tool>, String> {
    if let Some(tool) = Tool::named(name) {
        return Ok(vec![tool]);
    }
    let tools: Vec<Tool> = TABLE
        .iter()
        .filter(|spec| {
            spec.package()
                .is_some_and(|package| names_package(name, package))
        })
        .map(|spec| spec.tool)
        .collect();
    if !tools.is_empty() {
        return Ok(tools);
    }
    unavailable(name)?;
    let mut valid: Vec<String> = TABLE.iter().map(|spec| spec.name.to_owned()).collect();
    for package in TABLE.iter().filter_map(|spec| spec.package()) {
        valid.push(package.to_owned());
        valid.push(short(package));
    }
    Err(unknown("tool or package", name, &valid))
}

/// An error when `name` is a tool or package of the catalog (this dsh
/// has none of its tools).
fn unavailable(name: &str) -> Result<(), String> {
    let entries = catalog::entries();
    let package = entries
        .iter()
        .find(|entry| entry.name == name || names_package(name, &entry.package))
        .map(|entry| entry.package.as_str());
    match package {
        Some(package) => {
            let tools: Vec<&str> = entries
                .iter()
                .filter(|entry| entry.package == package)
                .map(|entry| entry.name.as_str())
                .collect();
            Err(format!(
                "{name:?} (the catalog's {package}: {}) is not available in this dsh version",
                tools.join(", ")
            ))
        }
        None => Ok(()),
    }
}

/// The name of `valid` nearest to the unknown `name`, when one is near
/// enough to be what was meant (configuration errors suggest it).
pub fn nearest<'a>(name: &str, valid: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    valid
        .into_iter()
        .map(|candidate| (strsim::jaro_winkler(name, candidate), candidate))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .filter(|(score, _)| *score > 0.7)
        .map(|(_, candidate)| candidate)
}

/// "unknown name": the nearest of `valid`, else all of them.
fn unknown(what: &str, name: &str, valid: &[String]) -> String {
    match nearest(name, valid.iter().map(String::as_str)) {
        Some(candidate) => format!("unknown {what} {name:?}: did you mean {candidate:?}?"),
        None => format!(
            "unknown {what} {name:?}: valid names are {}",
            valid.join(", ")
        ),
    }
}

/// `order`: built-in tool names, each once, and `*` exactly once.
fn check_order(order: &[String]) -> Result<(), String> {
    if order.is_empty() {
        return Ok(());
    }
    let rests = order.iter().filter(|name| *name == ORDER_REST).count();
    if rests != 1 {
        return Err(format!(
            "{ORDER_REST:?} (the tools it does not name) must be in it exactly once, not {rests} times"
        ));
    }
    for (at, name) in order.iter().enumerate() {
        if name == ORDER_REST {
            continue;
        }
        if order[..at].contains(name) {
            return Err(format!("{name:?} is in it twice"));
        }
        if Tool::named(name).is_some() {
            continue;
        }
        if name.starts_with("mcp__") {
            return Err(format!(
                "{name:?}: MCP tools are not named here, they come at {ORDER_REST:?}"
            ));
        }
        if let Some(entry) = catalog::entries().iter().find(|entry| entry.name == *name) {
            return Err(format!(
                "{name:?} (the catalog's {}) is not available in this dsh version",
                entry.package
            ));
        }
        let mut valid: Vec<String> = TABLE.iter().map(|spec| spec.name.to_owned()).collect();
        valid.push(ORDER_REST.to_owned());
        return Err(unknown("tool", name, &valid));
    }
    Ok(())
}

fn max_parallel_calls() -> usize {
    10
}

/// `[tools.glob]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobSettings {
    /// Leave out what `.gitignore` and `.ignore` files ignore (the
    /// catalog's `glob` includes ignored files: false).
    #[serde(default)]
    pub respect_ignore_files: bool,
}

/// `[tools.repeat_reminder]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepeatReminderSettings {
    /// Consecutive identical calls that add a reminder.
    #[serde(default = "thresholds")]
    pub thresholds: Vec<u32>,
    /// Tool-name patterns (`*` wildcards) tracked; empty: every tool.
    #[serde(default)]
    pub include: Vec<String>,
    /// Tool-name patterns neither counted nor resetting the count.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Characters of the arguments quoted in the reminder.
    #[serde(default = "arguments_preview_chars")]
    pub arguments_preview_chars: usize,
}

impl Default for RepeatReminderSettings {
    fn default() -> RepeatReminderSettings {
        RepeatReminderSettings {
            thresholds: thresholds(),
            include: Vec::new(),
            exclude: Vec::new(),
            arguments_preview_chars: arguments_preview_chars(),
        }
    }
}

fn thresholds() -> Vec<u32> {
    vec![3, 5, 8]
}

fn arguments_preview_chars() -> usize {
    500
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(toml: &str) -> Result<ToolSettings, String> {
        let settings: ToolSettings = toml::from_str(toml).map_err(|err| err.to_string())?;
        settings.checked()
    }

    #[test]
    fn unknown_names_fail_with_the_nearest() {
        let err = settings(r#"enable = ["str_replace_edtor"]"#).unwrap_err();
        assert!(err.contains(r#"[tools] enable: unknown tool or package "str_replace_edtor": did you mean "str_replace_editor"?"#), "{err}");
        let err = settings(r#"disable = ["web_fetsh"]"#).unwrap_err();
        assert!(
            err.contains(r#"[tools] disable: unknown"#)
                && err.contains(r#"did you mean "web_fetch"?"#),
            "{err}"
        );
        let err = settings(r#"disable = ["zzzzzz"]"#).unwrap_err();
        assert!(
            err.contains("valid names are ") && err.contains("todo_write"),
            "{err}"
        );
    }

    #[test]
    fn catalog_tools_dsh_lacks_are_not_available() {
        for name in [
            "schedule",
            "schedule_create",
            "dsh-schedule",
            "bash_persistent",
        ] {
            let err = settings(&format!("enable = [{name:?}]")).unwrap_err();
            assert!(err.starts_with("[tools] enable: "), "{err}");
            assert!(
                err.contains("is not available in this dsh version"),
                "{err}"
            );
        }
        let err = settings(r#"enable = ["schedule"]"#).unwrap_err();
        assert!(err.contains("dsh-schedule: schedule_create"), "{err}");
    }

    #[test]
    fn a_name_in_both_lists_fails() {
        for (enable, disable) in [
            ("str_replace_editor", "str_replace_editor"),
            (
                "@deepseek-ai/dsh-tool-str-replace-editor",
                "dsh-tool-str-replace-editor",
            ),
            ("dsh-tool-str-replace-editor", "str_replace_editor"),
        ] {
            let err =
                settings(&format!("enable = [{enable:?}]\ndisable = [{disable:?}]")).unwrap_err();
            assert!(err.contains("is both in enable and in disable"), "{err}");
        }
        // A package enabled but one of its tools not.
        let both = settings("enable = [\"dsh-tool-fs\"]\ndisable = [\"write\"]").unwrap();
        assert!(both.enabled().contains(Tool::Write) && both.disabled().contains(Tool::Write));
    }

    #[test]
    fn packages_stand_for_their_tools() {
        let tools = settings(
            r#"
            enable = ["@deepseek-ai/dsh-tool-str-replace-editor"]
            disable = ["dsh-tool-web", "todo", "bash"]
            "#,
        )
        .unwrap();
        assert!(tools.enabled().contains(Tool::StrReplaceEditor));
        assert!(!tools.enabled().contains(Tool::Edit));
        for tool in [Tool::WebFetch, Tool::WebSearch, Tool::TodoWrite, Tool::Bash] {
            assert!(tools.disabled().contains(tool), "{tool:?}");
        }
        assert!(!tools.disabled().contains(Tool::Read));
        let fs = settings(r#"disable = ["fs"]"#).unwrap();
        for tool in [Tool::Read, Tool::Write, Tool::Edit] {
            assert!(fs.disabled().contains(tool), "{tool:?}");
        }
        assert!(!fs.disabled().contains(Tool::Glob));
        assert_eq!(settings("").unwrap().enabled(), ToolSet::default());
    }

    #[test]
    fn order_names_tools_and_the_rest_once() {
        let schema = |name: &str| ToolSchema {
            name: name.to_owned(),
            description: String::new(),
            parameters: serde_json::Value::Null,
        };
        let names = |order: &str| {
            let mut tools: Vec<ToolSchema> = ["edit", "glob", "read", "todo_write", "mcp__a__b"]
                .map(schema)
                .into();
            settings(&format!("order = {order}"))
                .unwrap()
                .arrange(&mut tools);
            tools.into_iter().map(|tool| tool.name).collect::<Vec<_>>()
        };
        assert_eq!(
            names("[]"),
            ["edit", "glob", "read", "todo_write", "mcp__a__b"]
        );
        assert_eq!(
            names(r#"["todo_write", "bash", "read", "*"]"#),
            ["todo_write", "read", "edit", "glob", "mcp__a__b"]
        );
        assert_eq!(
            names(r#"["glob", "*", "edit"]"#),
            ["glob", "read", "todo_write", "mcp__a__b", "edit"]
        );
        for (order, error) in [
            (
                r#"["read"]"#,
                r#""*" (the tools it does not name) must be in it exactly once, not 0 times"#,
            ),
            (r#"["*", "read", "*"]"#, "exactly once, not 2 times"),
            (r#"["read", "*", "read"]"#, r#""read" is in it twice"#),
            (
                r#"["raed", "*"]"#,
                r#"unknown tool "raed": did you mean "read"?"#,
            ),
            (r#"["mcp__a__b", "*"]"#, "MCP tools are not named here"),
            (
                r#"["schedule_create", "*"]"#,
                "(the catalog's dsh-schedule) is not available in this dsh version",
            ),
        ] {
            let err = settings(&format!("order = {order}")).unwrap_err();
            assert!(
                err.starts_with("[tools] order: ") && err.contains(error),
                "{order}: {err}"
            );
        }
    }

    #[test]
    fn max_parallel_calls_is_at_least_one() {
        assert_eq!(settings("").unwrap().max_parallel_calls, 10);
        let err = settings("max_parallel_calls = 0").unwrap_err();
        assert!(
            err.contains("[tools] max_parallel_calls must be at least 1"),
            "{err}"
        );
    }
}
