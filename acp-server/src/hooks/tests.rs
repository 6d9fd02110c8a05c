use std::time::Duration;

use super::*;

const SECOND: Duration = Duration::from_secs(1);

fn parse(text: &str) -> HookSet {
    HookSet::parse(text, Source::User, SECOND).unwrap().0
}

fn commands(hooks: &[Hook]) -> Vec<&str> {
    hooks.iter().map(|hook| hook.command.as_str()).collect()
}

#[test]
fn reads_a_hooks_file_and_a_settings_file_alike() {
    let file = r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "check", "timeout": 5}]}]}, "model": "x"}"#;
    let set = parse(file);
    let hooks = set.matching(HookEvent::PreToolUse, "bash");
    assert_eq!(commands(&hooks), ["check"]);
    assert_eq!(hooks[0].timeout, Duration::from_secs(5));
    assert_eq!(hooks[0].source, Source::User);
    // Without the `hooks` key: the events at the top.
    let bare = parse(r#"{"Stop": [{"hooks": [{"type": "command", "command": "more"}]}]}"#);
    let hooks = bare.matching(HookEvent::Stop, "");
    assert_eq!(commands(&hooks), ["more"]);
    assert_eq!(hooks[0].timeout, SECOND, "the default timeout");
}

#[test]
fn matchers_are_anchored_regexes_over_the_name_and_its_claude_code_spelling() {
    let set = parse(
        r#"{"hooks": {"PreToolUse": [
            {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "edits"}]},
            {"matcher": "web_.*", "hooks": [{"type": "command", "command": "web"}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": "all"}]},
            {"hooks": [{"type": "command", "command": "all"}]},
            {"matcher": "Read", "hooks": [{"type": "command", "command": "read"}]}
        ]}}"#,
    );
    assert_eq!(
        commands(&set.matching(HookEvent::PreToolUse, "edit")),
        ["edits", "all"]
    );
    assert_eq!(
        commands(&set.matching(HookEvent::PreToolUse, "web_fetch")),
        ["web", "all"]
    );
    // Anchored: `Read` is not a prefix match of `read_many`.
    assert_eq!(
        commands(&set.matching(HookEvent::PreToolUse, "read_many")),
        ["all"]
    );
    assert!(set.matching(HookEvent::PostToolUse, "edit").is_empty());
}

#[test]
fn events_without_matchers_run_every_group() {
    let set = parse(
        r#"{"UserPromptSubmit": [{"matcher": "nothing", "hooks": [{"type": "command", "command": "a"}]}]}"#,
    );
    assert_eq!(
        commands(&set.matching(HookEvent::UserPromptSubmit, "")),
        ["a"]
    );
}

#[test]
fn unknown_events_and_hook_types_are_skipped_with_warnings_and_bad_matchers_refused() {
    let (set, warnings) = HookSet::parse(
        r#"{"Notification": [], "Stop": [{"hooks": [{"type": "prompt", "prompt": "x"}]}]}"#,
        Source::Project,
        SECOND,
    )
    .unwrap();
    assert!(set.is_empty());
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    let error = HookSet::parse(
        r#"{"PreToolUse": [{"matcher": "(", "hooks": []}]}"#,
        Source::User,
        SECOND,
    )
    .unwrap_err();
    assert!(error.contains("matcher"), "{error}");
    assert!(HookSet::parse("[1]", Source::User, SECOND).is_err());
    assert!(HookSet::parse("not json", Source::User, SECOND).is_err());
}

fn report(code: i32, stdout: &str, stderr: &str) -> Report {
    Report {
        exit_code: Some(code),
        stdout: stdout.to_owned(),
        stderr: stderr.to_owned(),
        ..Report::default()
    }
}

#[test]
fn verdicts_add_up_deny_wins_and_exit_2_blocks_with_stderr() {
    let mut verdict = Verdict::default();
    let allow = r#"{"hookSpecificOutput": {"permissionDecision": "allow"}}"#;
    let deny = r#"{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "no"}}"#;
    verdict.add(&report(0, allow, ""), HookEvent::PreToolUse);
    assert_eq!(verdict.permission, Some(Permission::Allow));
    verdict.add(&report(0, deny, ""), HookEvent::PreToolUse);
    verdict.add(&report(0, allow, ""), HookEvent::PreToolUse);
    assert_eq!(verdict.permission, Some(Permission::Deny));
    assert_eq!(verdict.reason.as_deref(), Some("no"));
    assert_eq!(verdict.block, None);
    verdict.add(&report(2, "", "not this\n"), HookEvent::PreToolUse);
    assert_eq!(verdict.block.as_deref(), Some("not this"));
    // Other exit codes say nothing.
    let mut other = Verdict::default();
    other.add(&report(1, allow, "oops"), HookEvent::PreToolUse);
    assert_eq!(other, Verdict::default());
}

#[test]
fn context_comes_from_additional_context_or_plain_output_of_prompt_hooks() {
    let mut verdict = Verdict::default();
    verdict.add(
        &report(
            0,
            r#"{"hookSpecificOutput": {"additionalContext": "the date"}}"#,
            "",
        ),
        HookEvent::UserPromptSubmit,
    );
    verdict.add(&report(0, "plain words\n", ""), HookEvent::UserPromptSubmit);
    verdict.add(&report(0, "ignored", ""), HookEvent::PreToolUse);
    assert_eq!(verdict.context, ["the date", "plain words"]);
    let mut blocked = Verdict::default();
    blocked.add(
        &report(0, r#"{"decision": "block", "reason": "keep going"}"#, ""),
        HookEvent::Stop,
    );
    assert_eq!(blocked.block.as_deref(), Some("keep going"));
}

#[test]
fn settings_default_and_refuse_unknown_keys() {
    let settings: HookSettings = toml::from_str("").unwrap();
    assert_eq!(settings.timeout(), Duration::from_secs(60));
    assert!(settings.project && settings.config.is_none());
    assert!(toml::from_str::<HookSettings>("timeout = 3").is_err());
}

#[test]
fn project_hooks_are_read_beneath_the_root_with_their_hash() {
    let root = tempfile::tempdir().unwrap();
    assert!(read_project(root.path(), SECOND).unwrap().is_none());
    std::fs::create_dir(root.path().join(".dsh")).unwrap();
    let text = r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}}"#;
    std::fs::write(root.path().join(PROJECT_FILE), text).unwrap();
    let project = read_project(root.path(), SECOND).unwrap().unwrap();
    assert_eq!(project.hash.len(), 64);
    assert_eq!(
        project.set.matching(HookEvent::Stop, "")[0].source,
        Source::Project
    );
    std::fs::write(root.path().join(PROJECT_FILE), "{").unwrap();
    assert!(read_project(root.path(), SECOND).is_err());
}
