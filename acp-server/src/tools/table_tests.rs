//! The tool table's own checks.
use super::*;

#[test]
fn the_table_is_by_name_with_one_row_per_tool() {
    let names: Vec<&str> = TABLE.iter().map(|spec| spec.name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(names, sorted);
    for spec in &TABLE {
        assert_eq!(spec.tool.spec().name, spec.name);
    }
}

#[test]
fn offers_follow_the_settings() {
    let none = Offer::default();
    let all = Offer {
        jobs: true,
        web_fetch: true,
        web_search: true,
        skills: true,
        subagents: true,
        images: true,
        goals: true,
        enabled: TABLE
            .iter()
            .fold(ToolSet::default(), |set, spec| set.with(spec.tool)),
        disabled: ToolSet::default(),
    };
    assert_eq!(schemas(none).len(), 10);
    assert_eq!(schemas(all).len(), TABLE.len());
    assert_eq!(Tool::offered("job_output", none), None);
    assert_eq!(Tool::offered("job_output", all), Some(Tool::JobOutput));
    // The platform's shell tool (`bash`, or `pwsh` on Windows).
    let bash = |offer| {
        schemas(offer)
            .into_iter()
            .find(|schema| Tool::named(&schema.name).is_some_and(super::super::shell::by_default))
            .unwrap()
            .description
    };
    // `pwsh` is the platform's or opt-in; `bash` only the platform's
    // or opt-in (Windows with PowerShell).
    let shell = super::super::shell::by_default;
    assert_eq!(Tool::offered("pwsh", none).is_some(), shell(Tool::Pwsh));
    assert_eq!(Tool::offered("bash", none).is_some(), shell(Tool::Bash));
    assert_eq!(Tool::offered("pwsh", all), Some(Tool::Pwsh));
    assert_eq!(Tool::offered("bash", all), Some(Tool::Bash));
    assert!(bash(all).contains("run_in_background"));
    assert!(!bash(none).contains("run_in_background"));
    assert!(touches_files("lsp") && !touches_files("bash") && !touches_files("mcp__a__b"));
}
