//! Checkpoints held outside a log — by an archive, by a home's checkpoint files, by a
//! witness — and what the log must be to agree with each of them; and how a signed
//! session ends.
//!
//! A checkpoint someone else holds pins the log's first `size` records: the tree of
//! those records must have its root (what a consistency proof from it to the log's tree
//! shows: the log's tree extends the checkpoint's exactly when its first `size` leaves
//! have that root), and a log with fewer records lost some. A home that signs ends each
//! session with a checkpoint covering its end: after the end record only the record of
//! that checkpoint (and the engine's other trailers) may follow. Records past the newest
//! checkpoint after the end were appended after the signed end; a finished session with
//! no checkpoint at all where one is required had its checkpoints removed.
//!
//! This module knows no event kind: the caller says what each record is to the rule
//! ([`Role`]), and feeds the records in order with the root of the tree so far
//! ([`Against::record`]), which it only computes at the sizes a checkpoint needs.

use crate::tree::{self, Hash32};

/// What a record is to the signed-end rule, as the caller (who knows event kinds) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The session ended here (`session_ended`).
    End,
    /// The session went on after an end (`session_resumed`).
    Reopen,
    /// A record the engine itself appends after the end: the end's checkpoint record,
    /// a state checkpoint.
    Trailer,
    /// Anything else.
    Other,
}

/// A checkpoint held outside the log: its size and root, and who held it (for the
/// messages: "the witness https://…", "checkpoint file …").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub size: u64,
    pub root: Hash32,
    pub by: String,
}

/// A log that disagrees with a held checkpoint, or a signed session that does not end
/// as one does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeldProblem {
    #[error(
        "{by} holds a checkpoint of size {size}, but the log has only {log} records: records from seq {log} on were removed (or never copied here)"
    )]
    Shorter { size: u64, log: u64, by: String },
    #[error(
        "{by} holds a checkpoint of size {size} whose root the log's first {size} records do not have: its history was rewritten at or before seq {}",
        size.saturating_sub(1)
    )]
    Contradicts { size: u64, by: String },
    #[error(
        "the session ended at seq {end}, past its newest checkpoint (size {newest}, held by {by}, which covers seqs up to {}): this end was appended after the signed one, or the checkpoint of its end was removed",
        newest.saturating_sub(1)
    )]
    EndUncovered { end: u64, newest: u64, by: String },
    #[error(
        "record {seq} follows the session's signed end (it ended at seq {end}, and its newest checkpoint, of size {newest}, covers the end): it was appended after the signed end"
    )]
    AfterEnd { seq: u64, end: u64, newest: u64 },
    #[error(
        "the session ended at seq {end} and has no checkpoint: a home with a key signs every session's end, so its checkpoints were removed (or it was recorded without that key)"
    )]
    Unsigned { end: u64 },
}

impl HeldProblem {
    /// The seq the problem is about: the first missing record, the last record a
    /// contradicted checkpoint covers, the end, the record after it.
    pub fn seq(&self) -> Option<u64> {
        match self {
            HeldProblem::Shorter { log, .. } => Some(*log),
            HeldProblem::Contradicts { size, .. } => size.checked_sub(1),
            HeldProblem::EndUncovered { end, .. } | HeldProblem::Unsigned { end } => Some(*end),
            HeldProblem::AfterEnd { seq, .. } => Some(*seq),
        }
    }
}

/// A log checked, record by record, against the checkpoints held outside it and the
/// signed-end rule.
#[derive(Debug, Clone)]
pub struct Against {
    /// Held checkpoints not reached yet, smallest size last (popped as reached).
    pending: Vec<Held>,
    /// The newest checkpoint known (held here, or checked by the caller): size, holder.
    newest: Option<(u64, String)>,
    /// The last end not followed by a reopen.
    end: Option<u64>,
    /// The last record that is not a trailer.
    last_other: Option<u64>,
    /// The tree size after the last record fed.
    size: u64,
}

impl Against {
    /// Checks against `held`. A checkpoint of size 0 is checked at once against the
    /// empty tree's root; [`Against::record`] reports the others as the tree reaches them.
    pub fn new(held: Vec<Held>) -> (Against, Vec<HeldProblem>) {
        let mut a = Against {
            pending: Vec::with_capacity(held.len()),
            newest: None,
            end: None,
            last_other: None,
            size: 0,
        };
        let mut problems = Vec::new();
        for h in held {
            a.also_newest(h.size, &h.by);
            if h.size == 0 {
                if h.root != tree::empty_root() {
                    problems.push(HeldProblem::Contradicts { size: 0, by: h.by });
                }
            } else {
                a.pending.push(h);
            }
        }
        a.pending.sort_by_key(|h| std::cmp::Reverse(h.size));
        (a, problems)
    }

    /// Counts a checkpoint of `size` that the caller checks itself (the log's own
    /// checkpoint records, an archive's checkpoint rows) toward the newest one.
    pub fn also_newest(&mut self, size: u64, by: &str) {
        if self.newest.as_ref().is_none_or(|(n, _)| size > *n) {
            self.newest = Some((size, by.to_string()));
        }
    }

    /// The next record, `seq`, in log order: `size` is the tree's size with it (one more
    /// than before), `root` its root then, asked only when a held checkpoint is of that
    /// size. Returns what disagrees at this size.
    pub fn record(
        &mut self,
        seq: u64,
        role: Role,
        size: u64,
        root: impl FnOnce() -> Hash32,
    ) -> Vec<HeldProblem> {
        debug_assert!(size > self.size, "the tree grows with every record");
        self.size = size;
        match role {
            Role::End => {
                self.end = Some(seq);
                self.last_other = Some(seq);
            }
            Role::Reopen => {
                self.end = None;
                self.last_other = Some(seq);
            }
            Role::Trailer => {}
            Role::Other => self.last_other = Some(seq),
        }
        let mut problems = Vec::new();
        if self.pending.last().is_some_and(|h| h.size <= size) {
            let ours = root();
            while let Some(h) = self.pending.pop_if(|h| h.size <= size) {
                // Sizes grow by one a record, so every pending size is met exactly.
                debug_assert_eq!(h.size, size);
                if h.size != size || h.root != ours {
                    problems.push(HeldProblem::Contradicts {
                        size: h.size,
                        by: h.by,
                    });
                }
            }
        }
        problems
    }

    /// The session's end, when the records fed so far end it (no reopen after).
    pub fn end(&self) -> Option<u64> {
        self.end
    }

    /// The newest checkpoint known: its size and holder.
    pub fn newest(&self) -> Option<(u64, &str)> {
        self.newest.as_ref().map(|(s, by)| (*s, by.as_str()))
    }

    /// After the last record: held checkpoints past the log, and, for a session that
    /// ended, its end against the newest checkpoint. With `required`, a finished
    /// session must have a checkpoint.
    pub fn finish(self, required: bool) -> Vec<HeldProblem> {
        let log = self.size;
        let mut problems: Vec<HeldProblem> = self
            .pending
            .into_iter()
            .rev()
            .map(|h| HeldProblem::Shorter {
                size: h.size,
                log,
                by: h.by,
            })
            .collect();
        let Some(end) = self.end else {
            return problems;
        };
        match self.newest {
            None if required => problems.push(HeldProblem::Unsigned { end }),
            None => {}
            Some((newest, by)) if end >= newest => {
                problems.push(HeldProblem::EndUncovered { end, newest, by });
            }
            Some((newest, _)) => {
                if let Some(seq) = self.last_other.filter(|o| *o >= newest) {
                    problems.push(HeldProblem::AfterEnd { seq, end, newest });
                }
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{CompactRange, record_leaf_hash};

    /// Feeds records of the given roles (seq = index, record hash = seq) and returns
    /// every problem, in the order found.
    fn run(held: Vec<Held>, also: &[u64], roles: &[Role], required: bool) -> Vec<HeldProblem> {
        let (mut a, mut problems) = Against::new(held);
        for s in also {
            a.also_newest(*s, "the log");
        }
        let mut range = CompactRange::new();
        for (seq, role) in roles.iter().enumerate() {
            range.push(record_leaf_hash(seq as u64, &[seq as u8; 32]));
            problems.extend(a.record(seq as u64, *role, range.size(), || range.root()));
        }
        problems.extend(a.finish(required));
        problems
    }

    fn root_of(n: u64) -> Hash32 {
        let leaves: Vec<Hash32> = (0..n)
            .map(|s| record_leaf_hash(s, &[s as u8; 32]))
            .collect();
        tree::root_of(&leaves)
    }

    fn held(size: u64, by: &str) -> Held {
        Held {
            size,
            root: root_of(size),
            by: by.into(),
        }
    }

    use Role::{End, Other, Reopen, Trailer};

    #[test]
    fn a_log_agrees_with_held_checkpoints_it_extends_and_not_with_others() {
        let roles = [Other, Other, Other, Other, Other];
        // Every size up to the log's, the empty tree included: clean.
        let all = (0..=5).map(|s| held(s, "w")).collect();
        assert_eq!(run(all, &[], &roles, false), vec![]);
        // A root of another history at size 3.
        let forged = Held {
            root: root_of(2),
            ..held(3, "the witness w")
        };
        let found = run(vec![forged], &[], &roles, false);
        assert_eq!(
            found,
            vec![HeldProblem::Contradicts {
                size: 3,
                by: "the witness w".into()
            }]
        );
        assert_eq!(found[0].seq(), Some(2));
        // Past the log: at its size clean, one past it shorter.
        assert_eq!(run(vec![held(5, "h")], &[], &roles, false), vec![]);
        assert_eq!(
            run(vec![held(6, "h")], &[], &roles, false),
            vec![HeldProblem::Shorter {
                size: 6,
                log: 5,
                by: "h".into()
            }]
        );
    }

    #[test]
    fn a_signed_end_is_covered_and_only_trailers_follow_it() {
        // ended at 3, its checkpoint (size 4) at 4, a state checkpoint at 5.
        let signed = [Other, Other, Other, End, Trailer, Trailer];
        assert_eq!(run(vec![], &[4], &signed, true), vec![]);
        assert_eq!(run(vec![held(4, "h")], &[], &signed, true), vec![]);
        // A resume, a call and a second end appended without a key: the newest
        // checkpoint no longer covers the end.
        let appended = [Other, Other, Other, End, Trailer, Reopen, Other, End];
        assert_eq!(
            run(vec![], &[4], &appended, false),
            vec![HeldProblem::EndUncovered {
                end: 7,
                newest: 4,
                by: "the log".into()
            }]
        );
        // A record after the signed end with no resume.
        let after = [Other, Other, Other, End, Trailer, Other];
        assert_eq!(
            run(vec![], &[4], &after, false),
            vec![HeldProblem::AfterEnd {
                seq: 5,
                end: 3,
                newest: 4
            }]
        );
        // No checkpoint at all: a problem only where one is required.
        let ended = [Other, End];
        assert_eq!(run(vec![], &[], &ended, false), vec![]);
        assert_eq!(
            run(vec![], &[], &ended, true),
            vec![HeldProblem::Unsigned { end: 1 }]
        );
        // Resumed and not ended again (running, or interrupted): nothing to cover.
        let reopened = [Other, End, Trailer, Reopen, Other];
        assert_eq!(run(vec![], &[2], &reopened, true), vec![]);
    }
}
