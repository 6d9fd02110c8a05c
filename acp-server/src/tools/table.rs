//! The one list of the model's tools: name, schema, what its calls touch,
//! when it is offered and how the turn treats it. Planning, the offers,
//! the permission policy's tool names, `touches_files` and the docs' tool
//! table (`docs/acp-mapping.md`, checked by tidy) all read it; no tool name
//! is written anywhere else (tidy checks that too).

use dsh_protocol::model::ToolSchema;

use super::{ask_user, bash, fs, jobs, lsp, plan_mode, search, skill, subagent, todo, web, Offer};

/// A built-in tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// `ask_user_question`.
    AskUserQuestion,
    /// `bash`.
    Bash,
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
    /// `read`.
    Read,
    /// `skill`.
    Skill,
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
    Jobs,
    WebFetch,
    WebSearch,
    Skills,
    Subagents,
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
    parameters: fn(Offer) -> serde_json::Value,
}

/// The table, by name.
pub const TABLE: [Spec; 17] = [
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
        parameters: |offer| ask_user::schema(offer.question_timeout),
    },
    Spec {
        tool: Tool::Bash,
        name: "bash",
        class: Class::Executes,
        touches_files: false,
        parallel: false,
        stops_itself: true,
        edits_files: false,
        when: When::Always,
        description: |offer| {
            if offer.jobs {
                bash::DESCRIPTION
            } else {
                bash::DESCRIPTION_NO_JOBS
            }
        },
        parameters: |offer| bash::schema(offer.jobs),
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
        parameters: |_| fs::edit_schema(),
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
        parameters: |_| plan_mode::schema(),
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
        parameters: |_| search::glob_schema(),
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
        parameters: |_| search::grep_schema(),
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
        parameters: |_| jobs::kill_schema(),
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
        parameters: |_| jobs::list_schema(),
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
        parameters: |_| jobs::output_schema(),
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
        parameters: |_| lsp::schema(),
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
        parameters: |_| fs::read_schema(),
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
        parameters: |_| skill::schema(),
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
        parameters: |offer| subagent::schema(offer.jobs),
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
        parameters: |_| todo::schema(),
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
        parameters: |_| web::fetch_schema(),
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
        parameters: |_| web::search_schema(),
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
        parameters: |_| fs::write_schema(),
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
        match self.when {
            When::Always => true,
            When::Jobs => offer.jobs,
            When::WebFetch => offer.web_fetch,
            When::WebSearch => offer.web_search,
            When::Skills => offer.skills,
            When::Subagents => offer.subagents,
        }
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
            parameters: (spec.parameters)(offer),
        })
        .collect()
}

/// Whether a call to `name` has locations that are workspace paths it
/// read or changed (MCP tools and unknown names do not).
pub fn touches_files(name: &str) -> bool {
    Tool::named(name).is_some_and(|tool| tool.spec().touches_files)
}

#[cfg(test)]
mod tests {
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
            question_timeout: Some(60),
            web_fetch: true,
            web_search: true,
            skills: true,
            subagents: true,
        };
        assert_eq!(schemas(none).len(), 10);
        assert_eq!(schemas(all).len(), 17);
        assert_eq!(Tool::offered("job_output", none), None);
        assert_eq!(Tool::offered("job_output", all), Some(Tool::JobOutput));
        let bash = |offer| {
            schemas(offer)
                .into_iter()
                .find(|schema| schema.name == "bash")
                .unwrap()
                .description
        };
        assert!(bash(all).contains("run_in_background"));
        assert!(!bash(none).contains("run_in_background"));
        assert!(touches_files("lsp") && !touches_files("bash") && !touches_files("mcp__a__b"));
    }
}
