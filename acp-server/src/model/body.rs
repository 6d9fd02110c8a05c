//! The JSON body of a chat-completions request, serialized straight from
//! the session's history: no JSON tree is built. An HTTP request sends it
//! from the session's spool ([`super::spool`]): each message is written
//! there once, the first time a request carries it, and the body is the
//! request's opening, ranges of the spool, and its end — its length known
//! before it is sent (a `Content-Length`, as every OpenAI-compatible
//! server accepts), its messages read a piece of at most 64 KiB at a time
//! as it is sent. A request holds no message: twenty sessions sending at once held
//! twenty conversations before (a serialized copy of each, earlier, and a
//! `serde_json::Value` of each before that).

use std::fmt::{self, Display};
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use dsh_protocol::model::{ChatMessage, Place, ToolCallRequest};
use dsh_protocol::UserContent;
use futures::{Stream, StreamExt, TryStreamExt};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use super::spool::Spool;
use super::ProviderKind;
use super::{ModelRequest, ToolSchema};
use dsh_protocol::model::ThoughtLevel;

/// What a body has besides its messages.
#[derive(Debug)]
struct Frame {
    /// `{"model":…,"messages":[` and the system message, if any.
    head: Bytes,
    /// A system message is in the head: a comma comes before the first
    /// message.
    after_system: bool,
    deepseek: bool,
    images: bool,
    /// `]`, then the rest of the object.
    tail: Bytes,
}

impl Frame {
    fn new(request: &ModelRequest, kind: ProviderKind) -> serde_json::Result<Frame> {
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
        Ok(Frame {
            head: head.into(),
            after_system,
            deepseek: kind == ProviderKind::Deepseek,
            images: request.model.images,
            tail: tail.into(),
        })
    }

    /// The form a message takes depends on these two, and on nothing else
    /// of the request: 0 to 3.
    fn form(&self) -> u64 {
        u64::from(self.deepseek) | u64::from(self.images) << 1
    }

    fn write(&self, message: &ChatMessage, out: &mut Vec<u8>) -> serde_json::Result<()> {
        serde_json::to_writer(out, &wire(message, self.deepseek, self.images))
    }
}

/// Why a body cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// A value did not serialize (never in practice).
    #[error("cannot serialize the model request: {0}")]
    Serialize(#[from] serde_json::Error),
    /// The spool cannot be made or written.
    #[error("cannot write the model request to its spool file: {0}")]
    Spool(#[from] io::Error),
}

/// A piece of a body that could not be read from the spool: the HTTP
/// client reports it as its own failure, which says so rather than blame
/// the network.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the model request from its spool file: {0}")]
pub struct SpoolRead(io::Error);

/// A request's body, its messages in the spool: made once, sent by each
/// attempt of the request.
#[derive(Debug)]
pub struct SpooledBody {
    frame: Frame,
    spool: Arc<Spool>,
    /// The messages' bytes in the spool, commas between them included;
    /// neighbours written one after the other are one range.
    ranges: Arc<[Place]>,
}

/// How much [`SpooledBody::pieces`] reads at once, at most.
const PIECE: usize = 64 * 1024;

/// How much [`SpooledBody::new`] writes at once, about.
const BATCH: usize = 1 << 20;

impl SpooledBody {
    /// Writes to `spool` the request's messages it does not hold yet, each
    /// with the comma before it: in writes of about 1 MiB (the messages of
    /// a history folded again, thousands of them, are not a write each),
    /// each message's place recorded once it is written.
    ///
    /// # Errors
    /// A value does not serialize (never in practice); the spool cannot be
    /// written.
    pub fn new(
        request: &ModelRequest,
        kind: ProviderKind,
        spool: Arc<Spool>,
    ) -> Result<SpooledBody, BodyError> {
        let frame = Frame::new(request, kind)?;
        let key = spool.id() << 2 | frame.form();
        let mut places: Vec<Place> = Vec::with_capacity(request.messages.len());
        // Messages not written yet: their index and where in `batch`.
        let (mut batch, mut unwritten) = (Vec::new(), Vec::new());
        let write = |batch: &mut Vec<u8>, unwritten: &mut Vec<usize>, places: &mut [Place]| {
            if batch.is_empty() {
                return Ok::<_, BodyError>(());
            }
            let base = spool.append(batch)?;
            for at in unwritten.drain(..) {
                places[at].offset += base;
                request.messages[at].put(key, places[at]);
            }
            batch.clear();
            Ok(())
        };
        for (at, message) in request.messages.iter().enumerate() {
            if let Some(place) = message.place(key) {
                places.push(place);
                continue;
            }
            let start = batch.len() as u64;
            batch.push(b',');
            frame.write(message, &mut batch)?;
            unwritten.push(at);
            places.push(Place {
                offset: start,
                len: batch.len() as u64 - start,
            });
            if batch.len() >= BATCH {
                write(&mut batch, &mut unwritten, &mut places)?;
            }
        }
        write(&mut batch, &mut unwritten, &mut places)?;
        let mut ranges: Vec<Place> = Vec::new();
        for place in places {
            match ranges.last_mut() {
                Some(last) if last.offset + last.len == place.offset => last.len += place.len,
                _ => ranges.push(place),
            }
        }
        if !frame.after_system {
            // The first message's comma.
            if let Some(first) = ranges.first_mut() {
                first.offset += 1;
                first.len -= 1;
            }
        }
        let body = SpooledBody {
            frame,
            spool,
            ranges: ranges.into(),
        };
        body.spool.read_live(body.messages_len());
        Ok(body)
    }

    /// The body's length in bytes.
    pub fn content_length(&self) -> u64 {
        (self.frame.head.len() + self.frame.tail.len()) as u64 + self.messages_len()
    }

    fn messages_len(&self) -> u64 {
        self.ranges.iter().map(|range| range.len).sum()
    }

    /// The whole body (the scripted provider shows it to the tests).
    ///
    /// # Errors
    /// The spool cannot be read.
    pub async fn to_vec(&self) -> io::Result<Vec<u8>> {
        let pieces: Vec<Bytes> = self.stream().try_collect().await?;
        Ok(pieces.concat())
    }

    /// The body: its opening, its messages read from the spool a piece of
    /// at most 64 KiB at a time when asked for, and its end. Read on the
    /// runtime's thread: the spool was written moments ago, so a read is a
    /// copy from the page cache (a blocking thread per piece was measured
    /// dearer in the soak: more CPU a turn and a heap that kept growing,
    /// see docs/testing.md).
    pub fn stream(&self) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
        let spool = self.spool.clone();
        let reads = self.reads().map(move |(offset, len)| {
            let mut buf = vec![0; len];
            spool
                .read_at(&mut buf, offset)
                .map_err(|err| io::Error::other(SpoolRead(err)))?;
            Ok(Bytes::from(buf))
        });
        futures::stream::once(std::future::ready(Ok(self.frame.head.clone())))
            .chain(futures::stream::iter(reads))
            .chain(futures::stream::once(std::future::ready(Ok(self
                .frame
                .tail
                .clone()))))
    }

    /// Where the pieces of its messages are in the spool: at most 64 KiB
    /// each.
    fn reads(&self) -> impl Iterator<Item = (u64, usize)> + Send + 'static {
        let ranges = self.ranges.clone();
        (0..ranges.len()).flat_map(move |at| {
            let Place { offset, len } = ranges[at];
            (0..len.div_ceil(PIECE as u64)).map(move |piece| {
                let from = piece * PIECE as u64;
                (offset + from, (len - from).min(PIECE as u64) as usize)
            })
        })
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
        } else {
            // Plain OpenAI-compatible servers take `reasoning_effort` when
            // they support it, in OpenAI's values (vLLM refuses others):
            // "high" is their default, left out; "max" is DeepSeek's word,
            // sent as their highest.
            let effort = match request.thought_level {
                ThoughtLevel::Low => Some("low"),
                ThoughtLevel::Max => Some("high"),
                ThoughtLevel::Off | ThoughtLevel::High => None,
            };
            if let Some(effort) = effort {
                map.serialize_entry("reasoning_effort", effort)?;
            }
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

    use dsh_protocol::model::Message;

    use super::*;
    use crate::model::settings::builtin_models;

    /// The body serialized at once from memory: what the spooled body must
    /// be.
    fn request_body(request: &ModelRequest, kind: ProviderKind) -> serde_json::Result<Vec<u8>> {
        let frame = Frame::new(request, kind)?;
        let mut body = frame.head.to_vec();
        for (at, message) in request.messages.iter().enumerate() {
            if at > 0 || frame.after_system {
                body.push(b',');
            }
            frame.write(message, &mut body)?;
        }
        body.extend_from_slice(&frame.tail);
        Ok(body)
    }

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
            spool: None,
        }
    }

    fn spooled(request: &ModelRequest, kind: ProviderKind, spool: &Arc<Spool>) -> Vec<u8> {
        let body = SpooledBody::new(request, kind, spool.clone()).unwrap();
        let mut whole = body.frame.head.to_vec();
        for (offset, len) in body.reads() {
            assert!(len <= PIECE, "{len}");
            let mut buf = vec![0; len];
            spool.read_at(&mut buf, offset).unwrap();
            whole.extend_from_slice(&buf);
        }
        whole.extend_from_slice(&body.frame.tail);
        assert_eq!(body.content_length(), whole.len() as u64);
        whole
    }

    /// What the HTTP request sends is the body.
    #[tokio::test]
    async fn the_stream_is_the_body() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Arc::new(Spool::new_in(dir.path()).unwrap());
        let mut request = request(ThoughtLevel::High);
        request
            .messages
            .push(Arc::new(Message::new(ChatMessage::Tool {
                call_id: "c".into(),
                content: "x".repeat(200_000),
            })));
        let body = SpooledBody::new(&request, ProviderKind::Openai, spool).unwrap();
        let pieces: Vec<Bytes> = body.stream().try_collect().await.unwrap();
        // Opening, four pieces of the messages, end.
        assert_eq!(pieces.len(), 6);
        assert_eq!(
            pieces.concat(),
            request_body(&request, ProviderKind::Openai).unwrap()
        );
        assert_eq!(body.to_vec().await.unwrap(), pieces.concat());
    }

    /// The body an HTTP request sends from the spool is the body, of the
    /// length its `Content-Length` says: for a long conversation (read in
    /// pieces), with or without a system prompt, with no message.
    #[test]
    fn the_spooled_body_is_the_body_and_its_length_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Arc::new(Spool::new_in(dir.path()).unwrap());
        let mut long = request(ThoughtLevel::High);
        let text = "line with \"quotes\" and \\ slashes\n".repeat(2000);
        // Over 1 MiB: written in two batches.
        for _ in 0..20 {
            long.messages.push(Arc::new(Message::new(ChatMessage::Tool {
                call_id: "c".into(),
                content: text.clone(),
            })));
        }
        let mut without_system = request(ThoughtLevel::Off);
        without_system.system.clear();
        let mut empty = without_system.clone();
        empty.messages.clear();
        for request in [long, request(ThoughtLevel::Max), without_system, empty] {
            let whole = request_body(&request, ProviderKind::Deepseek).unwrap();
            assert_eq!(spooled(&request, ProviderKind::Deepseek, &spool), whole);
            // Written again by no request.
            let written = spool.len();
            assert_eq!(spooled(&request, ProviderKind::Deepseek, &spool), whole);
            assert_eq!(spool.len(), written);
            let parsed: serde_json::Value = serde_json::from_slice(&whole).unwrap();
            let messages = parsed["messages"].as_array().unwrap();
            let system = usize::from(!request.system.is_empty());
            assert_eq!(messages.len(), request.messages.len() + system);
            assert_eq!(parsed["stream"], true);
        }
    }

    /// A message is written to the spool once for each form it takes (for
    /// DeepSeek and for an OpenAI-compatible server, with images and
    /// without), and again in a new spool; every body stays the body, and
    /// a body of messages written one after the other is one range.
    #[test]
    fn a_message_is_written_once_per_spool_and_form() {
        let dir = tempfile::tempdir().unwrap();
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
            let spool = Arc::new(Spool::new_in(dir.path()).unwrap());
            for kind in [ProviderKind::Deepseek, ProviderKind::Openai] {
                for images in [false, true] {
                    request.model.images = images;
                    let whole = request_body(&request, kind).unwrap();
                    assert_eq!(spooled(&request, kind, &spool), whole, "{kind:?} {images}");
                    let written = spool.len();
                    assert_eq!(spooled(&request, kind, &spool), whole, "{kind:?} {images}");
                    assert_eq!(spool.len(), written, "written again");
                }
            }
            let body = SpooledBody::new(&request, ProviderKind::Openai, spool.clone()).unwrap();
            assert_eq!(body.ranges.len(), 1);
        }
        // A message changed where only the history holds it is written
        // anew; the body is the body.
        let dir = tempfile::tempdir().unwrap();
        let spool = Arc::new(Spool::new_in(dir.path()).unwrap());
        spooled(&request, ProviderKind::Deepseek, &spool);
        Arc::get_mut(&mut request.messages[1])
            .unwrap()
            .edit(|message| *message = ChatMessage::User(vec![UserContent::text("hello")]));
        let whole = request_body(&request, ProviderKind::Deepseek).unwrap();
        assert_eq!(spooled(&request, ProviderKind::Deepseek, &spool), whole);
        let body = SpooledBody::new(&request, ProviderKind::Deepseek, spool).unwrap();
        // The first message, then the changed one, then the rest.
        assert_eq!(body.ranges.len(), 3);
        // The body holds no message: the history alone does.
        assert!(request.messages.iter().all(|m| Arc::strong_count(m) == 1));
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
        assert!(openai.get("reasoning_effort").is_none());
        assert!(openai["messages"][2].get("reasoning_content").is_none());
        // OpenAI's values only: DeepSeek's "max" is their "high".
        for (level, effort) in [(ThoughtLevel::Low, "low"), (ThoughtLevel::Max, "high")] {
            let openai = json(&request(level), ProviderKind::Openai);
            assert_eq!(openai["reasoning_effort"], effort, "{level:?}");
        }
        assert!(json(&request(ThoughtLevel::Off), ProviderKind::Openai)
            .get("reasoning_effort")
            .is_none());
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
