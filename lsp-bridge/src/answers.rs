//! Language-server answers in the bridge's own terms: locations, hover
//! text, symbols (flattened, with their containers) and diagnostics,
//! whatever shape the server chose (`Location` or `LocationLink`, nested or
//! flat symbols, `MarkedString` or `MarkupContent`).

use std::path::Path;

use lsp_types::{
    DocumentSymbolResponse, GotoDefinitionResponse, HoverContents, MarkedString, OneOf, Url,
    WorkspaceSymbolResponse,
};

use crate::server::uri_path;
use crate::{Diagnostic, Location, Severity, Symbol};

pub(crate) fn location(location: &lsp_types::Location) -> Option<Location> {
    Some(Location {
        path: uri_path(&location.uri)?,
        line: location.range.start.line,
        character: location.range.start.character,
    })
}

pub(crate) fn goto(response: Option<GotoDefinitionResponse>) -> Vec<Location> {
    match response {
        None => Vec::new(),
        Some(GotoDefinitionResponse::Scalar(single)) => location(&single).into_iter().collect(),
        Some(GotoDefinitionResponse::Array(many)) => many.iter().filter_map(location).collect(),
        Some(GotoDefinitionResponse::Link(links)) => links
            .iter()
            .filter_map(|link| {
                Some(Location {
                    path: uri_path(&link.target_uri)?,
                    line: link.target_selection_range.start.line,
                    character: link.target_selection_range.start.character,
                })
            })
            .collect(),
    }
}

pub(crate) fn hover_text(contents: HoverContents) -> String {
    let marked = |m: MarkedString| match m {
        MarkedString::String(s) => s,
        MarkedString::LanguageString(code) => format!("```{}\n{}\n```", code.language, code.value),
    };
    match contents {
        HoverContents::Scalar(m) => marked(m),
        HoverContents::Array(items) => items
            .into_iter()
            .map(marked)
            .collect::<Vec<_>>()
            .join("\n\n"),
        HoverContents::Markup(markup) => markup.value,
    }
}

pub(crate) fn kind_name(kind: lsp_types::SymbolKind) -> String {
    format!("{kind:?}")
        .trim_start_matches("SymbolKind(")
        .trim_end_matches(')')
        .to_lowercase()
}

pub(crate) fn document_symbols(
    response: Option<DocumentSymbolResponse>,
    file: &Path,
) -> Vec<Symbol> {
    fn walk(
        symbols: &[lsp_types::DocumentSymbol],
        file: &Path,
        container: Option<&str>,
        out: &mut Vec<Symbol>,
    ) {
        for symbol in symbols {
            out.push(Symbol {
                name: symbol.name.clone(),
                kind: kind_name(symbol.kind),
                location: Location {
                    path: file.to_path_buf(),
                    line: symbol.selection_range.start.line,
                    character: symbol.selection_range.start.character,
                },
                container: container.map(str::to_owned),
            });
            if let Some(children) = &symbol.children {
                walk(children, file, Some(&symbol.name), out);
            }
        }
    }
    let mut out = Vec::new();
    match response {
        None => {}
        Some(DocumentSymbolResponse::Nested(nested)) => walk(&nested, file, None, &mut out),
        Some(DocumentSymbolResponse::Flat(flat)) => {
            for symbol in flat {
                if let Some(location) = location(&symbol.location) {
                    out.push(Symbol {
                        name: symbol.name,
                        kind: kind_name(symbol.kind),
                        location,
                        container: symbol.container_name,
                    });
                }
            }
        }
    }
    out
}

pub(crate) fn workspace_symbols(response: Option<WorkspaceSymbolResponse>) -> Vec<Symbol> {
    match response {
        None => Vec::new(),
        Some(WorkspaceSymbolResponse::Flat(flat)) => flat
            .into_iter()
            .filter_map(|s| {
                Some(Symbol {
                    location: location(&s.location)?,
                    name: s.name,
                    kind: kind_name(s.kind),
                    container: s.container_name,
                })
            })
            .collect(),
        Some(WorkspaceSymbolResponse::Nested(nested)) => nested
            .into_iter()
            .filter_map(|s| {
                let location = match s.location {
                    OneOf::Left(l) => location(&l)?,
                    OneOf::Right(w) => Location {
                        path: uri_path(&w.uri)?,
                        line: 0,
                        character: 0,
                    },
                };
                Some(Symbol {
                    name: s.name,
                    kind: kind_name(s.kind),
                    location,
                    container: s.container_name,
                })
            })
            .collect(),
    }
}

pub(crate) fn convert_diagnostics(uri: &Url, items: &[lsp_types::Diagnostic]) -> Vec<Diagnostic> {
    let Some(path) = uri_path(uri) else {
        return Vec::new();
    };
    items
        .iter()
        .map(|d| Diagnostic {
            location: Location {
                path: path.clone(),
                line: d.range.start.line,
                character: d.range.start.character,
            },
            severity: match d.severity {
                Some(lsp_types::DiagnosticSeverity::ERROR) | None => Severity::Error,
                Some(lsp_types::DiagnosticSeverity::WARNING) => Severity::Warning,
                Some(lsp_types::DiagnosticSeverity::INFORMATION) => Severity::Information,
                _ => Severity::Hint,
            },
            message: d.message.clone(),
            source: d.source.clone(),
        })
        .collect()
}
