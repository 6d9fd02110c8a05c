//! The commands that look after dsh's own state from a terminal:
//! `dsh config check` (here), `dsh doctor` ([`doctor`]) and `dsh sessions`
//! ([`sessions`]). They print for a person on the writer they are given and
//! return the process's exit status; main.rs parses their flags.
//!
//! `dsh config check` loads the configuration with the real loader
//! ([`Config::load`], the same serde types with `deny_unknown_fields`, the
//! same environment overrides) and says what is wrong: where (line and
//! column), what, and for an unknown key the nearest valid name.

use std::io::Write;
use std::path::PathBuf;

use crate::config::{Config, ConfigError};
use crate::credentials::Env;

pub mod doctor;
pub mod sessions;

/// The variables the loader reads besides the file (what they override).
pub const ENV_OVERRIDES: &[(&str, &str)] = &[
    ("DEEPSEEK_BASE_URL", "[provider] base_url"),
    ("DSH_PROVIDER", "[provider] kind"),
    ("DSH_REPLAY_FILE", "[provider] replay_file"),
];

/// `$DSH_HOME`, as the loader finds it (`DSH_HOME`, else `$HOME/.dsh`).
pub fn home(env: &dyn Env) -> Option<PathBuf> {
    env.var("DSH_HOME")
        .map(PathBuf::from)
        .or_else(|| env.var("HOME").map(|home| PathBuf::from(home).join(".dsh")))
}

/// What is wrong with the configuration, for a person: the file, the line
/// and column, the problem, and a hint when there is one.
pub fn explain(error: &ConfigError) -> String {
    match error {
        ConfigError::Parse { path, source } => {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let message = source.message().trim();
            let mut said = match source.span() {
                Some(span) => {
                    let (line, column) = line_column(&text, span.start);
                    let shown = text.lines().nth(line - 1).unwrap_or("");
                    format!(
                        "{}:{line}:{column}: {message}\n  {line} | {shown}\n  {}   {}^",
                        path.display(),
                        " ".repeat(line.to_string().len()),
                        " ".repeat(column - 1),
                    )
                }
                None => format!("{}: {message}", path.display()),
            };
            if let Some(hint) = did_you_mean(message) {
                said.push_str(&format!("\n  hint: {hint}"));
            }
            said
        }
        ConfigError::Invalid(message) => {
            // The message names its key (or its variable).
            let from_env = ENV_OVERRIDES
                .iter()
                .find(|(name, _)| message.contains(name))
                .map(|(name, _)| format!(" (from the environment variable {name})"))
                .unwrap_or_default();
            format!("{message}{from_env}")
        }
        other => other.to_string(),
    }
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |at| at + 1);
    (line, before[start..].chars().count() + 1)
}

/// For serde's "unknown field `x`, expected one of `a`, `b`" (or
/// "unknown variant"): "did you mean `a`?" with the nearest expected
/// name, else the list of valid names.
pub fn did_you_mean(message: &str) -> Option<String> {
    if !(message.starts_with("unknown field") || message.starts_with("unknown variant")) {
        return None;
    }
    // Backquoted names: the unknown one first, then the expected ones.
    let mut names = message.split('`').skip(1).step_by(2);
    let unknown = names.next()?;
    let expected: Vec<&str> = names.collect();
    if expected.is_empty() {
        return Some("this table takes no such key".to_owned());
    }
    let nearest = expected
        .iter()
        .map(|name| (strsim::jaro_winkler(unknown, name), *name))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .filter(|(score, _)| *score > 0.7)
        .map(|(_, name)| name);
    Some(match nearest {
        Some(name) => format!("did you mean `{name}`?"),
        None => format!("valid names: {}", expected.join(", ")),
    })
}

/// `dsh config check`: exit status 0 when the configuration loads, 1 when
/// not (said on `out`).
pub fn check_config(env: &dyn Env, out: &mut dyn Write) -> u8 {
    let overrides: Vec<String> = ENV_OVERRIDES
        .iter()
        .filter(|(name, _)| env.var(name).is_some())
        .map(|(name, key)| format!("  {name} is set: it overrides {key}"))
        .collect();
    let code = match Config::load(env) {
        Ok(config) => {
            let path = config.home.join("config.toml");
            let whereabouts = if path.exists() {
                path.display().to_string()
            } else {
                format!("{} does not exist: the defaults apply", path.display())
            };
            let _ = writeln!(out, "config.toml: OK ({whereabouts})");
            0
        }
        Err(error) => {
            let path = home(env).map(|home| home.join("config.toml"));
            let _ = writeln!(out, "config.toml: error\n{}", explain(&error));
            if let (Some(path), ConfigError::Invalid(_)) = (path, &error) {
                let _ = writeln!(out, "  (file: {})", path.display());
            }
            1
        }
    };
    for line in overrides {
        let _ = writeln!(out, "{line}");
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_names_get_the_nearest_valid_one() {
        assert_eq!(
            did_you_mean(
                "unknown field `bse_url`, expected one of `kind`, `base_url`, `api_key_env`"
            )
            .as_deref(),
            Some("did you mean `base_url`?")
        );
        assert_eq!(
            did_you_mean("unknown field `zzz`, expected `kind` or `base_url`").as_deref(),
            Some("valid names: kind, base_url")
        );
        assert_eq!(
            did_you_mean("invalid type: string \"x\", expected u64"),
            None
        );
    }

    #[test]
    fn offsets_become_lines_and_columns() {
        assert_eq!(line_column("a = 1\nbb = 2\n", 6), (2, 1));
        assert_eq!(line_column("a = 1\nbb = 2\n", 11), (2, 6));
        assert_eq!(line_column("", 0), (1, 1));
    }
}
