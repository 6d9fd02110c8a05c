//! The replay provider: plays a scripted transcript (see [`super::script`])
//! through the same chunk parser the HTTP client uses, so `dsh demo` and
//! keyless tests exercise the real stream path.

use std::collections::VecDeque;
use std::sync::Mutex;

use dsh_protocol::model::StreamEvent;
use dsh_protocol::ErrorCode;
use futures::StreamExt;

use super::script::ScriptEntry;
use super::sse::ChunkParser;
use super::{EventStream, ModelError, Prepared};

/// Plays script entries in order, one per model call, across all sessions.
pub struct ReplayProvider {
    entries: Mutex<VecDeque<ScriptEntry>>,
    /// What is told the body of every request, when observed.
    observer: Option<Observer>,
}

/// Told the body of each request a provider is sent, before it answers.
type Observer = Box<dyn Fn(Vec<u8>) + Send + Sync>;

/// The bodies of the requests a recording provider was sent, in order, as
/// the `deepseek` dialect serializes them (the bytes an HTTP provider
/// would send).
pub type Requests = std::sync::Arc<Mutex<Vec<Vec<u8>>>>;

impl ReplayProvider {
    /// A provider over parsed entries.
    pub fn new(entries: Vec<ScriptEntry>) -> Self {
        ReplayProvider {
            entries: Mutex::new(entries.into()),
            observer: None,
        }
    }

    /// The same provider, keeping the body of every request it is sent
    /// (tests compare what the model was sent).
    pub fn recording(self) -> (Self, Requests) {
        let requests = Requests::default();
        let kept = requests.clone();
        let provider = self.observed(move |body| {
            kept.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(body);
        });
        (provider, requests)
    }

    /// The same provider, telling `observe` the body of every request it
    /// is sent before it answers (tests act between a request and its
    /// reply).
    pub fn observed(self, observe: impl Fn(Vec<u8>) + Send + Sync + 'static) -> Self {
        ReplayProvider {
            observer: Some(Box::new(observe)),
            ..self
        }
    }

    /// Loads a JSONL script.
    ///
    /// # Errors
    /// Unreadable file or invalid line.
    pub fn from_file(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read replay script {}: {err}", path.display()))?;
        let entries =
            ScriptEntry::parse_script(&text).map_err(|err| format!("{}: {err}", path.display()))?;
        Ok(Self::new(entries))
    }

    pub(super) async fn start(&self, request: &Prepared) -> Result<EventStream, ModelError> {
        if let Some(observe) = &self.observer {
            let body = request
                .body
                .to_vec()
                .await
                .map_err(|err| ModelError::new(ErrorCode::Internal, err.to_string()))?;
            observe(body);
        }
        let entry = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop_front()
            .ok_or_else(|| {
                ModelError::new(
                    ErrorCode::Internal,
                    "the replay script has no more responses; the scripted session is over",
                )
            })?;
        if let Some(status) = entry.status {
            let retry_after = entry
                .retry_after
                .as_deref()
                .and_then(super::http::parse_retry_after);
            return Err(ModelError::from_status(
                status,
                entry.body.as_deref().unwrap_or(""),
                retry_after,
                "replay",
            ));
        }
        let delay = entry.delay();
        let payloads = entry.sse_payloads();
        let cut = entry.hang_after.or(entry.drop_after);
        let hang = entry.hang_after.is_some();
        let stream = futures::stream::unfold(
            (
                payloads.into_iter().enumerate(),
                ChunkParser::default(),
                VecDeque::<StreamEvent>::new(),
                false,
            ),
            move |(mut payloads, mut parser, mut queue, mut ended)| async move {
                loop {
                    if let Some(event) = queue.pop_front() {
                        return Some((Ok(event), (payloads, parser, queue, ended)));
                    }
                    if ended {
                        return None;
                    }
                    match payloads.next() {
                        Some((index, _)) if cut == Some(index) => {
                            if hang {
                                futures::future::pending::<()>().await;
                            }
                            let mut out = Vec::new();
                            let error = parser.end(&mut out).err().unwrap_or_else(|| {
                                ModelError::new(
                                    ErrorCode::ModelStreamClosed,
                                    "the replay stream was dropped",
                                )
                            });
                            return Some((Err(error), (payloads, parser, queue, true)));
                        }
                        Some((_, payload)) => {
                            if !delay.is_zero() {
                                tokio::time::sleep(delay).await;
                            }
                            let mut out = Vec::new();
                            if let Err(error) = parser.parse(&payload, &mut out) {
                                return Some((Err(error), (payloads, parser, queue, true)));
                            }
                            queue.extend(out);
                        }
                        None => {
                            ended = true;
                            let mut out = Vec::new();
                            if let Err(error) = parser.end(&mut out) {
                                return Some((Err(error), (payloads, parser, queue, true)));
                            }
                            queue.extend(out);
                        }
                    }
                }
            },
        );
        Ok(stream.boxed())
    }
}
