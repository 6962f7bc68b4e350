//! The embedded index: `$CAIRN_HOME/search.db`, SQLite with an FTS5 table over each
//! document's tokens (ours, in order, so the FTS5 tokeniser finds the same words).
//!
//! It is a cache of the logs: per session folder it keeps the first seq not indexed
//! and the log's length then, so an update reads only what a log grew by, and skips a
//! log whose length did not change. Each session's new documents and its new position
//! are written in one transaction: an interrupted update leaves the index as it was
//! before that session, and two processes updating at once index each record once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::doc::{SessionDocs, SessionMeta};
use crate::error::{Error, Result};
use crate::hit::{Candidate, Filter, Hit, run};
use crate::query::{Query, index_form, tokens};

/// How long a writer waits for another process's transaction on the index.
pub const SEARCH_BUSY_TIMEOUT_MS: u64 = 10_000;

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS sessions (
    dir TEXT PRIMARY KEY,
    id TEXT NOT NULL,
    project TEXT NOT NULL,
    workspace TEXT NOT NULL,
    next_seq INTEGER NOT NULL,
    log_bytes INTEGER NOT NULL
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
    terms, content = '', tokenize = 'unicode61 remove_diacritics 0'
);
";

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
}

impl Index {
    /// Opens (creating when missing) the index at `path`.
    pub fn open(path: &Path) -> Result<Index> {
        let sq = |source| Error::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(sq)?;
        conn.busy_timeout(Duration::from_millis(SEARCH_BUSY_TIMEOUT_MS))
            .map_err(sq)?;
        conn.execute_batch(SCHEMA).map_err(sq)?;
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
    /// is listed in `problems` and the others go on.
    pub fn update(&mut self, dirs: impl IntoIterator<Item = PathBuf>) -> Result<Updated> {
        let mut out = Updated::default();
        for dir in dirs {
            match self.update_session(&dir) {
                Ok(0) => {}
                Ok(n) => {
                    out.sessions += 1;
                    out.docs += n;
                }
                Err(Error::Sqlite { path, source }) => return Err(Error::Sqlite { path, source }),
                Err(e) => out.problems.push((dir, e.to_string())),
            }
        }
        Ok(out)
    }

    /// Indexes what the log in session folder `dir` holds past what is indexed;
    /// returns the number of documents added.
    pub fn update_session(&mut self, dir: &Path) -> Result<u64> {
        let log = cairn_store::log_path(dir);
        let log_bytes = std::fs::metadata(&log)
            .map_err(|source| Error::Io {
                path: log.clone(),
                source,
            })?
            .len();
        let key = dir.to_string_lossy().into_owned();
        let known: Option<(SessionMeta, u64, u64)> = self
            .conn
            .query_row(
                "SELECT id, project, workspace, next_seq, log_bytes FROM sessions WHERE dir = ?1",
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
                    ))
                },
            )
            .optional()
            .map_err(self.sq())?;
        if known.as_ref().is_some_and(|k| k.2 == log_bytes) {
            return Ok(0);
        }
        let (meta, from) = match known {
            Some((m, seq, _)) => (Some(m), seq),
            None => (None, 0),
        };
        let tools = match &meta {
            Some(m) => self.call_tools(&m.id)?,
            None => HashMap::new(),
        };
        let docs = SessionDocs::read_from(dir, from, meta, tools)?;
        if docs.next_seq == from {
            return Ok(0);
        }
        let path = self.path.clone();
        let sq = |source| Error::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&sq)?;
        // Another process may have indexed this session since it was read.
        let now: Option<u64> = tx
            .query_row(
                "SELECT next_seq FROM sessions WHERE dir = ?1",
                [&key],
                |r| r.get(0),
            )
            .optional()
            .map_err(&sq)?;
        if now.unwrap_or(0) != from {
            return Ok(0);
        }
        let n = insert(&tx, &docs).map_err(|source| Error::Sqlite {
            path: path.clone(),
            source,
        })?;
        let s = &docs.session;
        tx.execute(
            "INSERT INTO sessions (dir, id, project, workspace, next_seq, log_bytes)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (dir) DO UPDATE SET next_seq = ?5, log_bytes = ?6",
            params![key, s.id, s.project, s.workspace, docs.next_seq, log_bytes],
        )
        .map_err(&sq)?;
        tx.commit().map_err(&sq)?;
        Ok(n)
    }

    /// The tool of each call of a session, from its indexed inputs.
    fn call_tools(&self, session: &str) -> Result<HashMap<String, String>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT call, tool FROM docs WHERE session = ?1 AND kind = 'input' AND call IS NOT NULL AND tool IS NOT NULL",
            )
            .map_err(self.sq())?;
        let rows = st
            .query_map([session], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(self.sq())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.sq())
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

    /// The documents matching `q` that pass `f`, in order.
    pub fn search(&self, q: &Query, f: &Filter) -> Result<Vec<Hit>> {
        let m = fts_match(q);
        run(q, f, |limit, each| {
            let sql = format!(
                "SELECT d.session, d.project, d.workspace, d.seq, d.call, d.tool, d.kind, d.ts, d.body
                 FROM docs_fts JOIN docs d ON d.id = docs_fts.rowid
                 WHERE docs_fts MATCH ?1
                   AND (?2 IS NULL OR d.project = ?2 OR d.workspace = ?2)
                   AND (?3 IS NULL OR d.tool = ?3)
                   AND (?4 IS NULL OR d.ts_us >= ?4)
                 ORDER BY d.session DESC, d.seq ASC{}",
                limit.map_or(String::new(), |n| format!(" LIMIT {n}"))
            );
            let mut st = self.conn.prepare(&sql).map_err(self.sq())?;
            let mut rows = st
                .query(params![m, f.project, f.tool, f.since_us])
                .map_err(self.sq())?;
            while let Some(r) = rows.next().map_err(self.sq())? {
                let c = Candidate {
                    session: r.get(0).map_err(self.sq())?,
                    project: r.get(1).map_err(self.sq())?,
                    workspace: r.get(2).map_err(self.sq())?,
                    seq: r.get(3).map_err(self.sq())?,
                    call: r.get(4).map_err(self.sq())?,
                    tool: r.get(5).map_err(self.sq())?,
                    kind: r.get(6).map_err(self.sq())?,
                    time: r.get(7).map_err(self.sq())?,
                    text: r.get(8).map_err(self.sq())?,
                };
                if !each(c) {
                    break;
                }
            }
            Ok(())
        })
    }
}

/// Inserts a session's documents; returns how many were new.
fn insert(tx: &rusqlite::Transaction, docs: &SessionDocs) -> rusqlite::Result<u64> {
    let s = &docs.session;
    let mut doc = tx.prepare_cached(
        "INSERT OR IGNORE INTO docs (session, project, workspace, seq, call, tool, kind, ts, ts_us, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    let mut fts = tx.prepare_cached("INSERT INTO docs_fts (rowid, terms) VALUES (?1, ?2)")?;
    let mut n = 0;
    for d in &docs.docs {
        let added = doc.execute(params![
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
            fts.execute(params![tx.last_insert_rowid(), fts_terms(&d.text)])?;
            n += 1;
        }
    }
    Ok(n)
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

/// The FTS5 text of a document: its tokens' index forms in order, one space apart.
pub fn fts_terms(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for t in tokens(text) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(index_form(&t.text));
    }
    out
}
