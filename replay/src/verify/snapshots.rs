//! The snapshots: each one taken at a record the log has is the fold's state there
//! (tagged with that record's hash), and one taken past the log's end means records
//! were cut off it.

use super::*;

/// The snapshots not compared yet, by the seq they were taken at.
#[derive(Default)]
pub(super) struct SnapshotsFold {
    pub(super) pending: Vec<(u64, PathBuf)>,
}

impl Fold for SnapshotsFold {
    /// Compares the snapshot taken at the record, if any, with the fold (which has
    /// applied the record).
    fn apply(&mut self, v: &mut Verifier, rec: &Record) {
        let (seq, hash) = (rec.seq, rec.hash);
        let Some(i) = self.pending.iter().position(|(s, _)| *s == seq) else {
            return;
        };
        let (_, path) = self.pending.remove(i);
        match SnapshotStore::load(&path) {
            Err(e) => v.problem(ProblemKind::Snapshot, format!("{e}")),
            Ok(s) if s.meta.record_hash != hash => v.problem(
                ProblemKind::Snapshot,
                format!(
                    "snapshot {} is tagged with record hash {}, the log's record is {}",
                    path.display(),
                    s.meta.record_hash.short(16),
                    hash.short(16)
                ),
            ),
            Ok(s) if s.meta.format_version == cairn_core::state::STATE_FORMAT_VERSION => {
                match State::from_bytes(&s.body) {
                    Ok(st) if st == v.state => {}
                    Ok(_) => v.problem(
                        ProblemKind::Snapshot,
                        format!(
                            "snapshot {} differs from the fold at seq {seq}",
                            path.display()
                        ),
                    ),
                    Err(e) => v.problem(
                        ProblemKind::Snapshot,
                        format!("snapshot {} does not load: {e}", path.display()),
                    ),
                }
            }
            // A snapshot of another state version is a cache this version ignores.
            Ok(_) => {}
        }
    }
}

impl SnapshotsFold {
    /// A snapshot taken past the last record: the log lost its tail.
    pub(super) fn finish(&mut self, v: &mut Verifier) {
        let last = v.state.last_seq;
        for (seq, path) in std::mem::take(&mut self.pending) {
            if last.is_none_or(|l| seq > l) {
                let first_missing = last.map_or(0, |l| l + 1);
                v.problems.add(Problem {
                    seq: Some(first_missing),
                    line: v.at.1 + 1,
                    offset: v.report.bytes,
                    kind: ProblemKind::Truncated,
                    what: format!(
                        "the log ends at seq {} but snapshot {} was taken at seq {seq}: records from seq {first_missing} on are missing",
                        last.map_or("none".into(), |l| l.to_string()),
                        path.display()
                    ),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{found, rec, run, verifier};
    use super::*;

    #[test]
    fn a_snapshot_past_the_end_is_a_truncated_log_and_a_broken_one_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        let broken = dir.path().join("broken.snap");
        std::fs::write(&broken, b"not a snapshot").unwrap();
        let mut fold = SnapshotsFold {
            pending: vec![(0, broken), (7, PathBuf::from("later.snap"))],
        };
        let records = [rec(0, json!({"type": "user_message", "text": "a"}))];
        run(&mut v, &mut fold, &records);
        fold.finish(&mut v);
        assert!(fold.pending.is_empty());
        let found = found(v);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].0, found[0].1), (Some(0), ProblemKind::Snapshot));
        assert_eq!(
            found[1],
            (
                Some(1),
                ProblemKind::Truncated,
                "the log ends at seq 0 but snapshot later.snap was taken at seq 7: records from seq 1 on are missing"
                    .to_string()
            )
        );
    }
}
