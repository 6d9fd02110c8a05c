//! What dsh's tests and `dsh-bench` share, none of it tied to where the
//! `dsh` binary was built (`env!("CARGO_BIN_EXE_dsh")` exists only in the
//! `dsh-acp-server` package's own tests; `tests/e2e/support/` keeps what
//! needs it and re-exports this crate):
//!
//! - [`procs`]: `/proc` helpers (live processes by command line and cwd,
//!   resident memory);
//! - [`skip`]: tests that cannot run here say so and are listed
//!   (`target/test-skips.txt`); under `DSH_CI=1` they fail instead;
//! - `mock_model` (the default `mock-model` feature): the mock
//!   OpenAI-compatible model on 127.0.0.1 and the script entries tests
//!   queue on it.
//!
//! With the `clients` feature (the e2e tests turn it on; `dsh-bench` does
//! not, so a workspace release build stays free of jsonschema and
//! tungstenite):
//!
//! - `schema`: every frame dsh writes, validated against the vendored ACP
//!   v1 schema;
//! - `raw`: a raw line-level ACP connection for malformed-input tests;
//! - `sdk_client`: a JSON-RPC client for `dsh sdk` over stdio or a
//!   WebSocket.
//!
//! The ACP client side (`ClientSim`, `Conn`) stays in `tests/e2e/support/`:
//! `agent_client_protocol` is named only there and in `acp-server/src/acp/`
//! (`tests/tidy.rs`).

#[cfg(feature = "mock-model")]
pub mod mock_model;
pub mod procs;
#[cfg(feature = "clients")]
pub mod raw;
#[cfg(feature = "clients")]
pub mod schema;
#[cfg(feature = "clients")]
pub mod sdk_client;
pub mod skip;
