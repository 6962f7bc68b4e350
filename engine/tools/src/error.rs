//! Engine errors: failures of the engine itself (the log, the blob store, bad
//! configuration). A tool that fails is not an error here: that is an event and an
//! answer to the model.

/// What stops the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] cairn_store::Error),
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Script(String),
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

pub fn io_at(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> EngineError + '_ {
    move |source| EngineError::Io {
        path: path.display().to_string(),
        source,
    }
}
