//! Extending dsh from files: skills (the catalog the model is given, the
//! `skill` tool, `/<skill>`) and custom slash commands (offered, expanded,
//! offered again when they change).

use agent_client_protocol::v1::schema::{AvailableCommandInput, SessionUpdate, StopReason};
use serde_json::{json, Value};

use crate::support::*;

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn skill(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")
}

/// The text of the last user message of a request.
fn last_user(request: &Value) -> String {
    let message = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap();
    message_text(message)
}

/// Every offered command of the `index`th `available_commands_update`:
/// name, description, hint.
fn offered(conn: &Conn, index: usize) -> Vec<(String, String, Option<String>)> {
    let commands = conn.commands();
    let SessionUpdate::AvailableCommandsUpdate(update) = &commands[index].update else {
        unreachable!()
    };
    update
        .available_commands
        .iter()
        .map(|command| {
            let hint = match &command.input {
                Some(AvailableCommandInput::Unstructured(input)) => Some(input.hint.clone()),
                _ => None,
            };
            (command.name.clone(), command.description.clone(), hint)
        })
        .collect()
}

#[tokio::test]
async fn skills_are_catalogued_loaded_with_the_tool_and_offered_as_commands() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    std::fs::create_dir(cwd.join(".git")).unwrap();
    let home = env.home.path();
    write(
        &cwd.join(".dsh/skills/release-notes/SKILL.md"),
        &skill(
            "release-notes",
            "Write release notes from the git log. Use when asked for release notes.",
            "# Release notes\nRun `git log` since the last tag; group by kind; see template.md here.",
        ),
    );
    write(
        &cwd.join(".dsh/skills/release-notes/template.md"),
        "## Added\n",
    );
    // The user's skill of the same name is shadowed by the project's.
    write(
        &home.join("skills/release-notes/SKILL.md"),
        &skill("release-notes", "The user's own version", "user body"),
    );
    write(
        &home.join("skills/tidy-up/SKILL.md"),
        &skill("tidy-up", "Remove dead code", "Delete what nothing calls."),
    );
    // Claude Code's directory is read too.
    write(
        &cwd.join(".claude/skills/pdf-forms/SKILL.md"),
        &skill("pdf-forms", "Fill PDF forms", "Use pdftk."),
    );
    // Hostile and invalid ones are skipped: a SKILL.md that is a symlink
    // out of the project, and one without a description.
    let outside = tempfile::tempdir().unwrap();
    write(
        &outside.path().join("SKILL.md"),
        &skill("leak", "SECRET-OUTSIDE", "SECRET-OUTSIDE body"),
    );
    std::fs::create_dir_all(cwd.join(".dsh/skills/leak")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("SKILL.md"),
        cwd.join(".dsh/skills/leak/SKILL.md"),
    )
    .unwrap();
    write(
        &cwd.join(".agents/skills/broken/SKILL.md"),
        "---\nname: broken\n---\nx\n",
    );

    env.mock
        .push_json(call("s1", "skill", json!({"name": "release-notes"})));
    env.mock
        .push_json(call("s2", "skill", json!({"name": "leak"})));
    env.mock.push_json(reply("Notes written."));
    env.mock.push_json(reply("Tidied."));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;

    // Each skill is offered as a command, after the built-in ones.
    let names: Vec<String> = offered(&conn, 0).into_iter().map(|(n, ..)| n).collect();
    assert_eq!(
        &names[names.len() - 3..],
        ["pdf-forms", "release-notes", "tidy-up"],
        "{names:?}"
    );
    assert!(names.contains(&"skills".to_owned()));

    let response = conn.prompt(&session, "write the notes").await.unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let requests = env.mock.requests();
    // The first request carries the catalog before the prompt.
    let first = last_user(&requests[0]);
    assert!(first.starts_with("<system-reminder>"), "{first}");
    assert!(
        first.contains("- release-notes: Write release notes from the git log. Use when asked for release notes.\n"),
        "{first}"
    );
    assert!(first.contains("- tidy-up: Remove dead code\n"), "{first}");
    assert!(first.contains("- pdf-forms: Fill PDF forms\n"), "{first}");
    assert!(!first.contains("The user's own version"), "{first}");
    assert!(
        !first.contains("SECRET-OUTSIDE") && !first.contains("broken"),
        "{first}"
    );
    assert!(first.ends_with("write the notes"), "{first}");
    assert!(tool_names(&requests[0]).contains(&"skill".to_owned()));

    // `skill` returns the body and the directory.
    let loaded = tool_result(&env, "s1");
    let dir = cwd
        .canonicalize()
        .unwrap()
        .join(".dsh/skills/release-notes");
    assert!(
        loaded.contains(&format!("directory: {}", dir.display()))
            || loaded.contains(&format!(
                "directory: {}",
                cwd.join(".dsh/skills/release-notes").display()
            )),
        "{loaded}"
    );
    assert!(
        loaded.contains("Run `git log` since the last tag"),
        "{loaded}"
    );
    // The symlinked one is not there: the model is told what is.
    let unknown = tool_result(&env, "s2");
    assert!(
        unknown.contains("There is no skill named \"leak\". Available skills: pdf-forms, release-notes, tidy-up."),
        "{unknown}"
    );
    assert!(!unknown.contains("SECRET"), "{unknown}");

    // `/tidy-up <task>` is a turn that starts with the skill loaded; the
    // catalog is not given again.
    conn.prompt(&session, "/tidy-up in src/").await.unwrap();
    let requests = env.mock.requests();
    let tidy = last_user(requests.last().unwrap());
    assert!(tidy.contains("Skill \"tidy-up\""), "{tidy}");
    assert!(tidy.contains("Delete what nothing calls."), "{tidy}");
    assert!(
        tidy.ends_with("Use this skill for this task: in src/"),
        "{tidy}"
    );
    let all: String = requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.to_string())
        .collect();
    assert_eq!(all.matches("The following skills are available").count(), 1);
    let catalogs = env
        .log_events(&session)
        .into_iter()
        .filter(|event| event["type"] == "context/skills")
        .count();
    assert_eq!(catalogs, 1);
    let thoughts = chunk_text(&conn.updates(), true);
    assert!(
        thoughts.contains("Skills available: pdf-forms, release-notes, tidy-up."),
        "{thoughts}"
    );
    let before = requests.last().unwrap()["messages"].clone();
    // `/skills` lists them, with where they are (a notice: no model call).
    conn.clear_updates();
    conn.prompt(&session, "/skills").await.unwrap();
    let listing = chunk_text(&conn.updates(), false);
    assert!(
        listing.contains("- `pdf-forms` — Fill PDF forms"),
        "{listing}"
    );
    assert!(listing.contains(".dsh/skills/release-notes"), "{listing}");
    assert_eq!(env.mock.requests().len(), requests.len());
    conn.finish().await;

    // A new process derives the same conversation.
    env.mock.push_json(reply("after load"));
    let conn = env.connect().await;
    conn.initialize().await;
    conn.load(&session, &cwd).await;
    conn.prompt(&session, "after load").await.unwrap();
    let reloaded = env.mock.requests().last().unwrap()["messages"].clone();
    let reloaded = reloaded.as_array().unwrap();
    let before = before.as_array().unwrap();
    assert_eq!(&reloaded[..before.len()], &before[..]);
    conn.finish().await;
}

#[tokio::test]
async fn custom_commands_expand_their_arguments_and_are_offered_again_when_they_change() {
    let env = TestEnv::new().await;
    let cwd = env.cwd();
    std::fs::create_dir(cwd.join(".git")).unwrap();
    let home = env.home.path();
    write(
        &cwd.join(".dsh/commands/fix-issue.md"),
        "---\ndescription: Fix a GitHub issue\nargument-hint: <number> [priority]\n---\nFix issue #$1 (priority $2). Everything typed: $ARGUMENTS\n",
    );
    // Shadowed by the project's; and a built-in name keeps the built-in.
    write(
        &home.join("commands/fix-issue.md"),
        "the user's fix-issue\n",
    );
    write(&home.join("commands/help.md"), "not the built-in help\n");
    write(
        &home.join("commands/standup.md"),
        "Summarize yesterday's commits.\n",
    );
    env.mock.push_json(reply("Fixed."));
    env.mock.push_json(reply("Reviewed."));
    let conn = env.connect().await;
    let session = conn.start(&cwd).await;

    let commands = offered(&conn, 0);
    let find = |name: &str| commands.iter().find(|(n, ..)| n == name).cloned().unwrap();
    assert_eq!(
        find("fix-issue"),
        (
            "fix-issue".to_owned(),
            "Fix a GitHub issue".to_owned(),
            Some("<number> [priority]".to_owned())
        )
    );
    assert_eq!(find("standup").1, "Summarize yesterday's commits.");
    assert_eq!(find("help").1, "List the commands");
    assert_eq!(commands.iter().filter(|(n, ..)| n == "help").count(), 1);

    conn.prompt(&session, "/fix-issue 123 high").await.unwrap();
    let first = last_user(&env.mock.requests()[0]);
    assert_eq!(
        first,
        "Fix issue #123 (priority high). Everything typed: 123 high"
    );

    // A command file added mid-session is offered at the next prompt.
    write(
        &cwd.join(".claude/commands/review.md"),
        "Review the staged diff.\n",
    );
    assert_eq!(conn.commands().len(), 1);
    conn.prompt(&session, "/review").await.unwrap();
    assert_eq!(conn.commands().len(), 2);
    assert!(offered(&conn, 1).iter().any(|(n, ..)| n == "review"));
    assert_eq!(
        last_user(env.mock.requests().last().unwrap()),
        "Review the staged diff."
    );
    conn.finish().await;
}
