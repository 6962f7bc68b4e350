//! Pushing a local session: compare what both sides hold, refuse a contradiction before
//! writing anything, then add blobs, records (in batches, one transaction each) and
//! checkpoints. Every step only adds what the archive lacks, so a push interrupted at
//! any point and run again ends with the same archive as one that was not interrupted,
//! and a session already pushed costs one read of its log and of its archived hashes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use cairn_store::{BlobStore, Hash, LogReader, check_line};
use cairn_tlog::{Checkpoint, CompactRange, Hash32, Note, tree};

use crate::{Archive, ArchiveError, blobs, io_at};

/// Records (or blobs) per transaction, by default.
pub const BATCH_RECORDS_MAX_DEFAULT: usize = 1000;
/// Bytes of record lines (or blob contents) per transaction, by default; one record or
/// blob larger than that goes alone.
pub const BATCH_BYTES_MAX_DEFAULT: usize = 8 * 1024 * 1024;
/// The largest blob the archive takes, by default. PostgreSQL caps any one value (and
/// any one message, and the `bytea[]` a batch is sent as) just under 1 GiB including
/// headers, so a blob of 1 GiB could never go in; half of that leaves the server and
/// both clients room to build the messages that carry it.
pub const BLOB_BYTES_MAX: u64 = 512 << 20;

/// A session on this machine: its folder, its id and project key (the names of the
/// folder and of its project's), its project's blob store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalSession {
    pub id: String,
    pub project: String,
    pub dir: PathBuf,
    pub blobs: PathBuf,
    /// The verifier key of the home's log key, kept with the session when first pushed.
    pub vkey: Option<String>,
}

impl LocalSession {
    /// The session in folder `<project>/sessions/<id>`.
    pub fn at(dir: &Path) -> Result<LocalSession, ArchiveError> {
        if !cairn_store::log_path(dir).is_file() {
            return Err(ArchiveError::NotASession(dir.to_path_buf()));
        }
        let dir = dir.canonicalize().map_err(io_at(dir))?;
        let name = |p: Option<&Path>| {
            p.and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let project_dir = dir.parent().and_then(Path::parent);
        Ok(LocalSession {
            id: name(Some(&dir)),
            project: name(project_dir),
            blobs: project_dir.unwrap_or(&dir).join("blobs"),
            dir,
            vkey: None,
        })
    }
}

/// How a push batches its writes, and the largest blob it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushOptions {
    /// Records (or blobs) per transaction, at least 1.
    pub batch_records_max: usize,
    /// Bytes of record lines (or blob contents) per transaction, at least 1: a batch
    /// never holds more, except a single record or blob larger than this, which goes
    /// alone.
    pub batch_bytes_max: usize,
    /// A session referencing a blob larger than this is refused before anything is
    /// written; at most [`BLOB_BYTES_MAX`].
    pub blob_bytes_max: u64,
}

impl Default for PushOptions {
    fn default() -> PushOptions {
        PushOptions {
            batch_records_max: BATCH_RECORDS_MAX_DEFAULT,
            batch_bytes_max: BATCH_BYTES_MAX_DEFAULT,
            blob_bytes_max: BLOB_BYTES_MAX,
        }
    }
}

/// A step of a push done (committed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// Blobs `done` of `total` are in the archive.
    Blobs {
        session: &'a str,
        done: u64,
        total: u64,
    },
    /// Records up to `next - 1` are in the archive, of `total`.
    Records {
        session: &'a str,
        next: u64,
        total: u64,
    },
}

/// What a push did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PushReport {
    pub session: String,
    pub project: String,
    /// Records in the local log.
    pub records_local: u64,
    /// Records the archive held before.
    pub records_before: u64,
    pub records_pushed: u64,
    pub record_bytes_pushed: u64,
    /// Blobs the session's records reference (directly or through other blobs).
    pub blobs_referenced: u64,
    /// Blobs the archive did not hold yet (another session may have brought the rest).
    pub blobs_pushed: u64,
    pub blob_bytes_pushed: u64,
    pub checkpoints_pushed: u64,
    pub signatures_pushed: u64,
}

/// False when PostgreSQL's `jsonb` cannot hold the event: it refuses the `\u0000`
/// escape and unpaired surrogates. Such an event is archived with a NULL `event`; its
/// line holds it still.
pub(crate) fn jsonb_can_hold(event: &str) -> bool {
    let lower = event.to_ascii_lowercase();
    !(lower.contains("\\u0000")
        || [
            "\\ud8", "\\ud9", "\\uda", "\\udb", "\\udc", "\\udd", "\\ude", "\\udf",
        ]
        .iter()
        .any(|s| lower.contains(s)))
}

/// A record's line as the log holds it (the layout is fixed; `check_line` confirms the
/// hash of what is rebuilt).
fn line_of(r: &cairn_store::Record) -> Vec<u8> {
    format!(
        "{{\"prev\":\"{}\",\"seq\":{},\"ts\":\"{}\",\"event\":{},\"hash\":\"{}\"}}",
        r.prev.to_hex(),
        r.seq,
        r.ts,
        r.event.get(),
        r.hash.to_hex()
    )
    .into_bytes()
}

/// A local checkpoint: its note's text and signature lines, and the root it states.
struct LocalCheckpoint {
    size: u64,
    text: String,
    root: Hash32,
    sigs: Vec<String>,
}

/// The archive's memory of a session's checkpoints: every one archived (size → text),
/// and the newest-checkpoint record (size, root as base64).
struct Kept {
    checkpoints: BTreeMap<u64, String>,
    newest: Option<(u64, String)>,
}

impl Kept {
    /// Every kept checkpoint's size and root (those whose text does not read are
    /// `verify`'s to report).
    fn roots(&self) -> Vec<(u64, Hash32)> {
        let mut out: Vec<(u64, Hash32)> = self
            .checkpoints
            .values()
            .filter_map(|t| Checkpoint::parse(t).ok())
            .map(|c| (c.size, c.root))
            .collect();
        if let Some((size, root)) = &self.newest
            && let Ok(root) = cairn_tlog::checkpoint::hash_b64(root)
        {
            out.push((*size, root));
        }
        out
    }
}

fn local_checkpoints(dir: &Path) -> Result<Vec<LocalCheckpoint>, ArchiveError> {
    let mut out = Vec::new();
    for (size, path) in cairn_tlog::log::checkpoint_files(dir)? {
        let note = std::fs::read_to_string(&path).map_err(io_at(&path))?;
        let bad = |what: String| ArchiveError::BadCheckpointFile {
            path: path.clone(),
            what,
        };
        let parsed = Note::parse(&note).map_err(|e| bad(e.to_string()))?;
        if parsed.to_text() != note {
            return Err(bad(
                "it is not in the form text, blank line, signatures".into()
            ));
        }
        let cp = Checkpoint::parse(&parsed.text).map_err(|e| bad(e.to_string()))?;
        if cp.size != size {
            return Err(bad(format!("its text says size {}", cp.size)));
        }
        out.push(LocalCheckpoint {
            size,
            text: parsed.text,
            root: cp.root,
            sigs: parsed.sigs.into_iter().map(|s| s.line).collect(),
        });
    }
    Ok(out)
}

/// Pass one over the local log, up to `local_len`: the part the archive holds must
/// agree with it record by record; the tree's root is noted at each size wanted; the
/// rest names the blobs to bring (scanned in slices of `batch_bytes_max`, for bounded
/// memory).
fn scan_local(
    s: &LocalSession,
    reader: &LogReader,
    local_len: u64,
    archived: &[String],
    wanted_sizes: &mut BTreeMap<u64, Option<Hash32>>,
    store: &BlobStore,
    batch_bytes_max: usize,
) -> Result<BTreeSet<Hash>, ArchiveError> {
    let mut range = CompactRange::new();
    let mut lines_to_scan: Vec<Vec<u8>> = Vec::new();
    let mut wanted: BTreeSet<Hash> = BTreeSet::new();
    let mut scanned_bytes = 0usize;
    for r in reader.records()? {
        let r = r?;
        if r.seq >= local_len {
            break;
        }
        range.push(tree::record_leaf_hash(r.seq, &r.hash.0));
        if let Some(root) = wanted_sizes.get_mut(&range.size()) {
            *root = Some(range.root());
        }
        if let Some(a) = archived.get(r.seq as usize) {
            if *a != r.hash.to_hex() {
                return Err(ArchiveError::Contradiction {
                    session: s.id.clone(),
                    seq: r.seq,
                    local: r.hash.to_hex(),
                    archived: a.clone(),
                });
            }
            continue;
        }
        let line = line_of(&r);
        scanned_bytes += line.len();
        lines_to_scan.push(line);
        if scanned_bytes > batch_bytes_max {
            wanted.extend(blobs::referenced(
                store,
                lines_to_scan.iter().map(Vec::as_slice),
            )?);
            lines_to_scan.clear();
            scanned_bytes = 0;
        }
    }
    wanted.extend(blobs::referenced(
        store,
        lines_to_scan.iter().map(Vec::as_slice),
    )?);
    drop(lines_to_scan);
    Ok(wanted)
}

/// The checkpoints: the archive's must be of the local history, the local ones of the
/// local log, and one of a size the archive holds the same.
fn check_checkpoints(
    s: &LocalSession,
    kept: &Kept,
    kept_roots: &[(u64, Hash32)],
    checkpoints: &[LocalCheckpoint],
    wanted_sizes: &BTreeMap<u64, Option<Hash32>>,
    local_len: u64,
) -> Result<(), ArchiveError> {
    for (size, root) in kept_roots {
        if let Some(Some(ours)) = wanted_sizes.get(size)
            && ours != root
        {
            return Err(ArchiveError::HistoryContradiction {
                session: s.id.clone(),
                size: *size,
                seq: size.saturating_sub(1),
            });
        }
    }
    for c in checkpoints {
        let what = match wanted_sizes.get(&c.size) {
            Some(Some(ours)) if *ours == c.root => None,
            Some(Some(_)) => Some(
                "is not the tree of the local records: the local log was rewritten".to_string(),
            ),
            _ => Some(format!(
                "is past the local log's {local_len} records: the local log lost records"
            )),
        };
        if let Some(what) = what {
            return Err(ArchiveError::LocalCheckpoint {
                session: s.id.clone(),
                size: c.size,
                what,
            });
        }
        let differs = kept.checkpoints.get(&c.size).is_some_and(|t| *t != c.text)
            || kept.newest.as_ref().is_some_and(|(size, root)| {
                *size == c.size && *root != cairn_tlog::checkpoint::b64(&c.root)
            });
        if differs {
            return Err(ArchiveError::CheckpointContradiction {
                session: s.id.clone(),
                size: c.size,
            });
        }
    }
    Ok(())
}

impl Archive {
    /// Pushes one session. A local record that contradicts an archived one (same seq,
    /// another hash), a checkpoint that differs from the archived one of its size, a
    /// local history whose tree contradicts a checkpoint the archive keeps (its rows,
    /// or its newest-checkpoint record), and a local checkpoint that is not of the local
    /// log are refused before anything is written.
    pub fn push(
        &mut self,
        s: &LocalSession,
        options: &PushOptions,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<PushReport, ArchiveError> {
        assert!(options.batch_records_max > 0 && options.batch_bytes_max > 0);
        assert!(options.blob_bytes_max <= BLOB_BYTES_MAX);
        let reader = LogReader::open(&s.dir)?;
        // A torn tail (a writer mid-line, a crash) is not the session's yet.
        let local_len = reader.tail()?.head.map_or(0, |h| h.seq + 1);
        let archived: Vec<String> = self
            .client
            .query(
                "select hash from records where session = $1 order by seq",
                &[&s.id],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let before = archived.len() as u64;
        let mut report = PushReport {
            session: s.id.clone(),
            project: s.project.clone(),
            records_local: local_len,
            records_before: before,
            ..PushReport::default()
        };

        let checkpoints = local_checkpoints(&s.dir)?;
        let kept = self.kept(&s.id)?;
        // The local tree's root at every size a checkpoint (local or kept) states.
        let kept_roots = kept.roots();
        let mut wanted_sizes: BTreeMap<u64, Option<Hash32>> = kept_roots
            .iter()
            .map(|(size, _)| (*size, None))
            .chain(checkpoints.iter().map(|c| (c.size, None)))
            .collect();
        if let Some(r) = wanted_sizes.get_mut(&0) {
            *r = Some(tree::empty_root());
        }

        // Pass one: the shared part must agree; the rest names the blobs to bring.
        let store = BlobStore::open(&s.blobs)?;
        let wanted = scan_local(
            s,
            &reader,
            local_len,
            &archived,
            &mut wanted_sizes,
            &store,
            options.batch_bytes_max,
        )?;

        // The checkpoints: the archive's must be of the local history, the local ones of
        // the local log, and one of a size the archive holds the same.
        check_checkpoints(
            s,
            &kept,
            &kept_roots,
            &checkpoints,
            &wanted_sizes,
            local_len,
        )?;

        // The blobs the archive lacks, and their sizes: one too large refuses the
        // session before anything is written.
        report.blobs_referenced = wanted.len() as u64;
        let all: Vec<String> = wanted.iter().map(Hash::to_hex).collect();
        let missing = self.missing_blobs(s, &store, &wanted, &all, options.blob_bytes_max)?;

        self.client.execute(
            "insert into sessions (id, project, vkey) values ($1, $2, $3) on conflict (id) do nothing",
            &[&s.id, &s.project, &s.vkey],
        )?;
        self.push_blobs(s, &store, &missing, options, &mut report, progress)?;
        self.client.execute(
            "insert into session_blobs (session, hash) select $1, unnest($2::text[])
             on conflict do nothing",
            &[&s.id, &all],
        )?;
        self.push_records(
            s,
            &reader,
            before,
            local_len,
            options,
            &mut report,
            progress,
        )?;
        self.push_checkpoints(s, &checkpoints, &kept, &mut report)?;
        Ok(report)
    }

    /// The blobs the archive lacks of `wanted` (`all`, as hex), with their sizes; one
    /// past `blob_bytes_max` refuses the session before anything is written.
    fn missing_blobs(
        &mut self,
        s: &LocalSession,
        store: &BlobStore,
        wanted: &BTreeSet<Hash>,
        all: &[String],
        blob_bytes_max: u64,
    ) -> Result<Vec<(Hash, u64)>, ArchiveError> {
        let have: BTreeSet<String> = self
            .client
            .query("select hash from blobs where hash = any($1)", &[&all])?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut missing: Vec<(Hash, u64)> = Vec::new();
        for h in wanted.iter().filter(|h| !have.contains(&h.to_hex())) {
            let path = store.path(h);
            let len = std::fs::metadata(&path).map_err(io_at(&path))?.len();
            if len > blob_bytes_max {
                return Err(ArchiveError::Limit(format!(
                    "session {}: blob {h} is {len} bytes, over the archive's blob_bytes_max ({} bytes, set by what one PostgreSQL value can hold); nothing was pushed",
                    s.id, blob_bytes_max
                )));
            }
            missing.push((*h, len));
        }
        Ok(missing)
    }

    /// What the archive keeps of a session's checkpoints.
    fn kept(&mut self, id: &str) -> Result<Kept, ArchiveError> {
        let checkpoints = self
            .client
            .query(
                "select size, text from checkpoints where session = $1",
                &[&id],
            )?
            .iter()
            .map(|r| (r.get::<_, i64>(0) as u64, r.get(1)))
            .collect();
        let newest = self
            .client
            .query_opt(
                "select size, root from checkpoint_newest where session = $1",
                &[&id],
            )?
            .map(|r| (r.get::<_, i64>(0) as u64, r.get(1)));
        Ok(Kept {
            checkpoints,
            newest,
        })
    }

    /// Adds `missing` blobs in batches of at most `batch_records_max` blobs and
    /// `batch_bytes_max` bytes (a larger blob alone), one transaction each.
    fn push_blobs(
        &mut self,
        s: &LocalSession,
        store: &BlobStore,
        missing: &[(Hash, u64)],
        options: &PushOptions,
        report: &mut PushReport,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<(), ArchiveError> {
        let total = missing.len() as u64;
        let mut done = 0u64;
        for batch in plan_batches(
            missing.iter().map(|(_, len)| *len),
            options.batch_records_max,
            options.batch_bytes_max as u64,
        ) {
            let (mut hashes, mut lens, mut contents) = (Vec::new(), Vec::new(), Vec::new());
            let mut bytes = 0u64;
            for (h, len) in &missing[batch] {
                let content = store.get(h)?;
                if Hash::of(&content) != *h || content.len() as u64 != *len {
                    return Err(ArchiveError::BadBlob {
                        session: s.id.clone(),
                        hash: h.to_hex(),
                        what: "the local copy is damaged (its content hashes otherwise); run `cairn verify` on the session".into(),
                    });
                }
                bytes += *len;
                hashes.push(h.to_hex());
                lens.push(*len as i64);
                contents.push(content);
            }
            let mut tx = self.client.transaction()?;
            tx.execute(
                "insert into blobs (hash, len, content)
                 select * from unnest($1::text[], $2::bigint[], $3::bytea[])
                 on conflict (hash) do nothing",
                &[&hashes, &lens, &contents],
            )?;
            tx.commit()?;
            done += hashes.len() as u64;
            report.blobs_pushed += hashes.len() as u64;
            report.blob_bytes_pushed += bytes;
            progress(Progress::Blobs {
                session: &s.id,
                done,
                total,
            });
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn push_records(
        &mut self,
        s: &LocalSession,
        reader: &LogReader,
        from: u64,
        to: u64,
        options: &PushOptions,
        report: &mut PushReport,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<(), ArchiveError> {
        if from >= to {
            return Ok(());
        }
        let mut batch = Batch::default();
        for r in reader.records_from(from)? {
            let r = r?;
            if r.seq >= to {
                break;
            }
            let line = line_of(&r);
            // The line rebuilt must be the line hashed: a check, not a hope.
            let f = check_line(&line).map_err(|e| ArchiveError::BadArchivedRecord {
                session: s.id.clone(),
                seq: r.seq,
                what: format!("the local record does not rebuild to its line: {}", e.what),
            })?;
            debug_assert_eq!(f.hash, r.hash);
            if !batch.seq.is_empty() && batch.bytes + line.len() > options.batch_bytes_max {
                self.insert_batch(s, &mut batch, report)?;
                progress(Progress::Records {
                    session: &s.id,
                    next: r.seq,
                    total: to,
                });
            }
            let event = r.event.get();
            batch.bytes += line.len();
            batch.seq.push(r.seq as i64);
            batch.hash.push(r.hash.to_hex());
            batch.prev.push(r.prev.to_hex());
            batch.kind.push(r.event_type());
            batch.ts.push(r.ts.clone());
            batch
                .event
                .push(jsonb_can_hold(event).then(|| event.to_string()));
            batch.line.push(line);
            if batch.seq.len() >= options.batch_records_max {
                self.insert_batch(s, &mut batch, report)?;
                progress(Progress::Records {
                    session: &s.id,
                    next: r.seq + 1,
                    total: to,
                });
            }
        }
        if !batch.seq.is_empty() {
            self.insert_batch(s, &mut batch, report)?;
            progress(Progress::Records {
                session: &s.id,
                next: to,
                total: to,
            });
        }
        Ok(())
    }

    fn insert_batch(
        &mut self,
        s: &LocalSession,
        b: &mut Batch,
        report: &mut PushReport,
    ) -> Result<(), ArchiveError> {
        let mut tx = self.client.transaction()?;
        tx.execute(
            "insert into records (session, seq, hash, prev, type, ts, event, line)
             select $1, u.seq, u.hash, u.prev, u.type, u.ts, u.event::jsonb, u.line
             from unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
                         $7::text[], $8::bytea[])
                  with ordinality as u(seq, hash, prev, type, ts, event, line, n)
             order by u.n",
            &[
                &s.id, &b.seq, &b.hash, &b.prev, &b.kind, &b.ts, &b.event, &b.line,
            ],
        )?;
        tx.commit()?;
        report.records_pushed += b.seq.len() as u64;
        report.record_bytes_pushed += b.bytes as u64;
        *b = Batch::default();
        Ok(())
    }

    /// Adds the checkpoints and signature lines the archive lacks and raises the
    /// newest-checkpoint record to the newest local checkpoint, in one transaction: the
    /// record is never ahead of, nor behind, the checkpoints archived with it.
    fn push_checkpoints(
        &mut self,
        s: &LocalSession,
        local: &[LocalCheckpoint],
        kept: &Kept,
        report: &mut PushReport,
    ) -> Result<(), ArchiveError> {
        let mut tx = self.client.transaction()?;
        for c in local {
            let size = c.size as i64;
            if !kept.checkpoints.contains_key(&c.size) {
                tx.execute(
                    "insert into checkpoints (session, size, text) values ($1, $2, $3)
                     on conflict do nothing",
                    &[&s.id, &size, &c.text],
                )?;
                report.checkpoints_pushed += 1;
            }
            let have: Vec<String> = tx
                .query(
                    "select line from checkpoint_signatures where session = $1 and size = $2 order by n",
                    &[&s.id, &size],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            let mut n = have.len() as i32;
            for line in &c.sigs {
                if have.contains(line) {
                    continue;
                }
                tx.execute(
                    "insert into checkpoint_signatures (session, size, n, line) values ($1, $2, $3, $4)",
                    &[&s.id, &size, &n, line],
                )?;
                n += 1;
                report.signatures_pushed += 1;
            }
        }
        if let Some(c) = local.iter().max_by_key(|c| c.size) {
            let size = c.size as i64;
            let root = cairn_tlog::checkpoint::b64(&c.root);
            // Only ever raised: the trigger refuses a smaller size, or another root at
            // the same size, whoever writes.
            tx.execute(
                "insert into checkpoint_newest (session, size, root, text) values ($1, $2, $3, $4)
                 on conflict (session) do update
                 set size = excluded.size, root = excluded.root, text = excluded.text
                 where checkpoint_newest.size < excluded.size",
                &[&s.id, &size, &root, &c.text],
            )?;
        }
        tx.commit()?;
        Ok(())
    }
}

/// Splits items of the given sizes, in order, into runs of at most `count_max` items
/// and `bytes_max` bytes; an item larger than `bytes_max` forms a run of its own.
pub(crate) fn plan_batches(
    sizes: impl IntoIterator<Item = u64>,
    count_max: usize,
    bytes_max: u64,
) -> Vec<std::ops::Range<usize>> {
    assert!(count_max > 0 && bytes_max > 0);
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0usize, 0u64);
    let mut n = 0usize;
    for (i, size) in sizes.into_iter().enumerate() {
        if i > start && (i - start == count_max || bytes + size > bytes_max) {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += size;
        n = i + 1;
    }
    if n > start {
        out.push(start..n);
    }
    out
}

/// Records on their way into one transaction, column by column.
#[derive(Default)]
struct Batch {
    seq: Vec<i64>,
    hash: Vec<String>,
    prev: Vec<String>,
    kind: Vec<Option<String>>,
    ts: Vec<String>,
    event: Vec<Option<String>>,
    line: Vec<Vec<u8>>,
    bytes: usize,
}

#[cfg(test)]
mod tests {
    use super::{jsonb_can_hold, plan_batches};

    fn check(sizes: &[u64], count_max: usize, bytes_max: u64, expected: &[std::ops::Range<usize>]) {
        assert_eq!(
            plan_batches(sizes.iter().copied(), count_max, bytes_max),
            expected,
            "sizes {sizes:?}, count_max {count_max}, bytes_max {bytes_max}"
        );
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // one batch is a list of one range
    fn batches_hold_at_most_their_count_and_bytes_and_a_larger_item_goes_alone() {
        check(&[], 2, 10, &[]);
        // Bytes: at the limit in one batch, one past it splits.
        check(&[4, 6, 1], 10, 10, &[0..2, 2..3]);
        check(&[4, 7, 1], 10, 10, &[0..1, 1..3]);
        // Count: at the limit, then past it.
        check(&[1, 1], 2, 100, &[0..2]);
        check(&[1, 1, 1], 2, 100, &[0..2, 2..3]);
        // An item over the byte limit alone, wherever it is.
        check(&[11], 5, 10, &[0..1]);
        check(&[3, 11, 3], 5, 10, &[0..1, 1..2, 2..3]);
        // Both limits of 1: one item a batch.
        check(&[5, 5, 5], 1, 1, &[0..1, 1..2, 2..3]);
    }

    #[test]
    fn jsonb_cannot_hold_nul_escapes_and_lone_surrogates() {
        assert!(jsonb_can_hold(r#"{"type":"x","text":"a\nb"}"#));
        assert!(!jsonb_can_hold(r#"{"text":"a\u0000b"}"#));
        assert!(!jsonb_can_hold(r#"{"text":"\uD800"}"#));
    }
}
