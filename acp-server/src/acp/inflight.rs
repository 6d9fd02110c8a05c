//! Requests read from stdin and not yet answered (`dsh acp`'s transport,
//! [`super::transport`]): the order they reach the SDK in, and what is
//! owed when stdin ends.
//!
//! The SDK dispatches lines in the order it reads them, but a handler's
//! work finishes when it finishes, and two answers change what a later
//! request finds. A client that writes without waiting for answers (a
//! pipe) would lose the race; so a line waits, and every line behind it,
//! while
//!
//! - an `initialize` is unanswered: the SDK completes the handshake as the
//!   answer goes out, and refuses every other request until then;
//! - a `session/load` or `session/resume` of the session the line names
//!   is unanswered: the session is not open before.
//!
//! Every request taken from stdin is counted until its answer goes out.
//! When stdin ends, [`super::serve`] waits for the count to reach zero,
//! within its bounds, and then [`InFlight::end`]s: what is still owed is
//! answered by dsh ([`super::transport`] writes those answers), a line
//! still waiting is never handed on, and of two answers to one request
//! (the SDK's coming late) only the first goes out.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::ndjson::Line;

/// Methods that open the session their params name.
const OPENING: [&str; 2] = ["session/load", "session/resume"];

/// The ledger (see the module docs).
#[derive(Debug, Default)]
pub struct InFlight {
    state: Mutex<State>,
    changed: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Requests taken and not answered, by id (a client may reuse one).
    unanswered: HashMap<String, usize>,
    /// Answers later lines wait for: the request's id, and which lines.
    barriers: Vec<(String, Waits)>,
    /// stdin has ended.
    stdin_closed: bool,
    /// Every line read from stdin has been taken.
    drained: bool,
    /// Every line read from stdin has reached its handler.
    dispatched: bool,
    /// Waiting is over: what is owed is answered by dsh.
    ending: bool,
    /// stdout is gone: nothing more can be answered.
    writer_closed: bool,
}

/// Which lines wait for an answer.
#[derive(Debug)]
enum Waits {
    /// Every line (behind an `initialize`).
    All,
    /// Lines naming this session (behind its load or resume).
    Session(String),
}

/// The session a line's params name, read once and only when asked.
struct Named<'a> {
    line: &'a Line,
    session: Option<Option<String>>,
}

impl Named<'_> {
    fn session(&mut self) -> Option<&str> {
        self.session
            .get_or_insert_with(|| {
                #[derive(serde::Deserialize)]
                struct Params {
                    #[serde(rename = "sessionId")]
                    session_id: String,
                }
                let params = serde_json::from_str::<Params>(self.line.params()?).ok()?;
                Some(params.session_id)
            })
            .as_deref()
    }
}

impl InFlight {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn changed(&self) {
        self.changed.notify_waiters();
    }

    /// Resolves with `check`'s answer once it has one (it runs under the
    /// lock, again after every change).
    async fn until<T>(&self, mut check: impl FnMut(&mut State) -> Option<T>) -> T {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(answer) = check(&mut self.state()) {
                return answer;
            }
            notified.await;
        }
    }

    /// A line taken from stdin: a request is counted until its answer goes
    /// out. `false` once the connection is ending: the caller answers it.
    pub fn take(&self, line: &Line) -> bool {
        let mut state = self.state();
        if let Some(id) = &line.id {
            *state.unanswered.entry(id.clone()).or_default() += 1;
        }
        !state.ending
    }

    /// Resolves once `line` may go to the SDK (`true`; an answer it must
    /// wait for is then noted), or the connection is ending (`false`: the
    /// line is not handed on, and [`Self::end`] answers it).
    pub async fn admit(&self, line: &Line) -> bool {
        let mut named = Named {
            line,
            session: None,
        };
        self.until(|state| {
            if state.ending {
                return Some(false);
            }
            let held = state.barriers.iter().any(|(_, waits)| match waits {
                Waits::All => true,
                Waits::Session(id) => named.session() == Some(id),
            });
            if held {
                return None;
            }
            if let (Some(id), Some(method)) = (&line.id, line.method.as_deref()) {
                if method == "initialize" {
                    state.barriers.push((id.clone(), Waits::All));
                } else if OPENING.contains(&method) {
                    if let Some(session) = named.session() {
                        state
                            .barriers
                            .push((id.clone(), Waits::Session(session.to_owned())));
                    }
                }
            }
            Some(true)
        })
        .await
    }

    /// An answer to request `id` is going out: whether to write it (not
    /// when the request was answered already, by dsh at the end).
    pub fn answered(&self, id: &str) -> bool {
        let mut state = self.state();
        let Some(count) = state.unanswered.get_mut(id) else {
            // A request never counted (its id is not one dsh keys), or
            // answered before.
            return !state.ending;
        };
        *count -= 1;
        if *count == 0 {
            state.unanswered.remove(id);
        }
        if let Some(at) = state.barriers.iter().position(|(owed, _)| owed == id) {
            state.barriers.remove(at);
        }
        drop(state);
        self.changed();
        true
    }

    /// stdin has ended.
    pub fn stdin_closed(&self) {
        self.state().stdin_closed = true;
        self.changed();
    }

    /// Every line read from stdin has been taken.
    pub fn drained(&self) {
        self.state().drained = true;
        self.changed();
    }

    /// Every line read from stdin has reached its handler.
    pub fn dispatched(&self) {
        self.state().dispatched = true;
        self.changed();
    }

    /// Resolves once every line read from stdin has reached its handler.
    pub async fn all_dispatched(&self) {
        self.until(|state| state.dispatched.then_some(())).await;
    }

    /// stdout is gone.
    pub fn writer_closed(&self) {
        self.state().writer_closed = true;
        self.changed();
    }

    /// Whether stdin has ended.
    pub fn stdin_has_ended(&self) -> bool {
        self.state().stdin_closed
    }

    /// Resolves once stdin has ended.
    pub async fn input_closed(&self) {
        self.until(|state| state.stdin_closed.then_some(())).await;
    }

    /// Resolves once stdin has ended and every request read from it is
    /// answered, or stdout is gone.
    pub async fn settled(&self) {
        self.until(|state| {
            let answered = state.stdin_closed && state.drained && state.unanswered.is_empty();
            (answered || state.writer_closed).then_some(())
        })
        .await;
    }

    /// Stops waiting: returns the ids still owed an answer (once per
    /// request), which the caller answers.
    pub fn end(&self) -> Vec<String> {
        let mut state = self.state();
        state.ending = true;
        let owed = state
            .unanswered
            .iter()
            .flat_map(|(id, count)| std::iter::repeat_n(id.clone(), *count))
            .collect();
        drop(state);
        self.changed();
        owed
    }

    /// Resolves once [`Self::end`] was called.
    pub async fn ended(&self) {
        self.until(|state| state.ending.then_some(())).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    fn line(text: &str) -> Line {
        Line::classify(text.to_owned()).expect("a well-formed line")
    }

    fn admitted(inflight: &InFlight, line: &Line) -> Option<bool> {
        assert!(inflight.take(line));
        inflight.admit(line).now_or_never()
    }

    #[test]
    fn lines_wait_for_the_initialize_and_for_their_sessions_opening() {
        let inflight = InFlight::default();
        let init = line(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#);
        assert_eq!(admitted(&inflight, &init), Some(true));
        let new = line(r#"{"jsonrpc":"2.0","id":"n","method":"session/new","params":{}}"#);
        assert_eq!(admitted(&inflight, &new), None, "held behind initialize");
        assert!(inflight.answered("1"));
        assert_eq!(inflight.admit(&new).now_or_never(), Some(true));

        let resume = line(
            r#"{"jsonrpc":"2.0","id":3,"method":"session/resume","params":{"sessionId":"a","cwd":"/"}}"#,
        );
        assert_eq!(admitted(&inflight, &resume), Some(true));
        let other =
            line(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"b"}}"#);
        assert_eq!(admitted(&inflight, &other), Some(true), "another session");
        let prompt = line(
            r#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"prompt":[],"sessionId":"a"}}"#,
        );
        assert_eq!(admitted(&inflight, &prompt), None, "held behind the resume");
        assert!(inflight.answered("3"));
        assert_eq!(inflight.admit(&prompt).now_or_never(), Some(true));
    }

    #[test]
    fn at_the_end_what_is_owed_is_answered_once() {
        let inflight = InFlight::default();
        let init = line(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#);
        assert_eq!(admitted(&inflight, &init), Some(true));
        let new = line(r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}"#);
        assert_eq!(admitted(&inflight, &new), None);
        inflight.stdin_closed();
        inflight.drained();
        assert!(inflight.settled().now_or_never().is_none());

        let mut owed = inflight.end();
        owed.sort();
        assert_eq!(owed, ["1", "2"]);
        assert_eq!(inflight.admit(&new).now_or_never(), Some(false));
        // dsh's answers go out; the SDK's, later, do not.
        assert!(inflight.answered("1") && inflight.answered("2"));
        assert!(!inflight.answered("1"));
        assert!(inflight.settled().now_or_never().is_some());
        // A line taken now is the taker's to answer.
        let late = line(r#"{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}"#);
        assert!(!inflight.take(&late));
        assert!(inflight.answered("5"));
    }
}
