//! The JSON body of a chat-completions request, serialized straight from
//! the session's history: no JSON tree is built and no message is copied.
//! An HTTP request sends it as it is written, a piece of about 64 KiB at a
//! time ([`RequestBody::into_pieces`]), so a request over a long
//! conversation never holds a second copy of it: twenty sessions sending
//! at once held twenty serialized conversations before (a `serde_json::
//! Value` of each, earlier, two more). Its length is counted first, so
//! the request has a `Content-Length`, as every OpenAI-compatible server
//! accepts: each message's length is counted once (a pass that writes
//! nothing) and kept with the message for the next requests.

use std::fmt::{self, Display};
use std::io::Write;
use std::sync::Arc;

use dsh_protocol::model::{ChatMessage, Message, ToolCallRequest};
use dsh_protocol::UserContent;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use super::ProviderKind;
use super::{ModelRequest, ToolSchema};
use dsh_protocol::model::ThoughtLevel;

/// Serializes the body of one request at once (the scripted provider and
/// the tests keep it).
///
/// # Errors
/// Never in practice (every value is a string, number or JSON value); a
/// failure is reported rather than assumed away.
pub fn request_body(request: &ModelRequest, kind: ProviderKind) -> serde_json::Result<Vec<u8>> {
    RequestBody::new(request, kind)?.to_vec()
}

/// One request's body: its opening and its end written out (the model,
/// the system prompt, the tools), the conversation between them shared
/// with the history and written as it is sent.
pub struct RequestBody {
    /// `{"model":…,"messages":[` and the system message, if any.
    head: Vec<u8>,
    messages: Vec<Arc<Message>>,
    /// A comma comes before the first message (the head ends in one).
    after_system: bool,
    deepseek: bool,
    images: bool,
    /// `]`, then the rest of the object.
    tail: Vec<u8>,
}

/// How much [`RequestBody::into_pieces`] puts in one piece, at least.
const PIECE: usize = 64 * 1024;

impl RequestBody {
    /// # Errors
    /// As [`request_body`].
    pub fn new(request: &ModelRequest, kind: ProviderKind) -> serde_json::Result<RequestBody> {
        let deepseek = kind == ProviderKind::Deepseek;
        let mut head = br#"{"model":"#.to_vec();
        serde_json::to_writer(&mut head, &request.model.id)?;
        head.extend_from_slice(br#","messages":["#);
        let after_system = !request.system.is_empty();
        if after_system {
            serde_json::to_writer(
                &mut head,
                &Wire::System {
                    content: &request.system,
                },
            )?;
        }
        // The rest of the object, as a map of its own whose `{` becomes
        // the comma after the messages.
        let mut tail = b"]".to_vec();
        serde_json::to_writer(&mut tail, &Rest { request, kind })?;
        tail[1] = b',';
        Ok(RequestBody {
            head,
            messages: request.messages.clone(),
            after_system,
            deepseek,
            images: request.model.images,
            tail,
        })
    }

    /// The body's length in bytes. Each message's length on the wire is
    /// counted once (a pass that writes nothing) and kept with it, so the
    /// requests of a long conversation count only what is new.
    ///
    /// # Errors
    /// As [`request_body`].
    pub fn content_length(&self) -> serde_json::Result<u64> {
        // The form a message takes depends on these two, and on nothing
        // else of the request.
        let slot = usize::from(self.deepseek) | usize::from(self.images) << 1;
        let mut length = (self.head.len() + self.tail.len()) as u64;
        for message in &self.messages {
            length += message.measured(slot, |message| {
                let mut count = Count(0);
                serde_json::to_writer(&mut count, &wire(message, self.deepseek, self.images))?;
                Ok::<_, serde_json::Error>(count.0)
            })?;
        }
        // The commas between messages (and after the system prompt).
        let commas = (self.messages.len() + usize::from(self.after_system)).saturating_sub(1);
        Ok(length + commas as u64)
    }

    /// The whole body.
    ///
    /// # Errors
    /// As [`request_body`].
    pub fn to_vec(self) -> serde_json::Result<Vec<u8>> {
        let mut body = Vec::with_capacity(self.head.len() + self.tail.len());
        for piece in self.into_pieces() {
            body.extend_from_slice(&piece?);
        }
        Ok(body)
    }

    /// The body in pieces of at least 64 KiB (but the last), each written
    /// when it is asked for. Each message is let go as soon as it is
    /// written (the HTTP client may keep the finished body until the
    /// response ends: it no longer holds the conversation).
    pub fn into_pieces(mut self) -> impl Iterator<Item = serde_json::Result<Vec<u8>>> + Send {
        let mut head = Some(std::mem::take(&mut self.head));
        let mut messages = std::mem::take(&mut self.messages).into_iter();
        let mut comma = self.after_system;
        let mut done = false;
        std::iter::from_fn(move || {
            if done {
                return None;
            }
            let mut piece = head.take().unwrap_or_default();
            while piece.len() < PIECE {
                let Some(message) = messages.next() else {
                    piece.extend_from_slice(&self.tail);
                    done = true;
                    break;
                };
                if let Err(err) = self.write_message(&message, comma, &mut piece) {
                    done = true;
                    messages = Vec::new().into_iter();
                    return Some(Err(err));
                }
                comma = true;
            }
            Some(Ok(piece))
        })
    }

    /// A message, with the comma before it when `comma`.
    fn write_message(
        &self,
        message: &Message,
        comma: bool,
        out: &mut impl Write,
    ) -> serde_json::Result<()> {
        if comma {
            out.write_all(b",").map_err(serde_json::Error::io)?;
        }
        serde_json::to_writer(out, &wire(message, self.deepseek, self.images))
    }
}

/// A writer that only counts.
struct Count(u64);

impl Write for Count {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every field of the body after the messages.
struct Rest<'a> {
    request: &'a ModelRequest,
    kind: ProviderKind,
}

impl Serialize for Rest<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let request = self.request;
        let deepseek = self.kind == ProviderKind::Deepseek;
        let thinking = request.thought_level != ThoughtLevel::Off;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("stream", &true)?;
        map.serialize_entry(
            "stream_options",
            &StreamOptions {
                include_usage: true,
            },
        )?;
        if let Some(max_tokens) = request.model.max_tokens {
            map.serialize_entry("max_tokens", &max_tokens)?;
        }
        if !request.tools.is_empty() {
            map.serialize_entry("tools", &Tools(&request.tools))?;
        }
        if deepseek {
            let kind = if thinking { "enabled" } else { "disabled" };
            map.serialize_entry("thinking", &Thinking { kind })?;
            if thinking {
                map.serialize_entry("reasoning_effort", request.thought_level.as_str())?;
            }
        } else if thinking && request.thought_level != ThoughtLevel::High {
            // Plain OpenAI-compatible servers take `reasoning_effort` when
            // they support it; "high" is their default so it is left out.
            map.serialize_entry("reasoning_effort", request.thought_level.as_str())?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
}

struct Tools<'a>(&'a [ToolSchema]);

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            description: &'a str,
            parameters: &'a serde_json::Value,
        }
        #[derive(Serialize)]
        struct Tool<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            function: Function<'a>,
        }
        serializer.collect_seq(self.0.iter().map(|tool| Tool {
            kind: "function",
            function: Function {
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
            },
        }))
    }
}

/// A message as the provider reads it.
fn wire(message: &ChatMessage, deepseek: bool, images: bool) -> Wire<'_> {
    match message {
        ChatMessage::System(text) => Wire::System { content: text },
        ChatMessage::User(content) => Wire::User {
            content: User { content, images },
        },
        ChatMessage::Assistant {
            text,
            reasoning,
            tool_calls,
        } => Wire::Assistant {
            content: text,
            tool_calls: (!tool_calls.is_empty()).then_some(Calls(tool_calls)),
            // DeepSeek wants its reasoning back on tool turns only.
            reasoning_content: (deepseek && !tool_calls.is_empty() && !reasoning.is_empty())
                .then_some(reasoning.as_str()),
        },
        ChatMessage::Tool { call_id, content } => Wire::Tool {
            tool_call_id: call_id,
            content: if content.is_empty() {
                "(no output)"
            } else {
                content
            },
        },
    }
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Wire<'a> {
    System {
        content: &'a str,
    },
    User {
        content: User<'a>,
    },
    Assistant {
        content: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_calls: Option<Calls<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<&'a str>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

struct Calls<'a>(&'a [ToolCallRequest]);

impl Serialize for Calls<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            arguments: &'a str,
        }
        #[derive(Serialize)]
        struct Call<'a> {
            id: &'a str,
            #[serde(rename = "type")]
            kind: &'static str,
            function: Function<'a>,
        }
        serializer.collect_seq(self.0.iter().map(|call| Call {
            id: call.id.as_str(),
            kind: "function",
            function: Function {
                name: &call.name,
                arguments: &call.arguments,
            },
        }))
    }
}

/// User content: one string when there is no image (the blocks' texts
/// joined by blank lines), else the OpenAI content-part array.
struct User<'a> {
    content: &'a [UserContent],
    images: bool,
}

impl Serialize for User<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let has_image = self.images
            && self
                .content
                .iter()
                .any(|block| matches!(block, UserContent::Image { .. }));
        if !has_image {
            return serializer.collect_str(&JoinedText(self.content));
        }
        #[derive(Serialize)]
        struct Url<'a> {
            url: &'a str,
        }
        let mut seq = serializer.serialize_seq(None)?;
        for block in self.content {
            if let UserContent::Image { mime_type, data } = block {
                let url = format!("data:{mime_type};base64,{data}");
                seq.serialize_element(&ImagePart {
                    kind: "image_url",
                    image_url: Url { url: &url },
                })?;
            } else if let Some(text) = BlockText::of(block, self.images) {
                seq.serialize_element(&TextPart {
                    kind: "text",
                    text: Shown(&text),
                })?;
            }
        }
        return seq.end();

        #[derive(Serialize)]
        struct ImagePart<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            image_url: Url<'a>,
        }
    }
}

#[derive(Serialize)]
struct TextPart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: Shown<'a>,
}

/// A text shown to the model, serialized as a string without being built.
struct Shown<'a>(&'a BlockText<'a>);

impl Serialize for Shown<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self.0)
    }
}

/// What the model reads for one content block.
enum BlockText<'a> {
    Text(&'a str),
    Link { uri: &'a str, name: &'a str },
    Resource { uri: &'a str, text: &'a str },
    OmittedImage { mime_type: &'a str, data: &'a str },
}

impl<'a> BlockText<'a> {
    /// `None` for an image the model takes as an image (and for kinds of
    /// content a later version may add).
    fn of(block: &'a UserContent, images: bool) -> Option<BlockText<'a>> {
        Some(match block {
            UserContent::Text { text } => BlockText::Text(text),
            UserContent::ResourceLink { uri, name } => BlockText::Link { uri, name },
            UserContent::Resource { uri, text, .. } => BlockText::Resource { uri, text },
            UserContent::Image { .. } if images => return None,
            UserContent::Image { mime_type, data } => BlockText::OmittedImage { mime_type, data },
            _ => return None,
        })
    }
}

impl Display for BlockText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockText::Text(text) => f.write_str(text),
            BlockText::Link { uri, name } => write!(f, "[resource_link name={name} uri={uri}]"),
            BlockText::Resource { uri, text } => {
                write!(f, "<resource uri=\"{uri}\">\n{text}\n</resource>")
            }
            BlockText::OmittedImage { mime_type, data } => {
                // Decoded size, without decoding (prompts are checked to
                // be valid base64).
                let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
                let bytes = (data.len() / 4 * 3).saturating_sub(padding);
                write!(f, "[image omitted: {mime_type}, {bytes} bytes; the selected model does not accept images — switch to a vision model to use it]")
            }
        }
    }
}

/// The texts of a prompt's blocks joined by blank lines.
struct JoinedText<'a>(&'a [UserContent]);

impl Display for JoinedText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for block in self.0 {
            if let Some(text) = BlockText::of(block, false) {
                if !first {
                    f.write_str("\n\n")?;
                }
                first = false;
                write!(f, "{text}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::settings::builtin_models;

    fn json(request: &ModelRequest, kind: ProviderKind) -> serde_json::Value {
        serde_json::from_slice(&request_body(request, kind).unwrap()).unwrap()
    }

    fn request(level: ThoughtLevel) -> ModelRequest {
        ModelRequest {
            model: builtin_models()[0].clone(),
            thought_level: level,
            system: "sys".into(),
            messages: [
                ChatMessage::User(vec![
                    UserContent::text("hi"),
                    UserContent::ResourceLink {
                        uri: "file:///a".into(),
                        name: "a".into(),
                    },
                ]),
                ChatMessage::Assistant {
                    text: String::new(),
                    reasoning: "because".into(),
                    tool_calls: vec![ToolCallRequest {
                        id: "c".into(),
                        name: "read".into(),
                        arguments: "{}".into(),
                        provider_id: None,
                    }],
                },
                ChatMessage::Tool {
                    call_id: "c".into(),
                    content: String::new(),
                },
                ChatMessage::Assistant {
                    text: "done".into(),
                    reasoning: "r2".into(),
                    tool_calls: vec![],
                },
            ]
            .into_iter()
            .map(|message| Arc::new(Message::new(message)))
            .collect(),
            tools: vec![],
            session_id: "s".into(),
        }
    }

    /// The pieces an HTTP request sends make the same body, of the length
    /// its `Content-Length` says: in pieces of at least 64 KiB for a long
    /// conversation, one piece for a short one, with or without a system
    /// prompt.
    #[test]
    fn the_body_in_pieces_is_the_body_and_its_length_is_counted() {
        let mut long = request(ThoughtLevel::High);
        let text = "line with \"quotes\" and \\ slashes\n".repeat(2000);
        for _ in 0..8 {
            long.messages.push(Arc::new(Message::new(ChatMessage::Tool {
                call_id: "c".into(),
                content: text.clone(),
            })));
        }
        let mut without_system = request(ThoughtLevel::Off);
        without_system.system.clear();
        let mut empty = without_system.clone();
        empty.messages.clear();
        for (request, pieces_at_least) in [
            (long, 2),
            (request(ThoughtLevel::Max), 1),
            (without_system, 1),
            (empty, 1),
        ] {
            let whole = request_body(&request, ProviderKind::Deepseek).unwrap();
            let body = RequestBody::new(&request, ProviderKind::Deepseek).unwrap();
            assert_eq!(body.content_length().unwrap(), whole.len() as u64);
            let pieces: Vec<Vec<u8>> = body.into_pieces().map(Result::unwrap).collect();
            assert!(pieces.len() >= pieces_at_least, "{} pieces", pieces.len());
            for piece in &pieces[..pieces.len() - 1] {
                assert!(piece.len() >= PIECE, "{}", piece.len());
            }
            assert_eq!(pieces.concat(), whole);
            let parsed: serde_json::Value = serde_json::from_slice(&whole).unwrap();
            let messages = parsed["messages"].as_array().unwrap();
            let system = usize::from(!request.system.is_empty());
            assert_eq!(messages.len(), request.messages.len() + system);
            assert_eq!(parsed["stream"], true);
        }
    }

    /// A message's length is kept for the next request of the
    /// conversation, one per form it takes: counted for DeepSeek and for
    /// an OpenAI-compatible server, with images and without, every body's
    /// length stays its length.
    #[test]
    fn kept_lengths_are_the_lengths_of_each_form() {
        let mut request = request(ThoughtLevel::High);
        request
            .messages
            .push(Arc::new(Message::new(ChatMessage::User(vec![
                UserContent::text("look"),
                UserContent::Image {
                    mime_type: "image/png".into(),
                    data: "aGVsbG8=".into(),
                },
            ]))));
        for _ in 0..2 {
            for kind in [ProviderKind::Deepseek, ProviderKind::Openai] {
                for images in [false, true] {
                    request.model.images = images;
                    let whole = request_body(&request, kind).unwrap();
                    let body = RequestBody::new(&request, kind).unwrap();
                    assert_eq!(
                        body.content_length().unwrap(),
                        whole.len() as u64,
                        "{kind:?}, images {images}"
                    );
                }
            }
        }
    }

    #[test]
    fn deepseek_body_has_thinking_and_passback_only_on_tool_turns() {
        let body = json(&request(ThoughtLevel::Max), ProviderKind::Deepseek);
        assert_eq!(body["thinking"]["type"], "enabled");
        assert_eq!(body["reasoning_effort"], "max");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(
            body["messages"][1]["content"],
            "hi\n\n[resource_link name=a uri=file:///a]"
        );
        assert_eq!(body["messages"][2]["reasoning_content"], "because");
        assert_eq!(body["messages"][3]["content"], "(no output)");
        assert!(body["messages"][4].get("reasoning_content").is_none());

        let off = json(&request(ThoughtLevel::Off), ProviderKind::Deepseek);
        assert_eq!(off["thinking"]["type"], "disabled");
        assert!(off.get("reasoning_effort").is_none());

        let openai = json(&request(ThoughtLevel::High), ProviderKind::Openai);
        assert!(openai.get("thinking").is_none());
        assert!(openai["messages"][2].get("reasoning_content").is_none());
    }

    #[test]
    fn images_are_parts_for_vision_models_and_described_for_others() {
        let mut request = request(ThoughtLevel::Off);
        request.messages = vec![Arc::new(Message::new(ChatMessage::User(vec![
            UserContent::text("look"),
            UserContent::Image {
                mime_type: "image/png".into(),
                data: "aGVsbG8=".into(),
            },
            UserContent::Resource {
                uri: "file:///r".into(),
                text: "body \"quoted\"".into(),
                mime_type: None,
            },
        ])))];
        request.model.images = true;
        let body = json(&request, ProviderKind::Openai);
        assert_eq!(
            body["messages"][1]["content"],
            serde_json::json!([
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}},
                {"type": "text", "text": "<resource uri=\"file:///r\">\nbody \"quoted\"\n</resource>"},
            ])
        );
        request.model.images = false;
        let body = json(&request, ProviderKind::Openai);
        assert_eq!(
            body["messages"][1]["content"],
            "look\n\n[image omitted: image/png, 5 bytes; the selected model does not accept images — switch to a vision model to use it]\n\n<resource uri=\"file:///r\">\nbody \"quoted\"\n</resource>"
        );
        assert_eq!(
            body["messages"][0],
            serde_json::json!({"role": "system", "content": "sys"})
        );
    }
}
