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
        assert_eq!(parse(&[UserContent::text("/unknown thing")]), None);
        assert_eq!(parse(&[UserContent::text("/compacted")]), None);
        assert_eq!(parse(&[UserContent::text("please /compact")]), None);
    }
}
