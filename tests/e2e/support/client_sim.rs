//! A scripted editor for tool tests: it answers permission prompts and
//! forms (`elicitation/create`) from queues (recording each request),
//! serves `fs/*` from an in-memory buffer
//! map over the disk (recording writes, never touching the disk), and runs
//! `terminal/*` commands as real local processes.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    ClientCapabilities, CreateElicitationRequest, CreateElicitationResponse, CreateTerminalRequest,
    CreateTerminalResponse, ElicitationAcceptAction, ElicitationAction, ElicitationCapabilities,
    ElicitationFormCapabilities, FileSystemCapabilities, KillTerminalRequest, KillTerminalResponse,
    PermissionOptionKind, ReadTextFileRequest, ReadTextFileResponse, ReleaseTerminalRequest,
    ReleaseTerminalResponse, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SetSessionConfigOptionRequest,
    TerminalExitStatus, TerminalOutputRequest, TerminalOutputResponse, WaitForTerminalExitRequest,
    WaitForTerminalExitResponse, WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent, Responder, V1};

fn kill_group(pgid: u32) {
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}
use tokio::io::AsyncReadExt;

/// How to answer a permission prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Select the option of this kind.
    Select(PermissionOptionKind),
    /// Select the option with this id.
    SelectId(&'static str),
    /// Answer with a JSON-RPC error (a broken client).
    Error,
    /// Answer `cancelled`.
    Cancelled,
    /// Switch the session's mode first (from a spawned task), then select.
    SwitchModeThenSelect(String, PermissionOptionKind),
}

/// How to answer a form.
#[derive(Debug, Clone, PartialEq)]
pub enum Elicit {
    /// Submit it with this content (an object of field → value).
    Accept(serde_json::Value),
    /// Decline it.
    Decline,
    /// Cancel it.
    Cancel,
    /// Leave it open (never answer).
    Hold,
    /// Answer "method not found" (-32601), as the official Python SDK
    /// does unless its unstable flag is on.
    MethodNotFound,
}

struct Terminal {
    output: Arc<Mutex<String>>,
    exit: tokio::sync::watch::Receiver<Option<(Option<u32>, Option<String>)>>,
    pgid: u32,
}

/// The scripted editor.
#[derive(Default)]
pub struct ClientSim {
    /// Advertise `fs.readTextFile` and `fs.writeTextFile`.
    pub fs: bool,
    /// Advertise `terminal`.
    pub terminal: bool,
    /// Advertise `elicitation.form`.
    pub elicitation: bool,
    /// Advertise `_meta.terminal_output` (Zed's live command output).
    pub terminal_output: bool,
    /// Advertise `_meta.terminal_output_delta` too.
    pub terminal_output_delta: bool,
    /// Advertise `subagents` (ACP's unstable subagent sessions).
    pub subagents: bool,
    /// Answers to forms, in order; when empty, forms are declined.
    pub elicit_answers: Mutex<VecDeque<Elicit>>,
    /// Every `elicitation/create` received.
    pub elicitations: Mutex<Vec<CreateElicitationRequest>>,
    /// Forms left open ([`Elicit::Hold`]).
    held: Mutex<Vec<Responder<CreateElicitationResponse, V1>>>,
    /// Answers, in order; when empty, prompts are answered `reject_once`.
    pub answers: Mutex<VecDeque<Answer>>,
    /// Every permission request received.
    pub permission_requests: Mutex<Vec<RequestPermissionRequest>>,
    /// Unsaved buffers (path → text) that `fs/read_text_file` prefers.
    pub buffers: Mutex<HashMap<PathBuf, String>>,
    /// Every `fs/write_text_file`.
    pub writes: Mutex<Vec<(PathBuf, String)>>,
    /// Every `fs/read_text_file` path.
    pub reads: Mutex<Vec<PathBuf>>,
    /// Terminal methods in call order.
    pub terminal_calls: Mutex<Vec<String>>,
    /// Client methods dsh called without the capability being advertised.
    pub violations: Mutex<Vec<String>>,
    /// When set, `fs/write_text_file` fails with this as the error's `data`
    /// (as acpx does when its user denies the write).
    pub fail_writes: Mutex<Option<String>>,
    terminals: Mutex<HashMap<String, Terminal>>,
}

impl ClientSim {
    /// The tool-call ids of every permission request so far, in order.
    pub fn asked(&self) -> Vec<String> {
        self.permission_requests
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.tool_call.tool_call_id.0.to_string())
            .collect()
    }

    pub fn new(fs: bool, terminal: bool) -> Arc<ClientSim> {
        Arc::new(ClientSim {
            fs,
            terminal,
            ..ClientSim::default()
        })
    }

    pub fn answer(&self, answer: Answer) {
        self.answers.lock().unwrap().push_back(answer);
    }

    pub fn capabilities(&self) -> ClientCapabilities {
        ClientCapabilities::new()
            .fs(FileSystemCapabilities::new()
                .read_text_file(self.fs)
                .write_text_file(self.fs))
            .terminal(self.terminal)
            .elicitation(
                self.elicitation.then(|| {
                    ElicitationCapabilities::new().form(ElicitationFormCapabilities::new())
                }),
            )
            .subagents(
                self.subagents
                    .then(agent_client_protocol::v1::schema::SubagentCapabilities::new),
            )
            .meta(
                (self.terminal_output || self.terminal_output_delta).then(|| {
                    serde_json::json!({
                        "terminal_output": self.terminal_output,
                        "terminal_output_delta": self.terminal_output_delta,
                    })
                    .as_object()
                    .cloned()
                    .unwrap()
                }),
            )
    }

    /// A scripted editor that shows subagents as sessions of their own
    /// (and nothing else).
    pub fn with_subagents() -> Arc<ClientSim> {
        Arc::new(ClientSim {
            subagents: true,
            ..ClientSim::default()
        })
    }

    /// A scripted editor with Zed's live command output (`delta`: as
    /// the new bytes only), and nothing else.
    pub fn with_terminal_output(delta: bool) -> Arc<ClientSim> {
        Arc::new(ClientSim {
            terminal_output: true,
            terminal_output_delta: delta,
            ..ClientSim::default()
        })
    }

    /// A scripted editor with forms (and nothing else).
    pub fn with_forms() -> Arc<ClientSim> {
        Arc::new(ClientSim {
            elicitation: true,
            ..ClientSim::default()
        })
    }

    pub fn elicit(&self, answer: Elicit) {
        self.elicit_answers.lock().unwrap().push_back(answer);
    }

    pub fn on_elicitation(
        self: &Arc<Self>,
        request: CreateElicitationRequest,
        responder: Responder<CreateElicitationResponse, V1>,
    ) -> Result<(), agent_client_protocol::Error> {
        if !self.elicitation {
            self.violations
                .lock()
                .unwrap()
                .push("elicitation/create".into());
        }
        self.elicitations.lock().unwrap().push(request);
        let answer = self
            .elicit_answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Elicit::Decline);
        let action = match answer {
            Elicit::Accept(content) => {
                ElicitationAction::Accept(ElicitationAcceptAction::new().content(
                    serde_json::from_value::<std::collections::BTreeMap<_, _>>(content).unwrap(),
                ))
            }
            Elicit::Decline => ElicitationAction::Decline,
            Elicit::Cancel => ElicitationAction::Cancel,
            Elicit::Hold => {
                self.held.lock().unwrap().push(responder);
                return Ok(());
            }
            Elicit::MethodNotFound => {
                return responder
                    .respond_with_error(agent_client_protocol::Error::method_not_found());
            }
        };
        responder.respond(CreateElicitationResponse::new(action))
    }

    /// Answers the oldest form left open ([`Elicit::Hold`]) with `content`.
    pub fn answer_held(&self, content: serde_json::Value) {
        let responder = self.held.lock().unwrap().remove(0);
        responder
            .respond(CreateElicitationResponse::new(ElicitationAction::Accept(
                ElicitationAcceptAction::new().content(
                    serde_json::from_value::<std::collections::BTreeMap<_, _>>(content).unwrap(),
                ),
            )))
            .unwrap();
    }

    /// How many forms are left open.
    pub fn held_forms(&self) -> usize {
        self.held.lock().unwrap().len()
    }

    pub fn on_permission(
        self: &Arc<Self>,
        request: RequestPermissionRequest,
        responder: Responder<RequestPermissionResponse, V1>,
        cx: ConnectionTo<Agent>,
    ) -> Result<(), agent_client_protocol::Error> {
        self.permission_requests
            .lock()
            .unwrap()
            .push(request.clone());
        let answer = self
            .answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Answer::Select(PermissionOptionKind::RejectOnce));
        let pick = |kind: PermissionOptionKind| {
            let option = request
                .options
                .iter()
                .find(|o| o.kind == kind)
                .expect("offered option");
            RequestPermissionResponse::new(RequestPermissionOutcome::Selected(
                SelectedPermissionOutcome::new(option.option_id.clone()),
            ))
        };
        match answer {
            Answer::Select(kind) => responder.respond(pick(kind)),
            Answer::SelectId(id) => {
                let option = request
                    .options
                    .iter()
                    .find(|o| o.option_id.0.as_ref() == id)
                    .expect("offered option");
                responder.respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                        option.option_id.clone(),
                    )),
                ))
            }
            Answer::Cancelled => responder.respond(RequestPermissionResponse::new(
                RequestPermissionOutcome::Cancelled,
            )),
            Answer::Error => {
                responder.respond_with_error(agent_client_protocol::Error::internal_error())
            }
            Answer::SwitchModeThenSelect(mode, kind) => {
                let session = request.session_id.clone();
                let response = pick(kind);
                cx.clone().spawn(async move {
                    cx.send_request(SetSessionConfigOptionRequest::new(
                        session,
                        "mode",
                        mode.as_str(),
                    ))
                    .block_task()
                    .await?;
                    responder.respond(response)
                })
            }
        }
    }

    pub fn on_read(
        self: &Arc<Self>,
        request: ReadTextFileRequest,
        responder: Responder<ReadTextFileResponse, V1>,
    ) -> Result<(), agent_client_protocol::Error> {
        if !self.fs {
            self.violations
                .lock()
                .unwrap()
                .push("fs/read_text_file".into());
        }
        self.reads.lock().unwrap().push(request.path.clone());
        let buffered = self.buffers.lock().unwrap().get(&request.path).cloned();
        match buffered
            .map(Ok)
            .unwrap_or_else(|| std::fs::read_to_string(&request.path))
        {
            Ok(text) => responder.respond(ReadTextFileResponse::new(text)),
            Err(err) => responder.respond_with_error(
                agent_client_protocol::Error::internal_error()
                    .data(format!("{}: {err}", request.path.display())),
            ),
        }
    }

    pub fn on_write(
        self: &Arc<Self>,
        request: WriteTextFileRequest,
        responder: Responder<WriteTextFileResponse, V1>,
    ) -> Result<(), agent_client_protocol::Error> {
        if !self.fs {
            self.violations
                .lock()
                .unwrap()
                .push("fs/write_text_file".into());
        }
        if let Some(data) = self.fail_writes.lock().unwrap().clone() {
            return responder
                .respond_with_error(agent_client_protocol::Error::internal_error().data(data));
        }
        self.writes
            .lock()
            .unwrap()
            .push((request.path.clone(), request.content.clone()));
        self.buffers
            .lock()
            .unwrap()
            .insert(request.path, request.content);
        responder.respond(WriteTextFileResponse::new())
    }

    pub fn on_create_terminal(
        self: &Arc<Self>,
        request: CreateTerminalRequest,
        responder: Responder<CreateTerminalResponse, V1>,
    ) -> Result<(), agent_client_protocol::Error> {
        if !self.terminal {
            self.violations
                .lock()
                .unwrap()
                .push("terminal/create".into());
        }
        self.terminal_calls.lock().unwrap().push("create".into());
        let mut command = tokio::process::Command::new(&request.command);
        command
            .args(&request.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(cwd) = &request.cwd {
            command.current_dir(cwd);
        }
        let mut child = command.spawn().expect("spawn terminal command");
        let pgid = child.id().unwrap();
        let output = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = tokio::sync::watch::channel(None);
        let streams = [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
        ];
        for stream in streams.into_iter().flatten() {
            let output = output.clone();
            tokio::spawn(async move {
                let mut stream = stream;
                let mut buf = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    output
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
        }
        tokio::spawn(async move {
            use std::os::unix::process::ExitStatusExt;
            let status = child.wait().await.ok();
            let code = status.and_then(|s| s.code()).map(|c| c as u32);
            let signal = status.and_then(|s| s.signal()).map(|s| format!("{s}"));
            let _ = tx.send(Some((code, signal)));
        });
        let id = format!("term-{pgid}");
        self.terminals.lock().unwrap().insert(
            id.clone(),
            Terminal {
                output,
                exit: rx,
                pgid,
            },
        );
        responder.respond(CreateTerminalResponse::new(id))
    }

    pub fn on_wait(
        self: &Arc<Self>,
        request: WaitForTerminalExitRequest,
        responder: Responder<WaitForTerminalExitResponse, V1>,
        cx: ConnectionTo<Agent>,
    ) -> Result<(), agent_client_protocol::Error> {
        self.terminal_calls
            .lock()
            .unwrap()
            .push("wait_for_exit".into());
        let mut exit = self
            .terminals
            .lock()
            .unwrap()
            .get(request.terminal_id.0.as_ref())
            .map(|t| t.exit.clone())
            .expect("known terminal");
        cx.spawn(async move {
            let status = loop {
                if let Some(status) = exit.borrow().clone() {
                    break status;
                }
                if exit.changed().await.is_err() {
                    break (None, None);
                }
            };
            responder.respond(WaitForTerminalExitResponse::new(
                TerminalExitStatus::new()
                    .exit_code(status.0)
                    .signal(status.1),
            ))
        })
    }

    pub fn on_kill(
        self: &Arc<Self>,
        request: KillTerminalRequest,
        responder: Responder<KillTerminalResponse, V1>,
    ) -> Result<(), agent_client_protocol::Error> {
        self.terminal_calls.lock().unwrap().push("kill".into());
        if let Some(terminal) = self
            .terminals
            .lock()
            .unwrap()
            .get(request.terminal_id.0.as_ref())
        {
            kill_group(terminal.pgid);
        }
        responder.respond(KillTerminalResponse::new())
    }

    pub fn on_output(
        self: &Arc<Self>,
        request: TerminalOutputRequest,
        responder: Responder<TerminalOutputResponse, V1>,
    ) -> Result<(), agent_client_protocol::Error> {
        self.terminal_calls.lock().unwrap().push("output".into());
        let terminals = self.terminals.lock().unwrap();
        let terminal = terminals
            .get(request.terminal_id.0.as_ref())
            .expect("known terminal");
        let status = terminal.exit.borrow().clone();
        let output = terminal.output.lock().unwrap().clone();
        let response =
            TerminalOutputResponse::new(output, false)
                .exit_status(status.map(|(code, signal)| {
                    TerminalExitStatus::new().exit_code(code).signal(signal)
                }));
        responder.respond(response)
    }

    pub fn on_release(
        self: &Arc<Self>,
        request: ReleaseTerminalRequest,
        responder: Responder<ReleaseTerminalResponse, V1>,
    ) -> Result<(), agent_client_protocol::Error> {
        self.terminal_calls.lock().unwrap().push("release".into());
        if let Some(terminal) = self
            .terminals
            .lock()
            .unwrap()
            .remove(request.terminal_id.0.as_ref())
        {
            kill_group(terminal.pgid);
        }
        responder.respond(ReleaseTerminalResponse::new())
    }
}
