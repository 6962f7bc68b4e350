//! One line of the log: its exact byte layout, how it is written and how it is checked.
//!
//! ```text
//! {"prev":"<64 hex>","seq":<u64>,"ts":"<RFC 3339>","event":<JSON object>,"hash":"<64 hex>"}\n
//! ```
//!
//! `hash` is BLAKE3 in derive-key mode (context [`HASH_CONTEXT`]) over the bytes before
//! `,"hash":"`. The suffix has a fixed length, so every field is found by offset and a
//! line is checked without a JSON parser; only the event object needs one, to prove it
//! is well-formed.

use std::sync::LazyLock;

use serde::de::IgnoredAny;

use crate::hash::{Hash, encode_lower_hex};

/// The BLAKE3 derive-key context of record hashes.
pub const HASH_CONTEXT: &str = "cairn-log v1 record";

/// Default limit on one record, newline included. Large payloads belong in blobs.
pub const RECORD_BYTES_MAX: usize = 1 << 20;

pub(crate) const PREFIX: &[u8] = b"{\"prev\":\"";
const SEQ_KEY: &[u8] = b"\",\"seq\":";
const TS_KEY: &[u8] = b",\"ts\":\"";
const EVENT_KEY: &[u8] = b"\",\"event\":";
const HASH_KEY: &[u8] = b",\"hash\":\"";
/// `,"hash":"` + 64 hex digits + `"}`: the fixed-length end of every line (before `\n`).
pub const SUFFIX_BYTES: usize = HASH_KEY.len() + 64 + 2;

static HASHER: LazyLock<blake3::Hasher> =
    LazyLock::new(|| blake3::Hasher::new_derive_key(HASH_CONTEXT));

/// The record hash of the hashed part of a line (everything before `,"hash":"`).
pub fn record_hash(hashed: &[u8]) -> Hash {
    let mut h = HASHER.clone();
    h.update(hashed);
    Hash(*h.finalize().as_bytes())
}

/// Appends one complete line (newline included) to `out` and returns its hash.
/// `event` must be one compact JSON object without a raw newline; the caller checks.
pub(crate) fn encode(prev: &Hash, seq: u64, ts: &str, event: &[u8], out: &mut Vec<u8>) -> Hash {
    let start = out.len();
    let mut hex = [0u8; 64];
    out.extend_from_slice(PREFIX);
    encode_lower_hex(&prev.0, &mut hex);
    out.extend_from_slice(&hex);
    out.extend_from_slice(SEQ_KEY);
    out.extend_from_slice(seq.to_string().as_bytes());
    out.extend_from_slice(TS_KEY);
    out.extend_from_slice(ts.as_bytes());
    out.extend_from_slice(EVENT_KEY);
    out.extend_from_slice(event);
    let hash = record_hash(&out[start..]);
    out.extend_from_slice(HASH_KEY);
    encode_lower_hex(&hash.0, &mut hex);
    out.extend_from_slice(&hex);
    out.extend_from_slice(b"\"}\n");
    hash
}

/// The fields of a line, borrowed from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields<'a> {
    pub prev: Hash,
    pub seq: u64,
    pub ts: &'a str,
    pub event: &'a [u8],
    /// The hash written in the line.
    pub hash: Hash,
}

/// What is wrong with a line. `fields` holds what could still be read, so that a
/// verifier can go on checking the chain around a damaged record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    pub what: String,
    pub seq: Option<u64>,
    pub hash: Option<Hash>,
}

/// Checks one line (without its `\n`): layout, its own hash, and that the event is one
/// well-formed JSON object. Does not look at the chain.
pub fn check_line(line: &[u8]) -> Result<Fields<'_>, BadLine> {
    check_line_hashed(line, None)
}

/// The part of a line its hash covers, when the line is long enough to hold one and
/// starts like a record: what [`check_line_hashed`] wants the hash of.
pub(crate) fn hashed_part(line: &[u8]) -> Option<&[u8]> {
    (line.len() >= LINE_BYTES_MIN && line.starts_with(PREFIX))
        .then(|| &line[..line.len() - SUFFIX_BYTES])
}

const LINE_BYTES_MIN: usize =
    PREFIX.len() + 64 + SEQ_KEY.len() + 1 + TS_KEY.len() + EVENT_KEY.len() + 2 + SUFFIX_BYTES;

/// [`check_line`] given the record hash of [`hashed_part`] when it is already known
/// (verify hashes many lines at once in SIMD lanes).
pub(crate) fn check_line_hashed(
    line: &[u8],
    computed: Option<Hash>,
) -> Result<Fields<'_>, BadLine> {
    let bad = |what: &str, seq: Option<u64>, hash: Option<Hash>| BadLine {
        what: what.to_string(),
        seq,
        hash,
    };
    if line.len() < LINE_BYTES_MIN || !line.starts_with(PREFIX) {
        return Err(bad("not a log record (expected {\"prev\":\"…)", None, None));
    }
    let suffix = &line[line.len() - SUFFIX_BYTES..];
    let written = if suffix.starts_with(HASH_KEY) && suffix.ends_with(b"\"}") {
        Hash::from_hex(&suffix[HASH_KEY.len()..HASH_KEY.len() + 64])
    } else {
        None
    };
    let hashed = &line[..line.len() - SUFFIX_BYTES];
    // The seq is only parsed up front on error paths: the good path parses it once below.
    let seq = || parse_seq(hashed);
    let Some(written) = written else {
        return Err(bad(
            "record does not end with ,\"hash\":\"<64 hex>\"}",
            seq(),
            None,
        ));
    };
    let computed = computed.unwrap_or_else(|| record_hash(hashed));
    if computed != written {
        return Err(bad(
            "record hash does not match its content",
            seq(),
            Some(written),
        ));
    }
    // The hash proves these bytes are what a writer wrote; the layout checks below catch
    // a writer that wrote something else.
    let fields = parse_hashed(hashed)
        .ok_or_else(|| bad("malformed record envelope", seq(), Some(written)))?;
    // JSON is UTF-8, but serde_json skips the strings of an `IgnoredAny` without checking
    // them, and the reader would then turn the bytes into other text: check first.
    if fields.3.first() != Some(&b'{')
        || std::str::from_utf8(fields.3).is_err()
        || serde_json::from_slice::<IgnoredAny>(fields.3).is_err()
    {
        return Err(bad(
            "event is not a well-formed JSON object",
            Some(fields.1),
            Some(written),
        ));
    }
    Ok(Fields {
        prev: fields.0,
        seq: fields.1,
        ts: fields.2,
        event: fields.3,
        hash: written,
    })
}

/// The bytes allowed in a timestamp: `[0-9A-Za-z:.+-]`.
pub(crate) fn is_ts_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b':' | b'.' | b'-' | b'+')
}

fn parse_seq(hashed: &[u8]) -> Option<u64> {
    let rest = hashed.get(PREFIX.len() + 64..)?.strip_prefix(SEQ_KEY)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    parse_u64(&rest[..digits])
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    let mut n: u64 = 0;
    for d in digits {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(n)
}

fn parse_hashed(hashed: &[u8]) -> Option<(Hash, u64, &str, &[u8])> {
    let prev = Hash::from_hex(hashed.get(PREFIX.len()..PREFIX.len() + 64)?)?;
    let rest = hashed.get(PREFIX.len() + 64..)?.strip_prefix(SEQ_KEY)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let seq = parse_u64(&rest[..digits])?;
    let rest = rest[digits..].strip_prefix(TS_KEY)?;
    let ts_len = rest.iter().position(|&b| b == b'"')?;
    let ts = std::str::from_utf8(&rest[..ts_len]).ok()?;
    if ts.is_empty() || !ts.bytes().all(crate::record::is_ts_byte) {
        return None;
    }
    let event = rest[ts_len..].strip_prefix(EVENT_KEY)?;
    Some((prev, seq, ts, event))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(prev: &Hash, seq: u64, event: &str) -> Vec<u8> {
        let mut out = Vec::new();
        encode(
            prev,
            seq,
            "2026-11-29T12:00:00.123456Z",
            event.as_bytes(),
            &mut out,
        );
        out.pop();
        out
    }

    #[test]
    fn encode_then_check_round_trips() {
        let l = line(&Hash::ZERO, 7, r#"{"type":"x","n":[1,2]}"#);
        let f = check_line(&l).unwrap();
        assert_eq!(
            (f.prev, f.seq, f.ts, f.event),
            (
                Hash::ZERO,
                7,
                "2026-11-29T12:00:00.123456Z",
                &br#"{"type":"x","n":[1,2]}"#[..]
            )
        );
        let v: serde_json::Value = serde_json::from_slice(&l).unwrap();
        assert_eq!(v["seq"], 7);
        assert_eq!(v["hash"], f.hash.to_hex());
    }

    #[test]
    fn leading_zero_seq_is_refused() {
        let l = line(&Hash::ZERO, 0, "{}");
        let mut s = String::from_utf8(l).unwrap();
        s = s.replacen("\"seq\":0", "\"seq\":00", 1);
        assert!(check_line(s.as_bytes()).is_err());
    }

    #[test]
    fn event_that_is_not_an_object_is_refused_even_with_a_good_hash() {
        let l = line(&Hash::ZERO, 0, "[1]");
        assert_eq!(
            check_line(&l).unwrap_err().what,
            "event is not a well-formed JSON object"
        );
    }
}
