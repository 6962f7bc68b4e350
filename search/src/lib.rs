//! Search across sessions: the words of what users and models said and of every call's
//! input and output, on one machine (an embedded SQLite FTS5 index in the home) or in
//! a team's PostgreSQL archive — one query language, the same hits in the same order.
//!
//! - [`doc`]: a session's documents, read from its log and blobs as every reader of a
//!   session reads them (redacted before they were written).
//! - [`query`]: the query language (words, `"phrases"`, `prefix*`), its tokeniser and
//!   the one check of a document both backends end with.
//! - [`sqlite::Index`]: the embedded index, updated per session from where it stopped;
//!   [`sqlite::Index::catch_up`] finds what to update from the home's written set.
//! - [`Indexer`]: the background indexer a session's writer hands its records to, off
//!   the call path.
//! - [`pg`]: the archive's index (`ensure_schema`, `index_session`, `search`).
//!
//! ```no_run
//! # fn main() -> cairn_search::Result<()> {
//! use cairn_search::{Filter, Query, sqlite::Index};
//! let mut index = Index::open(std::path::Path::new("/tmp/search.db"))?;
//! index.update(["/tmp/home/projects/p/sessions/s".into()])?;
//! for hit in index.search(&Query::parse("\"cargo test\" fail*")?, &Filter::default())? {
//!     println!("{} {} {}", hit.short, hit.seq, hit.snippet);
//! }
//! # Ok(())
//! # }
//! ```

pub mod doc;
mod error;
mod hit;
mod indexer;
pub mod pg;
pub mod query;
pub mod sqlite;

pub use doc::{Doc, Kind, Known, OpenCommands, SEARCH_DOC_BYTES_MAX, SessionDocs, SessionMeta};
pub use error::{Error, Result};
pub use hit::{
    Filter, Hit, SEARCH_LIMIT_MAX, SESSION_KEY_BITS, SESSION_KEY_EPOCH_MS, session_key, short,
    since,
};
pub use indexer::{
    Indexer, IndexerLimits, IndexerReport, SEARCH_BATCH_DOCS_MAX, SEARCH_BATCH_MS, SEARCH_DRAIN_MS,
    SEARCH_QUEUE_DOCS_MAX,
};
pub use query::Query;
