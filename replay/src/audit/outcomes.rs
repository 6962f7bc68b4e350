//! What became of the calls that did not simply succeed: refused by a rule or a person,
//! failed, interrupted (and whether a resume ran them again), or flagged as reading
//! like an instruction aimed at the model. With these lists every call whose status is
//! not `ok` is listed somewhere.

use std::collections::HashMap;

use cairn_core::Record;
use cairn_core::event::{Event, InterruptedStep, Rule, Status, ToolFinished};
use serde::Serialize;

use super::calls::{CallEntry, Started};
use super::{Fold, one_line};

/// A call a rule refused.
#[derive(Debug, Clone, Serialize)]
pub struct RefusalEntry {
    pub seq: u64,
    pub call: String,
    pub tool: String,
    pub status: Status,
    pub rule: Option<Rule>,
    pub path: Option<String>,
    /// The first line of what the model was told.
    pub reason: String,
}

/// A call whose result was flagged as reading like an instruction aimed at the model.
#[derive(Debug, Clone, Serialize)]
pub struct InjectionEntry {
    pub seq: u64,
    pub call: String,
    pub tool: String,
    /// The phrases found (`decide::INJECTION_MARKS`).
    pub marks: Vec<String>,
}

/// A call the session left unfinished or recorded as interrupted.
#[derive(Debug, Clone, Serialize)]
pub struct InterruptedEntry {
    pub seq: u64,
    pub call: String,
    pub tool: String,
    /// `unfinished` (no end recorded) or the outcome decided at resume.
    pub outcome: String,
    /// For a script step that could run commands: whether a resume ran it again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun: Option<InterruptedStep>,
}

impl InterruptedEntry {
    /// The outcome, and what a resume decided about running it again.
    pub fn outcome_text(&self) -> String {
        match &self.rerun {
            Some(r) => format!("{}, {}", self.outcome, r.decision()),
            None => self.outcome.clone(),
        }
    }
}

/// The outcomes of a session's calls: from each `tool_finished` of a started call, and
/// the steps each `session_resumed` decided whether to run again.
#[derive(Debug, Default)]
pub(super) struct OutcomesFold {
    started: Started,
    refusals: Vec<RefusalEntry>,
    failed: Vec<RefusalEntry>,
    injections: Vec<InjectionEntry>,
    reruns: HashMap<String, InterruptedStep>,
}

/// The calls that did not simply succeed, by what became of them.
#[derive(Debug)]
pub(super) struct Outcomes {
    pub(super) refusals: Vec<RefusalEntry>,
    pub(super) failed: Vec<RefusalEntry>,
    pub(super) interrupted: Vec<InterruptedEntry>,
    pub(super) injections: Vec<InjectionEntry>,
}

impl OutcomesFold {
    /// The outcomes, with the calls (as the calls fold finished them) left unfinished
    /// or interrupted.
    pub(super) fn finish(self, calls: &[CallEntry]) -> Outcomes {
        let interrupted = calls
            .iter()
            .filter(|c| c.status == "unfinished" || c.status == "interrupted")
            .map(|c| InterruptedEntry {
                seq: c.seq,
                call: c.call.clone(),
                tool: c.tool.clone(),
                outcome: c.status.clone(),
                rerun: self.reruns.get(&c.call).cloned(),
            })
            .collect();
        Outcomes {
            refusals: self.refusals,
            failed: self.failed,
            interrupted,
            injections: self.injections,
        }
    }

    fn finished(&mut self, seq: u64, f: &ToolFinished) {
        let Some((_, tool)) = self.started.get(&f.call) else {
            return;
        };
        if !f.injection.is_empty() {
            self.injections.push(InjectionEntry {
                seq,
                call: f.call.clone(),
                tool: tool.to_string(),
                marks: f.injection.clone(),
            });
        }
        let entry = RefusalEntry {
            seq,
            call: f.call.clone(),
            tool: tool.to_string(),
            status: f.status,
            rule: f.refusal.as_ref().map(|x| x.rule),
            path: f.refusal.as_ref().and_then(|x| x.path.clone()),
            reason: one_line(f.output.lines().next().unwrap_or("")),
        };
        let refused = f.refusal.is_some() || matches!(f.status, Status::Blocked | Status::Denied);
        if refused {
            self.refusals.push(entry);
        } else if !matches!(f.status, Status::Ok | Status::Interrupted) {
            self.failed.push(entry);
        }
    }
}

impl Fold for OutcomesFold {
    fn apply(&mut self, r: &Record) {
        self.started.apply(r);
        match &r.event {
            Event::ToolFinished(f) => self.finished(r.seq, f),
            Event::SessionResumed {
                interrupted_steps, ..
            } => {
                for s in interrupted_steps {
                    self.reruns.insert(s.call.clone(), s.clone());
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{finished, rec, run, started};
    use super::*;

    fn tools(records: &[Record]) -> Vec<CallEntry> {
        let calls = super::super::calls::CallsFold::new(super::super::Clock::of(records));
        run(calls, records).finish(&Default::default())
    }

    #[test]
    fn refusals_failures_and_injections_are_told_apart() {
        let records = [
            started(1, 0, "r", "edit_file", json!({})),
            rec(
                2,
                1,
                json!({"type": "tool_finished", "call": "r", "status": "error",
                "output": "read it first\nmore", "elapsed_us": 5,
                "refusal": {"rule": "read_before_edit", "path": "a.txt"}}),
            ),
            started(3, 2, "d", "run_command", json!({})),
            finished(4, 3, "d", "denied", "denied by the user"),
            started(5, 4, "t", "run_command", json!({})),
            finished(6, 5, "t", "timeout", "timed\tout\nafter 5 s"),
            started(7, 6, "w", "web_fetch", json!({})),
            rec(
                8,
                7,
                json!({"type": "tool_finished", "call": "w", "status": "ok",
                "output": "page", "elapsed_us": 5, "injection": ["ignore previous"]}),
            ),
            started(9, 8, "i", "run_command", json!({})),
            finished(10, 9, "i", "interrupted", "stopped"),
            // An end without a start has no tool: it is no outcome of a call.
            finished(11, 10, "ghost", "error", "lost"),
        ];
        let out = run(OutcomesFold::default(), &records).finish(&tools(&records));
        let refusals: Vec<_> = out
            .refusals
            .iter()
            .map(|e| {
                (
                    e.seq,
                    e.tool.as_str(),
                    e.status,
                    e.rule,
                    e.path.as_deref(),
                    e.reason.as_str(),
                )
            })
            .collect();
        assert_eq!(
            refusals,
            [
                (
                    2,
                    "edit_file",
                    Status::Error,
                    Some(Rule::ReadBeforeEdit),
                    Some("a.txt"),
                    "read it first"
                ),
                (
                    4,
                    "run_command",
                    Status::Denied,
                    None,
                    None,
                    "denied by the user"
                ),
            ]
        );
        let failed: Vec<_> = out
            .failed
            .iter()
            .map(|e| (e.call.as_str(), e.status, e.reason.as_str()))
            .collect();
        assert_eq!(failed, [("t", Status::Timeout, "timed⇥out")]);
        let injections: Vec<_> = out
            .injections
            .iter()
            .map(|e| (e.seq, e.tool.as_str(), e.marks.clone()))
            .collect();
        assert_eq!(
            injections,
            [(8, "web_fetch", vec!["ignore previous".to_string()])]
        );
        let interrupted: Vec<_> = out
            .interrupted
            .iter()
            .map(|e| (e.call.as_str(), e.outcome_text()))
            .collect();
        assert_eq!(interrupted, [("i", "interrupted".to_string())]);
    }

    #[test]
    fn an_unfinished_call_says_whether_the_resume_ran_it_again() {
        let hash = cairn_store::Hash::of(b"head").to_hex();
        let records = [
            started(1, 0, "s", "run_script", json!({})),
            started(2, 1, "q", "read_file", json!({})),
            rec(
                3,
                2,
                json!({"type": "session_resumed", "previous_head": hash,
                "interrupted_steps": [{"call": "s", "step": 2, "tool": "run_command",
                    "rerun": false, "decided_by": "user"}]}),
            ),
        ];
        let out = run(OutcomesFold::default(), &records).finish(&tools(&records));
        let interrupted: Vec<_> = out
            .interrupted
            .iter()
            .map(|e| (e.seq, e.tool.as_str(), e.outcome_text()))
            .collect();
        assert_eq!(
            interrupted,
            [
                (
                    1,
                    "run_script",
                    "unfinished, not run again (user)".to_string()
                ),
                (2, "read_file", "unfinished".to_string()),
            ]
        );
        assert!(out.refusals.is_empty() && out.failed.is_empty() && out.injections.is_empty());
    }
}
