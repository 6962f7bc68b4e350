//! The checkpoints: a state checkpoint follows the record it is for and holds the
//! fold's state hash; a tree checkpoint holds the tree of the records before it, and
//! its signed note says the same (`verify/signed.rs` holds it against the checkpoint
//! files and the signed end).

use super::*;

/// Checks `checkpoint` and `tree_checkpoint` records.
#[derive(Default)]
pub(super) struct CheckpointsFold;

impl Fold for CheckpointsFold {
    fn apply(&mut self, v: &mut Verifier, rec: &Record) {
        match &rec.event {
            Event::Checkpoint { state_hash, at_seq } => {
                v.report.checkpoints += 1;
                if v.state.last_seq != Some(*at_seq) {
                    v.problem(
                        ProblemKind::Checkpoint,
                        format!(
                            "checkpoint for seq {at_seq} follows seq {}",
                            v.state.last_seq.map_or("none".into(), |s| s.to_string())
                        ),
                    );
                } else if v.state.hash() != *state_hash {
                    v.problem(
                        ProblemKind::Checkpoint,
                        format!(
                            "checkpoint state hash {} differs from the fold's {} at seq {at_seq}",
                            state_hash.short(16),
                            v.state.hash().short(16)
                        ),
                    );
                }
            }
            Event::TreeCheckpoint {
                size,
                root,
                origin,
                note,
            } => v.tree_checkpoint(*size, root, origin, note.as_deref()),
            _ => {}
        }
    }
}

impl Verifier {
    /// A recorded tree head must be the tree of the records before it, and its note
    /// (when signed) must say the same. The signature itself needs the log's key:
    /// `cairn_tlog` checks it where one is given.
    pub(super) fn tree_checkpoint(
        &mut self,
        size: u64,
        root: &str,
        origin: &str,
        note: Option<&str>,
    ) {
        let tree = &self.state.tree;
        let ours = cairn_store::Hash(tree.root()).to_hex();
        if size != tree.size || root != ours {
            self.problem(
                ProblemKind::Checkpoint,
                format!(
                    "tree checkpoint of size {size} with root {root} differs from the tree of the log: size {}, root {ours}",
                    tree.size
                ),
            );
            return;
        }
        let Some(note) = note else { return };
        let read = cairn_tlog::Note::parse(note)
            .map_err(|e| e.to_string())
            .and_then(|n| cairn_tlog::Checkpoint::parse(&n.text).map_err(|e| e.to_string()));
        match read {
            Ok(c) if c.size == size && c.root == tree.root() && c.origin == origin => {}
            Ok(c) => self.problem(
                ProblemKind::Checkpoint,
                format!(
                    "the signed note of the tree checkpoint at size {size} says {:?} size {}, root {}",
                    c.origin,
                    c.size,
                    cairn_store::Hash(c.root).to_hex()
                ),
            ),
            Err(e) => self.problem(
                ProblemKind::Checkpoint,
                format!("the signed note of the tree checkpoint at size {size}: {e}"),
            ),
        }
        self.signed_note(size, note);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{found, rec, run, verifier};
    use super::*;

    #[test]
    fn a_checkpoint_follows_its_record_and_holds_the_folds_hash() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        let message = rec(0, json!({"type": "user_message", "text": "a"}));
        let mut state = State::default();
        state.apply(&message);
        let right = state.hash().to_hex();
        let wrong = Hash::of(b"other").to_hex();
        let records = [
            message,
            rec(
                1,
                json!({"type": "checkpoint", "state_hash": right, "at_seq": 0}),
            ),
            rec(
                2,
                json!({"type": "checkpoint", "state_hash": wrong, "at_seq": 1}),
            ),
            rec(
                3,
                json!({"type": "checkpoint", "state_hash": right, "at_seq": 0}),
            ),
        ];
        run(&mut v, &mut CheckpointsFold, &records);
        assert_eq!(v.report.checkpoints, 3);
        let found = found(v);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].0, Some(2));
        assert!(
            found[0].2.starts_with("checkpoint state hash "),
            "{found:?}"
        );
        assert_eq!(
            found[1],
            (
                Some(3),
                ProblemKind::Checkpoint,
                "checkpoint for seq 0 follows seq 2".to_string()
            )
        );
    }
}
