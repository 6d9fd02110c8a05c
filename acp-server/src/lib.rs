//! dsh: a coding agent served over the Agent Client Protocol.
//!
//! The agent core ([`agent`], [`turn`], [`model`], [`store`]) knows nothing of
//! ACP; [`acp`] translates between the wire and the core, so other front ends
//! (a headless runner, an SDK server) reuse the same core.
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![forbid(unsafe_code)]

pub mod acp;
pub mod agent;
pub mod client;
pub mod config;
pub mod demo;
pub mod error;
pub mod mcp;
pub mod model;
pub mod permission;
pub mod prompt;
pub mod store;
pub mod tools;
pub mod turn;

/// The version printed by `dsh --version` and sent as `agentInfo.version`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Installs the TLS crypto provider (ring) once per process. reqwest and
/// rmcp's HTTP transport share one rustls build that is compiled without a
/// default provider, so every HTTP client in dsh needs this first.
pub fn install_tls() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err means another provider is installed already, which is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
