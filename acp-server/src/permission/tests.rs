use super::*;

fn roots() -> Vec<PathBuf> {
    vec![PathBuf::from("/w")]
}

fn protected() -> Protected {
    Protected::new(&["**/secret.cfg".to_owned()], Path::new("/home/u/.dsh")).unwrap()
}

fn exec(command: &str) -> Access {
    exec_in(Shell::Bash, command)
}

fn exec_in(shell: Shell, command: &str) -> Access {
    Access::Execute {
        command: command.into(),
        workdir: "/w".into(),
        shell,
    }
}

/// Runs `f` with the policy context of the test session.
fn with_context<T>(f: impl FnOnce(&Context<'_>) -> T) -> T {
    with_machine(crate::sandbox::Guard::PromptOnly, false, f)
}

/// Same, on a machine whose commands are guarded by `commands`, with the
/// web allowed in read-only or not.
fn with_machine<T>(
    commands: crate::sandbox::Guard,
    web_in_read_only: bool,
    f: impl FnOnce(&Context<'_>) -> T,
) -> T {
    let (roots, protected) = (roots(), protected());
    f(&Context {
        roots: &roots,
        protected: &protected,
        trust_workspace_servers: false,
        commands,
        web_in_read_only,
        home_readable: &[],
    })
}

fn rule(tool: &str, scope: Option<&str>, allow: bool) -> PermissionRule {
    PermissionRule {
        tool: tool.into(),
        scope: scope.map(Into::into),
        allow,
    }
}

fn check(mode: Mode, tool: &str, access: Access, rules: &[PermissionRule]) -> &'static str {
    match with_context(|ctx| decide(mode, tool, &access, ctx, rules)) {
        Decision::Allow => "allow",
        Decision::Deny(_) => "deny",
        Decision::Ask(_) => "ask",
    }
}

#[test]
fn mode_table() {
    let read_in = || Access::Read(vec!["/w/a".into()]);
    let read_out = || Access::Read(vec!["/etc/passwd".into()]);
    let write_in = || Access::Write(vec!["/w/a".into()]);
    let write_out = || Access::Write(vec!["/tmp/x".into()]);
    let ls = || exec("ls");
    let table = [
        (Mode::ReadOnly, ["allow", "deny", "deny", "deny", "deny"]),
        (Mode::Ask, ["allow", "ask", "ask", "ask", "ask"]),
        (Mode::AcceptEdits, ["allow", "ask", "allow", "ask", "ask"]),
        (
            Mode::FullAccess,
            ["allow", "allow", "allow", "allow", "allow"],
        ),
    ];
    for (mode, expected) in table {
        let got = [
            check(mode, "read", read_in(), &[]),
            check(mode, "read", read_out(), &[]),
            check(mode, "write", write_in(), &[]),
            check(mode, "write", write_out(), &[]),
            check(mode, "bash", ls(), &[]),
        ];
        assert_eq!(got, expected, "{mode:?}");
    }
}

#[test]
fn rules_are_scoped_and_never_widen() {
    let allow_cargo = [rule("bash", Some("cargo test"), true)];
    assert_eq!(
        check(Mode::Ask, "bash", exec("cargo test --all"), &allow_cargo),
        "allow"
    );
    assert_eq!(
        check(Mode::Ask, "bash", exec("cargo testx"), &allow_cargo),
        "ask"
    );
    assert_eq!(
        check(Mode::Ask, "bash", exec("cargo build"), &allow_cargo),
        "ask"
    );
    assert_eq!(
        check(
            Mode::Ask,
            "bash",
            exec("cargo test; rm -rf /"),
            &allow_cargo
        ),
        "ask"
    );
    assert_eq!(
        check(
            Mode::Ask,
            "bash",
            exec("cargo test && curl x | sh"),
            &allow_cargo
        ),
        "ask"
    );
    assert_eq!(
        check(
            Mode::Ask,
            "bash",
            exec("cargo test $(rm -rf ~)"),
            &allow_cargo
        ),
        "ask"
    );
    assert_eq!(
        check(Mode::ReadOnly, "bash", exec("cargo test"), &allow_cargo),
        "deny",
        "rules never beat read-only"
    );

    let allow_file = [rule("write", Some("/w/a"), true)];
    assert_eq!(
        check(
            Mode::Ask,
            "write",
            Access::Write(vec!["/w/a".into()]),
            &allow_file
        ),
        "allow"
    );
    assert_eq!(
        check(
            Mode::Ask,
            "write",
            Access::Write(vec!["/w/b".into()]),
            &allow_file
        ),
        "ask"
    );
    assert_eq!(
        check(
            Mode::Ask,
            "edit",
            Access::Write(vec!["/w/a".into()]),
            &allow_file
        ),
        "ask",
        "per tool"
    );
    let allow_outside = [rule("write", Some("/tmp/x"), true)];
    assert_eq!(
        check(
            Mode::AcceptEdits,
            "write",
            Access::Write(vec!["/tmp/x".into()]),
            &allow_outside
        ),
        "ask"
    );

    let reject = [rule("bash", Some("rm"), false)];
    assert_eq!(
        check(Mode::FullAccess, "bash", exec("rm -rf build"), &reject),
        "deny"
    );
    assert_eq!(check(Mode::Ask, "bash", exec("rm x; ls"), &reject), "deny");
}

#[test]
fn protected_paths_and_dsh_home() {
    let write = |path: &str| Access::Write(vec![path.into()]);
    assert_eq!(
        check(Mode::AcceptEdits, "write", write("/w/.git/config"), &[]),
        "ask"
    );
    assert_eq!(
        check(
            Mode::AcceptEdits,
            "write",
            write("/w/.git/hooks/pre-commit"),
            &[]
        ),
        "ask"
    );
    assert_eq!(
        check(Mode::AcceptEdits, "write", write("/w/sub/.envrc"), &[]),
        "ask"
    );
    assert_eq!(
        check(
            Mode::AcceptEdits,
            "write",
            write("/w/.vscode/tasks.json"),
            &[]
        ),
        "ask"
    );
    assert_eq!(
        check(Mode::AcceptEdits, "write", write("/w/a/secret.cfg"), &[]),
        "ask"
    );
    assert_eq!(
        check(Mode::AcceptEdits, "write", write("/w/src/git.rs"), &[]),
        "allow"
    );
    assert_eq!(
        check(Mode::ReadOnly, "write", write("/w/.git/config"), &[]),
        "deny"
    );
    assert_eq!(
        check(
            Mode::AcceptEdits,
            "write",
            write("/w/.git/config"),
            &[rule("write", Some("/w/.git/config"), true)]
        ),
        "ask",
        "rules never cover protected paths"
    );
    assert_eq!(
        check(Mode::FullAccess, "write", write("/w/.git/config"), &[]),
        "allow"
    );
    for mode in [Mode::Ask, Mode::AcceptEdits] {
        assert_eq!(
            check(mode, "write", write("/home/u/.dsh/config.toml"), &[]),
            "deny"
        );
    }
    assert_eq!(
        check(
            Mode::FullAccess,
            "write",
            write("/home/u/.dsh/config.toml"),
            &[]
        ),
        "allow"
    );
}

#[test]
fn workspace_programs_ask_once_per_program_and_never_in_read_only() {
    let launch = || Access::Launch {
        program: "/w/node_modules/.bin/tsls".into(),
        reads: vec!["/w/a.ts".into()],
    };
    assert_eq!(check(Mode::ReadOnly, "lsp", launch(), &[]), "deny");
    assert_eq!(check(Mode::AcceptEdits, "lsp", launch(), &[]), "ask");
    assert_eq!(check(Mode::FullAccess, "lsp", launch(), &[]), "allow");
    let allowed = [rule("lsp", Some("/w/node_modules/.bin/tsls"), true)];
    assert_eq!(check(Mode::Ask, "lsp", launch(), &allowed), "allow");
    assert_eq!(check(Mode::ReadOnly, "lsp", launch(), &allowed), "deny");
}

#[test]
fn allow_rules_need_plain_commands_and_reject_rules_see_through_them() {
    let allow_ls = [rule("bash", Some("ls"), true)];
    assert_eq!(check(Mode::Ask, "bash", exec("ls -la"), &allow_ls), "allow");
    for hostile in [
        "ls ${x:=a}${x@P}",
        "ls ${!x}",
        "ls ${y[x]}",
        "ls $(id)",
        "FOO=1 ls",
        "ls > x",
    ] {
        assert_eq!(
            check(Mode::Ask, "bash", exec(hostile), &allow_ls),
            "ask",
            "{hostile}"
        );
    }
    let allow_log = [rule("bash", Some("git log"), true)];
    assert_eq!(
        check(Mode::Ask, "bash", exec("git --no-pager log -3"), &allow_log),
        "allow"
    );
    assert_eq!(
        check(
            Mode::Ask,
            "bash",
            exec("git -c core.pager=x log"),
            &allow_log
        ),
        "ask"
    );
    let reject_rm = [rule("bash", Some("rm"), false)];
    for spelled in ["/bin/rm x", "\\rm x", "'rm' x", "command rm x", "env rm x"] {
        assert_eq!(
            check(Mode::FullAccess, "bash", exec(spelled), &reject_rm),
            "deny",
            "{spelled}"
        );
    }
    assert_eq!(
        check(Mode::FullAccess, "bash", exec("$c x"), &reject_rm),
        "ask"
    );
    assert_eq!(
        check(Mode::FullAccess, "bash", exec("ls"), &reject_rm),
        "allow"
    );
}

#[test]
fn always_is_offered_only_when_the_rule_could_match_again() {
    let remember = |access: Access| with_context(|ctx| choices(&access, ctx).remember);
    assert_eq!(remember(exec("echo a && pwd")), Remember::Never);
    assert_eq!(remember(exec("timeout 5 ls")), Remember::Never);
    assert_eq!(remember(exec("sed -i s/a/b/ x")), Remember::Never);
    assert_eq!(
        remember(exec("git --no-pager log")),
        Remember::Scope("git log".into())
    );
    assert_eq!(
        remember(Access::Write(vec!["/w/.git/config".into()])),
        Remember::Never
    );
    let launch = with_context(|ctx| {
        choices(
            &Access::Launch {
                program: "/w/venv/bin/pylsp".into(),
                reads: vec![],
            },
            ctx,
        )
    });
    assert!(!launch.once);
    assert_eq!(launch.remember, Remember::Scope("/w/venv/bin/pylsp".into()));
}

#[test]
fn plan_mode_reads_like_ask_and_changes_nothing() {
    let plan = |access: Access| check(Mode::Plan, "t", access, &[]);
    assert_eq!(plan(Access::Read(vec!["/w/a".into()])), "allow");
    assert_eq!(plan(Access::Read(vec!["/etc/hosts".into()])), "ask");
    assert_eq!(plan(Access::None), "allow");
    assert_eq!(plan(Access::Write(vec!["/w/a".into()])), "deny");
    assert_eq!(plan(exec("ls")), "deny");
    assert_eq!(plan(Access::External), "deny");
    // An allow rule from an earlier mode does not open a change.
    assert_eq!(
        check(
            Mode::Plan,
            "bash",
            exec("ls"),
            &[rule("bash", Some("ls"), true)]
        ),
        "deny"
    );
    let Decision::Deny(reason) = with_context(|ctx| {
        decide(
            Mode::Plan,
            "edit",
            &Access::Write(vec!["/w/a".into()]),
            ctx,
            &[],
        )
    }) else {
        unreachable!()
    };
    assert!(reason.contains("exit_plan_mode"), "{reason}");
}

#[test]
fn commands_follow_the_sandbox_the_machine_has() {
    use crate::sandbox::Guard;
    let decide_with = |guard: Guard, mode: Mode| {
        with_machine(guard, false, |ctx| {
            match decide(mode, "bash", &exec("ls"), ctx, &[]) {
                Decision::Allow => "allow",
                Decision::Deny(_) => "deny",
                Decision::Ask(_) => "ask",
            }
        })
    };
    let kernel = Guard::Kernel { network: false };
    // Mode by mode: read-only, plan, ask, accept-edits, full-access.
    for (guard, expected) in [
        (kernel, ["ask", "ask", "ask", "ask", "allow"]),
        (Guard::PromptOnly, ["deny", "deny", "ask", "ask", "allow"]),
        (Guard::Refused, ["deny", "deny", "deny", "deny", "allow"]),
    ] {
        let got = Mode::ALL.map(|mode| decide_with(guard, mode));
        assert_eq!(got, expected, "{guard:?}");
    }
    // "With network" is offered only where the sandbox keeps a command off
    // the network, and only for commands.
    let offered = |guard: Guard, access: &Access| {
        with_machine(guard, false, |ctx| {
            choices(access, ctx)
                .options()
                .iter()
                .map(|option| option.id())
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(
        offered(kernel, &exec("curl example.com")),
        [
            "allow_once",
            "allow_once_network",
            "allow_always",
            "reject_once",
            "reject_always"
        ]
    );
    assert!(!offered(Guard::Kernel { network: true }, &exec("ls")).contains(&"allow_once_network"));
    assert!(!offered(Guard::PromptOnly, &exec("ls")).contains(&"allow_once_network"));
    assert!(!offered(kernel, &Access::Write(vec!["/w/a".into()])).contains(&"allow_once_network"));
}

#[test]
fn the_web_is_asked_about_per_host_and_kept_from_read_only_unless_configured() {
    let fetch = |host: &str| Access::Web {
        host: Some(host.to_owned()),
    };
    let search = Access::Web { host: None };
    let always = [rule("web_fetch", Some("docs.rs"), true)];
    let table: [(Mode, &str, Access, &[PermissionRule], &str); 7] = [
        (Mode::ReadOnly, "web_fetch", fetch("docs.rs"), &[], "deny"),
        (Mode::Plan, "web_search", search.clone(), &[], "deny"),
        (Mode::Ask, "web_fetch", fetch("docs.rs"), &[], "ask"),
        (Mode::AcceptEdits, "web_search", search.clone(), &[], "ask"),
        (
            Mode::FullAccess,
            "web_fetch",
            fetch("docs.rs"),
            &[],
            "allow",
        ),
        // "Always" is per host.
        (Mode::Ask, "web_fetch", fetch("docs.rs"), &always, "allow"),
        (
            Mode::Ask,
            "web_fetch",
            fetch("evil.example"),
            &always,
            "ask",
        ),
    ];
    for (mode, tool, access, rules, expected) in table {
        assert_eq!(
            check(mode, tool, access.clone(), rules),
            expected,
            "{mode:?} {access:?}"
        );
    }
    with_machine(crate::sandbox::Guard::PromptOnly, true, |ctx| {
        assert!(matches!(
            decide(Mode::ReadOnly, "web_fetch", &fetch("docs.rs"), ctx, &[]),
            Decision::Ask(_)
        ));
        assert_eq!(
            choices(&fetch("docs.rs"), ctx).remember,
            Remember::Scope("docs.rs".to_owned())
        );
        assert_eq!(choices(&search, ctx).remember, Remember::Tool);
    });
}

mod code_options;
mod steering;

#[test]
fn the_file_tools_read_dsh_home_only_where_it_holds_no_secrets() {
    let read = |path: &str| Access::Read(vec![PathBuf::from(path)]);
    let readable = [
        PathBuf::from("/home/u/.dsh/spill/s1"),
        PathBuf::from("/home/u/.dsh/skills"),
    ];
    let decide_read = |mode, path: &str, roots: &[PathBuf]| {
        let protected = protected();
        let ctx = Context {
            roots,
            protected: &protected,
            trust_workspace_servers: false,
            commands: crate::sandbox::Guard::PromptOnly,
            web_in_read_only: false,
            home_readable: &readable,
        };
        match decide(mode, "read", &read(path), &ctx, &[]) {
            Decision::Allow => "allow",
            Decision::Deny(_) => "deny",
            Decision::Ask(_) => "ask",
        }
    };
    // The key and the logs: refused below full-access, asked in it —
    // also when $DSH_HOME is inside the workspace (a cwd of $HOME).
    for roots in [vec![PathBuf::from("/w")], vec![PathBuf::from("/home/u")]] {
        for mode in [Mode::ReadOnly, Mode::Plan, Mode::Ask, Mode::AcceptEdits] {
            for path in [
                "/home/u/.dsh/.credentials.yaml",
                "/home/u/.dsh/sessions/s2.jsonl",
                "/home/u/.dsh/spill/s2/out.txt",
            ] {
                assert_eq!(decide_read(mode, path, &roots), "deny", "{mode:?} {path}");
            }
        }
        assert_eq!(
            decide_read(Mode::FullAccess, "/home/u/.dsh/.credentials.yaml", &roots),
            "ask"
        );
    }
    // The session's own spilled output and the user's skills read as any
    // path does.
    let home_root = [PathBuf::from("/home/u")];
    assert_eq!(
        decide_read(Mode::Ask, "/home/u/.dsh/spill/s1/out.txt", &home_root),
        "allow"
    );
    assert_eq!(
        decide_read(Mode::Ask, "/home/u/.dsh/skills/a/template.md", &roots()),
        "ask"
    );
}

#[test]
fn powershell_and_cmd_lines_are_asked_and_remembered_as_the_exact_line() {
    let decide_in = |mode, shell, command: &str, rules: &[PermissionRule]| {
        let tool = if shell == Shell::Cmd { "bash" } else { "pwsh" };
        match with_context(|ctx| decide(mode, tool, &exec_in(shell, command), ctx, rules)) {
            Decision::Allow => "allow",
            Decision::Deny(_) => "deny",
            Decision::Ask(_) => "ask",
        }
    };
    let remember =
        |shell, command: &str| with_context(|ctx| choices(&exec_in(shell, command), ctx).remember);
    for (shell, tool) in [(Shell::PowerShell, "pwsh"), (Shell::Cmd, "bash")] {
        // Never read as a plain command: even `ls` asks below full-access.
        for mode in [Mode::Ask, Mode::AcceptEdits] {
            assert_eq!(decide_in(mode, shell, "ls", &[]), "ask");
        }
        assert_eq!(decide_in(Mode::FullAccess, shell, "ls", &[]), "allow");
        assert_eq!(decide_in(Mode::ReadOnly, shell, "ls", &[]), "deny");
        // "Always" is for the exact line, nothing it starts with.
        assert_eq!(
            remember(shell, "git log -3"),
            Remember::Scope("git log -3".into())
        );
        let allow = [rule(tool, Some("git log -3"), true)];
        assert_eq!(decide_in(Mode::Ask, shell, "git log -3", &allow), "allow");
        for other in [
            "git log -3; del x",
            "git log -3 | rm",
            "git log",
            "git log -3 ",
        ] {
            assert_eq!(decide_in(Mode::Ask, shell, other, &allow), "ask", "{other}");
        }
        // A reject rule may concern any line it cannot read.
        let reject = [rule(tool, Some("Remove-Item x"), false)];
        assert_eq!(
            decide_in(Mode::FullAccess, shell, "Remove-Item x", &reject),
            "deny"
        );
        assert_eq!(decide_in(Mode::FullAccess, shell, "ri x", &reject), "ask");
    }
    // bash rules say nothing of PowerShell lines.
    let allow_ls = [rule("bash", Some("ls"), true)];
    assert_eq!(
        decide_in(Mode::Ask, Shell::PowerShell, "ls", &allow_ls),
        "ask"
    );
    // Protected names are found through each shell's own escapes and
    // path separators; such a line is never remembered.
    for (shell, line) in [
        (Shell::PowerShell, "Set-Content -Path 'AGE`NTS.md' -Value x"),
        (Shell::PowerShell, "Remove-Item sub\\..\\.d`sh -Recurse"),
        (Shell::Cmd, "echo x > AGE^NTS.md"),
    ] {
        assert_eq!(remember(shell, line), Remember::Never, "{line}");
        let allow = [
            rule("pwsh", Some(line), true),
            rule("bash", Some(line), true),
        ];
        assert_eq!(decide_in(Mode::Ask, shell, line, &allow), "ask", "{line}");
    }
}

#[test]
fn text_for_an_unknown_reader_is_always_asked_and_never_remembered() {
    let typed = || exec_in(Shell::Unknown, "ls");
    let rules = [
        rule("terminal_send", Some("ls"), true),
        rule("terminal_send", None, true),
    ];
    assert_eq!(check(Mode::Ask, "terminal_send", typed(), &rules), "ask");
    assert_eq!(
        check(Mode::AcceptEdits, "terminal_send", typed(), &rules),
        "ask"
    );
    assert_eq!(
        check(Mode::FullAccess, "terminal_send", typed(), &[]),
        "allow"
    );
    assert_eq!(
        check(Mode::Ask, "terminal_send", exec("ls"), &rules),
        "allow"
    );
    let reject = [rule("terminal_send", Some("ls"), false)];
    assert_eq!(check(Mode::Ask, "terminal_send", typed(), &reject), "deny");
    let remember = with_context(|ctx| choices(&typed(), ctx).remember);
    assert_eq!(remember, Remember::Never);
}
