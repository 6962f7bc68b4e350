//! The calls: one entry per `tool_started`, completed by its `tool_finished` and by the
//! time it waited for a person's permission.

use std::collections::{BTreeMap, HashMap};

use cairn_core::Record;
use cairn_core::event::Event;
use serde::Serialize;

use super::permissions::Waits;
use super::{Clock, Fold, one_line};

/// One call.
#[derive(Debug, Clone, Serialize)]
pub struct CallEntry {
    pub seq: u64,
    pub call: String,
    pub tool: String,
    /// `ok`, `error`, … or `unfinished`.
    pub status: String,
    pub started: String,
    pub finished: Option<String>,
    /// Milliseconds from the session start to the call's start and end (the timeline).
    pub start_ms: u64,
    pub end_ms: u64,
    /// The call's own run time: its `tool_finished` time less `wait_ms` (the time it
    /// waited for a person is shown apart, never as the call's).
    pub elapsed_us: Option<u64>,
    /// Milliseconds spent waiting for a person's permission answers (from each
    /// `permission_requested` to its `permission_decided`), apart from the run time;
    /// none when no person was asked.
    pub wait_ms: Option<u64>,
    /// A one-line summary of the input.
    pub summary: String,
    /// The input as recorded (redacted).
    pub input: serde_json::Value,
    /// The output as the model was shown it (capped; the whole in the output blob).
    pub output: String,
}

/// The calls started so far, by id: each one's place among the calls and its tool.
/// An id started again names the later call. The folds that speak of a call by its id
/// (its end, a permission asked for it) keep one of these.
#[derive(Debug, Default)]
pub(super) struct Started {
    index: HashMap<String, usize>,
    tools: Vec<String>,
}

impl Started {
    /// The place among the calls and the tool of the call `call`, once started.
    pub(super) fn get(&self, call: &str) -> Option<(usize, &str)> {
        let &i = self.index.get(call)?;
        Some((i, self.tools.get(i)?.as_str()))
    }
}

impl Fold for Started {
    fn apply(&mut self, r: &Record) {
        if let Event::ToolStarted { call, tool, .. } = &r.event {
            self.index.insert(call.clone(), self.tools.len());
            self.tools.push(tool.clone());
        }
    }
}

/// The calls of a session: started by `tool_started`, ended by `tool_finished` (a call
/// without an end is `unfinished` and lasts to the end of the log).
#[derive(Debug)]
pub(super) struct CallsFold {
    clock: Clock,
    started: Started,
    calls: Vec<CallEntry>,
}

impl CallsFold {
    pub(super) fn new(clock: Clock) -> CallsFold {
        CallsFold {
            clock,
            started: Started::default(),
            calls: Vec::new(),
        }
    }

    /// The calls, each with the time it waited for a person (`waits`, by its place).
    pub(super) fn finish(self, waits: &Waits) -> Vec<CallEntry> {
        let mut calls = self.calls;
        for (&i, &wait) in waits {
            if let Some(c) = calls.get_mut(i) {
                c.wait_ms = Some(wait);
                c.elapsed_us = c
                    .elapsed_us
                    .map(|us| us.saturating_sub(wait.saturating_mul(1000)));
            }
        }
        calls
    }
}

impl Fold for CallsFold {
    fn apply(&mut self, r: &Record) {
        self.started.apply(r);
        match &r.event {
            Event::ToolStarted {
                call, tool, input, ..
            } => self.calls.push(CallEntry {
                seq: r.seq,
                call: call.clone(),
                tool: tool.clone(),
                status: "unfinished".into(),
                started: r.time().to_string(),
                finished: None,
                start_ms: self.clock.at(r),
                end_ms: self.clock.end_ms,
                elapsed_us: None,
                wait_ms: None,
                summary: input_summary(input),
                input: input.clone(),
                output: String::new(),
            }),
            Event::ToolFinished(f) => {
                let Some((i, _)) = self.started.get(&f.call) else {
                    return;
                };
                let Some(c) = self.calls.get_mut(i) else {
                    return;
                };
                c.status = f.status.as_str().to_string();
                c.finished = Some(r.time().to_string());
                c.end_ms = self.clock.at(r);
                c.elapsed_us = Some(f.elapsed_us);
                c.output = f.output.clone();
            }
            _ => {}
        }
    }
}

/// How many calls ended with each status (`unfinished` for those without an end).
pub(super) fn calls_by_status(calls: &[CallEntry]) -> BTreeMap<String, u64> {
    let mut by_status = BTreeMap::new();
    for c in calls {
        *by_status.entry(c.status.clone()).or_default() += 1;
    }
    by_status
}

/// A one-line summary of a call's input: `key=value` pairs, newlines shown as `⏎`.
pub fn input_summary(input: &serde_json::Value) -> String {
    let Some(map) = input.as_object() else {
        return input.to_string();
    };
    map.iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={}", one_line(s)),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{finished, rec, run, started, ts};
    use super::*;

    /// The calls of `records`, given the waits, as `(call, status, start_ms, end_ms,
    /// elapsed_us, wait_ms, output)`.
    type Row = (String, String, u64, u64, Option<u64>, Option<u64>, String);

    fn check(records: &[Record], waits: &[(usize, u64)], expected: &[Row]) -> Vec<CallEntry> {
        let fold = run(CallsFold::new(Clock::of(records)), records);
        let calls = fold.finish(&waits.iter().copied().collect());
        let rows: Vec<Row> = calls
            .iter()
            .map(|c| {
                (
                    c.call.clone(),
                    c.status.clone(),
                    c.start_ms,
                    c.end_ms,
                    c.elapsed_us,
                    c.wait_ms,
                    c.output.clone(),
                )
            })
            .collect();
        assert_eq!(rows, expected);
        calls
    }

    fn row(
        call: &str,
        status: &str,
        span: (u64, u64),
        us: Option<u64>,
        wait: Option<u64>,
        out: &str,
    ) -> Row {
        (
            call.into(),
            status.into(),
            span.0,
            span.1,
            us,
            wait,
            out.into(),
        )
    }

    #[test]
    fn a_call_runs_from_its_start_to_its_end_and_an_unfinished_one_to_the_log_end() {
        let records = [
            started(1, 0, "c1", "read_file", json!({"path": "a.txt"})),
            started(2, 100, "c2", "run_command", json!({"command": "sleep 9"})),
            finished(3, 250, "c1", "ok", "hello"),
            rec(4, 900, json!({"type": "user_message", "text": "stop"})),
        ];
        let calls = check(
            &records,
            &[],
            &[
                row("c1", "ok", (0, 250), Some(250_000), None, "hello"),
                row("c2", "unfinished", (100, 900), None, None, ""),
            ],
        );
        assert_eq!(calls[0].started, ts(0));
        assert_eq!(calls[0].finished, Some(ts(250)));
        assert_eq!(calls[0].summary, "path=a.txt");
        assert_eq!(calls[1].finished, None);
        let by_status = calls_by_status(&calls);
        assert_eq!(
            by_status.into_iter().collect::<Vec<_>>(),
            [("ok".to_string(), 1), ("unfinished".to_string(), 1)]
        );
    }

    #[test]
    fn an_end_without_a_start_is_ignored_and_a_reused_id_ends_the_later_call() {
        let records = [
            finished(1, 0, "ghost", "error", "no such call"),
            started(2, 10, "c", "read_file", json!({})),
            finished(3, 20, "c", "error", "first"),
            started(4, 30, "c", "read_file", json!({})),
            finished(5, 40, "c", "ok", "second"),
        ];
        check(
            &records,
            &[],
            &[
                row("c", "error", (10, 20), Some(20_000), None, "first"),
                row("c", "ok", (30, 40), Some(40_000), None, "second"),
            ],
        );
    }

    #[test]
    fn a_call_carries_the_time_it_waited_for_a_person_apart_from_its_run_time() {
        // b's tool_finished says 2010 ms (elapsed_us is 1000 × its ms here), 1500 of
        // them waiting for a person's answer: its run time is the other 510 (issue 43:
        // a 9-byte write was shown as 3.14 s, the wait for `y`).
        let records = [
            started(1, 0, "a", "write_file", json!({})),
            started(2, 5, "b", "write_file", json!({})),
            finished(3, 10, "a", "denied", "denied by the user"),
            finished(4, 2010, "b", "ok", ""),
        ];
        check(
            &records,
            &[(0, 0), (1, 1500), (7, 3)],
            &[
                row(
                    "a",
                    "denied",
                    (0, 10),
                    Some(10_000),
                    Some(0),
                    "denied by the user",
                ),
                row("b", "ok", (5, 2010), Some(510_000), Some(1500), ""),
            ],
        );
    }

    #[test]
    fn input_summary_is_one_line_of_key_value_pairs() {
        assert_eq!(
            input_summary(&json!({"command": "a\nb", "timeout_ms": 5})),
            "command=a⏎b timeout_ms=5"
        );
        assert_eq!(input_summary(&json!("raw")), "\"raw\"");
    }
}
