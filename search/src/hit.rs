//! What a search asks for besides its words (filters, a limit) and what it answers:
//! hits, in one order both backends keep — newest session first, then by seq.
//!
//! "Newest" is [`session_key`] (the start time a session id begins with, to the
//! millisecond), then the id itself, both descending: for the ids cairn writes
//! (`20261129T120000.123456-ab12cd`) that is the ids' own order. The key lets the
//! embedded index hand out its documents in this order without sorting them.

use serde::Serialize;

use crate::doc::Kind;
use crate::error::{Error, Result};
use crate::query::{Query, snippet_marked};

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
    /// The byte ranges of `snippet` its `**` markers enclose (markers left out): where
    /// the matched words are, for a reader that shows them otherwise
    /// ([`Hit::snippet_with`]).
    #[serde(skip)]
    pub marks: Vec<std::ops::Range<usize>>,
}

impl Hit {
    /// The snippet with each match between `open` and `close` instead of `**`
    /// (both empty: the plain text), a `**` of the text itself kept.
    pub fn snippet_with(&self, open: &str, close: &str) -> String {
        let mut out = String::with_capacity(self.snippet.len());
        let mut at = 0;
        for m in &self.marks {
            // Each mark has its two-byte `**` on either side.
            let before = m.start.saturating_sub(2);
            out.push_str(self.snippet.get(at..before).unwrap_or_default());
            out.push_str(open);
            out.push_str(self.snippet.get(m.clone()).unwrap_or_default());
            out.push_str(close);
            at = m.end + 2;
        }
        out.push_str(
            self.snippet
                .get(at.min(self.snippet.len())..)
                .unwrap_or_default(),
        );
        out
    }
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

/// The first day [`session_key`] counts from: 2020-01-01T00:00:00Z, in milliseconds
/// since the epoch.
pub const SESSION_KEY_EPOCH_MS: i64 = 1_577_836_800_000;

/// Bits of a [`session_key`]: keys are below `2^SESSION_KEY_BITS`.
pub const SESSION_KEY_BITS: u32 = 41;

/// The ordering key of a session id: the start time it begins with
/// (`YYYYMMDDTHHMMSS.ffffff-`, UTC), in milliseconds since
/// [`SESSION_KEY_EPOCH_MS`], kept within 1 to `2^SESSION_KEY_BITS - 1` (2020 to 2089;
/// earlier or later times share the end key); 0 for an id that does not begin with a
/// valid time, so such sessions come after every other. Non-decreasing in the order
/// of the ids that begin with a time.
pub fn session_key(id: &str) -> i64 {
    let b = id.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let shaped = b.len() >= 23
        && digits(0..8)
        && b[8] == b'T'
        && digits(9..15)
        && b[15] == b'.'
        && digits(16..22)
        && b[22] == b'-';
    if !shaped {
        return 0;
    }
    let Ok(t) = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%S", &id[..15]) else {
        return 0;
    };
    let Ok(z) = t.to_zoned(jiff::tz::TimeZone::UTC) else {
        return 0;
    };
    let micros: i64 = id[16..22].parse().unwrap_or(0);
    let ms = z.timestamp().as_millisecond() + micros / 1000 - SESSION_KEY_EPOCH_MS;
    ms.clamp(1, (1 << SESSION_KEY_BITS) - 1)
}

/// Whether a document (`key`, `session`, `seq`) comes before another in the order of
/// hits: newer key, then greater id, then smaller seq.
pub(crate) fn precedes(a: (i64, &str, u64), b: (i64, &str, u64)) -> bool {
    (b.0, b.1, a.2) < (a.0, a.1, b.2)
}

/// The short name of a session id: its random suffix.
pub fn short(id: &str) -> &str {
    id.rsplit('-').next().unwrap_or(id)
}

impl Candidate {
    /// The hit, when the query matches the whole text (phrases in order, whole tokens).
    pub(crate) fn hit(self, q: &Query) -> Option<Hit> {
        let spans = q.find(&self.text)?;
        let (snippet, marks) = snippet_marked(&self.text, &spans);
        Some(Hit {
            short: short(&self.session).to_string(),
            snippet,
            marks,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snippet_is_shown_plain_or_marked_keeping_the_texts_own_stars() {
        let q = Query::parse("cargo").unwrap();
        let text = "a **note** then cargo test";
        let c = Candidate {
            session: "20261201T025500.123456-ab12cd".into(),
            project: "p".into(),
            workspace: "/w".into(),
            seq: 1,
            call: None,
            tool: None,
            kind: "user".into(),
            time: "t".into(),
            text: text.into(),
        };
        let h = c.hit(&q).unwrap();
        assert_eq!(h.snippet, "a **note** then **cargo** test");
        assert_eq!(h.snippet_with("", ""), text);
        assert_eq!(h.snippet_with("<", ">"), "a **note** then <cargo> test");
    }

    #[test]
    fn session_keys_follow_the_start_time_of_ids() {
        let max = (1 << SESSION_KEY_BITS) - 1;
        for (id, key) in [
            ("20200101T000000.000000-ab12cd", 1),
            ("20200101T000000.001999-ab12cd", 1),
            ("20200101T000000.002000-ab12cd", 2),
            ("20200101T000001.000000-ab12cd", 1000),
            ("20261201T025500.123456-ab12cd", 218_256_900_123),
            // Before 2020 and past 2089: the end keys.
            ("20191231T235959.999999-ab12cd", 1),
            ("20900101T000000.000000-ab12cd", max),
            // Not a time: last.
            ("not-a-time", 0),
            ("20261399T000000.000000-ab12cd", 0),
            ("20261201T025500.123456", 0),
            ("20261201T025500,123456-ab12cd", 0),
            ("", 0),
        ] {
            assert_eq!(session_key(id), key, "{id}");
        }
        // Non-decreasing in the order of ids.
        let mut ids = [
            "20261201T025500.123456-ab12cd",
            "20261201T025500.123999-000000",
            "20261201T025500.124000-000000",
            "20211201T025500.124000-000000",
        ];
        ids.sort();
        assert!(
            ids.windows(2)
                .all(|w| session_key(w[0]) <= session_key(w[1]))
        );
    }

    #[test]
    fn hits_go_newest_key_then_greatest_id_then_smallest_seq() {
        assert!(precedes((2, "a", 9), (1, "z", 0)));
        assert!(precedes((1, "b", 9), (1, "a", 0)));
        assert!(precedes((1, "a", 0), (1, "a", 1)));
        assert!(!precedes((1, "a", 1), (1, "a", 1)));
        assert!(!precedes((1, "a", 1), (1, "a", 0)));
    }
}
