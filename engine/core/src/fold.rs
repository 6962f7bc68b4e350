//! Parsing store records into engine records, and what a fold of a log gives. Reading
//! the log from disk is the tools crate's (`cairn_tools::fold`).

use cairn_store::SnapshotWarning;

use crate::event::Event;
use crate::state::{Record, State};

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
