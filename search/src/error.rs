//! What can go wrong while indexing or searching.

use std::path::PathBuf;

/// An error of indexing or searching.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The query does not parse: what is wrong, and how to write it.
    #[error("bad query: {what}")]
    Query { what: String },
    /// A filter does not parse (`since`).
    #[error("bad filter: {what}")]
    Filter { what: String },
    /// A session that cannot be read (not in a project folder, no blob store).
    #[error("{}: {what}", path.display())]
    Session { path: PathBuf, what: String },
    /// The operating system refused an operation on `path`.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The log or blob store refused.
    #[error(transparent)]
    Store(#[from] cairn_store::Error),
    /// The embedded index (`search.db`) refused.
    #[error("search index {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// The PostgreSQL archive refused.
    #[error("archive: {0}")]
    Postgres(#[from] postgres::Error),
}

/// A result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
