//! The owner's command handling: order, cancel, close while busy, and
//! subscribers. (Arrival order, steers and the line's limit are in
//! `session/tests.rs`.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_protocol::log::EventData;
use dsh_protocol::UserContent;

use super::super::scratch::Scratch;
use super::super::{Admission, Waited};
use super::Subscriber;
use crate::error::AgentError;
use crate::frontend::{Frontend, Output};

/// The seqs of the events a front end was shown.
#[derive(Default)]
struct Seen(Mutex<Vec<u64>>);

impl Frontend for Seen {
    fn emit(&self, output: Output<'_>) {
        if let Output::Recorded { event, .. } = output {
            self.0.lock().unwrap().push(event.seq);
        }
    }
}

impl Seen {
    fn seqs(&self) -> Vec<u64> {
        self.0.lock().unwrap().clone()
    }
}

/// Another kind of front end (subscribers are one per kind).
#[derive(Default)]
struct Other(Seen);

impl Frontend for Other {
    fn emit(&self, output: Output<'_>) {
        self.0.emit(output);
    }
}

#[tokio::test]
async fn commands_are_handled_in_the_order_they_were_sent() {
    let scratch = Scratch::new("", |_| {});
    let session = &scratch.session;
    let running = session.begin_turn().await.unwrap();
    // Sent back to back without waiting: a prompt, a cancel, a prompt. The
    // cancel reaches the first (in line when it came) and not the second
    // (sent after it).
    let first = session.admit(None);
    session.cancel_turn();
    let second = session.admit(None);
    let (Ok(Admission::Waiting(first)), Ok(Admission::Waiting(second))) =
        (first.admitted().await, second.admitted().await)
    else {
        panic!("both wait behind the running turn");
    };
    assert!(running.cancel_token().is_cancelled());
    let first = tokio::time::timeout(Duration::from_secs(10), first.wait());
    assert!(matches!(first.await, Ok(Waited::Cancelled)));
    assert!(!second.cancel_token().is_cancelled());
    drop(running);
    let Waited::Turn(turn) = second.wait().await else {
        panic!("the prompt sent after the cancel runs");
    };
    assert!(!turn.cancel_token().is_cancelled());
}

#[tokio::test]
async fn a_turn_alone_is_refused_while_one_runs_or_waits() {
    let scratch = Scratch::new("", |_| {});
    let session = &scratch.session;
    let running = session.begin_turn().await.unwrap();
    assert!(session.is_busy());
    assert!(matches!(
        session.begin_turn().await,
        Err(AgentError::SessionBusy(_))
    ));
    drop(running);
    // Counted out at once, before the owner has heard of it.
    assert!(!session.is_busy());
    let again = session.begin_turn().await.unwrap();
    drop(again);
}

#[tokio::test]
async fn closing_while_busy_cancels_the_turn_and_the_line_waits_for_the_turn_and_refuses_more() {
    let scratch = Scratch::new("", |_| {});
    let session = scratch.session.clone();
    let running = session.begin_turn().await.unwrap();
    let Ok(Admission::Waiting(queued)) = session.admit(None).admitted().await else {
        panic!("queued behind the running turn");
    };
    let cancel = running.cancel_token();
    let closing = tokio::spawn({
        let session = session.clone();
        async move { session.close(Duration::from_secs(30)).await }
    });
    // Close's first steps (cancel, then "tell me when idle") are sent by
    // the time the turn sees its cancel; once the owner has handled them,
    // close still waits for the turn, not its grace, and the log is open.
    cancel.cancelled().await;
    session.flush().await;
    // Given time to run as far as it can, close is still waiting.
    let mut closing = closing;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut closing)
            .await
            .is_err(),
        "close ended while the turn ran"
    );
    assert!(matches!(queued.wait().await, Waited::Cancelled));
    session
        .record(
            EventData::Notice {
                text: "the turn's last word".to_owned(),
            },
            &crate::frontend::Nobody,
        )
        .expect("the log stays open while the turn runs");
    drop(running);
    tokio::time::timeout(Duration::from_secs(10), closing)
        .await
        .expect("close ends when the turn does")
        .unwrap();
    assert!(matches!(
        session.admit(None).admitted().await,
        Err(AgentError::SessionClosed(_))
    ));
    assert!(matches!(
        session.begin_turn().await,
        Err(AgentError::SessionClosed(_))
    ));
}

#[tokio::test]
async fn a_prompt_cancelled_before_it_is_read_never_runs() {
    let scratch = Scratch::new("", |_| {});
    let session = &scratch.session;
    // Sent, and the session closes before its owner reads it (stdin's end
    // right behind a prompt).
    let sent = session.admit(None);
    session.closing().cancel();
    assert!(matches!(sent.admitted().await, Ok(Admission::Cancelled)));
    assert!(!session.is_busy());
}

#[tokio::test]
async fn a_prompt_counts_as_busy_from_the_moment_it_is_sent() {
    let scratch = Scratch::new("", |_| {});
    let session = &scratch.session;
    let sent = session.admit(None);
    // Not read yet: a parent looking for an idle child passes this one.
    assert!(session.is_busy());
    let Ok(Admission::Now(turn)) = sent.admitted().await else {
        panic!("an idle session admits at once");
    };
    assert!(session.is_busy());
    drop(turn);
    assert!(!session.is_busy());
}

#[tokio::test]
async fn idle_is_answered_when_the_turn_ends() {
    let scratch = Scratch::new("", |_| {});
    let session = &scratch.session;
    let running = session.begin_turn().await.unwrap();
    let mut idle = Box::pin(session.mailbox.ask(super::Command::Idle));
    assert!(futures::poll!(&mut idle).is_pending());
    session.flush().await;
    assert!(futures::poll!(&mut idle).is_pending());
    drop(running);
    tokio::time::timeout(Duration::from_secs(10), idle)
        .await
        .expect("answered when the turn is over")
        .expect("the owner answered");
    // With no turn, at once.
    session.mailbox.ask(super::Command::Idle).await.unwrap();
}

#[tokio::test]
async fn an_interrupt_stops_the_turn_and_keeps_the_line() {
    let scratch = Scratch::new("", |_| {});
    let session = &scratch.session;
    assert!(!session.interrupt_turn().await);
    let running = session.begin_turn().await.unwrap();
    let Ok(Admission::Waiting(steer)) = session
        .admit(Some(vec![UserContent::text("next")]))
        .admitted()
        .await
    else {
        panic!("in line");
    };
    assert!(session.interrupt_turn().await);
    assert!(running.cancel_token().is_cancelled());
    assert!(session.has_waiting().await);
    drop(running);
    // The steer the turn never took runs as its own turn.
    let Waited::Turn(turn) = steer.wait().await else {
        panic!("the steer runs when its turn comes");
    };
    assert!(!turn.cancel_token().is_cancelled());
}

#[tokio::test]
async fn what_happens_between_turns_reaches_every_subscriber_once() {
    let scratch = Scratch::new("", |_| {});
    let session = &scratch.session;
    let (one, two) = (Arc::new(Seen::default()), Arc::new(Other::default()));
    session.subscribe(Subscriber::new(one.clone()));
    session.subscribe(Subscriber::new(two.clone()));
    // A second of the same kind replaces the first.
    let replaced = Arc::new(Seen::default());
    session.subscribe(Subscriber::new(replaced.clone()));
    session.record_between_turns(EventData::Notice {
        text: "between".to_owned(),
    });
    session.flush().await;
    let seq = session.last_seq();
    assert_eq!(replaced.seqs(), [seq]);
    assert_eq!(two.0.seqs(), [seq]);
    assert!(one.seqs().is_empty());
}

#[tokio::test]
async fn attach_makes_one_subscriber_however_many_ask_at_once() {
    let scratch = Scratch::new("", |_| {});
    let session = &scratch.session;
    assert!(session.subscriber::<Seen>().is_none());
    let made = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let attach = |made: Arc<std::sync::atomic::AtomicUsize>| {
        session.attach(move || {
            made.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Arc::new(Seen::default())
        })
    };
    let (a, b) = tokio::join!(attach(made.clone()), attach(made.clone()));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(made.load(std::sync::atomic::Ordering::SeqCst), 1);
    let found = session.subscriber::<Seen>().unwrap();
    assert!(Arc::ptr_eq(&a, &found));
    assert!(session.subscriber::<Other>().is_none());
}

#[tokio::test]
async fn a_late_answer_waits_for_the_step_while_a_turn_runs_else_is_recorded() {
    let scratch = Scratch::new("", |_| {});
    let session = &scratch.session;
    let before = session.last_seq();
    let running = session.begin_turn().await.unwrap();
    session.deliver_late("late one".to_owned());
    let boundary = session.boundary().await;
    assert_eq!(boundary.late, ["late one"]);
    assert!(boundary.steered.is_empty());
    assert_eq!(session.last_seq(), before);
    drop(running);
    session.deliver_late("late two".to_owned());
    session.flush().await;
    assert_eq!(session.last_seq(), before + 1);
    assert!(session.boundary().await.late.is_empty());
}
