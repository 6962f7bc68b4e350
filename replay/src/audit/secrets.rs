//! The secrets: those redacted from what the calls returned, and those found in the
//! workspace content the session captured as blobs (its manifest's files, and every
//! write's before and after), scanned with the redaction patterns.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;

use cairn_core::Record;
use cairn_core::event::Event;
use cairn_core::redact::{Counts, Redactor};
use cairn_store::{BlobStore, Hash};
use cairn_tools::manifest::ManifestEntry;
use serde::Serialize;

use super::Fold;
use crate::session::Session;

/// A workspace blob larger than this is not scanned for secrets (the audit counts it
/// as skipped): 64 MiB.
pub const AUDIT_SCAN_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// How much of a blob the secret scan reads at a time.
pub const SCAN_CHUNK_BYTES: usize = 1024 * 1024;

/// How much of the text before a chunk the secret scan looks at again with it, so that
/// a secret cut by a chunk's end is found whole: longer than any secret the patterns
/// match.
pub const SCAN_OVERLAP_BYTES: usize = 64 * 1024;

/// What the secret patterns find in the workspace content a session captured: the
/// blobs of its manifest and of its writes' before and after, each scanned once.
/// Credential files are withheld (no blob): they are listed, not scanned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WorkspaceSecrets {
    /// Secrets found, over every distinct blob.
    pub found: u64,
    /// Secrets found, per kind (the redaction patterns' names).
    pub kinds: BTreeMap<String, u64>,
    /// The files holding them: one entry per path and content.
    pub files: Vec<SecretFile>,
    /// Distinct blobs scanned, and their bytes.
    pub blobs_scanned: u64,
    pub bytes_scanned: u64,
    /// Blobs larger than `scan_bytes_max`, not scanned.
    pub blobs_skipped: u64,
    pub scan_bytes_max: u64,
    /// Blobs missing or unreadable, not scanned (verify reports them).
    pub blobs_missing: u64,
    /// Paths of the files recorded withheld (credential files), in the order first
    /// seen: their content is in no blob.
    pub withheld: Vec<String>,
}

/// A captured file that holds secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretFile {
    pub path: String,
    /// The BLAKE3 of the content they were found in.
    pub hash: String,
    /// Secrets found, per kind.
    pub kinds: BTreeMap<String, u64>,
}

/// The secrets redacted, per kind, from every `tool_finished` (of a call started or
/// not).
#[derive(Debug, Default)]
pub(super) struct RedactionsFold(BTreeMap<String, u64>);

impl RedactionsFold {
    pub(super) fn finish(self) -> BTreeMap<String, u64> {
        self.0
    }
}

impl Fold for RedactionsFold {
    fn apply(&mut self, r: &Record) {
        if let Event::ToolFinished(f) = &r.event {
            for (k, n) in &f.redactions {
                *self.0.entry(k.clone()).or_default() += u64::from(*n);
            }
        }
    }
}

/// The workspace content a session captured: each distinct blob in the order first
/// seen (the manifest's, then each `file_write`'s before and after) with the paths
/// that held it, and the withheld files. Finishing scans each blob once.
#[derive(Debug, Default)]
pub(super) struct CapturedFold {
    order: Vec<Hash>,
    paths: HashMap<Hash, Vec<String>>,
    withheld: Vec<String>,
    seen_withheld: BTreeSet<String>,
    /// The manifest could not be read: reported by verify, nothing of it scanned.
    manifest_missing: bool,
}

impl CapturedFold {
    /// Starts with the files of the session's manifest, or none when it could not be
    /// read (`None`).
    pub(super) fn new(manifest: Option<&[ManifestEntry]>) -> CapturedFold {
        let mut fold = CapturedFold::default();
        match manifest {
            Some(entries) => {
                for e in entries {
                    fold.note(&e.path, e.hash, e.withheld);
                }
            }
            None => fold.manifest_missing = true,
        }
        fold
    }

    fn note(&mut self, path: &str, hash: Option<Hash>, withheld: bool) {
        if withheld {
            if self.seen_withheld.insert(path.to_string()) {
                self.withheld.push(path.to_string());
            }
            return;
        }
        let Some(hash) = hash else { return };
        let at = self.paths.entry(hash).or_insert_with(|| {
            self.order.push(hash);
            Vec::new()
        });
        if !at.iter().any(|p| p == path) {
            at.push(path.to_string());
        }
    }

    /// Scans each blob once from `blobs`, skipping those over `scan_bytes_max` bytes.
    pub(super) fn finish(mut self, blobs: &BlobStore, scan_bytes_max: u64) -> WorkspaceSecrets {
        let mut out = WorkspaceSecrets {
            scan_bytes_max,
            blobs_missing: u64::from(self.manifest_missing),
            withheld: self.withheld,
            ..WorkspaceSecrets::default()
        };
        for hash in self.order {
            let (size, counts) = match scan_blob(blobs, &hash, scan_bytes_max) {
                Scan::Skipped => {
                    out.blobs_skipped += 1;
                    continue;
                }
                Scan::Missing => {
                    out.blobs_missing += 1;
                    continue;
                }
                Scan::Scanned(size, counts) => (size, counts),
            };
            out.blobs_scanned += 1;
            out.bytes_scanned += size;
            if counts.is_empty() {
                continue;
            }
            let kinds: BTreeMap<String, u64> =
                counts.into_iter().map(|(k, n)| (k, u64::from(n))).collect();
            for (k, n) in &kinds {
                out.found += n;
                *out.kinds.entry(k.clone()).or_default() += n;
            }
            for path in self.paths.remove(&hash).unwrap_or_default() {
                out.files.push(SecretFile {
                    path,
                    hash: hash.to_hex(),
                    kinds: kinds.clone(),
                });
            }
        }
        out
    }
}

impl Fold for CapturedFold {
    fn apply(&mut self, r: &Record) {
        if let Event::FileWrite(w) = &r.event {
            for b in [&w.before, &w.after] {
                self.note(&w.path, b.map(|b| b.hash), w.withheld);
            }
        }
    }
}

/// What scanning one blob gave.
enum Scan {
    /// Larger than the limit.
    Skipped,
    /// Missing or unreadable.
    Missing,
    /// Its size, and the secrets in it.
    Scanned(u64, Counts),
}

fn scan_blob(blobs: &BlobStore, hash: &Hash, scan_bytes_max: u64) -> Scan {
    let size = match std::fs::metadata(blobs.path(hash)) {
        Err(_) => return Scan::Missing,
        Ok(m) if m.len() > scan_bytes_max => return Scan::Skipped,
        Ok(m) => m.len(),
    };
    blobs
        .open_blob(hash)
        .ok()
        // A small blob is read whole, without a buffer of a full chunk.
        .and_then(|f| {
            let chunk = usize::try_from(size.saturating_add(1))
                .map_or(SCAN_CHUNK_BYTES, |s| s.min(SCAN_CHUNK_BYTES));
            count_secrets(f, chunk, SCAN_OVERLAP_BYTES).ok()
        })
        .map_or(Scan::Missing, |c| Scan::Scanned(size, c))
}

/// Scans the workspace blobs `session` references (its manifest's files, then every
/// write's before and after, each distinct blob once) with the redaction patterns
/// (no environment values), skipping blobs over `scan_bytes_max` bytes.
pub fn workspace_secrets(session: &Session, scan_bytes_max: u64) -> WorkspaceSecrets {
    let mut captured = CapturedFold::new(session.manifest().ok().as_deref());
    for r in &session.records {
        captured.apply(r);
    }
    captured.finish(&session.blobs, scan_bytes_max)
}

/// Counts the secrets in what `reader` yields, streaming: about `chunk_bytes` at a
/// time, each chunk scanned (as bytes, as the redactor scans command output) together with the last `overlap_bytes`
/// before it. A secret is counted in the first window where it is whole: the window's
/// counts less those of its overlap alone. Chunks end at a line's end, so that no
/// secret is cut there and seen, cut, as a secret of another kind; only a line longer
/// than `overlap_bytes` is cut where the chunk ends. Exact while no secret is longer
/// than the overlap and no line is cut.
pub fn count_secrets(
    mut reader: impl Read,
    chunk_bytes: usize,
    overlap_bytes: usize,
) -> std::io::Result<Counts> {
    assert!(chunk_bytes > 0, "a scan reads at least one byte at a time");
    let redactor = Redactor::default();
    let mut total = Counts::new();
    let mut window: Vec<u8> = Vec::new();
    // Read and not yet scanned: the end of a line.
    let mut carry: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; chunk_bytes];
    loop {
        let n = read_full(&mut reader, &mut buf)?;
        let end = n < chunk_bytes;
        carry.extend_from_slice(&buf[..n]);
        let cut = match carry.iter().rposition(|&b| b == b'\n') {
            _ if end => carry.len(),
            Some(i) => i + 1,
            None if carry.len() < overlap_bytes => continue,
            None => carry.len(),
        };
        if cut > 0 {
            let overlap = window.len();
            window.extend(carry.drain(..cut));
            let mut all = Counts::new();
            redactor.redact_bytes(&window, &mut all);
            let mut before = Counts::new();
            if overlap > 0 && !all.is_empty() {
                redactor.redact_bytes(&window[..overlap], &mut before);
            }
            for (kind, n) in all {
                let seen = before.get(&kind).copied().unwrap_or(0);
                if n > seen {
                    *total.entry(kind).or_default() += n - seen;
                }
            }
            let keep = window.len().min(overlap_bytes);
            window.drain(..window.len() - keep);
        }
        if end {
            break;
        }
    }
    Ok(total)
}

/// Reads until `buf` is full or the end; the bytes read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{finished, rec, run};
    use super::*;

    /// Text with secrets of several kinds (made here, none written out in the source),
    /// and what one pass over all of it counts.
    fn secrets_text() -> (String, Counts) {
        let gh = format!("ghp_{}", "Ab1".repeat(12));
        let aws = format!("AKIA{}", "Z7".repeat(8));
        let key = format!(
            "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
            "QUJD".repeat(30)
        );
        // Non-ASCII text around them (a letter, a non-breaking space, a dash), which
        // the scan reads as ASCII of the same class.
        let text = format!(
            "intro line, naïve café\ntoken\u{a0}= {gh}\n{}\nkey_id {aws} — and {gh}\n{key}\nend {aws}é\n",
            "filler ".repeat(9)
        );
        // The second AWS key runs into a letter that is not ASCII: the patterns' word
        // boundaries are ASCII ones, so it is a key.
        let expected: Counts = [
            ("aws_access_key".to_string(), 2),
            ("github_token".to_string(), 2),
            ("private_key".to_string(), 1),
        ]
        .into_iter()
        .collect();
        (text, expected)
    }

    #[test]
    fn one_pass_counts_every_secret_once() {
        let (text, expected) = secrets_text();
        let mut once = Counts::new();
        Redactor::default().redact(&text, &mut once);
        assert_eq!(once, expected);
        assert_eq!(
            count_secrets(text.as_bytes(), SCAN_CHUNK_BYTES, SCAN_OVERLAP_BYTES).unwrap(),
            expected
        );
    }

    // Regression guard: a secret cut by a chunk's end, or lying whole in the overlap
    // scanned twice, is counted exactly once, whatever the chunk size.
    #[test]
    fn chunked_counts_equal_one_pass_at_every_chunk_size() {
        let (text, expected) = secrets_text();
        for chunk in 1..=text.len() + 1 {
            assert_eq!(
                count_secrets(text.as_bytes(), chunk, 256).unwrap(),
                expected,
                "chunk {chunk} bytes"
            );
        }
    }

    #[test]
    fn no_secret_counts_nothing() {
        assert_eq!(
            count_secrets(&b"plain text, max_tokens = 5\n"[..], 4, 16).unwrap(),
            Counts::new()
        );
        assert_eq!(count_secrets(&b""[..], 4, 16).unwrap(), Counts::new());
    }

    #[test]
    fn redactions_add_up_per_kind_over_every_call() {
        let mut one = finished(1, 1, "a", "ok", "[redacted]");
        let mut two = finished(2, 2, "never-started", "ok", "[redacted]");
        for (r, counts) in [
            (&mut one, [("github_token", 2), ("aws_access_key", 1)]),
            (&mut two, [("github_token", 3), ("private_key", 1)]),
        ] {
            if let Event::ToolFinished(f) = &mut r.event {
                f.redactions = counts.iter().map(|(k, n)| (k.to_string(), *n)).collect();
            }
        }
        let records = [
            one,
            rec(3, 3, json!({"type": "user_message", "text": "x"})),
            two,
        ];
        let redactions = run(RedactionsFold::default(), &records).finish();
        assert_eq!(
            redactions.into_iter().collect::<Vec<_>>(),
            [
                ("aws_access_key".to_string(), 1),
                ("github_token".to_string(), 5),
                ("private_key".to_string(), 1),
            ]
        );
    }

    fn manifest_entry(path: &str, hash: Option<Hash>, withheld: bool) -> ManifestEntry {
        serde_json::from_value(json!({"path": path, "size": 1, "mode": 0o644, "hash": hash,
            "withheld": withheld}))
        .unwrap()
    }

    fn write(
        seq: u64,
        path: &str,
        before: Option<cairn_store::BlobRef>,
        after: cairn_store::BlobRef,
        withheld: bool,
    ) -> Record {
        rec(
            seq,
            seq,
            json!({"type": "file_write", "call": "c", "op": "replace", "path": path,
                "before": before, "after": after, "status": "ok", "withheld": withheld}),
        )
    }

    #[test]
    fn captured_blobs_are_scanned_once_each_with_every_path_that_held_them() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = BlobStore::open(dir.path()).unwrap().without_sync();
        let (text, _) = secrets_text();
        let secret = blobs.put(text.as_bytes()).unwrap();
        let plain = blobs.put(b"no secret here\n").unwrap();
        let big = blobs.put(&[b'x'; 1000]).unwrap();
        let gone = Hash::of(b"never stored");
        let manifest = [
            manifest_entry("a.txt", Some(secret.hash), false),
            manifest_entry(".env", Some(gone), true),
            manifest_entry("gone.txt", Some(gone), false),
        ];
        let records = [
            // The same content under another name, and a plain one written over it.
            write(1, "b.txt", None, secret, false),
            write(2, "a.txt", Some(secret), plain, false),
            write(3, "big.bin", None, big, false),
            write(4, ".env", Some(big), big, true),
        ];
        let found = run(CapturedFold::new(Some(&manifest)), &records).finish(&blobs, 999);
        let (_, kinds) = secrets_text();
        let kinds: BTreeMap<String, u64> =
            kinds.into_iter().map(|(k, n)| (k, u64::from(n))).collect();
        let file = |path: &str| SecretFile {
            path: path.into(),
            hash: secret.hash.to_hex(),
            kinds: kinds.clone(),
        };
        assert_eq!(
            found,
            WorkspaceSecrets {
                found: 5,
                kinds: kinds.clone(),
                files: vec![file("a.txt"), file("b.txt")],
                blobs_scanned: 2,
                bytes_scanned: secret.len + plain.len,
                blobs_skipped: 1,
                scan_bytes_max: 999,
                blobs_missing: 1,
                withheld: vec![".env".into()],
            }
        );
        // At the limit, the big blob is scanned.
        let at = run(CapturedFold::new(Some(&manifest)), &records).finish(&blobs, 1000);
        assert_eq!((at.blobs_scanned, at.blobs_skipped), (3, 0));
    }

    #[test]
    fn a_manifest_that_cannot_be_read_counts_as_one_missing_blob() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = BlobStore::open(dir.path()).unwrap();
        let found = CapturedFold::new(None).finish(&blobs, AUDIT_SCAN_BYTES_MAX);
        assert_eq!(
            found,
            WorkspaceSecrets {
                blobs_missing: 1,
                scan_bytes_max: AUDIT_SCAN_BYTES_MAX,
                ..WorkspaceSecrets::default()
            }
        );
    }
}
