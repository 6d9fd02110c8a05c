//! The session's title from the model: one short side request, started
//! beside the first turn's steps. It outlives the turn — a quick answer,
//! an error or a cancel does not drop it — for at most [`WAIT`], and ends
//! when the session closes (`session/close`, `session/delete`, shutdown).
//! The title is recorded whenever it comes, and shown to every subscriber
//! ([`Session::record_between_turns`]); without an answer that fits,
//! the first prompt's line stays the title.

use std::sync::{Arc, Weak};
use std::time::Duration;

use dsh_protocol::log::EventData;
use dsh_protocol::model::Usage;
use dsh_protocol::UserContent;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::Config;
use crate::model::Provider;
use crate::session::Session;

/// How long the title request may take, turn or no turn.
pub(super) const WAIT: Duration = Duration::from_secs(30);

/// Asks the model to name `session`, whose first prompt is `prompt`, on a
/// task of its own.
pub(super) fn start(session: &Arc<Session>, provider: Arc<Provider>, prompt: String) {
    let config = session.config().clone();
    let model_id = session.locked().state.settings.model.clone();
    let (id, closing) = (session.id.to_string(), session.closing());
    let session = Arc::downgrade(session);
    let span = tracing::info_span!(parent: None, "title", session = %id);
    tokio::spawn(
        async move {
            let asked = model_title(&config, &provider, &closing, &model_id, &id, &prompt);
            let Ok(named) = tokio::time::timeout(WAIT, asked).await else {
                tracing::debug!("no title from the model within {WAIT:?}");
                return;
            };
            let Some((title, usage)) = named else {
                return;
            };
            record(&session, &closing, title, usage);
        }
        .instrument(span),
    );
}

/// Records the model's title, unless the session closed meanwhile.
fn record(
    session: &Weak<Session>,
    closing: &CancellationToken,
    title: String,
    usage: Option<Usage>,
) {
    let Some(session) = session.upgrade().filter(|_| !closing.is_cancelled()) else {
        return;
    };
    let data = EventData::Title { title, usage };
    session.record_between_turns(data);
}

/// A title from the model for a session that starts with `prompt`; `None`
/// when the request fails or is cancelled, or the answer is empty or too
/// long.
async fn model_title(
    config: &Config,
    provider: &Provider,
    cancel: &CancellationToken,
    model_id: &str,
    session_id: &str,
    prompt: &str,
) -> Option<(String, Option<Usage>)> {
    let mut model = config.choices.model(model_id).cloned()?;
    model.max_tokens = Some(32);
    let request = crate::model::ModelRequest {
        model,
        thought_level: dsh_protocol::model::ThoughtLevel::Off,
        system: crate::prompt::TITLE_PROMPT.to_owned(),
        messages: vec![Arc::new(dsh_protocol::model::Message::new(
            dsh_protocol::model::ChatMessage::User(vec![UserContent::text(
                dsh_protocol::content::head_bytes(prompt, 2000),
            )]),
        ))],
        tools: Vec::new(),
        session_id: session_id.to_owned(),
        // A side request the conversation never carries again: its
        // message is not written to the session's spool (nor its size
        // weighed against what the spool holds).
        spool: None,
    };
    match super::step::generate(provider, config.model.retry, cancel, request).await {
        Ok(Some((text, usage))) => {
            let title = crate::prompt::clean_title(&text, config.max_title_bytes)?;
            tracing::debug!(%title, "the model named the session");
            Some((title, usage))
        }
        Ok(None) => None,
        Err(error) => {
            tracing::debug!(code = %error.code, "no title from the model: {}", error.message);
            None
        }
    }
}
