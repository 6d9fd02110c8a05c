//! `glob` and `grep`, in-process with ripgrep's crates; the walk never
//! follows links, never enters VCS directories (`.git`, `.hg`, `.svn`,
//! `.jj`, `.bzr`) or the secret locations, and stops when the turn is
//! cancelled.
//!
//! `glob` (the catalog's semantics): files only, hidden and ignored ones
//! included (`[tools.glob] respect_ignore_files = true` leaves out what
//! `.gitignore`/`.ignore` files ignore), newest first. Over 100 matches it
//! returns a sample of 100 spread over the search root's top-level entries
//! — round-robin over the top-level directories in name order (the files
//! directly in the root count as one entry, first), each entry's newest
//! matches first, listed newest first — says it sampled, and saves the
//! complete sorted list in the call's spill file. It collects at most
//! [`MAX_COLLECTED`] paths (memory stays bounded in huge trees) and says so
//! when it stops there.
//!
//! `grep`: ripgrep regular expressions, `.gitignore` respected, matching
//! lines with their numbers grouped by file; the first 250 matches inline,
//! the complete list (up to the spill file's 64 MiB, then the search
//! stops and says so) saved in the call's spill file.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use dsh_protocol::tool::{FileLocation, ToolKind, ToolView};
use dsh_protocol::ErrorCode;
use grep::regex::RegexMatcherBuilder;
use grep::searcher::{BinaryDetection, SearcherBuilder, Sink, SinkMatch};
use serde::Deserialize;

use super::spill::{SpillTarget, SpillWriter};
use super::{display_path, ToolEnv};
use dsh_protocol::tool::ToolOutcome;

pub const GLOB_DESCRIPTION: &str = "Find files whose paths match a glob pattern. Returns matching file paths only, never directories; includes hidden and ignored files but excludes VCS metadata directories. Returns at most 100 paths in modification-time order; if there are more, it instead returns 100 paths sampled from the top-level entries, says that it sampled, and reports where the complete sorted list was saved. This tool does not enumerate directory entries.";
pub const GREP_DESCRIPTION: &str = "Search file contents with ripgrep regular expressions. Returns matching lines with line numbers, grouped by file. The first 250 matches are returned directly; when the result reaches the cap, it reports where the complete match list was saved. For surrounding context, use read on the matching files.";

const MAX_PATHS: usize = 100;
const MAX_MATCHES: usize = 250;
const MAX_LOCATIONS: usize = 50;
const MAX_LINE_CHARS: usize = 300;
/// Matching paths `glob` collects at most (about 200 bytes each).
const MAX_COLLECTED: usize = 200_000;
const VCS_DIRS: &[&str] = &[".git", ".hg", ".svn", ".jj", ".bzr"];

#[derive(Debug, Deserialize)]
pub struct GlobArgs {
    pub pattern: String,
    #[serde(default)]
    pub path: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct GrepArgs {
    pub pattern: String,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub include: Option<String>,
}

pub fn present_glob(args: &GlobArgs, root: &Path, cwd: &Path) -> ToolView {
    ToolView {
        title: format!("Find '{}' in {}", args.pattern, display_path(root, cwd)),
        kind: Some(ToolKind::Search),
        ..ToolView::default()
    }
}

pub fn present_grep(args: &GrepArgs, root: &Path, cwd: &Path) -> ToolView {
    let within = match &args.include {
        Some(include) => format!(" ({include})"),
        None => String::new(),
    };
    ToolView {
        title: format!(
            "Search '{}' in {}{within}",
            args.pattern,
            display_path(root, cwd)
        ),
        kind: Some(ToolKind::Search),
        ..ToolView::default()
    }
}

/// A matcher for file paths: a pattern without `/` matches the file name at
/// any depth, one with `/` matches the path relative to the search root.
struct PathGlob {
    matcher: globset::GlobMatcher,
    basename: bool,
}

impl PathGlob {
    fn new(pattern: &str) -> Result<PathGlob, String> {
        let basename = !pattern.contains('/');
        let glob = globset::GlobBuilder::new(pattern.trim_start_matches("./"))
            .literal_separator(true)
            .build()
            .map_err(|err| format!("Invalid glob pattern {pattern:?}: {err}"))?;
        Ok(PathGlob {
            matcher: glob.compile_matcher(),
            basename,
        })
    }

    fn matches(&self, relative: &Path) -> bool {
        if self.basename {
            relative
                .file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        } else {
            self.matcher.is_match(relative)
        }
    }
}

/// Walks `root` without following links, hidden files included, skipping
/// VCS directories and the secret locations (`secrets`: never listed or
/// searched, whatever the mode; a `read` of one is asked about in
/// full-access) except the calling session's spill directory (the last of
/// `secrets`' exemptions, [`Secrets::of`]); `respect_ignore`: leaves out
/// what `.gitignore`, `.ignore` and git's excludes ignore (with or without
/// a repository).
fn walker(root: &Path, secrets: Secrets, respect_ignore: bool) -> ignore::Walk {
    let mut builder = ignore::WalkBuilder::new(root);
    if respect_ignore {
        builder.hidden(false).require_git(false);
    } else {
        builder.standard_filters(false);
    }
    builder.follow_links(false).filter_entry(move |entry| {
        let vcs = entry.file_type().is_some_and(|t| t.is_dir())
            && VCS_DIRS.iter().any(|d| entry.file_name() == *d);
        !vcs && !secrets.hides(entry.path())
    });
    builder.build()
}

/// The secret locations a walk skips, and the one it does not: the
/// calling session's spill directory (which is in `$DSH_HOME`).
struct Secrets {
    hidden: Vec<PathBuf>,
    spill_dirs: Vec<PathBuf>,
}

impl Secrets {
    fn of(env: &ToolEnv<'_>) -> Secrets {
        let mut spill_dirs = vec![env.spill_dir.to_path_buf()];
        // As canonical as the secret locations are; its own name kept (a
        // link there is not it).
        if let (Some(home), Some(name)) = (env.spill_dir.parent(), env.spill_dir.file_name()) {
            if let Ok(home) = dunce::canonicalize(home) {
                spill_dirs.push(home.join(name));
            }
        }
        Secrets {
            hidden: env.hidden.to_vec(),
            spill_dirs,
        }
    }

    fn hides(&self, path: &Path) -> bool {
        self.hidden.iter().any(|dir| path.starts_with(dir))
            && !self.spill_dirs.iter().any(|dir| path.starts_with(dir))
    }
}

/// [`display_path`] for many paths: the working directory is made canonical
/// once.
struct Shown {
    cwd: PathBuf,
}

impl Shown {
    fn new(cwd: &Path) -> Shown {
        Shown {
            cwd: dunce::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf()),
        }
    }

    fn path(&self, path: &Path) -> String {
        display_path(path, &self.cwd)
    }
}

/// What a glob walk found: the matches newest first (ties by path).
struct Found {
    paths: Vec<(SystemTime, PathBuf)>,
    /// It stopped at [`MAX_COLLECTED`].
    stopped: bool,
}

fn walk_glob(
    root: &Path,
    matcher: &PathGlob,
    secrets: Secrets,
    respect_ignore: bool,
    cancel: &tokio_util::sync::CancellationToken,
) -> Found {
    let mut paths: Vec<(SystemTime, PathBuf)> = Vec::new();
    let mut stopped = false;
    for entry in walker(root, secrets, respect_ignore).filter_map(Result::ok) {
        if cancel.is_cancelled() {
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let relative = entry.path().strip_prefix(root).unwrap_or(entry.path());
        if matcher.matches(relative) {
            if paths.len() == MAX_COLLECTED {
                stopped = true;
                break;
            }
            let modified = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            paths.push((modified, entry.into_path()));
        }
    }
    paths.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    Found { paths, stopped }
}

/// The indices of [`MAX_PATHS`] of `paths` (newest first) spread over the
/// top-level entries of `root`: round-robin over the top-level
/// directories in name order, the files directly in `root` together as
/// one entry before them, each entry's newest first; returned in
/// ascending order (newest first again).
fn sample(paths: &[(SystemTime, PathBuf)], root: &Path) -> Vec<usize> {
    let mut groups: BTreeMap<OsString, Vec<usize>> = BTreeMap::new();
    for (index, (_, path)) in paths.iter().enumerate() {
        // A file directly in the root: the empty key (the root's group).
        let top = path
            .strip_prefix(root)
            .ok()
            .filter(|relative| relative.components().nth(1).is_some())
            .and_then(|relative| relative.components().next())
            .map(|first| first.as_os_str().to_owned())
            .unwrap_or_default();
        groups.entry(top).or_default().push(index);
    }
    let mut chosen = Vec::with_capacity(MAX_PATHS);
    let mut round = 0;
    while chosen.len() < MAX_PATHS.min(paths.len()) {
        for group in groups.values() {
            if let Some(index) = group.get(round) {
                chosen.push(*index);
                if chosen.len() == MAX_PATHS {
                    break;
                }
            }
        }
        round += 1;
    }
    chosen.sort_unstable();
    chosen
}

pub async fn glob(args: &GlobArgs, root: &Path, env: &ToolEnv<'_>) -> ToolOutcome {
    let matcher = match PathGlob::new(&args.pattern) {
        Ok(matcher) => matcher,
        Err(message) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    if !root.is_dir() {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            format!("{} is not a directory.", root.display()),
        );
    }
    let owned = root.to_path_buf();
    let cancel = env.cancel.clone();
    let secrets = Secrets::of(env);
    let respect_ignore = env.glob.respect_ignore_files;
    let shown = Shown::new(env.cwd);
    let target = SpillTarget::new(env, "txt");
    let (output, listed) = tokio::task::spawn_blocking(move || {
        let found = walk_glob(&owned, &matcher, secrets, respect_ignore, &cancel);
        glob_output(&found, &owned, &shown, &target)
    })
    .await
    .unwrap_or_default();
    let locations = listed
        .into_iter()
        .take(MAX_LOCATIONS)
        .map(|path| FileLocation {
            path: path.display().to_string(),
            line: None,
        })
        .collect();
    ToolOutcome::ok(
        output,
        ToolView {
            locations,
            ..ToolView::default()
        },
    )
}

/// The model's text and the paths it lists; over the cap, the complete
/// list goes to the spill file (blocking).
fn glob_output(
    found: &Found,
    root: &Path,
    shown: &Shown,
    target: &SpillTarget,
) -> (String, Vec<PathBuf>) {
    let total = found.paths.len();
    let mut output = String::new();
    if total == 0 {
        output.push_str("No files found.\n");
        return (output, Vec::new());
    }
    let listed: Vec<PathBuf> = if total <= MAX_PATHS {
        found.paths.iter().map(|(_, path)| path.clone()).collect()
    } else {
        sample(&found.paths, root)
            .into_iter()
            .map(|index| found.paths[index].1.clone())
            .collect()
    };
    for path in &listed {
        output.push_str(&shown.path(path));
        output.push('\n');
    }
    let stopped = if found.stopped {
        format!(
            " (the search stopped at {MAX_COLLECTED} matching files; narrow the pattern or the path for the rest)"
        )
    } else {
        String::new()
    };
    if total > MAX_PATHS {
        let mut writer = SpillWriter::create(target);
        for (_, path) in &found.paths {
            let mut line = shown.path(path);
            line.push('\n');
            if !writer.write(line.as_bytes()) {
                break;
            }
        }
        output.push_str(&format!(
            "(This is a sample of {MAX_PATHS} of {total} matching files{stopped}, spread over the top-level entries of the search path and listed newest first.)\n{}\n",
            writer.finish().sentence("list of matching files, sorted by modification time (newest first),")
        ));
    }
    (output, listed)
}

/// A grep's matches as they are found: the list formatted (grouped by
/// file), inline up to [`MAX_MATCHES`], then into the spill file, which
/// holds the complete list.
struct Matches {
    shown: Shown,
    total: usize,
    /// The first [`MAX_MATCHES`] matches, formatted: the model's text.
    list: String,
    /// The file of the last match.
    last_file: Option<PathBuf>,
    locations: Vec<FileLocation>,
    target: SpillTarget,
    spill: Option<SpillWriter>,
    /// The spill file is full (or failed): the search stopped.
    stopped: bool,
}

impl Matches {
    /// Takes a match; false when the search must stop.
    fn add(&mut self, path: &Path, line: u64, bytes: &[u8]) -> bool {
        self.total += 1;
        let mut piece = String::new();
        if self.last_file.as_deref() != Some(path) {
            if self.last_file.is_some() {
                piece.push('\n');
            }
            piece.push_str(&self.shown.path(path));
            piece.push('\n');
            self.last_file = Some(path.to_path_buf());
        }
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let chars = text.chars().count();
        if chars > MAX_LINE_CHARS {
            let cut: String = text.chars().take(MAX_LINE_CHARS).collect();
            piece.push_str(&format!("{line:>6}: {cut}… [{chars} characters]\n"));
        } else {
            piece.push_str(&format!("{line:>6}: {text}\n"));
        }
        if self.total <= MAX_MATCHES {
            self.list.push_str(&piece);
            if self.locations.len() < MAX_LOCATIONS {
                self.locations.push(FileLocation {
                    path: path.display().to_string(),
                    line: Some(line as u32),
                });
            }
            return true;
        }
        let (target, list) = (&self.target, &self.list);
        let spill = self.spill.get_or_insert_with(|| {
            let mut spill = SpillWriter::create(target);
            spill.write(list.as_bytes());
            spill
        });
        if !spill.write(piece.as_bytes()) {
            self.stopped = true;
        }
        !self.stopped
    }

    /// The model's text.
    fn finish(self) -> (String, Vec<FileLocation>) {
        let mut output = self.list;
        if self.total == 0 {
            output.push_str("No matches found.\n");
        }
        if let Some(spill) = self.spill {
            let counted = if self.stopped {
                format!(
                    "the first {MAX_MATCHES} matches are shown; the search stopped after {} matches",
                    self.total
                )
            } else {
                format!(
                    "the first {MAX_MATCHES} of {} matches are shown",
                    self.total
                )
            };
            output.push_str(&format!(
                "\n(The result reached the cap: {counted}. {})\n",
                spill.finish().sentence("match list")
            ));
        }
        (output, self.locations)
    }
}

struct Collect<'a> {
    path: &'a Path,
    matches: &'a mut Matches,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _searcher: &grep::searcher::Searcher,
        found: &SinkMatch<'_>,
    ) -> Result<bool, Self::Error> {
        Ok(self
            .matches
            .add(self.path, found.line_number().unwrap_or(0), found.bytes()))
    }
}

pub async fn grep(args: &GrepArgs, root: &Path, env: &ToolEnv<'_>) -> ToolOutcome {
    let matcher = match RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
    {
        Ok(matcher) => matcher,
        Err(err) => {
            return ToolOutcome::failed(
                ErrorCode::InvalidToolArgs,
                format!("Invalid regular expression {:?}: {err}", args.pattern),
            )
        }
    };
    let include = match args.include.as_deref().map(PathGlob::new).transpose() {
        Ok(include) => include,
        Err(message) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    if !root.exists() {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            format!("{} does not exist.", root.display()),
        );
    }
    let root = root.to_path_buf();
    let cancel = env.cancel.clone();
    let secrets = Secrets::of(env);
    let mut matches = Matches {
        shown: Shown::new(env.cwd),
        total: 0,
        list: String::new(),
        last_file: None,
        locations: Vec::new(),
        target: SpillTarget::new(env, "txt"),
        spill: None,
        stopped: false,
    };
    let (output, locations) = tokio::task::spawn_blocking(move || {
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        for entry in walker(&root, secrets, true).filter_map(Result::ok) {
            if cancel.is_cancelled() || matches.stopped {
                break;
            }
            // Its own spill file is never searched (it would match itself
            // as it grows).
            if !entry.file_type().is_some_and(|t| t.is_file()) || matches.target.is(entry.path()) {
                continue;
            }
            let relative = entry.path().strip_prefix(&root).unwrap_or(entry.path());
            if include.as_ref().is_some_and(|glob| {
                !glob.matches(if relative.as_os_str().is_empty() {
                    entry.path()
                } else {
                    relative
                })
            }) {
                continue;
            }
            let path = entry.path();
            let sink = Collect {
                path,
                matches: &mut matches,
            };
            if let Err(err) = searcher.search_path(&matcher, path, sink) {
                tracing::debug!(path = %path.display(), %err, "grep skipped a file");
            }
        }
        matches.finish()
    })
    .await
    .unwrap_or_default();
    ToolOutcome::ok(
        output,
        ToolView {
            locations,
            ..ToolView::default()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the calling session's spill directory is exempt from the
    /// secret locations: not `$DSH_HOME`, not other sessions' spills.
    #[test]
    fn only_the_sessions_own_spill_directory_is_searched() {
        let secrets = Secrets {
            hidden: vec![PathBuf::from("/h/.dsh"), PathBuf::from("/h/.ssh")],
            spill_dirs: vec![PathBuf::from("/h/.dsh/spill/s1")],
        };
        assert!(!secrets.hides(Path::new("/h/.dsh/spill/s1/call-a.txt")));
        assert!(!secrets.hides(Path::new("/h/.dsh/spill/s1")));
        assert!(secrets.hides(Path::new("/h/.dsh/spill/s10/call-a.txt")));
        assert!(secrets.hides(Path::new("/h/.dsh/spill/s2")));
        assert!(secrets.hides(Path::new("/h/.dsh/sessions/s1.jsonl")));
        assert!(secrets.hides(Path::new("/h/.ssh/id")));
        assert!(!secrets.hides(Path::new("/w/a.txt")));
    }

    /// The sample takes each top-level entry's newest matches in turn, the
    /// entries in name order, and keeps the newest-first order.
    #[test]
    fn the_sample_is_spread_over_the_top_level_entries() {
        let root = Path::new("/r");
        let at = |secs: u64| SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        // Newest first: 150 in `a/`, then 3 in `b/`, then 150 files at the
        // root (one entry).
        let mut paths: Vec<(SystemTime, PathBuf)> = (0..150)
            .map(|i| (at(1000 - i), root.join(format!("a/{i}"))))
            .collect();
        paths.extend((0..3).map(|i| (at(500 - i), root.join(format!("b/x/{i}")))));
        paths.extend((0..150).map(|i| (at(300 - i), root.join(format!("top{i}.rs")))));
        let chosen = sample(&paths, root);
        assert_eq!(chosen.len(), MAX_PATHS);
        assert!(chosen.windows(2).all(|w| w[0] < w[1]));
        let picked: Vec<&Path> = chosen.iter().map(|i| paths[*i].1.as_path()).collect();
        assert_eq!(picked.iter().filter(|p| p.starts_with("/r/b")).count(), 3);
        // `a/` gives its 48 newest, the root's files (first in a round)
        // their 49 newest.
        assert_eq!(picked[0], Path::new("/r/a/0"));
        assert_eq!(picked[47], Path::new("/r/a/47"));
        assert_eq!(picked[48], Path::new("/r/b/x/0"));
        assert_eq!(picked[51], Path::new("/r/top0.rs"));
        assert_eq!(picked[99], Path::new("/r/top48.rs"));
        assert_eq!(sample(&paths, root), chosen, "deterministic");
    }
}
