//! Folding a session log from disk: from the start, or from the newest valid snapshot
//! plus the records after it. Both give the same state.

use std::path::Path;

use cairn_store::{LogReader, SnapshotStore, SnapshotWarning};

use crate::error::Result;
use crate::event::Event;
use crate::state::{Record, STATE_FORMAT_VERSION, State};

/// A record the fold could not use.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unknown {
    pub seq: u64,
    pub kind: Option<String>,
    pub what: String,
}

/// Parses a store record into an engine record.
pub fn parse(r: &cairn_store::Record) -> Result<Record, Unknown> {
    match serde_json::from_str::<Event>(r.event.get()) {
        Ok(event) => Ok(Record {
            seq: r.seq,
            ts: r.ts.clone(),
            hash: r.hash,
            event,
        }),
        Err(e) => {
            let kind = r.event_type();
            let what = match &kind {
                Some(k) if !Event::KINDS.contains(&k.as_str()) => {
                    format!("unknown event type '{k}' (written by a newer cairn?)")
                }
                _ => format!("event does not parse: {e}"),
            };
            Err(Unknown {
                seq: r.seq,
                kind,
                what,
            })
        }
    }
}

/// The outcome of folding a log.
#[derive(Debug, Clone, Default)]
pub struct Folded {
    pub state: State,
    pub records: u64,
    pub unknown: Vec<Unknown>,
    /// The seq of the snapshot the fold started from, if any.
    pub from_snapshot: Option<u64>,
    pub warnings: Vec<SnapshotWarning>,
}

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
