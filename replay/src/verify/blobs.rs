//! The blobs: every referenced blob exists, re-hashes to its name and has the length
//! its record gives (git-backed content is read from the workspace's repository), the
//! manifest's entries are workspace paths whose blobs are checked, and the original
//! of an imported file still hashes to what the import recorded.

use super::*;

impl Verifier {
    /// Whether a blob checked so far is intact (true when it was not checked).
    pub(super) fn blob_intact(&self, blob: &BlobRef) -> bool {
        self.blob_checked
            .get(&blob.hash)
            .is_none_or(|c| *c == BlobCheck::Ok)
    }

    pub(super) fn blob(&mut self, blob: &BlobRef, what: &str) {
        if !self.check_blobs {
            return;
        }
        let check = match self.blob_checked.get(&blob.hash) {
            Some(c) => *c,
            None => {
                self.report.blobs_checked += 1;
                let mut c = match self.blobs.verify(&blob.hash) {
                    Ok(c) => c,
                    Err(e) => {
                        self.problem(ProblemKind::Blob, format!("{what}: cannot read blob: {e}"));
                        return;
                    }
                };
                // Git-backed content is read from the workspace's repository and
                // hashed; a repository without the object cannot vouch for it.
                if c == BlobCheck::Missing
                    && let Some(oid) = self.git_backed.get(&blob.hash).cloned()
                {
                    let workspace = self.workspace.clone().unwrap_or_default();
                    let objects = self
                        .git
                        .get_or_insert_with(|| cairn_tools::git::Objects::open(&workspace));
                    match objects.blob(&oid) {
                        Some(bytes) => {
                            let actual = Hash::of(&bytes);
                            c = if actual == blob.hash && bytes.len() as u64 == blob.len {
                                BlobCheck::Ok
                            } else {
                                BlobCheck::Mismatch { actual }
                            };
                        }
                        None => {
                            self.blob_checked.insert(blob.hash, c);
                            self.problem(
                                ProblemKind::Blob,
                                format!(
                                    "{what}: git object {oid} (content {}) is missing from the repository of {}",
                                    blob.hash,
                                    workspace.display()
                                ),
                            );
                            return;
                        }
                    }
                }
                self.blob_checked.insert(blob.hash, c);
                c
            }
        };
        match check {
            BlobCheck::Ok => {
                let len = std::fs::metadata(self.blobs.path(&blob.hash)).map(|m| m.len());
                if let Ok(len) = len
                    && len != blob.len
                {
                    self.problem(
                        ProblemKind::Blob,
                        format!(
                            "{what}: blob {} is {len} bytes, the record says {}",
                            blob.hash.short(12),
                            blob.len
                        ),
                    );
                }
            }
            BlobCheck::Missing => self.problem(
                ProblemKind::Blob,
                format!("{what}: blob {} is missing", blob.hash),
            ),
            BlobCheck::Mismatch { actual } => self.problem(
                ProblemKind::Blob,
                format!(
                    "{what}: blob {} is damaged: its content hashes to {actual}",
                    blob.hash
                ),
            ),
        }
    }

    /// The kept bytes of an imported file still hash to what the import recorded.
    pub(super) fn original(&mut self, f: &cairn_core::event::ImportedFile) {
        let Some(b) = &f.original else {
            return;
        };
        if b.hash != f.hash || b.len != f.bytes {
            self.problem(
                ProblemKind::Blob,
                format!(
                    "the original of {} is blob {} ({} bytes), but the file read hashed to {} ({} bytes)",
                    f.path,
                    b.hash.short(12),
                    b.len,
                    f.hash.short(12),
                    f.bytes
                ),
            );
        }
        self.blob(b, &format!("the original of {}", f.path));
    }

    /// Checks the path of every entry of the manifest, and (deep) every file blob it
    /// names.
    pub(super) fn manifest_entries(&mut self, blob: &BlobRef) {
        let Ok(bytes) = self.blobs.get(&blob.hash) else {
            return;
        };
        match manifest::from_jsonl(&bytes) {
            Ok(entries) => {
                for e in entries {
                    let why = match recorded_path(&e.path) {
                        RecordedPath::Workspace => None,
                        RecordedPath::Outside => {
                            Some("a manifest entry is never outside the workspace")
                        }
                        RecordedPath::Bad(why) => Some(why),
                    };
                    if let Some(why) = why {
                        self.problem(
                            ProblemKind::BadEvent,
                            format!("manifest entry {:?}: not a workspace path: {why}", e.path),
                        );
                    }
                    if e.withheld {
                        self.withheld(&e.path, &format!("manifest entry {}", e.path));
                        continue;
                    }
                    // Recorded by hash and size only: nothing holds the content.
                    if e.not_kept.is_some() {
                        continue;
                    }
                    if !self.check_blobs && e.hash.is_none() {
                        continue;
                    }
                    // A git-backed file recorded without its hash: the hash is the
                    // object's content's, checked against the blob id on reading.
                    let hash = match (e.hash, &e.git) {
                        (Some(h), _) => h,
                        (None, Some(oid)) => {
                            let workspace = self.workspace.clone().unwrap_or_default();
                            let objects = self
                                .git
                                .get_or_insert_with(|| cairn_tools::git::Objects::open(&workspace));
                            self.report.blobs_checked += 1;
                            match e.content_hash(objects) {
                                Some(h) => {
                                    self.git_backed.insert(h, oid.clone());
                                    continue;
                                }
                                None => {
                                    self.problem(
                                        ProblemKind::Blob,
                                        format!(
                                            "manifest entry {}: git object {oid} is missing from the repository of {} (or is not {} bytes)",
                                            e.path,
                                            workspace.display(),
                                            e.size
                                        ),
                                    );
                                    continue;
                                }
                            }
                        }
                        (None, None) => continue,
                    };
                    if let Some(oid) = &e.git {
                        self.git_backed.insert(hash, oid.clone());
                    }
                    if !self.check_blobs {
                        continue;
                    }
                    let r = BlobRef { hash, len: e.size };
                    self.blob(&r, &format!("manifest entry {}", e.path));
                }
            }
            Err(e) => self.problem(ProblemKind::Blob, format!("the manifest: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{found, verifier};
    use super::*;

    #[test]
    fn a_blob_is_there_hashes_to_its_name_and_has_its_length() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        let kept = v.blobs.put(b"content").unwrap();
        let missing = BlobRef {
            hash: Hash::of(b"gone"),
            len: 4,
        };
        v.at = (1, 2, 10);
        v.blob(
            &BlobRef {
                hash: kept.hash,
                len: kept.len,
            },
            "kept",
        );
        v.blob(
            &BlobRef {
                hash: kept.hash,
                len: 99,
            },
            "longer",
        );
        v.blob(&missing, "gone");
        // Each blob is re-hashed once.
        v.blob(&missing, "gone again");
        assert_eq!(v.report.blobs_checked, 2);
        assert!(!v.blob_intact(&missing));
        assert!(v.blob_intact(&kept));
        v.withheld("notes.txt", "file_write notes.txt");
        let found = found(v);
        let whats: Vec<&str> = found.iter().map(|p| p.2.as_str()).collect();
        assert_eq!(
            whats,
            [
                format!("longer: blob {} is 7 bytes, the record says 99", kept.hash.short(12)),
                format!("gone: blob {} is missing", missing.hash),
                format!("gone again: blob {} is missing", missing.hash),
                "file_write notes.txt: recorded withheld (no blob), but it is not a credential file of the session".to_string(),
            ]
        );
    }
}
