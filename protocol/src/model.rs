//! The provider-neutral model vocabulary: chat messages sent to a model and
//! the stream events that come back.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::content::UserContent;
use crate::ids::ToolCallId;

/// One tool call the model asked for. `arguments` stays the raw JSON text
/// the model produced, so a malformed call can still be logged and answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    /// dsh's call id: unique in the session (the editor keys tool calls by
    /// it). The model's own id when that was unique.
    pub id: ToolCallId,
    /// Tool name as the model wrote it.
    pub name: String,
    /// Raw JSON arguments.
    pub arguments: String,
    /// The model's id when dsh had to change it (it was empty, or repeated
    /// an earlier call's): the provider's history keeps the model's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
}

impl ToolCallRequest {
    /// The id the provider knows this call by.
    pub fn provider_id(&self) -> &str {
        self.provider_id.as_deref().unwrap_or(self.id.as_str())
    }
}

/// A message in the model conversation, derived from the session log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatMessage {
    /// The system prompt.
    System(String),
    /// User input.
    User(Vec<UserContent>),
    /// A model reply.
    Assistant {
        /// Visible text.
        text: String,
        /// Reasoning text (DeepSeek `reasoning_content`).
        reasoning: String,
        /// Tool calls the model made.
        tool_calls: Vec<ToolCallRequest>,
    },
    /// The result of one tool call.
    Tool {
        /// The call this answers.
        call_id: String,
        /// Text the model sees.
        content: String,
    },
}

impl ChatMessage {
    /// A rough count of the tokens this message puts in the context window
    /// (four bytes a token; an image about a thousand).
    pub fn estimated_tokens(&self) -> u64 {
        (self.sum_bytes(|_| 4000) / 4) as u64
    }

    /// The bytes of text it holds (an image's data included): what it
    /// costs in memory, give or take its bookkeeping.
    pub fn bytes(&self) -> usize {
        self.sum_bytes(str::len)
    }

    /// Its texts' lengths, with `image` for an image's data (a link
    /// counts 64).
    fn sum_bytes(&self, image: impl Fn(&str) -> usize) -> usize {
        match self {
            ChatMessage::System(text) => text.len(),
            ChatMessage::User(content) => blocks_bytes(content, image),
            ChatMessage::Assistant {
                text,
                reasoning,
                tool_calls,
            } => {
                text.len()
                    + reasoning.len()
                    + tool_calls
                        .iter()
                        .map(|call| call.name.len() + call.arguments.len())
                        .sum::<usize>()
            }
            ChatMessage::Tool { content, .. } => content.len(),
        }
    }
}

/// A message as a history keeps it and every request shares it (in an
/// `Arc`): the message, its size (see [`ChatMessage::bytes`], counted
/// once), and where a request last wrote its wire form (see
/// [`Message::place`]). Equal when the messages are.
#[derive(Debug)]
pub struct Message {
    message: ChatMessage,
    bytes: usize,
    /// The key it was placed under (0: nowhere yet) and the place.
    placed: Mutex<(u64, Place)>,
}

/// Where a message's wire form was written: a range of bytes of a file
/// its key names (see [`Message::place`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Place {
    /// Its first byte.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
}

impl Message {
    /// Keeps `message`.
    pub fn new(message: ChatMessage) -> Message {
        Message {
            bytes: message.bytes(),
            message,
            placed: Mutex::default(),
        }
    }

    /// The message.
    pub fn message(&self) -> &ChatMessage {
        &self.message
    }

    /// The message, no longer kept.
    pub fn into_message(self) -> ChatMessage {
        self.message
    }

    /// The bytes of text it holds (see [`ChatMessage::bytes`]).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Where the message was put under `key` (not 0; the request body
    /// owns the keys: a file and the form the message takes in it), if it
    /// was ([`Message::put`]): the requests of a conversation write each
    /// message once, not on every request.
    pub fn place(&self, key: u64) -> Option<Place> {
        let placed = self
            .placed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (placed.0 == key && key != 0).then_some(placed.1)
    }

    /// Records that the message was put at `place` under `key` (once it is
    /// there: a place is read as soon as it is recorded). A message keeps
    /// one place: a new key forgets the last.
    pub fn put(&self, key: u64, place: Place) {
        *self
            .placed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (key, place);
    }

    /// Changes the message (in a history that alone holds it): its size
    /// is counted again and its place forgotten.
    pub fn edit(&mut self, change: impl FnOnce(&mut ChatMessage)) {
        change(&mut self.message);
        self.bytes = self.message.bytes();
        *self
            .placed
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Default::default();
    }
}

impl std::ops::Deref for Message {
    type Target = ChatMessage;

    fn deref(&self) -> &ChatMessage {
        &self.message
    }
}

impl From<ChatMessage> for Message {
    fn from(message: ChatMessage) -> Message {
        Message::new(message)
    }
}

impl Clone for Message {
    fn clone(&self) -> Message {
        Message::new(self.message.clone())
    }
}

impl PartialEq for Message {
    fn eq(&self, other: &Message) -> bool {
        self.message == other.message
    }
}

impl Eq for Message {}

/// The bytes of text of a prompt's blocks, with `image` for an image's
/// data (a link counts 64).
pub fn blocks_bytes(content: &[UserContent], image: impl Fn(&str) -> usize) -> usize {
    content
        .iter()
        .map(|block| match block {
            UserContent::Text { text } => text.len(),
            UserContent::Resource { text, .. } => text.len(),
            UserContent::Image { data, .. } => image(data),
            _ => 64,
        })
        .sum()
}

/// Token usage of one model call. Buckets are disjoint: `input_tokens`
/// excludes cache hits, `reasoning_tokens` is part of `output_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens, reasoning included.
    pub output_tokens: u64,
    /// Prompt tokens served from the provider cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Reasoning tokens (a part of `output_tokens`).
    #[serde(default)]
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Adds `other`'s tokens to these.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }

    /// All tokens the call put into the context window.
    pub fn context_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.output_tokens
    }
}

/// Why a model call finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The model wants tool results.
    ToolCalls,
    /// The output token limit was reached.
    MaxTokens,
    /// The provider filtered the content.
    ContentFilter,
    /// The call was cancelled by the user.
    Cancelled,
    /// The stream failed part way.
    Error,
}

/// One event of a model stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// Visible text.
    TextDelta(String),
    /// Reasoning text.
    ReasoningDelta(String),
    /// A fragment of a tool call, assembled by `index`.
    ToolCallDelta {
        /// Position of the call in the reply.
        index: usize,
        /// Call id (first fragment).
        id: Option<String>,
        /// Tool name (first fragment).
        name: Option<String>,
        /// A piece of the JSON arguments.
        arguments: String,
    },
    /// Usage for the whole call.
    Usage(Usage),
    /// The end of the call; nothing follows.
    Finish(FinishReason),
}

/// Reasoning effort, exposed as the `thought_level` session option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThoughtLevel {
    /// Thinking disabled.
    Off,
    /// Low effort.
    Low,
    /// High effort (the DeepSeek default).
    High,
    /// Maximum effort.
    Max,
}

impl ThoughtLevel {
    /// All levels, in menu order.
    pub const ALL: [ThoughtLevel; 4] = [
        ThoughtLevel::Off,
        ThoughtLevel::Low,
        ThoughtLevel::High,
        ThoughtLevel::Max,
    ];

    /// The option value id.
    pub fn as_str(self) -> &'static str {
        match self {
            ThoughtLevel::Off => "off",
            ThoughtLevel::Low => "low",
            ThoughtLevel::High => "high",
            ThoughtLevel::Max => "max",
        }
    }

    /// Parses an option value id.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|level| level.as_str() == value)
    }

    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            ThoughtLevel::Off => "Off",
            ThoughtLevel::Low => "Low",
            ThoughtLevel::High => "High",
            ThoughtLevel::Max => "Max",
        }
    }

    /// One-line description.
    pub fn description(self) -> &'static str {
        match self {
            ThoughtLevel::Off => "No reasoning; fastest",
            ThoughtLevel::Low => "Brief reasoning",
            ThoughtLevel::High => "Thorough reasoning (default)",
            ThoughtLevel::Max => "Maximum reasoning effort",
        }
    }
}

/// One model in the catalog.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ModelInfo {
    /// Provider model id.
    pub id: String,
    /// Display name.
    #[serde(default)]
    pub name: Option<String>,
    /// Description for the picker.
    #[serde(default)]
    pub description: Option<String>,
    /// Context window in tokens.
    #[serde(default = "default_context_window")]
    pub context_window: u64,
    /// Output cap per request.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Whether the model accepts images.
    #[serde(default)]
    pub images: bool,
    /// What its tokens cost (none: the session's cost is not shown).
    #[serde(default)]
    pub pricing: Option<Pricing>,
}

/// A model's prices per million tokens (`[models.pricing]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    /// Uncached prompt tokens (a cache miss).
    pub input: f64,
    /// Prompt tokens served from the provider's cache (default: `input`).
    #[serde(default)]
    pub input_cache_hit: Option<f64>,
    /// Completion tokens, reasoning included.
    pub output: f64,
    /// The unit of the prices: an ISO 4217 code ("USD", "CNY") or another
    /// unit ("credits").
    #[serde(default = "default_currency")]
    pub currency: String,
}

fn default_currency() -> String {
    "USD".to_owned()
}

impl Pricing {
    /// What one call's usage cost, in [`Pricing::currency`]:
    /// input × `input` + cache hits × `input_cache_hit` + output × `output`,
    /// per million tokens.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let hit = self.input_cache_hit.unwrap_or(self.input);
        (usage.input_tokens as f64 * self.input
            + usage.cache_read_tokens as f64 * hit
            + usage.output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// What a session's model calls cost so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// The amount.
    pub amount: f64,
    /// Its unit ([`Pricing::currency`]).
    pub currency: String,
}

impl ModelInfo {
    /// Name for menus.
    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

fn default_context_window() -> u64 {
    1_000_000
}

/// A tool the model may call, as a JSON schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSchema {
    /// Tool name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON schema of the arguments.
    pub parameters: serde_json::Value,
}
