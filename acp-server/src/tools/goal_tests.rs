//! The goal's rules: who may change it, which revision, when `blocked`
//! is allowed, and the caps.

use super::*;

fn settings() -> GoalSettings {
    GoalSettings::default()
}

fn created(objective: &str) -> Goal {
    apply(
        None,
        Change::Create {
            objective: objective.to_owned(),
            max_rounds: Some(5),
        },
        Authority::Human,
        None,
        &settings(),
        || "g1".to_owned(),
    )
    .unwrap()
    .1
}

fn update(action: &str) -> UpdateArgs {
    UpdateArgs {
        goal_id: "g1".to_owned(),
        revision: 1.0,
        action: action.to_owned(),
        objective: None,
        max_goal_rounds: None,
        blocked_reason: None,
    }
}

fn named(goal: &Goal) -> Named<'_> {
    Named {
        id: &goal.id,
        revision: goal.revision as f64,
    }
}

#[test]
fn only_the_person_creates_edits_pauses_and_resumes() {
    let goal = created("ship it");
    assert_eq!(
        (goal.revision, goal.phase, goal.max_rounds),
        (1, GoalPhase::Active, 5)
    );
    for who in [Authority::Round, Authority::Other] {
        let create = Change::Create {
            objective: "x".to_owned(),
            max_rounds: None,
        };
        let refused = apply(None, create, who, None, &settings(), || "g2".to_owned());
        assert!(refused.unwrap_err().contains("Only the person"));
        for change in [
            Change::Pause,
            Change::Resume,
            Change::Edit {
                objective: Some("y".to_owned()),
                max_rounds: None,
            },
        ] {
            let refused = apply(
                Some(&goal),
                change,
                who,
                Some(named(&goal)),
                &settings(),
                String::new,
            );
            assert!(refused.unwrap_err().contains("Only the person"), "{who:?}");
        }
    }
    // The person pauses it, then resumes it.
    let (kind, paused) = apply(
        Some(&goal),
        Change::Pause,
        Authority::Human,
        Some(named(&goal)),
        &settings(),
        String::new,
    )
    .unwrap();
    assert_eq!(
        (kind, paused.phase, paused.revision),
        (GoalChangeKind::Paused, GoalPhase::Paused, 2)
    );
    let (kind, resumed) = apply(
        Some(&paused),
        Change::Resume,
        Authority::Human,
        None,
        &settings(),
        String::new,
    )
    .unwrap();
    assert_eq!(
        (kind, resumed.phase),
        (GoalChangeKind::Resumed, GoalPhase::Active)
    );
    // A second goal while one is active is refused.
    let again = apply(
        Some(&resumed),
        Change::Create {
            objective: "other".to_owned(),
            max_rounds: None,
        },
        Authority::Human,
        None,
        &settings(),
        || "g2".to_owned(),
    );
    assert!(again.unwrap_err().contains("already has a goal"));
}

#[test]
fn a_round_may_complete_but_not_block_before_the_minimum_rounds() {
    let mut goal = created("ship it");
    let blocked = || Change::Blocked {
        reason: "the API key is revoked".to_owned(),
    };
    // Not before three rounds in a row (the default).
    for round in 0..3 {
        let refused = apply(
            Some(&goal),
            blocked(),
            Authority::Round,
            Some(named(&goal)),
            &settings(),
            String::new,
        );
        let refused = refused.unwrap_err();
        assert!(
            refused.contains("after 3 goal rounds") && refused.contains(&format!("{round} ran")),
            "{refused}"
        );
        goal = next_round(&goal).unwrap();
    }
    assert_eq!(
        (goal.rounds_used, goal.consecutive_rounds, goal.revision),
        (3, 3, 4)
    );
    let (kind, now) = apply(
        Some(&goal),
        blocked(),
        Authority::Round,
        Some(named(&goal)),
        &settings(),
        String::new,
    )
    .unwrap();
    assert_eq!(
        (kind, now.phase),
        (GoalChangeKind::Blocked, GoalPhase::Blocked)
    );
    assert_eq!(
        now.blocked_reason.as_deref(),
        Some("the API key is revoked")
    );
    // Configurable: one round is enough when the setting says so.
    let one = GoalSettings {
        blocked_after_rounds: 1,
        ..settings()
    };
    let fresh = next_round(&created("x")).unwrap();
    assert!(apply(
        Some(&fresh),
        blocked(),
        Authority::Round,
        None,
        &one,
        String::new
    )
    .is_ok());
    // A round completes the goal; something else (a wake-up) may not.
    let done = apply(
        Some(&goal),
        Change::Complete,
        Authority::Round,
        None,
        &settings(),
        String::new,
    );
    assert_eq!(done.unwrap().1.phase, GoalPhase::Complete);
    let other = apply(
        Some(&goal),
        Change::Complete,
        Authority::Other,
        None,
        &settings(),
        String::new,
    );
    assert!(other.is_err());
    // Resuming resets the rounds in a row (blocked needs three again).
    let (_, resumed) = apply(
        Some(&now),
        Change::Resume,
        Authority::Human,
        None,
        &settings(),
        String::new,
    )
    .unwrap();
    assert_eq!((resumed.consecutive_rounds, resumed.rounds_used), (0, 3));
}

#[test]
fn a_stale_revision_or_another_goal_is_refused_with_the_current_one() {
    let goal = next_round(&created("ship it")).unwrap();
    let stale = Named {
        id: "g1",
        revision: 1.0,
    };
    let refused = apply(
        Some(&goal),
        Change::Complete,
        Authority::Human,
        Some(stale),
        &settings(),
        String::new,
    )
    .unwrap_err();
    assert!(refused.contains("g1 at revision 2"), "{refused}");
    let other = Named {
        id: "g9",
        revision: 2.0,
    };
    assert!(apply(
        Some(&goal),
        Change::Complete,
        Authority::Human,
        Some(other),
        &settings(),
        String::new
    )
    .is_err());
    let current = Named {
        id: "g1",
        revision: 2.0,
    };
    assert!(apply(
        Some(&goal),
        Change::Complete,
        Authority::Human,
        Some(current),
        &settings(),
        String::new
    )
    .is_ok());
    // No goal: nothing to update.
    assert!(apply(
        None,
        Change::Pause,
        Authority::Human,
        None,
        &settings(),
        String::new
    )
    .unwrap_err()
    .contains("no goal"));
}

#[test]
fn updates_are_checked_and_caps_follow_the_settings() {
    assert!(Change::of_update(&update("finish"))
        .unwrap_err()
        .contains("Unknown action"));
    assert!(Change::of_update(&update("blocked"))
        .unwrap_err()
        .contains("blocked_reason"));
    assert!(Change::of_update(&update("edit"))
        .unwrap_err()
        .contains("edit needs"));
    let mut pause = update("pause");
    pause.objective = Some("x".to_owned());
    assert!(Change::of_update(&pause)
        .unwrap_err()
        .contains("only with action edit"));
    let mut edit = update("edit");
    edit.max_goal_rounds = Some(2.5);
    assert!(Change::of_update(&edit)
        .unwrap_err()
        .contains("positive whole number"));
    edit.max_goal_rounds = Some(7.0);
    assert_eq!(
        Change::of_update(&edit).unwrap(),
        Change::Edit {
            objective: None,
            max_rounds: Some(7)
        }
    );
    assert!(rounds(0.0).is_err() && rounds(-1.0).is_err());
    // The default cap, which is also the most any goal may have (an
    // unbounded cap from the model is cut to it, and it is told), and
    // `dsh run --max-goal-rounds` as a further ceiling.
    assert_eq!(settings().cap(None), 20);
    assert_eq!(settings().cap(Some(u32::MAX)), 20);
    assert_eq!(settings().cap(Some(7)), 7);
    assert!(settings()
        .lowered(Some(u32::MAX))
        .is_some_and(|told| told.contains("lowered to 20")));
    assert_eq!(settings().lowered(Some(20)), None);
    let ceiling = GoalSettings {
        ceiling: Some(2),
        ..settings()
    };
    assert_eq!(
        (
            ceiling.cap(None),
            ceiling.cap(Some(9)),
            ceiling.cap(Some(1))
        ),
        (2, 2, 1)
    );
    assert!(GoalSettings {
        max_goal_rounds: 0,
        ..settings()
    }
    .checked()
    .is_err());
    // A goal at its cap is not resumed (its cap is raised first).
    let mut goal = created("x");
    for _ in 0..5 {
        goal = next_round(&goal).unwrap();
    }
    assert!(!has_rounds_left(&goal));
    goal.phase = GoalPhase::Paused;
    let refused = apply(
        Some(&goal),
        Change::Resume,
        Authority::Human,
        None,
        &settings(),
        String::new,
    );
    assert!(refused.unwrap_err().contains("used all its 5 rounds"));
}

#[test]
fn the_continuation_and_the_marker_name_the_round() {
    let goal = next_round(&created("make the tests pass")).unwrap();
    let text = continuation(&goal);
    assert!(text.starts_with("[Goal round 1 of 5]"), "{text}");
    assert!(text.contains("make the tests pass") && text.contains("update_goal"));
    assert!(crate::projection::goal_note(GoalChangeKind::Round, &goal).contains("Goal round 1/5"));
    let shown = describe(Some(&goal), true);
    assert!(
        shown.contains("goal_id: g1") && shown.contains("next_round_armed: true"),
        "{shown}"
    );
    assert!(describe(Some(&goal), false).contains("next_round_armed: false"));
}

#[test]
fn a_revision_at_its_largest_is_refused_not_wrapped() {
    let mut goal = created("x");
    goal.revision = u64::MAX;
    assert!(next_round(&goal).is_err());
    let paused = apply(
        Some(&goal),
        Change::Pause,
        Authority::Human,
        None,
        &settings(),
        String::new,
    );
    assert!(paused.is_err_and(|why| why.contains("cannot go higher")));
}

#[test]
fn the_update_title_shows_no_invisible_characters() {
    let (_, view) = plan(
        Tool::UpdateGoal,
        "update_goal",
        r#"{"goal_id":"g1","revision":1,"action":"pause\u202e\nnext"}"#,
    )
    .unwrap();
    assert!(!view.title.contains('\u{202e}') && !view.title.contains('\n'));
}
