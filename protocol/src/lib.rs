//! Plain data shared by every dsh crate: the versioned session event log,
//! the model message and stream vocabulary, tool presentation types and
//! stable error codes.
//!
//! This crate does no I/O. Its types are persisted (the session log) or
//! cross process boundaries, so they change like a file format: fields are
//! added with defaults, tags are never reused.
#![warn(missing_docs)]

pub mod catalog;
pub mod checkpoint;
pub mod content;
pub mod context;
pub mod decision;
pub mod error;
pub mod history;
pub mod hook;
pub mod ids;
pub mod log;
pub mod mode;
pub mod model;
pub mod plan;
pub mod question;
pub mod repair;
pub mod tool;

pub use content::UserContent;
pub use error::ErrorCode;
pub use ids::{SessionId, ToolCallId};
pub use mode::Mode;
