//! Verifying inside the archive, from the stored bytes only: every record's line
//! hashes to its hash and agrees with its columns (seq, prev, hash, time, type, the
//! `jsonb` event), the seqs run from 0 without a gap and each prev is the hash before;
//! the Merkle tree of those records has the root each checkpoint states, and each
//! checkpoint is signed by the log's key; every blob's content hashes to its name.
//! The triggers keep honest pushers honest; this catches a row a superuser changed
//! with the triggers disabled.

use std::collections::BTreeMap;

use cairn_store::{Hash, check_line};
use cairn_tlog::{Checkpoint, CompactRange, Note, Verifier, tree};
use postgres::fallible_iterator::FallibleIterator;

use crate::push::jsonb_can_hold;
use crate::{Archive, ArchiveError};

/// One problem found, with the session and, for a record, its seq.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ArchiveProblem {
    pub session: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    pub what: String,
}

impl std::fmt::Display for ArchiveProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.seq {
            Some(seq) => write!(f, "session {}, seq {seq}: {}", self.session, self.what),
            None => write!(f, "session {}: {}", self.session, self.what),
        }
    }
}

/// What `verify` checked and found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerifyReport {
    pub sessions: u64,
    pub records: u64,
    pub record_bytes: u64,
    pub blobs: u64,
    pub blob_bytes: u64,
    pub checkpoints: u64,
    /// Checkpoint signatures checked against a key.
    pub signatures_checked: u64,
    /// Checkpoints whose signature could not be checked: no key was given and the
    /// session was pushed without one.
    pub signatures_unchecked: u64,
    pub problems: Vec<ArchiveProblem>,
}

impl VerifyReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Archive {
    /// Verifies the sessions `ids` (each must be archived). Checkpoint signatures are
    /// checked with `keys`, or, when none is given, with the key the session was
    /// pushed with.
    pub fn verify(
        &mut self,
        ids: &[String],
        keys: &[Verifier],
    ) -> Result<VerifyReport, ArchiveError> {
        let mut report = VerifyReport::default();
        for id in ids {
            self.verify_session(id, keys, &mut report)?;
        }
        Ok(report)
    }

    fn verify_session(
        &mut self,
        id: &str,
        keys: &[Verifier],
        report: &mut VerifyReport,
    ) -> Result<(), ArchiveError> {
        let row = self
            .client
            .query_opt("select project, vkey from sessions where id = $1", &[&id])?
            .ok_or_else(|| ArchiveError::NoSession(id.to_string()))?;
        let project: String = row.get(0);
        let vkey: Option<String> = row.get(1);
        report.sessions += 1;
        let problem = |seq: Option<u64>, what: String| ArchiveProblem {
            session: id.to_string(),
            seq,
            what,
        };
        let mut problems = Vec::new();

        let cps: Vec<(u64, String, String)> = self
            .client
            .query(
                "select c.size, c.text, coalesce(string_agg(s.line, '' order by s.n), '')
                 from checkpoints c left join checkpoint_signatures s using (session, size)
                 where c.session = $1 group by c.size, c.text order by c.size",
                &[&id],
            )?
            .iter()
            .map(|r| (r.get::<_, i64>(0) as u64, r.get(1), r.get(2)))
            .collect();
        let mut roots: BTreeMap<u64, tree::Hash32> = BTreeMap::new();
        if cps.iter().any(|c| c.0 == 0) {
            roots.insert(0, tree::empty_root());
        }

        let mut rows = self.client.query_raw(
            "select seq, hash, prev, type, ts, event::text, line from records
             where session = $1 order by seq",
            &[&id],
        )?;
        let mut range = CompactRange::new();
        let mut expected_seq = 0u64;
        let mut prev = Hash::ZERO;
        while let Some(r) = rows.next()? {
            let seq = r.get::<_, i64>(0) as u64;
            let hash: String = r.get(1);
            let prev_col: String = r.get(2);
            let kind: Option<String> = r.get(3);
            let ts: String = r.get(4);
            let event: Option<String> = r.get(5);
            let line: &[u8] = r.get(6);
            report.records += 1;
            report.record_bytes += line.len() as u64;
            if seq != expected_seq {
                problems.push(problem(
                    Some(seq),
                    format!("records {expected_seq}..{seq} are missing"),
                ));
            }
            expected_seq = seq + 1;
            let f = match check_line(line) {
                Ok(f) => f,
                Err(b) => {
                    problems.push(problem(
                        Some(seq),
                        format!("its stored line does not check: {}", b.what),
                    ));
                    // Go on along the chain with the stated hash.
                    prev = Hash::from_hex(hash.as_bytes()).unwrap_or(Hash::ZERO);
                    range.push(tree::record_leaf_hash(seq, &prev.0));
                    if cps.iter().any(|c| c.0 == range.size()) {
                        roots.insert(range.size(), range.root());
                    }
                    continue;
                }
            };
            let mut differ = |column: &str, ok: bool| {
                if !ok {
                    problems.push(problem(
                        Some(seq),
                        format!("its {column} column differs from its stored line"),
                    ));
                }
            };
            differ("seq", f.seq == seq);
            differ("hash", f.hash.to_hex() == hash);
            differ("prev", f.prev.to_hex() == prev_col);
            differ("ts", f.ts == ts);
            let line_event = std::str::from_utf8(f.event).unwrap_or_default();
            let parsed: Option<serde_json::Value> = serde_json::from_str(line_event).ok();
            let line_type = parsed
                .as_ref()
                .and_then(|v| v.get("type"))
                .and_then(|t| t.as_str())
                .map(str::to_string);
            differ("type", line_type == kind);
            match &event {
                Some(text) => {
                    let stored: Option<serde_json::Value> = serde_json::from_str(text).ok();
                    differ("event", stored.is_some() && stored == parsed);
                }
                None => differ("event", !jsonb_can_hold(line_event)),
            }
            if f.prev != prev {
                problems.push(problem(
                    Some(seq),
                    format!(
                        "its prev {} is not the hash of record {} ({})",
                        f.prev.short(12),
                        seq.wrapping_sub(1),
                        prev.short(12)
                    ),
                ));
            }
            prev = f.hash;
            range.push(tree::record_leaf_hash(seq, &f.hash.0));
            if cps.iter().any(|c| c.0 == range.size()) {
                roots.insert(range.size(), range.root());
            }
        }
        drop(rows);

        let known: Vec<Verifier> = if keys.is_empty() {
            vkey.as_deref()
                .and_then(|k| Verifier::parse(k).ok())
                .into_iter()
                .collect()
        } else {
            keys.to_vec()
        };
        for (size, text, sigs) in &cps {
            report.checkpoints += 1;
            let at = |what: String| problem(None, format!("checkpoint of size {size}: {what}"));
            let cp = match Checkpoint::parse(text) {
                Ok(cp) => cp,
                Err(e) => {
                    problems.push(at(e.to_string()));
                    continue;
                }
            };
            if cp.size != *size {
                problems.push(at(format!("its text says size {}", cp.size)));
            }
            if !cp.origin.ends_with(&format!("/{project}/{id}")) {
                problems.push(at(format!("its origin {:?} is of another log", cp.origin)));
            }
            match roots.get(size) {
                None => problems.push(at(format!(
                    "the session has only {} records archived",
                    range.size()
                ))),
                Some(root) if *root != cp.root => problems.push(at(
                    "its root is not the root of the archived records' tree".into(),
                )),
                Some(_) => {}
            }
            if known.is_empty() {
                report.signatures_unchecked += 1;
                continue;
            }
            match Note::parse(&format!("{text}\n{sigs}")).and_then(|n| n.verify(&known)) {
                Ok(signed) => report.signatures_checked += signed.len() as u64,
                Err(e) => problems.push(at(format!("its signature does not verify: {e}"))),
            }
        }

        let mut rows = self.client.query_raw(
            "select b.hash, b.len, b.content from session_blobs s join blobs b using (hash)
             where s.session = $1 order by b.hash",
            &[&id],
        )?;
        while let Some(r) = rows.next()? {
            let hash: String = r.get(0);
            let len: i64 = r.get(1);
            let content: &[u8] = r.get(2);
            report.blobs += 1;
            report.blob_bytes += content.len() as u64;
            let actual = Hash::of(content);
            if actual.to_hex() != hash || len as usize != content.len() {
                problems.push(problem(
                    None,
                    format!(
                        "blob {hash}: its content ({} bytes) hashes to {actual}",
                        content.len()
                    ),
                ));
            }
        }
        report.problems.extend(problems);
        Ok(())
    }
}
