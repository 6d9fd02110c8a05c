//! What the model is given besides the conversation, and how the
//! conversation is kept within its window: workspace instructions
//! ([`instructions`]), compaction ([`compaction`]), the slash commands
//! that run instead of a prompt ([`commands`]), and what users add from
//! files: skills ([`skills`]) and custom commands ([`custom_commands`]),
//! read as [`files`] says and kept by a session until they change
//! ([`discovery`]); the time context ([`time`]).

pub mod commands;
pub mod compaction;
pub mod custom_commands;
pub mod discovery;
pub mod files;
pub mod instructions;
pub mod skills;
pub mod time;
