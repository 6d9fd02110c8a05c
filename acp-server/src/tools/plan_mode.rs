//! `exit_plan_mode`: in plan mode the model submits its plan here for the
//! user to approve. The schema is the seeds' (one required `plan`,
//! markdown starting with a `#` heading); the tool is always offered and
//! refused outside plan mode. The turn runs it ([`crate::turn`]): it needs
//! the editor (the approval) and the log (the mode change).

use dsh_protocol::tool::{ToolContent, ToolKind, ToolView};
use serde::Deserialize;

pub const DESCRIPTION: &str = "Use only in plan mode. Submit the plan for the user to review, and leave plan mode once it is approved. Send the COMPLETE markdown plan, starting with a # heading that names the plan. The user can approve it (you carry it out from your next step) or ask you to keep planning; their feedback comes back in the tool result: revise the plan and submit it again.";

#[derive(Debug, Clone, Deserialize)]
pub struct ExitPlanArgs {
    pub plan: String,
}

/// The plan's name: its first `#` heading (escaped with every title, in
/// [`super::plan`]).
pub fn title(plan: &str) -> String {
    let heading = plan
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with('#'))
        .map(|line| line.trim_start_matches('#').trim())
        .filter(|line| !line.is_empty());
    match heading {
        Some(heading) => format!("Plan: {heading}"),
        None => "Plan".to_owned(),
    }
}

/// How the plan is shown for review (the tool call and the permission
/// prompt): its title, and the plan with bidi overrides and isolates,
/// terminal escapes and other control characters written out as `\u{…}`,
/// as a command is ([`dsh_protocol::content::visible`]), so the plan the
/// user approves reads as what it is. Newlines and tabs stay.
pub fn present(args: &ExitPlanArgs) -> ToolView {
    ToolView {
        title: title(&args.plan),
        kind: Some(ToolKind::Think),
        content: vec![ToolContent::Text {
            text: dsh_protocol::content::visible(&args.plan, true),
        }],
        ..ToolView::default()
    }
}

/// The model is told what is wrong with a plan that is not one.
pub fn validate(args: &ExitPlanArgs) -> Result<(), super::Refusal> {
    if args.plan.trim().is_empty() {
        return Err(super::Refusal::new(
            dsh_protocol::ErrorCode::InvalidToolArgs,
            "The plan is empty: send the whole plan as markdown, starting with a # heading.",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_is_shown_with_its_controls_written_out() {
        let view = present(&ExitPlanArgs {
            plan:
                "# Fix \u{202E}it\n\n1. \u{1b}]52;c;eA==\u{7}copy\u{9b}0m\n\t- \u{2066}x\u{2069}\r"
                    .to_owned(),
        });
        let [ToolContent::Text { text }] = view.content.as_slice() else {
            panic!("{:?}", view.content)
        };
        assert_eq!(
            text,
            "# Fix \\u{202e}it\n\n1. \\u{1b}]52;c;eA==\\u{7}copy\\u{9b}0m\n\t- \\u{2066}x\\u{2069}\\u{d}"
        );
        assert_eq!(view.kind, Some(ToolKind::Think));
    }
}
