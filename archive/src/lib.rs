//! The team archive of cairn: sessions pushed from many machines into one PostgreSQL
//! database, pulled back byte-exact, listed and verified there.
//!
//! What is archived per session: every record (seq, hash, prev, event type, time, the
//! event as `jsonb` for queries, and the record's exact line so that its hash can be
//! checked again), the blobs its records reference (content-addressed by BLAKE3, stored
//! once however many sessions use them), and its checkpoints with their signatures and
//! cosignatures, the newest of them also in a record that only grows. `verify` checks
//! the stored bytes, then the records against every checkpoint held elsewhere (that
//! record, a home's files, witnesses). `docs/ARCHIVE.md` describes the tables, what the
//! database enforces and what someone with the database can and cannot hide.
//!
//! The archive knows no event kind: a record is opaque, as it is to the store, and a
//! blob is referenced wherever a record (or a referenced blob) names its hash.
//!
//! ```no_run
//! use cairn_archive::{Archive, LocalSession, PushOptions};
//! let mut archive = Archive::connect("postgres://cairn@127.0.0.1:5432/cairn")?;
//! let session = LocalSession::at("/home/me/.cairn/projects/p-1a2b/sessions/20261130T120000.000000-abcdef".as_ref())?;
//! let pushed = archive.push(&session, &PushOptions::default(), &mut |_| {})?;
//! println!("{} records pushed", pushed.records_pushed);
//! # Ok::<(), cairn_archive::ArchiveError>(())
//! ```

mod blobs;
pub mod local;
mod pull;
mod push;
pub mod queue;
pub mod schema;
mod verify;
pub mod worker;

use std::path::{Path, PathBuf};

pub use pull::Pulled;
pub use push::{
    BATCH_BYTES_MAX_DEFAULT, BATCH_RECORDS_MAX_DEFAULT, BLOB_BYTES_MAX, LocalSession, Progress,
    PushOptions, PushReport,
};
pub use verify::{ArchiveProblem, VerifyOptions, VerifyReport};

/// A connection to the archive's database for queries of one's own (the search index
/// of `search --in-archive`), its schema left as it is: [`Archive::connect`] migrates
/// it to the archive's.
pub fn open_client(url: &str) -> Result<postgres::Client, ArchiveError> {
    Ok(postgres::Client::connect(url, postgres::NoTls)?)
}

/// A connection to an archive database, its schema checked (and created or migrated
/// when it is older than this build).
pub struct Archive {
    client: postgres::Client,
}

/// What went wrong with the archive, a local session or a pulled one.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("archive database: {}", db_text(.0))]
    Db(#[from] postgres::Error),
    #[error(transparent)]
    Store(#[from] cairn_store::Error),
    #[error(transparent)]
    Tlog(#[from] cairn_tlog::TlogError),
    #[error(transparent)]
    Witness(#[from] cairn_tlog::witness::PushError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "session {session} contradicts the archive at seq {seq}: the local record's hash is {local}, the archived one's {archived}; nothing was pushed"
    )]
    Contradiction {
        session: String,
        seq: u64,
        local: String,
        archived: String,
    },
    #[error(
        "session {session}: the checkpoint of size {size} differs from the archived one; nothing was pushed"
    )]
    CheckpointContradiction { session: String, size: u64 },
    #[error(
        "session {session} contradicts the archive's checkpoint of size {size}: the local records up to seq {seq} have another tree root, so the history differs at or before seq {seq}; nothing was pushed"
    )]
    HistoryContradiction {
        session: String,
        size: u64,
        seq: u64,
    },
    #[error(
        "session {session}: the local checkpoint of size {size} {what}; nothing was pushed (verify the session)"
    )]
    LocalCheckpoint {
        session: String,
        size: u64,
        what: String,
    },
    #[error(
        "the archive's schema is version {found}, newer than this cairn knows ({known}): use a newer cairn"
    )]
    NewerSchema { found: i32, known: i32 },
    #[error("no archived session matches '{0}'")]
    NoSession(String),
    #[error("'{spec}' matches {count} archived sessions ({listed}): give more of the id")]
    Ambiguous {
        spec: String,
        count: usize,
        listed: String,
    },
    #[error("{}: not a session folder (no events.jsonl)", .0.display())]
    NotASession(PathBuf),
    #[error(
        "{}: holds a log that is not a prefix of the archived session; move it away to pull",
        path.display()
    )]
    LocalDiffers { path: PathBuf },
    #[error("{}: not a signed note: {what}", path.display())]
    BadCheckpointFile { path: PathBuf, what: String },
    #[error("blob {hash} of session {session}: {what}")]
    BadBlob {
        session: String,
        hash: String,
        what: String,
    },
    #[error("session {session}, seq {seq}: the archived record is damaged: {what}")]
    BadArchivedRecord {
        session: String,
        seq: u64,
        what: String,
    },
    #[error("{0}")]
    Limit(String),
    #[error("local archive: {0}")]
    Local(String),
}

/// A database error with the server's message, detail and hint, not only its code.
fn db_text(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut t = db.message().to_string();
            if let Some(d) = db.detail() {
                t.push_str(&format!(" ({d})"));
            }
            if let Some(h) = db.hint() {
                t.push_str(&format!("; {h}"));
            }
            t
        }
        None => e.to_string(),
    }
}

pub(crate) fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> ArchiveError + '_ {
    move |source| ArchiveError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One archived session, as `list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Listed {
    pub id: String,
    pub project: String,
    pub records: u64,
    pub first_ts: Option<String>,
    pub last_ts: Option<String>,
    pub blobs: u64,
    pub checkpoints: u64,
}

impl Archive {
    /// Connects (without TLS) and brings the schema up to date.
    pub fn connect(url: &str) -> Result<Archive, ArchiveError> {
        let mut client = postgres::Client::connect(url, postgres::NoTls)?;
        schema::migrate(&mut client)?;
        Ok(Archive { client })
    }

    /// The underlying connection, for queries of one's own.
    pub fn client(&mut self) -> &mut postgres::Client {
        &mut self.client
    }

    /// The archived session an id names, or any part of an id only one session holds.
    pub fn resolve(&mut self, spec: &str) -> Result<(String, String), ArchiveError> {
        if let Some(r) = self
            .client
            .query_opt("select id, project from sessions where id = $1", &[&spec])?
        {
            return Ok((r.get(0), r.get(1)));
        }
        let rows = self.client.query(
            "select id, project from sessions where strpos(id, $1) > 0 order by id desc limit 11",
            &[&spec],
        )?;
        match rows.as_slice() {
            [one] => Ok((one.get(0), one.get(1))),
            [] => Err(ArchiveError::NoSession(spec.to_string())),
            many => {
                let count: i64 = self
                    .client
                    .query_one(
                        "select count(*) from sessions where strpos(id, $1) > 0",
                        &[&spec],
                    )?
                    .get(0);
                let ids: Vec<String> = many.iter().take(10).map(|r| r.get(0)).collect();
                Err(ArchiveError::Ambiguous {
                    spec: spec.to_string(),
                    count: count as usize,
                    listed: ids.join(", "),
                })
            }
        }
    }

    /// The archived sessions, newest id first; with `project`, those whose project key
    /// contains it.
    pub fn list(&mut self, project: Option<&str>) -> Result<Vec<Listed>, ArchiveError> {
        let rows = self.client.query(
            "select s.id, s.project,
                    (select count(*) from records r where r.session = s.id),
                    (select ts from records r where r.session = s.id order by seq asc limit 1),
                    (select ts from records r where r.session = s.id order by seq desc limit 1),
                    (select count(*) from session_blobs b where b.session = s.id),
                    (select count(*) from checkpoints c where c.session = s.id)
             from sessions s
             where $1::text is null or strpos(s.project, $1) > 0
             order by s.id desc",
            &[&project],
        )?;
        Ok(rows
            .iter()
            .map(|r| Listed {
                id: r.get(0),
                project: r.get(1),
                records: r.get::<_, i64>(2) as u64,
                first_ts: r.get(3),
                last_ts: r.get(4),
                blobs: r.get::<_, i64>(5) as u64,
                checkpoints: r.get::<_, i64>(6) as u64,
            })
            .collect())
    }

    /// Every archived session id, oldest first.
    pub fn session_ids(&mut self) -> Result<Vec<String>, ArchiveError> {
        Ok(self
            .client
            .query("select id from sessions order by id", &[])?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }
}
