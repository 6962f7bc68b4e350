//! A recorded session's spans, from its log.

use std::path::Path;

use opentelemetry_sdk::trace::SpanData;

use super::map::Mapper;
use crate::error::Result;
use crate::session::SessionLog;

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
    let log = SessionLog::open(dir)?;
    let mut mapper = Mapper::new(&log.session, capture_content, "chain");
    let mut spans = Vec::new();
    let records = log.each(|rec| mapper.push(rec, &mut spans))?;
    mapper.finish(&mut spans);
    Ok(SessionSpans {
        session: log.session,
        spans,
        records,
    })
}
