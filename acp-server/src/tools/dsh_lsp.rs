//! `dsh_lsp`: dsh's language-server queries beyond the catalog's four
//! (`lsp`): a file's symbols, the workspace's symbols by name, a file's
//! diagnostics, and a symbol's callers and callees. Opt-in (`[tools]
//! enable`): see docs/lsp.md for why. The position of a call-hierarchy
//! query is a one-based line and either a `symbol` name on it (looked up
//! by dsh, so the model need not count columns) or a one-based UTF-16
//! `character`. Run and rendered as `lsp`'s ([`super::lsp::run`]).

use dsh_lsp_bridge::Operation;
use dsh_protocol::ErrorCode;
use serde::Deserialize;
use serde_json::{json, Value};

use super::lsp::{one_based, Column, Target};
use super::{Offer, Refusal, Tool};

pub const DESCRIPTION: &str = "Language-server queries beyond lsp's navigation. operation: documentSymbol lists the file's symbols; workspaceSymbol searches the project's symbols by name (symbol is the query; file_path picks the language server); diagnostics gives the file's current errors and warnings; incomingCalls and outgoingCalls list the callers and the callees of the function at line, given as symbol (a name on that line; preferred) or as character (one-based, UTF-16). Results are grouped by file, each as one-based line:column.";

/// The operations, as the model names them.
const OPERATIONS: [&str; 5] = [
    "documentSymbol",
    "workspaceSymbol",
    "diagnostics",
    "incomingCalls",
    "outgoingCalls",
];

/// The parameters (dsh's own schema, [`schema`]).
#[derive(Debug, Deserialize)]
pub struct DshLspArgs {
    pub operation: String,
    pub file_path: String,
    #[serde(default)]
    pub line: Option<f64>,
    #[serde(default)]
    pub character: Option<f64>,
    #[serde(default)]
    pub symbol: Option<String>,
}

/// Its JSON schema.
pub fn schema(_: Offer) -> Value {
    json!({
        "type": "object",
        "properties": {
            "operation": {
                "type": "string",
                "description": "documentSymbol, workspaceSymbol, diagnostics, incomingCalls, or outgoingCalls.",
                "enum": OPERATIONS,
            },
            "file_path": {
                "type": "string",
                "description": "The source file to query, relative to the workspace or absolute.",
            },
            "line": {
                "type": "number",
                "description": "One-based line of the function, for incomingCalls and outgoingCalls.",
            },
            "character": {
                "type": "number",
                "description": "One-based UTF-16 column of the function on line (or give symbol).",
            },
            "symbol": {
                "type": "string",
                "description": "workspaceSymbol: the name to search for. incomingCalls, outgoingCalls: the function's name on line (instead of character).",
            },
        },
        "required": ["operation", "file_path"],
    })
}

/// Whether `operation` is one of this tool's.
pub fn takes(operation: &str) -> bool {
    OPERATIONS.contains(&operation)
}

/// The call's query, checked (the plan keeps it).
pub fn validate(args: &DshLspArgs) -> Result<Target, Refusal> {
    let operation = match args.operation.as_str() {
        "documentSymbol" => Operation::DocumentSymbol,
        "workspaceSymbol" => Operation::WorkspaceSymbol(args.symbol.clone().unwrap_or_default()),
        "diagnostics" => Operation::Diagnostics,
        "incomingCalls" => Operation::IncomingCalls,
        "outgoingCalls" => Operation::OutgoingCalls,
        other => {
            return Err(Refusal::new(
                ErrorCode::InvalidToolArgs,
                format!(
                    "Unknown {} operation {other:?}: it is one of {}. goToDefinition, findReferences, goToImplementation and hover are {}'s.",
                    Tool::DshLsp.name(),
                    OPERATIONS.join(", "),
                    Tool::Lsp.name(),
                ),
            ))
        }
    };
    let line = args.line.map(|line| one_based("line", line)).transpose()?;
    let character = args
        .character
        .map(|character| one_based("character", character))
        .transpose()?;
    let column = match (&args.symbol, character) {
        (Some(symbol), _) if !matches!(operation, Operation::WorkspaceSymbol(_)) => {
            Column::Symbol(symbol.clone())
        }
        (_, Some(character)) => Column::Utf16(character),
        _ => Column::None,
    };
    Ok(Target {
        operation,
        line,
        column,
    })
}
