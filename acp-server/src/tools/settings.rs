//! `[tools]`: which tools are offered and how (the catalog's knobs).

use serde::Deserialize;

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
        }
    }
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
