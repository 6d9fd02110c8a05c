//! End-to-end tests: the built `dsh` binary driven over ACP by the SDK's
//! client side, against a mock OpenAI-compatible model on 127.0.0.1.

mod support;

mod backpressure;
mod cli;
mod confine;
mod context;
mod cost;
mod docs;
mod escapes;
mod examples;
mod extending;
mod faults;
mod fuzz;
mod hardening;
mod hooks;
mod jobs;
mod live_output;
mod load;
mod lsp;
mod mcp;
mod mcp_hardening;
mod neovim;
mod plan_mode;
mod projection;
mod protocol;
mod questions;
mod queue;
mod registry;
mod robustness;
mod run;
mod run_answers;
mod sandbox;
mod scrub;
mod sdk;
mod sdk_flood;
mod sessions;
mod signals;
mod steering;
mod streaming;
mod subagents;
mod titles;
mod tools;
mod undo;
mod vscode;
mod web;
