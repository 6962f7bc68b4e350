//! An imported session (or one recorded from another agent's hooks). Its calls ran
//! under another agent, not under cairn's rules: no decision is taken again, no write
//! re-applied, no output rebuilt, and its `shell_exec` and `file_write` records are not
//! checked against a workspace manifest (there is none). What is checked: the structure
//! (calls in sequence, every effect inside its call, every call finished before the
//! end), every blob, and that a kept original still hashes to what the import recorded.

use super::*;

/// Checks every record of an imported session in place of the other folds.
#[derive(Default)]
pub(super) struct ImportedFold;

impl Fold for ImportedFold {
    fn apply(&mut self, v: &mut Verifier, rec: &Record) {
        match &rec.event {
            Event::SessionStarted(s) => {
                v.report.session = Some(s.id.clone());
                v.blob(&s.manifest, "the manifest");
                if let Some(i) = &s.imported {
                    v.original(&i.file);
                }
            }
            Event::SessionResumed {
                imported: Some(f), ..
            } => v.original(f),
            Event::ToolStarted {
                call,
                tool,
                input,
                mcp,
                ..
            } => {
                v.report.calls += 1;
                v.report.decisions_unchecked += 1;
                v.call_in_sequence(call);
                v.pending.insert(
                    call.clone(),
                    Pending::new(rec.seq, tool, input, mcp.as_ref(), None, 0),
                );
            }
            Event::FileRead(r) => {
                v.imported_effect(&r.call, Kind::Read, &format!("file_read of {}", r.path))
            }
            Event::FileWrite(w) => v.imported_write(w),
            Event::ShellExec(x) => v.imported_exec(x),
            Event::WebFetched(w) => v.web_fetched(w),
            Event::ToolFinished(f) => {
                if let Some(b) = &f.output_blob {
                    v.blob(b, &format!("call {} output", f.call));
                }
                match v.pending.remove(&f.call) {
                    Some(p) => v.imported_finished(f, p),
                    None => v.problem(
                        ProblemKind::Structure,
                        format!(
                            "tool_finished of {}, which is not a call started and not finished",
                            f.call
                        ),
                    ),
                }
            }
            Event::SourceItem { kind, item, .. } => v.blob(item, &format!("source item {kind}")),
            Event::Checkpoint { state_hash, at_seq } => {
                v.report.checkpoints += 1;
                if v.state.last_seq != Some(*at_seq) || v.state.hash() != *state_hash {
                    v.problem(
                        ProblemKind::Checkpoint,
                        format!("checkpoint for seq {at_seq} differs from the fold"),
                    );
                }
            }
            // Its end is the sequence fold's (`verify/sequence.rs`) but for this.
            Event::SessionEnded { .. } => sequence::unfinished(v),
            Event::PermissionRequested { .. } | Event::PermissionDecided { .. } => {
                v.imported_permission(&rec.event)
            }
            _ => {}
        }
    }
}

impl Verifier {
    /// A file write of an imported call: its blobs, inside its call.
    pub(super) fn imported_write(&mut self, w: &FileWrite) {
        self.report.file_writes += 1;
        for (b, what) in [
            (&w.before, "before"),
            (&w.after, "after"),
            (&w.diff, "diff"),
        ] {
            if let Some(b) = b {
                self.blob(b, &format!("file_write of {} ({what})", w.path));
            }
        }
        if w.unknown && w.after.is_some() {
            self.problem(
                ProblemKind::FileWrite,
                format!(
                    "file_write of {}: marked unknown but names its content after",
                    w.path
                ),
            );
        }
        let call = w.call.clone().unwrap_or_default();
        let kind = Kind::of_write(w, true);
        self.imported_effect(&call, kind, &format!("file_write of {}", w.path));
    }

    /// A command of an imported call: its blobs, inside its call.
    pub(super) fn imported_exec(&mut self, x: &ShellExec) {
        if let Some(end) = x.end() {
            for (b, name) in [
                (&end.stdout, "stdout"),
                (&end.stderr, "stderr"),
                (&end.log_blob, "log"),
            ] {
                if let Some(b) = b {
                    self.blob(b, &format!("call {} {name}", x.call));
                }
            }
        }
        self.imported_effect(&x.call, Kind::of_exec(x), "shell_exec");
    }

    /// A hook asked cairn before each call: its questions and answers are in the call
    /// (the allow list it answered from is `session_started.allow`). An imported
    /// session asked cairn nothing.
    pub(super) fn imported_permission(&mut self, event: &Event) {
        match event {
            Event::PermissionRequested { call, .. } | Event::PermissionDecided { call, .. }
                if self.hooked && !self.pending.contains_key(call) =>
            {
                self.problem(
                    ProblemKind::Structure,
                    format!("a permission record outside its call {call}"),
                );
            }
            Event::PermissionRequested { call, .. } if self.hooked => {
                let at = self.at;
                if let Some(p) = self.pending.get_mut(call) {
                    p.records.push((Kind::Asked, at, false));
                }
            }
            Event::PermissionDecided {
                call,
                key,
                answer,
                source,
                ..
            } if self.hooked => {
                let at = self.at;
                if let Some(p) = self.pending.get_mut(call) {
                    p.records.push((Kind::of_decided(*source), at, false));
                    p.answer = Some(Answered {
                        key: key.clone(),
                        answer: *answer,
                        source: *source,
                        at,
                    });
                }
            }
            Event::PermissionRequested { call, .. } | Event::PermissionDecided { call, .. } => {
                self.problem(
                    ProblemKind::Structure,
                    format!("a permission record of call {call} in an imported session, which asked cairn nothing"),
                );
            }
            _ => {}
        }
    }

    /// A side effect of an imported call: inside the call.
    pub(super) fn imported_effect(&mut self, call: &str, kind: Kind, what: &str) {
        let at = self.at;
        match self.pending.get_mut(call) {
            Some(p) => p.records.push((kind, at, false)),
            None => self.problem(
                ProblemKind::Structure,
                format!("{what} outside its call {call}"),
            ),
        }
    }

    /// The end of an imported call. Its tool is another agent's, so the table of what
    /// a call records holds only where the writers make it hold: a call denied was
    /// asked and denied (only a hook asks and denies: an imported session never ends a
    /// call denied), and does nothing; a hook's denial ends its call denied.
    pub(super) fn imported_finished(&mut self, f: &ToolFinished, p: Pending) {
        if let Some(a) = &p.answer
            && a.answer == Answer::Deny
            && !matches!(f.status, Status::Denied | Status::Interrupted)
        {
            self.problem(
                ProblemKind::Decision,
                format!(
                    "call {} ({}) ended {}, but permission for {} was denied at seq {}: a hook's denial ends its call denied",
                    f.call,
                    p.tool,
                    f.status.as_str(),
                    a.key,
                    a.at.0
                ),
            );
        }
        if f.status == Status::Denied {
            self.implied(f, &p, &cairn_tools::Effects::NONE, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{finished, found, rec, run, started, verifier};
    use super::*;

    #[test]
    fn an_imported_session_asked_cairn_nothing_and_its_calls_are_not_decided_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        v.imported = true;
        let records = [
            started(1, "c1", "Bash", json!({"command": "ls"})),
            rec(
                2,
                json!({"type": "permission_requested", "call": "c1", "key": "k",
                    "detail": "d"}),
            ),
            finished(3, "c1", "ok", ""),
            finished(4, "c1", "ok", ""),
        ];
        run(&mut v, &mut ImportedFold, &records);
        assert_eq!(v.report.decisions_unchecked, 1);
        assert_eq!(
            found(v),
            [
                (
                    Some(2),
                    ProblemKind::Structure,
                    "a permission record of call c1 in an imported session, which asked cairn nothing"
                        .to_string()
                ),
                (
                    Some(4),
                    ProblemKind::Structure,
                    "tool_finished of c1, which is not a call started and not finished"
                        .to_string()
                ),
            ]
        );
    }
}
