//! What the model is given besides the conversation, and how the
//! conversation is kept within its window: workspace instructions
//! ([`instructions`]), compaction ([`compaction`]), and the slash commands
//! that run instead of a prompt ([`commands`]).

pub mod commands;
pub mod compaction;
pub mod instructions;
