//! The model's tools. Names and parameters are the seeds' contract: `read`,
//! `write`, `edit`, `glob`, `grep`, `bash`, `todo_write`, `exit_plan_mode`,
//! `ask_user_question`, `lsp`, `job_output`, `job_kill`, `job_list`,
//! `web_fetch`, `web_search`, `skill`, `subagent`, and the opt-in
//! `read_image` and `str_replace_editor`; `pwsh` in place of `bash` on
//! Windows with PowerShell (opt-in elsewhere, see [`shell`]).
//!
//! A call goes through two steps: [`plan`] parses the raw arguments,
//! resolves paths and presents the call (title, kind, locations, what it
//! touches for the permission policy) without side effects; [`run`] executes
//! it. Failures are results the model sees, never a failed turn.

pub(crate) mod agents;
mod ask_user;
mod bash;
mod dsh_lsp;
mod fs;
pub(crate) mod goal;
mod jobs;
mod lsp;
mod paths;
mod plan_mode;
mod pwsh;
mod repeat;
mod search;
pub mod session_query;
mod settings;
mod shell;
mod skill;
pub(crate) mod spill;
mod subagent;
mod table;
mod terminal;
mod todo;
mod web;

use std::path::{Path, PathBuf};

use dsh_protocol::tool::{ToolKind, ToolOutcome, ToolView};
use dsh_protocol::ErrorCode;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::frontend::Frontend;
use crate::permission::Access;

pub use ask_user::NO_USER;
pub use goal::GoalSettings;
pub use jobs::started as job_started;
pub use paths::{canonical_roots, display_path};
pub use repeat::Repeats;
pub use settings::{nearest, GlobSettings, RepeatReminderSettings, ToolSettings};
pub use subagent::{SubagentArgs, SubagentSettings};
pub use table::{schemas, touches_files, Class, Schema, Spec, Tool, ToolSet, TABLE};
pub use terminal::Terminals;

/// What planning a call may look at (nothing it does has effects).
pub struct PlanEnv<'a> {
    /// Session working directory.
    pub cwd: &'a Path,
    /// Canonical workspace roots.
    pub roots: &'a [PathBuf],
    /// Language-server settings (to see whether a query would start a
    /// program from the workspace).
    pub lsp: &'a dsh_lsp_bridge::BridgeSettings,
    /// The optional tools offered.
    pub offer: Offer,
    /// The session's terminals (a sent line is judged in its terminal's
    /// directory).
    pub terminals: &'a terminal::Terminals,
}

/// What a tool run may use.
pub struct ToolEnv<'a> {
    /// Session working directory.
    pub cwd: &'a Path,
    /// Canonical workspace roots.
    pub roots: &'a [PathBuf],
    /// The editor.
    pub frontend: &'a dyn Frontend,
    /// The turn's cancellation.
    pub cancel: &'a CancellationToken,
    /// Private directory for full outputs.
    pub spill_dir: &'a Path,
    /// The call id (names spill files).
    pub call_id: &'a dsh_protocol::ToolCallId,
    /// The session's MCP servers.
    pub mcp: Option<std::sync::Arc<crate::mcp::McpHub>>,
    /// The session's language servers (created on first use).
    pub lsp: &'a (dyn Fn() -> std::sync::Arc<dsh_lsp_bridge::Bridge> + Send + Sync),
    /// How children are started.
    pub spawner: &'a dsh_process::Spawner,
    /// How a command runs (its sandbox).
    pub command: &'a crate::sandbox::CommandRun,
    /// The session's background jobs.
    pub jobs: &'a crate::jobs::Jobs,
    /// The session's persistent terminals.
    pub terminals: &'a terminal::Terminals,
    /// What a job calls when it ends (the session logs `job/end`).
    pub on_job_end: &'a (dyn Fn() -> crate::jobs::OnEnd + Send + Sync),
    /// Where a command job's output goes as it comes (the front end of
    /// the session's latest prompt), for the job's call.
    pub on_job_live: &'a (dyn Fn(&dsh_protocol::ToolCallId) -> crate::jobs::OnLive + Send + Sync),
    /// Web settings.
    pub web: &'a crate::web::WebSettings,
    /// Secret locations walks skip (`Protected::hidden`).
    pub hidden: &'a [PathBuf],
    /// `[tools.glob]`.
    pub glob: &'a GlobSettings,
    /// Where the session's skills are (`skill` loads them from there),
    /// with the session's cache of them.
    pub skills: &'a crate::context::discovery::Source,
    /// The calling session, for the session-query tools.
    pub recall: session_query::Caller<'a>,
}

impl Planned {
    /// A goal tool's call (the turn runs it: it needs the session's goal
    /// and the turn's authority).
    pub fn goal(&self) -> Option<&goal::GoalCall> {
        match &self.call {
            Call::Goal(call) => Some(call),
            _ => None,
        }
    }

    /// A continuable children's tool's call (the turn runs it).
    pub fn agents(&self) -> Option<&agents::AgentsCall> {
        match &self.call {
            Call::Agents(call) => Some(call),
            _ => None,
        }
    }

    /// The plan, for a call to `exit_plan_mode` (the turn asks the user).
    pub fn submitted_plan(&self) -> Option<&str> {
        match &self.call {
            Call::ExitPlanMode(plan) => Some(plan),
            _ => None,
        }
    }

    /// The task, for a call to `subagent` (the turn runs the child).
    pub fn delegated(&self) -> Option<&SubagentArgs> {
        match &self.call {
            Call::Subagent(args) => Some(args),
            _ => None,
        }
    }

    /// The questions, for a call to `ask_user_question` (the turn asks
    /// the user).
    pub fn questions(&self) -> Option<&[dsh_protocol::question::UserQuestion]> {
        match &self.call {
            Call::AskUser(args) => Some(&args.questions),
            _ => None,
        }
    }

    /// How long a timed question waits: the call's `timeout` (bounded) or
    /// `default` (`[questions] timeout_s`); `None` when questions are not
    /// timed.
    pub fn question_wait(&self, default: Option<u64>) -> Option<std::time::Duration> {
        let default = default?;
        let asked = match &self.call {
            Call::AskUser(args) => args.timeout,
            _ => None,
        };
        Some(std::time::Duration::from_secs(
            asked.unwrap_or(default).clamp(1, ask_user::MAX_TIMEOUT_S),
        ))
    }
}

/// What the model is told, and the call's final view, for the answers to
/// its questions (one per question, in order, when answered).
pub fn question_result(
    questions: &[dsh_protocol::question::UserQuestion],
    outcome: dsh_protocol::question::QuestionOutcome,
    answers: &[dsh_protocol::question::QuestionAnswer],
) -> ToolOutcome {
    ask_user::result(questions, outcome, answers)
}

/// The user message that brings a late answer to the model.
pub fn late_answer(call: &str, outcome: &ToolOutcome) -> String {
    ask_user::late_answer(call, outcome)
}

/// The free-text field of a question with options, in an editor's form
/// (`<id>_other`).
pub fn other_field(id: &str) -> String {
    ask_user::other_field(id)
}

/// A parsed, presented call, with what the turn loop needs to know of it
/// (the loop never branches on tool names).
pub struct Planned {
    call: Call,
    /// Tool name.
    pub name: String,
    /// The pending presentation.
    pub view: ToolView,
    /// What it touches.
    pub access: Access,
    /// Whether it may run alongside other parallel calls.
    pub parallel: bool,
    /// It handles cancellation itself (stops its process and reports what
    /// ran) instead of being abandoned at once.
    pub stops_itself: bool,
    /// It changes a file: a running language server is asked afterwards
    /// for the errors it introduced.
    pub edits_files: bool,
}

enum Call {
    Read(fs::ReadArgs, PathBuf),
    Write(fs::WriteArgs, PathBuf),
    Edit(fs::EditArgs, PathBuf),
    ReadImage(PathBuf),
    StrReplaceEditor(fs::EditorCall, PathBuf),
    Glob(search::GlobArgs, PathBuf),
    Grep(search::GrepArgs, PathBuf),
    /// `bash` and `pwsh`, run as the launch says.
    Bash(bash::BashArgs, PathBuf, &'static shell::Launch),
    /// `lsp` and `dsh_lsp`.
    Lsp(lsp::Target, PathBuf),
    Mcp(crate::mcp::McpTool, String),
    TodoWrite(todo::TodoArgs),
    ExitPlanMode(String),
    AskUser(ask_user::AskArgs),
    JobOutput(jobs::OutputArgs),
    JobKill(jobs::KillArgs),
    JobList,
    WebFetch(web::FetchArgs),
    WebSearch(web::SearchArgs),
    Skill(skill::SkillArgs),
    Subagent(SubagentArgs),
    /// `create_goal`, `get_goal`, `update_goal` (the turn runs them).
    Goal(goal::GoalCall),
    /// The continuable children's tools (the turn runs them).
    Agents(agents::AgentsCall),
    /// The `terminal_*` tools.
    Terminal(terminal::TerminalCall),
    /// The `session_*` tools.
    SessionQuery(session_query::SessionQueryCall),
}

/// Which of the optional tools a session offers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Offer {
    /// `run_in_background` and the job tools.
    pub jobs: bool,
    /// `web_fetch`.
    pub web_fetch: bool,
    /// `web_search` (a search provider is configured).
    pub web_search: bool,
    /// `skill` (the session was given a skill catalog).
    pub skills: bool,
    /// `subagent` (the session may start children: `[subagents]`).
    pub subagents: bool,
    /// `read_image` (the session's model takes images).
    pub images: bool,
    /// The goal tools (`[goals]`; a session a person drives).
    pub goals: bool,
    /// Opt-in tools `[tools] enable` names.
    pub enabled: ToolSet,
    /// Tools `[tools] disable` names (never offered).
    pub disabled: ToolSet,
}

/// A catalog `number` that counts (a line, a column, a line count): `12`
/// and `12.0` are the same; a fraction, a negative or an unrepresentable
/// value is none.
pub(crate) fn whole_number(value: f64) -> Option<u64> {
    (value >= 0.0 && value.fract() == 0.0 && value < u64::MAX as f64).then_some(value as u64)
}

/// Why a call could not be planned (unknown tool, bad arguments, bad path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Stable code.
    pub code: ErrorCode,
    /// What the model is told.
    pub message: String,
}

impl Refusal {
    fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

impl From<Refusal> for ToolOutcome {
    fn from(refusal: Refusal) -> ToolOutcome {
        ToolOutcome::failed(refusal.code, refusal.message)
    }
}

fn parse<T: DeserializeOwned>(name: &str, arguments: &str) -> Result<T, Refusal> {
    let arguments = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    serde_json::from_str(arguments).map_err(|err| {
        let what = match err.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                "are not valid JSON"
            }
            _ => "do not match its schema",
        };
        Refusal::new(
            ErrorCode::InvalidToolArgs,
            format!("The arguments for {name} {what} ({err}). Call it again with one complete JSON object that matches its schema."),
        )
    })
}

/// A generic presentation for calls that could not be planned.
pub fn fallback_view(name: &str) -> ToolView {
    ToolView {
        title: name.to_owned(),
        kind: Some(ToolKind::Other),
        ..ToolView::default()
    }
}

/// Parses and presents a call. Titles are made safe to show (see
/// [`dsh_protocol::content::visible_title`]): arguments come from the model.
///
/// # Errors
/// Unknown tool or invalid arguments, as an outcome for the model.
pub fn plan(name: &str, arguments: &str, env: &PlanEnv<'_>) -> Result<Planned, Refusal> {
    let cwd = env.cwd;
    let Some(tool) = Tool::offered(name, env.offer) else {
        let known: Vec<String> = schemas(env.offer).into_iter().map(|s| s.name).collect();
        return Err(Refusal::new(
            ErrorCode::UnknownTool,
            format!(
                "Unknown tool {name:?}. Available tools: {}.",
                known.join(", ")
            ),
        ));
    };
    let (call, view, access) = match tool {
        Tool::Read => {
            let args: fs::ReadArgs = parse(name, arguments)?;
            let path = paths::resolve(cwd, &args.file_path)?;
            let view = fs::present_read(&args, &path, cwd);
            (
                Call::Read(args, path.clone()),
                view,
                Access::Read(vec![path]),
            )
        }
        Tool::Write => {
            let args: fs::WriteArgs = parse(name, arguments)?;
            let path = paths::resolve(cwd, &args.file_path)?;
            let view = fs::present_write(&path, cwd);
            (
                Call::Write(args, path.clone()),
                view,
                Access::Write(vec![path]),
            )
        }
        Tool::Edit => {
            let args: fs::EditArgs = parse(name, arguments)?;
            let path = paths::resolve(cwd, &args.file_path)?;
            let view = fs::present_edit(&path, cwd);
            (
                Call::Edit(args, path.clone()),
                view,
                Access::Write(vec![path]),
            )
        }
        Tool::ReadImage => {
            let args: fs::ReadImageArgs = parse(name, arguments)?;
            let path = paths::resolve(cwd, &args.file_path)?;
            let view = fs::present_read_image(&path, cwd);
            (
                Call::ReadImage(path.clone()),
                view,
                Access::Read(vec![path]),
            )
        }
        Tool::StrReplaceEditor => {
            let args: fs::EditorArgs = parse(name, arguments)?;
            let path = paths::resolve(cwd, &args.path)?;
            let call = fs::EditorCall::check(args)?;
            let view = fs::EditorCall::present(&call, &path, cwd);
            let access = if call.writes() {
                Access::Write(vec![path.clone()])
            } else {
                Access::Read(vec![path.clone()])
            };
            (Call::StrReplaceEditor(call, path), view, access)
        }
        Tool::Glob => {
            let args: search::GlobArgs = parse(name, arguments)?;
            let root = paths::resolve(cwd, args.path.as_deref().unwrap_or("."))?;
            let view = search::present_glob(&args, &root, cwd);
            (
                Call::Glob(args, root.clone()),
                view,
                Access::Read(vec![root]),
            )
        }
        Tool::Grep => {
            let args: search::GrepArgs = parse(name, arguments)?;
            let root = paths::resolve(cwd, args.path.as_deref().unwrap_or("."))?;
            let view = search::present_grep(&args, &root, cwd);
            (
                Call::Grep(args, root.clone()),
                view,
                Access::Read(vec![root]),
            )
        }
        Tool::Bash | Tool::Pwsh => {
            let args: bash::BashArgs = parse(name, arguments)?;
            let workdir = paths::resolve(cwd, args.workdir.as_deref().unwrap_or("."))?;
            let launch = shell::launch(tool);
            let view = bash::present(&args, launch);
            let access = Access::Execute {
                command: args.command.clone(),
                workdir: workdir.clone(),
                shell: launch.shell,
            };
            (Call::Bash(args, workdir, launch), view, access)
        }
        Tool::Lsp | Tool::DshLsp => {
            let (target, file_path) = if tool == Tool::Lsp {
                let args: lsp::LspArgs = parse(name, arguments)?;
                let elsewhere = Tool::offered(Tool::DshLsp.name(), env.offer).is_some()
                    && dsh_lsp::takes(&args.operation);
                (lsp::validate(&args, elsewhere)?, args.file_path)
            } else {
                let args: dsh_lsp::DshLspArgs = parse(name, arguments)?;
                (dsh_lsp::validate(&args)?, args.file_path)
            };
            let path = paths::resolve(cwd, &file_path)?;
            let view = lsp::present(&target, &path, cwd);
            // A server found only inside the workspace is a program from
            // the repository: the policy decides whether it may start.
            let access = match dsh_lsp_bridge::Bridge::workspace_program(env.lsp, &path, env.roots)
            {
                Some((_, program)) => Access::Launch {
                    program,
                    reads: vec![path.clone()],
                },
                None => Access::Read(vec![path.clone()]),
            };
            (Call::Lsp(target, path), view, access)
        }
        Tool::TodoWrite => {
            let args: todo::TodoArgs = parse(name, arguments)?;
            todo::validate(&args)?;
            let view = ToolView {
                title: "Update plan".to_owned(),
                kind: Some(ToolKind::Think),
                ..ToolView::default()
            };
            (Call::TodoWrite(args), view, Access::None)
        }
        Tool::ExitPlanMode => {
            let args: plan_mode::ExitPlanArgs = parse(name, arguments)?;
            plan_mode::validate(&args)?;
            let view = plan_mode::present(&args);
            (Call::ExitPlanMode(args.plan), view, Access::None)
        }
        Tool::AskUserQuestion => {
            let args: ask_user::AskArgs = parse(name, arguments)?;
            ask_user::validate(&args)?;
            let view = ask_user::present(&args);
            (Call::AskUser(args), view, Access::None)
        }
        Tool::JobOutput | Tool::JobKill | Tool::JobList => {
            let (call, title) = match tool {
                Tool::JobOutput => {
                    let args: jobs::OutputArgs = parse(name, arguments)?;
                    let title = format!("Read job {}", args.job_id);
                    (Call::JobOutput(args), title)
                }
                Tool::JobKill => {
                    let args: jobs::KillArgs = parse(name, arguments)?;
                    let title = format!("Stop job {}", args.job_id);
                    (Call::JobKill(args), title)
                }
                _ => (Call::JobList, "List background jobs".to_owned()),
            };
            let view = ToolView {
                title,
                kind: Some(ToolKind::Execute),
                ..ToolView::default()
            };
            // The jobs are the model's own, already allowed commands.
            (call, view, Access::None)
        }
        Tool::WebFetch => {
            let args: web::FetchArgs = parse(name, arguments)?;
            let host = web::host(&args)?;
            let view = ToolView {
                title: format!("Fetch {}", args.url),
                kind: Some(ToolKind::Fetch),
                ..ToolView::default()
            };
            (Call::WebFetch(args), view, Access::Web { host: Some(host) })
        }
        Tool::WebSearch => {
            let args: web::SearchArgs = parse(name, arguments)?;
            web::validate_search(&args)?;
            let view = ToolView {
                title: format!("Search the web: {}", args.queries.join(" · ")),
                kind: Some(ToolKind::Fetch),
                ..ToolView::default()
            };
            (Call::WebSearch(args), view, Access::Web { host: None })
        }
        Tool::Skill => {
            let args: skill::SkillArgs = parse(name, arguments)?;
            let view = skill::present(&args);
            // Read by dsh with the skills' own path policy, not the
            // model's file access.
            (Call::Skill(args), view, Access::None)
        }
        Tool::CreateGoal | Tool::GetGoal | Tool::UpdateGoal => {
            let (call, view) = goal::plan(tool, name, arguments)?;
            (Call::Goal(call), view, Access::None)
        }
        Tool::InterruptAgent | Tool::ListAgents | Tool::SendMessage | Tool::ListSubagentModels => {
            let (call, view) = agents::plan(tool, name, arguments)?;
            (Call::Agents(call), view, Access::None)
        }
        Tool::TerminalOpen
        | Tool::TerminalList
        | Tool::TerminalRead
        | Tool::TerminalSend
        | Tool::TerminalSignal
        | Tool::TerminalClose => {
            let (call, view, access) = terminal::plan(tool, name, arguments, env)?;
            (Call::Terminal(call), view, access)
        }
        Tool::SessionSearch
        | Tool::SessionEventSearch
        | Tool::SessionEventRead
        | Tool::SessionTrace
        | Tool::SessionEventTrace => {
            let (call, view) = session_query::plan(tool, name, arguments)?;
            (Call::SessionQuery(call), view, Access::None)
        }
        Tool::Subagent => {
            let args: SubagentArgs = parse(name, arguments)?;
            subagent::validate(&args, env.offer.jobs)?;
            let view = subagent::present(&args);
            // The child asks for what its own calls need.
            (Call::Subagent(args), view, Access::None)
        }
    };
    let view = ToolView {
        title: dsh_protocol::content::visible_title(&view.title, 200),
        ..view
    };
    let spec = tool.spec();
    debug_assert!(in_class(&access, spec.class), "{name}: {access:?}");
    Ok(Planned {
        stops_itself: spec.stops_itself,
        edits_files: spec.edits_files,
        call,
        name: spec.name.to_owned(),
        view,
        access,
        parallel: spec.parallel,
    })
}

/// Whether a planned access is of its tool's class.
fn in_class(access: &Access, class: Class) -> bool {
    matches!(
        (class, access),
        (Class::Nothing, Access::None)
            | (Class::Reads, Access::Read(_) | Access::Launch { .. })
            // A tool that writes may also only read (`str_replace_editor`'s
            // `view`).
            | (Class::Writes, Access::Write(_) | Access::Read(_))
            | (Class::Executes, Access::Execute { .. })
            | (Class::Web, Access::Web { .. })
    )
}

/// Plans a call to an MCP tool: presented as "server: tool", decided by the
/// policy as an external call, run by the session's hub.
pub fn plan_mcp(tool: crate::mcp::McpTool, arguments: &str) -> Planned {
    let view = ToolView {
        title: dsh_protocol::content::visible_title(
            &format!("{}: {}", tool.server, tool.tool),
            200,
        ),
        kind: Some(ToolKind::Other),
        ..ToolView::default()
    };
    Planned {
        name: tool.model_name.clone(),
        call: Call::Mcp(tool, arguments.to_owned()),
        view,
        access: Access::External,
        parallel: false,
        stops_itself: false,
        edits_files: false,
    }
}

/// Runs a planned call.
pub async fn run(planned: &Planned, env: &ToolEnv<'_>) -> ToolOutcome {
    match &planned.call {
        Call::Read(args, path) => fs::read(args, path, env).await,
        Call::Write(args, path) => fs::write(args, path, env).await,
        Call::Edit(args, path) => fs::edit(args, path, env).await,
        Call::ReadImage(path) => fs::read_image(path).await,
        Call::StrReplaceEditor(call, path) => fs::EditorCall::run(call, path, env).await,
        Call::Glob(args, root) => search::glob(args, root, env).await,
        Call::Grep(args, root) => search::grep(args, root, env).await,
        Call::Bash(args, workdir, launch) => bash::run(args, workdir, launch, env).await,
        Call::Lsp(target, path) => lsp::run(target, path, env).await,
        Call::Mcp(tool, arguments) => match &env.mcp {
            Some(hub) => {
                let outcome = hub.call(tool, arguments, env.cancel).await;
                spill::cap_output(outcome, spill::MCP_RESULT_BYTES, env).await
            }
            None => ToolOutcome::failed(ErrorCode::Internal, "the session's MCP servers are gone"),
        },
        Call::TodoWrite(args) => todo::run(args),
        Call::JobOutput(args) => jobs::output(args, env).await,
        Call::JobKill(args) => jobs::kill(args, env),
        Call::JobList => jobs::list(env),
        Call::WebFetch(args) => web::fetch(args, env).await,
        Call::Skill(args) => skill::run(args, env.skills).await,
        Call::WebSearch(args) => web::search(args, env).await,
        // The turn runs them (see [`Planned::submitted_plan`],
        // [`Planned::questions`] and [`Planned::delegated`]).
        Call::Terminal(call) => terminal::run(call, env).await,
        Call::SessionQuery(call) => session_query::run(call, env).await,
        Call::ExitPlanMode(_)
        | Call::AskUser(_)
        | Call::Subagent(_)
        | Call::Goal(_)
        | Call::Agents(_) => ToolOutcome::failed(ErrorCode::Internal, "this tool runs in the turn"),
    }
}
