//! The store's one error type. `Corruption` is kept apart from `Io` so that a caller can
//! tell a broken disk or a permission problem from a log that is not what it claims.

use std::path::PathBuf;

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused an operation on `path`.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The log holds a bad record that is not a torn tail: never repaired silently.
    #[error(
        "{}: corrupt log at {}line {line}, byte offset {offset}: {what} (run `cairn verify` for every problem; the log is left as it is)",
        path.display(),
        seq.map(|s| format!("seq {s}, ")).unwrap_or_default()
    )]
    Corruption {
        path: PathBuf,
        seq: Option<u64>,
        line: u64,
        offset: u64,
        what: String,
    },
    /// Another process holds the writer lock of this log.
    #[error(
        "{}: locked by {} (one writer per session: wait for it to end, or stop it)",
        path.display(),
        pid.map(|p| format!("process {p}")).unwrap_or_else(|| "another process".into())
    )]
    Locked { path: PathBuf, pid: Option<u32> },
    /// The input is not in the expected format (not a log, too large, wrong kind of file).
    #[error("{}: {what}", path.display())]
    Format { path: PathBuf, what: String },
    /// An earlier write or fsync failed; the writer refuses to go on, since what reached
    /// the disk is unknown. Reopen the log to repair and continue.
    #[error("{}: the writer stopped after an earlier failure ({what}); reopen the log to repair it", path.display())]
    Poisoned { path: PathBuf, what: String },
}

/// Shorthand used throughout the store.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attaches a path to an `io::Error`.
pub(crate) trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}
