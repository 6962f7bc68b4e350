//! The embedded index: `$CAIRN_HOME/search.db`, SQLite with an FTS5 table over each
//! document's tokens (ours, in order, one space apart; FTS5's `ascii` tokenizer splits
//! them on the spaces alone and keeps every other byte, so it finds exactly our
//! tokens).
//!
//! It is a cache of the logs: per session folder it keeps the first seq not indexed,
//! the hash of the record before it and the log's length then, so an update reads
//! only what a log grew by, and skips a log whose length did not change. A log that
//! no longer holds the record indexed last (cut by a power loss, then written on by a
//! resumed session) is indexed again from its start, its old documents dropped: an
//! update checks that record whenever the log's length changed, and the background
//! indexer when the records it is handed start before the index's position. (A log
//! cut and written on to exactly the length indexed is found so at its next record.)
//! Each session's new documents and its new position are written in one transaction:
//! an interrupted update leaves the index as it was before that session, and two
//! processes updating at once index each record once. An index of layout 3 or 4 is
//! brought forward; one of any other layout ([`SEARCH_SCHEMA_VERSION`]) is dropped and
//! rebuilt.
//!
//! A document's rowid orders it: the newer its session's [`session_key`], the lower
//! the high bits, and below them a number handed out upwards as documents are added
//! ([`SEARCH_KEY_DOCS_MAX`] per key). FTS5 yields matches by rowid without sorting:
//! newest session first and, within a session, by seq (a session's records are
//! indexed in seq order). Only sessions sharing a key (started within one
//! millisecond) interleave; the search orders those itself. Rowids also ascend as an
//! update adds them (it takes sessions newest first): FTS5 writes its pending terms
//! out whenever a rowid is lower than the one before, so descending rowids would
//! make a segment per document. No positions or counts are kept (`detail = none`,
//! `columnsize = 0`: phrases are checked on the text), so each distinct token of a
//! document is given once; prefixes of 2, 3 and 4 characters
//! ([`SEARCH_PREFIX_CHARS`]) have their own lists, so such a prefix reads one list,
//! streamed in rowid order and stopped at the limit, not every word it begins. A
//! 1-character prefix, or one of 5 characters or more, makes FTS5 merge the lists
//! of every word it begins before the first match (5 characters begin few words).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_store::LogReader;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use cairn_core::Record;

use crate::doc::{DocMaker, Known, OpenCommands, SessionDocs, SessionMeta};
use crate::error::{Error, Result};
use crate::hit::{Candidate, Filter, Hit, precedes, session_key};
use crate::query::{Query, SEARCH_TOKEN_BYTES_MAX};

/// The most session folders [`Index::update`] looks up one by one; more, and it reads
/// every session's indexed length in one query.
const SEARCH_KNOWN_ONE_BY_ONE_MAX: usize = 256;

/// The index's file in the home.
pub const INDEX_FILE: &str = "search.db";

/// How long a writer waits for another process's transaction on the index.
pub const SEARCH_BUSY_TIMEOUT_MS: u64 = 10_000;

/// The layout of `search.db`; an index of another is rebuilt from the logs.
pub const SEARCH_SCHEMA_VERSION: i64 = 5;

/// The earlier layouts an index is brought forward from rather than rebuilt, with the
/// columns they lack: 3 lacks `sessions.open_commands` (added empty: a position it kept
/// between a command's end and its call's end indexes that call's output as the tool's
/// text) and 3 and 4 lack `sessions.last_hash` (added empty: each session is indexed
/// again once, its last record's hash being unknown).
const SEARCH_SCHEMA_VERSIONS_MIGRATED: [(i64, &str); 2] = [
    (
        3,
        "ALTER TABLE sessions ADD COLUMN open_commands TEXT;
         ALTER TABLE sessions ADD COLUMN last_hash TEXT;",
    ),
    (4, "ALTER TABLE sessions ADD COLUMN last_hash TEXT;"),
];

/// The prefix lengths, in characters, that have their own lists in the FTS5 table
/// (version 2 had `2 3`: a prefix of 4 characters, `w123*`, took 655 ms on 610,000
/// documents).
pub const SEARCH_PREFIX_CHARS: &str = "2 3 4";

/// The most bytes of document text one transaction of [`Index::update`] adds before
/// it commits (a session is never split): fewer, larger FTS5 segments.
pub const SEARCH_BATCH_BYTES_MAX: usize = 16 * 1024 * 1024;

/// The terms FTS5 gathers in memory before it writes them as a segment (its default
/// is 1 MiB): fewer segments to merge while a large home is indexed.
const SEARCH_FTS_HASH_BYTES: usize = 16 * 1024 * 1024;

/// Bits of a rowid below the session key.
const DOC_BITS: u32 = 22;

/// The most documents of sessions sharing one [`session_key`] (started in the same
/// millisecond) the index holds: 4,194,304.
pub const SEARCH_KEY_DOCS_MAX: i64 = 1 << DOC_BITS;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    dir TEXT PRIMARY KEY,
    id TEXT NOT NULL,
    project TEXT NOT NULL,
    workspace TEXT NOT NULL,
    next_seq INTEGER NOT NULL,
    log_bytes INTEGER NOT NULL,
    open_commands TEXT,
    last_hash TEXT
);
CREATE TABLE IF NOT EXISTS docs (
    id INTEGER PRIMARY KEY,
    session TEXT NOT NULL,
    project TEXT NOT NULL,
    workspace TEXT NOT NULL,
    seq INTEGER NOT NULL,
    call TEXT,
    tool TEXT,
    kind TEXT NOT NULL,
    ts TEXT NOT NULL,
    ts_us INTEGER NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (session, seq)
);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(
    terms, content = '', detail = none, columnsize = 0, tokenize = 'ascii', prefix = 'PREFIX'
);
";

/// The candidates of a search (`?1` the FTS5 query, then the filters), by rowid: FTS5
/// yields them in that order, so nothing is sorted.
const SEARCH_SQL: &str = "SELECT docs_fts.rowid, d.session, d.seq
     FROM docs_fts JOIN docs d ON d.id = docs_fts.rowid
     WHERE docs_fts MATCH ?1
       AND (?2 IS NULL OR d.project = ?2 OR d.workspace = ?2)
       AND (?3 IS NULL OR d.tool = ?3)
       AND (?4 IS NULL OR d.ts_us >= ?4)
     ORDER BY docs_fts.rowid";

/// The largest [`session_key`].
const KEY_MAX: i64 = (1 << crate::hit::SESSION_KEY_BITS) - 1;

/// The first rowid of the documents of key `key`: newer keys come first.
fn key_base(key: i64) -> i64 {
    (KEY_MAX - key) << DOC_BITS
}

/// The key of a document's rowid.
fn key_of(rowid: i64) -> i64 {
    KEY_MAX - (rowid >> DOC_BITS)
}

/// The rowid of the next document of key `key`, after `highest` (the highest rowid
/// of that key so far); `None` when the key holds [`SEARCH_KEY_DOCS_MAX`] documents.
fn next_rowid(key: i64, highest: Option<i64>) -> Option<i64> {
    let base = key_base(key);
    let next = highest.map_or(base, |h| h + 1);
    (next <= base + (SEARCH_KEY_DOCS_MAX - 1)).then_some(next)
}

/// Every session folder of the home at `root` (`projects/*/sessions/*`), from the
/// listings of its folders alone: [`Index::update`] then `stat`s each log once (a
/// folder without one is skipped there), where listing sessions as the engine does
/// checks each log first (two `stat`s per session). A session being created (its
/// folder named unborn by the store) is not one yet.
pub fn home_session_dirs(root: &Path) -> Vec<PathBuf> {
    let list = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| !cairn_store::is_unborn(&e.file_name()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for project in list(&root.join("projects")) {
        out.extend(list(&project.join("sessions")));
    }
    out
}

/// The embedded search index.
pub struct Index {
    conn: Connection,
    path: PathBuf,
}

/// What an update did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Updated {
    /// Sessions that had new records.
    pub sessions: u64,
    /// Documents added.
    pub docs: u64,
    /// Sessions that could not be read, each with why; the others were indexed.
    pub problems: Vec<(PathBuf, String)>,
    /// Whether [`Index::catch_up`] listed every session of the home (no written set
    /// to go by yet), rather than the sessions marked as written.
    pub listed_home: bool,
}

impl Index {
    /// Opens (creating when missing) the index at `path`; an index of another
    /// [`SEARCH_SCHEMA_VERSION`] is emptied, to be filled again from the logs.
    pub fn open(path: &Path) -> Result<Index> {
        let sq = |source| Error::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(sq)?;
        conn.busy_timeout(Duration::from_millis(SEARCH_BUSY_TIMEOUT_MS))
            .map_err(sq)?;
        // A cache of the logs: a commit lost in a power cut is indexed again, so
        // commits need not wait for the disk (WAL keeps the file consistent).
        // 16 KiB pages before anything is written (a no-op on an index that exists):
        // documents of a few KiB waste half of 4 KiB pages.
        conn.execute_batch(
            "PRAGMA page_size = 16384; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;",
        )
        .map_err(sq)?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sq)?;
        if version != SEARCH_SCHEMA_VERSION {
            // Looked at again inside the transaction: another process may have laid
            // the index out since (laying it out again would drop what it committed).
            let tx = rusqlite::Transaction::new_unchecked(&conn, TransactionBehavior::Immediate)
                .map_err(sq)?;
            let version: i64 = tx
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(sq)?;
            let migrated = SEARCH_SCHEMA_VERSIONS_MIGRATED
                .iter()
                .find(|(v, _)| *v == version);
            if let Some((_, columns)) = migrated {
                tx.execute_batch(&format!(
                    "{columns}
                     PRAGMA user_version = {SEARCH_SCHEMA_VERSION};"
                ))
                .map_err(sq)?;
            } else if version != SEARCH_SCHEMA_VERSION {
                let schema = SCHEMA.replace("PREFIX", SEARCH_PREFIX_CHARS);
                tx.execute_batch(&format!(
                    "DROP TABLE IF EXISTS docs_fts;
                     DROP TABLE IF EXISTS docs;
                     DROP TABLE IF EXISTS sessions;
                     {schema}
                     INSERT INTO docs_fts (docs_fts, rank) VALUES ('hashsize', {SEARCH_FTS_HASH_BYTES});
                     PRAGMA user_version = {SEARCH_SCHEMA_VERSION};"
                ))
                .map_err(sq)?;
            }
            tx.commit().map_err(sq)?;
        }
        Ok(Index {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn sq(&self) -> impl Fn(rusqlite::Error) -> Error + '_ {
        |source| Error::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Brings every session folder of `dirs` up to date; a session that cannot be read
    /// is listed in `problems` and the others go on. A log whose length is the one
    /// indexed, or a folder with no log, is skipped after one `stat`. Sessions are written in transactions of
    /// up to [`SEARCH_BATCH_BYTES_MAX`] bytes of text (each session whole in one).
    pub fn update(&mut self, dirs: impl IntoIterator<Item = PathBuf>) -> Result<Updated> {
        let dirs: Vec<PathBuf> = dirs.into_iter().collect();
        let known = self.indexed_lengths(&dirs)?;
        let mut out = Updated::default();
        let path = self.path.clone();
        let sq = sql_at(&path);
        // One `stat` per folder: a folder without a log is no session (yet) and is
        // skipped; a log of the length indexed has nothing new.
        let mut changed = dirs
            .into_iter()
            .filter(|dir| {
                let len = match std::fs::metadata(cairn_store::log_path(dir)) {
                    Ok(m) => m.len(),
                    Err(e) => {
                        use std::io::ErrorKind::{NotADirectory, NotFound};
                        return !matches!(e.kind(), NotFound | NotADirectory);
                    }
                };
                known.get(dir.to_string_lossy().as_ref()) != Some(&len)
            })
            .collect::<Vec<_>>();
        // Newest session first (a session folder is named by its id): the rowids of
        // one transaction then ascend.
        changed.sort_by_cached_key(|dir| {
            let id = dir.file_name().map(|n| n.to_string_lossy().into_owned());
            std::cmp::Reverse(id.as_deref().map_or(0, session_key))
        });
        let mut changed = changed.into_iter().peekable();
        while changed.peek().is_some() {
            let tx = begin_write(&mut self.conn, &path)?;
            let mut bytes = 0;
            while bytes < SEARCH_BATCH_BYTES_MAX {
                let Some(dir) = changed.next() else {
                    break;
                };
                match update_in(&tx, &path, &dir) {
                    Ok((0, _)) => {}
                    Ok((n, b)) => {
                        out.sessions += 1;
                        out.docs += n;
                        bytes += b;
                    }
                    Err(Error::Sqlite { path, source }) => {
                        return Err(Error::Sqlite { path, source });
                    }
                    Err(e) => out.problems.push((dir, e.to_string())),
                }
            }
            tx.commit().map_err(&sq)?;
        }
        Ok(out)
    }

    /// The log length the index holds of each of `dirs` it holds (keyed by the
    /// folder as a string; more folders may be in it): in one query for many folders,
    /// one by one for a few (a catch-up by the written set, where reading every
    /// session's would cost more than the rest).
    fn indexed_lengths(&self, dirs: &[PathBuf]) -> Result<HashMap<String, u64>> {
        if dirs.len() > SEARCH_KNOWN_ONE_BY_ONE_MAX {
            let mut st = self
                .conn
                .prepare("SELECT dir, log_bytes FROM sessions")
                .map_err(self.sq())?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(self.sq())?;
            return rows.collect::<rusqlite::Result<_>>().map_err(self.sq());
        }
        let mut known = HashMap::new();
        for d in dirs {
            if let Some(b) = self.indexed_bytes(d)? {
                known.insert(d.to_string_lossy().into_owned(), b);
            }
        }
        Ok(known)
    }

    /// Brings the index up to date with the home at `home`, as `cairn search` does
    /// before it answers: only the sessions its written set marks
    /// ([`cairn_store::written`]), or, when no reader has listed the home since marks
    /// began to be kept (or the index holds no session), every session folder of the
    /// home. Then the mark of each session indexed whole, with no writer, is cleared.
    pub fn catch_up(&mut self, home: &Path) -> Result<Updated> {
        let written = cairn_store::written::Written::at(home);
        let listed_home = !written.is_complete() || !self.has_sessions()?;
        let dirs = if listed_home {
            // Before the listing: a writer that opens a log from now on marks it.
            written.begin()?;
            home_session_dirs(home)
        } else {
            written.list()?
        };
        let mut out = self.update(dirs)?;
        out.listed_home = listed_home;
        let locks = cairn_store::written::Locks::read();
        for dir in written.list()? {
            if out.problems.iter().any(|(d, _)| *d == dir) {
                continue;
            }
            written.clear(&dir, self.indexed_bytes(&dir)?, &locks)?;
        }
        if listed_home {
            written.set_complete()?;
        }
        Ok(out)
    }

    /// Whether the index holds a session.
    pub fn has_sessions(&self) -> Result<bool> {
        self.conn
            .query_row("SELECT EXISTS (SELECT 1 FROM sessions)", [], |r| r.get(0))
            .map_err(self.sq())
    }

    /// The length of session folder `dir`'s log the index holds (`None`: none of it).
    pub fn indexed_bytes(&self, dir: &Path) -> Result<Option<u64>> {
        let key = dir.to_string_lossy().into_owned();
        self.conn
            .prepare_cached("SELECT log_bytes FROM sessions WHERE dir = ?1")
            .and_then(|mut st| st.query_row([&key], |r| r.get(0)).optional())
            .map_err(self.sq())
    }

    /// Adds, in one transaction, what a writer of session folder `dir` handed the
    /// background indexer since the last call: `records` (those that make or feed a
    /// document, in seq order, each with the log's length after it), every record
    /// from seq `from` on having been handed; `end` the position after the writer's
    /// last record, when it is done. What the index lacks before `from` is read from
    /// the log first; documents a catch-up added meanwhile are not added twice.
    /// `maker` keeps the session's calls between calls. Returns the documents added.
    pub(crate) fn add_handed(
        &mut self,
        dir: &Path,
        maker: &mut Option<DocMaker>,
        from: u64,
        records: &[(Record, u64)],
        end: Option<(u64, u64)>,
    ) -> Result<u64> {
        let path = self.path.clone();
        let sq = sql_at(&path);
        let tx = begin_write(&mut self.conn, &path)?;
        let mut known = known_session(&tx, &path, dir)?;
        let mut added = 0;
        // Records handed from before the index's position: a catch-up went ahead
        // meanwhile, or the log was cut (a power loss) and this writer writes on from
        // the cut. The log tells which.
        if let Some(k) = &known
            && k.next_seq > from
            && !still_holds(dir, k)?
        {
            forget(&tx, &path, dir, &k.meta.id)?;
            *maker = None;
            known = None;
        }
        if known.as_ref().map_or(0, |k| k.next_seq) < from {
            added += update_in(&tx, &path, dir)?.0;
            known = known_session(&tx, &path, dir)?;
        }
        let next_seq = known.as_ref().map_or(0, |k| k.next_seq);
        if next_seq < from {
            return Err(Error::Session {
                path: dir.to_path_buf(),
                what: format!(
                    "the index holds it up to seq {next_seq}, its log no further, and the records handed start at {from}"
                ),
            });
        }
        if maker.is_none() {
            let known = match known {
                Some(k) => k.known(&tx).map_err(&sq)?,
                None => Known::default(),
            };
            *maker = Some(DocMaker::new(dir, known)?);
        }
        let Some(m) = maker.as_mut() else {
            unreachable!("made above")
        };
        let mut docs = Vec::new();
        for (r, _) in records {
            // Every record goes through, for the calls and commands it names.
            if let Some(d) = m.push(r)?
                && d.seq >= next_seq
            {
                docs.push(d);
            }
        }
        let last = records.last().map(|(r, b)| (r.seq + 1, *b));
        let position = match (last, end) {
            (Some(l), Some(e)) => Some(if e.0 >= l.0 { e } else { l }),
            (l, e) => l.or(e),
        };
        if let Some((to, log_bytes)) = position
            && to > next_seq
        {
            let last_hash = match records.last() {
                Some((r, _)) if r.seq + 1 == to => Some(r.hash),
                // The writer's last record makes no document: read from the log.
                _ => LogReader::open(dir)
                    .ok()
                    .and_then(|l| l.get(to - 1).ok().flatten())
                    .map(|r| r.hash),
            };
            let docs = SessionDocs {
                session: m.session.clone(),
                docs,
                next_seq: to,
                last_hash,
                stopped: None,
                open_commands: m.commands.clone(),
            };
            added += store_docs(&tx, &path, dir, &docs, log_bytes)?;
        }
        tx.commit().map_err(&sq)?;
        Ok(added)
    }

    /// Indexes what the log in session folder `dir` holds past what is indexed, in one
    /// transaction; returns the number of documents added.
    pub fn update_session(&mut self, dir: &Path) -> Result<u64> {
        let path = self.path.clone();
        let sq = sql_at(&path);
        let tx = begin_write(&mut self.conn, &path)?;
        let (n, _) = update_in(&tx, &path, dir)?;
        tx.commit().map_err(&sq)?;
        Ok(n)
    }

    /// The documents the index holds.
    pub fn doc_count(&self) -> Result<u64> {
        self.conn
            .query_row("SELECT count(*) FROM docs", [], |r| r.get(0))
            .map_err(self.sq())
    }

    /// The first seq not yet indexed of session folder `dir` (0 when unknown).
    pub fn indexed_to(&self, dir: &Path) -> Result<u64> {
        let key = dir.to_string_lossy().into_owned();
        Ok(self
            .conn
            .query_row(
                "SELECT next_seq FROM sessions WHERE dir = ?1",
                [&key],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.sq())?
            .unwrap_or(0))
    }

    /// The documents matching `q` that pass `f`, in order, at most `f.limit`.
    ///
    /// FTS5 yields candidates by rowid descending, i.e. in the order of hits except
    /// among sessions sharing a key; each candidate that could still be among the
    /// first `f.limit` is checked on its text ([`Query::find`]) and kept in order. The
    /// search stops at the first candidate of a key older than the last kept hit's
    /// once `f.limit` hits are kept: no candidate is sorted, none past them is read.
    pub fn search(&self, q: &Query, f: &Filter) -> Result<Vec<Hit>> {
        f.check()?;
        let limit = f.limit as usize;
        let mut st = self.conn.prepare_cached(SEARCH_SQL).map_err(self.sq())?;
        let mut doc = self
            .conn
            .prepare_cached(
                "SELECT project, workspace, call, tool, kind, ts, body FROM docs WHERE id = ?1",
            )
            .map_err(self.sq())?;
        let mut rows = st
            .query(params![fts_match(q), f.project, f.tool, f.since_us])
            .map_err(self.sq())?;
        // The hits so far, in order, with their keys; at most `limit`.
        let mut top: Vec<(i64, Hit)> = Vec::new();
        while let Some(r) = rows.next().map_err(self.sq())? {
            let rowid: i64 = r.get(0).map_err(self.sq())?;
            let session: String = r.get(1).map_err(self.sq())?;
            let seq: u64 = r.get(2).map_err(self.sq())?;
            let key = key_of(rowid);
            let at = (key, session.as_str(), seq);
            if top.len() == limit {
                let (wk, w) = &top[limit - 1];
                if key < *wk {
                    break;
                }
                if !precedes(at, (*wk, &w.session, w.seq)) {
                    continue;
                }
            }
            let c = doc
                .query_row([rowid], |d| {
                    Ok(Candidate {
                        session: session.clone(),
                        project: d.get(0)?,
                        workspace: d.get(1)?,
                        seq,
                        call: d.get(2)?,
                        tool: d.get(3)?,
                        kind: d.get(4)?,
                        time: d.get(5)?,
                        text: d.get(6)?,
                    })
                })
                .map_err(self.sq())?;
            if let Some(h) = c.hit(q) {
                let i = top.partition_point(|(k, t)| precedes((*k, &t.session, t.seq), at));
                top.insert(i, (key, h));
                top.truncate(limit);
            }
        }
        Ok(top.into_iter().map(|(_, h)| h).collect())
    }
}

/// The error maker of the index at `path`.
fn sql_at(path: &Path) -> impl Fn(rusqlite::Error) -> Error + '_ {
    move |source| Error::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

/// A write transaction on `conn`, the index at `path`, taken at once (before any
/// position is read: see [`update_in`]).
fn begin_write<'c>(conn: &'c mut Connection, path: &Path) -> Result<rusqlite::Transaction<'c>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_at(path))
}

/// Indexes, inside the caller's transaction `tx` on the index at `path`, what the log
/// in session folder `dir` holds past what is indexed; returns the documents added
/// and the bytes of their text. The transaction is taken before the position is read,
/// so two processes updating at once add each document once.
fn update_in(tx: &rusqlite::Transaction, path: &Path, dir: &Path) -> Result<(u64, usize)> {
    let sq = |source| Error::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let log = cairn_store::log_path(dir);
    let log_bytes = std::fs::metadata(&log)
        .map_err(|source| Error::Io {
            path: log.clone(),
            source,
        })?
        .len();
    let mut known = known_session(tx, path, dir)?;
    if known.as_ref().is_some_and(|k| k.log_bytes == log_bytes) {
        return Ok((0, 0));
    }
    if let Some(k) = &known
        && !still_holds(dir, k)?
    {
        forget(tx, path, dir, &k.meta.id)?;
        known = None;
    }
    let (known, from) = match known {
        Some(k) => {
            let from = k.next_seq;
            (k.known(tx).map_err(&sq)?, from)
        }
        None => (Known::default(), 0),
    };
    let docs = SessionDocs::read_from(dir, from, known)?;
    if docs.next_seq == from {
        return Ok((0, 0));
    }
    let n = store_docs(tx, path, dir, &docs, log_bytes)?;
    Ok((n, docs.docs.iter().map(|d| d.text.len()).sum()))
}

/// Whether the log of session folder `dir` still holds the record the index `k` of it
/// was read to: the record before `k.next_seq`, with the hash the index kept.
fn still_holds(dir: &Path, k: &Stored) -> Result<bool> {
    let Some(last) = k.next_seq.checked_sub(1) else {
        return Ok(true);
    };
    let Some(hash) = k.last_hash else {
        return Ok(false);
    };
    // A log shorter than the record, or damaged before it, does not hold it either.
    let record = LogReader::open(dir)
        .ok()
        .and_then(|r| r.get(last).ok().flatten());
    Ok(record.is_some_and(|r| r.hash == hash))
}

/// Drops what the index holds of session folder `dir` (session `id`): its documents,
/// their terms and its position, so that it is indexed again from its log's start.
fn forget(tx: &rusqlite::Transaction, path: &Path, dir: &Path, id: &str) -> Result<()> {
    let sq = sql_at(path);
    let docs: Vec<(i64, String)> = {
        let mut st = tx
            .prepare_cached("SELECT id, body FROM docs WHERE session = ?1")
            .map_err(&sq)?;
        st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(&sq)?
    };
    // A contentless FTS5 table forgets a row when told the terms it was given.
    let mut fts = tx
        .prepare_cached("INSERT INTO docs_fts (docs_fts, rowid, terms) VALUES ('delete', ?1, ?2)")
        .map_err(&sq)?;
    for (rowid, body) in &docs {
        fts.execute(params![rowid, fts_terms(body)]).map_err(&sq)?;
    }
    tx.execute("DELETE FROM docs WHERE session = ?1", [id])
        .map_err(&sq)?;
    tx.execute(
        "DELETE FROM sessions WHERE dir = ?1",
        [dir.to_string_lossy()],
    )
    .map_err(&sq)?;
    Ok(())
}

/// A session as the index holds it.
struct Stored {
    meta: SessionMeta,
    /// The first seq not indexed.
    next_seq: u64,
    /// The log's length then.
    log_bytes: u64,
    /// The hash of the record before `next_seq` (`None`: unknown, in an index brought
    /// forward from a layout that did not keep it).
    last_hash: Option<cairn_store::Hash>,
    /// The commands finished before `next_seq` whose calls had not.
    commands: OpenCommands,
}

impl Stored {
    /// What an update from `next_seq` starts with: the session, its commands still
    /// open and the tool of each call indexed.
    fn known(self, conn: &Connection) -> rusqlite::Result<Known> {
        Ok(Known {
            tools: call_tools(conn, &self.meta.id)?,
            meta: Some(self.meta),
            commands: self.commands,
        })
    }
}

/// The session of folder `dir` as the index holds it.
fn known_session(conn: &Connection, path: &Path, dir: &Path) -> Result<Option<Stored>> {
    let key = dir.to_string_lossy().into_owned();
    let row = conn
        .query_row(
            "SELECT id, project, workspace, next_seq, log_bytes, open_commands, last_hash FROM sessions WHERE dir = ?1",
            [&key],
            |r| {
                Ok((
                    SessionMeta {
                        id: r.get(0)?,
                        project: r.get(1)?,
                        workspace: r.get(2)?,
                    },
                    r.get(3)?,
                    r.get(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, Option<String>>(6)?,
                ))
            },
        )
        .optional()
        .map_err(|source| Error::Sqlite {
            path: path.to_path_buf(),
            source,
        })?;
    let Some((meta, next_seq, log_bytes, commands, last_hash)) = row else {
        return Ok(None);
    };
    let commands = match commands {
        None => OpenCommands::new(),
        Some(text) => serde_json::from_str(&text).map_err(|e| Error::Session {
            path: dir.to_path_buf(),
            what: format!(
                "the index's open commands of it do not parse ({e}); delete {} to index every session again",
                path.display()
            ),
        })?,
    };
    Ok(Some(Stored {
        meta,
        next_seq,
        log_bytes,
        // A hash that does not read is unknown: the session is indexed again.
        last_hash: last_hash.and_then(|h| cairn_store::Hash::from_hex(h.as_bytes())),
        commands,
    }))
}

/// Adds a session's new documents and its new position (`docs.next_seq`, the log's
/// length `log_bytes` then), inside the caller's transaction; returns the documents
/// added.
fn store_docs(
    tx: &rusqlite::Transaction,
    path: &Path,
    dir: &Path,
    docs: &SessionDocs,
    log_bytes: u64,
) -> Result<u64> {
    let sq = |source| Error::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let n = insert(tx, docs).map_err(&sq)?.ok_or_else(|| Error::Session {
        path: dir.to_path_buf(),
        what: format!(
            "the index holds {SEARCH_KEY_DOCS_MAX} documents of sessions started in the same millisecond as this one, the most it can order; it is not indexed"
        ),
    })?;
    let s = &docs.session;
    // None when no command is open (nearly always): nothing to parse on the next
    // update.
    let open_commands = match docs.open_commands.is_empty() {
        true => None,
        false => Some(
            serde_json::to_string(&docs.open_commands).map_err(|e| Error::Session {
                path: dir.to_path_buf(),
                what: format!("its open commands do not serialise: {e}"),
            })?,
        ),
    };
    tx.execute(
        "INSERT INTO sessions (dir, id, project, workspace, next_seq, log_bytes, open_commands, last_hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (dir) DO UPDATE SET next_seq = ?5, log_bytes = ?6, open_commands = ?7, last_hash = ?8",
        params![
            dir.to_string_lossy(),
            s.id,
            s.project,
            s.workspace,
            docs.next_seq,
            log_bytes,
            open_commands,
            docs.last_hash.map(|h| h.to_hex()),
        ],
    )
    .map_err(&sq)?;
    Ok(n)
}

/// The tool of each call of a session, from its indexed inputs.
fn call_tools(conn: &Connection, session: &str) -> rusqlite::Result<HashMap<String, String>> {
    let mut st = conn.prepare_cached(
        "SELECT call, tool FROM docs WHERE session = ?1 AND kind = 'input' AND call IS NOT NULL AND tool IS NOT NULL",
    )?;
    let rows = st.query_map([session], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// Inserts a session's documents; returns how many were new, or `None` when their
/// key has no room for them all (nothing inserted then).
fn insert(tx: &rusqlite::Transaction, docs: &SessionDocs) -> rusqlite::Result<Option<u64>> {
    let s = &docs.session;
    let key = session_key(&s.id);
    let base = key_base(key);
    let mut highest: Option<i64> = tx.query_row(
        "SELECT max(id) FROM docs WHERE id BETWEEN ?1 AND ?2",
        params![base, base + (SEARCH_KEY_DOCS_MAX - 1)],
        |r| r.get(0),
    )?;
    // Room for every document first: a session is indexed whole or not at all.
    let room = highest.map_or(SEARCH_KEY_DOCS_MAX, |h| {
        (base + (SEARCH_KEY_DOCS_MAX - 1)) - h
    });
    if docs.docs.len() as i64 > room {
        return Ok(None);
    }
    let mut doc = tx.prepare_cached(
        "INSERT OR IGNORE INTO docs (id, session, project, workspace, seq, call, tool, kind, ts, ts_us, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
    let mut fts = tx.prepare_cached("INSERT INTO docs_fts (rowid, terms) VALUES (?1, ?2)")?;
    let mut n = 0;
    let (mut terms, mut all) = (String::new(), String::new());
    for d in &docs.docs {
        let Some(rowid) = next_rowid(key, highest) else {
            return Ok(None);
        };
        let added = doc.execute(params![
            rowid,
            s.id,
            s.project,
            s.workspace,
            d.seq,
            d.call,
            d.tool,
            d.kind.as_str(),
            d.ts,
            d.ts_us,
            d.text
        ])?;
        if added == 1 {
            fts_terms_into(&d.text, &mut terms, &mut all);
            fts.execute(params![rowid, terms])?;
            highest = Some(rowid);
            n += 1;
        }
    }
    Ok(Some(n))
}

/// The FTS5 query of `q`'s terms: `"a" AND "b"*`.
fn fts_match(q: &Query) -> String {
    q.terms()
        .iter()
        .map(|t| {
            format!(
                "\"{}\"{}",
                t.text.replace('"', "\"\""),
                if t.prefix { "*" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// The FTS5 text of a document: each distinct index form of its tokens once, in the
/// order they first occur, one space apart. The FTS5 table keeps neither positions nor
/// counts, so a repeated token would only cost another lookup.
pub fn fts_terms(text: &str) -> String {
    let (mut out, mut all) = (String::new(), String::new());
    fts_terms_into(text, &mut out, &mut all);
    out
}

/// [`fts_terms`] into `out` (cleared first), `all` holding every token meanwhile.
fn fts_terms_into(text: &str, out: &mut String, all: &mut String) {
    index_forms_into(text, all);
    out.clear();
    out.reserve(all.len());
    let mut seen = std::collections::HashSet::with_capacity(all.len() / 8);
    for t in all.split(' ').filter(|t| !t.is_empty()) {
        if seen.insert(t) {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(t);
        }
    }
}

/// Every token's index form in order, one space apart, into `out` (cleared first),
/// without a string per token: each token's lower-cased characters are written while
/// they fit in [`SEARCH_TOKEN_BYTES_MAX`] bytes (what [`crate::query::index_form`]
/// keeps).
fn index_forms_into(text: &str, out: &mut String) {
    out.clear();
    out.reserve(text.len());
    // Bytes of the current token written; `None` between tokens.
    let mut len: Option<usize> = None;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            len = None;
            continue;
        }
        let n = len.get_or_insert_with(|| {
            if !out.is_empty() {
                out.push(' ');
            }
            0
        });
        for l in c.to_lowercase() {
            if *n + l.len_utf8() > SEARCH_TOKEN_BYTES_MAX {
                // Past the cut: the rest of this token is not indexed.
                *n = SEARCH_TOKEN_BYTES_MAX + 1;
                break;
            }
            *n += l.len_utf8();
            out.push(l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{index_form, tokens};

    #[test]
    fn fts_terms_are_the_distinct_index_forms_of_the_tokens() {
        let long = format!(
            "{}é{}",
            "a".repeat(SEARCH_TOKEN_BYTES_MAX - 1),
            "b".repeat(9)
        );
        for text in [
            "",
            "  Cargo TEST: 12 passed\n cargo test again",
            "naïve-résumé x.y@example.org ÉTÉ İstanbul ß",
            long.as_str(),
            &format!("{long} {long}x tail"),
        ] {
            let mut want: Vec<String> = Vec::new();
            for t in tokens(text) {
                let f = index_form(&t.text).to_string();
                if !want.contains(&f) {
                    want.push(f);
                }
            }
            assert_eq!(fts_terms(text), want.join(" "), "{text:?}");
        }
    }

    /// An index file laid out as version `version` (the sessions table of version 4,
    /// with no `last_hash`, for version 4; else that of version 3, with no
    /// `open_commands` either), holding one session.
    fn old_index(path: &Path, version: i64) {
        let conn = Connection::open(path).unwrap_or_else(|e| panic!("{e}"));
        let v4 = SCHEMA.replace("PREFIX", SEARCH_PREFIX_CHARS).replace(
            "open_commands TEXT,\n    last_hash TEXT",
            "open_commands TEXT",
        );
        let v3 = v4.replace(
            "log_bytes INTEGER NOT NULL,\n    open_commands TEXT",
            "log_bytes INTEGER NOT NULL",
        );
        assert!(!v4.contains("last_hash") && !v3.contains("open_commands"));
        let (schema, row) = match version {
            4 => (v4, "('/h/p/sessions/s', 's', 'p', '/w', 7, 700, NULL)"),
            _ => (v3, "('/h/p/sessions/s', 's', 'p', '/w', 7, 700)"),
        };
        conn.execute_batch(&format!(
            "{schema}
             INSERT INTO sessions VALUES {row};
             PRAGMA user_version = {version};"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
    }

    // Versions 3 and 4 are brought forward in place (their sessions kept, the columns
    // they lack added, with no last hash); any other version is laid out anew.
    #[test]
    fn an_index_of_version_3_or_4_gains_its_missing_columns_and_keeps_its_sessions() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = Path::new("/h/p/sessions/s");
        for (version, kept) in [
            (3, true),
            (4, true),
            (2, false),
            (SEARCH_SCHEMA_VERSION + 1, false),
        ] {
            let path = tmp.path().join(format!("v{version}.db"));
            old_index(&path, version);
            let index = Index::open(&path).unwrap_or_else(|e| panic!("{e}"));
            let v: i64 = index
                .conn
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(v, SEARCH_SCHEMA_VERSION);
            assert_eq!(
                index.indexed_to(dir).ok(),
                Some(if kept { 7 } else { 0 }),
                "{version}"
            );
            let known = known_session(&index.conn, &path, dir).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                known.map(|k| (k.log_bytes, k.commands.len(), k.last_hash)),
                kept.then_some((700, 0, None))
            );
            // Opened again: nothing to do.
            drop(index);
            let again = Index::open(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(again.indexed_to(dir).ok(), Some(if kept { 7 } else { 0 }));
        }
    }

    #[test]
    fn open_commands_that_do_not_parse_are_an_error_that_says_how_to_mend_it() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = tmp.path().join("search.db");
        old_index(&path, 3);
        let index = Index::open(&path).unwrap_or_else(|e| panic!("{e}"));
        index
            .conn
            .execute("UPDATE sessions SET open_commands = '{\"c\": [1'", [])
            .unwrap_or_else(|e| panic!("{e}"));
        let err = match known_session(&index.conn, &path, Path::new("/h/p/sessions/s")) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("damaged open commands were taken"),
        };
        assert!(
            err.contains("open commands") && err.contains("delete"),
            "{err}"
        );
    }

    // At the limit the lengths are looked up one by one, past it in one query: both
    // give each folder asked for its indexed length, and none for a folder not held.
    #[test]
    fn indexed_lengths_are_the_same_one_by_one_and_in_one_query() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let index = Index::open(&tmp.path().join("search.db")).unwrap_or_else(|e| panic!("{e}"));
        let held = SEARCH_KNOWN_ONE_BY_ONE_MAX + 10;
        for i in 0..held {
            index
                .conn
                .execute(
                    "INSERT INTO sessions VALUES (?1, ?2, 'p', '/w', 1, ?3, NULL, NULL)",
                    params![format!("/h/s{i}"), format!("s{i}"), 100 + i as i64],
                )
                .unwrap_or_else(|e| panic!("{e}"));
        }
        for n in [SEARCH_KNOWN_ONE_BY_ONE_MAX, SEARCH_KNOWN_ONE_BY_ONE_MAX + 1] {
            // Every other folder asked for is held; the last one is not.
            let mut dirs: Vec<PathBuf> = (0..n - 1)
                .map(|i| PathBuf::from(format!("/h/s{}", 2 * i % held)))
                .collect();
            dirs.push(PathBuf::from("/h/not-held"));
            let known = index
                .indexed_lengths(&dirs)
                .unwrap_or_else(|e| panic!("{e}"));
            for d in &dirs {
                let want = d
                    .to_string_lossy()
                    .strip_prefix("/h/s")
                    .and_then(|i| i.parse::<u64>().ok())
                    .map(|i| 100 + i);
                assert_eq!(
                    known.get(d.to_string_lossy().as_ref()).copied(),
                    want,
                    "{n} {d:?}"
                );
            }
        }
    }

    // Regression guard: a search sorted every candidate before its limit (563 ms for
    // a prefix on 200 sessions). The plan must take FTS5's order as it comes.
    #[test]
    fn a_search_sorts_nothing() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let index = Index::open(&dir.path().join("search.db")).unwrap_or_else(|e| panic!("{e}"));
        let plan: Vec<String> = index
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {SEARCH_SQL}"))
            .and_then(|mut st| {
                st.query_map(params!["\"w1\"*", "p", "t", 0], |r| r.get::<_, String>(3))?
                    .collect()
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!plan.is_empty());
        assert!(
            plan.iter().all(|step| !step.contains("TEMP B-TREE")),
            "{plan:?}"
        );
    }

    #[test]
    fn a_key_holds_up_to_its_limit_of_documents() {
        let base = key_base(5);
        assert_eq!(next_rowid(5, None), Some(base));
        assert_eq!(next_rowid(5, Some(base + 7)), Some(base + 8));
        // At the limit: the last rowid of the key is handed out; past it, none.
        let last = base + (SEARCH_KEY_DOCS_MAX - 1);
        assert_eq!(next_rowid(5, Some(last - 1)), Some(last));
        assert_eq!(next_rowid(5, Some(last)), None);
        assert_eq!(key_of(last), 5);
        // Newer keys first; both ends fit a rowid.
        assert!(key_base(6) + (SEARCH_KEY_DOCS_MAX - 1) < base);
        assert_eq!(key_base(KEY_MAX), 0);
        assert_eq!(key_base(0) + (SEARCH_KEY_DOCS_MAX - 1), i64::MAX);
        assert_eq!((key_of(0), key_of(i64::MAX)), (KEY_MAX, 0));
    }
}
