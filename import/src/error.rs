//! What can stop an import. A line that is not JSON, cut short or too long is a
//! warning in the summary, never an error: only what prevents writing a session is.

use std::path::{Path, PathBuf};

/// An import that could not run.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: neither a Codex rollout nor a Claude Code transcript nor a Gemini CLI chat (no line of these formats in its first {lines} lines)", path.display())]
    UnknownFormat { path: PathBuf, lines: u64 },
    #[error("{}: not OpenCode's session storage ({what}): give its opencode.db", path.display())]
    OpenCodeStore { path: PathBuf, what: String },
    #[error("{}: not an ATIF trajectory (a JSON object with `schema_version` \"ATIF-v…\" and `steps`)", path.display())]
    NotAtif { path: PathBuf },
    #[error("{}: {bytes} bytes, more than the {max} bytes a trajectory may have (line_bytes_max)", path.display())]
    TooLong { path: PathBuf, bytes: u64, max: u64 },
    #[error("{}: no working directory in the file: the session's project cannot be found", path.display())]
    NoWorkspace { path: PathBuf },
    #[error("{}: changed while it was imported (its first {bytes} bytes hash differently the second time): import it again", path.display())]
    Changed { path: PathBuf, bytes: u64 },
    #[error("{}: the chain of rotated segments is longer than {max} files (or loops)", path.display())]
    SegmentChain { path: PathBuf, max: usize },
    #[error("{}: not a session imported by cairn", dir.display())]
    NotImported { dir: PathBuf },
    #[error("hook input: {what}")]
    HookInput { what: String },
    #[error(transparent)]
    Engine(#[from] cairn_tools::EngineError),
    #[error(transparent)]
    Store(#[from] cairn_store::Error),
}

pub type Result<T> = std::result::Result<T, ImportError>;

impl ImportError {
    /// A closure that makes an I/O error about `path`.
    pub fn io(path: &Path) -> impl Fn(std::io::Error) -> ImportError + '_ {
        move |source| ImportError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
