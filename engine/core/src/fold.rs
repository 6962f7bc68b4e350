//! Parsing store records into engine records, and what a fold of a log gives. Reading
//! the log from disk is the tools crate's (`cairn_tools::fold`).

use cairn_store::{BlobRef, SnapshotWarning};

use crate::event::Event;
use crate::state::{Record, State};

/// A record the fold could not use.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unknown {
    pub seq: u64,
    pub kind: Option<String>,
    pub what: String,
}

/// Parses a store record into an engine record, without a blob store: a record whose
/// fields were moved into blobs ([`crate::spill`]) does not parse, and says so. Readers
/// of a session read its records with [`parse_with`] (`cairn_tools::fold::parse_in`).
pub fn parse(r: &cairn_store::Record) -> Result<Record, Unknown> {
    parse_with(r, |b| {
        Err(format!(
            "blob {} not read: the record was read without its blob store",
            b.hash.short(12)
        ))
    })
}

/// Parses a store record into an engine record, putting back the fields moved into
/// blobs, each read with `get` (which says what went wrong) and checked.
pub fn parse_with(
    r: &cairn_store::Record,
    get: impl FnMut(&BlobRef) -> Result<Vec<u8>, String>,
) -> Result<Record, Unknown> {
    let does_not_parse = |e: serde_json::Error| format!("event does not parse: {e}");
    let parsed = match crate::spill::load(r.event.get(), get) {
        Ok(None) => serde_json::from_str::<Event>(r.event.get()).map_err(does_not_parse),
        Ok(Some(whole)) => serde_json::from_value::<Event>(whole).map_err(does_not_parse),
        // What is wrong with a spilled field, as it is.
        Err(what) => Err(what),
    };
    match parsed {
        Ok(event) => Ok(Record {
            seq: r.seq,
            ts: r.ts.clone(),
            hash: r.hash,
            event,
        }),
        Err(what) => {
            let kind = r.event_type();
            let what = match &kind {
                Some(k) if !Event::KINDS.contains(&k.as_str()) => {
                    format!("unknown event type '{k}' (written by a newer cairn?)")
                }
                _ => what,
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
