//! The wake-up decision, in process: a fake waker catches what would run.

use std::sync::Arc;

use dsh_protocol::tool::ToolView;
use dsh_protocol::ToolCallId;
use tokio::sync::mpsc;

use super::{given, Wake, Waker};
use crate::jobs::JobReport;
use crate::session::scratch::Scratch;

struct Catch(mpsc::UnboundedSender<Wake>);

impl Waker for Catch {
    fn wake(&self, wake: Wake) {
        self.0.send(wake).unwrap();
    }
}

fn scratch(config: &str) -> (Scratch, mpsc::UnboundedReceiver<Wake>) {
    let scratch = Scratch::new(config, |_| {});
    let (tx, rx) = mpsc::unbounded_channel();
    scratch.session.wakeups.install(Arc::new(Catch(tx)));
    (scratch, rx)
}

fn report(job: &str) -> JobReport {
    JobReport {
        job_id: job.to_owned(),
        call_id: ToolCallId::new(format!("call-{job}")),
        status: "exited 0".to_owned(),
        failed: false,
        summary: format!("[dsh: background job {job} exited with code 0.]"),
        view: ToolView::text("tail"),
        usage: None,
    }
}

/// Ends job `job` and waits until its wake-up was decided.
async fn end(scratch: &Scratch, job: &str) {
    let decided = scratch.session.wakeups.changed.notified();
    (scratch.session.on_job_end())(report(job));
    decided.await;
}

#[tokio::test]
async fn an_idle_session_is_woken_and_a_busy_one_when_its_turn_ends() {
    let (scratch, mut woken) = scratch("");
    let session = &scratch.session;
    end(&scratch, "j1").await;
    let wake = woken.try_recv().expect("a wake-up");
    assert_eq!(
        (wake.jobs.as_slice(), wake.count),
        (&["j1".to_owned()][..], 1)
    );
    let dsh_protocol::UserContent::Text { text } = &wake.content[0] else {
        panic!("{:?}", wake.content);
    };
    assert!(
        text.starts_with("Background job j1 (`j1`) finished: exited 0.")
            && text.contains("the user did not write this"),
        "{text}"
    );
    // The wake-up holds the session's turn.
    assert!(session.is_busy());
    drop(wake);
    assert!(!session.is_busy());

    // Busy: nothing now; the turn's end wakes it (the model was not given
    // the end: it waits in the next prompt's context).
    let turn = session.begin_turn().await.unwrap();
    end(&scratch, "j2").await;
    assert!(woken.try_recv().is_err());
    drop(turn);
    let decided = session.wakeups.changed.notified();
    session.wakeups.after_turn(session);
    decided.await;
    let wake = woken.try_recv().expect("a wake-up after the turn");
    assert_eq!(
        (wake.jobs.as_slice(), wake.count),
        (&["j2".to_owned()][..], 2)
    );
}

#[tokio::test]
async fn past_max_consecutive_wakes_an_end_is_only_noticed_until_the_user_speaks() {
    let (scratch, mut woken) = scratch("[jobs]\nmax_consecutive_wakes = 1");
    end(&scratch, "j1").await;
    drop(woken.try_recv().expect("the first wake-up"));
    end(&scratch, "j2").await;
    assert!(woken.try_recv().is_err(), "a second in a row");
    // Not kept for later either: it opens the next prompt.
    scratch.session.wakeups.user_input();
    end(&scratch, "j3").await;
    let wake = woken.try_recv().expect("a wake-up after the user's input");
    assert_eq!(
        (wake.jobs.as_slice(), wake.count),
        (&["j3".to_owned()][..], 1)
    );
}

#[tokio::test]
async fn quiet_delivery_never_wakes() {
    let (scratch, mut woken) = scratch("[jobs]\ncompletion_delivery = \"quiet\"");
    end(&scratch, "j1").await;
    assert!(woken.try_recv().is_err());
    assert!(!scratch.session.is_busy());
}

#[test]
fn an_end_the_model_was_given_is_found_in_the_conversation() {
    use dsh_protocol::model::ChatMessage;
    let summary = "[dsh: background job j1 exited with code 0.]";
    let given_in = |text: &str| {
        given(
            &[ChatMessage::User(vec![dsh_protocol::UserContent::text(
                text,
            )])],
            summary,
        )
    };
    assert!(given_in(&format!(
        "<system-reminder>\n{summary}\n</system-reminder>"
    )));
    assert!(!given_in("[dsh: background job j2 exited with code 0.]"));
    let reply = ChatMessage::Assistant {
        text: summary.to_owned(),
        reasoning: String::new(),
        tool_calls: Vec::new(),
    };
    assert!(!given(&[reply], summary));
}
