//! A session's skills and custom commands as last found
//! ([`super::skills`], [`super::custom_commands`]), and what decides when
//! their files are read again.
//!
//! Each refresh lists every directory searched and stats each file there;
//! only a file that is new or whose stamp changed is read again — with
//! [`super::files::read`], so the path policy is the one it always was —
//! and the lists are rebuilt only when something changed. Files are
//! searched in the same order, a name found first shadows the same name
//! later, as without the cache.
//!
//! A stamp is the file's identity, size and times (`dev`, `ino`, `len`,
//! `mtime` and `ctime` in ns) and the canonical directory it is read
//! beneath. Only a file reached without a symlink below that directory
//! (each component `lstat`ed, none followed) and read successfully is
//! kept by its stamp: its real path is then the one it had when it was
//! read, so the policy (beneath the root, not hidden) answers as it did.
//! Any other file — a symlink on the way, a read that failed or was
//! refused — is read again at every refresh, as before the cache.
//!
//! On Windows std gives no file identity nor change time: a stamp there
//! is the size, last write and creation times, so a file replaced by
//! another of the same size and times is not read again.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::custom_commands::{self, CustomCommand};
use super::files::{self, Place, Roots};
use super::skills::{self, Skill};

/// The skills (with their instructions) and custom commands found, each
/// list by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// The skills.
    pub skills: Vec<Skill>,
    /// Each skill's body (its instructions), in the order of `skills`.
    bodies: Vec<Arc<str>>,
    /// The custom commands.
    pub commands: Vec<CustomCommand>,
}

impl Found {
    /// The skill `name` and its body.
    pub fn skill(&self, name: &str) -> Option<(&Skill, &str)> {
        let at = self.skills.iter().position(|skill| skill.name == name)?;
        Some((&self.skills[at], &self.bodies[at]))
    }
}

/// Where a session's skills and commands come from, with the session's
/// cache of what was found there (cheap to clone: the cache is shared).
#[derive(Debug, Clone)]
pub struct Source {
    /// Where they are looked for.
    pub roots: Roots,
    /// The session's cache.
    pub cache: Arc<Mutex<Discovery>>,
}

impl Source {
    /// What is found as the files are now ([`Discovery::refresh`]).
    /// Blocking.
    pub fn refresh(&self) -> Arc<Found> {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .refresh(&self.roots)
    }
}

/// A file's identity, size and times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stamp {
    #[cfg(unix)]
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Times in 100 ns since 1601 (only compared, never shown).
    #[cfg(windows)]
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::windows::fs::MetadataExt as _;
        Self {
            dev: 0,
            ino: 0,
            len: meta.len(),
            mtime_ns: i128::from(meta.last_write_time()) * 100,
            ctime_ns: i128::from(meta.creation_time()) * 100,
        }
    }
}

/// What a file held.
#[derive(Debug, Clone)]
enum Parsed {
    Skill(Skill, Arc<str>),
    Command(CustomCommand),
    /// Invalid (logged when it was read).
    Invalid,
}

/// A file read: its stamp (`None`: read again next time) and content.
#[derive(Debug)]
struct Entry {
    stamp: Option<(Arc<Path>, Stamp)>,
    parsed: Parsed,
}

/// A file: its path as found, and whether it is in the user's directory
/// (the hidden check spares those).
type Key = (PathBuf, bool);

/// A session's cache ([`Source`] shares it).
#[derive(Debug, Default)]
pub struct Discovery {
    /// The hidden locations the entries were read with.
    hidden: Vec<PathBuf>,
    /// The files read, valid or not.
    entries: HashMap<Key, Entry>,
    /// The valid files found at the last refresh, skills then commands,
    /// in the order found.
    used: Vec<Key>,
    /// The last refresh's answer.
    found: Arc<Found>,
    /// How many files the last refresh read.
    reads: usize,
}

/// One refresh's bookkeeping.
struct Pass<'a> {
    old: HashMap<Key, Entry>,
    new: HashMap<Key, Entry>,
    used: Vec<Key>,
    hidden: &'a [PathBuf],
    reads: usize,
    /// A file read now was parsed (the lists may have changed).
    fresh: bool,
}

impl Discovery {
    /// What is found as the files are now: the last answer (the same
    /// `Arc`) when no file was added, removed or changed. Blocking.
    pub fn refresh(&mut self, roots: &Roots) -> Arc<Found> {
        if self.hidden != roots.hidden {
            self.entries.clear();
            self.hidden = roots.hidden.clone();
        }
        let mut pass = Pass {
            old: std::mem::take(&mut self.entries),
            new: HashMap::new(),
            used: Vec::new(),
            hidden: &roots.hidden,
            reads: 0,
            fresh: false,
        };
        let mut names = HashSet::new();
        for place in roots.places("skills", skills::COMPAT) {
            let scan = Scan::new(&place);
            for name in files::names(&place) {
                if names.contains(&name) {
                    continue;
                }
                let relative = Path::new(&name).join("SKILL.md");
                let parse = |text: &str| match skills::checked(&place, &name, text) {
                    Some((skill, body)) => Parsed::Skill(skill, body.into()),
                    None => Parsed::Invalid,
                };
                if pass.consult(&scan, &relative, "skill file", parse) {
                    names.insert(name);
                }
            }
        }
        names.clear();
        for place in roots.places("commands", custom_commands::COMPAT) {
            let scan = Scan::new(&place);
            for file in files::names(&place) {
                let Some(name) = file.strip_suffix(".md") else {
                    continue;
                };
                if !custom_commands::valid_name(name) || names.contains(name) {
                    continue;
                }
                let path = place.path().join(&file);
                let parse = |text: &str| match custom_commands::checked(&path, name, text) {
                    Some(command) => Parsed::Command(command),
                    None => Parsed::Invalid,
                };
                if pass.consult(&scan, Path::new(&file), "command file", parse) {
                    names.insert(name.to_owned());
                }
            }
        }
        self.reads = pass.reads;
        self.entries = pass.new;
        if pass.fresh || pass.used != self.used {
            self.used = pass.used;
            self.found = Arc::new(self.assemble());
        }
        self.found.clone()
    }

    /// How many files the last refresh read.
    pub fn reads(&self) -> usize {
        self.reads
    }

    /// The lists from the entries in use.
    fn assemble(&self) -> Found {
        let mut skills: Vec<(Skill, Arc<str>)> = Vec::new();
        let mut commands = Vec::new();
        for key in &self.used {
            match self.entries.get(key).map(|entry| &entry.parsed) {
                Some(Parsed::Skill(skill, body)) => skills.push((skill.clone(), body.clone())),
                Some(Parsed::Command(command)) => commands.push(command.clone()),
                Some(Parsed::Invalid) | None => {}
            }
        }
        skills.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        commands.sort_by(|a: &CustomCommand, b| a.name.cmp(&b.name));
        let (skills, bodies) = skills.into_iter().unzip();
        Found {
            skills,
            bodies,
            commands,
        }
    }
}

impl Pass<'_> {
    /// The file `relative` below the scanned place: its cached entry when
    /// the stamp is the same, else read and parsed (`what` names it in
    /// the log). True when it is valid (it shadows its name later).
    fn consult(
        &mut self,
        scan: &Scan,
        relative: &Path,
        what: &str,
        parse: impl FnOnce(&str) -> Parsed,
    ) -> bool {
        let key = (scan.place.path().join(relative), scan.place.user);
        // Stamped before the read: a change in between is read next time.
        let stamp = scan.stamp(relative);
        let kept = self
            .old
            .remove(&key)
            .filter(|entry| stamp.is_some() && entry.stamp == stamp);
        let entry = match kept {
            Some(entry) => entry,
            None => {
                self.reads += 1;
                let text = match files::read(scan.place, relative, self.hidden) {
                    Ok(Some(text)) => text,
                    Ok(None) => return false,
                    Err(why) => {
                        tracing::warn!(path = %key.0.display(), "{what} skipped: {why}");
                        return false;
                    }
                };
                self.fresh = true;
                Entry {
                    stamp,
                    parsed: parse(&text),
                }
            }
        };
        let valid = !matches!(entry.parsed, Parsed::Invalid);
        if valid {
            self.used.push(key.clone());
        }
        self.new.insert(key, entry);
        valid
    }
}

/// A place being scanned.
struct Scan<'a> {
    place: &'a Place,
    /// The canonical directory files are read beneath.
    base: Option<Arc<Path>>,
}

impl<'a> Scan<'a> {
    fn new(place: &'a Place) -> Self {
        let base = dunce::canonicalize(&place.base).ok().map(Arc::from);
        Self { place, base }
    }

    /// The stamp of `relative` (below the place's directory), when it is
    /// a regular file reached from the base without a symlink.
    fn stamp(&self, relative: &Path) -> Option<(Arc<Path>, Stamp)> {
        let base = self.base.as_ref()?;
        let meta = plain(base, &self.place.dir.join(relative))?;
        Some((base.clone(), Stamp::of(&meta)))
    }
}

/// The metadata of `below` under `dir` when each of its components is a
/// directory but the last, a regular file, none a symlink.
fn plain(dir: &Path, below: &Path) -> Option<std::fs::Metadata> {
    let mut path = dir.to_path_buf();
    let mut components = below.components().peekable();
    while let Some(component) = components.next() {
        let std::path::Component::Normal(name) = component else {
            return None;
        };
        path.push(name);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if components.peek().is_none() {
            return meta.file_type().is_file().then_some(meta);
        }
        if !meta.file_type().is_dir() {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn skill(name: &str, description: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n---\nDo {name}.\n")
    }

    fn names(found: &Found) -> (Vec<&str>, Vec<&str>) {
        (
            found.skills.iter().map(|s| s.name.as_str()).collect(),
            found.commands.iter().map(|c| c.name.as_str()).collect(),
        )
    }

    #[test]
    fn only_changed_files_are_read_again() {
        let tmp = tempfile::tempdir().unwrap();
        let (home, project) = (tmp.path().join("home"), tmp.path().join("p"));
        let skills = project.join(".dsh/skills");
        for name in ["alpha", "beta", "gamma"] {
            write(&skills.join(name).join("SKILL.md"), &skill(name, name));
        }
        write(&home.join("skills/beta/SKILL.md"), &skill("beta", "user's"));
        write(&home.join("skills/mine/SKILL.md"), &skill("mine", "mine"));
        write(&project.join(".dsh/commands/fix.md"), "Fix $1");
        write(&home.join("commands/fix.md"), "user fix");
        write(&project.join(".claude/skills/broken/SKILL.md"), "---\n");
        let roots = Roots {
            home: home.clone(),
            project: project.clone(),
            hidden: Vec::new(),
        };
        let mut cache = Discovery::default();

        let first = cache.refresh(&roots);
        // Shadowed files are not read; the invalid one is.
        assert_eq!(cache.reads(), 6);
        assert_eq!(
            names(&first),
            (vec!["alpha", "beta", "gamma", "mine"], vec!["fix"])
        );
        let (beta, body) = first.skill("beta").unwrap();
        assert!(!beta.user && body == "Do beta.");
        assert_eq!(first.commands[0].body, "Fix $1");

        // Unchanged: nothing read, the same answer.
        let again = cache.refresh(&roots);
        assert_eq!(cache.reads(), 0);
        assert!(Arc::ptr_eq(&first, &again));

        // A changed file is read again (and only it).
        write(&skills.join("beta/SKILL.md"), &skill("beta", "changed"));
        let changed = cache.refresh(&roots);
        assert_eq!(cache.reads(), 1);
        assert_eq!(changed.skill("beta").unwrap().0.description, "changed");

        // A file replaced by one of the same size and times is another
        // file (its inode): read again. Windows: std gives no file
        // identity, only the creation time tells (docs/platforms.md), which
        // wine does not keep.
        if cfg!(unix) {
            let path = skills.join("alpha/SKILL.md");
            let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
            let other = skills.join("alpha/new");
            write(&other, &skill("alpha", "ALPHA"));
            std::fs::File::options()
                .write(true)
                .open(&other)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
            std::fs::rename(&other, &path).unwrap();
            let replaced = cache.refresh(&roots);
            assert_eq!(cache.reads(), 1);
            assert_eq!(replaced.skill("alpha").unwrap().0.description, "ALPHA");
        }

        // A removed file is dropped (the user's skill it shadowed is read
        // now), a new one added; nothing else is read.
        std::fs::remove_dir_all(skills.join("beta")).unwrap();
        std::fs::remove_file(project.join(".dsh/commands/fix.md")).unwrap();
        write(&skills.join("delta/SKILL.md"), &skill("delta", "new"));
        let moved = cache.refresh(&roots);
        assert_eq!(cache.reads(), 3);
        assert_eq!(
            names(&moved),
            (vec!["alpha", "beta", "delta", "gamma", "mine"], vec!["fix"])
        );
        assert!(moved.skill("beta").unwrap().0.user);
        assert_eq!(moved.commands[0].body, "user fix");
        assert_eq!(cache.refresh(&roots), moved);
        assert_eq!(cache.reads(), 0);

        // The answer is what a fresh look finds.
        assert_eq!(*Discovery::default().refresh(&roots), *moved);
    }

    #[cfg(unix)]
    #[test]
    fn files_behind_symlinks_are_read_each_time_and_never_out_of_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        write(
            &project.join(".dsh/skills/.store/SKILL.md"),
            &skill("linked", "inside"),
        );
        write(&tmp.path().join("outside/SKILL.md"), &skill("evil", "x"));
        std::fs::create_dir_all(project.join(".dsh/skills")).unwrap();
        std::os::unix::fs::symlink(project.join("shared"), project.join(".dsh/skills/linked"))
            .unwrap();
        std::os::unix::fs::symlink(tmp.path().join("outside"), project.join(".dsh/skills/evil"))
            .unwrap();
        let roots = Roots {
            home: tmp.path().join("home"),
            project: project.clone(),
            hidden: vec![project.join(".dsh/skills/secret")],
        };
        write(
            &project.join(".dsh/skills/secret/SKILL.md"),
            &skill("secret", "x"),
        );
        let mut cache = Discovery::default();
        // What the policy says of the link inside the root (some kernels
        // refuse any link beneath a root): the cache must say the same.
        let place = &roots.places("skills", &[])[0];
        let linked = files::read(place, Path::new("linked/SKILL.md"), &[]);
        let expected: &[&str] = if matches!(linked, Ok(Some(_))) {
            &["linked"]
        } else {
            &[]
        };
        for _ in 0..2 {
            let found = cache.refresh(&roots);
            assert_eq!(names(&found).0, expected);
            // The symlinked one, the one outside and the hidden one.
            assert_eq!(cache.reads(), 3);
        }
    }

    #[test]
    fn project_skills_shadow_the_users_and_invalid_ones_are_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let (home, project) = (tmp.path().join("home"), tmp.path().join("p"));
        write(
            &home.join("skills/deploy/SKILL.md"),
            &skill("deploy", "user's"),
        );
        write(
            &home.join("skills/mine/SKILL.md"),
            &skill("mine", "only mine"),
        );
        write(
            &project.join(".dsh/skills/deploy/SKILL.md"),
            &skill("deploy", "project's"),
        );
        write(
            &project.join(".claude/skills/review/SKILL.md"),
            &skill("review", "reviews"),
        );
        write(
            &project.join(".agents/skills/broken/SKILL.md"),
            "---\nname: broken\n",
        );
        write(
            &project.join(".dsh/skills/.hidden/SKILL.md"),
            &skill(".hidden", "x"),
        );
        let roots = Roots {
            home,
            project: project.clone(),
            hidden: Vec::new(),
        };
        let found = Discovery::default().refresh(&roots).skills.clone();
        let names: Vec<(&str, &str, bool)> = found
            .iter()
            .map(|s| (s.name.as_str(), s.description.as_str(), s.user))
            .collect();
        assert_eq!(
            names,
            [
                ("deploy", "project's", false),
                ("mine", "only mine", true),
                ("review", "reviews", false)
            ]
        );
        let (deploy, body) = skills::load(&roots, "deploy").unwrap();
        assert_eq!(deploy.dir, project.join(".dsh/skills/deploy"));
        assert!(body.contains("Do deploy."));
        assert!(skills::load(&roots, "broken").is_none());
        assert!(skills::load(&roots, "../mine").is_none());
        let (text, listed) = skills::catalog(&found).unwrap();
        assert!(text.starts_with("<system-reminder>") && text.ends_with("</system-reminder>"));
        assert!(text.contains("- review: reviews\n"));
        assert_eq!(listed, ["deploy", "mine", "review"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_out_of_the_project_is_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        write(&tmp.path().join("outside/SKILL.md"), &skill("evil", "x"));
        std::fs::create_dir_all(project.join(".dsh/skills/evil")).unwrap();
        std::os::unix::fs::symlink(
            tmp.path().join("outside/SKILL.md"),
            project.join(".dsh/skills/evil/SKILL.md"),
        )
        .unwrap();
        std::os::unix::fs::symlink(tmp.path().join("outside"), project.join(".dsh/skills/link"))
            .unwrap();
        let roots = Roots {
            home: tmp.path().join("home"),
            project,
            hidden: Vec::new(),
        };
        assert!(Discovery::default().refresh(&roots).skills.is_empty());
    }

    #[test]
    fn project_commands_shadow_the_users() {
        let tmp = tempfile::tempdir().unwrap();
        let (home, project) = (tmp.path().join("home"), tmp.path().join("p"));
        for (path, text) in [
            (home.join("commands/fix.md"), "user fix"),
            (home.join("commands/mine.md"), "mine"),
            (project.join(".dsh/commands/fix.md"), "project fix"),
            (project.join(".claude/commands/review.md"), "review"),
            (project.join(".claude/commands/notes.txt"), "not a command"),
            (project.join(".dsh/commands/bad name.md"), "no"),
        ] {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let roots = Roots {
            home,
            project,
            hidden: Vec::new(),
        };
        let found: Vec<(String, String)> = Discovery::default()
            .refresh(&roots)
            .commands
            .iter()
            .cloned()
            .map(|c| (c.name, c.body))
            .collect();
        assert_eq!(
            found,
            [
                ("fix".to_owned(), "project fix".to_owned()),
                ("mine".to_owned(), "mine".to_owned()),
                ("review".to_owned(), "review".to_owned())
            ]
        );
    }
}
