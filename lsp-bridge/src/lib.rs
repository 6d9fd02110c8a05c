//! dsh-lsp-bridge: spawns and manages the language servers dsh uses for code
//! navigation and diagnostics, behind a small normalized query API.
//!
//! This crate knows nothing about ACP, models or sessions. A [`Bridge`]
//! belongs to one session (its roots); it finds a server for a file type
//! ([`registry`]), finds the project root by walking up to markers
//! ([`roots`]), starts one server per (server, root) lazily and only once,
//! keeps documents in sync before every query, reports readiness as part of
//! the answer (`NotReady`, `TimedOut` are never "no results"), restarts a
//! crashed server once, reaps idle servers, and stops them with
//! shutdown → exit → SIGTERM → SIGKILL to their process group.
#![warn(missing_docs)]

mod answers;
mod bridge;
pub mod registry;
pub mod roots;
mod server;

pub use bridge::{Bridge, BridgeSettings, Confine, Trust};
pub use registry::ServerSpec;

use std::path::PathBuf;

/// A position in a document: 0-based line, 0-based UTF-16 column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// 0-based line.
    pub line: u32,
    /// 0-based UTF-16 code unit offset.
    pub character: u32,
}

/// What to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    /// Where the symbol is defined.
    Definition,
    /// Every use of the symbol.
    References,
    /// Implementations of the symbol.
    Implementation,
    /// Type and docs.
    Hover,
    /// Symbols in the file.
    DocumentSymbol,
    /// Symbols in the workspace matching a query.
    WorkspaceSymbol(String),
    /// Current diagnostics of the file.
    Diagnostics,
    /// Who calls the symbol.
    IncomingCalls,
    /// What the symbol calls.
    OutgoingCalls,
}

impl Operation {
    /// Whether the operation needs a position.
    pub fn needs_position(&self) -> bool {
        !matches!(
            self,
            Operation::DocumentSymbol | Operation::WorkspaceSymbol(_) | Operation::Diagnostics
        )
    }
}

/// One question for a language server.
#[derive(Debug, Clone)]
pub struct Query {
    /// Absolute file path.
    pub file: PathBuf,
    /// The file's current text (from disk or the editor's buffer).
    pub text: String,
    /// The position, for operations that need one.
    pub position: Option<Position>,
    /// The operation.
    pub operation: Operation,
}

/// A location in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Absolute path.
    pub path: PathBuf,
    /// 0-based line.
    pub line: u32,
    /// 0-based UTF-16 column.
    pub character: u32,
}

/// A symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Name.
    pub name: String,
    /// Kind, as a word ("function", "struct", …).
    pub kind: String,
    /// Where it is.
    pub location: Location,
    /// Enclosing symbol, when known.
    pub container: Option<String>,
}

/// A diagnostic's severity (a server that gives none means an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// An error.
    Error,
    /// A warning.
    Warning,
    /// Information.
    Information,
    /// A hint.
    Hint,
}

impl Severity {
    /// As shown to the model: "error", "warning", "information", "hint".
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Information => "information",
            Severity::Hint => "hint",
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where.
    pub location: Location,
    /// How bad it is.
    pub severity: Severity,
    /// The message.
    pub message: String,
    /// Who reported it (server source).
    pub source: Option<String>,
}

/// A call-hierarchy edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The other symbol's name.
    pub name: String,
    /// Where the other symbol is.
    pub location: Location,
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Locations (definition, references, implementation).
    Locations(Vec<Location>),
    /// Hover text (markdown); empty when there is none.
    Hover(String),
    /// Symbols.
    Symbols(Vec<Symbol>),
    /// Diagnostics.
    Diagnostics(Vec<Diagnostic>),
    /// Callers or callees.
    Calls(Vec<Call>),
}

/// Why a query has no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LspError {
    /// No server handles this file type.
    #[error("no language server for {file_type} files; {hint}")]
    Unavailable {
        /// The extension (or the file name).
        file_type: String,
        /// How to configure one.
        hint: String,
    },
    /// The server is still indexing; retry later.
    #[error("{server} is still loading the project (indexing); its answers would be incomplete or wrong — retry in a few seconds")]
    NotReady {
        /// Server name.
        server: String,
    },
    /// The server did not answer in time.
    #[error("{server} did not answer within {seconds} s")]
    TimedOut {
        /// Server name.
        server: String,
        /// Timeout.
        seconds: u64,
    },
    /// The server crashed (after one restart, or while starting).
    #[error("{server} crashed: {detail}")]
    Crashed {
        /// Server name.
        server: String,
        /// What happened.
        detail: String,
    },
    /// The server answered with an error or does not support the operation.
    #[error("{server}: {message}")]
    Failed {
        /// Server name.
        server: String,
        /// The message.
        message: String,
    },
}

/// `Result` with [`LspError`].
pub type Result<T, E = LspError> = std::result::Result<T, E>;
