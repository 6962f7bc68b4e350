//! The files: every read and write inside its call (a write naming none only as a
//! scan's change), its path a workspace path (or a folder allowed to the call), its
//! before hash what the fold knew, its rules (read before edit, stale write) taken
//! again, its blobs checked (a withheld file must be a credential file), and its after
//! content what its before content and the call's input give (re-applied with the
//! engine's own edit functions).

use super::*;

/// Checks `file_read` and `file_write` records.
#[derive(Default)]
pub(super) struct FilesFold;

impl Fold for FilesFold {
    fn apply(&mut self, v: &mut Verifier, rec: &Record) {
        match &rec.event {
            Event::FileRead(r) => {
                v.side_effect(&r.call, Kind::Read, &format!("file_read of {}", r.path));
                if let Some(p) = v.pending.get_mut(&r.call) {
                    p.last_hash = Some(r.hash);
                } else {
                    v.problem(
                        ProblemKind::Structure,
                        format!("file_read of {} outside its call {}", r.path, r.call),
                    );
                }
            }
            Event::FileWrite(w) => {
                v.file_write(w);
                v.reapply(w);
            }
            _ => {}
        }
    }
}

impl Verifier {
    /// A file recorded withheld (hash only, no blob) must be a credential file of the
    /// session: marking any other file so would hide its content from every check.
    pub(super) fn withheld(&mut self, path: &str, what: &str) {
        if !self.credential_files.matches(path) {
            self.problem(
                ProblemKind::Blob,
                format!(
                    "{what}: recorded withheld (no blob), but it is not a credential file of the session"
                ),
            );
        }
    }

    pub(super) fn file_write(&mut self, w: &FileWrite) {
        self.report.file_writes += 1;
        match &w.call {
            Some(call) => {
                // A change a scan found after the call's command ended (one that
                // started: a program that could not start changed nothing).
                let ran = self.pending.get(call).is_some_and(|p| {
                    p.exec
                        .as_ref()
                        .is_some_and(|x| Kind::of_exec(x) != Kind::NotStarted)
                });
                let kind = Kind::of_write(w, ran);
                self.side_effect(call, kind, &format!("file_write of {}", w.path));
            }
            // Only a scan (after a background process's end, at a resume) records a
            // change that names no call.
            None if w.op != WriteOp::External => self.problem(
                ProblemKind::Structure,
                format!(
                    "file_write ({}) of {} names no call: only a scan's external write does",
                    write_op_name(w.op),
                    w.path
                ),
            ),
            None => {}
        }
        if w.withheld {
            self.withheld(&w.path, &format!("file_write {}", w.path));
        } else {
            if let Some(b) = &w.before {
                self.blob(b, &format!("file_write {} before", w.path));
            }
            if let Some(a) = &w.after {
                self.blob(a, &format!("file_write {} after", w.path));
            }
        }
        let class = recorded_path(&w.path);
        if let RecordedPath::Bad(why) = class {
            self.problem(
                ProblemKind::FileWrite,
                format!("write to {:?}: not a workspace path: {why}", w.path),
            );
        }
        self.before_known(w);
        self.write_in_call(w, class);
    }

    /// A write's before hash is what the fold knew of the file.
    fn before_known(&mut self, w: &FileWrite) {
        // What the fold knew of the file before this write: for a tool's write, the
        // content the session last saw (read, wrote or observed), which the tool found
        // on disk; for a change a scan found, the workspace as the log's writes left
        // it, which is what the scan compares with (a read may have seen the change
        // first: the scan still records it, from the content written last).
        let known = match w.op {
            WriteOp::External => self
                .state
                .ws_changes
                .get(&w.path)
                .and_then(|f| f.as_ref().map(|f| f.hash)),
            _ => self.state.files.get(&w.path).and_then(|k| k.hash),
        };
        let before = w.before.map(|b| b.hash.0);
        if let Some(known) = known
            && before != Some(known)
        {
            self.problem(
                ProblemKind::FileWrite,
                format!(
                    "write to {}: before hash {} but the fold knew {}",
                    w.path,
                    w.before.map_or("none".into(), |b| b.hash.short(16)),
                    Hash(known).short(16)
                ),
            );
        }
    }

    /// A write of a call: inside it, outside the workspace only where allowed, what its
    /// command's output lists as changed, and the write rules taken again.
    fn write_in_call(&mut self, w: &FileWrite, class: RecordedPath) {
        let Some(call) = w.call.clone() else {
            return;
        };
        let Some(p) = self.pending.get(&call) else {
            self.problem(
                ProblemKind::Structure,
                format!("file_write of {} outside its call {call}", w.path),
            );
            return;
        };
        if class == RecordedPath::Outside {
            // A write outside the workspace needs the folder allowed to the call's tool:
            // for this call, or for good.
            let dir = Path::new(&w.path)
                .parent()
                .map_or(String::new(), |d| d.to_string_lossy().into_owned());
            let key = format!("{}@{dir}", p.tool);
            let allowed = p.granted.as_ref().is_some_and(|(_, k, _)| *k == key)
                || self.state.allow.contains_key(&key);
            if !allowed {
                let what = format!(
                    "write to {}: outside the workspace, but {key} was not allowed to call {call}",
                    w.path
                );
                self.problem(ProblemKind::FileWrite, what);
                return;
            }
        }
        let Some(p) = self.pending.get_mut(&call) else {
            return;
        };
        if w.status == WriteStatus::Ok {
            p.last_hash = w.after.map(|a| a.hash);
        }
        // What its command's output lists as changed.
        if w.op == WriteOp::External && w.status == WriteStatus::Ok && p.exec.is_some() {
            let what = match (&w.before, &w.after) {
                (None, Some(_)) => Some("created"),
                (Some(_), Some(_)) => Some("changed"),
                (Some(_), None) => Some("deleted"),
                (None, None) => None,
            };
            if let Some(what) = what {
                p.changes.push((what, w.path.clone()));
            }
        }
        self.write_rules(w, &call);
    }

    /// The write rules (read before edit, stale write), taken again once per write: at
    /// its intent, or at the write itself when no intent came first.
    fn write_rules(&mut self, w: &FileWrite, call: &str) {
        let Some(p) = self.pending.get_mut(call) else {
            return;
        };
        let first = if p.intents.contains(&w.path) {
            if w.status != WriteStatus::Intent {
                p.intents.retain(|x| x != &w.path);
            }
            false
        } else {
            if w.status == WriteStatus::Intent {
                p.intents.push(w.path.clone());
            }
            true
        };
        if !first || w.op == WriteOp::External {
            return;
        }
        let expected = decide::expected_before_hashes(&p.input);
        self.report.decisions_checked += 1;
        let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
        let before = w.before.map(|b| b.hash);
        if let Decision::Refuse(r) =
            decide::write(&self.state, w.op, &w.path, before.as_ref(), &expected)
        {
            self.problem(
                ProblemKind::Decision,
                format!(
                    "write to {} at content {}: {} should have refused it ({})",
                    w.path,
                    before.map_or("none".into(), |h| h.short(16)),
                    rule_name(r.rule),
                    r.message
                ),
            );
        }
    }

    /// Re-applies a write of a file tool: its before content and its call's input must
    /// give its after content. Checked once per (path, after hash) in a call, so an
    /// intent and its outcome are one check unless they disagree.
    pub(super) fn reapply(&mut self, w: &FileWrite) {
        if w.op == WriteOp::External {
            return;
        }
        let Some(call) = &w.call else {
            return;
        };
        let after = w.after.map(|a| a.hash);
        let input = match self.pending.get_mut(call) {
            Some(p) if !p.reapplied.contains(&(w.path.clone(), after)) => {
                p.reapplied.push((w.path.clone(), after));
                p.input.clone()
            }
            // Outside its call (reported), or checked already.
            _ => return,
        };
        let Some(change) = reapply::change_of(&input) else {
            return;
        };
        let before = match &w.before {
            None => None,
            // A withheld file's content before is not kept: only a create re-applies.
            Some(_) if w.withheld => return,
            Some(b) => match self.blobs.get(&b.hash) {
                Ok(bytes) if Hash::of(&bytes) == b.hash => Some(bytes),
                // Missing or damaged: reported by the blob check.
                _ => return,
            },
        };
        // A redacted input holds markers where the workspace holds the secret.
        let redacted = cairn_core::scrub::holds_marker(&input.to_string());
        if redacted && w.withheld {
            // The secrets the markers stand for are in no blob to compare with.
            return;
        }
        let what = match w.op {
            WriteOp::Create => "create",
            WriteOp::Replace => "overwrite",
            WriteOp::Edit => "edit",
            WriteOp::Delete => "delete",
            WriteOp::Append => "append",
            WriteOp::External => return,
        };
        let computed = reapply::apply(&change, &w.path, before.as_deref());
        self.report.writes_reapplied += 1;
        match (computed, &w.after) {
            (Err(_), _) if redacted => {}
            (Err(why), _) => self.problem(
                ProblemKind::FileWrite,
                format!(
                    "{what} of {} by call {call}: the call's input does not apply to the content before ({why}), yet the write is recorded",
                    w.path
                ),
            ),
            (Ok(_), None) => self.problem(
                ProblemKind::FileWrite,
                format!(
                    "{what} of {} by call {call}: the write records no content after, but the call's input gives some",
                    w.path
                ),
            ),
            (Ok(content), Some(a)) => {
                let got = Hash::of(&content);
                if got == a.hash {
                    return;
                }
                if redacted
                    && let Ok(actual) = self.blobs.get(&a.hash)
                    && holes::fits(
                        &holes::markers_as_holes(&String::from_utf8_lossy(&content), false),
                        &String::from_utf8_lossy(&actual),
                    )
                {
                    return;
                }
                self.problem(
                    ProblemKind::FileWrite,
                    format!(
                        "{what} of {} by call {call}: the content before and the call's input give {} ({} bytes), but the write records after {} ({} bytes)",
                        w.path,
                        got.short(16),
                        content.len(),
                        a.hash.short(16),
                        a.len
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{found, pending, rec, run, verifier};
    use super::*;

    #[test]
    fn a_read_outside_its_call_and_a_write_naming_no_call_are_out_of_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        let hash = Hash::of(b"x").to_hex();
        let records = [
            rec(
                1,
                json!({"type": "file_read", "call": "c1", "path": "a", "ranges": [[1, 1]],
                    "total_lines": 1, "hash": hash}),
            ),
            rec(
                2,
                json!({"type": "file_write", "op": "edit", "path": "a", "before": null,
                    "after": null, "status": "ok"}),
            ),
        ];
        run(&mut v, &mut FilesFold, &records);
        assert_eq!(v.report.file_writes, 1);
        assert_eq!(
            found(v),
            [
                (
                    Some(1),
                    ProblemKind::Structure,
                    "file_read of a outside its call c1".to_string()
                ),
                (
                    Some(2),
                    ProblemKind::Structure,
                    "file_write (edit) of a names no call: only a scan's external write does"
                        .to_string()
                ),
                // The read told the fold the file's content.
                (
                    Some(2),
                    ProblemKind::FileWrite,
                    format!(
                        "write to a: before hash none but the fold knew {}",
                        Hash::of(b"x").short(16)
                    )
                ),
            ]
        );
    }

    #[test]
    fn a_write_outside_the_workspace_needs_its_folder_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        pending(
            &mut v,
            1,
            "c1",
            "write",
            json!({"path": "/etc/x", "content": ""}),
        );
        let write = rec(
            2,
            json!({"type": "file_write", "call": "c1", "op": "create", "path": "/etc/x",
                "before": null, "after": null, "status": "failed"}),
        );
        run(&mut v, &mut FilesFold, &[write]);
        assert_eq!(
            found(v),
            [
                (
                    Some(2),
                    ProblemKind::FileWrite,
                    "write to /etc/x: outside the workspace, but write@/etc was not allowed to call c1"
                        .to_string()
                ),
                // Re-applied: the input gives content after.
                (
                    Some(2),
                    ProblemKind::FileWrite,
                    "create of /etc/x by call c1: the write records no content after, but the call's input gives some"
                        .to_string()
                ),
            ]
        );
    }
}
