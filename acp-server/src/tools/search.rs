//! `glob` and `grep`, in-process with ripgrep's crates: `.gitignore` is
//! respected (with or without a git repository), VCS directories are
//! skipped, results are capped (100 paths, 250 matches) with a count of the
//! rest, and the walk stops when the turn is cancelled.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use dsh_protocol::tool::{FileLocation, ToolKind, ToolView};
use dsh_protocol::ErrorCode;
use grep::regex::RegexMatcherBuilder;
use grep::searcher::{BinaryDetection, SearcherBuilder, Sink, SinkMatch};
use serde::Deserialize;

use super::{display_path, ToolEnv};
use dsh_protocol::tool::ToolOutcome;

pub const GLOB_DESCRIPTION: &str = "Find files by glob pattern (e.g. \"**/*.rs\", \"src/**/test_*.py\"). A pattern without \"/\" matches file names at any depth. Returns paths sorted by modification time, newest first; respects .gitignore.";
pub const GREP_DESCRIPTION: &str = "Search file contents with a regular expression (ripgrep syntax). Returns matching lines grouped by file with line numbers; respects .gitignore. Use include to filter files by a glob (e.g. \"*.ts\").";

const MAX_PATHS: usize = 100;
const MAX_MATCHES: usize = 250;
const MAX_LOCATIONS: usize = 50;
const MAX_LINE_CHARS: usize = 300;
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

/// Walks `root` without following links, skipping VCS directories and the
/// secret locations (`secrets`: never listed or searched, whatever the
/// mode; a `read` of one is asked about in full-access).
fn walker(root: &Path, secrets: Vec<PathBuf>) -> ignore::Walk {
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(move |entry| {
            let vcs = entry.file_type().is_some_and(|t| t.is_dir())
                && VCS_DIRS.iter().any(|d| entry.file_name() == *d);
            !vcs && !secrets.iter().any(|dir| entry.path().starts_with(dir))
        })
        .build()
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
    let root = root.to_path_buf();
    let cancel = env.cancel.clone();
    let secrets = env.hidden.to_vec();
    let found = tokio::task::spawn_blocking(move || {
        let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
        for entry in walker(&root, secrets).filter_map(Result::ok) {
            if cancel.is_cancelled() {
                break;
            }
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let relative = entry.path().strip_prefix(&root).unwrap_or(entry.path());
            if matcher.matches(relative) {
                let modified = entry
                    .metadata()
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                found.push((modified, entry.path().to_path_buf()));
            }
        }
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        found
    })
    .await
    .unwrap_or_default();
    let total = found.len();
    let mut output = String::new();
    for (_, path) in found.iter().take(MAX_PATHS) {
        output.push_str(&display_path(path, env.cwd));
        output.push('\n');
    }
    if total == 0 {
        output.push_str("No files found.\n");
    } else if total > MAX_PATHS {
        output.push_str(&format!(
            "({} more not shown; narrow the pattern or the path)\n",
            total - MAX_PATHS
        ));
    }
    let locations = found
        .iter()
        .take(MAX_LOCATIONS)
        .map(|(_, path)| FileLocation {
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

struct Hit {
    path: PathBuf,
    line: u64,
    text: String,
}

struct Collect<'a> {
    path: &'a Path,
    hits: &'a mut Vec<Hit>,
    total: &'a mut usize,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _searcher: &grep::searcher::Searcher,
        found: &SinkMatch<'_>,
    ) -> Result<bool, Self::Error> {
        *self.total += 1;
        if self.hits.len() < MAX_MATCHES {
            let text = String::from_utf8_lossy(found.bytes());
            let text = text.trim_end_matches(['\n', '\r']);
            let chars = text.chars().count();
            let text = if chars > MAX_LINE_CHARS {
                format!(
                    "{}… [{chars} characters]",
                    text.chars().take(MAX_LINE_CHARS).collect::<String>()
                )
            } else {
                text.to_owned()
            };
            self.hits.push(Hit {
                path: self.path.to_path_buf(),
                line: found.line_number().unwrap_or(0),
                text,
            });
        }
        Ok(true)
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
    let secrets = env.hidden.to_vec();
    let (hits, total) = tokio::task::spawn_blocking(move || {
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        let mut hits = Vec::new();
        let mut total = 0usize;
        for entry in walker(&root, secrets).filter_map(Result::ok) {
            if cancel.is_cancelled() || total > 100_000 {
                break;
            }
            if !entry.file_type().is_some_and(|t| t.is_file()) {
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
            let path = entry.path().to_path_buf();
            let sink = Collect {
                path: &path,
                hits: &mut hits,
                total: &mut total,
            };
            if let Err(err) = searcher.search_path(&matcher, &path, sink) {
                tracing::debug!(path = %path.display(), %err, "grep skipped a file");
            }
        }
        (hits, total)
    })
    .await
    .unwrap_or_default();
    let mut output = String::new();
    let mut current: Option<&Path> = None;
    for hit in &hits {
        if current != Some(hit.path.as_path()) {
            if current.is_some() {
                output.push('\n');
            }
            output.push_str(&display_path(&hit.path, env.cwd));
            output.push('\n');
            current = Some(&hit.path);
        }
        output.push_str(&format!("{:>6}: {}\n", hit.line, hit.text));
    }
    if total == 0 {
        output.push_str("No matches found.\n");
    } else if total > hits.len() {
        output.push_str(&format!(
            "\n({} more matches not shown; narrow the pattern, path or include)\n",
            total - hits.len()
        ));
    }
    let locations = hits
        .iter()
        .take(MAX_LOCATIONS)
        .map(|hit| FileLocation {
            path: hit.path.display().to_string(),
            line: Some(hit.line as u32),
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
