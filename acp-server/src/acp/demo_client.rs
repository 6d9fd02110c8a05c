//! `dsh demo`'s editor: an ACP *client* that drives a child `dsh acp` as
//! an editor would — a session with prompts and a mode change, then a
//! second child that lists and reloads it — and prints what it is shown
//! as a person would see it. [`crate::demo`] sets the scene and calls it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, ListSessionsRequest, LoadSessionRequest, NewSessionRequest,
    PermissionOptionKind, PlanEntryStatus, PromptRequest, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionConfigKind, SessionConfigOption, SessionNotification, SessionUpdate,
    SetSessionConfigOptionRequest, TextContent, ToolCallContent, ToolCallStatus,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent, ByteStreams, Client};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// Where the demo prints.
pub type Out = Arc<Mutex<Box<dyn Write + Send>>>;

/// Where the child `dsh acp` keeps its state and reads its script.
pub struct Child<'a> {
    /// Its `DSH_HOME`.
    pub home: &'a Path,
    /// The replay model's script.
    pub script: &'a Path,
}

/// What the printer is in the middle of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    None,
    Thought,
    Message,
}

/// Prints the demo: its own lines, and the session's updates as a person
/// would read them.
pub struct Printer {
    out: Out,
    block: Mutex<Block>,
    replayed: Mutex<usize>,
    live: Mutex<bool>,
}

impl Printer {
    /// A printer to `out`, showing updates as they come.
    pub fn new(out: Out) -> Printer {
        Printer {
            out,
            block: Mutex::new(Block::None),
            replayed: Mutex::new(0),
            live: Mutex::new(true),
        }
    }

    /// From now on updates are counted, not shown (a replay).
    pub fn count_only(&self) {
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) = false;
    }

    /// The updates counted since [`Self::count_only`].
    pub fn replayed(&self) -> usize {
        *self.replayed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One line of the demo's own.
    pub fn line(&self, text: &str) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }

    fn update(&self, update: SessionUpdate) {
        if !*self.live.lock().unwrap_or_else(|p| p.into_inner()) {
            *self.replayed.lock().unwrap_or_else(|p| p.into_inner()) += 1;
            return;
        }
        let mut block = self.block.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let text_of = |chunk: &agent_client_protocol::v1::schema::ContentChunk| match &chunk.content
        {
            ContentBlock::Text(text) => text.text.clone(),
            _ => "[non-text content]".to_owned(),
        };
        let _ = match update {
            SessionUpdate::AgentThoughtChunk(chunk) => {
                let text = text_of(&chunk);
                if *block != Block::Thought {
                    *block = Block::Thought;
                    write!(out, "  thinking: {text}")
                } else {
                    write!(out, "{text}")
                }
            }
            SessionUpdate::AgentMessageChunk(chunk) => {
                let text = text_of(&chunk).replace('\n', "\n  ");
                if *block != Block::Message {
                    let sep = if *block == Block::Thought { "\n\n" } else { "" };
                    *block = Block::Message;
                    write!(out, "{sep}  {text}")
                } else {
                    write!(out, "{text}")
                }
            }
            SessionUpdate::UsageUpdate(usage) => {
                let sep = if *block == Block::None { "" } else { "\n" };
                *block = Block::None;
                writeln!(
                    out,
                    "{sep}  [context: {} of {} tokens]",
                    usage.used, usage.size
                )
            }
            SessionUpdate::SessionInfoUpdate(info) => match info.title {
                agent_client_protocol::schema::MaybeUndefined::Value(title) => {
                    writeln!(out, "  [session title: {title}]")
                }
                _ => Ok(()),
            },
            SessionUpdate::ToolCall(call) => {
                let sep = if *block == Block::None { "" } else { "\n" };
                *block = Block::None;
                writeln!(out, "{sep}  ▸ {}", call.title)
            }
            SessionUpdate::ToolCallUpdate(update) => {
                *block = Block::None;
                match update.fields.status {
                    Some(ToolCallStatus::Completed) => {
                        let mut text = String::new();
                        for content in update.fields.content.iter().flatten() {
                            match content {
                                ToolCallContent::Diff(diff) => text.push_str(&render_diff(
                                    diff.old_text.as_deref().unwrap_or(""),
                                    &diff.new_text,
                                )),
                                ToolCallContent::Content(content) => {
                                    if let ContentBlock::Text(output) = &content.content {
                                        for line in
                                            output.text.lines().filter(|l| !l.starts_with("```"))
                                        {
                                            text.push_str(&format!("      | {line}\n"));
                                        }
                                    }
                                }
                                _ => {}
                            }
                        }
                        write!(out, "    ✓ done\n{text}")
                    }
                    Some(ToolCallStatus::Failed) => writeln!(out, "    ✗ failed"),
                    _ => Ok(()),
                }
            }
            SessionUpdate::Plan(plan) => {
                *block = Block::None;
                let mut text = String::from("  plan:\n");
                for entry in &plan.entries {
                    let mark = match entry.status {
                        PlanEntryStatus::Completed => "[x]",
                        PlanEntryStatus::InProgress => "[~]",
                        _ => "[ ]",
                    };
                    text.push_str(&format!("    {mark} {}\n", entry.content));
                }
                write!(out, "{text}")
            }
            _ => Ok(()),
        };
        let _ = out.flush();
    }
}

/// The changed lines of a diff, as a person reads them in a review.
fn render_diff(old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new);
    let mut text = String::new();
    for change in diff.iter_all_changes() {
        let sign = match change.tag() {
            similar::ChangeTag::Delete => "-",
            similar::ChangeTag::Insert => "+",
            similar::ChangeTag::Equal => continue,
        };
        text.push_str(&format!("      {sign} {}", change.value()));
        if !change.value().ends_with('\n') {
            text.push('\n');
        }
    }
    text
}

fn describe(options: &[SessionConfigOption]) -> String {
    options
        .iter()
        .filter_map(|option| match &option.kind {
            SessionConfigKind::Select(select) => {
                Some(format!("{} = {}", option.id.0, select.current_value.0))
            }
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Starts a session in `workspace` and sends it `prompts` (before the
/// second, the mode becomes accept-edits; every permission is allowed
/// once). Its id.
///
/// # Errors
/// The child cannot start, or the protocol exchange fails.
pub async fn first_session(
    child: &Child<'_>,
    printer: &Arc<Printer>,
    workspace: &Path,
    prompts: &'static [&'static str],
) -> anyhow::Result<String> {
    let (shown, workspace) = (printer.clone(), workspace.to_owned());
    connect(
        child,
        printer.clone(),
        async move |cx: ConnectionTo<Agent>| {
            let printer = shown;
            let init = cx
                .send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let info = init
                .agent_info
                .map(|i| format!("{} {}", i.name, i.version))
                .unwrap_or_default();
            printer.line(&format!(
                "agent: {info} (ACP protocol {})",
                serde_json::to_string(&init.protocol_version).unwrap_or_default()
            ));
            let session = cx
                .send_request(NewSessionRequest::new(workspace.clone()))
                .block_task()
                .await?;
            printer.line(&format!("session: {}", session.session_id.0));
            printer.line(&format!(
                "settings: {}",
                describe(session.config_options.as_deref().unwrap_or_default())
            ));
            for (index, prompt) in prompts.iter().enumerate() {
                if index == 1 {
                    let options = cx
                        .send_request(SetSessionConfigOptionRequest::new(
                            session.session_id.clone(),
                            "mode",
                            "accept-edits",
                        ))
                        .block_task()
                        .await?;
                    printer.line(&format!(
                        "\n(settings changed: {})",
                        describe(&options.config_options)
                    ));
                }
                printer.line(&format!("\n> {prompt}"));
                let response = cx
                    .send_request(PromptRequest::new(
                        session.session_id.clone(),
                        vec![ContentBlock::Text(TextContent::new(*prompt))],
                    ))
                    .block_task()
                    .await?;
                printer.line(&format!(
                    "  [stop: {}]",
                    serde_json::to_string(&response.stop_reason)
                        .unwrap_or_default()
                        .trim_matches('"')
                ));
            }
            Ok(session.session_id.0.to_string())
        },
    )
    .await
}

/// Lists the sessions in a fresh child and reloads `session_id` (its
/// updates counted, not shown).
///
/// # Errors
/// The child cannot start, or the protocol exchange fails.
pub async fn reload(
    child: &Child<'_>,
    printer: &Arc<Printer>,
    workspace: &Path,
    session_id: &str,
) -> anyhow::Result<()> {
    printer.count_only();
    let (shown, workspace) = (printer.clone(), workspace.to_owned());
    let session_id = session_id.to_owned();
    connect(
        child,
        printer.clone(),
        async move |cx: ConnectionTo<Agent>| {
            let printer = shown;
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let list = cx
                .send_request(ListSessionsRequest::new())
                .block_task()
                .await?;
            for session in &list.sessions {
                printer.line(&format!(
                    "  listed: {} \"{}\" updated {}",
                    session.session_id.0,
                    session.title.as_deref().unwrap_or(""),
                    session.updated_at.as_deref().unwrap_or("")
                ));
            }
            cx.send_request(LoadSessionRequest::new(session_id, workspace))
                .block_task()
                .await?;
            Ok(())
        },
    )
    .await
}

async fn connect<T: Send + 'static>(
    child: &Child<'_>,
    printer: Arc<Printer>,
    body: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<T, agent_client_protocol::Error>
        + Send
        + 'static,
) -> anyhow::Result<T> {
    let exe: PathBuf = std::env::current_exe()?;
    let mut process = tokio::process::Command::new(exe)
        .arg("acp")
        .env("DSH_HOME", child.home)
        .env("DSH_PROVIDER", "replay")
        .env("DSH_REPLAY_FILE", child.script)
        .env("DSH_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let stdin = process
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("child stdin missing"))?;
    let stdout = process
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("child stdout missing"))?;
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let asker = printer.clone();
    let result = Client
        .v1()
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                printer.update(notification.update);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                // The demo plays a user who allows each prompt once.
                let title = request.tool_call.fields.title.clone().unwrap_or_default();
                asker.line(&format!(
                    "    ? dsh asks permission for \"{title}\" → allow once"
                ));
                let choice = request
                    .options
                    .iter()
                    .find(|o| o.kind == PermissionOptionKind::AllowOnce);
                let outcome = match choice {
                    Some(option) => RequestPermissionOutcome::Selected(
                        SelectedPermissionOutcome::new(option.option_id.clone()),
                    ),
                    None => RequestPermissionOutcome::Cancelled,
                };
                responder.respond(RequestPermissionResponse::new(outcome))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, body)
        .await
        .map_err(|err| anyhow::anyhow!("ACP exchange failed: {err:?}"));
    drop(process.stdin.take());
    let _ = tokio::time::timeout(std::time::Duration::from_secs(3), process.wait()).await;
    result
}
