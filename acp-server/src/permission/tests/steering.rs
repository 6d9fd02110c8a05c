//! The protected-path table against its readers and its documentation
//! (issue 37, item 2: files that steer later sessions).

use super::protected::{Why, PROJECT};
use super::*;
use crate::context::files::Roots;
use crate::context::instructions::InstructionSettings;
use crate::context::{custom_commands, skills};

fn table() -> Protected {
    Protected::new(&[], Path::new("/home/u/.dsh")).unwrap()
}

/// Every project path dsh reads skills, commands, hooks and instructions
/// from — as the readers themselves name them — is guarded, and so is
/// the directory that holds them (a rename of it is a change of them).
#[test]
fn issue37_item2_every_path_the_readers_read_is_protected() {
    let protected = table();
    let project = PathBuf::from("/w");
    let roots = Roots {
        home: PathBuf::from("/home/u/.dsh"),
        project: project.clone(),
        hidden: Vec::new(),
    };
    let mut read: Vec<PathBuf> = Vec::new();
    for place in roots.places("skills", skills::COMPAT) {
        if place.user {
            continue;
        }
        let dir = place.path();
        read.extend([
            dir.clone(),
            dir.join("x"),
            dir.join("x/SKILL.md"),
            dir.join("x/template.md"),
            dir.join("x/scripts/run.sh"),
        ]);
        read.extend(dir.parent().map(Path::to_path_buf));
    }
    for place in roots.places("commands", custom_commands::COMPAT) {
        if place.user {
            continue;
        }
        let dir = place.path();
        read.extend([dir.clone(), dir.join("fix.md")]);
        read.extend(dir.parent().map(Path::to_path_buf));
    }
    read.push(project.join(crate::hooks::PROJECT_FILE));
    let settings = InstructionSettings::default();
    for name in settings
        .instruction_file_candidates
        .iter()
        .chain(&settings.local_instruction_file_candidates)
        .chain(&settings.project_root_markers)
    {
        read.extend([project.join(name), project.join("sub/deep").join(name)]);
    }
    assert!(read.len() > 20, "{read:?}");
    for path in &read {
        assert!(
            protected.guards(path),
            "{} is not protected",
            path.display()
        );
    }
    // And the ones the issue names besides.
    for path in [
        "/w/.claude/settings.json",
        "/w/.claude/settings.local.json",
        "/w/.dsh/config.toml",
        "/w/.agents/skills/a/b/c.md",
    ] {
        assert!(protected.guards(Path::new(path)), "{path}");
    }
    for path in [
        "/w/src/main.rs",
        "/w/.github/workflows/ci.yml",
        "/w/docs/dsh.md",
    ] {
        assert!(!protected.guards(Path::new(path)), "{path}");
    }
}

/// Configured instruction file names and root markers are guarded too.
#[test]
fn issue37_item2_configured_instruction_files_are_protected() {
    let settings = InstructionSettings {
        instruction_file_candidates: vec!["GEMINI.md".to_owned()],
        local_instruction_file_candidates: vec!["NOTES[1].md".to_owned()],
        project_root_markers: vec![".hg".to_owned()],
        ..InstructionSettings::default()
    };
    assert!(!table().guards(Path::new("/w/GEMINI.md")));
    let protected = table().reading(&settings);
    for path in ["/w/GEMINI.md", "/w/a/GEMINI.md", "/w/NOTES[1].md", "/w/.hg"] {
        assert!(protected.guards(Path::new(path)), "{path}");
        assert_eq!(protected.why(Path::new(path)), Some(Why::Steers));
    }
    assert!(!protected.guards(Path::new("/w/NOTES1.md")));
}

/// A write to a steering file asks in ask and accept-edits (saying why),
/// is refused in read-only and plan, is never offered "always", and no
/// rule covers it; full-access allows it.
#[test]
fn issue37_item2_steering_files_ask_below_full_access_and_are_never_remembered() {
    for path in [
        "/w/.dsh/hooks.json",
        "/w/.dsh/skills/x/SKILL.md",
        "/w/.claude/skills/x/SKILL.md",
        "/w/.claude/commands/x.md",
        "/w/.claude/settings.local.json",
        "/w/.agents/skills/x/SKILL.md",
        "/w/sub/AGENTS.md",
    ] {
        let write = || Access::Write(vec![path.into()]);
        let always = [rule("write", Some(path), true)];
        for mode in [Mode::Ask, Mode::AcceptEdits] {
            assert_eq!(check(mode, "write", write(), &always), "ask", "{path}");
        }
        for mode in [Mode::ReadOnly, Mode::Plan] {
            assert_eq!(check(mode, "write", write(), &[]), "deny", "{path}");
        }
        assert_eq!(check(Mode::FullAccess, "write", write(), &[]), "allow");
        with_context(|ctx| {
            assert_eq!(choices(&write(), ctx).remember, Remember::Never, "{path}");
            match decide(Mode::AcceptEdits, "write", &write(), ctx, &[]) {
                Decision::Ask(reason) => {
                    assert!(reason.contains("steers later sessions"), "{reason}")
                }
                other => panic!("{other:?}"),
            }
        });
    }
}

/// A command line that names a steering file (or a code-running one) is
/// asked about even where an "always allow" rule covers the program, and
/// is never offered "always"; the same program elsewhere keeps its rule.
#[test]
fn issue37_item2_commands_naming_protected_paths_ask_and_are_never_remembered() {
    let rules = [
        rule("bash", Some("cp"), true),
        rule("bash", Some("mv"), true),
        rule("bash", Some("rm"), true),
        rule("bash", Some("touch"), true),
        rule("bash", Some("ln"), true),
    ];
    for line in [
        "cp evil.json .dsh/hooks.json",
        "cp evil.md ./.claude/commands/x.md",
        "mv staged .claude",
        "mv staged .agents/skills/x",
        "rm -rf .dsh/skills/x",
        "rm sub/../AGENTS.md",
        "touch /w/.dsh/skills/x/SKILL.md",
        "ln -s /tmp/x .dsh",
        "cp --target-directory=.dsh/commands x.md",
        "cp x.md .git/hooks/pre-commit",
    ] {
        for mode in [Mode::Ask, Mode::AcceptEdits] {
            assert_eq!(check(mode, "bash", exec(line), &rules), "ask", "{line}");
        }
        with_context(|ctx| {
            assert_eq!(
                choices(&exec(line), ctx).remember,
                Remember::Never,
                "{line}"
            );
        });
        assert_eq!(check(Mode::FullAccess, "bash", exec(line), &[]), "allow");
    }
    for line in [
        "cp a.txt b.txt",
        "rm build.log",
        "mv notes.md docs/notes.md",
    ] {
        assert_eq!(
            check(Mode::AcceptEdits, "bash", exec(line), &rules),
            "allow",
            "{line}"
        );
        with_context(|ctx| {
            assert!(
                matches!(choices(&exec(line), ctx).remember, Remember::Scope(_)),
                "{line}"
            );
        });
    }
    // A reject rule still refuses.
    let reject = [rule("bash", Some("rm"), false)];
    assert_eq!(
        check(
            Mode::AcceptEdits,
            "bash",
            exec("rm .dsh/hooks.json"),
            &reject
        ),
        "deny"
    );
}

/// docs/security.md's *Protected paths* table is the code's table, row
/// for row: the patterns, why, and what reads them.
#[test]
fn issue37_item2_the_documented_table_is_the_table() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md"))
        .unwrap();
    let section = doc
        .split("\n## Protected paths\n")
        .nth(1)
        .expect("docs/security.md has a Protected paths section");
    let rows: Vec<Vec<String>> = section
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2)
        .map(|line| {
            line.trim_matches('|')
                .split(" | ")
                .map(|cell| cell.trim().to_owned())
                .collect()
        })
        .collect();
    let documented: Vec<Vec<String>> = PROJECT
        .iter()
        .map(|entry| {
            let patterns: Vec<String> = entry.patterns.iter().map(|p| format!("`{p}`")).collect();
            let why = match entry.why {
                Why::RunsCode => "runs code",
                Why::Steers => "steers later sessions",
                Why::Configured => "configured",
            };
            let held: Vec<String> = entry
                .in_sandbox()
                .iter()
                .map(|path| format!("`{path}`"))
                .collect();
            vec![
                patterns.join(", "),
                why.to_owned(),
                entry.reader.to_owned(),
                held.join(", "),
            ]
        })
        .collect();
    assert_eq!(rows, documented);
}

/// What the command sandbox holds read-only at each root is the table's
/// root-level names (git's hooks and config, not the rest of `.git`),
/// the configured `**/name` patterns and instruction file names — not a
/// root marker, nor a pattern with a wildcard.
#[test]
fn issue37_item2_the_sandbox_holds_the_tables_root_level_names() {
    let names = |protected: &Protected| -> Vec<String> {
        protected
            .in_sandbox()
            .iter()
            .map(|path| path.display().to_string())
            .collect()
    };
    let held = names(&table());
    for name in [
        ".git/hooks",
        ".git/config",
        ".envrc",
        ".vscode/tasks.json",
        ".idea/runConfigurations",
        ".devcontainer",
        ".husky",
        ".cargo/config.toml",
        "AGENTS.md",
        "CLAUDE.local.md",
        ".dsh",
        ".claude",
        ".agents",
    ] {
        assert!(held.contains(&name.to_owned()), "{name}: {held:?}");
    }
    assert!(!held.contains(&".git".to_owned()), "{held:?}");
    let unique: std::collections::BTreeSet<&String> = held.iter().collect();
    assert_eq!(unique.len(), held.len(), "{held:?}");
    // Every name, or what it holds, is protected by the table itself.
    for name in &held {
        let path = Path::new("/w").join(name);
        assert!(
            table().guards(&path) || table().guards(&path.join("x")),
            "{name}"
        );
    }
    let settings = InstructionSettings {
        instruction_file_candidates: vec!["GEMINI.md".to_owned()],
        project_root_markers: vec![".hg".to_owned()],
        ..InstructionSettings::default()
    };
    let extra = [
        "**/deploy.sh".to_owned(),
        "**/.tool/**".to_owned(),
        "**/*.lock".to_owned(),
        "/abs/**".to_owned(),
    ];
    let configured = Protected::new(&extra, Path::new("/home/u/.dsh"))
        .unwrap()
        .reading(&settings);
    let held = names(&configured);
    for name in ["deploy.sh", ".tool", "GEMINI.md"] {
        assert!(held.contains(&name.to_owned()), "{name}: {held:?}");
    }
    for name in [".hg", "*.lock", "/abs"] {
        assert!(!held.contains(&name.to_owned()), "{name}: {held:?}");
    }
}

/// A command line that names a protected path — a plain one, a list
/// that makes it, a shell's text — is not for `sandboxed` approvals
/// (`Unattended::FullAccessOnly`); other lines, and a commit message that
/// mentions one, are.
#[test]
fn issue37_item2_commands_naming_protected_paths_are_not_for_sandboxed_approvals() {
    for line in [
        "cp x .dsh/hooks.json",
        "mkdir -p .dsh && cp x .dsh/hooks.json",
        "sh -c 'echo x > AGENTS.md'",
        "echo evil > .git/hooks/pre-commit",
        "tar xf a.tar -C .claude",
        "python3 -c 'open(\".agents/skills/x/SKILL.md\", \"w\")'",
        // Quotes and backslashes the shell takes away hide no name.
        "mkdir -p .ds''h/skills/y && echo evil > .ds''h/skills/y/SKILL.md",
        "printf evil > AGENT\"S\".md",
        "mkdir -p .cl\\aude/commands && touch .cl\\aude/commands/x.md",
    ] {
        with_context(|ctx| {
            assert_eq!(
                choices(&exec(line), ctx).unattended,
                Unattended::FullAccessOnly,
                "{line}"
            );
        });
    }
    for line in [
        "cargo test",
        "npm run build && git add -A",
        "git commit -m 'update AGENTS.md'",
        "cat .gitignore",
    ] {
        with_context(|ctx| {
            assert_eq!(
                choices(&exec(line), ctx).unattended,
                Unattended::Covered,
                "{line}"
            );
        });
    }
}
