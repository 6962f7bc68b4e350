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
    /// The log holds a bad record that is not a torn tail: never repaired silently (the
    /// log is left as it is).
    #[error(
        "{}: corrupt log at {}line {line}, byte offset {offset}: {what}",
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
    /// A new log could not be born in its folder: another writer created a log there
    /// first (a log of a fixed name, such as a project's allow log, created by two
    /// processes at once). Nothing was written; open the log that is there instead.
    #[error("{}: another writer created this log first; open it to append", path.display())]
    CreatedElsewhere { path: PathBuf },
    /// The input is not in the expected format (not a log, too large, wrong kind of file).
    #[error("{}: {what}", path.display())]
    Format { path: PathBuf, what: String },
    /// An earlier write or fsync failed; the writer refuses to go on, since what reached
    /// the disk is unknown. Reopen the log to repair and continue.
    #[error("{}: the writer stopped after an earlier failure ({what}); reopen the log to repair it", path.display())]
    Poisoned { path: PathBuf, what: String },
}

/// A name that is not one of a fixed set (a durability, a catalog, a provider…): the
/// error of their `FromStr`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{name}': expected {}", one_of(expected))]
pub struct ParseNameError {
    /// What was named: `durability`, `catalog`…
    pub what: &'static str,
    /// The name given.
    pub name: String,
    /// The names accepted.
    pub expected: &'static [&'static str],
}

/// `a, b or c`.
fn one_of(names: &[&str]) -> String {
    match names.split_last() {
        None => String::from("nothing"),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_name_error_lists_the_names() {
        let e = ParseNameError {
            what: "durability",
            name: "often".into(),
            expected: &["always", "batch", "none"],
        };
        assert_eq!(
            e.to_string(),
            "unknown durability 'often': expected always, batch or none"
        );
        let e = ParseNameError {
            what: "mode",
            name: "x".into(),
            expected: &["a", "b"],
        };
        assert_eq!(e.to_string(), "unknown mode 'x': expected a or b");
    }

    #[test]
    fn corruption_names_the_place_and_no_command() {
        let e = Error::Corruption {
            path: PathBuf::from("/s/log.jsonl"),
            seq: Some(3),
            line: 4,
            offset: 120,
            what: "bad hash".into(),
        };
        assert_eq!(
            e.to_string(),
            "/s/log.jsonl: corrupt log at seq 3, line 4, byte offset 120: bad hash"
        );
    }
}
