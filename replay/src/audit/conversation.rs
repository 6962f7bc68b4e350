//! The conversation: what the user said, what the model said, the calls it made, in log
//! order; and the model's final answer.

use cairn_core::Record;
use cairn_core::event::Event;
use serde::Serialize;

use super::Fold;

/// One step of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Turn {
    /// A message from the user (`user_message`).
    User { seq: u64, ts: String, text: String },
    /// What the model said (`model_turn.text`), and how many calls it asked for.
    Model {
        seq: u64,
        ts: String,
        model: String,
        text: String,
        calls: u64,
        /// The person watching interrupted the turn (`model_turn.interrupted`): `text`
        /// is what it had said by then. Absent when false.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        interrupted: bool,
    },
    /// A call: its entry in [`super::Audit::calls`] has the same `call`.
    Call { seq: u64, call: String },
    /// The person switched the model (`model_switched`): from here on `to` answers.
    Switch {
        seq: u64,
        ts: String,
        from: String,
        to: String,
    },
}

/// The conversation, from `user_message`, `model_turn` and `tool_started`; the answer
/// is the text of the last model turn, when that turn asked for no call and was not
/// interrupted.
#[derive(Debug, Default)]
pub(super) struct ConversationFold {
    turns: Vec<Turn>,
    answer: Option<String>,
}

impl ConversationFold {
    /// The turns, and the final answer.
    pub(super) fn finish(self) -> (Vec<Turn>, Option<String>) {
        (self.turns, self.answer)
    }
}

impl Fold for ConversationFold {
    fn apply(&mut self, r: &Record) {
        let turn = match &r.event {
            Event::UserMessage { text, .. } => Turn::User {
                seq: r.seq,
                ts: r.time().to_string(),
                text: text.clone(),
            },
            Event::ModelTurn {
                model,
                text,
                tool_calls,
                interrupted,
                ..
            } => {
                // An interrupted turn is no answer.
                self.answer = (tool_calls.is_empty() && !text.is_empty() && !interrupted)
                    .then(|| text.clone());
                Turn::Model {
                    seq: r.seq,
                    ts: r.time().to_string(),
                    model: model.clone(),
                    text: text.clone(),
                    calls: tool_calls.len() as u64,
                    interrupted: *interrupted,
                }
            }
            Event::ModelSwitched {
                model, previous, ..
            } => Turn::Switch {
                seq: r.seq,
                ts: r.time().to_string(),
                from: previous.clone(),
                to: model.clone(),
            },
            Event::ToolStarted { call, .. } => Turn::Call {
                seq: r.seq,
                call: call.clone(),
            },
            _ => return,
        };
        self.turns.push(turn);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::testing::{finished, rec, run, started, ts};
    use super::*;

    fn turn(seq: u64, text: &str, calls: Value, interrupted: bool) -> Record {
        rec(
            seq,
            seq,
            json!({"type": "model_turn", "provider": "p", "model": "m", "text": text,
                "tool_calls": calls, "interrupted": interrupted}),
        )
    }

    #[test]
    fn the_conversation_is_in_log_order_and_the_answer_is_the_last_turn_without_calls() {
        let records = [
            rec(
                1,
                1,
                json!({"type": "user_message", "text": "count the lines"}),
            ),
            turn(2, "let me look", json!([{"name": "run_command"}]), false),
            started(3, 3, "c1", "run_command", json!({"command": "wc -l a"})),
            finished(4, 4, "c1", "ok", "3 a"),
            turn(5, "three lines", json!([]), false),
        ];
        let (turns, answer) = run(ConversationFold::default(), &records).finish();
        assert_eq!(
            turns,
            [
                Turn::User {
                    seq: 1,
                    ts: ts(1),
                    text: "count the lines".into()
                },
                Turn::Model {
                    seq: 2,
                    ts: ts(2),
                    model: "m".into(),
                    text: "let me look".into(),
                    calls: 1,
                    interrupted: false
                },
                Turn::Call {
                    seq: 3,
                    call: "c1".into()
                },
                Turn::Model {
                    seq: 5,
                    ts: ts(5),
                    model: "m".into(),
                    text: "three lines".into(),
                    calls: 0,
                    interrupted: false
                },
            ]
        );
        assert_eq!(answer.as_deref(), Some("three lines"));
    }

    #[test]
    fn an_interrupted_turn_a_turn_with_calls_or_an_empty_one_is_no_answer() {
        for last in [
            turn(2, "half a sen", json!([]), true),
            turn(2, "one more look", json!([{"name": "read_file"}]), false),
            turn(2, "", json!([]), false),
        ] {
            let records = [turn(1, "an answer", json!([]), false), last];
            let (turns, answer) = run(ConversationFold::default(), &records).finish();
            assert_eq!(turns.len(), 2);
            assert_eq!(answer, None, "{:?}", records[1].event);
        }
    }
}
