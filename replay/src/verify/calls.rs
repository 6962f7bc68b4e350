//! The calls: their ids in sequence, each call's end found for its start, its output
//! and MCP result blobs, an MCP call ending as its result says, and its status agreeing
//! with its permission answer. The call's pending state is then handed to the folds
//! after this one (`Verifier.finished`). Memory a call wrote is noted in it too.

use super::*;

/// Starts and finishes calls in the shared context's `pending`.
#[derive(Default)]
pub(super) struct CallsFold;

impl Fold for CallsFold {
    fn apply(&mut self, v: &mut Verifier, rec: &Record) {
        match &rec.event {
            Event::ToolStarted {
                at: _,
                call,
                tool,
                input,
                observed,
                mcp,
                input_hash: _,
            } => {
                v.report.calls += 1;
                v.call_in_sequence(call);
                // Taken on the state before this record, as the engine took it.
                let admitted = v.registry.get(tool).map(|t| {
                    decide::admit(
                        &v.state,
                        &v.limits,
                        tool,
                        input,
                        recorded_input_bytes(input),
                        observed.as_ref(),
                        || t.validate(input),
                    )
                });
                let repeats = decide::repeats(&v.state, tool, input);
                let p = Pending::new(rec.seq, tool, input, mcp.as_ref(), admitted, repeats);
                v.pending.insert(call.clone(), p);
            }
            Event::MemoryWritten { .. } => {
                // Memory names no call: it belongs to the one call running.
                match v.pending.keys().collect::<Vec<_>>()[..] {
                    [call] => {
                        let call = call.clone();
                        v.side_effect(&call, Kind::Memory, "memory_written");
                    }
                    [] => v.problem(
                        ProblemKind::Structure,
                        "memory_written outside any call: only a call writes memory".into(),
                    ),
                    // The engine runs one call at a time: another writer's log.
                    _ => {}
                }
            }
            Event::ToolFinished(f) => v.tool_finished(f),
            _ => {}
        }
    }
}

impl Verifier {
    /// Call ids run c1, c2, … in the order calls start.
    pub(super) fn call_in_sequence(&mut self, call: &str) {
        let expected = format!("c{}", self.state.calls_started + 1);
        if *call != expected {
            self.problem(
                ProblemKind::Structure,
                format!("call id {call} out of sequence: the fold expects {expected} (a record missing or moved?)"),
            );
        }
    }

    /// Takes the call out of `pending` into `finished`, checking its blobs, its MCP
    /// result and its status against its permission answer.
    pub(super) fn tool_finished(&mut self, f: &ToolFinished) {
        let Some(mut p) = self.pending.remove(&f.call) else {
            self.problem(
                ProblemKind::Structure,
                format!(
                    "tool_finished of call {} that did not start (or finished twice)",
                    f.call
                ),
            );
            return;
        };
        if let Some(b) = &f.output_blob {
            self.blob(b, &format!("call {} output", f.call));
        }
        if let Some(b) = &f.mcp_result {
            self.blob(b, &format!("call {} MCP result", f.call));
            p.records.push((Kind::McpResult, self.at, false));
            self.mcp_status(f, &p, b);
        }
        self.status_agrees(f, &p);
        // An MCP tool, a built-in of the session's catalog, or a tool this version does
        // not know.
        let effects = match &p.mcp {
            Some(_) => Some(cairn_tools::Effects::MCP),
            None => self.registry.effects(&p.tool),
        };
        // A replay's call that may have been answered from the recording
        // (`Engine::call_answered`): one reaching outside, running commands or whose
        // input held a secret, which took no time.
        let replayed = self.replay
            && f.elapsed_us == 0
            && effects.is_none_or(|e| {
                e.external
                    || e.runs_commands
                    || cairn_core::scrub::holds_marker(&p.input.to_string())
            });
        if let Some(d) = &p.denied {
            self.denied.insert(f.call.clone(), d.clone());
        }
        if f.status == Status::Interrupted {
            self.interrupted.insert(f.call.clone(), p.tool.clone());
            if !replayed {
                self.awaiting_resume = Some((self.at, f.call.clone()));
            }
        }
        self.finished = Some(Finished {
            pending: p,
            effects,
            replayed,
        });
    }

    /// A call's status agrees with its permission answer, its refusal, its writes and
    /// its command.
    pub(super) fn status_agrees(&mut self, f: &ToolFinished, p: &Pending) {
        let status = f.status.as_str();
        match (&p.denied, f.status) {
            // A crash between the denial and the end leaves it interrupted.
            (Some(_), Status::Denied | Status::Interrupted) => {}
            (Some((seq, key)), _) => self.decision(
                f,
                p,
                format!(
                    "status {status}, but permission for {key} was denied at seq {seq}: ran after deny (a denied call ends denied)"
                ),
            ),
            (None, Status::Denied) => match (&p.granted, &p.answer) {
                (Some((seq, key, answer)), _) => self.decision(
                    f,
                    p,
                    format!(
                        "status denied, but permission for {key} was granted ({}) at seq {seq}",
                        answer_name(*answer)
                    ),
                ),
                (None, Some(a)) => self.decision(
                    f,
                    p,
                    format!(
                        "status denied, but no permission was denied to it: {} answered {} by {} lets it run (confined)",
                        a.key,
                        answer_name(a.answer),
                        source_name(a.source)
                    ),
                ),
                // With no answer at all, what the table of what a call records says
                // (`Verifier::implied`).
                (None, None) => {}
            },
            _ => {}
        }
        // A refusal's status is `decide::refusal_status`, checked in `tool_finished`;
        // its writes and its command for its status, in `Verifier::implied`.
    }

    /// An MCP call the server answered ends as its result says (`isError`).
    pub(super) fn mcp_status(&mut self, f: &ToolFinished, p: &Pending, b: &BlobRef) {
        if f.status == Status::Interrupted || !self.blob_intact(b) {
            return;
        }
        let Some(result) = self
            .blobs
            .get(&b.hash)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        else {
            return;
        };
        let expected = cairn_tools::mcp_names::result_status(&result);
        if f.status != expected {
            self.problem(
                ProblemKind::Decision,
                format!(
                    "call {} ({}) ended {}, but the MCP server's result {} isError: the call ends {}",
                    f.call,
                    p.tool,
                    f.status.as_str(),
                    if expected == Status::Error {
                        "says"
                    } else {
                        "does not say"
                    },
                    expected.as_str()
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{finished, found, run, started, verifier};
    use super::*;

    #[test]
    fn call_ids_run_in_sequence_and_an_end_needs_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        let mut fold = CallsFold;
        let records = [
            started(1, "c1", "read", json!({"path": "a"})),
            started(2, "c3", "read", json!({"path": "b"})),
            finished(3, "c9", "ok", ""),
        ];
        run(&mut v, &mut fold, &records);
        assert_eq!(v.report.calls, 2);
        assert_eq!(v.pending.len(), 2);
        assert_eq!(
            found(v),
            [
                (
                    Some(2),
                    ProblemKind::Structure,
                    "call id c3 out of sequence: the fold expects c2 (a record missing or moved?)"
                        .to_string()
                ),
                (
                    Some(3),
                    ProblemKind::Structure,
                    "tool_finished of call c9 that did not start (or finished twice)".to_string()
                ),
            ]
        );
    }

    #[test]
    fn a_finished_call_is_handed_on_to_the_folds_after() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        let mut fold = CallsFold;
        run(
            &mut v,
            &mut fold,
            &[started(1, "c1", "read", json!({"path": "a"}))],
        );
        v.at = (2, 3, 200);
        fold.apply(&mut v, &finished(2, "c1", "interrupted", ""));
        let done = v.finished.take().unwrap();
        assert_eq!(done.pending.tool, "read");
        assert!(!done.replayed);
        assert!(v.pending.is_empty());
        // An interrupted call waits for a resume.
        assert_eq!(v.interrupted.get("c1").map(String::as_str), Some("read"));
        assert_eq!(v.awaiting_resume, Some(((2, 3, 200), "c1".to_string())));
    }
}
