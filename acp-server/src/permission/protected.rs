//! Protected paths: the one table of project paths whose change is asked
//! about in every mode that asks at all, never remembered, and refused in
//! read-only ([`PROJECT`], documented in docs/security.md's *Protected
//! paths*) — files whose change makes programs run code, and files dsh or
//! another agent reads from the project as instructions, hooks, skills,
//! commands or configuration, so that the next session is steered by
//! them. Plus dsh's own home and the secret locations.
//!
//! The same table says what the command sandbox holds read-only at each
//! workspace root ([`Protected::in_sandbox`]): a command that writes one
//! of these without naming it (a build step, `tar x`) cannot change it.
//!
//! The readers of those files name their paths themselves
//! (`context::files::Roots::places`, `hooks::PROJECT_FILE`, the
//! instruction settings); the tests beside this table check that every
//! path they read is guarded, and that docs/security.md lists the table
//! as it is.

use std::path::{Path, PathBuf};

use crate::context::instructions::InstructionSettings;

/// Why a path is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Changing it can make a program run code.
    RunsCode,
    /// dsh (or another agent) reads it from the project into later
    /// sessions: instructions, hooks, skills, commands, configuration.
    Steers,
    /// `[permissions] protected_paths`.
    Configured,
}

/// One row of the table: glob patterns (`**/` matches at any depth; `*`
/// never crosses a `/`) and what reads the files.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The patterns.
    pub patterns: &'static [&'static str],
    /// Why changing them matters.
    pub why: Why,
    /// What reads them (the docs' table says the same).
    pub reader: &'static str,
    /// What of it a sandboxed command may not change at a workspace root.
    pub sandbox: InSandbox,
}

/// What the command sandbox holds read-only of a row, at each workspace
/// root where it exists when a command starts (bound read-only onto
/// itself: no write, no new entry inside, no rename or delete).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InSandbox {
    /// The paths its patterns name: `<root>/name` for each `**/name` and
    /// `**/name/**` with no wildcard in `name`.
    Named,
    /// Only these paths below a root: the rest of the row is what the
    /// programs' ordinary work writes (git's index, objects and refs).
    Only(&'static [&'static str]),
}

impl Entry {
    /// The paths below a workspace root that the sandbox holds read-only
    /// ([`InSandbox`]).
    pub fn in_sandbox(&self) -> Vec<&'static str> {
        match self.sandbox {
            InSandbox::Only(paths) => paths.to_vec(),
            InSandbox::Named => {
                let mut names: Vec<&str> = self
                    .patterns
                    .iter()
                    .filter_map(|pattern| root_name(pattern))
                    .collect();
                names.dedup();
                names
            }
        }
    }
}

/// The path below a root that `pattern` names there (`**/name` or
/// `**/name/**`, no wildcard in `name`); `None` for any other pattern.
fn root_name(pattern: &str) -> Option<&str> {
    let name = pattern.strip_prefix("**/")?;
    let name = name.strip_suffix("/**").unwrap_or(name);
    let literal = !name.is_empty()
        && !name.contains(['*', '?', '[', ']', '{', '}', '\\'])
        && name.split('/').all(|part| !matches!(part, "" | "." | ".."));
    literal.then_some(name)
}

/// The protected project paths.
pub const PROJECT: &[Entry] = &[
    Entry {
        patterns: &["**/.git", "**/.git/**"],
        why: Why::RunsCode,
        reader: "git: hooks, `core.fsmonitor`, aliases, filters",
        // Commands keep writing the index, objects and refs (`git add`,
        // `git commit`); what makes git run code is its hooks and config.
        sandbox: InSandbox::Only(&[".git/hooks", ".git/config", ".git/config.worktree"]),
    },
    Entry {
        patterns: &["**/.envrc", "**/.env.local"],
        why: Why::RunsCode,
        reader: "direnv and dotenv loaders",
        sandbox: InSandbox::Named,
    },
    Entry {
        patterns: &[
            "**/.vscode/tasks.json",
            "**/.vscode/settings.json",
            "**/.vscode/launch.json",
            "**/.idea/workspace.xml",
            "**/.idea/runConfigurations/**",
            "**/.devcontainer/**",
        ],
        why: Why::RunsCode,
        reader: "editors: tasks, run configurations, containers",
        sandbox: InSandbox::Named,
    },
    Entry {
        patterns: &[
            "**/.husky/**",
            "**/.githooks/**",
            "**/.pre-commit-config.yaml",
        ],
        why: Why::RunsCode,
        reader: "git hook managers",
        sandbox: InSandbox::Named,
    },
    Entry {
        patterns: &[
            "**/.cargo/config",
            "**/.cargo/config.toml",
            "**/.npmrc",
            "**/.yarnrc",
            "**/.yarnrc.yml",
        ],
        why: Why::RunsCode,
        reader: "cargo, npm and yarn: runners, scripts, registries",
        sandbox: InSandbox::Named,
    },
    Entry {
        patterns: &[
            "**/AGENTS.md",
            "**/AGENTS.local.md",
            "**/CLAUDE.md",
            "**/CLAUDE.local.md",
        ],
        why: Why::Steers,
        reader: "dsh's instruction files (`[instructions]`; configured names are added), handed to the model every turn",
        sandbox: InSandbox::Named,
    },
    Entry {
        patterns: &["**/.dsh", "**/.dsh/**"],
        why: Why::Steers,
        reader: "dsh: `.dsh/hooks.json` (hooks), `.dsh/skills/` (the model's skill catalog), `.dsh/commands/` (custom commands); the place of any project configuration",
        sandbox: InSandbox::Named,
    },
    Entry {
        patterns: &["**/.claude", "**/.claude/**"],
        why: Why::Steers,
        reader: "dsh: `.claude/skills/`, `.claude/commands/`; Claude Code: `settings*.json` (hooks, permissions), agents",
        sandbox: InSandbox::Named,
    },
    Entry {
        patterns: &["**/.agents", "**/.agents/**"],
        why: Why::Steers,
        reader: "dsh and other agents: `.agents/skills/`",
        sandbox: InSandbox::Named,
    },
];

/// Paths whose change can make programs run code or steer later
/// sessions ([`PROJECT`]), and dsh's own home. The patterns are checked
/// at configuration time and compiled on the first write decision.
#[derive(Debug, Clone)]
pub struct Protected {
    patterns: Vec<(String, Why)>,
    compiled: std::sync::OnceLock<globset::GlobSet>,
    /// Below each root, what a sandboxed command gets read-only.
    in_sandbox: Vec<PathBuf>,
    home: PathBuf,
    hidden: Vec<PathBuf>,
}

/// Whether `path` is `dir` or beneath it — without regard to case where
/// the file system ignores it by default (Windows, macOS: `~/.SSH` is
/// `~/.ssh` there).
fn beneath(path: &Path, dir: &Path) -> bool {
    if !cfg!(any(windows, target_os = "macos")) {
        return path.starts_with(dir);
    }
    let folded = |path: &Path| -> Vec<String> {
        path.components()
            .map(|part| part.as_os_str().to_string_lossy().to_lowercase())
            .collect()
    };
    let (path, dir) = (folded(path), folded(dir));
    path.len() >= dir.len() && path[..dir.len()] == dir[..]
}

fn protected_glob(pattern: &str) -> Result<globset::Glob, String> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        // Windows' and macOS' file systems ignore case by default:
        // `.Git/hooks` is `.git/hooks` there.
        .case_insensitive(cfg!(any(windows, target_os = "macos")))
        .build()
        .map_err(|err| format!("invalid protected path {pattern:?}: {err}"))
}

impl Protected {
    /// The table's patterns plus `extra` (`[permissions]
    /// protected_paths`), and `home` (`$DSH_HOME`).
    ///
    /// # Errors
    /// A pattern that is not a valid glob.
    pub fn new(extra: &[String], home: &Path) -> Result<Protected, String> {
        let patterns: Vec<(String, Why)> = PROJECT
            .iter()
            .flat_map(|entry| {
                entry
                    .patterns
                    .iter()
                    .map(|pattern| ((*pattern).to_owned(), entry.why))
            })
            .chain(
                extra
                    .iter()
                    .map(|pattern| (pattern.clone(), Why::Configured)),
            )
            .collect();
        for (pattern, _) in &patterns {
            protected_glob(pattern)?;
        }
        let mut in_sandbox: Vec<PathBuf> = Vec::new();
        let names = PROJECT
            .iter()
            .flat_map(Entry::in_sandbox)
            .map(str::to_owned)
            .chain(
                extra
                    .iter()
                    .filter_map(|pattern| root_name(pattern).map(str::to_owned)),
            );
        for name in names {
            if !in_sandbox.iter().any(|known| *known == Path::new(&name)) {
                in_sandbox.push(PathBuf::from(name));
            }
        }
        Ok(Protected {
            patterns,
            compiled: std::sync::OnceLock::new(),
            in_sandbox,
            home: dunce::canonicalize(home).unwrap_or_else(|_| home.to_path_buf()),
            hidden: Vec::new(),
        })
    }

    /// The same, with the instruction files and project root markers
    /// `settings` names (configured names beyond the table's) guarded too.
    /// The instruction files are held read-only in the sandbox as well; a
    /// root marker is not (its presence places the root, its content
    /// steers nothing, and a marker directory such as `.hg` is written by
    /// its own tool's ordinary work).
    #[must_use]
    pub fn reading(mut self, settings: &InstructionSettings) -> Protected {
        let valid = |name: &&String| !name.is_empty() && !name.contains('/');
        let instructions: Vec<&String> = settings
            .instruction_file_candidates
            .iter()
            .chain(&settings.local_instruction_file_candidates)
            .filter(valid)
            .collect();
        let names = instructions
            .iter()
            .copied()
            .chain(settings.project_root_markers.iter().filter(valid));
        for name in names {
            let pattern = format!("**/{}", globset::escape(name));
            if !self.patterns.iter().any(|(known, _)| *known == pattern) {
                self.patterns.push((pattern, Why::Steers));
            }
        }
        for name in instructions {
            let name = Path::new(name);
            if name != Path::new(".")
                && name != Path::new("..")
                && !self.in_sandbox.iter().any(|known| known == name)
            {
                self.in_sandbox.push(name.to_path_buf());
            }
        }
        self.compiled = std::sync::OnceLock::new();
        self
    }

    /// The same, with the secret locations no file tool reads or writes
    /// below full-access (and never without asking): the sandbox's hidden
    /// paths (`SandboxSettings::hidden_paths`).
    #[must_use]
    pub fn hiding(mut self, hidden: Vec<PathBuf>) -> Protected {
        self.hidden = hidden;
        self
    }

    /// The paths below each workspace root that a sandboxed command (in
    /// `ask` and `accept-edits`, whose roots it may write) gets read-only
    /// where they exist when it starts: the table's ([`Entry::in_sandbox`]),
    /// `[permissions] protected_paths` of the form `**/name` or
    /// `**/name/**`, and the configured instruction file names. A fixed
    /// set of names, looked up at each root; nothing deeper.
    pub fn in_sandbox(&self) -> &[PathBuf] {
        &self.in_sandbox
    }

    /// The secret locations (for walks that must skip them).
    pub fn hidden(&self) -> &[PathBuf] {
        &self.hidden
    }

    /// Whether `path` is in a secret location.
    pub fn is_hidden(&self, path: &Path) -> bool {
        self.hidden.iter().any(|dir| beneath(path, dir))
    }

    /// Whether `path` is inside dsh's own home.
    pub fn in_home(&self, path: &Path) -> bool {
        beneath(path, &self.home)
    }

    /// dsh's own home (`$DSH_HOME`), canonical.
    pub fn home(&self) -> &Path {
        &self.home
    }

    fn set(&self) -> &globset::GlobSet {
        self.compiled.get_or_init(|| {
            let mut builder = globset::GlobSetBuilder::new();
            for (pattern, _) in &self.patterns {
                if let Ok(glob) = protected_glob(pattern) {
                    builder.add(glob);
                }
            }
            builder
                .build()
                .unwrap_or_else(|_| globset::GlobSet::empty())
        })
    }

    /// Why `path` is protected; `None` when it is not. Where several rows
    /// match, code execution is named first.
    pub fn why(&self, path: &Path) -> Option<Why> {
        let matched = self.set().matches(path);
        [Why::RunsCode, Why::Steers, Why::Configured]
            .into_iter()
            .find(|why| matched.iter().any(|&at| self.patterns[at].1 == *why))
    }

    /// Whether changing `path` can make a program run code or steer a
    /// later session.
    pub fn guards(&self, path: &Path) -> bool {
        self.set().is_match(path)
    }

    /// What the permission prompt says of a change to `path`.
    pub fn reason(&self, path: &Path) -> Option<String> {
        let what = match self.why(path)? {
            Why::RunsCode => "a file that can make programs run code",
            Why::Steers => {
                "a file that steers later sessions (instructions, hooks, skills, commands or configuration)"
            }
            Why::Configured => "a protected path ([permissions] protected_paths)",
        };
        Some(format!("{}, {what}", path.display()))
    }
}
