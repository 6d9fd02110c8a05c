//! The tables' own tests.

use super::scripts::*;
use super::wrappers::*;

fn words(line: &str) -> Vec<Option<String>> {
    line.split_whitespace()
        .map(|w| Some(w.to_owned()))
        .collect()
}

#[test]
fn sed_scripts_that_run_commands() {
    for runs in ["s/a/b/e", "1e ls", "/x/ e", "s|a|b|ge", "y/a/b/;e", "s/a"] {
        assert!(sed_script_runs(runs), "{runs}");
    }
    for safe in [
        "s/a/b/",
        "1,5p",
        "$d",
        "s/e/E/g",
        "/e/d",
        "s/a\\/e/b/",
        "/x/,/y/{s/a/b/;p}",
        "a hello e",
        "2q",
        "y/abc/xyz/",
    ] {
        assert!(!sed_script_runs(safe), "{safe}");
    }
}

#[test]
fn wrappers_are_unwrapped_by_their_options() {
    assert_eq!(
        wrapped("timeout", &words("-s KILL 5 rm x")),
        Wrapped::At(vec![(3, 5)])
    );
    assert_eq!(
        wrapped("nice", &words("-n 5 rm x")),
        Wrapped::At(vec![(2, 4)])
    );
    assert_eq!(
        wrapped("nice", &words("-10 rm x")),
        Wrapped::At(vec![(1, 3)])
    );
    assert_eq!(
        wrapped("env", &words("-i FOO=1 -u BAR rm x")),
        Wrapped::At(vec![(4, 6)])
    );
    assert_eq!(
        wrapped("env", &words("-iS'rm")),
        Wrapped::Text("'rm".into())
    );
    assert_eq!(wrapped("env", &words("PATH=/tmp rm")), Wrapped::Unknown);
    assert_eq!(
        wrapped("command", &words("-p rm x")),
        Wrapped::At(vec![(1, 3)])
    );
    assert_eq!(wrapped("command", &words("-v rm")), Wrapped::Nothing);
    assert_eq!(
        wrapped("xargs", &words("-0 -n 1 rm")),
        Wrapped::At(vec![(3, 4)])
    );
    assert_eq!(wrapped("xargs", &words("-I{} {} x")), Wrapped::Unknown);
    assert_eq!(
        wrapped("find", &words(". -exec rm {} ; -execdir ls +")),
        Wrapped::At(vec![(2, 4), (6, 7)])
    );
    assert_eq!(
        wrapped("watch", &words("-n 1 rm x")),
        Wrapped::Text("rm x".into())
    );
    assert_eq!(
        shell_runs("bash", &words("-ec x")),
        ShellRuns::Text("x".into())
    );
    assert_eq!(
        shell_runs("bash", &words("-o pipefail -c x")),
        ShellRuns::Text("x".into())
    );
    assert_eq!(shell_runs("bash", &words("-s")), ShellRuns::Unknown);
    assert_eq!(shell_runs("bash", &words("script.sh")), ShellRuns::Unknown);
    assert_eq!(
        shell_runs("bash", &words("--rcfile f -c x")),
        ShellRuns::Unknown
    );
}
