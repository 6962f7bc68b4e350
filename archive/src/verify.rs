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
        let row = self
            .client
            .query_opt("select project, vkey from sessions where id = $1", &[&id])?
            .ok_or_else(|| ArchiveError::NoSession(id.to_string()))?;
        let project: String = row.get(0);
        let vkey: Option<String> = row.get(1);
        report.sessions += 1;
        let mut found = Found {
            session: id,
            problems: Vec::new(),
        };

        let cps = self.checkpoint_rows(id)?;
        let (held, held_problems) = self.held(id, &project, &cps, options, report)?;
        found.problems.extend(held_problems);
        let (mut against, held_found) = Against::new(held);
        found.held(held_found);
        for (size, _, _) in &cps {
            against.also_newest(*size, &format!("the archive's checkpoint of size {size}"));
        }
        let mut chain = Chain::new(&cps, against);
        self.records(id, options, report, &mut chain, &mut found)?;
        let Chain {
            against,
            range,
            roots,
            ..
        } = chain;
        if let Some(end) = against.end()
            && !options.keys.is_empty()
            && cps.is_empty()
        {
            found.add(
                Some(end),
                "the session ended here and the archive holds no checkpoint of it: a home with a key signs every session's end, so its checkpoints were removed (or it was recorded without the key given)".into(),
            );
        }
        found.held(against.finish(false));

        let known: Vec<Verifier> = if options.keys.is_empty() {
            vkey.as_deref()
                .and_then(|k| Verifier::parse(k).ok())
                .into_iter()
                .collect()
        } else {
            options.keys.to_vec()
        };
        let origin_tail = format!("/{project}/{id}");
        for cp in &cps {
            check_checkpoint(
                cp,
                &origin_tail,
                &roots,
                range.size(),
                &known,
                report,
                &mut found,
            );
        }
        self.blobs(id, report, &mut found)?;
        report.problems.extend(found.problems);
        Ok(())
    }

    /// The checkpoint rows of session `id`, with their signature lines: (size, text,
    /// signatures), by size.
    fn checkpoint_rows(&mut self, id: &str) -> Result<Vec<(u64, String, String)>, ArchiveError> {
        Ok(self
            .client
            .query(
                "select c.size, c.text, coalesce(string_agg(s.line, '' order by s.n), '')
                 from checkpoints c left join checkpoint_signatures s using (session, size)
                 where c.session = $1 group by c.size, c.text order by c.size",
                &[&id],
            )?
            .iter()
            .map(|r| (r.get::<_, i64>(0) as u64, r.get(1), r.get(2)))
            .collect())
    }

    /// Every record row of session `id`, in seq order, along the chain.
    fn records(
        &mut self,
        id: &str,
        options: &VerifyOptions<'_>,
        report: &mut VerifyReport,
        chain: &mut Chain<'_>,
        found: &mut Found<'_>,
    ) -> Result<(), ArchiveError> {
        let mut rows = self.client.query_raw(
            "select seq, hash, prev, type, ts, event::text, line from records
             where session = $1 order by seq",
            &[&id],
        )?;
        while let Some(r) = rows.next()? {
            let row = RecordRow {
                seq: r.get::<_, i64>(0) as u64,
                hash: r.get(1),
                prev: r.get(2),
                kind: r.get(3),
                ts: r.get(4),
                event: r.get(5),
                line: r.get(6),
            };
            report.records += 1;
            report.record_bytes += row.line.len() as u64;
            chain.record(&row, options, found);
        }
        Ok(())
    }

    /// Every blob of session `id` hashes to its name and has its length.
    fn blobs(
        &mut self,
        id: &str,
        report: &mut VerifyReport,
        found: &mut Found<'_>,
    ) -> Result<(), ArchiveError> {
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
                found.add(
                    None,
                    format!(
                        "blob {hash}: its content ({} bytes) hashes to {actual}",
                        content.len()
                    ),
                );
            }
        }
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

/// The problems found in one session.
struct Found<'a> {
    session: &'a str,
    problems: Vec<ArchiveProblem>,
}

impl Found<'_> {
    fn add(&mut self, seq: Option<u64>, what: String) {
        self.problems.push(ArchiveProblem {
            session: self.session.to_string(),
            seq,
            what,
        });
    }

    /// What the checkpoints held elsewhere found.
    fn held(&mut self, found: Vec<cairn_tlog::HeldProblem>) {
        for p in found {
            self.add(p.seq(), p.to_string());
        }
    }
}

/// One record row as stored.
struct RecordRow<'a> {
    seq: u64,
    hash: String,
    prev: String,
    kind: Option<String>,
    ts: String,
    event: Option<String>,
    line: &'a [u8],
}

/// The records read so far: the seq and hash the next must follow, their tree, its
/// root at each archived checkpoint's size, and the checkpoints held against them.
struct Chain<'a> {
    cps: &'a [(u64, String, String)],
    against: Against,
    range: CompactRange,
    roots: BTreeMap<u64, tree::Hash32>,
    expected_seq: u64,
    prev: Hash,
}

impl<'a> Chain<'a> {
    fn new(cps: &'a [(u64, String, String)], against: Against) -> Chain<'a> {
        let mut roots = BTreeMap::new();
        if cps.iter().any(|c| c.0 == 0) {
            roots.insert(0, tree::empty_root());
        }
        Chain {
            cps,
            against,
            range: CompactRange::new(),
            roots,
            expected_seq: 0,
            prev: Hash::ZERO,
        }
    }

    /// One record row: in sequence, its line checks and agrees with its columns, its
    /// prev is the hash before; then it joins the tree.
    fn record(&mut self, row: &RecordRow<'_>, options: &VerifyOptions<'_>, found: &mut Found<'_>) {
        let seq = row.seq;
        if seq != self.expected_seq {
            found.add(
                Some(seq),
                format!("records {}..{seq} are missing", self.expected_seq),
            );
        }
        self.expected_seq = seq + 1;
        let f = match check_line(row.line) {
            Ok(f) => f,
            Err(b) => {
                found.add(
                    Some(seq),
                    format!("its stored line does not check: {}", b.what),
                );
                // Go on along the chain with the stated hash.
                self.prev = Hash::from_hex(row.hash.as_bytes()).unwrap_or(Hash::ZERO);
                self.grow(seq, self.prev, Role::Other, found);
                return;
            }
        };
        let line_type = columns(row, &f, found);
        if f.prev != self.prev {
            found.add(
                Some(seq),
                format!(
                    "its prev {} is not the hash of record {} ({})",
                    f.prev.short(12),
                    seq.wrapping_sub(1),
                    self.prev.short(12)
                ),
            );
        }
        self.prev = f.hash;
        // The role by the type the hashed line states, not the column.
        let role = line_type.as_deref().map_or(Role::Other, options.role);
        self.grow(seq, f.hash, role, found);
    }

    /// Adds record `seq` of hash `hash` to the tree, and holds the tree against the
    /// checkpoints held.
    fn grow(&mut self, seq: u64, hash: Hash, role: Role, found: &mut Found<'_>) {
        self.range.push(tree::record_leaf_hash(seq, &hash.0));
        if self.cps.iter().any(|c| c.0 == self.range.size()) {
            self.roots.insert(self.range.size(), self.range.root());
        }
        let range = &self.range;
        found.held(
            self.against
                .record(seq, role, range.size(), || range.root()),
        );
    }
}

/// A record's columns agree with its stored line; returns the type the line states.
fn columns(
    row: &RecordRow<'_>,
    f: &cairn_store::Fields<'_>,
    found: &mut Found<'_>,
) -> Option<String> {
    let mut differ = |column: &str, ok: bool| {
        if !ok {
            found.add(
                Some(row.seq),
                format!("its {column} column differs from its stored line"),
            );
        }
    };
    differ("seq", f.seq == row.seq);
    differ("hash", f.hash.to_hex() == row.hash);
    differ("prev", f.prev.to_hex() == row.prev);
    differ("ts", f.ts == row.ts);
    let line_event = std::str::from_utf8(f.event).unwrap_or_default();
    let parsed: Option<serde_json::Value> = serde_json::from_str(line_event).ok();
    let line_type = parsed
        .as_ref()
        .and_then(|v| v.get("type"))
        .and_then(|t| t.as_str())
        .map(str::to_string);
    differ("type", line_type == row.kind);
    match &row.event {
        Some(text) => {
            let stored: Option<serde_json::Value> = serde_json::from_str(text).ok();
            differ("event", stored.is_some() && stored == parsed);
        }
        None => differ("event", !jsonb_can_hold(line_event)),
    }
    line_type
}

/// An archived checkpoint: its text reads, is of this session's log and of its size,
/// its root is the tree's of the archived records at that size, and it is signed by a
/// key known (counted unchecked when none is).
fn check_checkpoint(
    (size, text, sigs): &(u64, String, String),
    origin_tail: &str,
    roots: &BTreeMap<u64, tree::Hash32>,
    archived: u64,
    known: &[Verifier],
    report: &mut VerifyReport,
    found: &mut Found<'_>,
) {
    report.checkpoints += 1;
    let mut at = |what: String| found.add(None, format!("checkpoint of size {size}: {what}"));
    let cp = match Checkpoint::parse(text) {
        Ok(cp) => cp,
        Err(e) => return at(e.to_string()),
    };
    if cp.size != *size {
        at(format!("its text says size {}", cp.size));
    }
    if !cp.origin.ends_with(origin_tail) {
        at(format!("its origin {:?} is of another log", cp.origin));
    }
    match roots.get(size) {
        None => at(format!("the session has only {archived} records archived")),
        Some(root) if *root != cp.root => {
            at("its root is not the root of the archived records' tree".into())
        }
        Some(_) => {}
    }
    if known.is_empty() {
        report.signatures_unchecked += 1;
        return;
    }
    match Note::parse(&format!("{text}\n{sigs}")).and_then(|n| n.verify(known)) {
        Ok(signed) => report.signatures_checked += signed.len() as u64,
        Err(e) => at(format!("its signature does not verify: {e}")),
    }
}
