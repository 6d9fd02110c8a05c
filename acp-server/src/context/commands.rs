//! Slash commands: a prompt whose first text block starts with a known
//! `/name` runs the command instead of going to the model as typed; an
//! unknown `/name` is plain text — unless it names a custom command or a
//! skill ([`Offered`]). The editor learns the list from an
//! `available_commands_update` when a session opens, and again when the
//! files behind it changed.

use dsh_protocol::log::ConfigKey;
use dsh_protocol::UserContent;

/// A command the editor can offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Name, without the slash.
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
    /// Hint for the text after the name, when it takes any.
    pub hint: Option<&'static str>,
}

/// Every command, in menu order.
pub const COMMANDS: &[Command] = &[
    Command {
        name: "compact",
        description: "Summarize the conversation so far to free context (optionally with a focus)",
        hint: Some("optional focus"),
    },
    Command {
        name: "init",
        description: "Study the project and create or improve its AGENTS.md",
        hint: None,
    },
    Command {
        name: "plan",
        description: "Switch to plan mode: study first, then propose a plan to approve (optionally with the task)",
        hint: Some("optional task"),
    },
    Command {
        name: "mode",
        description: "Set the permission mode: read-only, plan, ask, accept-edits or full-access",
        hint: Some("mode"),
    },
    Command {
        name: "model",
        description: "Set the model",
        hint: Some("model id"),
    },
    Command {
        name: "undo",
        description: "Put back the files the last turn changed (again: one more turn back)",
        hint: None,
    },
    Command {
        name: "fork",
        description: "Copy this conversation (up to its last completed turn) into a new session, to try another way there",
        hint: None,
    },
    Command {
        name: "skills",
        description: "List the skills the model can load",
        hint: None,
    },
    Command {
        name: "goal",
        description: "Set a goal to work on over rounds until it is done, or show, pause, resume or clear it",
        hint: Some("objective | pause | resume | clear"),
    },
    Command {
        name: "help",
        description: "List the commands",
        hint: None,
    },
];

/// A prompt that is a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// `/compact [focus]`.
    Compact {
        /// Text after the name.
        focus: String,
    },
    /// `/init`: a normal turn with this prompt instead.
    Init {
        /// The prompt the model gets.
        prompt: Vec<UserContent>,
    },
    /// `/plan [task]`: plan mode, then the task (if any) as a prompt.
    Plan {
        /// The task, with the prompt's other blocks; empty without one.
        task: Vec<UserContent>,
    },
    /// `/mode <name>` or `/model <id>`: a setting.
    Set {
        /// `mode` or `model`.
        key: ConfigKey,
        /// The value asked for (empty: show the choices).
        value: String,
    },
    /// `/undo`.
    Undo,
    /// `/fork`.
    Fork,
    /// `/skills`.
    Skills,
    /// `/goal [objective | pause | resume | clear]`.
    Goal {
        /// Text after the name.
        args: String,
    },
    /// `/help`.
    Help,
}

/// A command offered to the editor: a built-in one, a custom command or a
/// skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offered {
    /// Name, without the slash.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Hint for the text after the name, when it takes any.
    pub hint: Option<String>,
}

impl From<&Command> for Offered {
    fn from(command: &Command) -> Offered {
        Offered {
            name: command.name.to_owned(),
            description: command.description.to_owned(),
            hint: command.hint.map(str::to_owned),
        }
    }
}

/// What a session offers: the built-in commands, then the custom ones,
/// then the skills, each name once (the first wins).
pub fn offered(
    custom: &[super::custom_commands::CustomCommand],
    skills: &[super::skills::Skill],
) -> Vec<Offered> {
    let mut offered: Vec<Offered> = COMMANDS.iter().map(Offered::from).collect();
    let more = custom
        .iter()
        .map(|command| Offered {
            name: command.name.clone(),
            description: command.description.clone(),
            hint: command.hint.clone(),
        })
        .chain(skills.iter().map(|skill| Offered {
            name: skill.name.clone(),
            description: format!(
                "Skill: {}",
                super::files::one_line(
                    &skill.description,
                    super::custom_commands::DESCRIPTION_CHARS
                )
            ),
            hint: Some("optional task".to_owned()),
        }));
    for command in more {
        if !offered.iter().any(|known| known.name == command.name) {
            offered.push(command);
        }
    }
    offered
}

/// The name and the text after it of a prompt that starts with `/name`
/// (for commands from files; [`parse`] has the built-in ones first).
pub fn named(content: &[UserContent]) -> Option<(&str, &str)> {
    let UserContent::Text { text } = content.first()? else {
        return None;
    };
    let rest = text.trim_start().strip_prefix('/')?;
    let (name, args) = rest
        .split_once(char::is_whitespace)
        .map_or((rest, ""), |(name, args)| (name, args.trim()));
    Some((name, args)).filter(|(name, _)| !name.is_empty())
}

/// `/help`'s answer: every command with its line.
pub fn help() -> String {
    let mut text = String::from("Commands:\n");
    for command in COMMANDS {
        let hint = command
            .hint
            .map(|hint| format!(" <{hint}>"))
            .unwrap_or_default();
        text.push_str(&format!(
            "- `/{}{hint}` — {}\n",
            command.name, command.description
        ));
    }
    text
}

/// The built-in prompt of `/init`.
pub const INIT_PROMPT: &str = include_str!("../../prompts/init.md");

/// The command a prompt invokes, if it is one.
pub fn parse(content: &[UserContent]) -> Option<Invocation> {
    let (name, args) = named(content)?;
    match name {
        "compact" => Some(Invocation::Compact {
            focus: args.to_owned(),
        }),
        "init" => {
            let mut prompt = INIT_PROMPT.to_owned();
            if !args.is_empty() {
                prompt.push_str(&format!("\nThe user adds: {args}\n"));
            }
            let mut blocks = vec![UserContent::text(prompt)];
            blocks.extend(content[1..].iter().cloned());
            Some(Invocation::Init { prompt: blocks })
        }
        "plan" => {
            let mut task = Vec::new();
            if !args.is_empty() {
                task.push(UserContent::text(args));
            }
            if !task.is_empty() || content.len() > 1 {
                task.extend(content[1..].iter().cloned());
            }
            Some(Invocation::Plan { task })
        }
        "mode" | "model" => Some(Invocation::Set {
            key: if name == "mode" {
                ConfigKey::Mode
            } else {
                ConfigKey::Model
            },
            value: args.to_owned(),
        }),
        "goal" => Some(Invocation::Goal {
            args: args.to_owned(),
        }),
        "help" => Some(Invocation::Help),
        "skills" => Some(Invocation::Skills),
        "undo" => Some(Invocation::Undo),
        "fork" => Some(Invocation::Fork),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_run_and_the_rest_is_text() {
        assert_eq!(
            parse(&[UserContent::text("/compact  keep the API notes ")]),
            Some(Invocation::Compact {
                focus: "keep the API notes".to_owned()
            })
        );
        assert_eq!(
            parse(&[UserContent::text("/compact")]),
            Some(Invocation::Compact {
                focus: String::new()
            })
        );
        assert!(matches!(
            parse(&[UserContent::text("/init")]),
            Some(Invocation::Init { .. })
        ));
        assert_eq!(
            parse(&[UserContent::text("/plan add a flag")]),
            Some(Invocation::Plan {
                task: vec![UserContent::text("add a flag")]
            })
        );
        assert_eq!(
            parse(&[UserContent::text("/plan")]),
            Some(Invocation::Plan { task: Vec::new() })
        );
        assert_eq!(
            parse(&[UserContent::text("/mode accept-edits")]),
            Some(Invocation::Set {
                key: ConfigKey::Mode,
                value: "accept-edits".to_owned()
            })
        );
        assert_eq!(parse(&[UserContent::text("/help")]), Some(Invocation::Help));
        assert!(help().contains("`/mode <mode>`"));
        assert_eq!(parse(&[UserContent::text("/unknown thing")]), None);
        assert_eq!(parse(&[UserContent::text("/compacted")]), None);
        assert_eq!(parse(&[UserContent::text("please /compact")]), None);
        assert_eq!(
            parse(&[UserContent::text("/skills")]),
            Some(Invocation::Skills)
        );
        assert_eq!(
            named(&[UserContent::text(" /fix-issue 42  high ")]),
            Some(("fix-issue", "42  high"))
        );
        assert_eq!(named(&[UserContent::text("/")]), None);
    }

    #[test]
    fn built_in_commands_win_a_name_clash() {
        let custom = |name: &str| super::super::custom_commands::CustomCommand {
            name: name.to_owned(),
            description: format!("custom {name}"),
            hint: None,
            body: "x".to_owned(),
        };
        let skill = |name: &str| super::super::skills::Skill {
            name: name.to_owned(),
            description: format!("skill {name}"),
            dir: std::path::PathBuf::from("/s"),
            user: false,
        };
        let offered = offered(
            &[custom("help"), custom("fix")],
            &[skill("fix"), skill("pdf")],
        );
        let find = |name: &str| {
            offered
                .iter()
                .filter(|o| o.name == name)
                .collect::<Vec<_>>()
        };
        assert_eq!(find("help")[0].description, "List the commands");
        assert_eq!(find("fix").len(), 1);
        assert_eq!(find("fix")[0].description, "custom fix");
        assert_eq!(find("pdf")[0].description, "Skill: skill pdf");
    }
}
