//! Workspace instructions: AGENTS.md (and CLAUDE.md, and their `.local`
//! overlays) handed to the model as user-role context, as the seeds'
//! `dsh-agent-instructions` does.
//!
//! - **Baseline**, at every turn's start: `$DSH_HOME/AGENTS.md`, then for
//!   each directory from the project root (the first directory above cwd
//!   holding a root marker, else cwd) down to cwd, the base candidates then
//!   the local ones. Files already given are checked for changes: a changed
//!   one comes again as "Updated instructions from:", a deleted one as
//!   "Instructions removed:". A session's first turn gets them all.
//! - **Nested**, after tools: a tool that touched a path in a subdirectory
//!   of cwd brings that directory's instruction files (and those of the
//!   directories between), once per file per session.
//!
//! Each batch is one `<system-reminder>` block within `max_bytes`
//! (broadest files dropped first, then the last one cut on a UTF-8
//! boundary, with a marker saying so), recorded as a `context/instructions`
//! event: the history places it, and a reload rebuilds the same
//! conversation. The workspace is hostile: only regular files are read, a
//! symlink must stay inside the project root, files over `max_source_bytes`
//! are skipped (and logged), and nothing is run.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use dsh_protocol::log::{InstructionFile, InstructionStatus};
use serde::Deserialize;

/// `[instructions]` in config.toml (the seed's names).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InstructionSettings {
    /// Entries that mark the project root while walking up from cwd.
    pub project_root_markers: Vec<String>,
    /// Base candidates per directory, in order; every existing one loads.
    pub instruction_file_candidates: Vec<String>,
    /// Overlay candidates loaded after the base ones; empty disables.
    pub local_instruction_file_candidates: Vec<String>,
    /// UTF-8 byte cap per rendered batch; 0 disables instructions.
    pub max_bytes: usize,
    /// Files larger than this are skipped.
    pub max_source_bytes: u64,
}

impl Default for InstructionSettings {
    fn default() -> Self {
        InstructionSettings {
            project_root_markers: vec![".git".to_owned()],
            instruction_file_candidates: vec!["AGENTS.md".to_owned(), "CLAUDE.md".to_owned()],
            local_instruction_file_candidates: vec![
                "AGENTS.local.md".to_owned(),
                "CLAUDE.local.md".to_owned(),
            ],
            max_bytes: 64 * 1024,
            max_source_bytes: 1024 * 1024,
        }
    }
}

const INTRO: &str = "The following workspace instructions may be relevant to your work. \
Follow them where they apply; the user's explicit requests take precedence.";

/// A batch to record: the text the model sees and the files it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The `<system-reminder>` block.
    pub text: String,
    /// The files and what happened to each.
    pub files: Vec<InstructionFile>,
}

/// One file read for a batch.
struct Source {
    path: String,
    text: String,
    fingerprint: String,
    updated: bool,
}

/// Instruction files already given to the model in a session, with the
/// fingerprint of what it was given (folded from the log).
pub type Known = BTreeMap<String, String>;

/// The baseline batch for a turn's start: files new to the session and
/// files that changed or went away. `None` when there is nothing to say.
/// Blocking (reads files).
pub fn baseline(
    settings: &InstructionSettings,
    home: &Path,
    cwd: &Path,
    known: &Known,
    hidden: &[PathBuf],
) -> Option<Batch> {
    if settings.max_bytes == 0 {
        return None;
    }
    let root = project_root(settings, cwd);
    let places = Places {
        root: &root,
        home,
        hidden,
    };
    let mut candidates = vec![home.join("AGENTS.md")];
    for dir in dirs_between(&root, cwd) {
        candidates.extend(files_in(settings, &dir));
    }
    let (mut sources, mut seen) = (Vec::new(), Vec::new());
    for path in &candidates {
        collect(settings, path, &places, known, &mut seen, &mut sources);
    }
    // Files given earlier and not among the candidates (nested ones):
    // checked for changes too.
    for path in known.keys() {
        let path = PathBuf::from(path);
        if !candidates.contains(&path) {
            collect(settings, &path, &places, known, &mut seen, &mut sources);
        }
    }
    let removed: Vec<String> = known
        .keys()
        .filter(|path| !Path::new(path).exists())
        .cloned()
        .collect();
    render(settings.max_bytes, sources, removed)
}

/// The batch for paths tools touched: instruction files of their
/// directories below cwd not given yet. Blocking.
pub fn nested(
    settings: &InstructionSettings,
    home: &Path,
    cwd: &Path,
    touched: &[PathBuf],
    known: &Known,
    hidden: &[PathBuf],
) -> Option<Batch> {
    if settings.max_bytes == 0 {
        return None;
    }
    let root = project_root(settings, cwd);
    let mut candidates: Vec<PathBuf> = Vec::new();
    for path in touched.iter().take(64) {
        let Ok(below) = path.strip_prefix(cwd) else {
            continue;
        };
        // The directories from just below cwd down to the path's own.
        let mut dir = cwd.to_path_buf();
        let parts: Vec<_> = below.components().collect();
        let dirs = if path.is_dir() {
            parts.len()
        } else {
            parts.len().saturating_sub(1)
        };
        for part in parts.iter().take(dirs) {
            dir.push(part);
            for file in files_in(settings, &dir) {
                if !candidates.contains(&file) {
                    candidates.push(file);
                }
            }
        }
    }
    let places = Places {
        root: &root,
        home,
        hidden,
    };
    let (mut sources, mut seen) = (Vec::new(), Vec::new());
    for path in &candidates {
        collect(settings, path, &places, known, &mut seen, &mut sources);
    }
    render(settings.max_bytes, sources, Vec::new())
}

/// The first directory from cwd up holding a root marker; cwd if none.
pub fn project_root(settings: &InstructionSettings, cwd: &Path) -> PathBuf {
    cwd.ancestors()
        .find(|dir| {
            settings
                .project_root_markers
                .iter()
                .filter(|marker| valid_name(marker))
                .any(|marker| dir.join(marker).symlink_metadata().is_ok())
        })
        .unwrap_or(cwd)
        .to_path_buf()
}

/// `root`, then each directory below it down to `cwd`.
fn dirs_between(root: &Path, cwd: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = cwd
        .ancestors()
        .take_while(|dir| dir.starts_with(root))
        .map(Path::to_path_buf)
        .collect();
    dirs.reverse();
    dirs
}

/// The candidate paths of one directory, base then local.
fn files_in(settings: &InstructionSettings, dir: &Path) -> Vec<PathBuf> {
    settings
        .instruction_file_candidates
        .iter()
        .chain(&settings.local_instruction_file_candidates)
        .filter(|name| valid_name(name))
        .map(|name| dir.join(name))
        .collect()
}

/// A plain file name: no separators, not `.` or `..`.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['/', '\\']) && name != "." && name != ".."
}

/// Where instruction files may come from.
#[derive(Clone, Copy)]
struct Places<'a> {
    /// The project root: workspace files are read below it.
    root: &'a Path,
    /// `$DSH_HOME`, for the global file.
    home: &'a Path,
    /// Secret locations never read.
    hidden: &'a [PathBuf],
}

/// Reads one candidate into `sources` when it is new or changed; skips
/// (with a log line) what must not be read.
fn collect(
    settings: &InstructionSettings,
    path: &Path,
    places: &Places<'_>,
    known: &Known,
    seen: &mut Vec<(PathBuf, String)>,
    sources: &mut Vec<Source>,
) {
    let key = path.to_string_lossy().into_owned();
    let text = match read(settings, path, places) {
        Ok(Some(text)) => text,
        Ok(None) => return,
        Err(why) => {
            tracing::warn!(path = %path.display(), "instruction file skipped: {why}");
            return;
        }
    };
    // Per directory, a file whose trimmed content equals an earlier one's
    // is the same instructions (AGENTS.md and a CLAUDE.md copy), whether
    // or not the earlier one is given again now.
    let dir = path.parent().unwrap_or(path).to_path_buf();
    if seen
        .iter()
        .any(|(other, earlier)| *other == dir && earlier.trim() == text.trim())
    {
        return;
    }
    seen.push((dir, text.clone()));
    let fingerprint = fingerprint(&text);
    let updated = match known.get(&key) {
        Some(given) if *given == fingerprint => return,
        Some(_) => true,
        None => false,
    };
    sources.push(Source {
        path: key,
        text,
        fingerprint,
        updated,
    });
}

/// The file's text; `None` when there is no such file. Only regular files
/// are read, each opened once and checked on that handle: a workspace file
/// below the project root (a symlink may resolve only while it stays
/// below it), the global one as `$DSH_HOME/AGENTS.md` itself (no symlink
/// at all); never a file whose real location is hidden.
fn read(
    settings: &InstructionSettings,
    path: &Path,
    places: &Places<'_>,
) -> Result<Option<String>, String> {
    let Places { root, home, hidden } = *places;
    let opened = if path == home.join("AGENTS.md") {
        let global = dunce::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        crate::beneath::open_read(&global).map(|file| (file, global))
    } else {
        let Ok(relative) = path.strip_prefix(root) else {
            return Err("outside the project root".to_owned());
        };
        let root = dunce::canonicalize(root).map_err(|err| err.to_string())?;
        crate::beneath::open_beneath(&root, relative)
    };
    let (file, real) = match opened {
        Ok(opened) => opened,
        Err(err) if err.is_not_found() => return Ok(None),
        Err(crate::beneath::FsError::Escapes(_)) => {
            return Err("a symlink that leads outside the project".to_owned())
        }
        Err(err) => return Err(err.to_string()),
    };
    if path != home.join("AGENTS.md") && hidden.iter().any(|dir| real.starts_with(dir)) {
        return Err(format!(
            "it is {}, a hidden location (secrets are never read)",
            real.display()
        ));
    }
    let meta = file.metadata().map_err(|err| err.to_string())?;
    if meta.len() > settings.max_source_bytes {
        return Err(format!(
            "{} bytes, over max_source_bytes ({})",
            meta.len(),
            settings.max_source_bytes
        ));
    }
    let mut bytes = Vec::new();
    file.take(settings.max_source_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| err.to_string())?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "not UTF-8 text".to_owned())
}

/// FNV-1a over the content, as hex: enough to notice a change.
fn fingerprint(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Renders a batch within `max_bytes`: the broadest files are dropped
/// first, then the most specific one left is cut on a UTF-8 boundary.
fn render(max_bytes: usize, sources: Vec<Source>, removed: Vec<String>) -> Option<Batch> {
    if sources.is_empty() && removed.is_empty() {
        return None;
    }
    let mut kept: Vec<&Source> = sources.iter().collect();
    let mut omitted: Vec<&Source> = Vec::new();
    let mut cut: Option<(usize, usize)> = None;
    loop {
        let text = compose(&kept, cut.map(|(_, to)| to), &omitted, &removed, max_bytes);
        if text.len() <= max_bytes {
            break;
        }
        if kept.len() > 1 {
            omitted.push(kept.remove(0));
            continue;
        }
        let Some(last) = kept.first() else {
            break;
        };
        // The largest prefix that fits, on a character boundary.
        let (mut low, mut high) = (0usize, last.text.len());
        while low < high {
            let mid = (low + high).div_ceil(2);
            let mid = floor_char_boundary(&last.text, mid);
            let fits = compose(&kept, Some(mid), &omitted, &removed, max_bytes).len() <= max_bytes;
            if fits {
                if mid == low {
                    break;
                }
                low = mid;
            } else {
                high = mid.saturating_sub(1).max(low);
                if high == low {
                    break;
                }
            }
        }
        cut = Some((last.text.len(), floor_char_boundary(&last.text, low)));
        if compose(&kept, cut.map(|(_, to)| to), &omitted, &removed, max_bytes).len() > max_bytes {
            // Not even the frame fits: leave everything out.
            omitted.push(kept.remove(0));
            cut = None;
        }
        break;
    }
    let text = compose(&kept, cut.map(|(_, to)| to), &omitted, &removed, max_bytes);
    let mut files = Vec::new();
    for source in &omitted {
        files.push(InstructionFile {
            path: source.path.clone(),
            status: InstructionStatus::Omitted,
            fingerprint: Some(source.fingerprint.clone()),
        });
    }
    for source in &kept {
        let status = if cut.is_some() {
            InstructionStatus::Truncated
        } else if source.updated {
            InstructionStatus::Updated
        } else {
            InstructionStatus::Loaded
        };
        files.push(InstructionFile {
            path: source.path.clone(),
            status,
            fingerprint: Some(source.fingerprint.clone()),
        });
    }
    files.extend(removed.iter().map(|path| InstructionFile {
        path: path.clone(),
        status: InstructionStatus::Removed,
        fingerprint: None,
    }));
    Some(Batch { text, files })
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The block: intro, one section per file (the last one cut to `cut`
/// bytes), removals, and the budget marker when anything was left out.
fn compose(
    kept: &[&Source],
    cut: Option<usize>,
    omitted: &[&Source],
    removed: &[String],
    max_bytes: usize,
) -> String {
    let mut text = format!("<system-reminder>\n{INTRO}\n");
    for (at, source) in kept.iter().enumerate() {
        let body = match cut {
            Some(to) if at + 1 == kept.len() => &source.text[..to],
            _ => source.text.trim(),
        };
        let label = if source.updated {
            "Updated instructions from"
        } else {
            "Instructions from"
        };
        text.push_str(&format!(
            "\n{label}: {}\n{}\n",
            source.path,
            body.trim_end()
        ));
    }
    for path in removed {
        text.push_str(&format!("\nInstructions removed: {path}\n"));
    }
    if !omitted.is_empty() || cut.is_some() {
        let mut marker = format!("\nWorkspace instruction budget {max_bytes} bytes:");
        if !omitted.is_empty() {
            let names: Vec<&str> = omitted.iter().map(|s| s.path.as_str()).collect();
            marker.push_str(&format!(" omitted {}", names.join(", ")));
        }
        if let (Some(to), Some(last)) = (cut, kept.last()) {
            if !omitted.is_empty() {
                marker.push(';');
            }
            marker.push_str(&format!(
                " truncated {} from {} to {to} bytes",
                last.path,
                last.text.len()
            ));
        }
        text.push_str(&marker);
        text.push('\n');
    }
    text.push_str("</system-reminder>");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(path: &str, text: &str) -> Source {
        Source {
            path: path.to_owned(),
            text: text.to_owned(),
            fingerprint: fingerprint(text),
            updated: false,
        }
    }

    #[test]
    fn over_budget_the_broadest_go_first_then_the_last_is_cut() {
        let sources = vec![
            source("/home/AGENTS.md", &"g".repeat(300)),
            source("/p/AGENTS.md", &"p".repeat(300)),
            source("/p/sub/AGENTS.md", &"é".repeat(400)),
        ];
        let batch = render(700, sources, Vec::new()).unwrap();
        assert!(batch.text.len() <= 700, "{}", batch.text.len());
        let statuses: Vec<_> = batch
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.status))
            .collect();
        assert_eq!(
            statuses,
            [
                ("/home/AGENTS.md", InstructionStatus::Omitted),
                ("/p/AGENTS.md", InstructionStatus::Omitted),
                ("/p/sub/AGENTS.md", InstructionStatus::Truncated),
            ]
        );
        assert!(batch.text.contains(
            "Workspace instruction budget 700 bytes: omitted /home/AGENTS.md, /p/AGENTS.md; truncated /p/sub/AGENTS.md from 800 to"
        ), "{}", batch.text);
        assert!(batch.text.ends_with("</system-reminder>"));
    }

    #[test]
    fn one_file_over_budget_is_cut_to_fit() {
        for max in [300, 599, 600, 601, 777] {
            let batch = render(
                max,
                vec![source(
                    "/tmp/.tmpAbCdEf/proj/AGENTS.md",
                    &"rule. ".repeat(200),
                )],
                Vec::new(),
            )
            .unwrap();
            assert!(
                batch.text.len() <= max,
                "{max}: {} bytes\n{}",
                batch.text.len(),
                batch.text
            );
        }
    }

    #[test]
    fn within_budget_everything_is_there_in_order() {
        let batch = render(
            10_000,
            vec![
                source("/p/AGENTS.md", "root rules"),
                source("/p/AGENTS.local.md", "mine"),
            ],
            vec!["/p/old/AGENTS.md".to_owned()],
        )
        .unwrap();
        let root = batch
            .text
            .find("Instructions from: /p/AGENTS.md\nroot rules")
            .unwrap();
        let local = batch
            .text
            .find("Instructions from: /p/AGENTS.local.md\nmine")
            .unwrap();
        assert!(root < local);
        assert!(batch
            .text
            .contains("Instructions removed: /p/old/AGENTS.md"));
        assert!(!batch.text.contains("budget"));
    }
}
