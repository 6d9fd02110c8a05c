//! End-to-end tests: the built `dsh` binary driven over ACP by the SDK's
//! client side, against a mock OpenAI-compatible model on 127.0.0.1.
// These suites run on Linux, where std's canonicalize is the one (clippy.toml).
#![allow(clippy::disallowed_methods)]
// Unix suites (/proc, sh, process groups); Windows is tested under wine
// by tests/windows.
#![cfg(unix)]

mod support;

mod acp_pipe;
mod agents;
mod backpressure;
mod catalog_tools;
mod cli;
mod cli_first_hour;
mod confine;
mod context;
mod contract;
mod cost;
mod docs;
mod escapes;
mod examples;
mod extending;
mod faults;
mod fuzz;
mod goals;
mod hardening;
mod hooks;
mod hooks_hardening;
mod jobs;
mod live_output;
mod load;
mod local_server;
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
mod reminders;
mod robustness;
mod run;
mod run_answers;
mod run_first_hour;
mod sandbox;
mod scrub;
mod sdk;
mod sdk_exit;
mod sdk_flood;
mod sdk_search;
mod search;
mod session_query;
mod sessions;
mod sessions_search;
mod signals;
mod steering;
mod streaming;
mod subagents;
mod terminals;
mod titles;
mod tool_settings;
mod tools;
mod undo;
mod vscode;
mod wakeups;
mod web;
