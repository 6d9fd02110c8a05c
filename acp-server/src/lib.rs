//! dsh: a coding agent served over the Agent Client Protocol.
//!
//! The agent core knows nothing of ACP: [`agent`] is what front ends call,
//! [`session`] holds a live session (its log, its state as a fold of the
//! log), [`turn`] runs a prompt, [`tools`] and [`mcp`] are what the model can
//! call, [`permission`] decides, [`model`] talks to the provider, [`store`]
//! keeps the logs. Every durable fact is recorded in the log and
//! [`projection`] turns it into [`update::AgentUpdate`]s for the editor,
//! live and on replay alike. [`acp`] translates between the wire and the
//! core; another front end implements [`frontend::Frontend`] and calls the
//! same [`agent::Agent`].
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![forbid(unsafe_code)]

pub mod acp;
pub mod admin;
pub mod agent;
pub mod beneath;
pub mod checkpoint;
pub mod config;
pub mod context;
pub mod credentials;
pub mod demo;
pub mod error;
pub mod frontend;
pub mod hooks;
pub mod jobs;
pub mod login;
pub mod mcp;
pub mod model;
pub mod ndjson;
pub mod permission;
pub mod private;
pub mod programs;
pub mod projection;
pub mod prompt;
pub mod run;
pub mod sandbox;
pub mod sdk;
pub mod search;
pub mod session;
pub mod settings;
pub mod store;
pub mod tools;
mod turn;
pub mod update;
pub mod web;

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
