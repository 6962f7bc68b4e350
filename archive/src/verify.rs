//! Verifying inside the archive, from the stored bytes only: every record's line
//! hashes to its hash and agrees with its columns (seq, prev, hash, time, type, the
//! `jsonb` event), the seqs run from 0 without a gap and each prev is the hash before;
//! the Merkle tree of those records has the root each checkpoint states, and each
//! checkpoint is signed by the log's key; every blob's content hashes to its name.
//! The triggers keep honest pushers honest; this catches a row a superuser changed
//! with the triggers disabled.
//!
//! Rows a superuser removed together (a tail of records with its checkpoints, every
//! checkpoint, a whole history replaced) leave bytes that check. What catches them is a
//! checkpoint held elsewhere (`cairn_tlog::held`): the archive's newest-checkpoint
//! record (unless it was lowered too), the home's checkpoint files, the latest
//! checkpoint each witness cosigned. The records must extend every one of them, and a
//! session that ended must end under its newest checkpoint. With keys given, a session
//! that ended must have an archived checkpoint.

use std::collections::BTreeMap;
use std::path::PathBuf;

use cairn_store::{Hash, check_line};
use cairn_tlog::{Against, Checkpoint, CompactRange, Held, Note, Role, Verifier, tree};
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
    /// Checkpoints held outside the archive's checkpoint rows that the records were
    /// compared with: newest-checkpoint records, the home's files, witnesses' answers.
    pub held_checked: u64,
    /// Witness answers (one per witness and session).
    pub witnesses_asked: u64,
    pub problems: Vec<ArchiveProblem>,
}

/// What `verify` compares the stored bytes with, beyond themselves.
pub struct VerifyOptions<'a> {
    /// The log's verifier keys the checkpoints must be signed by; none: the key each
    /// session was pushed with (which a superuser can replace, so only keys given prove
    /// a signature). With keys, every session that ended must have an archived
    /// checkpoint.
    pub keys: &'a [Verifier],
    /// Witnesses (their URLs) asked for the latest checkpoint they cosigned of each
    /// session (cairn's read endpoint, see `cairn_tlog::witness`).
    pub witnesses: &'a [String],
    /// The folder a home holds a session in (given its project key and id), if any:
    /// its checkpoint files are held too.
    pub home: &'a dyn Fn(&str, &str) -> Option<PathBuf>,
    /// What each record is to a signed session's end, by its event type (the archive
    /// knows no event kind; `cairn_replay::role_of` does).
    pub role: &'a dyn Fn(&str) -> Role,
}

impl Default for VerifyOptions<'_> {
    fn default() -> Self {
        VerifyOptions {
            keys: &[],
            witnesses: &[],
            home: &|_, _| None,
            role: &|_| Role::Other,
        }
    }
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
        self.verify_with(
            ids,
            &VerifyOptions {
                keys,
                ..VerifyOptions::default()
            },
        )
    }

    /// Verifies the sessions `ids` against their stored bytes and the checkpoints held
    /// elsewhere that `options` names. A witness that cannot be asked is an error.
    pub fn verify_with(
        &mut self,
        ids: &[String],
        options: &VerifyOptions<'_>,
    ) -> Result<VerifyReport, ArchiveError> {
        let mut report = VerifyReport::default();
        for id in ids {
            self.verify_session(id, options, &mut report)?;
        }
        Ok(report)
    }

    fn verify_session(
        &mut self,
        id: &str,
        options: &VerifyOptions<'_>,
        report: &mut VerifyReport,
    ) -> Result<(), ArchiveError> {
        let keys = options.keys;
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
        let (held, held_problems) = self.held(id, &project, &cps, options, report)?;
        problems.extend(held_problems);
        let (mut against, found) = Against::new(held);
        problems.extend(found.into_iter().map(|p| problem(p.seq(), p.to_string())));
        for (size, _, _) in &cps {
            against.also_newest(*size, &format!("the archive's checkpoint of size {size}"));
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
                    let found = against.record(seq, Role::Other, range.size(), || range.root());
                    problems.extend(found.into_iter().map(|p| problem(p.seq(), p.to_string())));
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
            // The role by the type the hashed line states, not the column.
            let role = line_type.as_deref().map_or(Role::Other, options.role);
            let found = against.record(seq, role, range.size(), || range.root());
            problems.extend(found.into_iter().map(|p| problem(p.seq(), p.to_string())));
        }
        drop(rows);

        if let Some(end) = against.end()
            && !keys.is_empty()
            && cps.is_empty()
        {
            problems.push(problem(
                Some(end),
                "the session ended here and the archive holds no checkpoint of it: a home with a key signs every session's end, so its checkpoints were removed (or it was recorded without the key given)".into(),
            ));
        }
        problems.extend(
            against
                .finish(false)
                .into_iter()
                .map(|p| problem(p.seq(), p.to_string())),
        );

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

    /// The checkpoints of session `id` held outside its checkpoint rows: the archive's
    /// newest-checkpoint record (which must also be one of the rows, and not behind
    /// them), the home's checkpoint files, each witness's latest cosigned one. Returns
    /// them and the problems found reading them.
    fn held(
        &mut self,
        id: &str,
        project: &str,
        cps: &[(u64, String, String)],
        options: &VerifyOptions<'_>,
        report: &mut VerifyReport,
    ) -> Result<(Vec<Held>, Vec<ArchiveProblem>), ArchiveError> {
        let problem = |what: String| ArchiveProblem {
            session: id.to_string(),
            seq: None,
            what,
        };
        let origin = format!("cairn.local/{project}/{id}");
        let mut held = Vec::new();
        let mut problems = Vec::new();

        let newest: Option<(i64, String)> = self
            .client
            .query_opt(
                "select size, root from checkpoint_newest where session = $1",
                &[&id],
            )?
            .map(|r| (r.get(0), r.get(1)));
        let largest = cps.iter().map(|c| c.0).max();
        match &newest {
            Some((size, root)) => {
                let size = *size as u64;
                let by = "the archive's newest-checkpoint record".to_string();
                match cairn_tlog::checkpoint::hash_b64(root) {
                    Ok(root) => {
                        let archived = cps
                            .iter()
                            .find(|c| c.0 == size)
                            .and_then(|c| Checkpoint::parse(&c.1).ok());
                        if archived.is_none_or(|c| c.root != root) {
                            problems.push(problem(format!(
                                "{by} is of size {size}, but no checkpoint of that size and root is archived: checkpoints were removed or changed"
                            )));
                        }
                        held.push(Held { size, root, by });
                    }
                    Err(e) => problems.push(problem(format!("{by}: its root {e}"))),
                }
                if let Some(l) = largest.filter(|l| *l > size) {
                    problems.push(problem(format!(
                        "the archive's newest-checkpoint record (size {size}) is behind its checkpoint of size {l}: it was lowered"
                    )));
                }
            }
            None => {
                if let Some(l) = largest {
                    problems.push(problem(format!(
                        "the archive holds a checkpoint of size {l} but no newest-checkpoint record: it was removed"
                    )));
                }
            }
        }

        if let Some(dir) = (options.home)(project, id) {
            for (size, path) in cairn_tlog::log::checkpoint_files(&dir)? {
                let text = std::fs::read_to_string(&path).map_err(crate::io_at(&path))?;
                let by = format!("the home's checkpoint file {}", path.display());
                match read_checkpoint(&text, &origin) {
                    Ok(cp) if cp.size == size => held.push(Held {
                        size,
                        root: cp.root,
                        by,
                    }),
                    Ok(cp) => {
                        problems.push(problem(format!("{by}: its text says size {}", cp.size)))
                    }
                    Err(e) => problems.push(problem(format!("{by}: {e}"))),
                }
            }
        }

        for url in options.witnesses {
            report.witnesses_asked += 1;
            let by = format!("the witness {url}");
            let Some(text) = cairn_tlog::witness::latest_checkpoint(url, &origin)? else {
                continue;
            };
            match read_checkpoint(&text, &origin) {
                Ok(cp) => held.push(Held {
                    size: cp.size,
                    root: cp.root,
                    by,
                }),
                Err(e) => problems.push(problem(format!("{by} answered {e}"))),
            }
        }
        report.held_checked += held.len() as u64;
        Ok((held, problems))
    }
}

/// A signed checkpoint note of `origin`.
fn read_checkpoint(note: &str, origin: &str) -> Result<Checkpoint, String> {
    let note = Note::parse(note).map_err(|e| e.to_string())?;
    let cp = Checkpoint::parse(&note.text).map_err(|e| e.to_string())?;
    if cp.origin != origin {
        return Err(format!(
            "a checkpoint of {:?}, not of this session ({origin:?})",
            cp.origin
        ));
    }
    Ok(cp)
}
