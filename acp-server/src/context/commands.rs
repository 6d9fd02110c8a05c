//! Slash commands: a prompt whose first text block starts with a known
//! `/name` runs the command instead of going to the model as typed; an
//! unknown `/name` is plain text. The editor learns the list from an
//! `available_commands_update` when a session opens.

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
        key: &'static str,
        /// The value asked for (empty: show the choices).
        value: String,
    },
    /// `/undo`.
    Undo,
    /// `/fork`.
    Fork,
    /// `/help`.
    Help,
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
    let UserContent::Text { text } = content.first()? else {
        return None;
    };
    let rest = text.trim_start().strip_prefix('/')?;
    let (name, args) = rest
        .split_once(char::is_whitespace)
        .map_or((rest, ""), |(name, args)| (name, args.trim()));
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
            key: if name == "mode" { "mode" } else { "model" },
            value: args.to_owned(),
        }),
        "help" => Some(Invocation::Help),
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
                key: "mode",
                value: "accept-edits".to_owned()
            })
        );
        assert_eq!(parse(&[UserContent::text("/help")]), Some(Invocation::Help));
        assert!(help().contains("`/mode <mode>`"));
        assert_eq!(parse(&[UserContent::text("/unknown thing")]), None);
        assert_eq!(parse(&[UserContent::text("/compacted")]), None);
        assert_eq!(parse(&[UserContent::text("please /compact")]), None);
    }
}
