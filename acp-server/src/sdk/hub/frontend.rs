//! An SDK session as the core's front end: what it records and streams
//! becomes notices for its subscribers; asks wait for `session/respond`
//! or `session/answer` (or the session's standing approvals).

use std::sync::atomic::Ordering;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::{lock, Ask, AskedCall, Item, NoticeKind, OfferedOption, SdkSession};
use crate::frontend::{CommandLive, Delta, Frontend, Output, Transient};
use crate::permission::{Answer, Question};
use crate::update::AgentUpdate;

/// Removes an ask that was not answered when its turn stopped waiting.
struct AskGuard<'a> {
    session: &'a SdkSession,
    id: String,
}

impl Drop for AskGuard<'_> {
    fn drop(&mut self) {
        lock(&self.session.live).asks.remove(&self.id);
    }
}

impl Frontend for SdkSession {
    fn emit(&self, output: Output<'_>) {
        let (channel, text, call_id) = match output {
            // Everything durable reaches subscribers as its logged event.
            Output::Recorded { event, updates } => {
                let mut live = lock(&self.live);
                for update in updates {
                    if let AgentUpdate::Usage {
                        cost: Some(cost), ..
                    } = update
                    {
                        live.cost = Some(cost);
                    }
                }
                self.last_seq.fetch_max(event.seq, Ordering::AcqRel);
                self.notify(&live, NoticeKind::Event(event.seq), &Item::Event { event });
                // A goal's status: a goal round starts, or the goal changed.
                if let dsh_protocol::log::EventData::GoalChange { change, goal } = &event.data {
                    let item = Item::Goal {
                        change: *change,
                        goal,
                    };
                    self.notify(&live, NoticeKind::Goal(event.seq), &item);
                }
                return;
            }
            Output::Delta(Delta::Message(text, _)) => ("text", text, None),
            Output::Delta(Delta::Thought(text, _)) => ("thought", text, None),
            // A command's output as it comes (its result keeps the tail).
            Output::Transient(Transient::Command {
                call_id,
                live: CommandLive::Output { delta, .. },
            }) => ("output", delta, Some(call_id)),
            // Subscribers replay from the log themselves, and see a call
            // run from its events.
            Output::Replayed(_) | Output::Transient(_) => return,
        };
        let live = lock(&self.live);
        self.notify(
            &live,
            NoticeKind::Delta,
            &Item::Delta {
                channel,
                text: &text,
                call_id: call_id.as_ref(),
            },
        );
    }

    fn ask(&self, ask: crate::frontend::Ask) -> BoxFuture<'_, Answer> {
        let approvals = *lock(&self.approvals);
        if let Some(answer) = ask.standing_answer(approvals) {
            tracing::info!(session = %self.id, call = %ask.call_id, answer = answer.id(), approvals = approvals.name(), "question answered by the session's approvals");
            return Box::pin(std::future::ready(answer));
        }
        let (answer, answered) = oneshot::channel();
        let id = {
            let mut live = lock(&self.live);
            live.next_ask += 1;
            let id = match ask.question {
                Question::User(_) => format!("question-{}", live.next_ask),
                Question::Permission(_) | Question::Plan => format!("perm-{}", live.next_ask),
            };
            let tool_call = AskedCall {
                call_id: &ask.call_id,
                title: &ask.title,
                kind: ask.kind,
                raw_input: &ask.raw_input,
                locations: &ask.locations,
                content: &ask.content,
            };
            let item = match &ask.question {
                Question::User(questions) => Item::Question {
                    request_id: &id,
                    tool_call,
                    questions,
                },
                Question::Permission(_) | Question::Plan => Item::Permission {
                    request_id: &id,
                    question: ask.question.kind(),
                    tool_call,
                    options: ask
                        .question
                        .options()
                        .into_iter()
                        .map(|option| OfferedOption {
                            option_id: option.id,
                            label: option.label,
                            kind: option.hint.as_str(),
                        })
                        .collect(),
                },
            };
            let notice = self.notify(&live, NoticeKind::Ask(id.clone()), &item);
            let conn = live.running.as_ref().map_or(0, |run| run.conn);
            live.asks.insert(
                id.clone(),
                Ask {
                    conn,
                    question: ask.question,
                    notice,
                    answer,
                },
            );
            id
        };
        Box::pin(async move {
            let _guard = AskGuard { session: self, id };
            // A dropped sender (session closed) is no answer: denied.
            answered.await.unwrap_or(Answer::Unavailable)
        })
    }
}
