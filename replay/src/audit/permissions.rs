//! The permissions: every request and its decision (or a decision from the allow list
//! alone), and how long each call waited for a person's answers.

use std::collections::{BTreeMap, HashMap};

use cairn_core::Record;
use cairn_core::event::{Answer, AnswerSource, Event};
use serde::Serialize;

use super::calls::Started;
use super::{Fold, millis};

/// A permission request and its decision (or a decision from the allow list alone).
#[derive(Debug, Clone, Serialize)]
pub struct PermissionEntry {
    pub seq: u64,
    pub call: String,
    pub tool: String,
    pub key: String,
    /// Exactly what was asked about (empty for an allow-list decision, never asked).
    pub detail: String,
    pub guarded: bool,
    /// None when the request was never answered (the session stopped while asking).
    pub answer: Option<Answer>,
    pub source: Option<AnswerSource>,
    /// Milliseconds between the question and a person's answer (none when the answer
    /// came from the allow list or a policy, or never came).
    pub wait_ms: Option<u64>,
}

/// Milliseconds each call waited for a person's answers, by its place among the calls
/// (only calls a person answered for).
pub(super) type Waits = BTreeMap<usize, u64>;

/// The permissions, from `permission_requested` and `permission_decided` (matched by
/// call and key), and the waits of the calls a person answered for.
#[derive(Debug, Default)]
pub(super) struct PermissionsFold {
    started: Started,
    entries: Vec<PermissionEntry>,
    /// The requests not yet decided, by call and key: their place, and when they were
    /// asked (milliseconds since the epoch).
    pending: HashMap<(String, String), (usize, u64)>,
    waits: Waits,
}

impl PermissionsFold {
    /// The permissions, and the waits of the calls.
    pub(super) fn finish(self) -> (Vec<PermissionEntry>, Waits) {
        (self.entries, self.waits)
    }

    fn decided(&mut self, r: &Record, call: &str, key: &str, answer: Answer, source: AnswerSource) {
        let pending = self.pending.remove(&(call.to_string(), key.to_string()));
        let Some((i, asked)) = pending else {
            // Decided without asking (the allow list, a policy): no request before it.
            let tool = self.started.get(call).map(|(_, t)| t.to_string());
            self.entries.push(PermissionEntry {
                seq: r.seq,
                call: call.to_string(),
                tool: tool.unwrap_or_default(),
                key: key.to_string(),
                detail: String::new(),
                guarded: false,
                answer: Some(answer),
                source: Some(source),
                wait_ms: None,
            });
            return;
        };
        let Some(e) = self.entries.get_mut(i) else {
            return;
        };
        e.answer = Some(answer);
        e.source = Some(source);
        if source == AnswerSource::User {
            let wait = millis(r.time()).saturating_sub(asked);
            e.wait_ms = Some(wait);
            if let Some((c, _)) = self.started.get(call) {
                *self.waits.entry(c).or_default() += wait;
            }
        }
    }
}

impl Fold for PermissionsFold {
    fn apply(&mut self, r: &Record) {
        self.started.apply(r);
        match &r.event {
            Event::PermissionRequested {
                call,
                key,
                detail,
                tool,
                guarded,
                ..
            } => {
                let at = (self.entries.len(), millis(r.time()));
                self.pending.insert((call.clone(), key.clone()), at);
                self.entries.push(PermissionEntry {
                    seq: r.seq,
                    call: call.clone(),
                    tool: tool.clone(),
                    key: key.clone(),
                    detail: detail.clone(),
                    guarded: *guarded,
                    answer: None,
                    source: None,
                    wait_ms: None,
                });
            }
            Event::PermissionDecided {
                call,
                key,
                answer,
                source,
                ..
            } => self.decided(r, call, key, *answer, *source),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{rec, run, started};
    use super::*;

    fn requested(seq: u64, ms: u64, call: &str, key: &str) -> Record {
        rec(
            seq,
            ms,
            json!({"type": "permission_requested", "call": call, "key": key,
                "detail": format!("run {key}"), "tool": "run_command", "guarded": true}),
        )
    }

    fn decided(seq: u64, ms: u64, call: &str, key: &str, answer: &str, source: &str) -> Record {
        rec(
            seq,
            ms,
            json!({"type": "permission_decided", "call": call, "key": key,
                "answer": answer, "source": source}),
        )
    }

    type Row<'a> = (
        u64,
        &'a str,
        &'a str,
        Option<Answer>,
        Option<AnswerSource>,
        Option<u64>,
    );

    fn rows(entries: &[PermissionEntry]) -> Vec<Row<'_>> {
        entries
            .iter()
            .map(|e| {
                (
                    e.seq,
                    e.tool.as_str(),
                    e.detail.as_str(),
                    e.answer,
                    e.source,
                    e.wait_ms,
                )
            })
            .collect()
    }

    #[test]
    fn a_persons_answer_is_a_wait_added_to_its_call() {
        let records = [
            started(1, 0, "a", "run_command", json!({})),
            started(2, 0, "b", "run_command", json!({})),
            requested(3, 100, "b", "cmd:ls"),
            decided(4, 1600, "b", "cmd:ls", "once", "user"),
            requested(5, 2000, "b", "cmd:rm"),
            decided(6, 2250, "b", "cmd:rm", "deny", "user"),
            // Asked, then answered by a policy: no person waited.
            requested(7, 3000, "a", "cmd:cat"),
            decided(8, 9000, "a", "cmd:cat", "always", "policy"),
            // Asked, then answered by the allow list (a grant made meanwhile).
            requested(9, 9100, "a", "cmd:ls"),
            decided(10, 9900, "a", "cmd:ls", "always", "allow_list"),
        ];
        let (entries, waits) = run(PermissionsFold::default(), &records).finish();
        assert_eq!(
            rows(&entries),
            [
                (
                    3,
                    "run_command",
                    "run cmd:ls",
                    Some(Answer::Once),
                    Some(AnswerSource::User),
                    Some(1500)
                ),
                (
                    5,
                    "run_command",
                    "run cmd:rm",
                    Some(Answer::Deny),
                    Some(AnswerSource::User),
                    Some(250)
                ),
                (
                    7,
                    "run_command",
                    "run cmd:cat",
                    Some(Answer::Always),
                    Some(AnswerSource::Policy),
                    None
                ),
                (
                    9,
                    "run_command",
                    "run cmd:ls",
                    Some(Answer::Always),
                    Some(AnswerSource::AllowList),
                    None
                ),
            ]
        );
        assert_eq!(waits.into_iter().collect::<Vec<_>>(), [(1, 1750)]);
    }

    #[test]
    fn an_allow_list_decision_is_an_entry_of_its_own_and_an_unanswered_request_stays_open() {
        let records = [
            started(1, 0, "w", "write_file", json!({})),
            decided(2, 10, "w", "write:a.txt", "always", "allow_list"),
            // A decision for a call never started names no tool.
            decided(3, 20, "x", "write:b.txt", "once", "allow_list"),
            requested(4, 30, "w", "write:c.txt"),
        ];
        let (entries, waits) = run(PermissionsFold::default(), &records).finish();
        assert_eq!(
            rows(&entries),
            [
                (
                    2,
                    "write_file",
                    "",
                    Some(Answer::Always),
                    Some(AnswerSource::AllowList),
                    None
                ),
                (
                    3,
                    "",
                    "",
                    Some(Answer::Once),
                    Some(AnswerSource::AllowList),
                    None
                ),
                (4, "run_command", "run write:c.txt", None, None, None),
            ]
        );
        assert!(!entries[0].guarded && entries[2].guarded);
        assert!(waits.is_empty());
    }
}
