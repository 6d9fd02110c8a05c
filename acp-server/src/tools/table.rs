//! The one list of the model's tools: name, schema, what its calls touch,
//! when it is offered and how the turn treats it. Planning, the offers,
//! the permission policy's tool names, `touches_files` and the docs' tool
//! table (`docs/acp-mapping.md`, checked by tidy) all read it; no tool name
//! is written anywhere else (tidy checks that too).

use dsh_protocol::catalog;
use dsh_protocol::model::ToolSchema;

use super::{
    agents, ask_user, bash, dsh_lsp, fs, goal, jobs, lsp, plan_mode, pwsh, search, session_query,
    skill, subagent, terminal, todo, web, Offer,
};

/// A built-in tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// `ask_user_question`.
    AskUserQuestion,
    /// `bash`.
    Bash,
    /// `dsh_lsp` (dsh's extension).
    DshLsp,
    /// `edit`.
    Edit,
    /// `exit_plan_mode`.
    ExitPlanMode,
    /// `glob`.
    Glob,
    /// `grep`.
    Grep,
    /// `job_kill`.
    JobKill,
    /// `job_list`.
    JobList,
    /// `job_output`.
    JobOutput,
    /// `lsp`.
    Lsp,
    /// `pwsh`.
    Pwsh,
    /// `read`.
    Read,
    /// `read_image`.
    ReadImage,
    /// `skill`.
    Skill,
    /// `str_replace_editor`.
    StrReplaceEditor,
    /// `subagent`.
    Subagent,
    /// `todo_write`.
    TodoWrite,
    /// `web_fetch`.
    WebFetch,
    /// `web_search`.
    WebSearch,
    /// `write`.
    Write,
    /// `create_goal`.
    CreateGoal,
    /// `get_goal`.
    GetGoal,
    /// `interrupt_agent`.
    InterruptAgent,
    /// `list_agents`.
    ListAgents,
    /// `list_subagent_models`.
    ListSubagentModels,
    /// `send_message`.
    SendMessage,
    /// `session_event_read`.
    SessionEventRead,
    /// `session_event_search`.
    SessionEventSearch,
    /// `session_event_trace`.
    SessionEventTrace,
    /// `session_search`.
    SessionSearch,
    /// `session_trace`.
    SessionTrace,
    /// `terminal_close`.
    TerminalClose,
    /// `terminal_list`.
    TerminalList,
    /// `terminal_open`.
    TerminalOpen,
    /// `terminal_read`.
    TerminalRead,
    /// `terminal_send`.
    TerminalSend,
    /// `terminal_signal`.
    TerminalSignal,
    /// `update_goal`.
    UpdateGoal,
}

/// What a tool's calls touch, as the permission policy sees them (each
/// call's exact [`crate::permission::Access`] is computed when it is
/// planned, and is of this class).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Nothing outside the session (plans, the model's own jobs).
    Nothing,
    /// Reads paths (a language-server query may also start a program).
    Reads,
    /// Writes paths.
    Writes,
    /// Runs a command.
    Executes,
    /// Reaches the web.
    Web,
}

/// When a tool is offered to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    Always,
    /// The platform's shell tool ([`super::shell::by_default`]), or
    /// `[tools] enable` names it.
    Shell,
    /// Only when `[tools] enable` names it (or its package).
    OptIn,
    Jobs,
    WebFetch,
    WebSearch,
    Skills,
    Subagents,
    /// The session's model takes images.
    Images,
    /// `[goals] enabled` (the default) and a session a person drives (not
    /// a subagent).
    Goals,
    /// The session may start children and keep them in the background:
    /// `subagent` and background jobs are offered (the continuable
    /// children's controls).
    Agents,
}

/// One row of the table.
pub struct Spec {
    /// The tool.
    pub tool: Tool,
    /// Its model-visible name (the seeds' contract).
    pub name: &'static str,
    /// What its calls touch.
    pub class: Class,
    /// Its locations are workspace paths it read or changed.
    pub touches_files: bool,
    /// It may run alongside other parallel calls.
    pub parallel: bool,
    /// It handles cancellation itself (stops its process and reports what
    /// ran) instead of being abandoned at once.
    pub stops_itself: bool,
    /// It changes a file: a running language server is asked afterwards
    /// for the errors it introduced.
    pub edits_files: bool,
    when: When,
    description: fn(Offer) -> &'static str,
    schema: Schema,
}

/// Where a tool's schema comes from.
#[derive(Clone, Copy)]
pub enum Schema {
    /// The catalog's entry of this name in this package, unchanged.
    Catalog(&'static str),
    /// The catalog's entry, without `run_in_background` when background
    /// jobs are off (the catalog's `enableRunInBackground: false`).
    CatalogJobs(&'static str),
    /// dsh's own (an extension, named apart: see docs/tools.md).
    Own(fn(Offer) -> serde_json::Value),
}

/// The table, by name.
pub const TABLE: [Spec; 39] = [
    Spec {
        tool: Tool::AskUserQuestion,
        name: "ask_user_question",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::Always,
        description: |_| ask_user::DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-ask-user"),
    },
    Spec {
        tool: Tool::Bash,
        name: "bash",
        class: Class::Executes,
        touches_files: false,
        parallel: false,
        stops_itself: true,
        edits_files: false,
        when: When::Shell,
        description: |offer| bash::description(offer.jobs),
        schema: Schema::CatalogJobs("dsh-tool-bash"),
    },
    Spec {
        tool: Tool::CreateGoal,
        name: "create_goal",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::Goals,
        description: |_| goal::CREATE_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-goal"),
    },
    Spec {
        tool: Tool::DshLsp,
        name: "dsh_lsp",
        class: Class::Reads,
        touches_files: true,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::OptIn,
        description: |_| dsh_lsp::DESCRIPTION,
        schema: Schema::Own(dsh_lsp::schema),
    },
    Spec {
        tool: Tool::Edit,
        name: "edit",
        class: Class::Writes,
        touches_files: true,
        parallel: false,
        stops_itself: false,
        edits_files: true,
        when: When::Always,
        description: |_| fs::EDIT_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-fs"),
    },
    Spec {
        tool: Tool::ExitPlanMode,
        name: "exit_plan_mode",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::Always,
        description: |_| plan_mode::DESCRIPTION,
        schema: Schema::Catalog("dsh-plan-mode"),
    },
    Spec {
        tool: Tool::GetGoal,
        name: "get_goal",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::Goals,
        description: |_| goal::GET_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-goal"),
    },
    Spec {
        tool: Tool::Glob,
        name: "glob",
        class: Class::Reads,
        touches_files: true,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::Always,
        description: |_| search::GLOB_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-fs-search"),
    },
    Spec {
        tool: Tool::Grep,
        name: "grep",
        class: Class::Reads,
        touches_files: true,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::Always,
        description: |_| search::GREP_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-fs-search"),
    },
    Spec {
        tool: Tool::InterruptAgent,
        name: "interrupt_agent",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::Agents,
        description: |_| agents::INTERRUPT_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-subagent-control"),
    },
    Spec {
        tool: Tool::JobKill,
        name: "job_kill",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::Jobs,
        description: |_| jobs::KILL_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-jobs"),
    },
    Spec {
        tool: Tool::JobList,
        name: "job_list",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::Jobs,
        description: |_| jobs::LIST_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-jobs"),
    },
    Spec {
        tool: Tool::JobOutput,
        name: "job_output",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: true,
        edits_files: false,
        when: When::Jobs,
        description: |_| jobs::OUTPUT_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-jobs"),
    },
    Spec {
        tool: Tool::ListAgents,
        name: "list_agents",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::Agents,
        description: |_| agents::LIST_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-subagent-control"),
    },
    Spec {
        tool: Tool::ListSubagentModels,
        name: "list_subagent_models",
        class: Class::Nothing,
        touches_files: false,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::Subagents,
        description: |_| agents::MODELS_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-subagent"),
    },
    Spec {
        tool: Tool::Lsp,
        name: "lsp",
        class: Class::Reads,
        touches_files: true,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::Always,
        description: |_| lsp::DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-lsp"),
    },
    Spec {
        tool: Tool::Pwsh,
        name: "pwsh",
        class: Class::Executes,
        touches_files: false,
        parallel: false,
        stops_itself: true,
        edits_files: false,
        when: When::Shell,
        description: |offer| {
            if offer.jobs {
                pwsh::DESCRIPTION
            } else {
                pwsh::DESCRIPTION_NO_JOBS
            }
        },
        schema: Schema::CatalogJobs("dsh-tool-pwsh"),
    },
    Spec {
        tool: Tool::Read,
        name: "read",
        class: Class::Reads,
        touches_files: true,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::Always,
        description: |_| fs::READ_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-fs"),
    },
    Spec {
        tool: Tool::ReadImage,
        name: "read_image",
        class: Class::Reads,
        touches_files: true,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::Images,
        description: |_| fs::READ_IMAGE_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-fs"),
    },
    Spec {
        tool: Tool::SendMessage,
        name: "send_message",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::Agents,
        description: |_| agents::SEND_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-subagent-control"),
    },
    Spec {
        tool: Tool::SessionEventRead,
        name: "session_event_read",
        class: Class::Nothing,
        touches_files: false,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::OptIn,
        description: |_| session_query::EVENT_READ_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-session-query"),
    },
    Spec {
        tool: Tool::SessionEventSearch,
        name: "session_event_search",
        class: Class::Nothing,
        touches_files: false,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::OptIn,
        description: |_| session_query::EVENT_SEARCH_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-session-query"),
    },
    Spec {
        tool: Tool::SessionEventTrace,
        name: "session_event_trace",
        class: Class::Nothing,
        touches_files: false,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::OptIn,
        description: |_| session_query::EVENT_TRACE_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-session-query"),
    },
    Spec {
        tool: Tool::SessionSearch,
        name: "session_search",
        class: Class::Nothing,
        touches_files: false,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::OptIn,
        description: |_| session_query::SEARCH_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-session-query"),
    },
    Spec {
        tool: Tool::SessionTrace,
        name: "session_trace",
        class: Class::Nothing,
        touches_files: false,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::OptIn,
        description: |_| session_query::TRACE_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-session-query"),
    },
    Spec {
        tool: Tool::Skill,
        name: "skill",
        class: Class::Nothing,
        touches_files: false,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::Skills,
        description: |_| skill::DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-skill"),
    },
    Spec {
        tool: Tool::StrReplaceEditor,
        name: "str_replace_editor",
        // `view` is a read (see `in_class`).
        class: Class::Writes,
        touches_files: true,
        parallel: false,
        stops_itself: false,
        edits_files: true,
        when: When::OptIn,
        description: |_| fs::STR_REPLACE_EDITOR_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-str-replace-editor"),
    },
    Spec {
        tool: Tool::Subagent,
        name: "subagent",
        class: Class::Nothing,
        touches_files: false,
        parallel: true,
        stops_itself: true,
        edits_files: false,
        when: When::Subagents,
        description: |offer| {
            if offer.jobs {
                subagent::DESCRIPTION
            } else {
                subagent::DESCRIPTION_NO_JOBS
            }
        },
        schema: Schema::CatalogJobs("dsh-tool-subagent"),
    },
    Spec {
        tool: Tool::TerminalClose,
        name: "terminal_close",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::OptIn,
        description: |_| terminal::CLOSE_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-terminal"),
    },
    Spec {
        tool: Tool::TerminalList,
        name: "terminal_list",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::OptIn,
        description: |_| terminal::LIST_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-terminal"),
    },
    Spec {
        tool: Tool::TerminalOpen,
        name: "terminal_open",
        class: Class::Executes,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::OptIn,
        description: |_| terminal::OPEN_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-terminal"),
    },
    Spec {
        tool: Tool::TerminalRead,
        name: "terminal_read",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::OptIn,
        description: |_| terminal::READ_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-terminal"),
    },
    Spec {
        tool: Tool::TerminalSend,
        name: "terminal_send",
        class: Class::Executes,
        touches_files: false,
        parallel: false,
        stops_itself: true,
        edits_files: false,
        when: When::OptIn,
        description: |offer| terminal::send_description(offer.jobs),
        schema: Schema::CatalogJobs("dsh-tool-terminal"),
    },
    Spec {
        tool: Tool::TerminalSignal,
        name: "terminal_signal",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::OptIn,
        description: |_| terminal::SIGNAL_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-terminal"),
    },
    Spec {
        tool: Tool::TodoWrite,
        name: "todo_write",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::Always,
        description: |_| todo::DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-todo"),
    },
    Spec {
        tool: Tool::UpdateGoal,
        name: "update_goal",
        class: Class::Nothing,
        touches_files: false,
        parallel: false,
        stops_itself: false,
        edits_files: false,
        when: When::Goals,
        description: |_| goal::UPDATE_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-goal"),
    },
    Spec {
        tool: Tool::WebFetch,
        name: "web_fetch",
        class: Class::Web,
        touches_files: false,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::WebFetch,
        description: |_| web::FETCH_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-web"),
    },
    Spec {
        tool: Tool::WebSearch,
        name: "web_search",
        class: Class::Web,
        touches_files: false,
        parallel: true,
        stops_itself: false,
        edits_files: false,
        when: When::WebSearch,
        description: |_| web::SEARCH_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-web"),
    },
    Spec {
        tool: Tool::Write,
        name: "write",
        class: Class::Writes,
        touches_files: true,
        parallel: false,
        stops_itself: false,
        edits_files: true,
        when: When::Always,
        description: |_| fs::WRITE_DESCRIPTION,
        schema: Schema::Catalog("dsh-tool-fs"),
    },
];

impl Tool {
    /// The tool called `name`, if `offer` offers it.
    pub fn offered(name: &str, offer: Offer) -> Option<Tool> {
        TABLE
            .iter()
            .find(|spec| spec.name == name && spec.is_offered(offer))
            .map(|spec| spec.tool)
    }

    /// The tool called `name`, offered or not.
    pub fn named(name: &str) -> Option<Tool> {
        TABLE
            .iter()
            .find(|spec| spec.name == name)
            .map(|spec| spec.tool)
    }

    /// Its row.
    pub fn spec(self) -> &'static Spec {
        TABLE
            .iter()
            .find(|spec| spec.tool == self)
            .expect("every tool has a row")
    }

    /// Its model-visible name.
    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

impl Spec {
    fn is_offered(&self, offer: Offer) -> bool {
        if offer.disabled.contains(self.tool) {
            return false;
        }
        match self.when {
            When::Always => true,
            When::Shell => super::shell::by_default(self.tool) || offer.enabled.contains(self.tool),
            When::OptIn => offer.enabled.contains(self.tool),
            When::Jobs => offer.jobs,
            When::WebFetch => offer.web_fetch,
            When::WebSearch => offer.web_search,
            When::Skills => offer.skills,
            When::Subagents => offer.subagents,
            When::Images => offer.images,
            When::Goals => offer.goals,
            When::Agents => offer.subagents && offer.jobs,
        }
    }
}

impl Spec {
    /// The catalog package its schema is from (none: dsh's own).
    pub fn package(&self) -> Option<&'static str> {
        match self.schema {
            Schema::Catalog(package) | Schema::CatalogJobs(package) => Some(package),
            Schema::Own(_) => None,
        }
    }

    /// Its JSON schema as offered under `offer`.
    pub fn parameters(&self, offer: Offer) -> serde_json::Value {
        match self.schema {
            Schema::Catalog(package) => catalog::parameters(package, self.name),
            Schema::CatalogJobs(package) if offer.jobs => catalog::parameters(package, self.name),
            Schema::CatalogJobs(package) => {
                catalog::parameters_without(package, self.name, "run_in_background")
            }
            Schema::Own(schema) => schema(offer),
        }
    }
}

/// A set of built-in tools (`[tools] enable` / `disable`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolSet(u64);

impl ToolSet {
    /// The set holding `tool` too.
    #[must_use]
    pub fn with(self, tool: Tool) -> ToolSet {
        ToolSet(self.0 | 1 << tool as u64)
    }

    /// Whether it holds `tool`.
    pub fn contains(self, tool: Tool) -> bool {
        self.0 & 1 << tool as u64 != 0
    }
}

/// The schemas offered to the model, by name.
pub fn schemas(offer: Offer) -> Vec<ToolSchema> {
    TABLE
        .iter()
        .filter(|spec| spec.is_offered(offer))
        .map(|spec| ToolSchema {
            name: spec.name.to_owned(),
            description: (spec.description)(offer).to_owned(),
            parameters: spec.parameters(offer),
        })
        .collect()
}

/// Whether a call to `name` has locations that are workspace paths it
/// read or changed (MCP tools and unknown names do not).
pub fn touches_files(name: &str) -> bool {
    Tool::named(name).is_some_and(|tool| tool.spec().touches_files)
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
