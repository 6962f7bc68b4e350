//! Folding a session log from disk: from the start, or from the newest valid snapshot
//! plus the records after it. Both give the same state. Records are read with the
//! fields they moved into blobs put back ([`parse_in`]), from the project's blob store.

use std::path::Path;

pub use cairn_core::fold::{Folded, Unknown, parse, parse_with};
use cairn_core::state::{Record, STATE_FORMAT_VERSION, State};
use cairn_store::{BlobRef, BlobStore, LogReader, SnapshotStore, SnapshotWarning};

use crate::error::Result;

/// Parses a record of a session whose project keeps its blobs in `blobs`, putting back
/// the fields the record moved into blobs (`cairn_core::spill`).
pub fn parse_in(
    r: &cairn_store::Record,
    blobs: &BlobStore,
) -> std::result::Result<Record, Unknown> {
    parse_with(r, |b| read_blob(Some(blobs), b))
}

/// Parses a record with `blobs` when there are some, else as [`parse`] does.
pub fn parse_maybe_in(
    r: &cairn_store::Record,
    blobs: Option<&BlobStore>,
) -> std::result::Result<Record, Unknown> {
    parse_with(r, |b| read_blob(blobs, b))
}

/// The content of a spilled field's blob, or what went wrong, in words.
pub fn read_blob(blobs: Option<&BlobStore>, b: &BlobRef) -> std::result::Result<Vec<u8>, String> {
    let Some(blobs) = blobs else {
        return Err(format!(
            "blob {} not read: the log has no project blob store beside it",
            b.hash.short(12)
        ));
    };
    blobs.get(&b.hash).map_err(|e| match e {
        cairn_store::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            format!("blob {} is missing", b.hash)
        }
        e => format!("blob {} cannot be read: {e}", b.hash.short(12)),
    })
}

/// The blob store of the project the session at `path` belongs to: `<project>/blobs`,
/// `path` being the session folder `<project>/sessions/<id>` or its log file. `None`
/// when there is none (a log file kept elsewhere). Blobs are named by their content,
/// so a store that is not the session's can only lack a blob, never give a wrong one.
pub fn project_blobs(path: &Path) -> Option<BlobStore> {
    let session = if path.is_file() { path.parent()? } else { path };
    let root = session.parent()?.parent()?.join("blobs");
    if !root.is_dir() {
        return None;
    }
    BlobStore::open(&root).ok()
}

/// Folds every record of the log at `dir` (a session folder or a log file).
pub fn fold_all(dir: &Path) -> Result<Folded> {
    fold_from(
        &LogReader::open(dir)?,
        project_blobs(dir).as_ref(),
        State::default(),
        0,
    )
}

/// Folds from the newest valid snapshot (when `dir` is a session folder that has one).
pub fn fold_with_snapshot(dir: &Path) -> Result<Folded> {
    let reader = LogReader::open(dir)?;
    let blobs = project_blobs(dir);
    let (snap, warnings) = SnapshotStore::new(dir).latest_valid(STATE_FORMAT_VERSION, &reader)?;
    let mut warnings = warnings;
    if let Some(s) = snap {
        match State::from_bytes(&s.body) {
            Ok(state) => {
                let mut f = fold_from(&reader, blobs.as_ref(), state, s.meta.seq + 1)?;
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
    let mut f = fold_from(&reader, blobs.as_ref(), State::default(), 0)?;
    f.warnings = warnings;
    Ok(f)
}

fn fold_from(
    reader: &LogReader,
    blobs: Option<&BlobStore>,
    mut state: State,
    seq: u64,
) -> Result<Folded> {
    let mut folded = Folded::default();
    let head = reader.tail()?.head;
    if head.is_some_and(|h| h.seq >= seq) {
        for r in reader.records_from(seq)? {
            let r = r?;
            folded.records += 1;
            match parse_maybe_in(&r, blobs) {
                Ok(rec) => state.apply(&rec),
                Err(u) => {
                    state.apply_unknown(r.seq, &r.hash);
                    folded.unknown.push(u);
                }
            }
        }
    }
    folded.state = state;
    Ok(folded)
}
