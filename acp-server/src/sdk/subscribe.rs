//! `session/subscribe`: one subscriber's feed of a session.
//!
//! It subscribes to the live notices first and notes the last event
//! recorded at that moment; with `fromSeq` it then replays the log from
//! there; after that it forwards the live notices, events only above the
//! last seq it sent. An event further ahead than the next seq (the
//! subscriber fell behind and the broadcast dropped some, or two events
//! were recorded at once and arrived out of order) is filled in from the
//! log first. So the events a subscriber sees are the log's, in order,
//! with no gap and no duplicate, however late it came or slow it reads.
//!
//! Deltas are transient: a subscriber sees those sent after it subscribed,
//! less those whose text it has already had whole from the replayed log.

use std::sync::Arc;

use dsh_protocol::SessionId;
use jsonrpsee::{PendingSubscriptionSink, SubscriptionSink};
use tokio::sync::broadcast::error::RecvError;

use super::hub::{ConnId, Hub, Item, Notice, NoticeKind, SdkSession};
use super::rpc_error;

/// One subscriber.
struct Feed {
    hub: Arc<Hub>,
    session: Arc<SdkSession>,
    sink: SubscriptionSink,
    /// The last event sent.
    last: u64,
    /// The last event the replay sent (0 without a replay).
    replayed: u64,
    /// The last event read from the log (by the replay or to fill a gap):
    /// its `goal` item, if any, went with it.
    filled: u64,
}

/// The subscriber went away.
struct Gone;

impl Feed {
    async fn send(&self, json: Box<serde_json::value::RawValue>) -> Result<(), Gone> {
        self.sink.send(json).await.map_err(|_| Gone)
    }

    /// Sends the logged events after `last`, as far as the log is written.
    async fn fill(&mut self) -> Result<(), Gone> {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let agent = self.hub.agent.clone();
        let id = self.session.id.clone();
        let from = self.last + 1;
        let read = tokio::spawn(async move { agent.read_events(&id, from, tx).await });
        while let Some(event) = rx.recv().await {
            if event.seq <= self.last {
                continue;
            }
            self.send(Item::Event { event: &event }.to_raw()).await?;
            // A goal's status, as live subscribers get it after the event.
            if let dsh_protocol::log::EventData::GoalChange { change, goal } = &event.data {
                let item = Item::Goal {
                    change: *change,
                    goal,
                };
                self.send(item.to_raw()).await?;
            }
            self.last = event.seq;
            self.filled = event.seq;
        }
        match read.await {
            Ok(Ok(())) => Ok(()),
            // Closed meanwhile: the live feed says so next.
            Ok(Err(error)) => {
                tracing::debug!(session = %self.session.id, %error, "cannot read the log for a subscriber");
                Ok(())
            }
            Err(error) => {
                tracing::error!(%error, "the log reader for a subscriber failed");
                Ok(())
            }
        }
    }

    /// Forwards one live notice; `false` once the session closed.
    async fn forward(&mut self, notice: &Notice) -> Result<bool, Gone> {
        match &notice.kind {
            NoticeKind::Event(seq) => {
                if *seq > self.last + 1 {
                    self.fill().await?;
                }
                if *seq > self.last {
                    self.send(notice.json.clone()).await?;
                    self.last = *seq;
                }
            }
            // Its text came whole in an event the replay sent.
            NoticeKind::Delta if notice.after < self.replayed => {}
            NoticeKind::Ask(id) if !self.session.asks(id) => {}
            NoticeKind::Goal(seq) if *seq <= self.filled => {}
            NoticeKind::Closed => {
                self.send(notice.json.clone()).await?;
                return Ok(false);
            }
            NoticeKind::Delta | NoticeKind::Status | NoticeKind::Goal(_) | NoticeKind::Ask(_) => {
                self.send(notice.json.clone()).await?;
            }
        }
        Ok(true)
    }
}

/// Serves one subscription until the subscriber unsubscribes or goes
/// away, or the session closes.
pub(super) async fn serve(
    hub: Arc<Hub>,
    session_id: SessionId,
    from_seq: Option<u64>,
    pending: PendingSubscriptionSink,
    conn: ConnId,
) {
    let session = match hub.open(&session_id, conn).await {
        Ok(session) => session,
        Err(error) => {
            pending.reject(rpc_error(&error)).await;
            return;
        }
    };
    let snapshot = session.subscribe(conn);
    let Ok(sink) = pending.accept().await else {
        return;
    };
    let mut feed = Feed {
        hub,
        session,
        sink,
        last: snapshot.last_seq,
        replayed: 0,
        filled: 0,
    };
    let mut live = snapshot.live;
    let _ = async {
        if let Some(from) = from_seq {
            feed.last = from.saturating_sub(1);
            feed.fill().await?;
            feed.replayed = feed.last;
        }
        feed.send(snapshot.status.json.clone()).await?;
        for ask in &snapshot.asks {
            if let NoticeKind::Ask(id) = &ask.kind {
                if feed.session.asks(id) {
                    feed.send(ask.json.clone()).await?;
                }
            }
        }
        loop {
            let notice = tokio::select! {
                () = feed.sink.closed() => return Err(Gone),
                notice = live.recv() => notice,
            };
            match notice {
                Ok(notice) => {
                    if !feed.forward(&notice).await? {
                        return Ok(());
                    }
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(session = %feed.session.id, missed, "a subscriber fell behind; filling in from the log");
                    feed.fill().await?;
                }
                Err(RecvError::Closed) => return Ok(()),
            }
        }
    }
    .await;
}
