//! The commands that look after dsh's own state from a terminal:
//! `dsh config check` (here), `dsh doctor` ([`doctor`]) and `dsh sessions`
//! ([`sessions`]). They print for a person on the writer they are given and
//! return the process's exit status; main.rs parses their flags.
//!
//! `dsh config check` loads the configuration with the real loader
//! ([`Config::load`], the same serde types with `deny_unknown_fields`, the
//! same environment overrides) and says what is wrong: where (line and
//! column), what, and for an unknown key the nearest valid name (or, for
//! a top-level key written under a table, that it belongs above the
//! first); an error in a value the environment gave is said to be the
//! variable's, not the file's.

use std::io::Write;
use std::path::PathBuf;

use crate::config::{Config, ConfigError, RawConfig};
use crate::credentials::Env;

pub mod doctor;
pub mod search;
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
        .or_else(|| crate::credentials::user_home(env).map(|home| home.join(".dsh")))
}

/// The environment variable a configuration error is about, when it is
/// set (a value it gave, which overrides the file's): the place to fix.
/// None: the file (or what it left to the defaults).
pub fn from_env(error: &ConfigError, env: &dyn Env) -> Option<&'static str> {
    let ConfigError::Invalid(message) = error else {
        return None;
    };
    ENV_OVERRIDES
        .iter()
        .map(|(name, _)| *name)
        .find(|name| message.contains(name) && env.var(name).is_some())
}

/// What is wrong with the configuration, for a person: the file, the line
/// and column, the problem, and a hint when there is one.
pub fn explain(error: &ConfigError, env: &dyn Env) -> String {
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
            let hint = source
                .span()
                .and_then(|span| above_the_tables(message, &text, span.start))
                .or_else(|| did_you_mean(message));
            if let Some(hint) = hint {
                said.push_str(&format!("\n  hint: {hint}"));
            }
            said
        }
        ConfigError::Invalid(message) => {
            // The message names its key (or its variable).
            match from_env(error, env) {
                Some(name) => format!("{message} (from the environment variable {name})"),
                None => message.clone(),
            }
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

/// serde's "unknown field `x`, expected one of `a`, `b`" (or "unknown
/// variant"): the unknown name and the expected ones.
fn unknown_and_expected(message: &str) -> Option<(&str, Vec<&str>)> {
    if !(message.starts_with("unknown field") || message.starts_with("unknown variant")) {
        return None;
    }
    // Backquoted names: the unknown one first, then the expected ones.
    let mut names = message.split('`').skip(1).step_by(2);
    let unknown = names.next()?;
    Some((unknown, names.collect()))
}

/// For an unknown key at `offset` of `text` that is one of config.toml's
/// top-level keys: it is written under a table (in TOML a key belongs to
/// the table above it), and where it goes instead.
fn above_the_tables(message: &str, text: &str, offset: usize) -> Option<String> {
    let (unknown, _) = unknown_and_expected(message)?;
    // The top-level keys, as serde names them for an unknown one.
    let probe = toml::from_str::<RawConfig>("\"\" = 0").err()?;
    let (_, top_level) = unknown_and_expected(probe.message())?;
    if !top_level.contains(&unknown) {
        return None;
    }
    let before = text.get(..offset)?;
    let table = before
        .lines()
        .map(str::trim)
        .rfind(|line| line.starts_with('['))?;
    Some(format!(
        "`{unknown}` is a top-level key, but here it is under {table} (a key belongs to the table above it): move it above the first table"
    ))
}

/// For serde's "unknown field `x`, expected one of `a`, `b`" (or
/// "unknown variant"): "did you mean `a`?" with the nearest expected
/// name, else the list of valid names.
pub fn did_you_mean(message: &str) -> Option<String> {
    let (unknown, expected) = unknown_and_expected(message)?;
    if expected.is_empty() {
        return Some("this table takes no such key".to_owned());
    }
    Some(
        match crate::tools::nearest(unknown, expected.iter().copied()) {
            Some(name) => format!("did you mean `{name}`?"),
            None => format!("valid names: {}", expected.join(", ")),
        },
    )
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
        Err(error) => match from_env(&error, env) {
            // The variable is the place to fix, not a file.
            Some(name) => {
                let _ = writeln!(out, "{name}: error\n{}", explain(&error, env));
                1
            }
            None => {
                let path = home(env).map(|home| home.join("config.toml"));
                let _ = writeln!(out, "config.toml: error\n{}", explain(&error, env));
                if let (Some(path), ConfigError::Invalid(_)) = (path, &error) {
                    if path.exists() {
                        let _ = writeln!(out, "  (file: {})", path.display());
                    }
                }
                1
            }
        },
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
    fn a_top_level_key_under_a_table_is_told_to_move_up() {
        let message = "unknown field `default_model`, expected one of `kind`, `base_url`";
        let text =
            "[titles]\nfrom_model = false\n[provider]\nkind = \"openai\"\ndefault_model = \"m\"\n";
        let hint = above_the_tables(message, text, text.find("default_model").unwrap());
        assert_eq!(
            hint.as_deref(),
            Some("`default_model` is a top-level key, but here it is under [provider] (a key belongs to the table above it): move it above the first table")
        );
        // A key of no table at all: the nearest name is the hint.
        let message = "unknown field `bse_url`, expected one of `kind`, `base_url`";
        assert_eq!(above_the_tables(message, text, text.len()), None);
    }

    #[test]
    fn offsets_become_lines_and_columns() {
        assert_eq!(line_column("a = 1\nbb = 2\n", 6), (2, 1));
        assert_eq!(line_column("a = 1\nbb = 2\n", 11), (2, 6));
        assert_eq!(line_column("", 0), (1, 1));
    }
}
