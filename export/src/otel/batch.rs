//! A recorded session's spans, from its log.

use std::path::Path;

use cairn_store::{BlobStore, LogReader};
use opentelemetry_sdk::trace::SpanData;

use super::map::Mapper;
use crate::error::{Error, Result};

/// A session's spans and what was read to make them.
pub struct SessionSpans {
    pub session: String,
    pub spans: Vec<SpanData>,
    /// Records read.
    pub records: u64,
}

/// The spans of the session in folder `dir` (its id is the folder's name), every
/// record checked (own hash, chain, seq) as it is read; content only when
/// `capture_content`. A record of a type this version does not know is skipped.
pub fn spans_of(dir: &Path, capture_content: bool) -> Result<SessionSpans> {
    let store = |source| Error::Store {
        path: dir.to_path_buf(),
        source,
    };
    let session = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Spilled fields are read back from the project's blobs (`<project>/blobs`).
    let blobs = dir
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("blobs"))
        .filter(|b| b.is_dir())
        .and_then(|b| BlobStore::open(&b).ok());
    let reader = LogReader::open(dir).map_err(store)?;
    let mut mapper = Mapper::new(&session, capture_content, "chain");
    let mut spans = Vec::new();
    let mut records = 0;
    for r in reader.records().map_err(store)? {
        let r = r.map_err(store)?;
        records += 1;
        match cairn_tools::fold::parse_maybe_in(&r, blobs.as_ref()) {
            Ok(rec) => mapper.push(&rec, &mut spans),
            Err(_) => continue,
        }
    }
    mapper.finish(&mut spans);
    Ok(SessionSpans {
        session,
        spans,
        records,
    })
}
