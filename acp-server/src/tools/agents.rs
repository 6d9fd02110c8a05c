//! The continuable children's tools (seeds: `dsh-tool-subagent-control`:
//! `interrupt_agent`, `list_agents`, `send_message`; `dsh-tool-subagent`:
//! `list_subagent_models`): parsed and presented here, with what they
//! answer when the answer is pure text; the turn runs them
//! (`turn/agents.rs`), since they act on child sessions.

use dsh_protocol::model::ThoughtLevel;
use dsh_protocol::tool::{ToolKind, ToolView};
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use super::{parse, Refusal, Tool};

/// The catalog's description, in English; dsh's agents are the session's
/// background subagents.
pub const INTERRUPT_DESCRIPTION: &str = "Ask a background agent to stop its current turn, by agent id. The target may be your direct child or an agent created deeper below you. Only the current turn stops: messages already queued for that agent are held until your next send_message to it, agents it started keep running, and the agent itself stays and accepts further operations. The call returns as soon as the stop request is accepted, so the target may run briefly; interrupting an agent that is not working is an acceptable no-op.";
/// The catalog's description, in English.
pub const LIST_DESCRIPTION: &str = "List your continuable background subagents by agent id and label. Use it to recall which subagents you started, not to poll for completion: you are told when a subagent finishes a turn. The status comes from the live registry: running means the agent is working right now; idle means it is loaded and between turns. send_message steers a running child at its next step or starts a turn for an idle one; direct children stay send_message targets whatever their state. The list is a snapshot, not a delivery promise: send_message makes the authoritative check and can still fail. The descendants scope walks the whole tree below you in a stable pre-order and labels each entry with its direct parent's id and its depth. Only depth-1 entries accept send_message; deeper ones are only candidates for interrupt_agent.";
/// The catalog's description, in English, without the resident child's
/// parent (dsh's children do not message their parents).
pub const SEND_DESCRIPTION: &str = "Send a message to your direct continuable child, by agent id (the id subagent with run_in_background returned, or list_agents shows). If the child is still working, the message steers its current turn at its next step; if it is idle, the message starts a new turn. The call does not return the agent's answer, only that the message was delivered: you are told when the turn it joined or started ends. A failed call means the message was not delivered.";
/// The catalog's description, in English.
pub const MODELS_DESCRIPTION: &str = "Discover the LLM routes available to subagents without changing the current agent. Called without arguments it lists the registered providers; with provider it lists that provider's advertised models; with provider and model it checks that exact model and its reasoning efforts. The entries are advice only: the endpoint may accept model ids that are not listed.";

/// `interrupt_agent`'s arguments.
#[derive(Debug, Deserialize)]
pub struct AgentArgs {
    /// The agent: a child's session id.
    pub agent_id: String,
}

/// `list_agents`'s arguments.
#[derive(Debug, Deserialize)]
pub struct ListArgs {
    /// `children` (the default) or `descendants`.
    #[serde(default)]
    pub scope: Option<String>,
}

/// `send_message`'s arguments.
#[derive(Debug, Deserialize)]
pub struct SendArgs {
    /// The direct child.
    pub agent_id: String,
    /// What it is told.
    pub message: String,
}

/// `list_subagent_models`'s arguments.
#[derive(Debug, Deserialize)]
pub struct ModelsArgs {
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
}

/// A continuable children's tool's call.
#[derive(Debug)]
pub enum AgentsCall {
    Interrupt(AgentArgs),
    List(ListArgs),
    Send(SendArgs),
    Models(ModelsArgs),
}

/// Parses a call and its pending view.
///
/// # Errors
/// Arguments that do not parse, an empty id or message, an unknown scope,
/// a model without a provider.
pub fn plan(tool: Tool, name: &str, arguments: &str) -> Result<(AgentsCall, ToolView), Refusal> {
    let (call, title) = match tool {
        Tool::InterruptAgent => {
            let args: AgentArgs = parse(name, arguments)?;
            let title = format!("Interrupt agent {}", args.agent_id.trim());
            (AgentsCall::Interrupt(args), title)
        }
        Tool::SendMessage => {
            let args: SendArgs = parse(name, arguments)?;
            if args.message.trim().is_empty() {
                return Err(Refusal::new(
                    ErrorCode::InvalidToolArgs,
                    "The message is empty: say what the agent should do.",
                ));
            }
            let title = format!("Message agent {}", args.agent_id.trim());
            (AgentsCall::Send(args), title)
        }
        Tool::ListSubagentModels => {
            let args: ModelsArgs = parse(name, arguments)?;
            if args.model.is_some() && args.provider.is_none() {
                return Err(Refusal::new(
                    ErrorCode::InvalidToolArgs,
                    "model needs provider: call list_subagent_models without arguments for the providers.",
                ));
            }
            (AgentsCall::Models(args), "List subagent models".to_owned())
        }
        _ => {
            let args: ListArgs = parse(name, arguments)?;
            Scope::of(args.scope.as_deref())?;
            (AgentsCall::List(args), "List agents".to_owned())
        }
    };
    let view = ToolView {
        title,
        kind: Some(ToolKind::Other),
        ..ToolView::default()
    };
    Ok((call, view))
}

/// Which agents `list_agents` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Direct children.
    Children,
    /// The whole tree below the caller.
    Descendants,
}

impl Scope {
    /// From the call's `scope` (none: children).
    ///
    /// # Errors
    /// Another word.
    pub fn of(word: Option<&str>) -> Result<Scope, Refusal> {
        match word.map(str::trim) {
            None | Some("" | "children") => Ok(Scope::Children),
            Some("descendants") => Ok(Scope::Descendants),
            Some(other) => Err(Refusal::new(
                ErrorCode::InvalidToolArgs,
                format!("scope is \"children\" or \"descendants\", not {other:?}."),
            )),
        }
    }
}

/// One agent as `list_agents` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRow {
    /// Its agent id (its session id).
    pub id: String,
    /// Its direct parent's session id.
    pub parent: String,
    /// 1 for a direct child of the caller.
    pub depth: u32,
    /// Its task's description.
    pub description: String,
    /// Working now.
    pub running: bool,
    /// A continuable child (a background one); else a foreground child
    /// that lives for one call.
    pub continuable: bool,
    /// Its last answer, if it gave one.
    pub last_answer: Option<String>,
    /// Messages held for it (an interrupt came before their turn, or
    /// their turn could not start): they open the next `send_message`'s.
    pub held: usize,
}

/// `list_agents`'s answer.
pub fn render_rows(rows: &[AgentRow], scope: Scope) -> String {
    if rows.is_empty() {
        return match scope {
            Scope::Children => "No agents: start one with subagent and run_in_background: true; it stays after its answer, for send_message.".to_owned(),
            Scope::Descendants => "No agents below you.".to_owned(),
        };
    }
    let mut text = String::new();
    for row in rows {
        let status = if row.running { "running" } else { "idle" };
        text.push_str(&format!("- {} ({status}, depth {}", row.id, row.depth));
        if scope == Scope::Descendants {
            text.push_str(&format!(", parent {}", row.parent));
        }
        if !row.continuable {
            text.push_str(", foreground");
        }
        text.push_str(&format!(
            "): {}",
            dsh_protocol::content::visible_title(&row.description, 80)
        ));
        if let Some(line) = row.last_answer.as_deref().and_then(first_line) {
            text.push_str(&format!(" — last answer: {line}"));
        }
        match row.held {
            0 => {}
            1 => text.push_str(" — 1 message held for it: it opens your next send_message's turn"),
            n => text.push_str(&format!(
                " — {n} messages held for it: they open your next send_message's turn"
            )),
        }
        text.push('\n');
    }
    text.push_str("Only depth-1 agents take send_message; any of them takes interrupt_agent.");
    text
}

/// An answer's first non-empty line, cut for a listing.
pub fn first_line(answer: &str) -> Option<String> {
    let line = answer
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    Some(dsh_protocol::content::visible_title(line, 120))
}

/// Why `agent_id` is not one to act on: the ones that are.
pub fn unknown_agent(agent_id: &str, what: &str, valid: &[String]) -> Refusal {
    let valid = if valid.is_empty() {
        "there are none: start one with subagent and run_in_background: true".to_owned()
    } else {
        format!("the valid ids: {}", valid.join(", "))
    };
    Refusal::new(
        ErrorCode::InvalidToolArgs,
        format!("{agent_id:?} is not {what}; {valid}."),
    )
}

/// The model catalog as `list_subagent_models` sees it.
pub struct Catalog<'a> {
    /// The one provider's id (`deepseek`, `openai`, `replay`).
    pub provider: &'a str,
    pub models: &'a [dsh_protocol::model::ModelInfo],
    /// The model the children use now (`[subagents] model`, else the
    /// session's).
    pub children_model: &'a str,
}

/// `list_subagent_models`'s answer (advice only).
///
/// # Errors
/// An unknown provider.
pub fn render_models(catalog: &Catalog<'_>, args: &ModelsArgs) -> Result<String, Refusal> {
    let how = format!(
        "Subagents use `{}`: the subagent tool takes no model choice (`[subagents] model` in config.toml sets it; else the session's model).",
        catalog.children_model
    );
    let Some(provider) = args.provider.as_deref().map(str::trim) else {
        return Ok(format!("Providers:\n- {}\n{how}", catalog.provider));
    };
    if provider != catalog.provider {
        return Err(Refusal::new(
            ErrorCode::InvalidToolArgs,
            format!(
                "No provider {provider:?}: the one provider is {:?}.",
                catalog.provider
            ),
        ));
    }
    let line = |model: &dsh_protocol::model::ModelInfo| {
        let mut line = format!("- {}", model.id);
        if let Some(name) = model.name.as_deref().filter(|name| *name != model.id) {
            line.push_str(&format!(" ({name})"));
        }
        line.push_str(&format!(", context {} tokens", model.context_window));
        if model.images {
            line.push_str(", takes images");
        }
        if model.id == catalog.children_model {
            line.push_str(" — subagents use it");
        }
        line
    };
    let efforts = ThoughtLevel::ALL
        .iter()
        .map(|level| level.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    match args.model.as_deref().map(str::trim) {
        None if catalog.models.is_empty() => Ok(format!(
            "{provider} advertises no models here (the endpoint's own list is used).\n{how}"
        )),
        None => {
            let lines: Vec<String> = catalog.models.iter().map(line).collect();
            Ok(format!("{provider}'s models:\n{}\n{how}", lines.join("\n")))
        }
        Some(id) => match catalog.models.iter().find(|model| model.id == id) {
            Some(model) => Ok(format!(
                "{}\nReasoning efforts: {efforts}.\n{how}",
                line(model)
            )),
            None => Ok(format!(
                "{id} is not in {provider}'s catalog; the endpoint may still accept it (the catalog is advice only).\n{how}"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, depth: u32, running: bool, answer: Option<&str>) -> AgentRow {
        AgentRow {
            id: id.to_owned(),
            parent: "p".to_owned(),
            depth,
            description: format!("task {id}"),
            running,
            continuable: depth == 1,
            last_answer: answer.map(str::to_owned),
            held: 0,
        }
    }

    #[test]
    fn a_listing_shows_status_depth_and_the_answers_first_line() {
        let rows = [
            row("a", 1, false, Some("\n  Found it.\nDetails follow.")),
            row("b", 2, true, None),
        ];
        let children = render_rows(&rows[..1], Scope::Children);
        assert!(
            children.starts_with("- a (idle, depth 1): task a — last answer: Found it.\n"),
            "{children}"
        );
        assert!(!children.contains("parent"), "{children}");
        let all = render_rows(&rows, Scope::Descendants);
        assert!(
            all.contains("- b (running, depth 2, parent p, foreground): task b\n"),
            "{all}"
        );
        assert!(render_rows(&[], Scope::Children).starts_with("No agents"));
        let held = AgentRow {
            held: 2,
            ..row("c", 1, false, None)
        };
        assert!(render_rows(&[held], Scope::Children).contains(
            "task c — 2 messages held for it: they open your next send_message's turn\n"
        ),);
    }

    #[test]
    fn scopes_and_arguments_are_checked() {
        assert_eq!(Scope::of(None).unwrap(), Scope::Children);
        assert_eq!(Scope::of(Some("descendants")).unwrap(), Scope::Descendants);
        assert!(Scope::of(Some("all")).is_err());
        assert!(plan(
            Tool::ListAgents,
            Tool::ListAgents.name(),
            r#"{"scope":"all"}"#
        )
        .is_err());
        assert!(plan(
            Tool::SendMessage,
            Tool::SendMessage.name(),
            r#"{"agent_id":"a","message":" "}"#
        )
        .is_err());
        assert!(plan(
            Tool::ListSubagentModels,
            Tool::ListSubagentModels.name(),
            r#"{"model":"m"}"#
        )
        .is_err());
        let (call, view) = plan(
            Tool::InterruptAgent,
            Tool::InterruptAgent.name(),
            r#"{"agent_id":"a1"}"#,
        )
        .unwrap();
        assert!(matches!(call, AgentsCall::Interrupt(args) if args.agent_id == "a1"));
        assert_eq!(view.title, "Interrupt agent a1");
    }

    #[test]
    fn an_unknown_agent_is_answered_with_the_valid_ids() {
        let refusal = unknown_agent("x", "your direct child", &["a".into(), "b".into()]);
        assert_eq!(
            refusal.message,
            "\"x\" is not your direct child; the valid ids: a, b."
        );
        assert!(unknown_agent("x", "below you", &[])
            .message
            .contains("there are none"));
    }

    #[test]
    fn the_model_catalog_is_advice() {
        let models: Vec<dsh_protocol::model::ModelInfo> =
            serde_json::from_value(serde_json::json!([
                {"id": "m1", "name": "Model One", "context_window": 1000},
                {"id": "m2", "images": true}
            ]))
            .unwrap();
        let catalog = Catalog {
            provider: "openai",
            models: &models,
            children_model: "m2",
        };
        let args = |provider: Option<&str>, model: Option<&str>| ModelsArgs {
            provider: provider.map(str::to_owned),
            model: model.map(str::to_owned),
        };
        let providers = render_models(&catalog, &args(None, None)).unwrap();
        assert!(
            providers.starts_with("Providers:\n- openai\n"),
            "{providers}"
        );
        let listed = render_models(&catalog, &args(Some("openai"), None)).unwrap();
        assert!(
            listed.contains("- m1 (Model One), context 1000 tokens\n"),
            "{listed}"
        );
        assert!(
            listed.contains("takes images — subagents use it"),
            "{listed}"
        );
        let one = render_models(&catalog, &args(Some("openai"), Some("m1"))).unwrap();
        assert!(
            one.contains("Reasoning efforts: off, low, high, max."),
            "{one}"
        );
        let other = render_models(&catalog, &args(Some("openai"), Some("zz"))).unwrap();
        assert!(other.contains("may still accept it"), "{other}");
        assert!(render_models(&catalog, &args(Some("nope"), None)).is_err());
    }
}
