//! Why a replay operation could not run. Problems found in a session (by `verify`) and
//! divergences (by `replay`, `diff`) are results, not errors.

use std::path::PathBuf;

/// What stops a replay operation (exit code 2 in the command line).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Store(#[from] cairn_store::Error),
    #[error(transparent)]
    Engine(#[from] cairn_tools::EngineError),
    /// The path is not a session folder, or the session cannot be read strictly.
    #[error("{}: {what}", path.display())]
    Session { path: PathBuf, what: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Content a checkout or replay needs is not there: blobs missing or damaged (a
    /// deep verification of the session reports every problem), or withheld files
    /// (credential files, recorded by hash only) that the session's workspace no
    /// longer holds with their recorded content.
    #[error("{}", missing_text(.missing, .withheld))]
    MissingBlobs {
        /// (what needed it, hash).
        missing: Vec<(String, cairn_store::Hash)>,
        /// (where the file was looked for in the session's workspace, recorded hash).
        withheld: Vec<(String, cairn_store::Hash)>,
    },
    /// Git-backed files of a session's manifest whose objects the workspace's
    /// repository no longer has (or holds damaged): their content is not known.
    #[error(
        "{} git object(s) missing from the repository of {}: {}",
        missing.len(),
        repository.display(),
        missing.iter().map(|(p, oid)| format!("{p} ({})", oid.get(..12).unwrap_or(oid))).collect::<Vec<_>>().join(", ")
    )]
    MissingGitObjects {
        repository: PathBuf,
        /// (workspace path, git blob id).
        missing: Vec<(String, String)>,
    },
    /// The model of a what-if run failed (its provider's error).
    #[error("the model: {0}")]
    Model(String),
    /// The destination of a checkout is not empty.
    #[error("{}: not empty (give a new or empty folder)", .0.display())]
    NotEmpty(PathBuf),
    /// A path in the log that is not a workspace path (`..`, a control character, an
    /// absolute manifest entry…): the log was forged or damaged, and nothing is written
    /// from it.
    #[error(
        "seq {seq}: {where_} {path:?}: {why}; the log was forged or damaged, so nothing was written (run `cairn verify` on it)"
    )]
    BadPath {
        seq: u64,
        /// Which record names it: `manifest entry`, `file_write`.
        where_: &'static str,
        path: String,
        why: &'static str,
    },
    /// A seq past the session's last record.
    #[error("seq {at} is past the session's last record (seq {head})")]
    PastHead { at: u64, head: u64 },
}

fn missing_text(
    missing: &[(String, cairn_store::Hash)],
    withheld: &[(String, cairn_store::Hash)],
) -> String {
    let list = |v: &[(String, cairn_store::Hash)]| {
        v.iter()
            .map(|(p, h)| format!("{p} ({})", h.short(12)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    if !missing.is_empty() || withheld.is_empty() {
        parts.push(format!(
            "{} blob(s) missing or damaged: {}",
            missing.len(),
            list(missing)
        ));
    }
    if !withheld.is_empty() {
        parts.push(format!(
            "{} withheld file(s) not in the workspace with their recorded content (their content was never stored): {}",
            withheld.len(),
            list(withheld)
        ));
    }
    parts.join("; ")
}

/// Shorthand used throughout the crate.
pub type Result<T, E = ReplayError> = std::result::Result<T, E>;

pub(crate) fn io_at(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> ReplayError + '_ {
    move |source| ReplayError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_blobs_are_listed_without_a_command() {
        let h = cairn_store::Hash::of(b"x");
        let e = ReplayError::MissingBlobs {
            missing: vec![("manifest".into(), h)],
            withheld: vec![],
        };
        assert_eq!(
            e.to_string(),
            format!("1 blob(s) missing or damaged: manifest ({})", h.short(12))
        );
        let e = ReplayError::MissingBlobs {
            missing: vec![],
            withheld: vec![("/ws/.env".into(), h)],
        };
        assert_eq!(
            e.to_string(),
            format!(
                "1 withheld file(s) not in the workspace with their recorded content (their content was never stored): /ws/.env ({})",
                h.short(12)
            )
        );
        let e = ReplayError::MissingBlobs {
            missing: vec![("a.txt".into(), h)],
            withheld: vec![("/ws/.env".into(), h)],
        };
        assert_eq!(
            e.to_string(),
            format!(
                "1 blob(s) missing or damaged: a.txt ({0}); 1 withheld file(s) not in the workspace with their recorded content (their content was never stored): /ws/.env ({0})",
                h.short(12)
            )
        );
        assert_eq!(
            "x".parse::<crate::ShellMode>().map_err(|e| e.to_string()),
            Err(
                "unknown shell mode 'x': expected rerun, recorded or rerun-unsandboxed".to_string()
            )
        );
    }
}
