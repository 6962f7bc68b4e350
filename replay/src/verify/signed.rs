//! The checkpoint checks beyond each `tree_checkpoint` record (which the verifier
//! compares with the fold's tree as it goes): the checkpoint files beside the log and a
//! signed session's end, through `cairn_tlog::held`.
//!
//! Each checkpoint file is a signed note of this log's origin whose signature holds
//! with the keys given (when some are), and it pins the log's first `size` records: the
//! tree of those records must have its root, and a log with fewer records lost the rest.
//! A session that was signed ends with a checkpoint covering its end: the newest one
//! (of the files and of the records' signed notes) must be past `session_ended`, and
//! nothing but trailers (the checkpoint's record, a state checkpoint) may follow it.
//! With keys given, a finished session without any checkpoint had them removed.
//!
//! What this cannot see: a forger who also removes the checkpoint files and the records
//! holding notes, and then cuts the session before its end or signs nothing, leaves a
//! log that looks unsigned or interrupted. Someone else's copy of a checkpoint (a
//! witness, the archive, `verify --since`) or a key given catches that.

use std::path::Path;

use cairn_store::Record;
use cairn_tlog::{Against, Checkpoint, Held, HeldProblem, Note, Role, Verifier as Key};

use super::{Problem, ProblemKind, Verifier};
use crate::error::{ReplayError, Result};

/// What a record is to the signed-end rule (`cairn_tlog::held`), by its event kind:
/// the archive, which knows no event kind, is given this too.
pub fn role_of(kind: &str) -> Role {
    match kind {
        "session_ended" => Role::End,
        "session_resumed" => Role::Reopen,
        "tree_checkpoint" | "checkpoint" => Role::Trailer,
        _ => Role::Other,
    }
}

/// The state of the checks while the log is read.
pub(super) struct Signed {
    against: Against,
    keys: Vec<Key>,
    /// Where the last end and the last record that is not a trailer are: (seq, line,
    /// byte offset), for the problems found at the end.
    end_at: Option<(u64, u64, u64)>,
    other_at: Option<(u64, u64, u64)>,
}

impl Signed {
    /// Nothing held, no key: what a verifier starts with.
    pub(super) fn none() -> Signed {
        Signed {
            against: Against::new(Vec::new()).0,
            keys: Vec::new(),
            end_at: None,
            other_at: None,
        }
    }
}

/// The event kind at the start of a record's event (cairn writes `type` first), else
/// from a parse of it.
fn kind_of(r: &Record) -> Option<std::borrow::Cow<'_, str>> {
    let event = r.event.get();
    if let Some(rest) = event.strip_prefix("{\"type\":\"")
        && let Some(end) = rest.find('"')
        && !rest[..end].contains('\\')
    {
        return Some(std::borrow::Cow::Borrowed(&rest[..end]));
    }
    r.event_type().map(std::borrow::Cow::Owned)
}

impl Verifier {
    fn checkpoint_problem(&mut self, kind: ProblemKind, at: (u64, u64, u64), what: String) {
        let (seq, line, offset) = at;
        self.problems.add(Problem {
            seq: Some(seq),
            line,
            offset,
            kind,
            what,
        });
    }

    /// Reads the checkpoint files beside the log in `dir`: each one that reads is held
    /// against the log; one that does not, or is of another log, or (with `keys`) is not
    /// signed by one of them, is a problem.
    pub(super) fn signed_start(&mut self, dir: &Path, keys: &[Key]) -> Result<()> {
        let files = cairn_tlog::log::checkpoint_files(dir).map_err(|e| ReplayError::Session {
            path: dir.to_path_buf(),
            what: e.to_string(),
        })?;
        let origin = cairn_tlog::log::origin_of(dir);
        let mut held = Vec::new();
        for (size, path) in files {
            let text = std::fs::read_to_string(&path).map_err(crate::error::io_at(&path))?;
            let by = format!("checkpoint file {}", path.display());
            let read = Note::parse(&text).and_then(|n| Ok((Checkpoint::parse(&n.text)?, n)));
            let what = match read {
                Err(e) => Some(format!("{by}: {e}")),
                Ok((cp, _)) if cp.size != size => {
                    Some(format!("{by}: its text says size {}", cp.size))
                }
                Ok((cp, _)) if cp.origin != origin => Some(format!(
                    "{by}: it is of {:?}, not of this log ({origin:?})",
                    cp.origin
                )),
                Ok((cp, note)) => {
                    let signed = match keys {
                        [] => Ok(()),
                        _ => note.verify(keys).map(|_| ()),
                    };
                    held.push(Held {
                        size,
                        root: cp.root,
                        by: by.clone(),
                    });
                    signed
                        .err()
                        .map(|e| format!("{by}: not signed by the key given: {e}"))
                }
            };
            if let Some(what) = what {
                self.problems.add(Problem {
                    seq: None,
                    line: 0,
                    offset: 0,
                    kind: ProblemKind::Checkpoint,
                    what,
                });
            }
        }
        let (against, problems) = Against::new(held);
        self.signed = Signed {
            against,
            keys: keys.to_vec(),
            end_at: None,
            other_at: None,
        };
        for p in problems {
            self.held_problem(p, (0, 0, 0));
        }
        Ok(())
    }

    /// A `tree_checkpoint` record's signed note (already compared with the tree): it
    /// counts toward the newest checkpoint, and with keys its signature must hold.
    pub(super) fn signed_note(&mut self, size: u64, note: &str) {
        let at = self.at;
        self.signed
            .against
            .also_newest(size, &format!("the tree_checkpoint record at seq {}", at.0));
        if self.signed.keys.is_empty() {
            return;
        }
        if let Err(e) = Note::parse(note).and_then(|n| n.verify(&self.signed.keys)) {
            self.checkpoint_problem(
                ProblemKind::Checkpoint,
                at,
                format!("the signed note of the tree checkpoint at size {size} is not signed by the key given: {e}"),
            );
        }
    }

    /// After each intact record is folded: its role, and the held checkpoints of the
    /// tree's size now.
    pub(super) fn signed_record(&mut self, r: &Record) {
        let role = kind_of(r).map_or(Role::Other, |k| role_of(&k));
        let at = (r.seq, r.line, r.offset);
        match role {
            Role::End => {
                self.signed.end_at = Some(at);
                self.signed.other_at = Some(at);
            }
            Role::Reopen | Role::Other => self.signed.other_at = Some(at),
            Role::Trailer => {}
        }
        let tree = &self.state.tree;
        let problems = self
            .signed
            .against
            .record(r.seq, role, tree.size, || tree.root());
        for p in problems {
            self.held_problem(p, at);
        }
    }

    /// After the last record: held checkpoints past the log, and the session's end.
    pub(super) fn signed_finish(&mut self) {
        let signed = std::mem::replace(&mut self.signed, Signed::none());
        let required = !signed.keys.is_empty();
        let missing_at = (self.state.tree.size, self.at.1 + 1, self.report.bytes);
        for p in signed.against.finish(required) {
            let at = match &p {
                HeldProblem::Shorter { .. } => missing_at,
                HeldProblem::AfterEnd { .. } => signed.other_at.unwrap_or(missing_at),
                _ => signed.end_at.unwrap_or(missing_at),
            };
            self.held_problem(p, at);
        }
    }

    fn held_problem(&mut self, p: HeldProblem, at: (u64, u64, u64)) {
        let kind = match p {
            HeldProblem::Shorter { .. } => ProblemKind::Truncated,
            _ => ProblemKind::Checkpoint,
        };
        let seq = p.seq().unwrap_or(at.0);
        self.checkpoint_problem(kind, (seq, at.1, at.2), p.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_roles_name_kinds_the_engine_writes() {
        for kind in [
            "session_ended",
            "session_resumed",
            "tree_checkpoint",
            "checkpoint",
        ] {
            assert!(
                cairn_core::event::Event::KINDS.contains(&kind),
                "{kind} is not an event kind"
            );
            assert_ne!(role_of(kind), Role::Other, "{kind}");
        }
        assert_eq!(role_of("tool_started"), Role::Other);
    }
}
