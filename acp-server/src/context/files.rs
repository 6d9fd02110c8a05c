//! What skills ([`super::skills`]) and custom commands
//! ([`super::custom_commands`]) share: where their Markdown files may be
//! found, how they are read — as instruction files are, through handles
//! that cannot leave the directory they are found in — and their front
//! matter.
//!
//! The workspace is hostile: a project's `.dsh/skills/…` is read beneath
//! the project root (a symlink may resolve only while it stays below it),
//! never from a hidden location (secrets), only as a regular UTF-8 file
//! under a size cap. The user's own files (`$DSH_HOME/skills`,
//! `$DSH_HOME/commands`) are read beneath that directory.
//!
//! Front matter is parsed by a small strict reader of `key: value` lines
//! (no YAML crate is in the dependency tree): see [`front_matter`].

use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Files larger than this are skipped (and logged).
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// Where a session's skills and commands come from.
#[derive(Debug, Clone)]
pub struct Roots {
    /// `$DSH_HOME`.
    pub home: PathBuf,
    /// The project root (as for instruction files: the first directory
    /// above cwd holding a root marker, else cwd).
    pub project: PathBuf,
    /// Secret locations never read (`Protected::hidden`).
    pub hidden: Vec<PathBuf>,
}

/// One directory searched: files are opened beneath `base`.
#[derive(Debug, Clone)]
pub struct Place {
    /// The directory files must stay beneath.
    pub base: PathBuf,
    /// The searched directory, relative to `base` (may be empty).
    pub dir: PathBuf,
    /// The user's own directory (in `$DSH_HOME`), not the project's.
    pub user: bool,
}

impl Place {
    /// The searched directory as the model and the user see it.
    pub fn path(&self) -> PathBuf {
        self.base.join(&self.dir)
    }
}

impl Roots {
    /// The places to search for `kind` (`skills` or `commands`), the
    /// project's first (`.dsh/<kind>`, then each of `compat`'s
    /// `<dir>/<kind>`), then the user's (`$DSH_HOME/<kind>`).
    pub fn places(&self, kind: &str, compat: &[&str]) -> Vec<Place> {
        let mut places: Vec<Place> = std::iter::once(".dsh")
            .chain(compat.iter().copied())
            .map(|dir| Place {
                base: self.project.clone(),
                dir: Path::new(dir).join(kind),
                user: false,
            })
            .collect();
        places.push(Place {
            base: self.home.clone(),
            dir: PathBuf::from(kind),
            user: true,
        });
        places
    }
}

/// The entry names of a place's directory, sorted; plain names only (no
/// dot files). Empty when it does not exist.
pub fn names(place: &Place) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(place.path()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| !name.starts_with('.') && !name.contains(['/', '\\']))
        .collect();
    names.sort();
    names
}

/// The text of `relative` (below the place's directory): `Ok(None)` when
/// there is no such file; `Err` (with the reason, for the log) when it must
/// not or cannot be read.
pub fn read(place: &Place, relative: &Path, hidden: &[PathBuf]) -> Result<Option<String>, String> {
    let base = dunce::canonicalize(&place.base).map_err(|err| err.to_string())?;
    let (file, real) = match crate::beneath::open_beneath(&base, &place.dir.join(relative)) {
        Ok(opened) => opened,
        Err(err) if err.is_not_found() => return Ok(None),
        Err(crate::beneath::FsError::Escapes(_)) => {
            return Err(format!(
                "a symlink that leads outside {}",
                place.base.display()
            ))
        }
        Err(err) => return Err(err.to_string()),
    };
    if !place.user && hidden.iter().any(|dir| real.starts_with(dir)) {
        return Err(format!(
            "it is {}, a hidden location (secrets are never read)",
            real.display()
        ));
    }
    let size = file.metadata().map_err(|err| err.to_string())?.len();
    if size > MAX_FILE_BYTES {
        return Err(format!("{size} bytes, over the cap of {MAX_FILE_BYTES}"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| err.to_string())?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "not UTF-8 text".to_owned())
}

/// A file's front matter (`key: value` pairs, in order) and body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parsed {
    /// The keys and their values.
    pub fields: Vec<(String, String)>,
    /// What follows the front matter.
    pub body: String,
}

impl Parsed {
    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }
}

/// Splits a Markdown file into its front matter and body. Without a
/// leading `---` line the whole text is the body.
///
/// The front matter is read strictly, as the subset of YAML these files
/// use: `key: value` lines (a value may be quoted with `"…"` or `'…'`),
/// `#` comments and blank lines; a value of `|` or `>` takes the indented
/// lines below it (kept as lines, or folded into one). Indented lines under
/// a key with no value (a nested list or map) are skipped: such keys get
/// an empty value. Anything else — a line without `key:`, a key given
/// twice, no closing `---` — is an error.
///
/// # Errors
/// What is wrong, with the line number.
pub fn front_matter(text: &str) -> Result<Parsed, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Ok(Parsed {
            fields: Vec::new(),
            body: text.to_owned(),
        });
    }
    let mut fields: Vec<(String, String)> = Vec::new();
    // A block scalar or nested value being read: its key's index and
    // whether it folds (`>`), keeps lines (`|`) or is skipped (nested).
    let mut block: Option<(usize, Option<bool>)> = None;
    let mut consumed = first.len();
    for (index, raw) in lines.enumerate() {
        let number = index + 2;
        consumed += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        if line.trim_end() == "---" {
            for (_, value) in &mut fields {
                *value = value.trim().to_owned();
            }
            return Ok(Parsed {
                fields,
                body: text[consumed..].to_owned(),
            });
        }
        if line.starts_with([' ', '\t']) {
            match block {
                Some((at, Some(fold))) => {
                    let value = &mut fields[at].1;
                    if !value.is_empty() {
                        value.push(if fold { ' ' } else { '\n' });
                    }
                    value.push_str(line.trim());
                    continue;
                }
                Some((_, None)) => continue,
                None if line.trim().is_empty() => continue,
                None => return Err(format!("line {number}: unexpected indentation")),
            }
        }
        block = None;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("line {number}: expected `key: value`"));
        };
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!("line {number}: {key:?} is not a plain key"));
        }
        if fields.iter().any(|(name, _)| name == key) {
            return Err(format!("line {number}: {key:?} is given twice"));
        }
        let value = value.trim();
        let value = match value {
            "" => {
                block = Some((fields.len(), None));
                String::new()
            }
            _ if value.starts_with('|') || value.starts_with('>') => {
                if !matches!(&value[1..], "" | "-" | "+") {
                    return Err(format!("line {number}: unsupported block scalar {value:?}"));
                }
                block = Some((fields.len(), Some(value.starts_with('>'))));
                String::new()
            }
            _ => unquote(value).map_err(|why| format!("line {number}: {why}"))?,
        };
        fields.push((key.to_owned(), value));
    }
    Err("the front matter has no closing `---` line".to_owned())
}

/// A scalar's text: quotes removed (`\"` and `\\` in double quotes, `''`
/// in single ones).
fn unquote(value: &str) -> Result<String, String> {
    let quoted =
        |quote: char| value.len() >= 2 && value.starts_with(quote) && value.ends_with(quote);
    if quoted('"') {
        let inner = &value[1..value.len() - 1];
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(other @ ('"' | '\\')) => out.push(other),
                    _ => return Err("unsupported escape in a double-quoted value".to_owned()),
                },
                '"' => return Err("a stray `\"` in a double-quoted value".to_owned()),
                c => out.push(c),
            }
        }
        Ok(out)
    } else if quoted('\'') {
        Ok(value[1..value.len() - 1].replace("''", "'"))
    } else if value.starts_with(['"', '\'']) {
        Err("an unterminated quoted value".to_owned())
    } else {
        Ok(value.to_owned())
    }
}

/// `text` with its whitespace runs collapsed to single spaces, cut to
/// `max_chars` characters (with `…`).
pub fn one_line(text: &str, max_chars: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max_chars {
        return line;
    }
    let mut cut: String = line.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_is_read_strictly() {
        let parsed = front_matter(
            "---\nname: pdf\ndescription: \"Fill PDF forms: \\\"fast\\\"\"\n# note\nallowed-tools:\n  - Read\n  - Bash\nlong: >\n  one\n  two\n---\nBody\n",
        )
        .unwrap();
        assert_eq!(parsed.get("name"), Some("pdf"));
        assert_eq!(parsed.get("description"), Some("Fill PDF forms: \"fast\""));
        assert_eq!(parsed.get("allowed-tools"), Some(""));
        assert_eq!(parsed.get("long"), Some("one two"));
        assert_eq!(parsed.body, "Body\n");

        let keep = front_matter("---\nbody: |\n  a\n  b\n---\n").unwrap();
        assert_eq!(keep.get("body"), Some("a\nb"));
        assert_eq!(
            front_matter("no front matter\n---\n").unwrap().body,
            "no front matter\n---\n"
        );
        assert_eq!(
            front_matter("---\r\nname: x\r\n---\r\nhi").unwrap().body,
            "hi"
        );
        assert_eq!(
            front_matter("---\nname: 'it''s'\n---\n")
                .unwrap()
                .get("name"),
            Some("it's")
        );

        for bad in [
            "---\nname: x\n",
            "---\njust words\n---\n",
            "---\nname: a\nname: b\n---\n",
            "---\n  indented: x\n---\n",
            "---\nname: \"open\n---\n",
            "---\nbad key: x\n---\n",
            "---\nx: |2\n  a\n---\n",
        ] {
            assert!(front_matter(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn one_line_collapses_and_cuts() {
        assert_eq!(one_line("a\n  b\tc", 10), "a b c");
        assert_eq!(one_line("abcdef", 4), "abc…");
    }
}
