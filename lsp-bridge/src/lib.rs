//! dsh-lsp-bridge: spawns and manages the language servers dsh uses for code
//! navigation and diagnostics, behind a small normalized query API.
//!
//! This crate knows nothing about ACP, models or sessions. Its server
//! lifecycle and the `lsp` tool arrive with the language-server issue; until
//! then it exports nothing, and `dsh` does not advertise any LSP capability.
#![warn(missing_docs)]
