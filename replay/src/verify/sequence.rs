//! The order of the records: `session_started` first and once, calls in sequence
//! (`verify/calls.rs`), nothing but a resume after `session_ended` or after a call a
//! resume ended `interrupted`, every call finished and every background process's end
//! recorded before the end, and a resume deciding only about interrupted calls.

use super::*;

/// What the order of the records needs of the log so far.
#[derive(Default)]
pub(super) struct SequenceFold {
    /// The seq of `session_ended`, until a `session_resumed` reopens the session.
    ended_at: Option<u64>,
    /// Records after the end of the kinds a resume writes before its
    /// `session_resumed`: problems unless one follows.
    after_end: Vec<((u64, u64, u64), &'static str)>,
}

impl Fold for SequenceFold {
    fn apply(&mut self, v: &mut Verifier, rec: &Record) {
        if rec.seq != 0 && matches!(rec.event, Event::SessionStarted(_)) {
            v.problem(
                ProblemKind::Structure,
                "session_started after the first record".into(),
            );
        }
        if rec.seq == 0 && !matches!(rec.event, Event::SessionStarted(_)) {
            v.problem(
                ProblemKind::Structure,
                format!(
                    "the first record is {}, not session_started",
                    rec.event.kind()
                ),
            );
        }
        self.after_end(v, &rec.event);
        after_interrupted(v, &rec.event);
        if v.imported {
            // An imported session's end: `verify/imported.rs`.
            if let Event::SessionEnded { .. } = &rec.event {
                self.ended_at.get_or_insert(rec.seq);
            }
            return;
        }
        match &rec.event {
            Event::SessionResumed {
                interrupted_steps, ..
            } => interrupted_steps_of(v, interrupted_steps),
            Event::SessionEnded { .. } => {
                unfinished(v);
                // The engine records the end of every background process before its
                // own: those still running are stopped and recorded cancelled.
                let running: Vec<String> = v
                    .state
                    .processes
                    .values()
                    .filter(|p| p.is_running())
                    .map(|p| format!("{} (call {})", p.id, p.call))
                    .collect();
                if !running.is_empty() {
                    v.problem(
                        ProblemKind::Structure,
                        format!(
                            "the session ended with background processes whose end the log never recorded: {}",
                            running.join(", ")
                        ),
                    );
                }
                self.ended_at.get_or_insert(rec.seq);
            }
            _ => {}
        }
    }
}

/// The calls started and not finished at the session's end, reported (and dropped).
pub(super) fn unfinished(v: &mut Verifier) {
    let open: Vec<String> = v
        .pending
        .iter()
        .map(|(c, p)| format!("{c} ({}, seq {})", p.tool, p.seq))
        .collect();
    if !open.is_empty() {
        v.problem(
            ProblemKind::UnfinishedCall,
            format!(
                "the session ended with calls started and never finished: {}",
                open.join(", ")
            ),
        );
        v.pending.clear();
    }
}

/// Each step a resume decided about is a call that ended interrupted, of a tool that
/// runs commands.
fn interrupted_steps_of(v: &mut Verifier, steps: &[InterruptedStep]) {
    for s in steps {
        let what = match v.interrupted.get(&s.call) {
            None => format!(
                "session_resumed decides about step {} (call {}), but that call did not end interrupted",
                s.step, s.call
            ),
            Some(tool) if *tool != s.tool => format!(
                "session_resumed names call {} a {} call, but it was a {tool} call",
                s.call, s.tool
            ),
            Some(tool)
                if v.registry
                    .get(tool)
                    .is_some_and(|t| !t.effects().runs_commands) =>
            {
                format!(
                    "session_resumed decides whether call {} runs again, but {tool} runs no command: an interrupted {tool} call always runs again",
                    s.call
                )
            }
            Some(_) => continue,
        };
        v.problem(ProblemKind::Structure, what);
    }
}

/// A call ends `interrupted` only when a resume finds it unfinished: what follows its
/// `tool_finished` is the resume's findings (and checkpoints), then its
/// `session_resumed`. A log that ends there is a resume that stopped before it.
fn after_interrupted(v: &mut Verifier, event: &Event) {
    let Some((at, call)) = v.awaiting_resume.take() else {
        return;
    };
    match event {
        Event::SessionResumed { .. } => {}
        Event::Checkpoint { .. } | Event::TreeCheckpoint { .. } => {
            v.awaiting_resume = Some((at, call));
        }
        e if resume_writes(e) => v.awaiting_resume = Some((at, call)),
        e => {
            let here = v.at;
            v.at = at;
            v.problem(
                ProblemKind::Decision,
                format!(
                    "call {call} ended interrupted, but a {} follows (at seq {}) before any session_resumed: a call ends interrupted only when a resume finds it unfinished",
                    e.kind(),
                    here.0
                ),
            );
            v.at = here;
        }
    }
}

impl SequenceFold {
    /// Nothing but a resume follows `session_ended`: checkpoints (placed by interval,
    /// so one may fall right after the end), and what a resume records before its
    /// `session_resumed` (its findings: external writes, lost processes, interrupted
    /// calls). Anything else after the end is a record the session never wrote.
    fn after_end(&mut self, v: &mut Verifier, event: &Event) {
        let Some(end) = self.ended_at else {
            return;
        };
        match event {
            // The signed tree head of the whole session follows its end.
            Event::Checkpoint { .. } | Event::TreeCheckpoint { .. } => {}
            Event::SessionResumed { .. } => {
                self.after_end.clear();
                self.ended_at = None;
            }
            e if resume_writes(e) => self.after_end.push((v.at, e.kind())),
            e => {
                self.finish(v);
                v.problem(ProblemKind::Structure, after_end_what(e.kind(), end));
            }
        }
    }

    /// Reports the records after the end that no `session_resumed` followed.
    pub(super) fn finish(&mut self, v: &mut Verifier) {
        let Some(end) = self.ended_at else {
            return;
        };
        for ((seq, line, offset), kind) in std::mem::take(&mut self.after_end) {
            v.problems.add(Problem {
                seq: Some(seq),
                line,
                offset,
                kind: ProblemKind::Structure,
                what: after_end_what(kind, end),
            });
        }
    }
}

/// Records a resume writes before its `session_resumed`: findings of the
/// reconciliation (calls interrupted, their installed writes, processes lost, files
/// changed meanwhile).
fn resume_writes(event: &Event) -> bool {
    match event {
        Event::FileWrite(w) => {
            (w.op == WriteOp::External && w.call.is_none())
                || (w.status == WriteStatus::Ok && w.call.is_some())
        }
        Event::ShellExec(x) => x.end().is_some_and(|e| e.status == ExecStatus::Lost),
        Event::ToolFinished(f) => f.status == Status::Interrupted,
        _ => false,
    }
}

fn after_end_what(kind: &str, end: u64) -> String {
    format!(
        "{kind} after the session ended at seq {end}: only a resume (its findings, then session_resumed) may follow session_ended"
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{found, rec, run, verifier};
    use super::*;

    fn message(seq: u64, text: &str) -> Record {
        rec(seq, json!({"type": "user_message", "text": text}))
    }

    #[test]
    fn a_first_record_other_than_session_started_is_out_of_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        run(&mut v, &mut SequenceFold::default(), &[message(0, "a")]);
        assert_eq!(
            found(v),
            [(
                Some(0),
                ProblemKind::Structure,
                "the first record is user_message, not session_started".to_string()
            )]
        );
    }

    #[test]
    fn only_a_resume_follows_the_end_and_its_findings_wait_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        let mut fold = SequenceFold::default();
        let ended = rec(1, json!({"type": "session_ended", "reason": "done"}));
        // A resume's finding (a scan's change) after the end: a problem only when no
        // session_resumed follows.
        let scan = rec(
            2,
            json!({"type": "file_write", "op": "external", "path": "a", "before": null,
                "after": null, "status": "ok"}),
        );
        run(&mut v, &mut fold, &[ended, scan, message(3, "b")]);
        fold.finish(&mut v);
        let what = |kind: &str| {
            format!(
                "{kind} after the session ended at seq 1: only a resume (its findings, then session_resumed) may follow session_ended"
            )
        };
        assert_eq!(
            found(v),
            [
                (Some(2), ProblemKind::Structure, what("file_write")),
                (Some(3), ProblemKind::Structure, what("user_message")),
            ]
        );
    }

    #[test]
    fn the_end_with_a_call_still_running_is_an_unfinished_call() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        super::super::testing::pending(&mut v, 4, "c1", "read", json!({"path": "a"}));
        let ended = rec(5, json!({"type": "session_ended", "reason": "done"}));
        run(&mut v, &mut SequenceFold::default(), &[ended]);
        assert!(v.pending.is_empty());
        assert_eq!(
            found(v),
            [(
                Some(5),
                ProblemKind::UnfinishedCall,
                "the session ended with calls started and never finished: c1 (read, seq 4)"
                    .to_string()
            )]
        );
    }
}
