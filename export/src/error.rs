//! The export's errors.

use std::path::PathBuf;

/// What went wrong in an export.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A session's log could not be read.
    #[error("{}: {source}", path.display())]
    Store {
        path: PathBuf,
        source: cairn_store::Error,
    },
    /// A session's log holds no record.
    #[error("{}: the log holds no record: nothing to export", path.display())]
    Empty { path: PathBuf },
    /// A file could not be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The exporter could not be built from the configuration.
    #[error("otlp exporter for {url}: {what}")]
    Exporter { url: String, what: String },
    /// A request to the collector failed.
    #[error("sending spans to {url}: {what}: is the collector running?")]
    Send { url: String, what: String },
}

/// The export's result.
pub type Result<T> = std::result::Result<T, Error>;
