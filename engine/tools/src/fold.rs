//! Folding a session log from disk: from the start, or from the newest valid snapshot
//! plus the records after it. Both give the same state.

use std::path::Path;

pub use cairn_core::fold::{Folded, Unknown, parse};
use cairn_core::state::{STATE_FORMAT_VERSION, State};
use cairn_store::{LogReader, SnapshotStore, SnapshotWarning};

use crate::error::Result;

/// Folds every record of the log at `dir` (a session folder or a log file).
pub fn fold_all(dir: &Path) -> Result<Folded> {
    fold_from(&LogReader::open(dir)?, State::default(), 0)
}

/// Folds from the newest valid snapshot (when `dir` is a session folder that has one).
pub fn fold_with_snapshot(dir: &Path) -> Result<Folded> {
    let reader = LogReader::open(dir)?;
    let (snap, warnings) = SnapshotStore::new(dir).latest_valid(STATE_FORMAT_VERSION, &reader)?;
    let mut warnings = warnings;
    if let Some(s) = snap {
        match State::from_bytes(&s.body) {
            Ok(state) => {
                let mut f = fold_from(&reader, state, s.meta.seq + 1)?;
                f.from_snapshot = Some(s.meta.seq);
                f.warnings = warnings;
                return Ok(f);
            }
            Err(e) => warnings.push(SnapshotWarning {
                path: s.path,
                what: format!("state does not load: {e}"),
            }),
        }
    }
    let mut f = fold_from(&reader, State::default(), 0)?;
    f.warnings = warnings;
    Ok(f)
}

fn fold_from(reader: &LogReader, mut state: State, seq: u64) -> Result<Folded> {
    let mut folded = Folded::default();
    let head = reader.tail()?.head;
    if head.is_some_and(|h| h.seq >= seq) {
        for r in reader.records_from(seq)? {
            let r = r?;
            folded.records += 1;
            match parse(&r) {
                Ok(rec) => state.apply(&rec),
                Err(u) => {
                    state.apply_unknown(r.seq);
                    folded.unknown.push(u);
                }
            }
        }
    }
    folded.state = state;
    Ok(folded)
}
