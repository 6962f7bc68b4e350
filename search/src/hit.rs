//! What a search asks for besides its words (filters, a limit) and what it answers:
//! hits, in one order both backends keep — newest session first (session ids begin
//! with their start time), then by seq.

use serde::Serialize;

use crate::doc::Kind;
use crate::error::{Error, Result};
use crate::query::{Query, snippet};

/// The most hits one search returns.
pub const SEARCH_LIMIT_MAX: u32 = 10_000;

/// Which documents a search looks at, and how many hits it returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// A project key, or a workspace root (absolute), exactly.
    pub project: Option<String>,
    /// A tool name, exactly: only inputs and outputs of its calls.
    pub tool: Option<String>,
    /// Only documents recorded at or after this time (microseconds since the epoch).
    pub since_us: Option<i64>,
    /// At most this many hits, 1 to [`SEARCH_LIMIT_MAX`].
    pub limit: u32,
}

impl Default for Filter {
    fn default() -> Filter {
        Filter {
            project: None,
            tool: None,
            since_us: None,
            limit: 20,
        }
    }
}

impl Filter {
    /// Checks the limit.
    pub fn check(&self) -> Result<()> {
        if self.limit == 0 || self.limit > SEARCH_LIMIT_MAX {
            return Err(Error::Filter {
                what: format!(
                    "limit {} is not between 1 and {SEARCH_LIMIT_MAX}",
                    self.limit
                ),
            });
        }
        Ok(())
    }
}

/// A time bound from a date (`2026-11-29`, midnight UTC) or a timestamp
/// (`2026-11-29T12:00:00Z`), in microseconds since the epoch.
pub fn since(s: &str) -> Result<i64> {
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return Ok(t.as_microsecond());
    }
    match s.parse::<jiff::civil::Date>() {
        Ok(d) => d
            .to_zoned(jiff::tz::TimeZone::UTC)
            .map(|z| z.timestamp().as_microsecond())
            .map_err(|e| Error::Filter {
                what: format!("since {s:?}: {e}"),
            }),
        Err(_) => Err(Error::Filter {
            what: format!(
                "since {s:?} is neither a date (2026-11-29) nor a timestamp (2026-11-29T12:00:00Z)"
            ),
        }),
    }
}

/// One document that matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hit {
    /// The session's id.
    pub session: String,
    /// Its short name (the random suffix of the id), as `cairn sessions` shows it.
    pub short: String,
    pub project: String,
    pub workspace: String,
    pub seq: u64,
    pub call: Option<String>,
    pub tool: Option<String>,
    pub kind: Kind,
    /// The record's time as the log writes it.
    pub time: String,
    /// An excerpt around the first match, matches marked `**so**`.
    pub snippet: String,
}

/// A document a backend found by its terms, in the backend-independent order.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub session: String,
    pub project: String,
    pub workspace: String,
    pub seq: u64,
    pub call: Option<String>,
    pub tool: Option<String>,
    pub kind: String,
    pub time: String,
    pub text: String,
}

/// The short name of a session id: its random suffix.
pub fn short(id: &str) -> &str {
    id.rsplit('-').next().unwrap_or(id)
}

impl Candidate {
    /// The hit, when the query matches the whole text (phrases in order, whole tokens).
    pub(crate) fn hit(self, q: &Query) -> Option<Hit> {
        let spans = q.find(&self.text)?;
        Some(Hit {
            short: short(&self.session).to_string(),
            snippet: snippet(&self.text, &spans),
            kind: Kind::parse(&self.kind)?,
            session: self.session,
            project: self.project,
            workspace: self.workspace,
            seq: self.seq,
            call: self.call,
            tool: self.tool,
            time: self.time,
        })
    }
}

/// Runs a search on a backend: `fetch(limit)` yields candidates in order, at most
/// `limit` when given. When the index alone decides, the limit goes to the backend;
/// if a candidate still fails the full check (the index's tokeniser split a token
/// ours keeps whole), the search runs again without it.
pub(crate) fn run<F>(q: &Query, f: &Filter, mut fetch: F) -> Result<Vec<Hit>>
where
    F: FnMut(Option<u32>, &mut dyn FnMut(Candidate) -> bool) -> Result<()>,
{
    f.check()?;
    let limit = f.limit as usize;
    if q.exact_in_index() {
        let mut hits = Vec::new();
        let mut missed = false;
        fetch(Some(f.limit), &mut |c| {
            match c.hit(q) {
                Some(h) => hits.push(h),
                None => missed = true,
            }
            true
        })?;
        if !missed {
            return Ok(hits);
        }
    }
    let mut hits = Vec::new();
    fetch(None, &mut |c| {
        if let Some(h) = c.hit(q) {
            hits.push(h);
        }
        hits.len() < limit
    })?;
    Ok(hits)
}
