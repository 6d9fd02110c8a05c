//! One running language server: process, protocol loop, readiness, open
//! documents and diagnostics.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_lsp::router::Router;
use async_lsp::{LanguageServer as _, ServerSocket};
use lsp_types::notification::{
    DidChangeTextDocument, DidOpenTextDocument, Exit, Initialized, LogMessage, Progress,
    PublishDiagnostics, ShowMessage,
};
use lsp_types::request::{
    ApplyWorkspaceEdit, RegisterCapability, ShowMessageRequest, UnregisterCapability,
    WorkDoneProgressCreate, WorkspaceConfiguration,
};
use lsp_types::{
    ClientCapabilities, DidChangeTextDocumentParams, DidOpenTextDocumentParams, InitializeParams,
    InitializedParams, NumberOrString, ProgressParamsValue, ServerCapabilities,
    TextDocumentContentChangeEvent, TextDocumentItem, Url, VersionedTextDocumentIdentifier,
    WorkDoneProgress, WorkspaceFolder,
};
use tokio::io::AsyncBufReadExt;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::registry::Resolved;
use crate::LspError;

/// State the protocol loop updates and queries read.
#[derive(Default)]
pub(crate) struct Shared {
    /// Progress tokens that began and have not ended.
    active_progress: HashSet<String>,
    /// rust-analyzer's `experimental/serverStatus` quiescent flag.
    quiescent: Option<bool>,
    /// Latest diagnostics per document: the version they are for (when the
    /// server says), the items, and the publish sequence number.
    pub(crate) diagnostics: HashMap<Url, (Option<i32>, Vec<lsp_types::Diagnostic>, u64)>,
    /// Counts `publishDiagnostics` notifications.
    pub(crate) publish_seq: u64,
    /// When the server started or last began/ended a progress report.
    last_activity: Option<Instant>,
}

/// A server counts as ready only after this long without progress activity,
/// so one that starts reporting "indexing" just after `initialized` is not
/// mistaken for ready in the gap.
const SETTLE: Duration = Duration::from_millis(250);

struct RouterState {
    shared: Arc<Mutex<Shared>>,
    changed: Arc<tokio::sync::Notify>,
    settings: Option<serde_json::Value>,
    name: String,
}

fn token_key(token: &NumberOrString) -> String {
    match token {
        NumberOrString::Number(n) => n.to_string(),
        NumberOrString::String(s) => s.clone(),
    }
}

/// Looks a dotted section up in the settings tree.
fn section(settings: &Option<serde_json::Value>, name: Option<&str>) -> serde_json::Value {
    let Some(settings) = settings else {
        return serde_json::Value::Null;
    };
    match name {
        None | Some("") => settings.clone(),
        Some(name) => name
            .split('.')
            .try_fold(settings, |value, key| value.get(key))
            .cloned()
            .unwrap_or(serde_json::Value::Null),
    }
}

/// A running server.
pub(crate) struct Server {
    pub(crate) name: String,
    socket: ServerSocket,
    pub(crate) shared: Arc<Mutex<Shared>>,
    pub(crate) changed: Arc<tokio::sync::Notify>,
    pub(crate) capabilities: ServerCapabilities,
    docs: tokio::sync::Mutex<HashMap<Url, (i32, String)>>,
    pub(crate) language_ids: std::collections::BTreeMap<String, String>,
    pgid: u32,
    child: tokio::sync::Mutex<Option<tokio::process::Child>>,
    dead: tokio::sync::watch::Receiver<bool>,
    last_used: Mutex<Instant>,
}

impl Server {
    /// Spawns and initializes a server for `root`.
    pub(crate) async fn start(
        resolved: &Resolved,
        root: &Path,
        init_timeout: Duration,
        spawner: &dsh_process::Spawner,
        sandbox: Option<&dsh_process::sandbox::Sandbox>,
    ) -> Result<Arc<Server>, LspError> {
        let spec = &resolved.spec;
        let name = spec.name.clone();
        let crashed = |detail: String| LspError::Crashed {
            server: name.clone(),
            detail,
        };
        let mut command = crate::registry::launch(spawner, &resolved.program, &spec.args, sandbox)
            .map_err(&crashed)?;
        command
            .current_dir(root)
            .envs(&spec.env)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn().map_err(|err| {
            crashed(format!(
                "cannot start {}: {err}",
                resolved.program.display()
            ))
        })?;
        let pgid = child.id().unwrap_or(0);
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| crashed("no stdin".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| crashed("no stdout".into()))?;
        if let Some(stderr) = child.stderr.take() {
            let name = name.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(server = %name, "stderr: {line}");
                }
            });
        }

        let shared = Arc::new(Mutex::new(Shared {
            last_activity: Some(Instant::now()),
            ..Shared::default()
        }));
        let changed = Arc::new(tokio::sync::Notify::new());
        let state = RouterState {
            shared: shared.clone(),
            changed: changed.clone(),
            settings: spec.settings.clone(),
            name: name.clone(),
        };
        let (mainloop, socket) = async_lsp::MainLoop::new_client(move |_server| {
            let mut router = Router::new(state);
            router
                .request::<WorkspaceConfiguration, _>(|state, params| {
                    let values: Vec<serde_json::Value> = params
                        .items
                        .iter()
                        .map(|item| section(&state.settings, item.section.as_deref()))
                        .collect();
                    std::future::ready(Ok(values))
                })
                .request::<RegisterCapability, _>(|_, _| std::future::ready(Ok(())))
                .request::<UnregisterCapability, _>(|_, _| std::future::ready(Ok(())))
                .request::<WorkDoneProgressCreate, _>(|_, _| std::future::ready(Ok(())))
                .request::<ShowMessageRequest, _>(|_, _| std::future::ready(Ok(None)))
                .request::<ApplyWorkspaceEdit, _>(|_, _| {
                    std::future::ready(Ok(lsp_types::ApplyWorkspaceEditResponse {
                        applied: false,
                        failure_reason: Some(
                            "dsh does not apply edits from language servers".into(),
                        ),
                        failed_change: None,
                    }))
                })
                .notification::<Progress>(|state, params| {
                    let key = token_key(&params.token);
                    let mut shared = state.shared.lock().unwrap_or_else(|p| p.into_inner());
                    match params.value {
                        ProgressParamsValue::WorkDone(WorkDoneProgress::Begin(_)) => {
                            shared.active_progress.insert(key);
                            shared.last_activity = Some(Instant::now());
                        }
                        ProgressParamsValue::WorkDone(WorkDoneProgress::End(_)) => {
                            shared.active_progress.remove(&key);
                            shared.last_activity = Some(Instant::now());
                        }
                        _ => {}
                    }
                    drop(shared);
                    state.changed.notify_waiters();
                    ControlFlow::Continue(())
                })
                .notification::<PublishDiagnostics>(|state, params| {
                    let mut shared = state.shared.lock().unwrap_or_else(|p| p.into_inner());
                    shared.publish_seq += 1;
                    let seq = shared.publish_seq;
                    shared
                        .diagnostics
                        .insert(params.uri, (params.version, params.diagnostics, seq));
                    drop(shared);
                    state.changed.notify_waiters();
                    ControlFlow::Continue(())
                })
                .notification::<LogMessage>(|state, params| {
                    tracing::trace!(server = %state.name, "log: {}", params.message);
                    ControlFlow::Continue(())
                })
                .notification::<ShowMessage>(|state, params| {
                    tracing::debug!(server = %state.name, "message: {}", params.message);
                    ControlFlow::Continue(())
                })
                .unhandled_notification(|state, notification| {
                    if notification.method == "experimental/serverStatus" {
                        let quiescent = notification
                            .params
                            .get("quiescent")
                            .and_then(|q| q.as_bool());
                        state
                            .shared
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .quiescent = quiescent;
                        state.changed.notify_waiters();
                    }
                    ControlFlow::Continue(())
                });
            router
        });
        let (dead_tx, dead) = tokio::sync::watch::channel(false);
        let loop_name = name.clone();
        let notify_dead = changed.clone();
        // async-lsp's main loop panics ("Sender is alive") if every socket is
        // dropped while it still runs; this one lives until the server's
        // output ends (dsh kills its process group on every stop).
        let keep_alive = socket.clone();
        tokio::spawn(async move {
            let result = mainloop
                .run_buffered(stdout.compat(), stdin.compat_write())
                .await;
            drop(keep_alive);
            tracing::debug!(server = %loop_name, ?result, "language server connection ended");
            let _ = dead_tx.send(true);
            notify_dead.notify_waiters();
        });

        let root_uri = Url::from_file_path(root)
            .map_err(|()| crashed(format!("bad root {}", root.display())))?;
        #[allow(deprecated)]
        let params = InitializeParams {
            process_id: Some(std::process::id()),
            root_uri: Some(root_uri.clone()),
            workspace_folders: Some(vec![WorkspaceFolder {
                uri: root_uri,
                name: root
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            }]),
            capabilities: client_capabilities(),
            initialization_options: spec.initialization_options.clone(),
            ..InitializeParams::default()
        };
        let mut socket = socket;
        let initialized = tokio::time::timeout(init_timeout, socket.initialize(params)).await;
        let result = match initialized {
            Err(_) => {
                dsh_process::kill_group(pgid);
                return Err(LspError::TimedOut {
                    server: name,
                    seconds: init_timeout.as_secs(),
                });
            }
            Ok(Err(err)) => {
                dsh_process::kill_group(pgid);
                return Err(crashed(format!("initialize failed: {err}")));
            }
            Ok(Ok(result)) => result,
        };
        socket
            .notify::<Initialized>(InitializedParams {})
            .map_err(|err| crashed(format!("initialized failed: {err}")))?;
        tracing::info!(server = %name, root = %root.display(), pid = pgid, "language server started");
        Ok(Arc::new(Server {
            name,
            socket,
            shared,
            changed,
            capabilities: result.capabilities,
            docs: tokio::sync::Mutex::new(HashMap::new()),
            language_ids: spec.extensions.clone(),
            pgid,
            child: tokio::sync::Mutex::new(Some(child)),
            dead,
            last_used: Mutex::new(Instant::now()),
        }))
    }

    pub(crate) fn is_dead(&self) -> bool {
        *self.dead.borrow()
    }

    pub(crate) fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    pub(crate) fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }

    /// Ready: no indexing progress running and, for servers that report
    /// it, quiescent.
    pub(crate) fn is_ready(&self) -> bool {
        self.settle_left().is_some_and(|left| left.is_zero())
    }

    /// `None` while indexing; otherwise how long until the quiet period
    /// after the last progress activity is over.
    fn settle_left(&self) -> Option<Duration> {
        let shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        if !shared.active_progress.is_empty() || shared.quiescent == Some(false) {
            return None;
        }
        let since = shared
            .last_activity
            .map(|at| at.elapsed())
            .unwrap_or(SETTLE);
        Some(SETTLE.saturating_sub(since))
    }

    /// Waits until ready, dead or the timeout; returns readiness.
    pub(crate) async fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout.max(SETTLE);
        loop {
            let notified = self.changed.notified();
            if self.is_dead() {
                return false;
            }
            let wake = match self.settle_left() {
                Some(left) if left.is_zero() => return true,
                Some(left) => (tokio::time::Instant::now() + left).min(deadline),
                None => deadline,
            };
            let _ = tokio::time::timeout_at(wake, notified).await;
            if tokio::time::Instant::now() >= deadline {
                return self.is_ready();
            }
        }
    }

    /// The current `publishDiagnostics` count.
    pub(crate) fn publish_seq(&self) -> u64 {
        self.shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .publish_seq
    }

    /// Opens or updates a document; returns its version and whether the
    /// server was sent new text.
    pub(crate) async fn sync(&self, path: &Path, text: &str) -> Result<(Url, i32, bool), LspError> {
        let uri = Url::from_file_path(path)
            .map_err(|()| self.failed(format!("not an absolute path: {}", path.display())))?;
        let mut docs = self.docs.lock().await;
        match docs.get_mut(&uri) {
            Some((version, current)) if current == text => Ok((uri, *version, false)),
            Some((version, current)) => {
                *version += 1;
                *current = text.to_owned();
                self.socket
                    .notify::<DidChangeTextDocument>(DidChangeTextDocumentParams {
                        text_document: VersionedTextDocumentIdentifier {
                            uri: uri.clone(),
                            version: *version,
                        },
                        content_changes: vec![TextDocumentContentChangeEvent {
                            range: None,
                            range_length: None,
                            text: text.to_owned(),
                        }],
                    })
                    .map_err(|err| self.crashed(err))?;
                Ok((uri, *version, true))
            }
            None => {
                let language_id = self
                    .language_ids
                    .get(&crate::registry::file_type(path))
                    .cloned()
                    .unwrap_or_else(|| "plaintext".to_owned());
                self.socket
                    .notify::<DidOpenTextDocument>(DidOpenTextDocumentParams {
                        text_document: TextDocumentItem {
                            uri: uri.clone(),
                            language_id,
                            version: 1,
                            text: text.to_owned(),
                        },
                    })
                    .map_err(|err| self.crashed(err))?;
                docs.insert(uri.clone(), (1, text.to_owned()));
                Ok((uri, 1, true))
            }
        }
    }

    fn failed(&self, message: String) -> LspError {
        LspError::Failed {
            server: self.name.clone(),
            message,
        }
    }

    pub(crate) fn crashed(&self, err: impl std::fmt::Display) -> LspError {
        LspError::Crashed {
            server: self.name.clone(),
            detail: err.to_string(),
        }
    }

    /// Sends a request with a timeout, mapping a dead connection to `Crashed`.
    pub(crate) async fn request<R: lsp_types::request::Request>(
        &self,
        params: R::Params,
        timeout: Duration,
    ) -> Result<R::Result, LspError> {
        let socket = self.socket.clone();
        let mut dead = self.dead.clone();
        let request = socket.request::<R>(params);
        tokio::select! {
            result = tokio::time::timeout(timeout, request) => match result {
                Err(_) => Err(LspError::TimedOut { server: self.name.clone(), seconds: timeout.as_secs().max(1) }),
                Ok(Ok(value)) => Ok(value),
                Ok(Err(async_lsp::Error::Response(err))) => Err(self.failed(err.message)),
                Ok(Err(err)) => Err(self.crashed(err)),
            },
            _ = dead.wait_for(|dead| *dead) => Err(self.crashed("the server exited")),
        }
    }

    /// shutdown → exit → SIGTERM to the group → SIGKILL.
    pub(crate) async fn stop(&self) {
        if !self.is_dead() {
            let mut socket = self.socket.clone();
            if tokio::time::timeout(Duration::from_secs(2), socket.shutdown(()))
                .await
                .is_ok()
            {
                let _ = socket.notify::<Exit>(());
            }
        }
        let mut child = self.child.lock().await;
        if let Some(child) = child.as_mut() {
            if tokio::time::timeout(Duration::from_millis(500), child.wait())
                .await
                .is_err()
            {
                dsh_process::signal_group(self.pgid, dsh_process::Signal::Terminate);
                if tokio::time::timeout(Duration::from_millis(1000), child.wait())
                    .await
                    .is_err()
                {
                    dsh_process::kill_group(self.pgid);
                    let _ = child.wait().await;
                }
            }
        }
        // Anything the server left in its group goes too.
        dsh_process::kill_group(self.pgid);
        *child = None;
        tracing::info!(server = %self.name, "language server stopped");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        dsh_process::kill_group(self.pgid);
    }
}

fn client_capabilities() -> ClientCapabilities {
    serde_json::from_value(serde_json::json!({
        "workspace": { "configuration": true, "workspaceFolders": true, "symbol": {} },
        "window": { "workDoneProgress": true },
        "textDocument": {
            "synchronization": { "didSave": false },
            "hover": { "contentFormat": ["markdown", "plaintext"] },
            "definition": { "linkSupport": true },
            "implementation": { "linkSupport": true },
            "references": {},
            "documentSymbol": { "hierarchicalDocumentSymbolSupport": true },
            "callHierarchy": {},
            "publishDiagnostics": { "versionSupport": true },
            "diagnostic": {}
        },
        "experimental": { "serverStatusNotification": true }
    }))
    .unwrap_or_default()
}

/// Where the server's documents live (for tests and diagnostics lookups).
pub(crate) fn uri_path(uri: &Url) -> Option<PathBuf> {
    uri.to_file_path().ok()
}
