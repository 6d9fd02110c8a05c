//! The bridge: routes a query to the right server (starting it lazily, once
//! per (server, root)), keeps the document in sync, waits for readiness,
//! normalizes the answer, restarts a crashed server once, and reaps idle
//! servers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use lsp_types::request::{
    CallHierarchyIncomingCalls, CallHierarchyOutgoingCalls, CallHierarchyPrepare,
    DocumentDiagnosticRequest, DocumentSymbolRequest, GotoDefinition, GotoImplementation,
    HoverRequest, References, WorkspaceSymbolRequest,
};
use lsp_types::{
    CallHierarchyIncomingCallsParams, CallHierarchyOutgoingCallsParams, CallHierarchyPrepareParams,
    DocumentDiagnosticParams, DocumentDiagnosticReport, DocumentDiagnosticReportResult,
    DocumentSymbolParams, GotoDefinitionParams, HoverParams, ReferenceContext, ReferenceParams,
    TextDocumentIdentifier, TextDocumentPositionParams, Url, WorkspaceSymbolParams,
};
use serde::Deserialize;

use crate::answers::{
    convert_diagnostics, document_symbols, goto, hover_text, location, workspace_symbols,
};
use crate::registry::{self, Resolved, ServerSpec};
use crate::roots::find_root;
use crate::server::{uri_path, Server};
use crate::{Answer, Call, Diagnostic, Location, LspError, Operation, Query, Result};

/// `[lsp]` settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BridgeSettings {
    /// Extra servers and overrides of built-in ones (by name).
    pub servers: Vec<ServerSpec>,
    /// Per-request timeout.
    pub request_timeout_ms: u64,
    /// How long a query waits for a server to finish indexing.
    pub ready_timeout_ms: u64,
    /// Timeout for `initialize`.
    pub initialize_timeout_ms: u64,
    /// Stop a server unused this long.
    pub idle_timeout_ms: u64,
    /// How long an edit waits for fresh diagnostics.
    pub diagnostics_wait_ms: u64,
    /// Use only configured servers (no built-in registry).
    pub builtin: bool,
    /// Start servers found inside the workspace (`node_modules/.bin`,
    /// `.venv/bin`, …) without asking, in every mode. Off by default: they
    /// are programs from the repository.
    pub trust_workspace_servers: bool,
}

impl Default for BridgeSettings {
    fn default() -> Self {
        BridgeSettings {
            servers: Vec::new(),
            request_timeout_ms: 15_000,
            ready_timeout_ms: 10_000,
            initialize_timeout_ms: 30_000,
            idle_timeout_ms: 10 * 60 * 1000,
            diagnostics_wait_ms: 2_000,
            builtin: true,
            trust_workspace_servers: false,
        }
    }
}

type Key = (String, PathBuf);

/// Says whether a language server found inside the workspace (a file the
/// workspace's authors control) may be started. The session answers from
/// its permission rules.
pub type Trust = Arc<dyn Fn(&Path) -> bool + Send + Sync>;

/// The sandbox a server found inside the workspace runs in, asked for
/// each start (the session's mode may have changed); `None`: none (full
/// access, or no kernel sandbox here).
pub type Confine = Arc<dyn Fn() -> Option<dsh_process::sandbox::Sandbox> + Send + Sync>;

/// One session's language servers.
pub struct Bridge {
    settings: BridgeSettings,
    specs: Vec<ServerSpec>,
    roots: Vec<PathBuf>,
    spawner: dsh_process::Spawner,
    trust: Trust,
    confine: Option<Confine>,
    resolved: tokio::sync::Mutex<HashMap<(String, PathBuf), Option<Resolved>>>,
    slots: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<Slot>>>>,
}

#[derive(Default)]
struct Slot {
    server: Option<Arc<Server>>,
    /// Crashes since the last successful answer.
    crashes: u32,
}

fn ms(value: u64) -> Duration {
    Duration::from_millis(value)
}

fn specs(settings: &BridgeSettings) -> Vec<ServerSpec> {
    if settings.builtin {
        registry::merge(registry::builtin(), &settings.servers)
    } else {
        registry::merge(Vec::new(), &settings.servers)
    }
}

fn candidates<'a>(specs: &'a [ServerSpec], file: &Path) -> Vec<&'a ServerSpec> {
    let file_type = registry::file_type(file);
    specs
        .iter()
        .filter(|spec| spec.extensions.contains_key(&file_type))
        .collect()
}

impl Bridge {
    /// A bridge for a session whose canonical roots are `roots`. Servers are
    /// started with `spawner`; one found inside the roots only when `trust`
    /// says so. Starts an idle reaper on the current runtime.
    pub fn new(
        settings: BridgeSettings,
        roots: Vec<PathBuf>,
        spawner: dsh_process::Spawner,
        trust: Trust,
    ) -> Arc<Bridge> {
        Self::confined(settings, roots, spawner, trust, None)
    }

    /// [`Bridge::new`], with servers from inside the workspace started
    /// under the command guard in the sandbox `confine` gives.
    pub fn confined(
        settings: BridgeSettings,
        roots: Vec<PathBuf>,
        spawner: dsh_process::Spawner,
        trust: Trust,
        confine: Option<Confine>,
    ) -> Arc<Bridge> {
        let specs = specs(&settings);
        let bridge = Arc::new(Bridge {
            settings,
            specs,
            roots,
            spawner,
            trust,
            confine,
            resolved: tokio::sync::Mutex::new(HashMap::new()),
            slots: Mutex::new(HashMap::new()),
        });
        let weak = Arc::downgrade(&bridge);
        let period = ms(bridge.settings.idle_timeout_ms / 4)
            .clamp(Duration::from_millis(50), Duration::from_secs(60));
        tokio::spawn(reap(weak, period));
        bridge
    }

    /// The program from inside the workspace that a query on `file` would
    /// start, if it would start one: the first candidate server found at
    /// all lies inside `roots`. Runs nothing, so the caller can ask the user
    /// before anything from the workspace executes.
    pub fn workspace_program(
        settings: &BridgeSettings,
        file: &Path,
        roots: &[PathBuf],
    ) -> Option<(String, PathBuf)> {
        let specs = specs(settings);
        candidates(&specs, file).into_iter().find_map(|spec| {
            let root = find_root(file, &spec.root_markers, roots);
            let located = registry::locate(spec, &root, roots)?;
            Some(
                located
                    .in_workspace
                    .then(|| (spec.name.clone(), located.program)),
            )
        })?
    }

    /// The sandbox for a server found inside the workspace (or not).
    fn sandbox_for(&self, in_workspace: bool) -> Option<dsh_process::sandbox::Sandbox> {
        self.confine
            .as_ref()
            .filter(|_| in_workspace)
            .and_then(|confine| confine())
    }

    /// The first usable server for a file (located and verified once; a
    /// server from inside the workspace only when trusted).
    async fn resolve(&self, file: &Path) -> Result<(Resolved, PathBuf)> {
        let candidates = candidates(&self.specs, file);
        let file_type = registry::file_type(file);
        let mut untrusted = None;
        for spec in &candidates {
            let root = find_root(file, &spec.root_markers, &self.roots);
            let key = (spec.name.clone(), root.clone());
            let mut cache = self.resolved.lock().await;
            match cache.get(&key) {
                Some(Some(resolved)) => return Ok((resolved.clone(), root)),
                Some(None) => continue,
                None => {}
            }
            let Some(located) = registry::locate(spec, &root, &self.roots) else {
                cache.insert(key, None);
                continue;
            };
            if located.in_workspace && !(self.trust)(&located.program) {
                // Not cached: the user may allow it later.
                tracing::info!(server = %spec.name, program = %located.program.display(), "found inside the workspace and not trusted; not starting it");
                untrusted.get_or_insert(located.program);
                continue;
            }
            let sandbox = self.sandbox_for(located.in_workspace);
            let verified =
                registry::verify(spec, &located.program, &self.spawner, sandbox.as_ref()).await;
            let found = if verified {
                Some(Resolved {
                    spec: (*spec).clone(),
                    program: located.program,
                    in_workspace: located.in_workspace,
                })
            } else {
                tracing::info!(server = %spec.name, program = %located.program.display(), "found but `--version` failed; skipping");
                None
            };
            cache.insert(key, found.clone());
            if let Some(resolved) = found {
                return Ok((resolved, root));
            }
        }
        let names: Vec<&str> = candidates
            .iter()
            .map(|spec| spec.command.as_str())
            .collect();
        let hint = if let Some(program) = untrusted {
            format!(
                "the only server found is {}, inside the workspace: a program from the workspace runs only with the user's permission, which this query did not have",
                program.display()
            )
        } else if names.is_empty() {
            "add one under [[lsp.servers]] in $DSH_HOME/config.toml (command, args, extensions)"
                .to_owned()
        } else {
            format!(
                "install one of: {} (on PATH or in the project's node_modules/.bin or .venv/bin), or configure one under [[lsp.servers]] in $DSH_HOME/config.toml",
                names.join(", ")
            )
        };
        Err(LspError::Unavailable {
            file_type: if file_type.is_empty() {
                "these".into()
            } else {
                format!(".{file_type}")
            },
            hint,
        })
    }

    fn slot(&self, key: &Key) -> Arc<tokio::sync::Mutex<Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.clone())
            .or_default()
            .clone()
    }

    /// Answers a query. A crash is retried once on a fresh server.
    ///
    /// # Errors
    /// No server, not ready, timed out, crashed twice, or a server error.
    pub async fn query(&self, query: &Query) -> Result<Answer> {
        let (resolved, root) = self.resolve(&query.file).await?;
        let key = (resolved.spec.name.clone(), root.clone());
        let slot = self.slot(&key);
        loop {
            let server = {
                let mut slot = slot.lock().await;
                match &slot.server {
                    Some(server) if !server.is_dead() => server.clone(),
                    _ => {
                        if slot.crashes >= 2 {
                            return Err(LspError::Crashed {
                                server: resolved.spec.name.clone(),
                                detail: "it crashed twice; dsh will not restart it again in this session".into(),
                            });
                        }
                        if let Some(old) = slot.server.take() {
                            old.stop().await;
                        }
                        let sandbox = self.sandbox_for(resolved.in_workspace);
                        let server = Server::start(
                            &resolved,
                            &root,
                            ms(self.settings.initialize_timeout_ms),
                            &self.spawner,
                            sandbox.as_ref(),
                        )
                        .await;
                        match server {
                            Ok(server) => {
                                slot.server = Some(server.clone());
                                server
                            }
                            Err(err @ LspError::Crashed { .. }) => {
                                slot.crashes += 1;
                                return Err(err);
                            }
                            Err(err) => return Err(err),
                        }
                    }
                }
            };
            server.touch();
            match self.ask(&server, query).await {
                Err(LspError::Crashed { detail, .. }) => {
                    let mut slot = slot.lock().await;
                    slot.crashes += 1;
                    tracing::warn!(server = %server.name, crashes = slot.crashes, %detail, "language server crashed");
                    if slot.crashes >= 2 {
                        slot.server = None;
                        return Err(LspError::Crashed {
                            server: server.name.clone(),
                            detail: format!("{detail}; it crashed twice, so dsh will not restart it again in this session"),
                        });
                    }
                    continue;
                }
                other => {
                    if other.is_ok() {
                        slot.lock().await.crashes = 0;
                    }
                    return other;
                }
            }
        }
    }

    async fn ask(&self, server: &Server, query: &Query) -> Result<Answer> {
        let since = server.publish_seq();
        let (uri, version, changed) = server.sync(&query.file, &query.text).await?;
        if !server.wait_ready(ms(self.settings.ready_timeout_ms)).await {
            if server.is_dead() {
                return Err(server.crashed("the server exited"));
            }
            return Err(LspError::NotReady {
                server: server.name.clone(),
            });
        }
        let timeout = ms(self.settings.request_timeout_ms);
        let document = TextDocumentIdentifier { uri: uri.clone() };
        let position = || {
            let position = query.position.unwrap_or(crate::Position {
                line: 0,
                character: 0,
            });
            TextDocumentPositionParams {
                text_document: document.clone(),
                position: lsp_types::Position {
                    line: position.line,
                    character: position.character,
                },
            }
        };
        let answer = match &query.operation {
            Operation::Definition => Answer::Locations(goto(
                server
                    .request::<GotoDefinition>(
                        GotoDefinitionParams {
                            text_document_position_params: position(),
                            work_done_progress_params: Default::default(),
                            partial_result_params: Default::default(),
                        },
                        timeout,
                    )
                    .await?,
            )),
            Operation::Implementation => Answer::Locations(goto(
                server
                    .request::<GotoImplementation>(
                        GotoDefinitionParams {
                            text_document_position_params: position(),
                            work_done_progress_params: Default::default(),
                            partial_result_params: Default::default(),
                        },
                        timeout,
                    )
                    .await?,
            )),
            Operation::References => {
                let found = server
                    .request::<References>(
                        ReferenceParams {
                            text_document_position: position(),
                            work_done_progress_params: Default::default(),
                            partial_result_params: Default::default(),
                            context: ReferenceContext {
                                include_declaration: true,
                            },
                        },
                        timeout,
                    )
                    .await?;
                Answer::Locations(
                    found
                        .unwrap_or_default()
                        .iter()
                        .filter_map(location)
                        .collect(),
                )
            }
            Operation::Hover => {
                let hover = server
                    .request::<HoverRequest>(
                        HoverParams {
                            text_document_position_params: position(),
                            work_done_progress_params: Default::default(),
                        },
                        timeout,
                    )
                    .await?;
                Answer::Hover(
                    hover
                        .map(|hover| hover_text(hover.contents))
                        .unwrap_or_default(),
                )
            }
            Operation::DocumentSymbol => {
                let found = server
                    .request::<DocumentSymbolRequest>(
                        DocumentSymbolParams {
                            text_document: document.clone(),
                            work_done_progress_params: Default::default(),
                            partial_result_params: Default::default(),
                        },
                        timeout,
                    )
                    .await?;
                Answer::Symbols(document_symbols(found, &query.file))
            }
            Operation::WorkspaceSymbol(text) => {
                let found = server
                    .request::<WorkspaceSymbolRequest>(
                        WorkspaceSymbolParams {
                            query: text.clone(),
                            work_done_progress_params: Default::default(),
                            partial_result_params: Default::default(),
                        },
                        timeout,
                    )
                    .await?;
                Answer::Symbols(workspace_symbols(found))
            }
            Operation::Diagnostics => Answer::Diagnostics(
                self.diagnostics(server, &uri, version, since, changed)
                    .await?,
            ),
            Operation::IncomingCalls | Operation::OutgoingCalls => {
                let items = server
                    .request::<CallHierarchyPrepare>(
                        CallHierarchyPrepareParams {
                            text_document_position_params: position(),
                            work_done_progress_params: Default::default(),
                        },
                        timeout,
                    )
                    .await?
                    .unwrap_or_default();
                let mut calls = Vec::new();
                for item in items {
                    if query.operation == Operation::IncomingCalls {
                        let found = server
                            .request::<CallHierarchyIncomingCalls>(
                                CallHierarchyIncomingCallsParams {
                                    item,
                                    work_done_progress_params: Default::default(),
                                    partial_result_params: Default::default(),
                                },
                                timeout,
                            )
                            .await?
                            .unwrap_or_default();
                        for call in found {
                            for range in call.from_ranges.iter().take(1) {
                                if let Some(path) = uri_path(&call.from.uri) {
                                    calls.push(Call {
                                        name: call.from.name.clone(),
                                        location: Location {
                                            path,
                                            line: range.start.line,
                                            character: range.start.character,
                                        },
                                    });
                                }
                            }
                        }
                    } else {
                        let found = server
                            .request::<CallHierarchyOutgoingCalls>(
                                CallHierarchyOutgoingCallsParams {
                                    item,
                                    work_done_progress_params: Default::default(),
                                    partial_result_params: Default::default(),
                                },
                                timeout,
                            )
                            .await?
                            .unwrap_or_default();
                        for call in found {
                            if let Some(path) = uri_path(&call.to.uri) {
                                let start = call.to.selection_range.start;
                                calls.push(Call {
                                    name: call.to.name.clone(),
                                    location: Location {
                                        path,
                                        line: start.line,
                                        character: start.character,
                                    },
                                });
                            }
                        }
                    }
                }
                Answer::Calls(calls)
            }
        };
        Ok(answer)
    }

    /// Diagnostics for the document at `version`: pulled when the server
    /// supports it, else the pushed set for that version (waiting briefly).
    /// Diagnostics for the document at `version`: pulled when the server
    /// supports it, else pushed ones that are fresh — for that version when
    /// the server versions them, else published after our last sync (`since`).
    /// A fresh but empty unversioned set gets a short grace for a follow-up
    /// (some servers push a quick empty set before the semantic one).
    async fn diagnostics(
        &self,
        server: &Server,
        uri: &Url,
        version: i32,
        since: u64,
        changed: bool,
    ) -> Result<Vec<Diagnostic>> {
        if server.capabilities.diagnostic_provider.is_some() {
            let report = server
                .request::<DocumentDiagnosticRequest>(
                    DocumentDiagnosticParams {
                        text_document: TextDocumentIdentifier { uri: uri.clone() },
                        identifier: None,
                        previous_result_id: None,
                        work_done_progress_params: Default::default(),
                        partial_result_params: Default::default(),
                    },
                    ms(self.settings.request_timeout_ms),
                )
                .await?;
            let items = match report {
                DocumentDiagnosticReportResult::Report(DocumentDiagnosticReport::Full(full)) => {
                    full.full_document_diagnostic_report.items
                }
                _ => Vec::new(),
            };
            return Ok(convert_diagnostics(uri, &items));
        }
        let deadline = tokio::time::Instant::now() + ms(self.settings.diagnostics_wait_ms);
        let fresh = |entry: &(Option<i32>, Vec<lsp_types::Diagnostic>, u64)| match entry.0 {
            Some(published) => published >= version,
            None => !changed || entry.2 > since,
        };
        let mut accepted: Option<(Vec<lsp_types::Diagnostic>, u64, tokio::time::Instant)> = None;
        loop {
            let notified = server.changed.notified();
            let entry = server
                .shared
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .diagnostics
                .get(uri)
                .cloned();
            if let Some(entry) = entry.filter(|entry| fresh(entry)) {
                let unversioned_empty = entry.0.is_none() && entry.1.is_empty();
                match &accepted {
                    Some((_, seq, _)) if *seq == entry.2 => {}
                    _ if !unversioned_empty => return Ok(convert_diagnostics(uri, &entry.1)),
                    _ => {
                        accepted = Some((
                            entry.1,
                            entry.2,
                            tokio::time::Instant::now() + Duration::from_millis(800),
                        ))
                    }
                }
            }
            let wake = match &accepted {
                Some((_, _, grace)) => (*grace).min(deadline),
                None => deadline,
            };
            if tokio::time::timeout_at(wake, notified).await.is_err() {
                if let Some((items, _, _)) = accepted {
                    return Ok(convert_diagnostics(uri, &items));
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(LspError::TimedOut {
                        server: server.name.clone(),
                        seconds: ms(self.settings.diagnostics_wait_ms).as_secs().max(1),
                    });
                }
            }
        }
    }

    /// After an edit: if a server for this file is already running, sync the
    /// new text and return its fresh diagnostics (bounded wait). `None` when
    /// no server runs for the file or it gave no fresh answer in time.
    pub async fn diagnostics_if_running(
        &self,
        file: &Path,
        text: &str,
    ) -> Option<(String, Vec<Diagnostic>)> {
        let candidates = candidates(&self.specs, file);
        for spec in candidates {
            let root = find_root(file, &spec.root_markers, &self.roots);
            let key = (spec.name.clone(), root);
            let slot = self
                .slots
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&key)
                .cloned();
            let Some(slot) = slot else { continue };
            let server = slot.lock().await.server.clone();
            let Some(server) = server.filter(|s| !s.is_dead()) else {
                continue;
            };
            server.touch();
            let since = server.publish_seq();
            let (uri, version, changed) = server.sync(file, text).await.ok()?;
            return self
                .diagnostics(&server, &uri, version, since, changed)
                .await
                .ok()
                .map(|d| (server.name.clone(), d));
        }
        None
    }

    /// Servers currently running: (name, root, pid).
    pub fn running(&self) -> Vec<(String, PathBuf)> {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(|(key, slot)| {
                let slot = slot.try_lock().ok()?;
                slot.server
                    .as_ref()
                    .filter(|s| !s.is_dead())
                    .map(|_| key.clone())
            })
            .collect()
    }

    /// Stops every server.
    pub async fn shutdown(&self) {
        let slots: Vec<_> = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, slot)| slot)
            .collect();
        let stops = slots.into_iter().map(|slot| async move {
            let server = slot.lock().await.server.take();
            if let Some(server) = server {
                server.stop().await;
            }
        });
        futures::future::join_all(stops).await;
    }
}

/// Stops servers idle longer than the setting; ends when the bridge is gone.
async fn reap(bridge: Weak<Bridge>, period: Duration) {
    loop {
        tokio::time::sleep(period).await;
        let Some(bridge) = bridge.upgrade() else {
            return;
        };
        let idle = ms(bridge.settings.idle_timeout_ms);
        let slots: Vec<_> = bridge
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for slot in slots {
            let Ok(mut slot) = slot.try_lock() else {
                continue;
            };
            if slot
                .server
                .as_ref()
                .is_some_and(|server| server.idle_for() >= idle)
            {
                if let Some(server) = slot.server.take() {
                    tracing::info!(server = %server.name, "stopping idle language server");
                    server.stop().await;
                }
            }
        }
    }
}
