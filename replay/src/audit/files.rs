//! The files: every change a session made (one entry per change, with its diff) and
//! every read.

use cairn_core::Record;
use cairn_core::event::{Event, FileWrite, WriteOp, WriteStatus};
use cairn_store::{BlobRef, Hash};
use serde::Serialize;

use super::Fold;

/// Diff lines kept per file write (a note says how many more there were).
pub const DIFF_LINES_MAX: usize = 400;

/// One change to a file.
#[derive(Debug, Clone, Serialize)]
pub struct WriteEntry {
    pub seq: u64,
    pub call: Option<String>,
    pub op: WriteOp,
    pub path: String,
    pub status: WriteStatus,
    pub before: Option<String>,
    pub after: Option<String>,
    pub before_bytes: Option<u64>,
    pub after_bytes: Option<u64>,
    /// The unified diff with line numbers, or why there is none (binary, missing blob,
    /// withheld).
    pub diff: String,
    /// A credential file: hashes and lengths only, its content not kept.
    pub withheld: bool,
}

/// The lines of a file a call read.
#[derive(Debug, Clone, Serialize)]
pub struct ReadEntry {
    pub seq: u64,
    pub call: String,
    pub path: String,
    pub ranges: Vec<(u32, u32)>,
    pub total_lines: u32,
}

/// Why a write shows no diff: what is shown in its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum NoDiff {
    #[error("(blob {} is missing)", .0.short(12))]
    Missing(Hash),
    #[error("(binary, {0} bytes)")]
    Binary(u64),
    #[error("(withheld: a credential file, its content is not kept)")]
    Withheld,
}

/// A change as folded, with the blobs its diff is made from when the fold finishes.
#[derive(Debug)]
struct Change {
    entry: WriteEntry,
    before: Option<BlobRef>,
    after: Option<BlobRef>,
}

/// The writes, from `file_write` (the end of a write replaces its intent), and the
/// reads, from `file_read`.
#[derive(Debug, Default)]
pub(super) struct FilesFold {
    changes: Vec<Change>,
    reads: Vec<ReadEntry>,
}

impl FilesFold {
    /// The writes, each with its diff made from the blobs `blob` gives (none for a
    /// blob missing or damaged), and the reads.
    pub(super) fn finish(
        self,
        blob: impl Fn(&Hash) -> Option<Vec<u8>>,
    ) -> (Vec<WriteEntry>, Vec<ReadEntry>) {
        let writes = self
            .changes
            .into_iter()
            .map(|c| {
                let mut e = c.entry;
                e.diff = if e.withheld {
                    NoDiff::Withheld.to_string()
                } else {
                    write_diff(&blob, &e.path, c.before.as_ref(), c.after.as_ref())
                };
                e
            })
            .collect();
        (writes, self.reads)
    }

    fn write(&mut self, seq: u64, w: &FileWrite) {
        // The end of a write replaces its intent: one entry per change.
        if w.status != WriteStatus::Intent
            && let Some(last) = self.changes.iter_mut().rev().find(|c| {
                c.entry.status == WriteStatus::Intent
                    && c.entry.path == w.path
                    && c.entry.call == w.call
            })
        {
            last.entry.seq = seq;
            last.entry.status = w.status;
            return;
        }
        self.changes.push(Change {
            entry: WriteEntry {
                seq,
                call: w.call.clone(),
                op: w.op,
                path: w.path.clone(),
                status: w.status,
                before: w.before.as_ref().map(|b| b.hash.to_hex()),
                after: w.after.as_ref().map(|b| b.hash.to_hex()),
                before_bytes: w.before.as_ref().map(|b| b.len),
                after_bytes: w.after.as_ref().map(|b| b.len),
                diff: String::new(),
                withheld: w.withheld,
            },
            before: w.before,
            after: w.after,
        });
    }
}

impl Fold for FilesFold {
    fn apply(&mut self, r: &Record) {
        match &r.event {
            Event::FileWrite(w) => self.write(r.seq, w),
            Event::FileRead(fr) => self.reads.push(ReadEntry {
                seq: r.seq,
                call: fr.call.clone(),
                path: fr.path.clone(),
                ranges: fr.ranges.clone(),
                total_lines: fr.total_lines,
            }),
            _ => {}
        }
    }
}

/// The diff of one write, from its blobs.
fn write_diff(
    blob: &impl Fn(&Hash) -> Option<Vec<u8>>,
    path: &str,
    before: Option<&BlobRef>,
    after: Option<&BlobRef>,
) -> String {
    let text = |b: Option<&BlobRef>| -> Result<String, NoDiff> {
        let Some(b) = b else {
            return Ok(String::new());
        };
        let bytes = blob(&b.hash).ok_or(NoDiff::Missing(b.hash))?;
        String::from_utf8(bytes).map_err(|_| NoDiff::Binary(b.len))
    };
    match (text(before), text(after)) {
        (Ok(a), Ok(b)) => cairn_core::diff::unified(
            path,
            before.is_some().then_some(a.as_str()),
            &b,
            DIFF_LINES_MAX,
        ),
        (Err(e), _) | (_, Err(e)) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use super::super::testing::{rec, run};
    use super::*;

    /// Blobs of the given contents, and a reference to each.
    fn blobs(contents: &[&[u8]]) -> (HashMap<Hash, Vec<u8>>, Vec<BlobRef>) {
        let refs: Vec<BlobRef> = contents
            .iter()
            .map(|c| BlobRef {
                hash: Hash::of(c),
                len: c.len() as u64,
            })
            .collect();
        let store = contents
            .iter()
            .zip(&refs)
            .map(|(c, r)| (r.hash, c.to_vec()))
            .collect();
        (store, refs)
    }

    fn write(
        seq: u64,
        call: &str,
        path: &str,
        status: &str,
        before: Option<BlobRef>,
        after: Option<BlobRef>,
    ) -> Record {
        let op = if before.is_some() {
            "replace"
        } else {
            "create"
        };
        rec(
            seq,
            seq,
            json!({"type": "file_write", "call": call, "op": op, "path": path,
                "before": before, "after": after, "status": status}),
        )
    }

    #[test]
    fn an_intent_and_its_end_are_one_change_with_the_diff_of_its_blobs() {
        let (store, b) = blobs(&[b"one\ntwo\n", b"one\n2\n", b"new\n"]);
        let records = [
            write(1, "c1", "a.txt", "intent", Some(b[0]), Some(b[1])),
            write(2, "c2", "b.txt", "intent", None, Some(b[2])),
            write(3, "c1", "a.txt", "ok", Some(b[0]), Some(b[1])),
            write(4, "c2", "b.txt", "failed", None, Some(b[2])),
            // A write recorded whole, without an intent.
            write(5, "c3", "a.txt", "ok", Some(b[1]), Some(b[0])),
            // Another call's write of the same file does not end an intent.
            write(6, "c4", "c.txt", "intent", None, Some(b[2])),
            write(7, "c5", "c.txt", "ok", None, Some(b[2])),
        ];
        let (writes, reads) = run(FilesFold::default(), &records).finish(|h| store.get(h).cloned());
        let rows: Vec<_> = writes
            .iter()
            .map(|w| {
                (
                    w.seq,
                    w.path.as_str(),
                    w.status,
                    w.before_bytes,
                    w.after_bytes,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (3, "a.txt", WriteStatus::Ok, Some(8), Some(6)),
                (4, "b.txt", WriteStatus::Failed, None, Some(4)),
                (5, "a.txt", WriteStatus::Ok, Some(6), Some(8)),
                (6, "c.txt", WriteStatus::Intent, None, Some(4)),
                (7, "c.txt", WriteStatus::Ok, None, Some(4)),
            ]
        );
        assert_eq!(writes[0].before, Some(b[0].hash.to_hex()));
        assert_eq!(
            writes[0].diff,
            cairn_core::diff::unified("a.txt", Some("one\ntwo\n"), "one\n2\n", DIFF_LINES_MAX)
        );
        assert!(writes[0].diff.starts_with("--- a/"), "{}", writes[0].diff);
        assert!(
            writes[1].diff.starts_with("--- /dev/null\n"),
            "{}",
            writes[1].diff
        );
        assert!(reads.is_empty());
    }

    #[test]
    fn a_write_without_a_diff_says_why() {
        let (store, b) = blobs(&[b"text\n", b"\xff\xfe binary"]);
        let gone = BlobRef {
            hash: Hash::of(b"not stored"),
            len: 10,
        };
        let mut withheld = write(3, "c", ".env", "ok", Some(b[0]), Some(b[0]));
        if let Event::FileWrite(w) = &mut withheld.event {
            w.withheld = true;
        }
        let records = [
            write(1, "c", "gone.txt", "ok", Some(gone), Some(b[0])),
            write(2, "c", "bin", "ok", Some(b[0]), Some(b[1])),
            withheld,
        ];
        let (writes, _) = run(FilesFold::default(), &records).finish(|h| store.get(h).cloned());
        let diffs: Vec<_> = writes.iter().map(|w| w.diff.as_str()).collect();
        let missing = format!("(blob {} is missing)", gone.hash.short(12));
        assert_eq!(
            diffs,
            [
                missing.as_str(),
                "(binary, 9 bytes)",
                "(withheld: a credential file, its content is not kept)",
            ]
        );
        assert!(writes[2].withheld);
    }

    #[test]
    fn reads_are_kept_in_order() {
        let hash = Hash::of(b"x");
        let records = [
            rec(
                1,
                1,
                json!({"type": "file_read", "call": "r1", "path": "a.txt",
                "ranges": [[1, 20]], "total_lines": 90, "hash": hash}),
            ),
            rec(
                2,
                2,
                json!({"type": "file_read", "call": "r2", "path": "b.txt",
                "ranges": [[3, 4], [8, 9]], "total_lines": 9, "hash": hash}),
            ),
        ];
        let (writes, reads) = run(FilesFold::default(), &records).finish(|_| None);
        let rows: Vec<_> = reads
            .iter()
            .map(|r| {
                (
                    r.seq,
                    r.call.as_str(),
                    r.path.as_str(),
                    r.ranges.clone(),
                    r.total_lines,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (1, "r1", "a.txt", vec![(1, 20)], 90),
                (2, "r2", "b.txt", vec![(3, 4), (8, 9)], 9),
            ]
        );
        assert!(writes.is_empty());
    }
}
