//! Where the model's API key comes from, resolved on every request (a
//! rotated key applies to the next one), the user's own sources first:
//!
//! 1. the environment variable (`DEEPSEEK_API_KEY`, or the one
//!    `provider.api_key_env` names);
//! 2. `$DSH_HOME/.credentials.yaml`, which `dsh login` writes: a flat
//!    mapping `NAME: value`, refused unless it is private (0600);
//! 3. `$DSH_HOME/.env`;
//! 4. `./.env` (the directory dsh was started in), only with
//!    `[credentials] dotenv = true`: that directory is often a repository,
//!    and a key its owner put there would bill the user's prompts to the
//!    owner's account — and let the owner read them.
//!
//! Which source was used is logged (its name, never the key: at info when
//! it changes, at debug on every request), and a missing key is reported
//! with the sources that were checked ([`missing`]).
//!
//! The `.env` files are parsed with `dotenvy`. The credentials file is a
//! flat YAML mapping written only by dsh; it is parsed here (a line per
//! key, `NAME: value` with optional quotes) rather than with a YAML crate,
//! since the maintained ones bring a full YAML 1.2 parser for two lines.
//! Values never reach logs or error messages.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

use serde::Deserialize;

/// Environment lookups, injectable for tests.
pub trait Env {
    /// The variable's value, if set and non-empty.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|value| !value.is_empty())
    }
}

/// The user's home directory: `HOME`; on Windows, where `HOME` is seldom
/// set (Git Bash and MSYS set it), `USERPROFILE`. `$DSH_HOME` defaults to
/// its `.dsh`.
pub fn user_home(env: &dyn Env) -> Option<PathBuf> {
    let home = env.var("HOME");
    #[cfg(windows)]
    let home = home.or_else(|| env.var("USERPROFILE"));
    home.map(PathBuf::from)
}

/// [`user_home`] of this process's environment.
pub fn process_user_home() -> Option<PathBuf> {
    user_home(&ProcessEnv)
}

/// `[credentials]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialSettings {
    /// Read the key from `./.env` too, after every source of the user's
    /// own (default: no, `./.env` is never read).
    #[serde(default)]
    pub dotenv: bool,
}

/// The credentials file under `home`.
pub fn credentials_file(home: &Path) -> PathBuf {
    home.join(".credentials.yaml")
}

/// Files larger than this are not credentials files.
const MAX_FILE: u64 = 64 * 1024;

/// Where a key was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The environment variable.
    Environment = 1,
    /// `$DSH_HOME/.credentials.yaml`.
    Stored,
    /// `$DSH_HOME/.env`.
    HomeEnvFile,
    /// `./.env` (with `[credentials] dotenv = true`).
    WorkingDirEnvFile,
}

impl Source {
    /// The source as people read it (`name`: the key's variable).
    pub fn describe(self, name: &str) -> String {
        match self {
            Source::Environment => format!("the environment variable {name}"),
            Source::Stored => "$DSH_HOME/.credentials.yaml (`dsh login`)".to_owned(),
            Source::HomeEnvFile => "$DSH_HOME/.env".to_owned(),
            Source::WorkingDirEnvFile => "./.env".to_owned(),
        }
    }
}

/// Where to look for the key: `$DSH_HOME`, the key's variable, and
/// whether `./.env` may be read.
#[derive(Debug, Clone, Copy)]
pub struct Lookup<'a> {
    pub home: &'a Path,
    pub name: &'a str,
    pub dotenv: bool,
}

/// Where a key is looked up, owned: what the model's settings carry.
#[derive(Debug, Clone)]
pub struct KeySource {
    /// `$DSH_HOME`.
    pub home: PathBuf,
    /// The key's variable (`DEEPSEEK_API_KEY`, or `provider.api_key_env`).
    pub name: String,
    /// Whether `./.env` may be read.
    pub dotenv: bool,
}

impl<'a> Lookup<'a> {
    /// The lookup `source` describes.
    pub fn of(source: &'a KeySource) -> Lookup<'a> {
        Lookup {
            home: &source.home,
            name: &source.name,
            dotenv: source.dotenv,
        }
    }
}

impl KeySource {
    /// Resolves the key now (keys rotate; never cache it).
    pub fn resolve(&self) -> Option<String> {
        resolve(Lookup::of(self), &ProcessEnv).map(|(key, _)| key)
    }
}

/// The source last used, for the info line when it changes (0: none yet).
static LAST_SOURCE: AtomicU8 = AtomicU8::new(0);

/// The key and where it came from; `env` is the process environment (a
/// seam for tests).
pub fn resolve(lookup: Lookup<'_>, env: &dyn Env) -> Option<(String, Source)> {
    let found = find(lookup, env);
    if let Some((_, source)) = &found {
        let source = *source;
        let said = source.describe(lookup.name);
        if LAST_SOURCE.swap(source as u8, Ordering::Relaxed) != source as u8 {
            tracing::info!(source = %said, "API key from {said}");
        } else {
            tracing::debug!(source = %said, "API key from {said}");
        }
    }
    found
}

fn find(lookup: Lookup<'_>, env: &dyn Env) -> Option<(String, Source)> {
    let Lookup { home, name, dotenv } = lookup;
    if let Some(value) = env.var(name).filter(|value| !value.trim().is_empty()) {
        return Some((value, Source::Environment));
    }
    if let Some(value) = read_stored(&credentials_file(home)).and_then(|map| take(map, name)) {
        return Some((value, Source::Stored));
    }
    let from_file = |path: PathBuf| {
        small_file(&path)?;
        dotenvy::from_path_iter(&path)
            .ok()?
            .filter_map(Result::ok)
            .find(|(key, value)| key == name && !value.trim().is_empty())
            .map(|(_, value)| value)
    };
    if let Some(value) = from_file(home.join(".env")) {
        return Some((value, Source::HomeEnvFile));
    }
    if !dotenv {
        return None;
    }
    from_file(PathBuf::from(".env")).map(|value| (value, Source::WorkingDirEnvFile))
}

/// Why there is no key, for an error: the sources checked, in order, and
/// whether `./.env` was left out.
pub fn missing(lookup: Lookup<'_>) -> String {
    let mut checked: Vec<String> = [Source::Environment, Source::Stored, Source::HomeEnvFile]
        .iter()
        .map(|source| source.describe(lookup.name))
        .collect();
    let dotenv = if lookup.dotenv {
        checked.push(Source::WorkingDirEnvFile.describe(lookup.name));
        ""
    } else {
        "; ./.env is not read unless config.toml sets [credentials] dotenv = true"
    };
    format!("sources checked: {}{dotenv}", checked.join(", "))
}

/// [`resolve`] for async code: the environment is read inline, the files
/// (when it has no key) on a blocking thread.
pub async fn resolve_now(source: &KeySource) -> Option<String> {
    let lookup = Lookup::of(source);
    if ProcessEnv
        .var(lookup.name)
        .is_some_and(|value| !value.trim().is_empty())
    {
        return resolve(lookup, &ProcessEnv).map(|(value, _)| value);
    }
    let (home, name, dotenv) = (
        lookup.home.to_path_buf(),
        lookup.name.to_owned(),
        lookup.dotenv,
    );
    tokio::task::spawn_blocking(move || {
        let lookup = Lookup {
            home: &home,
            name: &name,
            dotenv,
        };
        resolve(lookup, &ProcessEnv).map(|(value, _)| value)
    })
    .await
    .ok()
    .flatten()
}

fn take(map: Vec<(String, String)>, name: &str) -> Option<String> {
    map.into_iter()
        .find(|(key, value)| key == name && !value.is_empty())
        .map(|(_, value)| value)
}

/// A regular file of credential size.
fn small_file(path: &Path) -> Option<std::fs::Metadata> {
    let meta = std::fs::metadata(path).ok()?;
    (meta.is_file() && meta.len() <= MAX_FILE).then_some(meta)
}

/// The stored mapping, if the file exists, is private and parses.
fn read_stored(path: &Path) -> Option<Vec<(String, String)>> {
    let meta = small_file(path)?;
    if crate::private::grants(&meta, crate::private::GROUP_OTHER) {
        tracing::warn!(
            path = %path.display(),
            "ignoring the credentials file: other users can read it (chmod 600 it, or run `dsh login` again)"
        );
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    match parse(&text) {
        Ok(map) => Some(map),
        Err(line) => {
            tracing::warn!(path = %path.display(), line, "ignoring the credentials file: it is not a flat `NAME: value` mapping");
            None
        }
    }
}

/// Parses `NAME: value` lines (comments and blank lines skipped); the
/// number of the first bad line otherwise.
fn parse(text: &str) -> Result<Vec<(String, String)>, usize> {
    let mut map = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line.split_once(':').ok_or(number + 1)?;
        let key = key.trim();
        let identifier = key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !identifier {
            return Err(number + 1);
        }
        let value = value.trim();
        let value = match (value.chars().next(), value.chars().last()) {
            (Some('"'), Some('"')) | (Some('\''), Some('\'')) if value.len() >= 2 => {
                &value[1..value.len() - 1]
            }
            _ => value,
        };
        map.push((key.to_owned(), value.to_owned()));
    }
    Ok(map)
}

/// Renders the mapping, values quoted.
fn render(map: &[(String, String)]) -> String {
    let mut text = String::from("# Written by `dsh login`; keep it private (0600).\n");
    for (key, value) in map {
        text.push_str(&format!("{key}: '{value}'\n"));
    }
    text
}

/// Stores `value` under `name` in the credentials file (created 0600 in a
/// 0700 home, replaced atomically; other keys kept).
///
/// # Errors
/// A value with quotes, spaces or control characters (no API key has
/// them), or the home or the file cannot be written, as a message
/// (without the value).
pub fn store(home: &Path, name: &str, value: &str) -> Result<PathBuf, String> {
    if value.is_empty()
        || value
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '\'' || c == '"')
    {
        return Err(
            "that is not an API key: it is empty or has spaces, quotes or control characters"
                .to_owned(),
        );
    }
    let path = credentials_file(home);
    let mut map = existing(&path)?;
    map.retain(|(key, _)| key != name);
    map.push((name.to_owned(), value.to_owned()));
    write(home, &path, &map)?;
    Ok(path)
}

/// Removes `name` from the credentials file (the file goes once empty);
/// whether it was there.
///
/// # Errors
/// The file cannot be written, as a message.
pub fn remove(home: &Path, name: &str) -> Result<bool, String> {
    let path = credentials_file(home);
    let mut map = existing(&path)?;
    let before = map.len();
    map.retain(|(key, _)| key != name);
    if map.len() == before {
        return Ok(false);
    }
    if map.is_empty() {
        std::fs::remove_file(&path)
            .map_err(|err| format!("cannot remove {}: {err}", path.display()))?;
    } else {
        write(home, &path, &map)?;
    }
    Ok(true)
}

fn existing(path: &Path) -> Result<Vec<(String, String)>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text).map_err(|line| {
            format!(
                "{} line {line} is not a `NAME: value` mapping; fix or delete it first",
                path.display()
            )
        }),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(err) => Err(format!("cannot read {}: {err}", path.display())),
    }
}

fn write(home: &Path, path: &Path, map: &[(String, String)]) -> Result<(), String> {
    crate::private::create_dir_all(home)
        .map_err(|err| format!("cannot create {}: {err}", home.display()))?;
    // An existing home stays private.
    let _ = crate::private::set_private_dir(home);
    let temp = home.join(format!(".credentials.yaml.{}", std::process::id()));
    let written = crate::private::options()
        .write(true)
        .create_new(true)
        .open(&temp)
        .and_then(|mut file| {
            file.write_all(render(map).as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temp, path));
    written.map_err(|err| {
        let _ = std::fs::remove_file(&temp);
        format!("cannot write {}: {err}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct MapEnv(HashMap<&'static str, &'static str>);
    impl super::Env for MapEnv {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|v| (*v).to_owned())
        }
    }

    #[test]
    fn the_environment_wins_then_the_stored_key_then_the_home_env_file() {
        let home = tempfile::tempdir().unwrap();
        let lookup = Lookup {
            home: home.path(),
            name: "K_TEST",
            dotenv: false,
        };
        let none = MapEnv(HashMap::new());
        assert_eq!(resolve(lookup, &none), None);
        std::fs::write(home.path().join(".env"), "OTHER=1\nK_TEST=from-home-env\n").unwrap();
        assert_eq!(
            resolve(lookup, &none),
            Some(("from-home-env".to_owned(), Source::HomeEnvFile))
        );
        store(home.path(), "K_TEST", "stored-key").unwrap();
        assert_eq!(
            resolve(lookup, &none),
            Some(("stored-key".to_owned(), Source::Stored))
        );
        let env = MapEnv(HashMap::from([("K_TEST", "from-env")]));
        assert_eq!(
            resolve(lookup, &env),
            Some(("from-env".to_owned(), Source::Environment))
        );
        assert!(remove(home.path(), "K_TEST").unwrap());
        assert!(!credentials_file(home.path()).exists());
        assert!(!remove(home.path(), "K_TEST").unwrap());
    }

    #[test]
    fn the_stored_file_is_private_keeps_other_keys_and_refuses_when_readable() {
        let home = tempfile::tempdir().unwrap();
        assert!(store(home.path(), "A_KEY", "a'1").is_err());
        assert!(store(home.path(), "A_KEY", "a 1").is_err());
        let path = store(home.path(), "A_KEY", "a1").unwrap();
        store(home.path(), "B_KEY", "b2").unwrap();
        let mode = |p: &Path| crate::private::mode_of(&std::fs::metadata(p).unwrap());
        if cfg!(unix) {
            assert_eq!(mode(&path), Some(0o600));
            assert_eq!(mode(home.path()), Some(0o700));
        }
        assert_eq!(
            read_stored(&path).unwrap(),
            [
                ("A_KEY".to_owned(), "a1".to_owned()),
                ("B_KEY".to_owned(), "b2".to_owned())
            ]
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            assert_eq!(read_stored(&path), None);
        }
        assert_eq!(
            parse("KEY: 'v'\n# c\n\nB: \"w\"\nC: plain"),
            Ok(vec![
                ("KEY".into(), "v".into()),
                ("B".into(), "w".into()),
                ("C".into(), "plain".into()),
            ])
        );
        assert_eq!(parse("not a mapping"), Err(1));
        assert_eq!(parse("A: 1\n9BAD: 2"), Err(2));
    }

    #[test]
    fn a_missing_key_names_the_sources_checked() {
        let home = Path::new("/nonexistent");
        let off = missing(Lookup {
            home,
            name: "K_TEST",
            dotenv: false,
        });
        assert_eq!(
            off,
            "sources checked: the environment variable K_TEST, $DSH_HOME/.credentials.yaml (`dsh login`), $DSH_HOME/.env; ./.env is not read unless config.toml sets [credentials] dotenv = true"
        );
        let on = missing(Lookup {
            home,
            name: "K_TEST",
            dotenv: true,
        });
        assert!(on.ends_with("$DSH_HOME/.env, ./.env"), "{on}");
    }
}
