//! Issue 23, items 10 and 18: code-running options and opaque lines
//! against allow and reject rules.

use super::*;

/// What a prompt for `command` would offer.
fn offered_ids(command: &str) -> Vec<&'static str> {
    with_context(|ctx| {
        choices(&exec(command), ctx)
            .options()
            .iter()
            .map(|option| option.id())
            .collect()
    })
}

/// Issue 23, item 10: an option that runs code named on the command line
/// (or a command whose whole invocation is code) voids the allow rule that
/// the plain command would have matched, and "always" is not offered for
/// it. Each row: the command, the rule that would have covered it.
#[test]
fn issue23_item10_code_running_options_void_allow_rules_and_always() {
    let table: &[(&str, &str)] = &[
        // git: options before the subcommand
        ("git -c core.pager='sh x' log", "git log"),
        ("git -ccore.pager=sh log", "git log"),
        ("git --config-env=core.pager=EVIL log", "git log"),
        ("git --exec-path=/tmp/x log", "git log"),
        // git: subcommand options
        ("git grep -O'sh x' foo", "git grep"),
        ("git grep -O foo", "git grep"),
        ("git grep -nO foo", "git grep"),
        ("git grep --open-files-in-pager='sh x' foo", "git grep"),
        ("git grep --open-files='sh x' foo", "git grep"),
        ("git fetch --upload-pack='sh x' origin", "git fetch"),
        ("git fetch --upload-pack 'sh x' origin", "git fetch"),
        ("git pull --upload-pack='sh x' origin", "git pull"),
        ("git clone -u 'sh x' src dst", "git clone"),
        ("git clone --template=./t src dst", "git clone"),
        ("git ls-remote --upload-pack='sh x' origin", "git ls-remote"),
        ("git ls-remote -u 'sh x' origin", "git ls-remote"),
        ("git push --receive-pack='sh x' origin", "git push"),
        ("git push --exec='sh x' origin", "git push"),
        ("git rebase --exec 'sh x' main", "git rebase"),
        ("git rebase -x 'sh x' main", "git rebase"),
        ("git rebase -ix 'sh x' main", "git rebase"),
        ("git diff --ext-diff", "git diff"),
        ("git log -p --textconv", "git log"),
        ("git log -1 --format=x --output=.envrc", "git log"),
        ("git difftool -x 'sh x'", "git difftool"),
        ("git difftool --extcmd='sh x'", "git difftool"),
        ("git mergetool --extcmd='sh x'", "git mergetool"),
        ("git bisect run sh x", "git bisect"),
        ("git config core.pager 'sh x'", "git config"),
        ("git config alias.l '!sh x'", "git config"),
        (
            "git send-email --sendmail-cmd='sh x' a.patch",
            "git send-email",
        ),
        ("git archive --remote=r --exec='sh x' HEAD", "git archive"),
        // tar
        (
            "tar --checkpoint=1 --checkpoint-action=exec='sh x' -cf a.tar .",
            "tar",
        ),
        ("tar -cf a.tar --checkpoint-act=exec=sh .", "tar"),
        ("tar -xf a.tar --to-command='sh x'", "tar"),
        ("tar -I 'sh x' -cf a.tar .", "tar"),
        ("tar -cIf 'sh x' a.tar .", "tar"),
        ("tar cIf 'sh x' a.tar .", "tar"),
        ("tar --use-compress-program='sh x' -cf a.tar .", "tar"),
        ("tar -cf h:a.tar --rsh-command='sh x' .", "tar"),
        ("tar -F 'sh x' -cf a.tar .", "tar"),
        ("tar --info-script='sh x' -cf a.tar .", "tar"),
        ("tar --new-volume-script='sh x' -cf a.tar .", "tar"),
        // a file named like an option: `*` may expand to `--checkpoint-action=…`
        ("tar -cf a.tar *", "tar"),
        ("git grep -n* foo", "git grep"),
        ("tar -cf a.tar --checkpoint-a*=exec=sh .", "tar"),
        // sort, zip
        ("sort --compress-program='sh x' f", "sort"),
        ("sort --compress-prog=sh f", "sort"),
        ("zip -TT 'sh x' a.zip f", "zip"),
        ("zip -T --unzip-command 'sh x' a.zip f", "zip"),
        ("zip -rTT 'sh x' a.zip d", "zip"),
        // rsync
        ("rsync -e 'sh x' a h:b", "rsync"),
        ("rsync -ave 'sh x' a h:b", "rsync"),
        ("rsync -e'ssh -o ProxyCommand=sh' a h:b", "rsync"),
        ("rsync --rsh='sh x' a h:b", "rsync"),
        ("rsync --rsync-path='sh x' a h:b", "rsync"),
        // scp, sftp
        ("scp -o ProxyCommand='sh x' a h:b", "scp"),
        ("scp -oProxyCommand=sh a h:b", "scp"),
        ("scp -o 'proxycommand sh x' a h:b", "scp"),
        (
            "sftp -o PermitLocalCommand=yes -o LocalCommand=sh h",
            "sftp",
        ),
        ("scp -o 'Match exec \"sh x\"' a h:b", "scp"),
        ("scp -F ./ssh_config a h:b", "scp"),
        ("scp -S 'sh x' a h:b", "scp"),
        // ripgrep, fd
        ("rg --pre 'sh x' foo", "rg"),
        ("rg --pre='sh x' foo", "rg"),
        ("rg -z foo", "rg"),
        ("fd -x sh", "fd"),
        ("fd --exec-batch sh", "fd"),
        // pagers and manuals
        ("man -P 'sh x' ls", "man"),
        ("man --pager='sh x' ls", "man"),
        ("less '+!sh x' f", "less"),
        // build tools: code in the command line, not the project's
        ("cargo test --config 'target.x.runner=\"sh\"'", "cargo test"),
        ("npm run build --script-shell='sh x'", "npm run build"),
        ("go test -exec 'sh x' ./...", "go test"),
        ("go build -toolexec='sh x' .", "go build"),
        ("go vet -vettool=./x .", "go vet"),
        // package installs run the named package's install scripts
        ("pip install evil", "pip install"),
        ("npm install evil", "npm install"),
        ("gem install evil", "gem install"),
        // shell builtins that keep code for later or load it
        ("trap 'sh x' EXIT", "trap"),
        ("alias ls='sh x'", "alias"),
        ("hash -p /bin/sh ls", "hash"),
        ("enable -f ./x.so x", "enable"),
        ("compgen -C 'sh x' w", "compgen"),
        ("mapfile -C 'sh x' a", "mapfile"),
        ("printf -v 'a[$(sh x)]' 1", "printf"),
        ("test -v 'a[$(sh x)]'", "test"),
        ("at now", "at"),
        // the program is chosen by a glob or a brace expansion
        ("/usr/bin/r[m] x", "/usr/bin/r[m]"),
        ("/usr/bin/l? x", "/usr/bin/l?"),
        ("{rm,-f,x}", "{rm,-f,x}"),
    ];
    let mut wrong = Vec::new();
    for (command, scope) in table {
        let allowed = check(
            Mode::Ask,
            "bash",
            exec(command),
            &[rule("bash", Some(scope), true)],
        );
        let offered = offered_ids(command);
        if allowed != "ask" || offered.contains(&"allow_always") {
            wrong.push(format!(
                "{command}: rule {scope:?} -> {allowed}, offered {offered:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The same programs without code-running options keep their rules and
/// their "always".
#[test]
fn issue23_item10_plain_uses_of_the_same_programs_stay_allowed() {
    let table: &[(&str, &str)] = &[
        ("git grep -n foo", "git grep"),
        ("git grep -e Ofoo", "git grep"),
        ("git fetch origin", "git fetch"),
        ("git push origin main", "git push"),
        ("git log -p", "git log"),
        ("git diff --stat", "git diff"),
        ("git rebase main", "git rebase"),
        ("git config --get user.name", "git config"),
        ("tar -czf a.tar.gz src", "tar"),
        ("tar -xf a.tar", "tar"),
        ("tar -cf a.tar src/*.rs", "tar"),
        ("tar -czf a.tgz --exclude=*.o src", "tar"),
        ("sort -u f", "sort"),
        ("zip -r a.zip src", "zip"),
        ("rsync -av a b", "rsync"),
        ("rsync -avz -e ssh a h:b", "rsync"),
        ("scp -o StrictHostKeyChecking=no a h:b", "scp"),
        ("rg -n foo", "rg"),
        ("man ls", "man"),
        ("cargo test --all", "cargo test"),
        ("npm run build", "npm run build"),
        ("npm install", "npm install"),
        ("go test ./...", "go test"),
        ("ls *.rs", "ls"),
    ];
    for (command, scope) in table {
        assert_eq!(
            check(
                Mode::Ask,
                "bash",
                exec(command),
                &[rule("bash", Some(scope), true)]
            ),
            "allow",
            "{command}"
        );
        assert!(offered_ids(command).contains(&"allow_always"), "{command}");
    }
}

/// Issue 23, item 18: a line whose commands the analysis cannot know (a
/// shell or interpreter reading code, a program named by an expansion, a
/// glob or braces, builtins that keep code for later, code-running
/// options) never runs unasked past a reject rule: it is asked about, or
/// denied where the rejected program shows. Full-access: nothing else asks.
#[test]
fn issue23_item18_opaque_commands_ask_despite_reject_rules() {
    let reject_rm = [rule("bash", Some("rm"), false)];
    let table: &[(&str, &str)] = &[
        ("echo 'rm x' | sh", "ask"),
        ("sh < f", "ask"),
        ("sh f", "ask"),
        ("bash -s <<< 'rm x'", "deny"),
        ("bash <<'EOF'\nrm x\nEOF", "deny"),
        ("bash -ec 'rm x'", "deny"),
        ("trap 'rm x' EXIT", "deny"),
        ("trap \"$X\" EXIT", "ask"),
        ("alias ls='rm x'", "deny"),
        ("/usr/bin/r[m] x", "ask"),
        ("{rm,-f,x}", "ask"),
        ("r{m,} x", "ask"),
        ("find . -exec sh -c 'rm x' \\;", "deny"),
        ("find . -exec {} \\;", "ask"),
        ("xargs sh -c 'rm x'", "deny"),
        ("xargs sh", "ask"),
        ("echo rm | xargs -I{} {} x", "ask"),
        ("env -S 'rm x'", "deny"),
        ("env -S\"rm x\"", "deny"),
        ("env $X x", "ask"),
        ("hash -p /bin/rm ls", "deny"),
        ("eval \"$X\"", "ask"),
        ("source f", "ask"),
        (". f", "ask"),
        ("exec \"$X\" x", "ask"),
        ("command -p rm x", "deny"),
        ("nice -n 5 rm x", "deny"),
        ("timeout -s KILL 5 rm x", "deny"),
        ("python3 <<'EOF'\nimport os; os.system('rm x')\nEOF", "ask"),
        (
            "node -e 'require(\"child_process\").execSync(\"rm x\")'",
            "ask",
        ),
        ("perl -e 'system(\"rm x\")'", "ask"),
        ("awk 'BEGIN{system(\"rm x\")}'", "ask"),
        ("sed 's/x/rm x/e' f", "ask"),
        ("$(echo rm) x", "ask"),
        ("`echo rm` x", "ask"),
        ("$X x", "ask"),
        ("PATH=/tmp/evil ls", "ask"),
        ("LD_PRELOAD=./x.so ls", "ask"),
        ("watch rm x", "deny"),
        ("git -c alias.x='!rm x' x", "ask"),
        ("git grep -O'rm x' y", "ask"),
        // through wrappers
        ("nice git grep -O'rm x' y", "ask"),
        ("env FOO=1 git fetch --upload-pack='rm x' origin", "ask"),
        ("command git -c core.pager='rm x' log", "ask"),
        (
            "tar --checkpoint=1 --checkpoint-action=exec='rm x' -cf a.tar .",
            "ask",
        ),
        // bash evaluates the subscript of a variable name it is given
        ("x='a[$(rm y)]'; test -v \"$x\"", "ask"),
        ("unset \"$x\"", "ask"),
        ("export PATH=\"$PATH:/tmp/evil\"; ls", "ask"),
        ("flock /tmp/l -c 'rm x'", "deny"),
        ("su -c 'rm x' u", "deny"),
        ("busybox sh", "ask"),
    ];
    let mut wrong = Vec::new();
    for (command, expected) in table {
        let got = check(Mode::FullAccess, "bash", exec(command), &reject_rm);
        if got != *expected {
            wrong.push(format!("{command:?}: {got}, expected {expected}"));
        }
        let offered = offered_ids(command);
        if offered.contains(&"allow_always") {
            wrong.push(format!("{command:?}: offers always"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Lines the analysis reads whole still run.
    for known in [
        "ls -la",
        "sed -n 1p f",
        "sed -i 's/a/b/' f",
        "awk '{print $1}' f",
        "git status",
        "cargo test",
        "[ -f \"$f\" ] && echo y",
        "[ \"$a\" = b ]",
        "find . -name '*.rs' -print",
        "command -v git",
        "git grep -n x",
        "trap - EXIT",
    ] {
        assert_eq!(
            check(Mode::FullAccess, "bash", exec(known), &reject_rm),
            "allow",
            "{known}"
        );
    }
}

/// Item 18: an allow rule for the shell, the wrapper or the interpreter
/// itself never covers what it reads.
#[test]
fn issue23_item18_opaque_commands_match_no_allow_rule() {
    let table: &[(&str, &str)] = &[
        ("sh < f", "sh"),
        ("bash -s <<< 'rm x'", "bash"),
        ("find . -exec sh -c 'rm x' \\;", "find"),
        ("xargs sh -c 'rm x'", "xargs"),
        ("env -S 'rm x'", "env"),
        ("eval 'rm x'", "eval"),
        ("source f", "source"),
        ("exec rm x", "exec"),
        ("command -p rm x", "command"),
        ("python3 <<'EOF'\nprint(1)\nEOF", "python3"),
        ("trap 'rm x' EXIT", "trap"),
        ("alias ls='rm x'", "alias"),
        ("hash -p /bin/rm ls", "hash"),
    ];
    for (command, scope) in table {
        assert_eq!(
            check(
                Mode::Ask,
                "bash",
                exec(command),
                &[rule("bash", Some(scope), true)]
            ),
            "ask",
            "{command}"
        );
        assert!(!offered_ids(command).contains(&"allow_always"), "{command}");
    }
}
