//! Deterministic redaction of secrets in what tools are given and give back, before it
//! reaches the model, the log or a blob. Each secret is replaced by a marker naming its
//! kind (`[REDACTED:github_token]`); the number of markers per kind is recorded with
//! the call. The same input always redacts the same way.
//!
//! One implementation works on bytes ([`Redactor::redact_bytes`]); text
//! ([`Redactor::redact`]) and JSON go through it, and so does [`StreamRedactor`], which
//! redacts a command's output as it streams, in bounded memory. A pass finds the
//! stretches to replace, never overlapping: the secret environment values first
//! (longest first), then each pattern in priority order; a later match that overlaps a
//! stretch already chosen is dropped, unless it contains every stretch it overlaps and
//! is longer than each (an environment secret inside a private key or inside a
//! `password=` value), which it then replaces. A match whose secret starts with a
//! marker is left alone, so that redacting twice changes nothing. Bytes that are not
//! UTF-8 pass through as they are. A private key with no end line runs to the end of
//! the text: an unfinished key is redacted, not shown. A big text (a search's answer of
//! megabytes) is searched only in the lines around the literals each pattern needs
//! (`Redactor::spans_segmented`): the same stretches, found in a fraction of the time.
//! A search's answer is redacted a file at a time on the search's threads
//! ([`Redactor::piece`]) and joined ([`Redactor::join`]) into the bytes that redacting
//! it whole gives: only where a secret may reach across two files' lines is it read
//! again.
//!
//! A text is also read as a reader would read it once its escapes are decoded
//! (`decode`: `%20`, `+` in a query, `\u0020`, `\ `, `$'\x20'`, `&#32;`, `&nbsp;`…,
//! each reading decoded again up to [`DECODE_ROUNDS_MAX`] times): a secret found in such
//! a view is replaced in the text where it was decoded from, escapes and all. A text
//! with no byte that starts an escape (`%`, `&`, `\`, `+`) is not decoded at all. A
//! `Basic` credential (base64 of `user:password`) is a secret of its own.
//!
//! File contents kept as blobs for the workspace (manifest, before/after of writes) are
//! not redacted: they are the workspace itself, and checkout and replay must be exact.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{LazyLock, OnceLock};

use regex::bytes::{Regex, RegexSet};

mod decode;
mod probe;

pub use decode::DECODE_ROUNDS_MAX;

use crate::absent::FoldedLiterals;

/// Counts of redactions by kind.
pub type Counts = BTreeMap<String, u32>;

/// What a [`StreamRedactor`] holds back of a stream before passing it on: a secret
/// shorter than this is caught wherever the stream's chunks fall.
pub const REDACT_WINDOW_BYTES: usize = 64 * 1024;

/// A stream redactor's pass runs once this many windows are pending and passes on all
/// but the last: every byte is searched about `(1 + 4) / 3` times (the window kept
/// before it counts), against 3 times for a pass at every second window.
const PASS_WINDOWS: usize = 4;

/// The patterns: kind, regular expression, the capture group holding the secret (0:
/// the whole match), and for a secret that ends with a line of its own (a private
/// key), that line. In priority order.
///
/// Word boundaries are ASCII (`(?-u:\b)`): each one sits beside an ASCII character of
/// the pattern, so it holds wherever a Unicode one would (and also beside a non-ASCII
/// letter), and it keeps every pattern on the fast automata: a Unicode boundary sends
/// the search of any text that is not ASCII to a slow engine (0.3 MB/s on such text
/// measured with `cairn-bench redact`, against hundreds of MB/s).
const SOURCES: &[(&str, &str, usize, Option<&str>)] = &[
    (
        "private_key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
        0,
        Some(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"),
    ),
    (
        "anthropic_key",
        r"(?-u:\b)sk-ant-[A-Za-z0-9_\-]{20,}",
        0,
        None,
    ),
    (
        "openai_key",
        r"(?-u:\b)sk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}",
        0,
        None,
    ),
    (
        "aws_access_key",
        r"(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)",
        0,
        None,
    ),
    (
        "github_token",
        r"(?-u:\b)(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}(?-u:\b)",
        0,
        None,
    ),
    (
        "github_token",
        r"(?-u:\b)github_pat_[A-Za-z0-9_]{22,}",
        0,
        None,
    ),
    (
        "slack_token",
        r"(?-u:\b)xox[abposr]-[A-Za-z0-9\-]{10,}",
        0,
        None,
    ),
    (
        "gitlab_token",
        r"(?-u:\b)(?:glpat|glptt|gldt|glrt|glcbt|gloas|glsoat|glffct|glimt|glagent)-[A-Za-z0-9_\-]{20,}",
        0,
        None,
    ),
    (
        "gitlab_token",
        r"(?-u:\b)GR1348941[A-Za-z0-9_\-]{20,}",
        0,
        None,
    ),
    (
        "stripe_key",
        r"(?-u:\b)(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}(?-u:\b)",
        0,
        None,
    ),
    (
        "stripe_key",
        r"(?-u:\b)whsec_[A-Za-z0-9]{24,}(?-u:\b)",
        0,
        None,
    ),
    ("google_api_key", r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}", 0, None),
    ("npm_token", r"(?-u:\b)npm_[A-Za-z0-9]{36}(?-u:\b)", 0, None),
    ("pypi_token", r"(?-u:\b)pypi-[A-Za-z0-9_\-]{50,}", 0, None),
    (
        "huggingface_token",
        r"(?-u:\b)hf_[A-Za-z0-9]{30,}(?-u:\b)",
        0,
        None,
    ),
    (
        "sendgrid_key",
        r"(?-u:\b)SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}(?-u:\b)",
        0,
        None,
    ),
    ("twilio_key", r"(?-u:\b)SK[0-9a-fA-F]{32}(?-u:\b)", 0, None),
    (
        "azure_storage_key",
        r"(?i)(?-u:\b)(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{20,}={0,2})",
        1,
        None,
    ),
    // The password of `scheme://user:password@host`.
    (
        "url_password",
        // One slash or more: a path tidier turns `https://` into `https:/`.
        r"(?-u:\b)[A-Za-z][A-Za-z0-9+.\-]*:/+[^/\s:@]+:([^/\s@]+)@",
        1,
        None,
    ),
    (
        "jwt",
        r"(?-u:\b)eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        0,
        None,
    ),
    (
        "bearer_token",
        r"(?i)(?-u:\b)bearer\s+([A-Za-z0-9\-._~+/]{16,}=*)",
        1,
        None,
    ),
    // The credential of `Authorization: Basic <base64 of user:password>`: only where
    // it decodes to such a pair ([`basic_credential`]), not "basic usage". A header is
    // one line: spaces and tabs only after the word, so no match holds a line end (see
    // [`segment_cut`]).
    (
        "basic_auth",
        r"(?i)(?-u:\b)basic[ \t]+([A-Za-z0-9+/]{4,}={0,2})",
        1,
        None,
    ),
    // A name holding a secret word as a whole `_`/`-` segment (`DB_PASSWORD`,
    // `aws_secret_access_key`, `access_token`, `client_secret`), then `=` or `:`.
    // `max_tokens` or `token_count` are not such names. Quotes may be escaped (`\"`, in
    // JSON of JSON), and the value ends at an escaped line end or quote as at a real one.
    (
        "assignment",
        r#"(?i)(?-u:\b)(?:[a-z0-9]+[_-])*(?:password|passwd|pwd|secret|api[_-]?key|apikey|access[_-]?key|private[_-]?key|auth[_-]?token|access[_-]?token|refresh[_-]?token|id[_-]?token|client[_-]?secret|token)(?:[_-](?:access[_-]?key|key|token|secret|value|string|b64|base64))?(?-u:\b)(?:\\?["'])?\s*[:=]\s*(?:\\?["'])?((?:[^\s"',;&\\]|\\[^nrt"']){4,})"#,
        1,
        None,
    ),
];

/// The literals a match of each pattern of [`SOURCES`] must hold one of, in the same
/// order (a test checks the kinds agree): the prefilter ([`PREFILTER`]) looks for them
/// all in one pass, and a pattern runs only on a text holding one of its literals. A
/// literal must be in every match: one missing would hide secrets, so each is a
/// plain part of its pattern outside any repetition that may be empty or alternation
/// not covered by the list. The literals of a `(?i)` pattern are lowercase and found in
/// any ASCII case; the letters it may match outside ASCII are
/// [`FOLDED_OUTSIDE_ASCII`].
const LITERALS: &[(&str, &[&str])] = &[
    ("private_key", &["-----BEGIN "]),
    ("anthropic_key", &["sk-ant-"]),
    ("openai_key", &["sk-"]),
    ("aws_access_key", &["AKIA", "ASIA"]),
    ("github_token", &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]),
    ("github_token", &["github_pat_"]),
    ("slack_token", &["xox"]),
    (
        "gitlab_token",
        &[
            "glpat-", "glptt-", "gldt-", "glrt-", "glcbt-", "gloas-", "glsoat-", "glffct-",
            "glimt-", "glagent-",
        ],
    ),
    ("gitlab_token", &["GR1348941"]),
    (
        "stripe_key",
        &["sk_live_", "sk_test_", "rk_live_", "rk_test_"],
    ),
    ("stripe_key", &["whsec_"]),
    ("google_api_key", &["AIza"]),
    ("npm_token", &["npm_"]),
    ("pypi_token", &["pypi-"]),
    ("huggingface_token", &["hf_"]),
    ("sendgrid_key", &["SG."]),
    ("twilio_key", &["SK"]),
    ("azure_storage_key", &["accountkey=", "sharedaccesskey="]),
    ("url_password", &[":/"]),
    ("jwt", &["eyJ"]),
    ("bearer_token", &["bearer"]),
    ("basic_auth", &["basic"]),
    (
        "assignment",
        &["password", "passwd", "pwd", "secret", "key", "token"],
    ),
];

/// The characters outside ASCII that a `(?i)` pattern's ASCII letters match under
/// Unicode simple case folding: `s` matches U+017F LATIN SMALL LETTER LONG S and `k`
/// U+212A KELVIN SIGN, no other letter matches any (a test checks every character).
/// A text holding one of them goes to every `(?i)` pattern.
const FOLDED_OUTSIDE_ASCII: [&str; 2] = ["\u{17F}", "\u{212A}"];

/// Which patterns of [`SOURCES`] a text may hold, as a bit set: one pass of an
/// Aho-Corasick automaton over every literal of [`LITERALS`], reporting overlapping
/// matches (a literal inside or across another is still seen). Cheap to build (a
/// short-lived process pays tens of microseconds, where a `RegexSet` of the patterns
/// cost a millisecond) and never says "absent" of a pattern that could match: its
/// hits contain the matching patterns, which then run to find where.
struct Prefilter {
    /// Every literal, found in any ASCII case; a case-sensitive one is checked at its
    /// hit.
    search: FoldedLiterals,
    /// By automaton pattern: the literal's bytes, whether its case must match, and the
    /// patterns it admits.
    literals: Vec<(&'static [u8], bool, u64)>,
}

impl Prefilter {
    fn new() -> Prefilter {
        assert!(
            SOURCES.len() <= 64,
            "the prefilter's bit set holds 64 patterns"
        );
        let mut literals: Vec<(&'static [u8], bool, u64)> = Vec::new();
        let mut folding = 0u64;
        for (i, (&(_, re, _, _), &(_, lits))) in SOURCES.iter().zip(LITERALS).enumerate() {
            let insensitive = re.starts_with("(?i)");
            if insensitive {
                folding |= 1 << i;
            }
            for lit in lits {
                literals.push((lit.as_bytes(), !insensitive, 1 << i));
            }
        }
        for c in FOLDED_OUTSIDE_ASCII {
            literals.push((c.as_bytes(), true, folding));
        }
        let search = FoldedLiterals::new(literals.iter().map(|l| l.0))
            .unwrap_or_else(|e| panic!("the redaction literals do not build: {e}"));
        Prefilter { search, literals }
    }

    /// Where `hay` holds a literal, in order of its start, with the patterns each one
    /// admits: every match of a pattern holds one of its hits whole (a hit of a
    /// character of [`FOLDED_OUTSIDE_ASCII`] stands for the literal it spells).
    fn hits_at(&self, hay: &[u8]) -> Vec<(usize, u64)> {
        let mut at: Vec<(usize, u64)> = self
            .search
            .overlapping(hay)
            .filter_map(|m| {
                let (lit, exact, admits) = self.literals[m.pattern().as_usize()];
                (!exact || &hay[m.start()..m.end()] == lit).then_some((m.start(), admits))
            })
            .collect();
        // Overlapping matches come in the order of their ends.
        at.sort_by_key(|h| h.0);
        at
    }

    /// The patterns `hay` may hold (bit `i`: the pattern of [`SOURCES`] at `i`).
    fn hits(&self, hay: &[u8]) -> u64 {
        let all = u64::MAX >> (64 - SOURCES.len());
        let mut hits = 0u64;
        for m in self.search.overlapping(hay) {
            let (lit, exact, admits) = self.literals[m.pattern().as_usize()];
            if hits & admits == admits || (exact && &hay[m.start()..m.end()] != lit) {
                continue;
            }
            hits |= admits;
            if hits == all {
                break;
            }
        }
        hits
    }
}

static PREFILTER: LazyLock<Prefilter> = LazyLock::new(Prefilter::new);

/// `redacted`, a key of `from` once redacted, made unique among the keys of `out` (what
/// is redacted so far) and of `from` (what is still to come, kept as it is when it
/// holds no secret): `redacted`, else `redacted#2`, `redacted#3`, …
fn unique_key(
    out: &serde_json::Map<String, serde_json::Value>,
    from: &serde_json::Map<String, serde_json::Value>,
    redacted: String,
) -> String {
    let taken = |k: &str| out.contains_key(k) || from.contains_key(k);
    if !taken(&redacted) {
        return redacted;
    }
    (2u64..)
        .map(|n| format!("{redacted}#{n}"))
        .find(|k| !taken(k))
        .unwrap_or(redacted)
}

/// The bytes of the longest literal of [`LITERALS`].
const LITERAL_BYTES_MAX: usize = 16;

/// Every literal of [`LITERALS`] (in any ASCII case for a `(?i)` pattern's) and every
/// character of [`FOLDED_OUTSIDE_ASCII`], as one regular expression: its lazy DFA
/// passes over a big text at a few instructions a byte, where the prefilter's
/// automaton, reporting overlapping matches, takes about 19 (callgrind). `None` if it
/// does not compile: the prefilter alone is used.
static ANCHORS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let mut alternatives: Vec<String> = Vec::new();
    for (&(_, re, _, _), &(_, lits)) in SOURCES.iter().zip(LITERALS) {
        let flags = if re.starts_with("(?i)") { "i-u" } else { "-u" };
        for lit in lits {
            alternatives.push(format!("(?{flags}:{})", regex::escape(lit)));
        }
    }
    for c in FOLDED_OUTSIDE_ASCII {
        alternatives.push(regex::escape(c));
    }
    Regex::new(&alternatives.join("|")).ok()
});

/// [`Prefilter::hits_at`] of a big text, found fast: the prefilter's automaton runs
/// only around each match of [`ANCHORS`]. Its matches do not overlap, but every
/// literal starts inside one of them (a literal starting at `p` is itself a match
/// from there, so the search, going left to right, reports one that starts at `p` or
/// holds it), and ends within [`LITERAL_BYTES_MAX`] bytes of its start.
fn anchored_hits(anchors: &Regex, hay: &[u8]) -> Vec<(usize, u64)> {
    let pre = &*PREFILTER;
    let mut at: Vec<(usize, u64)> = Vec::new();
    for m in anchors.find_iter(hay) {
        let (from, to) = (m.start(), m.end());
        let window = &hay[from..(to - 1 + LITERAL_BYTES_MAX).min(hay.len())];
        for h in pre.search.overlapping(window) {
            let start = from + h.start();
            let (lit, exact, admits) = pre.literals[h.pattern().as_usize()];
            if start < to && (!exact || &hay[start..from + h.end()] == lit) {
                at.push((start, admits));
            }
        }
    }
    at.sort_by_key(|h| h.0);
    at
}

/// [`anchored_hits`] of a text whose lines mostly start with `prefix` (a search's
/// answer for one file: each line starts with the file's path), reading each such line
/// from `prefix.len() - (LITERAL_BYTES_MAX - 1)` on. No literal holds a line end, so
/// the literals starting in a line end in it; one starting in the part left unread
/// would lie whole in `prefix`, which holds none starting there (checked once; if it
/// does, or the part is short, the whole text is read).
fn anchored_hits_after_prefix(anchors: &Regex, hay: &[u8], prefix: &[u8]) -> Vec<(usize, u64)> {
    let skip = prefix.len().saturating_sub(LITERAL_BYTES_MAX - 1);
    if skip < PREFIX_SKIP_BYTES_MIN || anchored_hits(anchors, prefix).iter().any(|h| h.0 < skip) {
        return anchored_hits(anchors, hay);
    }
    let pre = &*PREFILTER;
    let mut at: Vec<(usize, u64)> = Vec::new();
    let mut line = 0;
    while line < hay.len() {
        let end = memchr::memchr(b'\n', &hay[line..]).map_or(hay.len(), |n| line + n + 1);
        let start = if hay[line..end].starts_with(prefix) {
            line + skip
        } else {
            line
        };
        for m in anchors.find_iter(&hay[start..end]) {
            let (from, to) = (start + m.start(), start + m.end());
            let window = &hay[from..(to - 1 + LITERAL_BYTES_MAX).min(end)];
            for h in pre.search.overlapping(window) {
                let hit = from + h.start();
                let (lit, exact, admits) = pre.literals[h.pattern().as_usize()];
                if hit < to && (!exact || &hay[hit..from + h.end()] == lit) {
                    at.push((hit, admits));
                }
            }
        }
        line = end;
    }
    at.sort_by_key(|h| h.0);
    at
}

/// A prefix shorter than this is read with its line: skipping it saves less than
/// starting a search per line costs.
const PREFIX_SKIP_BYTES_MIN: usize = 24;

struct Pattern {
    re: Regex,
    /// The capture group holding the secret (0: the whole match).
    group: usize,
    /// Where a secret that ends with a line of its own ends; without that line before
    /// the end of the text, the secret runs to the end of the text.
    end: Option<Regex>,
    /// What the secret must also be, beyond matching (`None`: nothing more).
    check: Option<fn(&[u8]) -> bool>,
}

/// True when `b64`, the value after `Basic`, decodes to a `user:password` pair (either
/// may be empty, not both: a token given as the user alone is a credential too) of
/// text without control characters but line ends and tabs: the credential of a Basic
/// authorization, where a word after "basic" in prose decodes to bytes that are not
/// such text.
fn basic_credential(b64: &[u8]) -> bool {
    let Some(bytes) = basic_decoded(b64) else {
        return false;
    };
    match std::str::from_utf8(&bytes) {
        Ok(pair) => {
            pair.len() > 1
                && pair.contains(':')
                && !pair.chars().any(|c| c.is_control() && !c.is_whitespace())
        }
        Err(_) => false,
    }
}

/// The bytes of a `Basic` credential's base64, its padding given or not.
fn basic_decoded(b64: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    LENIENT.decode(b64).ok()
}

/// The check of the pattern of `kind` beyond its match (see [`Pattern::check`]).
fn check_of(kind: &str) -> Option<fn(&[u8]) -> bool> {
    match kind {
        "basic_auth" => Some(basic_credential),
        _ => None,
    }
}

/// A pattern whose secret starts at a word boundary, made to start also right after a
/// backslash escape (`\n`, `\r`, `\t`): text that holds JSON or C-escaped text (a
/// permission prompt showing an input, an MCP result, a log line) has `\nghp_…`, where
/// `n` and `g` leave no word boundary between them. The secret moves into a group of
/// its own: the group given and the new one's index.
fn escape_aware(re: &str, group: usize) -> (String, usize) {
    let (flags, rest) = match re.strip_prefix("(?i)") {
        Some(rest) => ("(?i)", rest),
        None => ("", re),
    };
    match rest.strip_prefix(r"(?-u:\b)") {
        Some(body) => (format!(r"{flags}(?:\\[nrt]|(?-u:\b))({body})"), group + 1),
        None => (re.to_string(), group),
    }
}

/// Compiles the pattern of [`SOURCES`] at `i` (its secret group moved as
/// [`escape_aware`] says).
fn compile(i: usize) -> Option<Pattern> {
    let &(kind, re, group, end) = SOURCES.get(i)?;
    let (re, group) = escape_aware(re, group);
    Some(Pattern {
        re: Regex::new(&re).ok()?,
        group,
        end: match end {
            Some(end) => Some(Regex::new(end).ok()?),
            None => None,
        },
        check: check_of(kind),
    })
}

/// Each pattern of [`SOURCES`], compiled the first time a text may hold its secret
/// (the prefilter says so): a short-lived process (a hook, one `cairn` command) pays
/// only for the set, not for every pattern besides (a test checks all compile).
static PATTERNS: LazyLock<Vec<OnceLock<Option<Pattern>>>> =
    LazyLock::new(|| SOURCES.iter().map(|_| OnceLock::new()).collect());

/// The pattern of [`SOURCES`] at `i`, compiled (`None`: it does not compile).
fn pattern(i: usize) -> Option<&'static Pattern> {
    PATTERNS.get(i)?.get_or_init(|| compile(i)).as_ref()
}

/// A whole text of at least this many bytes is searched in segments around the
/// literals it holds ([`Redactor::spans_segmented`]); a stream's pass over as many
/// bytes asks [`PATTERN_SET`] first which patterns match in it; shorter texts run every
/// pattern the [`PREFILTER`] admits. In a big text, a literal standing without the
/// rest of its pattern (`max_tokens=4096` holds `token`) would otherwise send the
/// pattern over all of it. The segments win where literals are few (a search's answer:
/// about a third of the instructions), the set where they stand on every few lines
/// with no secret (a build log: the segments take about 1.5 times its time), which is
/// what a command's output mostly is. All give the same spans (tests check it).
pub const SEGMENT_TEXT_BYTES_MIN: usize = 64 * 1024;

/// All the patterns at once, in the order of [`SOURCES`]: one pass over a big text says
/// which of them match in it.
static PATTERN_SET: LazyLock<Option<RegexSet>> = LazyLock::new(|| {
    RegexSet::new(
        SOURCES
            .iter()
            .map(|&(_, re, group, _)| escape_aware(re, group).0),
    )
    .ok()
});

/// The patterns [`PATTERN_SET`] finds in `hay`, as the prefilter's bit set (all of them
/// when the set did not compile: never fewer redactions).
fn set_hits(hay: &[u8]) -> u64 {
    match PATTERN_SET.as_ref() {
        Some(set) => set.matches(hay).iter().fold(0, |bits, i| bits | 1 << i),
        None => u64::MAX,
    }
}

/// The patterns [`Redactor::spans_segmented`] runs over the whole text: the private
/// key's, whose secret runs to its end line or to the end of the text.
const WHOLE_TEXT_PATTERNS: u64 = 1;

/// Pushes the secret's start and end and the match's end of each match of the pattern
/// of [`SOURCES`] at `i` in `hay[start..end]`, the text around it seen as context, in
/// order, leaving out a secret that starts with a marker (redacted already). `end` is
/// the text's end or a [`segment_cut`].
fn matches(hay: &[u8], i: usize, start: usize, end: usize, found: &mut Vec<(usize, usize, usize)>) {
    let Some(p) = pattern(i) else { return };
    // Cut at `end`, the text gives what the whole text gives: no match holds the line
    // end before a cut, so none ends at it nor asks what follows it.
    let within = &hay[..end];
    let mut at = start;
    while at <= end {
        let Some(c) = p.re.captures_at(within, at) else {
            break;
        };
        let Some(whole) = c.get(0) else { break };
        // As `captures_iter` goes on: after the match, past an empty one.
        at = if whole.is_empty() {
            whole.end() + 1
        } else {
            whole.end()
        };
        if let Some(secret) = c.get(p.group)
            && !hay[secret.start()..].starts_with(b"[REDACTED")
            && p.check.is_none_or(|check| check(secret.as_bytes()))
        {
            found.push((secret.start(), secret.end(), whole.end()));
        }
    }
}

/// True for a byte that may be part of a run of whitespace (`\s`) of a pattern: ASCII
/// whitespace, or any byte of a character outside ASCII (Unicode has more spaces).
fn maybe_space(b: u8) -> bool {
    b.is_ascii_whitespace() || b == b'\x0B' || b >= 0x80
}

/// The run of [`maybe_space`] bytes around the line end at `n` (`hay[n]` is `\n`).
fn space_run(hay: &[u8], n: usize) -> std::ops::Range<usize> {
    debug_assert_eq!(hay[n], b'\n');
    let mut before = n;
    while before > 0 && maybe_space(hay[before - 1]) {
        before -= 1;
    }
    let mut after = n + 1;
    while after < hay.len() && maybe_space(hay[after]) {
        after += 1;
    }
    before..after
}

/// True when no match of a pattern but the private key's can hold a line end in the
/// whitespace `run`, so a segment may end after any line end in it. Only three
/// patterns may hold a line end: `bearer` in its `\s+` after the word, `assignment` in
/// a `\s*` before or after its `:` or `=`, or in its value as an escaped line end (`\`
/// then the line end). So a line end is a cut unless the run of whitespace around it
/// follows an `r`, a `:`, an `=` or a `\`, or comes before a `:` or an `=`. The same
/// holds for every line end of the run: a search for a cut skips the run when it is
/// not one (a megabyte of line ends is read once, not once a line).
fn segment_cut(hay: &[u8], run: &std::ops::Range<usize>) -> bool {
    let before = run.start.checked_sub(1).map(|b| hay[b]);
    cut_between(before, hay.get(run.end).copied())
}

/// [`segment_cut`]'s rule: a run of whitespace holding a line end, with `before` the
/// byte before it and `after` the byte after it (`None`: the text's edge), is a cut.
fn cut_between(before: Option<u8>, after: Option<u8>) -> bool {
    let joins_before = matches!(before, Some(b'r' | b'R' | b':' | b'=' | b'\\'));
    let joins_after = matches!(after, Some(b':' | b'='));
    !joins_before && !joins_after
}

/// Where the segment holding a hit at `at` starts: after the last cut before it, and
/// not before `floor` (the end of the segment before it, a cut itself).
fn cut_before(hay: &[u8], at: usize, floor: usize) -> usize {
    let mut to = at;
    while let Some(n) = memchr::memrchr(b'\n', &hay[floor..to]) {
        let n = floor + n;
        let run = space_run(hay, n);
        if segment_cut(hay, &run) {
            return n + 1;
        }
        to = run.start.max(floor);
    }
    floor
}

/// Where the segment holding a hit at `at` ends: after the first cut after it, or at
/// the end of the text.
fn cut_after(hay: &[u8], at: usize) -> usize {
    let mut from = at;
    while let Some(n) = memchr::memchr(b'\n', &hay[from..]) {
        let n = from + n;
        let run = space_run(hay, n);
        if segment_cut(hay, &run) {
            return n + 1;
        }
        from = run.end;
    }
    hay.len()
}

/// What a stretch of text is replaced for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Secret {
    /// The value of the redactor's environment secret with this index.
    Env(usize),
    /// A match of the pattern with this index.
    Pattern(usize),
}

/// A stretch of a text to replace with one marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
    secret: Secret,
    /// The match reaches the end of the text: more text could change it.
    open: bool,
}

/// The spans chosen so far: sorted, never overlapping.
#[derive(Debug, Default)]
struct Chosen(Vec<Span>);

impl Chosen {
    /// The indexes of the chosen spans overlapping `start..end`.
    fn overlapping(&self, start: usize, end: usize) -> std::ops::Range<usize> {
        let from = self.0.partition_point(|s| s.end <= start);
        let to = from + self.0[from..].iter().take_while(|s| s.start < end).count();
        from..to
    }

    /// Chooses `span` unless it overlaps a chosen span it does not contain, or one as
    /// long as itself; the spans it contains make way for it.
    fn offer(&mut self, span: Span) {
        debug_assert!(span.start < span.end, "an empty secret: {span:?}");
        let overlapping = self.overlapping(span.start, span.end);
        let len = span.end - span.start;
        if self.0[overlapping.clone()]
            .iter()
            .all(|s| span.start <= s.start && s.end <= span.end && s.end - s.start < len)
        {
            self.0.splice(overlapping, [span]);
        }
    }

    /// Chooses `span`, found in a decoded view of the text: as [`Chosen::offer`], but a
    /// span that overlaps chosen ones without lying inside one of them is merged with
    /// them into one stretch, the secret of the longest of them, so that no byte of
    /// either secret is left (a secret's decoded form may start before its plain match
    /// and end inside it).
    fn offer_decoded(&mut self, span: Span) {
        debug_assert!(span.start < span.end, "an empty secret: {span:?}");
        let overlapping = self.overlapping(span.start, span.end);
        let others = &self.0[overlapping.clone()];
        if others
            .iter()
            .any(|s| s.start <= span.start && span.end <= s.end)
        {
            return;
        }
        let mut merged = span;
        for s in others {
            merged.start = merged.start.min(s.start);
            merged.end = merged.end.max(s.end);
            merged.open |= s.open;
        }
        // The secret of the longest stretch, the first chosen one of them on a tie.
        let len = |s: &Span| s.end - s.start;
        merged.secret = others
            .iter()
            .chain([&span])
            .fold((0, span.secret), |(best, secret), s| match len(s) > best {
                true => (len(s), s.secret),
                false => (best, secret),
            })
            .1;
        self.0.splice(overlapping, [merged]);
    }
}

/// The most bytes an escape of [`decode`] takes: an HTML reference by name (33 letters
/// and its `&` and `;`), more than JSON's `\uD83D\uDE00`.
const ESCAPE_BYTES_MAX: usize = 35;

/// True when `text` ends with an escape some reading decodes, or with a `+` (a space in
/// a query) or a quote (closing a `$'…'` string): its last bytes may be read as
/// something else.
fn ends_with_escape(text: &[u8]) -> bool {
    if matches!(text.last(), Some(b'+' | b'\'')) {
        return true;
    }
    let tail = &text[text.len().saturating_sub(ESCAPE_BYTES_MAX)..];
    decode::READINGS.iter().any(|&reading| {
        decode::decode(reading, tail).is_some_and(|v| v.ends_with_escape(tail.len()))
    })
}

/// `range` of `hay` widened to whole characters: a stretch mapped back from a view
/// starts and ends at an escape or at a byte of the text's own, but bytes that are not
/// UTF-8 in a view may have put it inside a character.
fn whole_chars(hay: &[u8], range: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let continuation = |b: u8| (0x80..0xC0).contains(&b);
    let (mut start, mut end) = (range.start, range.end);
    while start > 0 && continuation(hay[start]) {
        start -= 1;
    }
    while end < hay.len() && continuation(hay[end]) {
        end += 1;
    }
    start..end
}

/// A piece of a longer text redacted on its own ([`Redactor::piece`]), to be joined to
/// the pieces around it ([`Redactor::join`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Piece {
    /// The text as given.
    text: String,
    /// Its redaction on its own, when that found a secret.
    redacted: Option<String>,
    counts: Counts,
    /// A secret runs to the end of the text: in a longer one it may run further.
    open: bool,
    /// The text holds a byte that starts an escape: a secret decoded from it may run
    /// over an edge that is a cut of the text as it is.
    encoded: bool,
    /// Its last line end may lie inside a secret that goes on in the next piece
    /// ([`LineEnds`]: after a backslash, in the text or in a view of it).
    held_end: bool,
}

impl Piece {
    /// The text as given, not redacted.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text as given, not redacted.
    pub fn into_text(self) -> String {
        self.text
    }
}

/// Redacts secrets; built once per session.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Values of environment variables whose names look secret, longest first.
    env_values: Vec<(String, String)>,
}

/// True for names like `GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `DB_PASSWORD`.
pub fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n.ends_with("_TOKEN")
        || n.ends_with("_KEY")
        || n.ends_with("_SECRET")
        || n.contains("PASSWORD")
        || n.contains("SECRET_")
}

/// Every form a reader may read `text` in: the text itself, each view of it by each
/// reading the redactor decodes (percent, JSON, shell, HTML escapes), and each view's
/// views in turn, up to `rounds` readings deep (the readings mixed), and the decoded
/// value of each `Basic` credential in any of them. For tests and audits that look
/// for a secret in every form a stored text can give it back in; the redactor itself
/// reads each reading's views only ([`DECODE_ROUNDS_MAX`] deep).
pub fn decoded_forms(text: &[u8], rounds: usize) -> Vec<Vec<u8>> {
    let mut forms = vec![text.to_vec()];
    let mut frontier = 0;
    for _ in 0..rounds {
        let end = forms.len();
        for k in frontier..end {
            for reading in decode::READINGS {
                if let Some(view) = decode::decode(reading, &forms[k]) {
                    forms.push(view.text);
                }
            }
        }
        frontier = end;
    }
    let basic = SOURCES
        .iter()
        .position(|s| s.0 == "basic_auth")
        .and_then(pattern);
    let mut credentials = Vec::new();
    for (form, p) in forms.iter().flat_map(|f| basic.map(|p| (f, p))) {
        for c in p.re.captures_iter(form) {
            if let Some(bytes) = c.get(p.group).and_then(|m| basic_decoded(m.as_bytes())) {
                credentials.push(bytes);
            }
        }
    }
    forms.extend(credentials);
    forms
}

impl Redactor {
    /// A redactor that knows the given variables (only secret-looking names with values
    /// of 8 characters or more are kept).
    pub fn with_env(vars: impl IntoIterator<Item = (String, String)>) -> Redactor {
        let mut env_values: Vec<(String, String)> = vars
            .into_iter()
            .filter(|(k, v)| secret_name(k) && v.chars().count() >= 8)
            .collect();
        env_values.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        Redactor { env_values }
    }

    /// Adds one value to redact as `[REDACTED:env:<name>]` (8 characters or more).
    pub fn add_value(&mut self, name: &str, value: &str) {
        if value.chars().count() >= 8 && !self.env_values.iter().any(|(_, v)| v == value) {
            self.env_values.push((name.to_string(), value.to_string()));
            self.env_values
                .sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        }
    }

    /// Redacts `text`, adding to `counts`: [`Redactor::redact_bytes`] over its bytes
    /// (markers are ASCII and a secret found in UTF-8 is whole characters, so the
    /// result is UTF-8 too).
    pub fn redact<'a>(&self, text: &'a str, counts: &mut Counts) -> Cow<'a, str> {
        match self.redact_bytes(text.as_bytes(), counts) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            Cow::Owned(bytes) => match String::from_utf8(bytes) {
                Ok(text) => Cow::Owned(text),
                Err(e) => unreachable!("redaction cut a character of a text in two: {e}"),
            },
        }
    }

    /// [`Redactor::redact`] of an owned text: the text itself when nothing in it is a
    /// secret (a multi-megabyte answer is not copied).
    pub fn redact_string(&self, text: String, counts: &mut Counts) -> String {
        let redacted = match self.redact(&text, counts) {
            Cow::Owned(r) => Some(r),
            Cow::Borrowed(_) => None,
        };
        redacted.unwrap_or(text)
    }

    /// Redacts `bytes`, adding to `counts`. Bytes that are not UTF-8 pass through
    /// unchanged (no pattern matches them).
    pub fn redact_bytes<'a>(&self, bytes: &'a [u8], counts: &mut Counts) -> Cow<'a, [u8]> {
        let spans = self.spans(bytes);
        if spans.is_empty() {
            return Cow::Borrowed(bytes);
        }
        Cow::Owned(self.replaced(bytes, &spans, counts))
    }

    /// `bytes` with each of `spans` replaced by its marker, counted.
    fn replaced(&self, bytes: &[u8], spans: &[Span], counts: &mut Counts) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len());
        let mut at = 0;
        for s in spans {
            out.extend_from_slice(&bytes[at..s.start]);
            self.marker(s.secret, &mut out, counts);
            at = s.end;
        }
        out.extend_from_slice(&bytes[at..]);
        out
    }

    /// [`Redactor::replaced`] of a text, with whether a secret runs to its end.
    fn redacted_text(&self, text: &str, counts: &mut Counts) -> (Option<String>, bool) {
        let spans = self.piece_spans(text.as_bytes());
        self.redacted_at(text, &spans, counts)
    }

    /// [`Redactor::redacted_text`] with the spans found already.
    fn redacted_at(
        &self,
        text: &str,
        spans: &[Span],
        counts: &mut Counts,
    ) -> (Option<String>, bool) {
        if spans.is_empty() {
            return (None, false);
        }
        let open = spans.iter().any(|s| s.open || s.end == text.len());
        match String::from_utf8(self.replaced(text.as_bytes(), spans, counts)) {
            Ok(out) => (Some(out), open),
            Err(e) => unreachable!("redaction cut a character of a text in two: {e}"),
        }
    }

    /// Redacts `text` on its own as a piece of a longer text, to be joined to the
    /// pieces around it with [`Redactor::join`]; runs on any thread. Search workers
    /// redact each file's lines so: the thread that joins them searches again only
    /// where two pieces may hold one secret between them.
    pub fn piece(&self, text: String) -> Piece {
        self.piece_of_lines(text, "")
    }

    /// [`Redactor::piece`] of lines that mostly start with `prefix` (a search's answer
    /// for one file, whose lines start with its path): the same piece, found without
    /// reading every line's copy of the prefix.
    pub fn piece_of_lines(&self, text: String, prefix: &str) -> Piece {
        if text.is_empty() {
            return Piece::default();
        }
        let mut counts = Counts::new();
        let spans = match ANCHORS.as_ref() {
            Some(anchors) => {
                let hits = anchored_hits_after_prefix(anchors, text.as_bytes(), prefix.as_bytes());
                self.with_decoded(text.as_bytes(), self.spans_at_hits(text.as_bytes(), &hits))
            }
            None => self.spans(text.as_bytes()),
        };
        let (redacted, open) = self.redacted_at(&text, &spans, &mut counts);
        let encoded = decode::may_be_encoded(text.as_bytes());
        let held_end = text.ends_with('\n')
            && LineEnds::new(self, text.as_bytes()).inside_secret(text.len() - 1);
        Piece {
            text,
            redacted,
            counts,
            open,
            encoded,
            held_end,
        }
    }

    /// The redaction of the pieces' whole text (their texts one after the other), with
    /// its counts added to `counts`: byte for byte what [`Redactor::redact`] of that
    /// text gives, from each piece's own redaction wherever no secret can reach across
    /// its edges. Every piece must come from this redactor's [`Redactor::piece`].
    ///
    /// A secret can cross from one piece into the next only at an edge that is no cut
    /// ([`segment_cut`]: the piece before ends with a line end no match can hold), or
    /// after a line end a secret may hold when the piece before is read in its views
    /// ([`LineEnds`]: after a `%255C` or an `&amp;bsol;`, a backslash two readings
    /// deep), or when it runs to the end of its piece (a private key with no end line there, in
    /// a longer text redacted to the next end line or to the end of the text), or when
    /// an environment secret holds a line end. The pieces between such edges are
    /// redacted again as one text, from the piece that ends open to the last; with an
    /// environment secret holding a line end, the whole text is.
    pub fn join(&self, pieces: Vec<Piece>, counts: &mut Counts) -> String {
        let pieces: Vec<Piece> = pieces.into_iter().filter(|p| !p.text.is_empty()).collect();
        if self.env_values.iter().any(|(_, v)| v.contains('\n')) {
            let whole: String = pieces.iter().map(|p| p.text.as_str()).collect();
            return self.redact_string(whole, counts);
        }
        // The last byte that is no whitespace up to each piece's end, and the first
        // from each piece's start on, across pieces of whitespace only.
        let mut last_solid: Vec<Option<u8>> = Vec::with_capacity(pieces.len());
        for p in &pieces {
            let solid = p.text.bytes().rev().find(|&b| !maybe_space(b));
            last_solid.push(solid.or(last_solid.last().copied().flatten()));
        }
        let mut first_solid: Vec<Option<u8>> = vec![None; pieces.len()];
        for (k, p) in pieces.iter().enumerate().rev() {
            let solid = p.text.bytes().find(|&b| !maybe_space(b));
            first_solid[k] = solid.or(first_solid.get(k + 1).copied().flatten());
        }
        // Whether the last bytes that are no whitespace up to each piece's end are an
        // escape's, or its last line end may lie inside a secret, across pieces of
        // whitespace only.
        let mut escape_last: Vec<bool> = Vec::with_capacity(pieces.len());
        for p in &pieces {
            let solid = p.text.bytes().rposition(|b| !maybe_space(b));
            let ends = match solid {
                Some(at) => {
                    p.held_end || (p.encoded && ends_with_escape(&p.text.as_bytes()[..=at]))
                }
                None => p.held_end || escape_last.last().copied().unwrap_or(false),
            };
            escape_last.push(ends);
        }
        // True when the edge before piece `k` is a cut. Beside an escape it may not be:
        // a view reads `%3D` or `&#61;` before a line end as `=`, and `%20`, `\t` or
        // `&nbsp;` as a space of the run around it. So the edge joins the pieces when
        // an escape ends just before the run of whitespace around it, or may start
        // right after it.
        let cut = |k: usize| {
            pieces[k - 1].text.ends_with('\n')
                && cut_between(last_solid[k - 1], first_solid[k])
                && !escape_last[k - 1]
                && !matches!(first_solid[k], Some(b'%' | b'&' | b'\\' | b'$' | b'+'))
        };
        let bytes = pieces
            .iter()
            .map(|p| p.redacted.as_ref().map_or(p.text.len(), String::len))
            .sum();
        let mut out = String::with_capacity(bytes);
        let mut i = 0;
        while i < pieces.len() {
            let mut j = i + 1;
            while j < pieces.len() && !cut(j) {
                j += 1;
            }
            if j == i + 1 && !(pieces[i].open && j < pieces.len()) {
                let p = &pieces[i];
                out.push_str(p.redacted.as_deref().unwrap_or(&p.text));
                for (kind, n) in &p.counts {
                    *counts.entry(kind.clone()).or_default() += n;
                }
                i = j;
                continue;
            }
            let mut group: String = pieces[i..j].iter().map(|p| p.text.as_str()).collect();
            let mut found = Counts::new();
            let (mut redacted, open) = self.redacted_text(&group, &mut found);
            if open && j < pieces.len() {
                // The secret may run on into the pieces after the group.
                group.extend(pieces[j..].iter().map(|p| p.text.as_str()));
                found.clear();
                redacted = self.redacted_text(&group, &mut found).0;
                j = pieces.len();
            }
            out.push_str(redacted.as_deref().unwrap_or(&group));
            for (kind, n) in found {
                *counts.entry(kind).or_default() += n;
            }
            i = j;
        }
        out
    }

    /// True when some string inside `v` holds a secret [`Redactor::redact_json`] would
    /// replace: the check without building the redacted copy (every record is checked,
    /// almost none holds one).
    pub fn json_holds_secret(&self, v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::String(s) => !self.spans(s.as_bytes()).is_empty(),
            serde_json::Value::Array(a) => a.iter().any(|x| self.json_holds_secret(x)),
            // A key is a string of the tree too: a map from the model may hold a secret
            // as a key.
            serde_json::Value::Object(m) => m
                .iter()
                .any(|(k, x)| !self.spans(k.as_bytes()).is_empty() || self.json_holds_secret(x)),
            _ => false,
        }
    }

    /// [`Redactor::json_holds_secret`] of `value`'s JSON tree, asked of the value
    /// itself, without building the tree: the check every record goes through before
    /// it is written.
    pub fn holds_secret<T: serde::Serialize + ?Sized>(&self, value: &T) -> bool {
        probe::holds_secret(self, value, None)
    }

    /// [`Redactor::holds_secret`], with `checked` (one of `value`'s own strings, by
    /// address: not a copy) already found to hold none by [`Redactor::redact`] of it
    /// giving it back unchanged: it is not searched twice.
    pub fn holds_secret_but<T: serde::Serialize + ?Sized>(&self, value: &T, checked: &str) -> bool {
        probe::holds_secret(self, value, Some(checked))
    }

    /// Redacts every string inside a JSON value, its objects' keys included. A key that
    /// redacts to a key the object already has gets `#2`, `#3`, … after it, so that no
    /// member is lost: `{"ghp_…": 1, "ghp_…2": 2}` becomes
    /// `{"[REDACTED:github_token]": 1, "[REDACTED:github_token]#2": 2}`.
    pub fn redact_json(&self, v: &serde_json::Value, counts: &mut Counts) -> serde_json::Value {
        match v {
            serde_json::Value::String(s) => {
                serde_json::Value::String(self.redact(s, counts).into_owned())
            }
            serde_json::Value::Array(a) => {
                serde_json::Value::Array(a.iter().map(|x| self.redact_json(x, counts)).collect())
            }
            serde_json::Value::Object(m) => {
                let mut out = serde_json::Map::with_capacity(m.len());
                for (k, x) in m {
                    let value = self.redact_json(x, counts);
                    let key = match self.redact(k, counts) {
                        Cow::Borrowed(_) => k.clone(),
                        Cow::Owned(redacted) => unique_key(&out, m, redacted),
                    };
                    out.insert(key, value);
                }
                serde_json::Value::Object(out)
            }
            other => other.clone(),
        }
    }

    /// The stretches of `hay` to replace, in order (see the module's documentation).
    fn spans(&self, hay: &[u8]) -> Vec<Span> {
        self.with_decoded(hay, self.plain_spans(hay))
    }

    /// The stretches of `hay` as it is, not decoded.
    fn plain_spans(&self, hay: &[u8]) -> Vec<Span> {
        if hay.len() >= SEGMENT_TEXT_BYTES_MIN {
            self.spans_segmented(hay)
        } else {
            self.spans_of(hay, PREFILTER.hits(hay))
        }
    }

    /// The same for a piece of a text ([`Redactor::piece`]): in segments whatever its
    /// size, the cheaper way on a search's answer.
    fn piece_spans(&self, hay: &[u8]) -> Vec<Span> {
        match ANCHORS.as_ref() {
            Some(_) => self.with_decoded(hay, self.spans_segmented(hay)),
            None => self.spans(hay),
        }
    }

    /// The same for a stream's pass (see [`SEGMENT_TEXT_BYTES_MIN`]).
    fn stream_spans(&self, hay: &[u8]) -> Vec<Span> {
        let hits = if hay.len() >= SEGMENT_TEXT_BYTES_MIN {
            set_hits(hay)
        } else {
            PREFILTER.hits(hay)
        };
        self.with_decoded(hay, self.spans_of(hay, hits))
    }

    /// `plain`, the spans of `hay` as it is, with the secrets a reader would see in it
    /// once its escapes are decoded ([`decode`]: percent escapes, JSON and shell
    /// escapes, HTML references, each reading decoded again up to
    /// [`DECODE_ROUNDS_MAX`] times): each is replaced in `hay` where it was decoded
    /// from, escapes and all ([`Chosen::offer_decoded`]). A text holding no byte that
    /// starts an escape (`%`, `&`, `\`, `+`) costs one `memchr` pass more.
    fn with_decoded(&self, hay: &[u8], plain: Vec<Span>) -> Vec<Span> {
        self.with_decoded_by(hay, plain, Self::view_spans)
    }

    /// [`Redactor::with_decoded`] with `find` giving the spans of a view, in the view.
    fn with_decoded_by(
        &self,
        hay: &[u8],
        plain: Vec<Span>,
        find: impl Fn(&Self, &decode::View) -> Vec<Span>,
    ) -> Vec<Span> {
        if !decode::may_be_encoded(hay) {
            return plain;
        }
        let mut chosen = Chosen(plain);
        for reading in decode::READINGS {
            if !reading.starts_on(hay) {
                continue;
            }
            // Each round's view, decoded from the one before.
            let mut views: Vec<decode::View> = Vec::new();
            while views.len() < DECODE_ROUNDS_MAX {
                let text = views.last().map_or(hay, |v| &v.text[..]);
                let Some(view) = decode::decode(reading, text) else {
                    break;
                };
                for s in find(self, &view) {
                    let mut at = view.source(s.start..s.end);
                    for v in views.iter().rev() {
                        at = v.source(at);
                    }
                    let at = whole_chars(hay, at);
                    chosen.offer_decoded(Span {
                        start: at.start,
                        end: at.end,
                        secret: s.secret,
                        open: s.open,
                    });
                }
                views.push(view);
            }
        }
        chosen.0
    }

    /// The spans of a view's text, searched only in the segments ([`segment_cut`])
    /// around its escapes: a match that neither holds a decoded byte nor stands beside
    /// one is a match of the text as it is, found already by the plain pass. A text
    /// with a few escapes costs their lines, not a second pass over it.
    fn view_spans(&self, view: &decode::View) -> Vec<Span> {
        let hay = &view.text[..];
        if hay.is_empty() {
            return Vec::new();
        }
        let mut hits: Vec<(usize, u64)> = Vec::new();
        // The end of the segments searched so far: a cut, or the text's end.
        let mut floor = 0;
        for e in view.escapes() {
            // The escape's decoded bytes and one byte on either side (a word boundary
            // beside a match).
            let (lo, hi) = (e.start.saturating_sub(1), (e.end + 1).min(hay.len()));
            if hi <= floor {
                continue;
            }
            let start = cut_before(hay, lo.max(floor), floor);
            let end = cut_after(hay, hi - 1);
            hits.extend(
                PREFILTER
                    .hits_at(&hay[start..end])
                    .into_iter()
                    .map(|(at, admits)| (start + at, admits)),
            );
            floor = end;
        }
        self.spans_at_hits(hay, &hits)
    }

    /// The same, running only the patterns in `hits` (bit `i`: the pattern of
    /// [`SOURCES`] at `i`).
    fn spans_of(&self, hay: &[u8], hits: u64) -> Vec<Span> {
        let mut chosen = self.env_spans(hay);
        for i in 0..SOURCES.len() {
            if hits & (1 << i) != 0 {
                self.offer_matches(hay, i, 0, hay.len(), &mut chosen);
            }
        }
        chosen.0
    }

    /// [`Redactor::spans`] of a big text, searched only around its literals: the same
    /// spans, in one pass of the [`PREFILTER`] and the patterns' runs over the lines
    /// that hold their literals, where the whole-text way ran every pattern over the
    /// whole text (twice for a pattern that matches: the set, then the pattern).
    ///
    /// Each pattern but the private key's is run only over the segments of the text
    /// around its hits, a segment running from one [`segment_cut`] to another; no match
    /// of these patterns crosses a cut, so a pattern finds in the segments, searched
    /// with the text around them as context, what it finds in the whole text. The
    /// private key's (a key runs to its end line, or to the end of the text) is run
    /// over the whole text when the text holds its literal; its search for
    /// `-----BEGIN ` is a literal one, fast. The matches are offered in the same order
    /// as [`Redactor::spans_of`] offers them.
    fn spans_segmented(&self, hay: &[u8]) -> Vec<Span> {
        let hits = match ANCHORS.as_ref() {
            Some(anchors) => anchored_hits(anchors, hay),
            None => PREFILTER.hits_at(hay),
        };
        self.spans_at_hits(hay, &hits)
    }

    /// [`Redactor::spans_segmented`] with the literals' hits found already (as
    /// [`Prefilter::hits_at`] finds them).
    fn spans_at_hits(&self, hay: &[u8], hits: &[(usize, u64)]) -> Vec<Span> {
        let mut chosen = self.env_spans(hay);
        let mut found: Vec<Vec<(usize, usize, usize)>> = vec![Vec::new(); SOURCES.len()];
        let mut whole = 0u64;
        // The segments, each with the patterns its hits admit.
        let mut segments: Vec<(usize, usize, u64)> = Vec::new();
        for &(at, admits) in hits {
            whole |= admits & WHOLE_TEXT_PATTERNS;
            let admits = admits & !WHOLE_TEXT_PATTERNS;
            if admits == 0 {
                continue;
            }
            match segments.last_mut() {
                Some(last) if at < last.1 => last.2 |= admits,
                last => {
                    let floor = last.map_or(0, |l| l.1);
                    let start = cut_before(hay, at, floor);
                    let end = cut_after(hay, at);
                    segments.push((start, end, admits));
                }
            }
        }
        for i in 0..SOURCES.len() {
            if whole & (1 << i) != 0 {
                self.offer_matches(hay, i, 0, hay.len(), &mut chosen);
            }
        }
        for &(start, end, admits) in &segments {
            for (i, found) in found.iter_mut().enumerate() {
                if admits & (1 << i) != 0 {
                    matches(hay, i, start, end, found);
                }
            }
        }
        for (i, found) in found.iter().enumerate() {
            for &(start, end, whole_end) in found {
                chosen.offer(Span {
                    start,
                    end,
                    secret: Secret::Pattern(i),
                    open: whole_end == hay.len(),
                });
            }
        }
        chosen.0
    }

    /// The spans of the environment secrets in `hay`, longest value first.
    fn env_spans(&self, hay: &[u8]) -> Chosen {
        let mut chosen = Chosen::default();
        for (i, (_, value)) in self.env_values.iter().enumerate() {
            let finder = memchr::memmem::Finder::new(value.as_bytes());
            let mut at = 0;
            while let Some(found) = finder.find(&hay[at..]) {
                let (start, end) = (at + found, at + found + value.len());
                let overlapping = chosen.overlapping(start, end);
                if overlapping.is_empty() {
                    chosen.offer(Span {
                        start,
                        end,
                        secret: Secret::Env(i),
                        open: false,
                    });
                    at = end;
                } else {
                    // A longer value took the first one it overlaps: go on after it.
                    at = chosen.0[overlapping.start].end;
                }
            }
        }
        chosen
    }

    /// Offers every match of the pattern of [`SOURCES`] at `i` in `hay[start..end]`.
    fn offer_matches(&self, hay: &[u8], i: usize, start: usize, end: usize, chosen: &mut Chosen) {
        let Some(p) = pattern(i) else { return };
        let mut found = Vec::new();
        matches(hay, i, start, end, &mut found);
        for (secret_start, secret_end, whole_end) in found {
            let (end, open) = match &p.end {
                Some(end) => match end.find_at(hay, whole_end) {
                    Some(m) => (m.end(), false),
                    // No end line: the rest of the text is the secret.
                    None => (hay.len(), true),
                },
                None => (secret_end, whole_end == hay.len()),
            };
            chosen.offer(Span {
                start: secret_start,
                end,
                secret: Secret::Pattern(i),
                open,
            });
        }
    }

    /// True when the line end at `n` of `text` (`text[n]` is `\n`) may lie inside a
    /// secret of `text` as it is, with what may follow it: after a backslash (a `\r`
    /// between or not), or inside an environment value that holds a line end before
    /// its last byte (see [`LineEnds`]).
    fn holds_line_end(&self, text: &[u8], n: usize) -> bool {
        let before = &text[..n];
        let before = before.strip_suffix(b"\r").unwrap_or(before);
        before.ends_with(b"\\")
            || self.env_values.iter().any(|(_, v)| {
                let v = v.as_bytes();
                memchr::memchr_iter(b'\n', &v[..v.len().saturating_sub(1)])
                    .any(|j| text[..=n].ends_with(&v[..=j]))
            })
    }

    /// Writes the marker of `secret` and counts it.
    fn marker(&self, secret: Secret, out: &mut Vec<u8>, counts: &mut Counts) {
        let kind = match secret {
            Secret::Env(i) => {
                out.extend_from_slice(b"[REDACTED:env:");
                out.extend_from_slice(self.env_values[i].0.as_bytes());
                "env_secret"
            }
            Secret::Pattern(i) => {
                out.extend_from_slice(b"[REDACTED:");
                out.extend_from_slice(SOURCES[i].0.as_bytes());
                SOURCES[i].0
            }
        };
        out.push(b']');
        *counts.entry(kind.to_string()).or_default() += 1;
    }
}

/// True for a byte that may continue a secret cut at the window (see
/// [`StreamRedactor`]): anything but whitespace and the quotes and separators that end
/// a `password=` value.
fn continues_run(b: u8) -> bool {
    !matches!(
        b,
        b' ' | b'\t' | b'\n' | b'\r' | b'\x0B' | b'\x0C' | b'"' | b'\'' | b',' | b';' | b'&'
    )
}

/// Which line ends of a text may lie inside a secret that goes on past them, where the
/// rest of the text has not come yet: a stream may pass a line on only at a line end
/// that is none of them ([`Cut::Lines`]). A secret holds a line end in three ways:
/// `\` then the line end is a character of an `assignment` value (`pwd=\` then a line
/// end holds no value yet: the four characters it needs come after it); the shell
/// reading joins the lines at `\` then a line end (`\r\n` too); and an environment
/// value may hold one. Each holds in the text as it is or in any view of it: after a
/// `%5C`, `&bsol;` or `\\` a view has the backslash. (A private key is found from its
/// first line on, held or passed whole; every other pattern's secret holds no line
/// end.)
struct LineEnds<'a> {
    redactor: &'a Redactor,
    hay: &'a [u8],
    /// Each reading's views of `hay`, round after round, as the redactor searches
    /// them: decoded when a line end asks first.
    views: Option<Vec<Vec<decode::View>>>,
}

impl<'a> LineEnds<'a> {
    fn new(redactor: &'a Redactor, hay: &'a [u8]) -> LineEnds<'a> {
        LineEnds {
            redactor,
            hay,
            views: None,
        }
    }

    /// True when the line end at `n` (`hay[n]` is `\n`) may lie inside a secret.
    fn inside_secret(&mut self, n: usize) -> bool {
        let (redactor, hay) = (self.redactor, self.hay);
        if redactor.holds_line_end(hay, n) {
            return true;
        }
        // Before `n`, a text holding no byte that starts an escape reads as it is. (Not
        // its line alone: a line end joined in a view brings the line before into it.)
        if !decode::may_be_encoded(&hay[..n]) {
            return false;
        }
        let views = self.views.get_or_insert_with(|| {
            decode::READINGS
                .iter()
                .map(|&reading| {
                    let mut views: Vec<decode::View> = Vec::new();
                    if !reading.starts_on(hay) {
                        return views;
                    }
                    while views.len() < DECODE_ROUNDS_MAX {
                        let text = views.last().map_or(hay, |v| &v.text[..]);
                        match decode::decode(reading, text) {
                            Some(view) => views.push(view),
                            None => break,
                        }
                    }
                    views
                })
                .collect()
        });
        views.iter().any(|rounds| {
            let mut at = n;
            rounds.iter().any(|view| match view.view_at(at) {
                Some(v) => {
                    at = v;
                    redactor.holds_line_end(&view.text, v)
                }
                // The line end is part of an escape: joined to the next line.
                None => true,
            })
        })
    }
}

/// Where a stream is between two passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inside {
    /// Between secrets.
    Nothing,
    /// In the private key (pattern index) whose marker was passed on: what comes is
    /// dropped up to and with its end line.
    Key(usize),
    /// In a secret longer than the window whose marker was passed on: what comes is
    /// dropped while it may continue it ([`continues_run`]).
    Run,
}

/// How far a pass may pass bytes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// Up to the last window (then past any secret that crosses it).
    Window,
    /// Up to the end of the last whole line whose line end no secret may hold.
    Lines,
    /// To the end: the stream ended.
    End,
}

/// Redacts a stream given in chunks of any size, as [`Redactor::redact_bytes`] redacts
/// the whole of it, in bounded memory.
///
/// It holds back the last [`REDACT_WINDOW_BYTES`] of what it was given and keeps the
/// window before them (already passed on, for context: the `password=` before a value);
/// it searches once four windows are pending, so it holds at most five windows and a
/// chunk. A cut never falls inside a
/// secret: a secret that crosses the window's edge is passed on whole, and one that may
/// still grow (a private key with no end line yet, or a match reaching the end of what
/// is held) is replaced by its marker at once and what continues it is dropped as it
/// comes (up to the key's end line; for any other secret, while the bytes may continue
/// it). So the output equals `redact_bytes` of the whole stream for every chunking
/// whenever every secret is shorter than the window; a longer one is redacted to its
/// end too, but a pattern that would have matched across it may be missed.
///
/// ```
/// use cairn_core::redact::{Counts, Redactor, StreamRedactor};
/// let redactor = Redactor::default();
/// let mut stream = StreamRedactor::new(&redactor);
/// let mut out = stream.feed(b"export DB_PASS");
/// out.extend(stream.feed(b"WORD=hunter22\n"));
/// let (rest, counts) = stream.finish();
/// out.extend(rest);
/// assert_eq!(out, b"export DB_PASSWORD=[REDACTED:assignment]\n");
/// assert_eq!(counts, Counts::from([("assignment".to_string(), 1)]));
/// ```
#[derive(Debug, Clone)]
pub struct StreamRedactor {
    redactor: Redactor,
    window_bytes: usize,
    /// The stream as given: `buf[..at]` was passed on (at most a window of it is kept,
    /// as context), `buf[at..]` was not yet.
    buf: Vec<u8>,
    at: usize,
    inside: Inside,
    counts: Counts,
}

impl StreamRedactor {
    /// A stream redactor with the redactor's patterns and values and a window of
    /// [`REDACT_WINDOW_BYTES`].
    pub fn new(redactor: &Redactor) -> StreamRedactor {
        StreamRedactor::with_window(redactor, REDACT_WINDOW_BYTES)
    }

    /// The same with another window (tests use small ones, so that every path runs).
    pub fn with_window(redactor: &Redactor, window_bytes: usize) -> StreamRedactor {
        assert!(window_bytes > 0, "a stream redactor needs a window");
        StreamRedactor {
            redactor: redactor.clone(),
            window_bytes,
            buf: Vec::new(),
            at: 0,
            inside: Inside::Nothing,
            counts: Counts::new(),
        }
    }

    /// Takes the next bytes of the stream; returns what may be passed on now.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        if self.pending_bytes() >= PASS_WINDOWS * self.window_bytes {
            self.pass(Cut::Window, &mut out);
        }
        out
    }

    /// Passes on every whole line held, for a reader waiting on a quiet stream (a log),
    /// as far as the last line end no secret may hold ([`LineEnds`]: one after a
    /// backslash, as `pwd=\` then a line end, waits for the next line), so that
    /// the output is still the whole stream's redaction.
    pub fn flush_lines(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.pass(Cut::Lines, &mut out);
        out
    }

    /// The rest of the stream, and the markers written, by kind.
    pub fn finish(mut self) -> (Vec<u8>, Counts) {
        let mut out = Vec::new();
        self.pass(Cut::End, &mut out);
        debug_assert_eq!(self.pending_bytes(), 0);
        (out, self.counts)
    }

    /// The markers written so far, by kind.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Bytes held: not passed on yet, or kept as context.
    pub fn held_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Bytes given and not passed on (nor dropped) yet.
    pub fn pending_bytes(&self) -> usize {
        self.buf.len() - self.at
    }

    fn pass(&mut self, cut: Cut, out: &mut Vec<u8>) {
        loop {
            match self.inside {
                Inside::Key(i) => {
                    let found = pattern(i)
                        .and_then(|p| p.end.as_ref())
                        .and_then(|end| end.find_at(&self.buf, self.at));
                    match found {
                        Some(m) => {
                            self.at = m.end();
                            self.inside = Inside::Nothing;
                        }
                        None => {
                            // Its end line may be coming: keep a window of what may
                            // hold its start.
                            self.at = match cut {
                                Cut::End => self.buf.len(),
                                _ => self
                                    .at
                                    .max(self.buf.len().saturating_sub(self.window_bytes)),
                            };
                            break;
                        }
                    }
                }
                Inside::Run => match self.buf[self.at..].iter().position(|&b| !continues_run(b)) {
                    Some(n) => {
                        self.at += n;
                        self.inside = Inside::Nothing;
                    }
                    None => {
                        self.at = self.buf.len();
                        break;
                    }
                },
                Inside::Nothing => {
                    if cut == Cut::Window && self.pending_bytes() < PASS_WINDOWS * self.window_bytes
                    {
                        break;
                    }
                    if !self.cut(cut, out) {
                        break;
                    }
                }
            }
        }
        // Keep one window of what was passed on, as context for what comes.
        if self.at > self.window_bytes {
            let drop = self.at - self.window_bytes;
            self.buf.drain(..drop);
            self.at -= drop;
        }
    }

    /// Passes on what `cut` allows, redacted; true when it stopped inside a secret that
    /// may still grow (`inside` says which).
    fn cut(&mut self, cut: Cut, out: &mut Vec<u8>) -> bool {
        let (hay, from) = (&self.buf[..], self.at);
        let mut to = match cut {
            Cut::End => hay.len(),
            Cut::Window => hay.len() - self.window_bytes,
            // The last line end no secret may hold with what is still to come.
            Cut::Lines => {
                let mut ends = LineEnds::new(&self.redactor, hay);
                let mut end = hay.len();
                loop {
                    match memchr::memrchr(b'\n', &hay[from..end]) {
                        Some(i) if ends.inside_secret(from + i) => end = from + i,
                        Some(i) => break from + i + 1,
                        None => return false,
                    }
                }
            }
        };
        let spans: Vec<Span> = self
            .redactor
            .stream_spans(hay)
            .into_iter()
            .filter(|s| s.end > from)
            .collect();
        debug_assert!(from <= to);
        let mut enter = None;
        // A secret that may still grow (a key whose end line has not come) crosses
        // any cut but the end, even one right at its end for now.
        let crosses =
            |s: &Span, to: usize| s.start < to && (to < s.end || (s.open && cut != Cut::End));
        while let Some(s) = spans.iter().find(|s| crosses(s, to)) {
            if !s.open {
                // A whole secret across the cut: passed on with what precedes.
                to = s.end;
                continue;
            }
            let into = match s.secret {
                Secret::Pattern(i) if pattern(i).is_some_and(|p| p.end.is_some()) => {
                    Some(Inside::Key(i))
                }
                _ if cut == Cut::Window => Some(Inside::Run),
                _ => None,
            };
            // Nothing passes that may still be part of it.
            to = s.start.max(from);
            enter = into.map(|into| (*s, into));
            break;
        }
        let mut pos = from;
        for s in spans.iter().take_while(|s| s.end <= to) {
            // A secret whose start was passed on already (a line cut inside it): its
            // rest is still replaced.
            out.extend_from_slice(&hay[pos..s.start.max(from)]);
            self.redactor.marker(s.secret, out, &mut self.counts);
            pos = s.end;
        }
        debug_assert!(pos <= to, "a secret crosses the cut");
        out.extend_from_slice(&hay[pos..to]);
        match enter {
            Some((s, into)) => {
                self.redactor.marker(s.secret, out, &mut self.counts);
                self.at = match into {
                    Inside::Run => hay.len(),
                    // Its end line is looked for after its first line, as in a
                    // whole text.
                    Inside::Key(i) => pattern(i)
                        .and_then(|p| p.re.find_at(hay, s.start))
                        .map_or(to, |m| m.end().max(to)),
                    Inside::Nothing => to,
                };
                self.inside = into;
                true
            }
            None => {
                self.at = to;
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key holding a secret is redacted and counted, in objects at any depth; keys
    /// that redact alike, or to a key the object already has, are told apart by `#n`
    /// and no member is lost; a key with no secret is kept as it is.
    #[test]
    fn redact_json_redacts_keys_and_loses_no_member() {
        let r = Redactor::default();
        let t1 = format!("{}_{}", "ghp", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
        let t2 = format!("{}_{}", "ghp", "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2");
        let marker = "[REDACTED:github_token]";
        let mut inner = serde_json::Map::new();
        // The marker itself, given as a key first, is a key with no secret.
        inner.insert(marker.into(), serde_json::json!(0));
        inner.insert(format!("{marker}#2"), serde_json::json!(1));
        inner.insert(t1.clone(), serde_json::json!(t2.clone()));
        inner.insert(t2.clone(), serde_json::json!(3));
        inner.insert("plain".into(), serde_json::json!(4));
        let v = serde_json::json!({"a": [serde_json::Value::Object(inner)]});
        let mut counts = Counts::new();
        let out = r.redact_json(&v, &mut counts);
        let want = serde_json::json!({"a": [{
            marker: 0,
            format!("{marker}#2"): 1,
            format!("{marker}#3"): marker,
            format!("{marker}#4"): 3,
            "plain": 4,
        }]});
        assert_eq!(out, want);
        assert_eq!(counts, Counts::from([("github_token".to_string(), 3)]));
        assert!(r.json_holds_secret(&v));
        assert!(!r.json_holds_secret(&out));
        // Keys alone: the tree's check sees them.
        assert!(r.json_holds_secret(&serde_json::json!({ t1: null })));
        assert!(!r.json_holds_secret(&serde_json::json!({"plain": null})));
    }

    fn check(input: &str, expected: &str, kinds: &[(&str, u32)]) {
        let r = Redactor::with_env([(
            "MY_API_TOKEN".to_string(),
            "tok-very-secret-value".to_string(),
        )]);
        let mut counts = Counts::new();
        assert_eq!(r.redact(input, &mut counts), expected);
        let want: Counts = kinds.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        assert_eq!(counts, want, "{input}");
        let mut owned = Counts::new();
        assert_eq!(r.redact_string(input.to_string(), &mut owned), expected);
        assert_eq!(owned, want, "{input}");
        prefilter_is_exact(&r, input.as_bytes());
    }

    /// Texts just under and at [`SEGMENT_TEXT_BYTES_MIN`] (searched whole, then in
    /// segments) are redacted as running every pattern redacts them.
    #[test]
    fn texts_at_the_segment_size_are_redacted_as_by_every_pattern() {
        let r = Redactor::default();
        let secrets = " password=hunter2hunter2 ghp_abcdefghijklmnopqrstuvwxyz0123456789 \
                       Bearer abcdefghijklmnopqrstuvwxyz";
        for len in [
            SEGMENT_TEXT_BYTES_MIN - 1,
            SEGMENT_TEXT_BYTES_MIN,
            SEGMENT_TEXT_BYTES_MIN + 1,
        ] {
            let mut text = String::from(secrets);
            while text.len() < len {
                text.push_str(" max_tokens=4096 token_count\n");
            }
            text.truncate(len - secrets.len());
            text.push_str(secrets);
            assert_eq!(text.len(), len);
            let spans = r.spans(text.as_bytes());
            assert_eq!(
                spans,
                r.spans_of(text.as_bytes(), u64::MAX),
                "at {len} bytes"
            );
            assert_eq!(
                spans.len(),
                6,
                "two of each secret at {len} bytes: {spans:?}"
            );
        }
    }

    /// The prefilter admits every pattern the old `RegexSet` said `hay` holds, and
    /// redaction with it, whole or in segments, finds what running every pattern finds.
    pub(super) fn prefilter_is_exact(r: &Redactor, hay: &[u8]) {
        let hits = PREFILTER.hits(hay);
        let set = PATTERN_SET.as_ref().expect("the set compiles").matches(hay);
        for i in set.iter() {
            assert!(
                hits & (1 << i) != 0,
                "the prefilter misses {} in {:?}",
                SOURCES[i].0,
                String::from_utf8_lossy(hay)
            );
        }
        assert_eq!(
            r.spans(hay),
            every_pattern(r, hay),
            "{:?}",
            String::from_utf8_lossy(hay)
        );
        let anchors = ANCHORS.as_ref().expect("the anchors compile");
        assert_eq!(
            anchored_hits(anchors, hay),
            PREFILTER.hits_at(hay),
            "anchored: {:?}",
            String::from_utf8_lossy(hay)
        );
        assert_eq!(
            r.stream_spans(hay),
            every_pattern(r, hay),
            "stream: {:?}",
            String::from_utf8_lossy(hay)
        );
        assert_eq!(
            r.spans_segmented(hay),
            r.spans_of(hay, u64::MAX),
            "segmented: {:?}",
            String::from_utf8_lossy(hay)
        );
    }

    /// The reference the fast ways are checked against: every pattern run over the
    /// whole text, and over the whole of each of its views.
    pub(super) fn every_pattern(r: &Redactor, hay: &[u8]) -> Vec<Span> {
        r.with_decoded_by(hay, r.spans_of(hay, u64::MAX), |r, view| {
            r.spans_of(&view.text, u64::MAX)
        })
    }

    /// Each attack's form: a secret written with escapes a reader decodes is redacted
    /// where it stands, its escapes with it, the rest kept as it was.
    #[test]
    fn secrets_written_with_escapes_are_redacted_where_they_stand() {
        let bearer = "abcdefghijklmnop1234";
        let marked = "[REDACTED:bearer_token]";
        for (text, kept) in [
            // A URL's query, as a permission prompt shows it (`url` normalises spaces).
            (
                "https://h/?h=Authorization:%20Bearer%20{}&x=1",
                "https://h/?h=Authorization:%20Bearer%20{}&x=1",
            ),
            (
                "https://h/?h=Authorization:+Bearer+{}",
                "https://h/?h=Authorization:+Bearer+{}",
            ),
            (
                r"Authorization:\u0020Bearer\u0020{}",
                r"Authorization:\u0020Bearer\u0020{}",
            ),
            (
                r"curl -H Authorization:\ Bearer\ {}",
                r"curl -H Authorization:\ Bearer\ {}",
            ),
            (
                r"curl -H $'Authorization:\x20Bearer\x20{}'",
                r"curl -H $'Authorization:\x20Bearer\x20{}'",
            ),
            (
                "Authorization:&#32;Bearer&nbsp;{}",
                "Authorization:&#32;Bearer&nbsp;{}",
            ),
            (
                "<a title=\"Bearer&#x20;{}\">",
                "<a title=\"Bearer&#x20;{}\">",
            ),
            // Encoded twice over: an HTML-escaped reference, a percent-encoded percent.
            ("Bearer&amp;#32;{}", "Bearer&amp;#32;{}"),
            ("Bearer%2520{}", "Bearer%2520{}"),
            // The secret's own characters written as escapes go with it.
            ("Bearer%20%61bcdefghijklmnop1234", "Bearer%20{}"),
        ] {
            check(
                &text.replace("{}", bearer),
                &kept.replace("{}", marked),
                &[("bearer_token", 1)],
            );
        }
        let token = format!("{}_{}", "ghp", "abcdefghijklmnopqrstuvwxyz0123456789");
        check(
            &format!("t=%67hp%5F{}", &token[4..]),
            "t=[REDACTED:github_token]",
            &[("github_token", 1)],
        );
        check(
            "DB_PASSWORD%3Dhunter2hunter2",
            "DB_PASSWORD%3D[REDACTED:assignment]",
            &[("assignment", 1)],
        );
        check(
            r#"{\"x\": \"echo tok\u002dvery\u002dsecret\u002dvalue\"}"#,
            r#"{\"x\": \"echo [REDACTED:env:MY_API_TOKEN]\"}"#,
            &[("env_secret", 1)],
        );
        // A key whose line ends are escapes: the whole key, to its end line.
        check(
            "k=-----BEGIN%20RSA%20PRIVATE%20KEY-----%0AMIIEow%0A-----END%20RSA%20PRIVATE%20KEY-----%0Arest",
            "k=[REDACTED:private_key]%0Arest",
            &[("private_key", 1)],
        );
    }

    /// A Basic credential is a secret of its own, told from prose by what its base64
    /// decodes to: a `user:password` pair.
    #[test]
    fn a_basic_credential_is_redacted_and_prose_is_not() {
        use base64::Engine as _;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        for pair in ["deploy:hunter2", ":tok-12345", "ghp_x:", "user:pa ss:word"] {
            check(
                &format!("Authorization: Basic {}\nnext", b64(pair)),
                "Authorization: Basic [REDACTED:basic_auth]\nnext",
                &[("basic_auth", 1)],
            );
        }
        // Unpadded, any case, and percent-encoded as a header in a URL.
        let unpadded = b64("deploy:hunter22").trim_end_matches('=').to_string();
        check(
            &format!("authorization: BASIC {unpadded}"),
            "authorization: BASIC [REDACTED:basic_auth]",
            &[("basic_auth", 1)],
        );
        check(
            &format!(
                "?h=Authorization:%20Basic%20{}",
                b64("deploy:hunter2").replace('=', "%3D")
            ),
            "?h=Authorization:%20Basic%20[REDACTED:basic_auth]",
            &[("basic_auth", 1)],
        );
        for text in [
            "basic usage of the API",
            "Basic auth is required",
            "BASIC mode",
            &format!("Basic {}", b64("hello world")),
            &format!("Basic {}", b64("a\u{1}:b")),
            "Basic ////",
        ] {
            check(text, text, &[]);
        }
    }

    /// The limit of the rounds of decoding: a secret encoded [`DECODE_ROUNDS_MAX`]
    /// times over is found, one encoded once more is not.
    #[test]
    fn a_secret_encoded_as_often_as_the_rounds_allow_is_found_and_once_more_is_not() {
        let space = |rounds: usize| format!("%{}20", "25".repeat(rounds - 1));
        let at = format!("Bearer{}abcdefghijklmnop1234", space(DECODE_ROUNDS_MAX));
        check(
            &at,
            &format!("Bearer{}[REDACTED:bearer_token]", space(DECODE_ROUNDS_MAX)),
            &[("bearer_token", 1)],
        );
        let past = format!("Bearer{}abcdefghijklmnop1234", space(DECODE_ROUNDS_MAX + 1));
        check(&past, &past, &[]);
    }

    /// Escapes that spell no secret change nothing.
    #[test]
    fn escapes_around_no_secret_are_left_alone() {
        for text in [
            "100%25 done, 50%20off",
            "a&amp;b &lt;tag&gt; &nbsp;&#32;",
            "x=a+b&y=c+d",
            r#"printf("%d\n", token_count);"#,
            r#"{"max_tokens": 4096, "text": "line\nnext\u0020"}"#,
            r"cd my\ folder && echo $'\t'",
            r"re = /\d+\.\w+/",
            "https://example.com/search?q=password+reset",
        ] {
            check(text, text, &[]);
        }
    }

    /// Regression: a search for a cut read the whole run of whitespace around each
    /// line end of it, a quadratic time in a long run that is no cut (before an `=`).
    #[test]
    fn a_long_run_of_line_ends_is_read_once() {
        let r = Redactor::default();
        let text = format!("password{}=hunter22 and more\n", "\n".repeat(1 << 20));
        let spans = r.spans_segmented(text.as_bytes());
        assert_eq!(spans, r.spans_of(text.as_bytes(), u64::MAX));
        assert_eq!(spans.len(), 1);
    }

    #[test]
    fn the_longest_literal_is_known() {
        let longest = LITERALS
            .iter()
            .flat_map(|(_, lits)| lits.iter().map(|l| l.len()))
            .max();
        assert_eq!(longest, Some(LITERAL_BYTES_MAX));
    }

    #[test]
    fn literals_follow_the_patterns() {
        assert_eq!(LITERALS.len(), SOURCES.len());
        for ((kind, re, _, _), (lit_kind, lits)) in SOURCES.iter().zip(LITERALS) {
            assert_eq!(kind, lit_kind);
            assert!(!lits.is_empty(), "{kind} has no literal");
            for lit in *lits {
                assert!(!lit.is_empty(), "{kind} has an empty literal");
                if re.starts_with("(?i)") {
                    assert_eq!(*lit, lit.to_ascii_lowercase(), "{kind}: {lit}");
                }
            }
        }
    }

    /// Decides [`FOLDED_OUTSIDE_ASCII`] exactly: over every character outside ASCII,
    /// the ones an ASCII letter matches under `(?i)`.
    #[test]
    fn only_kelvin_and_long_s_fold_onto_ascii_letters() {
        let letter = Regex::new(r"(?i)\A[a-z]\z").expect("compiles");
        let folded: Vec<String> = (0x80..=0x10FFFFu32)
            .filter_map(char::from_u32)
            .map(String::from)
            .filter(|c| letter.is_match(c.as_bytes()))
            .collect();
        assert_eq!(folded, FOLDED_OUTSIDE_ASCII);
    }

    /// `(?i)` patterns match Unicode case folds of their letters: a secret spelled with
    /// a long s or a Kelvin sign holds no ASCII literal of its pattern and must still
    /// reach it.
    #[test]
    fn a_secret_named_with_a_kelvin_sign_or_a_long_s_is_redacted() {
        check(
            "pa\u{17f}\u{17f}word=hunter22",
            "pa\u{17f}\u{17f}word=[REDACTED:assignment]",
            &[("assignment", 1)],
        );
        check(
            "api_\u{212a}ey=abcd1234efgh",
            "api_\u{212a}ey=[REDACTED:assignment]",
            &[("assignment", 1)],
        );
        check(
            "Account\u{212a}ey=YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo=",
            "Account\u{212a}ey=[REDACTED:azure_storage_key]",
            &[("azure_storage_key", 1)],
        );
        check(
            "Shared\u{17f}ccessKey=YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo=",
            "Shared\u{17f}ccessKey=YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo=",
            &[],
        );
        check(
            "SharedAcce\u{17f}sKey=YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo=",
            "SharedAcce\u{17f}sKey=[REDACTED:azure_storage_key]",
            &[("azure_storage_key", 1)],
        );
        check(
            "client_\u{17f}ecret: qrstuvwxyz",
            "client_\u{17f}ecret: [REDACTED:assignment]",
            &[("assignment", 1)],
        );
    }

    /// A text, what it becomes, and the counts of what was redacted in it by kind.
    type Case = (&'static str, &'static str, &'static [(&'static str, u32)]);

    /// One case per kind of secret.
    const SECRETS_OF_EACH_KIND: &[Case] = &[
        (
            "key sk-abcdefghijklmnopqrstuvwxyz012345",
            "key [REDACTED:openai_key]",
            &[("openai_key", 1)],
        ),
        (
            "sk-ant-api03-abcdefghijklmnopqrstuv",
            "[REDACTED:anthropic_key]",
            &[("anthropic_key", 1)],
        ),
        (
            "AKIAIOSFODNN7EXAMPLE",
            "[REDACTED:aws_access_key]",
            &[("aws_access_key", 1)],
        ),
        (
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789 and github_pat_11ABCDEFG0123456789_abcdefghij",
            "[REDACTED:github_token] and [REDACTED:github_token]",
            &[("github_token", 2)],
        ),
        (
            "xoxb-1234567890-abcdefghij",
            "[REDACTED:slack_token]",
            &[("slack_token", 1)],
        ),
        (
            "Authorization: Bearer abcdefghijklmnop1234",
            "Authorization: Bearer [REDACTED:bearer_token]",
            &[("bearer_token", 1)],
        ),
        (
            "t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "t=[REDACTED:jwt]",
            &[("jwt", 1)],
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nrest",
            "[REDACTED:private_key]\nrest",
            &[("private_key", 1)],
        ),
        (
            "password=hunter22 api_key: abcd1234",
            "password=[REDACTED:assignment] api_key: [REDACTED:assignment]",
            &[("assignment", 2)],
        ),
        (
            "glpat-abcdefghij0123456789 glptt-0123456789abcdefghijklmn GR1348941abcdefghij0123456789",
            "[REDACTED:gitlab_token] [REDACTED:gitlab_token] [REDACTED:gitlab_token]",
            &[("gitlab_token", 3)],
        ),
        (
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc rk_live_abcdefghijklmnop1234 sk_test_abcdefghijklmnop12 whsec_abcdefghijklmnopqrstuvwxyz12",
            "[REDACTED:stripe_key] [REDACTED:stripe_key] [REDACTED:stripe_key] [REDACTED:stripe_key]",
            &[("stripe_key", 4)],
        ),
        (
            "key=AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
            "key=[REDACTED:google_api_key]",
            &[("google_api_key", 1)],
        ),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\naccess_token=abcd1234efgh\nclient_secret: s3cr3tvalue\nDB_PASSWORD=hunter22\nrefresh-token: 0123456789",
            "aws_secret_access_key = [REDACTED:assignment]\naccess_token=[REDACTED:assignment]\nclient_secret: [REDACTED:assignment]\nDB_PASSWORD=[REDACTED:assignment]\nrefresh-token: [REDACTED:assignment]",
            &[("assignment", 5)],
        ),
        (
            "npm_abcdefghijklmnopqrstuvwxyz0123456789 pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejAxMjM0 hf_abcdefghijklmnopqrstuvwxyzABCDEF",
            "[REDACTED:npm_token] [REDACTED:pypi_token] [REDACTED:huggingface_token]",
            &[
                ("huggingface_token", 1),
                ("npm_token", 1),
                ("pypi_token", 1),
            ],
        ),
        (
            "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ SK0123456789abcdef0123456789abcdef",
            "[REDACTED:sendgrid_key] [REDACTED:twilio_key]",
            &[("sendgrid_key", 1), ("twilio_key", 1)],
        ),
        (
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo=;EndpointSuffix=core.windows.net",
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=[REDACTED:azure_storage_key];EndpointSuffix=core.windows.net",
            &[("azure_storage_key", 1)],
        ),
        (
            "git clone https://deploy:s3cr3t-pass@git.example.com/r.git",
            "git clone https://deploy:[REDACTED:url_password]@git.example.com/r.git",
            &[("url_password", 1)],
        ),
        // Regression: "no such file: https:/u:pw@h" (a path tidier took a slash) kept
        // the password.
        (
            "no such file: /w/https:/deploy:s3cr3t-pass@git.example.com/r.git",
            "no such file: /w/https:/deploy:[REDACTED:url_password]@git.example.com/r.git",
            &[("url_password", 1)],
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----\n-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQdG\n-----END PGP PRIVATE KEY BLOCK-----\n-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIF\n-----END ENCRYPTED PRIVATE KEY-----",
            "[REDACTED:private_key]\n[REDACTED:private_key]\n[REDACTED:private_key]",
            &[("private_key", 3)],
        ),
        (
            "{\"client_secret\": \"abcd1234wxyz\", \"refresh_token\":\"r-0123456789\"}\nprivate_key: zzzz9999",
            "{\"client_secret\": \"[REDACTED:assignment]\", \"refresh_token\":\"[REDACTED:assignment]\"}\nprivate_key: [REDACTED:assignment]",
            &[("assignment", 3)],
        ),
        (
            "echo tok-very-secret-value",
            "echo [REDACTED:env:MY_API_TOKEN]",
            &[("env_secret", 1)],
        ),
    ];

    #[test]
    fn secrets_of_each_kind_are_redacted() {
        for (text, expected, counts) in SECRETS_OF_EACH_KIND {
            check(text, expected, counts);
        }
    }

    /// Word boundaries are ASCII: a letter that is not ASCII next to a secret does not
    /// hide it (a Unicode boundary would not hold between `é` and `g`).
    #[test]
    fn a_secret_beside_a_letter_that_is_not_ascii_is_redacted() {
        check(
            "éghp_abcdefghijklmnopqrstuvwxyz0123456789é 日本AKIAIOSFODNN7EXAMPLE語",
            "é[REDACTED:github_token]é 日本[REDACTED:aws_access_key]語",
            &[("aws_access_key", 1), ("github_token", 1)],
        );
    }

    #[test]
    fn a_secret_right_after_a_backslash_escape_is_redacted() {
        // JSON of a JSON text, as a prompt showing an input holds it.
        check(
            r#"{"content": "first\nghp_abcdefghijklmnopqrstuvwxyz0123456789\tAKIAIOSFODNN7EXAMPLE\r\nmax_tokens=4096"}"#,
            r#"{"content": "first\n[REDACTED:github_token]\t[REDACTED:aws_access_key]\r\nmax_tokens=4096"}"#,
            &[("aws_access_key", 1), ("github_token", 1)],
        );
        check(
            r#"{"detail": "{\"refresh_token\": \"abcdefghijklmnop\"}\nclient_secret: qrstuvwxyz012345\nnext"}"#,
            r#"{"detail": "{\"refresh_token\": \"[REDACTED:assignment]\"}\nclient_secret: [REDACTED:assignment]\nnext"}"#,
            &[("assignment", 2)],
        );
        // Not after any other letter.
        check(
            "xghp_abcdefghijklmnopqrstuvwxyz0123456789 \\qAKIAIOSFODNN7EXAMPLE",
            "xghp_abcdefghijklmnopqrstuvwxyz0123456789 \\qAKIAIOSFODNN7EXAMPLE",
            &[],
        );
    }

    // Guards against a secret read through two readings in turn going unfound: a shell
    // word's escapes (`\:`, `\ `), then a URL's percent-encoding of what they left (a
    // fetch's URL normalised: `\%20`). The shell reading's first round leaves no
    // backslash, and its second must still read the `%20`.
    #[test]
    fn a_shell_escaped_secret_percent_encoded_in_a_url_is_redacted() {
        let b64 = "ZGVwbG95Ono4TUtJU29WMkEzc1hUZTZ3RWlG";
        check(
            &format!(r"fetch https://example.invalid/?h=Authorization\:\%20Basic\%20{b64}"),
            r"fetch https://example.invalid/?h=Authorization\:\%20Basic\%20[REDACTED:basic_auth]",
            &[("basic_auth", 1)],
        );
        check(
            r"?h=Authorization\:\%20Bearer\%20abcdefghijklmnopqrstuvwxyz012345",
            r"?h=Authorization\:\%20Bearer\%20[REDACTED:bearer_token]",
            &[("bearer_token", 1)],
        );
        // Two rounds of the shell reading after it: `\%2520`.
        check(
            &format!(r"Authorization\:\%2520Basic\%2520{b64}"),
            r"Authorization\:\%2520Basic\%2520[REDACTED:basic_auth]",
            &[("basic_auth", 1)],
        );
    }

    #[test]
    fn look_alikes_are_left_alone() {
        for text in [
            "3f786850e387550fdab836ed7e6dc881de23001b0a5f5b8d6a5e8e2f0d5b0d21",
            "123e4567-e89b-12d3-a456-426614174000",
            "skip the sk- prefix; ask-me later",
            "the password is in the vault",
            "token: ab",
            "AKIA is a prefix",
            "max_tokens: 4096",
            "token_count = 12345",
            "tokenizer=bpe-large",
            "let secretary = names;",
            "sk_live_ is a prefix",
            "sha256:3f786850e387550fdab836ed7e6dc881de23001b0a5f5b8d6a5e8e2f0d5b0d21",
            "commit 3f786850e387550fdab836ed7e6dc881de23001b",
            "the task-runner will skip it",
            "https://example.com/path?q=1",
            "ssh://git@github.com/owner/repo.git",
            "npm_config_cache=/tmp/npm",
            "hf_hub_download(repo_id)",
        ] {
            check(text, text, &[]);
        }
    }

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(PATTERNS.len(), SOURCES.len());
        for (i, source) in SOURCES.iter().enumerate() {
            assert!(pattern(i).is_some(), "{} does not compile", source.0);
        }
        assert_eq!(PATTERN_SET.as_ref().map(RegexSet::len), Some(SOURCES.len()));
    }

    #[test]
    fn a_private_key_without_its_end_line_is_redacted_to_the_end_of_the_text() {
        check(
            "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nMIIEpA",
            "before\n[REDACTED:private_key]",
            &[("private_key", 1)],
        );
        // A key cut off, then a whole one: the first runs to the second's end line.
        check(
            "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----BEGIN EC PRIVATE KEY-----\nBBBB\n-----END EC PRIVATE KEY-----\nafter",
            "[REDACTED:private_key]\nafter",
            &[("private_key", 1)],
        );
    }

    /// Where stretches overlap: the earlier kind wins, unless a later match contains
    /// it and is longer (then the later one replaces it, and only its marker counts).
    #[test]
    fn overlapping_matches_keep_one_marker() {
        // An environment secret inside a private key: the whole key goes.
        check(
            "-----BEGIN RSA PRIVATE KEY-----\nAtok-very-secret-valueB\n-----END RSA PRIVATE KEY-----",
            "[REDACTED:private_key]",
            &[("private_key", 1)],
        );
        // Inside a longer `password=` value: the whole value goes.
        check(
            "password=xtok-very-secret-valuey",
            "password=[REDACTED:assignment]",
            &[("assignment", 1)],
        );
        // The same stretch: the environment's marker stays.
        check(
            "password=tok-very-secret-value",
            "password=[REDACTED:env:MY_API_TOKEN]",
            &[("env_secret", 1)],
        );
        // A key named by an assignment: the key's marker, the assignment overlaps it.
        check(
            "token=sk-abcdefghijklmnopqrstuvwxyz012345",
            "token=[REDACTED:openai_key]",
            &[("openai_key", 1)],
        );
        // An Anthropic key is an OpenAI-looking key too: the first pattern wins.
        check(
            "sk-ant-api03-abcdefghijklmnopqrstuv",
            "[REDACTED:anthropic_key]",
            &[("anthropic_key", 1)],
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_pass_through_and_text_agrees_with_bytes() {
        let r = Redactor::default();
        let input =
            b"\xff\xfe password=hunter22 \xc3( ghp_abcdefghijklmnopqrstuvwxyz0123456789\x80\n";
        let mut counts = Counts::new();
        assert_eq!(
            r.redact_bytes(input, &mut counts).as_ref(),
            b"\xff\xfe password=[REDACTED:assignment] \xc3( [REDACTED:github_token]\x80\n"
        );
        assert_eq!(
            counts,
            Counts::from([("assignment".into(), 1), ("github_token".into(), 1)])
        );
        // Nothing to redact: the input itself comes back.
        assert!(matches!(
            r.redact_bytes(b"\xff plain", &mut counts),
            Cow::Borrowed(_)
        ));
        for text in [
            "é password=hunter22 ü",
            "日本 sk-abcdefghijklmnopqrstuvwxyz012345 語",
        ] {
            let (mut a, mut b) = (Counts::new(), Counts::new());
            let s = r.redact(text, &mut a).into_owned();
            assert_eq!(
                s.as_bytes(),
                r.redact_bytes(text.as_bytes(), &mut b).as_ref()
            );
            assert_eq!(a, b);
        }
    }

    #[test]
    fn redaction_is_deterministic_and_idempotent() {
        let r = Redactor::default();
        let text = "password=hunter22 sk-abcdefghijklmnopqrstuvwxyz012345";
        let once = r.redact(text, &mut Counts::new()).into_owned();
        assert_eq!(r.redact(text, &mut Counts::new()), once);
        assert_eq!(r.redact(&once, &mut Counts::new()), once);
    }
}

/// The stream redactor against the whole-text one, with secrets of every kind made at
/// random (none is written in this file).
#[cfg(test)]
mod stream_tests {
    use super::*;
    use proptest::prelude::*;

    /// A small deterministic generator (xorshift64*), seeded by proptest.
    struct Rng(std::cell::Cell<u64>);

    impl Rng {
        fn new(seed: u64) -> Rng {
            Rng(std::cell::Cell::new(seed | 1))
        }
        fn next(&self) -> u64 {
            let mut x = self.0.get();
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0.set(x);
            x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
        fn range(&self, lo: usize, hi: usize) -> usize {
            lo + self.below(hi - lo + 1)
        }
        fn chars(&self, set: &str, n: usize) -> String {
            let set = set.as_bytes();
            (0..n).map(|_| set[self.below(set.len())] as char).collect()
        }
    }

    const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const URLSAFE: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
    const UPPER_DIGITS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const HEX: &str = "0123456789abcdef";
    const B64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    /// The environment secret the redactor of these tests knows.
    const ENV_VALUE: &str = "env-Value-0123456789";

    fn redactor() -> Redactor {
        Redactor::with_env([("CI_DEPLOY_TOKEN".to_string(), ENV_VALUE.to_string())])
    }

    /// Kinds of secret [`secret`] makes, by number.
    const KINDS: usize = 21;

    /// A secret of kind `k` (see [`KINDS`]) as a program would print it.
    fn secret(rng: &Rng, k: usize) -> String {
        match k {
            0 => format!(
                "-----BEGIN {}PRIVATE KEY-----\n{}\n{}\n-----END {}PRIVATE KEY-----",
                ["", "RSA ", "OPENSSH "][k % 3],
                rng.chars(B64, 40),
                rng.chars(B64, 20),
                ["", "RSA ", "OPENSSH "][k % 3],
            ),
            1 => format!(
                "{}-ant-api03-{}",
                "sk",
                rng.chars(URLSAFE, rng.range(20, 60))
            ),
            2 => format!("{}-proj-{}", "sk", rng.chars(URLSAFE, rng.range(20, 60))),
            3 => format!("{}{}", "AKIA", rng.chars(UPPER_DIGITS, 16)),
            4 => format!("{}_{}", "ghp", rng.chars(ALNUM, rng.range(36, 40))),
            5 => format!(
                "{}_pat_{}",
                "github",
                rng.chars("ABCDEFGHIJabcdefghij0123456789_", rng.range(22, 60))
            ),
            6 => format!(
                "{}-{}",
                "xoxb",
                rng.chars("abcdef0123456789-", rng.range(10, 40))
            ),
            7 => format!("{}-{}", "glpat", rng.chars(URLSAFE, rng.range(20, 30))),
            8 => format!("{}_live_{}", "sk", rng.chars(ALNUM, rng.range(16, 30))),
            9 => format!("{}{}", "AIza", rng.chars(URLSAFE, 35)),
            10 => format!("{}_{}", "npm", rng.chars(ALNUM, 36)),
            11 => format!("{}-{}", "pypi", rng.chars(URLSAFE, rng.range(50, 80))),
            12 => format!("{}_{}", "hf", rng.chars(ALNUM, rng.range(30, 40))),
            13 => format!(
                "{}.{}.{}",
                "SG",
                rng.chars(URLSAFE, 22),
                rng.chars(URLSAFE, 43)
            ),
            14 => format!("{}{}", "SK", rng.chars(HEX, 32)),
            15 => format!("AccountKey={}==", rng.chars(B64, rng.range(20, 44))),
            16 => format!(
                "https://deploy:{}@git.example.com/r.git",
                rng.chars(ALNUM, 12)
            ),
            17 => format!(
                "{}{}.{}{}.{}",
                "eyJ",
                rng.chars(URLSAFE, rng.range(8, 30)),
                "eyJ",
                rng.chars(URLSAFE, rng.range(8, 30)),
                rng.chars(URLSAFE, rng.range(8, 40))
            ),
            18 => format!(
                "Authorization: Bearer {}",
                rng.chars(ALNUM, rng.range(16, 40))
            ),
            19 => format!(
                "{}={}",
                ["DB_PASSWORD", "client_secret", "api_key", "access-token"][rng.below(4)],
                rng.chars(ALNUM, rng.range(4, 24))
            ),
            _ => ENV_VALUE.to_string(),
        }
    }

    /// Ways of writing a secret with escapes a reader decodes, by number (see
    /// [`encode`]).
    pub(super) const ENCODINGS: usize = 12;

    /// `s` written with the escapes of encoding `e` (see [`ENCODINGS`]): all of its
    /// characters, or its separators only (what is no letter or digit).
    pub(super) fn encode(s: &str, e: usize) -> String {
        let sep = |c: char| !c.is_ascii_alphanumeric();
        let each = |f: &dyn Fn(char) -> Option<String>| -> String {
            s.chars()
                .map(|c| f(c).unwrap_or_else(|| c.to_string()))
                .collect()
        };
        let percent =
            |c: char| -> String { c.to_string().bytes().map(|b| format!("%{b:02X}")).collect() };
        let json = |c: char| -> String {
            let mut units = [0u16; 2];
            c.encode_utf16(&mut units)
                .iter()
                .map(|u| format!("\\u{u:04x}"))
                .collect()
        };
        let named = |c: char| match c {
            ' ' => Some("nbsp"),
            ':' => Some("colon"),
            '=' => Some("equals"),
            '/' => Some("sol"),
            '-' => Some("hyphen"),
            '_' => Some("lowbar"),
            '.' => Some("period"),
            '\n' => Some("NewLine"),
            _ => None,
        };
        match e {
            0 => each(&|c| Some(percent(c))),
            1 => each(&|c| sep(c).then(|| percent(c))),
            // A query's value: `+` for a space.
            2 => format!(
                "?q={}",
                each(&|c| match c {
                    ' ' => Some("+".to_string()),
                    c if sep(c) => Some(percent(c)),
                    _ => None,
                })
            ),
            3 => each(&|c| Some(json(c))),
            4 => each(&|c| sep(c).then(|| json(c))),
            // Shell words: a backslash before each separator, a line end as `$'\n'`.
            5 => each(&|c| match c {
                '\n' => Some("$'\\n'".to_string()),
                c if c.is_ascii_punctuation() || c == ' ' => Some(format!("\\{c}")),
                _ => None,
            }),
            6 => format!(
                "$'{}'",
                each(&|c| Some(
                    c.to_string()
                        .bytes()
                        .map(|b| format!("\\x{b:02x}"))
                        .collect()
                ))
            ),
            7 => each(&|c| Some(format!("&#{};", u32::from(c)))),
            8 => each(&|c| {
                sep(c).then(|| match named(c) {
                    Some(n) => format!("&{n};"),
                    None => format!("&#x{:x};", u32::from(c)),
                })
            }),
            // Twice over: a percent-encoded percent-encoding of the separators.
            9 => encode(&encode(s, 1), 1),
            // An HTML-escaped JSON escape of the separators.
            10 => encode(s, 4).replace('\\', "&bsol;"),
            _ => {
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD.encode(format!("user:{s}"));
                format!("Authorization: Basic {b64}")
            }
        }
    }

    /// The part of a secret made by [`secret`] that must be found in no form of a
    /// redacted text: the secret, less the name or scheme around it.
    pub(super) fn needle(s: &str) -> &str {
        for before in ["Bearer ", "AccountKey=", "deploy:", "="] {
            if let Some((_, after)) = s.split_once(before) {
                return after
                    .split('@')
                    .next()
                    .unwrap_or(after)
                    .trim_end_matches('=');
            }
        }
        match s.split_once('\n') {
            // A private key: its first line of body.
            Some((_, body)) => body.lines().next().unwrap_or(body),
            None => s,
        }
    }

    /// Text that is no secret: words, numbers, look-alikes, now and then bytes that are
    /// not UTF-8, long runs without a newline and escapes around no secret.
    fn filler(rng: &Rng) -> Vec<u8> {
        if rng.below(6) == 0 {
            return [
                "100%25 done %zz",
                "a&amp;b &lt;x&gt;&nbsp;&#32;&",
                "q=a+b&r=1",
                "printf(\"%d\\n\", n);",
                "\\u0020\\\"\\",
                "cd my\\ dir; $'\\t'",
                "\\\n",
            ][rng.below(7)]
            .as_bytes()
            .to_vec();
        }
        match rng.below(8) {
            0 => rng.chars(HEX, 40).into_bytes(),
            1 => b"max_tokens=4096 token_count: 12 sha256:".to_vec(),
            2 => vec![0xff, 0xfe, b'x', 0xc3],
            3 => "naïve café 日本語 ".as_bytes().to_vec(),
            4 => rng
                .chars("abcdefghij klmnop_-=:.", rng.range(200, 1500))
                .into_bytes(),
            5 => b"password".to_vec(),
            _ => rng
                .chars("abcdefghijklmnopqrstuvwxyz      \n", rng.range(0, 80))
                .into_bytes(),
        }
    }

    /// What may join a line to the next into one match, and what may not.
    const JOINTS: &[&str] = &[
        "\n",
        "\r\n",
        "\n\n",
        " \n\t ",
        "=\n",
        "\n=",
        " =\r\n ",
        ":\n",
        "\n :",
        "\\\n",
        "\\n",
        "x=a\\\nb",
        "Bearer\n",
        "bearer \n\t",
        "BEARER\u{85}\n",
        "password\n",
        "password =\n ",
        "api_\u{212a}ey\n=",
        "pa\u{17f}\u{17f}word:\n",
        "token\r\n:",
        "\"\n",
        "'\n",
        "\u{a0}\n",
        "\n\u{2028}=",
        "\n-----END RSA PRIVATE KEY-----\n",
        "-----BEGIN RSA PRIVATE KEY-----\n",
        "-----BEGIN PRIVATE KEY-----",
        "https://user:",
        "@host\n",
        // Literals inside and across one another, one or two bytes apart.
        "sk-sk-ant-",
        "kKEy",
        "SSK0",
        "ppwdPassword",
        "xeyJ",
    ];

    fn separator(rng: &Rng) -> &'static [u8] {
        [
            &b" "[..],
            b"\n",
            b"\t",
            b"\"",
            b", ",
            b": ",
            b" = ",
            b"\r\n",
        ][rng.below(8)]
    }

    /// A text of `pieces` pieces, and where each secret in it starts and ends.
    fn text(rng: &Rng, pieces: usize) -> (Vec<u8>, Vec<(usize, usize)>) {
        let mut out = Vec::new();
        let mut secrets = Vec::new();
        for _ in 0..pieces {
            out.extend_from_slice(separator(rng));
            if rng.below(2) == 0 {
                let mut s = secret(rng, rng.below(KINDS));
                // Now and then written with escapes, kept shorter than the smallest
                // window the stream tests use (a secret longer than the window may be
                // redacted past its end).
                let encoded = encode(&s, rng.below(ENCODINGS));
                if rng.below(3) == 0 && encoded.len() < 200 {
                    s = encoded;
                }
                secrets.push((out.len(), out.len() + s.len()));
                out.extend_from_slice(s.as_bytes());
            } else {
                out.extend(filler(rng));
            }
        }
        out.extend_from_slice(separator(rng));
        (out, secrets)
    }

    /// What a stream redactor with `window` gives for `text` fed in the chunks that end
    /// at `cuts`, flushing whole lines after the chunks that end at `flushes`; checks
    /// the memory bound after every chunk.
    fn streamed(
        r: &Redactor,
        text: &[u8],
        window: usize,
        cuts: &[usize],
        flushes: &[usize],
    ) -> (Vec<u8>, Counts) {
        let mut s = StreamRedactor::with_window(r, window);
        let mut out = Vec::new();
        let mut at = 0;
        for &cut in cuts.iter().chain([&text.len()]) {
            let cut = cut.clamp(at, text.len());
            out.extend(s.feed(&text[at..cut]));
            assert!(
                s.held_bytes() <= (PASS_WINDOWS + 1) * window + (cut - at),
                "holds {} bytes with a window of {window} and a chunk of {}",
                s.held_bytes(),
                cut - at
            );
            if flushes.contains(&cut) {
                out.extend(s.flush_lines());
            }
            at = cut;
        }
        let (rest, counts) = s.finish();
        out.extend(rest);
        (out, counts)
    }

    fn whole(r: &Redactor, text: &[u8]) -> (Vec<u8>, Counts) {
        let mut counts = Counts::new();
        let out = r.redact_bytes(text, &mut counts).into_owned();
        (out, counts)
    }

    #[test]
    fn each_made_secret_is_redacted_alone() {
        let r = redactor();
        let rng = Rng::new(7);
        for k in 0..KINDS {
            for _ in 0..20 {
                let s = secret(&rng, k);
                let text = format!("x {s} y");
                let (out, counts) = whole(&r, text.as_bytes());
                assert_eq!(counts.values().sum::<u32>(), 1, "{text} -> {counts:?}");
                let out = String::from_utf8(out).unwrap();
                assert!(out.starts_with("x ") && out.ends_with(" y"), "{out}");
                assert!(!out.contains(&s), "{out}");
            }
        }
    }

    /// Each kind of secret, written with each encoding, all of it or its separators
    /// only: one marker, what is around it kept, and its secret part in no form a
    /// reader may decode the result into.
    #[test]
    fn each_made_secret_written_with_escapes_is_redacted_alone() {
        let r = redactor();
        let rng = Rng::new(17);
        for k in 0..KINDS {
            for e in 0..ENCODINGS {
                for _ in 0..4 {
                    let s = secret(&rng, k);
                    let text = format!("x {} y", encode(&s, e));
                    let (out, counts) = whole(&r, text.as_bytes());
                    assert_eq!(
                        counts.values().sum::<u32>(),
                        1,
                        "encoding {e}: {text} -> {counts:?}"
                    );
                    let out = String::from_utf8(out).unwrap();
                    assert!(out.starts_with("x ") && out.ends_with(" y"), "{out}");
                    for form in decoded_forms(out.as_bytes(), DECODE_ROUNDS_MAX + 1) {
                        assert!(
                            !String::from_utf8_lossy(&form).contains(needle(&s)),
                            "encoding {e}: {text}\n-> {out}\nreads as {:?}",
                            String::from_utf8_lossy(&form)
                        );
                    }
                    let (twice, again) = whole(&r, out.as_bytes());
                    assert_eq!((twice, again), (out.into_bytes(), Counts::new()));
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Any chunking (cuts at random, and cuts inside secrets on purpose), with or
        /// without whole lines flushed on the way, gives the whole text's redaction.
        #[test]
        fn a_stream_redacts_as_the_whole_text_in_any_chunking(
            seed in any::<u64>(),
            window in 256usize..1024,
            pieces in 1usize..60,
        ) {
            let rng = Rng::new(seed);
            let r = redactor();
            let (text, secrets) = text(&rng, pieces);
            let expected = whole(&r, &text);
            for round in 0..4 {
                let mut cuts: Vec<usize> = match round {
                    // Chunks of one size.
                    0 => (1..text.len()).step_by(rng.range(1, 7)).collect(),
                    // Random sizes up to a few windows.
                    1 => {
                        let mut v = Vec::new();
                        let mut at = 0;
                        while at < text.len() {
                            at += rng.range(1, 3 * window);
                            v.push(at);
                        }
                        v
                    }
                    // Cuts right inside, at and around every secret.
                    _ => secrets
                        .iter()
                        .flat_map(|&(a, b)| {
                            let inside = a + rng.below(b - a);
                            [a.saturating_sub(1), a, a + 1, inside, b - 1, b, b + 1]
                        })
                        .collect(),
                };
                cuts.sort_unstable();
                cuts.dedup();
                let flushes: Vec<usize> = if round == 3 {
                    cuts.clone()
                } else {
                    cuts.iter().copied().filter(|_| rng.below(16) == 0).collect()
                };
                let got = streamed(&r, &text, window, &cuts, &flushes);
                prop_assert!(
                    got == expected,
                    "round {round}, window {window}\ntext: {:?}\nwhole:  {:?}\nstream: {:?}",
                    String::from_utf8_lossy(&text),
                    String::from_utf8_lossy(&expected.0),
                    String::from_utf8_lossy(&got.0)
                );
            }
        }

        /// Redacting what was redacted changes nothing and counts nothing.
        /// Made texts, some of their letters changed in case or into the characters
        /// outside ASCII that fold onto them: the prefilter admits every pattern the
        /// old set found, and redaction finds what running every pattern finds.
        #[test]
        fn the_prefilter_loses_no_secret_of_made_texts(
            seed in any::<u64>(),
            pieces in 1usize..30,
            change_every in 2usize..40,
        ) {
            let rng = Rng::new(seed);
            let (made, _) = text(&rng, pieces);
            let mut changed = Vec::with_capacity(made.len());
            for &b in &made {
                if rng.below(change_every) != 0 {
                    changed.push(b);
                    continue;
                }
                match b {
                    b'k' | b'K' if rng.below(2) == 0 => {
                        changed.extend_from_slice("\u{212A}".as_bytes());
                    }
                    b's' | b'S' if rng.below(2) == 0 => {
                        changed.extend_from_slice("\u{17F}".as_bytes());
                    }
                    _ if b.is_ascii_alphabetic() => changed.push(b ^ 0x20),
                    _ => changed.push(b),
                }
            }
            let r = redactor();
            super::tests::prefilter_is_exact(&r, &made);
            super::tests::prefilter_is_exact(&r, &changed);
        }

        /// The segmented search of a big text against every pattern run over the whole
        /// text, on made texts whose secrets are glued to the lines around them by
        /// what may join lines into one match: line ends in whitespace runs beside `=`,
        /// `:`, `Bearer`, escaped line ends, spaces outside ASCII, keys with and without
        /// their end line, secrets side by side.
        #[test]
        fn segments_find_the_spans_of_the_whole_text(
            seed in any::<u64>(),
            pieces in 1usize..80,
        ) {
            let rng = Rng::new(seed);
            let mut text = Vec::new();
            for _ in 0..pieces {
                match rng.below(3) {
                    0 => text.extend_from_slice(JOINTS[rng.below(JOINTS.len())].as_bytes()),
                    1 => text.extend_from_slice(separator(&rng)),
                    _ => {}
                }
                if rng.below(2) == 0 {
                    text.extend(secret(&rng, rng.below(KINDS)).into_bytes());
                } else {
                    text.extend(filler(&rng));
                }
            }
            for r in [redactor(), Redactor::default()] {
                let whole = r.spans_of(&text, u64::MAX);
                prop_assert!(
                    r.spans_segmented(&text) == whole,
                    "{:?}",
                    String::from_utf8_lossy(&text)
                );
            }
        }

        #[test]
        fn redaction_is_idempotent(seed in any::<u64>(), pieces in 1usize..40) {
            let rng = Rng::new(seed);
            let r = redactor();
            let (text, _) = text(&rng, pieces);
            let (once, _) = whole(&r, &text);
            let (twice, counts) = whole(&r, &once);
            prop_assert_eq!(&twice, &once, "{:?}", String::from_utf8_lossy(&text));
            prop_assert!(counts.is_empty(), "{counts:?}");
        }
    }

    /// `text` cut at `cuts` (byte offsets, moved back to a character's start), each
    /// piece redacted on its own and joined, against the whole text redacted.
    fn joined_is_whole(r: &Redactor, text: &str, cuts: &[usize]) -> Result<(), TestCaseError> {
        let mut pieces = Vec::new();
        let mut at = 0;
        for &cut in cuts.iter().chain([&text.len()]) {
            let mut cut = cut.clamp(at, text.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            if cut < at {
                continue;
            }
            pieces.push(r.piece(text[at..cut].to_string()));
            at = cut;
        }
        let mut want = Counts::new();
        let whole = r.redact(text, &mut want).into_owned();
        let mut got = Counts::new();
        let joined = r.join(pieces, &mut got);
        prop_assert!(
            joined == whole && got == want,
            "cuts {cuts:?}\ntext:   {text:?}\nwhole:  {whole:?} {want:?}\njoined: {joined:?} {got:?}"
        );
        Ok(())
    }

    /// A search's answer made of files' lines, `path:N:` and a line of made text, with
    /// `--` between some files and a tail without a line end.
    fn answer(rng: &Rng, files: usize) -> (String, Vec<usize>) {
        let mut out = String::new();
        let mut edges = Vec::new();
        for f in 0..files {
            for n in 0..rng.range(1, 4) {
                out.push_str(&format!("src/f{f}.rs:{n}:"));
                for _ in 0..rng.range(1, 3) {
                    match rng.below(3) {
                        0 => out.push_str(JOINTS[rng.below(JOINTS.len())]),
                        1 => out.push_str(&secret(rng, rng.below(KINDS))),
                        _ => out.push_str(&String::from_utf8_lossy(&filler(rng))),
                    }
                }
                out.push('\n');
            }
            edges.push(out.len());
            if rng.below(4) == 0 {
                out.push_str("--\n");
                edges.push(out.len());
            }
        }
        out.push_str(["", "…(3 more matches not shown)", "password:", "\n="][rng.below(4)]);
        (out, edges)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Pieces redacted on their own and joined give the whole text's redaction:
        /// a search's answer cut at its files' edges, and made texts cut at random line
        /// ends and anywhere, with secrets glued across the edges (line ends beside
        /// `=`, `:`, `Bearer`, escaped ones, spaces outside ASCII), keys with and
        /// without their end line, and an environment secret holding a line end.
        #[test]
        fn joined_pieces_redact_as_the_whole_text(seed in any::<u64>(), files in 1usize..40) {
            let rng = Rng::new(seed);
            let (answer, edges) = answer(&rng, files);
            let mut made = Vec::new();
            for _ in 0..files {
                made.extend_from_slice(JOINTS[rng.below(JOINTS.len())].as_bytes());
                if rng.below(2) == 0 {
                    made.extend(secret(&rng, rng.below(KINDS)).into_bytes());
                } else {
                    made.extend(filler(&rng));
                }
            }
            let made = String::from_utf8_lossy(&made).into_owned();
            let line_ends: Vec<usize> = made
                .match_indices('\n')
                .map(|(at, _)| at + 1)
                .filter(|_| rng.below(3) == 0)
                .collect();
            let anywhere: Vec<usize> =
                (0..rng.below(12)).map(|_| rng.below(made.len() + 1)).collect();
            let mut newline_env = redactor();
            newline_env.add_value("MULTI_LINE_SECRET", "first-half\nsecond-half");
            for r in [redactor(), Redactor::default(), newline_env] {
                joined_is_whole(&r, &answer, &edges)?;
                joined_is_whole(&r, &made, &line_ends)?;
                let mut sorted = anywhere.clone();
                sorted.sort_unstable();
                joined_is_whole(&r, &made, &sorted)?;
            }
        }

        /// A file's lines read after their path find the literals and make the piece
        /// that reading every byte finds and makes: paths holding literals at their
        /// start, middle and end (`sk` before the `-` of a context line), outside
        /// ASCII, short and long, lines of made text, `--` lines and lines without
        /// the path.
        #[test]
        fn lines_read_after_their_path_give_the_same_piece(
            seed in any::<u64>(),
            lines in 1usize..30,
        ) {
            let rng = Rng::new(seed);
            let long = "registry/src/index.registry1-1949cf8c6b5b557f/serde-1.0.210/src/de";
            let path = [
                format!("{long}/mod.rs"),
                format!("{long}/token_sk"),
                format!("passwd/{long}/sk"),
                format!("{long}/pa\u{17f}\u{17f}word/ſk"),
                format!("{long}/{}/x.rs", "sk-ant-"),
                "src/main.rs".to_string(),
                format!("{long}/{}", &long[..rng.below(long.len())]),
            ][rng.below(7)]
            .clone();
            let mut text = String::new();
            for n in 0..lines {
                match rng.below(8) {
                    0 => text.push_str("--\n"),
                    1 => text.push_str("other/path.rs:1:x\n"),
                    k => {
                        let sep = if k == 2 { '-' } else { ':' };
                        text.push_str(&format!("{path}{sep}{n}{sep}"));
                        match rng.below(3) {
                            0 => text.push_str(JOINTS[rng.below(JOINTS.len())]),
                            1 => text.push_str(&secret(&rng, rng.below(KINDS))),
                            _ => text.push_str(&String::from_utf8_lossy(&filler(&rng))),
                        }
                        text.push('\n');
                    }
                }
            }
            let anchors = ANCHORS.as_ref().expect("the anchors compile");
            prop_assert_eq!(
                anchored_hits_after_prefix(anchors, text.as_bytes(), path.as_bytes()),
                anchored_hits(anchors, text.as_bytes()),
                "{:?} in {:?}", path, text
            );
            let r = redactor();
            prop_assert_eq!(r.piece_of_lines(text.clone(), &path), r.piece(text));
        }
    }

    /// Pieces whose edge a secret crosses, or may cross, joined as the whole text.
    #[test]
    fn secrets_across_the_edges_of_pieces_are_redacted_as_in_the_whole_text() {
        let r = redactor();
        let key = |kind: &str| format!("-----{kind} RSA PRIVATE KEY-----");
        let token = format!("{}_{}", "ghp", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
        for (pieces, expected) in [
            // A cut: each piece alone.
            (vec!["a:1:x\n", "b:1:y\n"], "a:1:x\nb:1:y\n".to_string()),
            // `=` then a line end: the value on the next piece.
            (
                vec!["a:1:DB_PASSWORD =\n", "  hunter2hunter2\n"],
                "a:1:DB_PASSWORD =\n  [REDACTED:assignment]\n".to_string(),
            ),
            // `:` or `=` after the line end.
            (
                vec!["a:1:api_key\n", "\u{a0}: s3cr3tvalue\n"],
                "a:1:api_key\n\u{a0}: [REDACTED:assignment]\n".to_string(),
            ),
            // `Bearer` at a piece's end, the token on the next.
            (
                vec!["Authorization: Bearer \n", "\tabcdefghijklmnopqrstuvwxyz\n"],
                "Authorization: Bearer \n\t[REDACTED:bearer_token]\n".to_string(),
            ),
            // An escaped line end inside a value.
            (
                vec!["secret=abc\\\n", "defgh\n"],
                "secret=[REDACTED:assignment]\n".to_string(),
            ),
            // Regression: a backslash two readings deep before the line end was not
            // seen (`&amp;bsol;`: the value in the first view ends at `&`), the edge
            // was taken for a cut, and `ab` then `cd` were left in clear.
            (
                vec!["pwd=ab&amp;bsol;\n", "cd\n"],
                "pwd=[REDACTED:assignment]\n".to_string(),
            ),
            (
                vec!["pwd=ab%255C\n", "cd\n"],
                "pwd=[REDACTED:assignment]\n".to_string(),
            ),
            // A key whose end line is two pieces on; one with no end line at all.
            (
                vec![
                    &format!("x\n{}\nAAAA\n", key("BEGIN")),
                    "BBBB\n",
                    &format!("{}\ny\n", key("END")),
                    "z\n",
                ],
                "x\n[REDACTED:private_key]\ny\nz\n".to_string(),
            ),
            (
                vec![
                    &format!("{}\nAAAA\n", key("BEGIN")),
                    &format!("{token}\n"),
                    "z",
                ],
                "[REDACTED:private_key]".to_string(),
            ),
            // A piece without a line end at its end.
            (
                vec!["to", &format!("ken: {token}\n")],
                "token: [REDACTED:github_token]\n".to_string(),
            ),
        ] {
            let text: String = pieces.concat();
            let mut counts = Counts::new();
            assert_eq!(r.redact(&text, &mut counts), expected, "{pieces:?}");
            let mut joined_counts = Counts::new();
            let joined = r.join(
                pieces.iter().map(|p| r.piece(p.to_string())).collect(),
                &mut joined_counts,
            );
            assert_eq!((joined, joined_counts), (expected, counts), "{pieces:?}");
        }
    }

    /// Regression: a line flush right after a private key's first line passed the key
    /// on as a whole secret ending there, and its body, when it came, as more secrets.
    #[test]
    fn a_key_whose_first_line_is_flushed_is_one_secret() {
        let r = Redactor::default();
        let mut s = StreamRedactor::new(&r);
        let head = format!("x\n-----BEGIN {}PRIVATE KEY-----\n", "RSA ");
        let rest = format!("{}\n-----END RSA PRIVATE KEY-----\nafter\n", "A".repeat(40));
        let mut out = s.feed(head.as_bytes());
        out.extend(s.flush_lines());
        assert_eq!(out, b"x\n[REDACTED:private_key]");
        out.extend(s.feed(rest.as_bytes()));
        out.extend(s.flush_lines());
        let (end, counts) = s.finish();
        out.extend(end);
        assert_eq!(out, whole(&r, format!("{head}{rest}").as_bytes()).0);
        assert_eq!(out, b"x\n[REDACTED:private_key]\nafter\n");
        assert_eq!(counts, Counts::from([("private_key".into(), 1)]));
    }

    /// Regression: a line flush passed on a line end that a secret's value held, before
    /// the value was long enough to match (`pwd=ab\` then a line end: 3 of the 4
    /// characters a value needs), so `ab` went out in clear and the marker came after.
    #[test]
    fn a_line_flush_does_not_pass_a_line_end_inside_a_value() {
        let r = Redactor::default();
        let text = b"pwd=ab\\\ncd\n";
        let mut s = StreamRedactor::new(&r);
        let mut out = s.feed(&text[..8]);
        out.extend(s.flush_lines());
        assert_eq!(out, b"", "the line end may be inside the value");
        out.extend(s.feed(&text[8..]));
        out.extend(s.flush_lines());
        assert_eq!(out, b"pwd=[REDACTED:assignment]\n");
        let (rest, counts) = s.finish();
        assert_eq!(rest, b"");
        assert_eq!((out, counts), whole(&r, text));
    }

    /// Every way a secret holds a line end, in the text as it is or as a reader decodes
    /// it: a stream fed a byte at a time and flushed after each gives the whole text's
    /// redaction; a line end no secret holds is passed on at once.
    #[test]
    fn a_line_flush_waits_at_every_line_end_a_secret_may_hold() {
        let mut r = Redactor::default();
        r.add_value("MULTI_SECRET", "line-one\nline-two");
        let token = format!("{}_{}", "ghp", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
        let (head, tail) = token.split_at(20);
        for (text, expected) in [
            (
                "pwd=ab\\\r\ncd\n",
                "pwd=[REDACTED:assignment]\n".to_string(),
            ),
            // A backslash decoded from an escape, one round deep or two.
            ("pwd=ab%5C\ncd\n", "pwd=[REDACTED:assignment]\n".to_string()),
            (
                "pwd=ab%255C\ncd\n",
                "pwd=[REDACTED:assignment]\n".to_string(),
            ),
            (
                "secret: \"ab&bsol;\ncd\"\n",
                "secret: \"[REDACTED:assignment]\"\n".to_string(),
            ),
            (
                "pwd=ab\\\\\ncd\n",
                "pwd=[REDACTED:assignment]\n".to_string(),
            ),
            // A backslash joined to an empty line, then the line end (shell reading).
            (
                "pwd=ab%5C\\\n\ncd\n",
                "pwd=[REDACTED:assignment]\n".to_string(),
            ),
            // Lines joined by the shell reading inside a token.
            (
                &format!("t {head}\\\n{tail} x\n"),
                "t [REDACTED:github_token] x\n".to_string(),
            ),
            // An environment value holding a line end.
            (
                "x line-one\nline-two y\n",
                "x [REDACTED:env:MULTI_SECRET] y\n".to_string(),
            ),
            // The password of the regression's case, in a JSON view after `\"`.
            (
                "password: \\u0020\\\"\\\nhttps://deploy:zEHnh3Qa0xT3@git.example.com/r.git\t",
                "password: [REDACTED:assignment]\\\"[REDACTED:assignment]\t".to_string(),
            ),
        ] {
            let text = text.as_bytes();
            let cuts: Vec<usize> = (1..text.len()).collect();
            let got = streamed(&r, text, 256, &cuts, &cuts);
            assert_eq!(got, whole(&r, text), "{:?}", String::from_utf8_lossy(text));
            assert_eq!(
                got.0,
                expected.as_bytes(),
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
        // A line end no secret may hold goes out with its line.
        let mut s = StreamRedactor::new(&r);
        let mut out = s.feed(b"pwd=abcd\nC:\\dir %5C x\nline-one\nline-twx\n");
        out.extend(s.flush_lines());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "pwd=[REDACTED:assignment]\nC:\\dir %5C x\nline-one\nline-twx\n"
        );
    }

    /// Feeds `text` a byte at a time.
    fn bytewise(r: &Redactor, text: &[u8], window: usize) -> (Vec<u8>, Counts) {
        let cuts: Vec<usize> = (1..text.len()).collect();
        streamed(r, text, window, &cuts, &[])
    }

    /// At the window a secret is still caught as in a whole text; one byte past it, a
    /// secret that reaches the end of what is held when the window moves is replaced
    /// at once and what may continue it is dropped: redacted still, a little more than
    /// the whole text's redaction.
    #[test]
    fn a_secret_at_the_window_is_exact_and_one_past_it_is_redacted_to_its_run() {
        const W: usize = 256;
        let r = Redactor::default();
        let rng = Rng::new(11);
        let jwt = |rng: &Rng, len: usize| {
            let head = format!(
                "{}{}.{}{}.",
                "eyJ",
                rng.chars(URLSAFE, 10),
                "eyJ",
                rng.chars(URLSAFE, 10)
            );
            let tail = rng.chars(URLSAFE, len - head.len());
            head + &tail
        };
        // The first pass comes when PASS_WINDOWS windows are held; it passes on all but
        // the last one. A secret of a window, then of a window and a byte, ending there:
        let edge = (PASS_WINDOWS - 1) * W;
        let pad = |n: usize| format!("{} ", "a".repeat(n - 1));
        let at = jwt(&rng, W);
        let text = format!("{}{at}.tail more\n", pad(edge));
        assert_eq!(bytewise(&r, text.as_bytes(), W), whole(&r, text.as_bytes()));
        assert_eq!(
            bytewise(&r, text.as_bytes(), W).0,
            format!("{}[REDACTED:jwt].tail more\n", pad(edge)).into_bytes()
        );
        let past = jwt(&rng, W + 1);
        let text = format!("{}{past}.tail more\n", pad(edge - 1));
        let (out, counts) = bytewise(&r, text.as_bytes(), W);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{}[REDACTED:jwt] more\n", pad(edge - 1))
        );
        assert_eq!(counts, Counts::from([("jwt".into(), 1)]));
        assert_eq!(
            whole(&r, text.as_bytes()).0,
            format!("{}[REDACTED:jwt].tail more\n", pad(edge - 1)).into_bytes()
        );
    }

    /// Memory stays bounded on a long stream without a newline, with secrets in it, and
    /// on secrets far longer than the window (a value, a private key with no end line).
    #[test]
    fn a_long_stream_is_redacted_in_bounded_memory() {
        const W: usize = 1024;
        const CHUNK: usize = 4096;
        let r = redactor();
        let rng = Rng::new(3);
        let mut text = Vec::new();
        while text.len() < 4 << 20 {
            text.extend(rng.chars("abcdefghijklmnopqrstuvwxyz ", 4000).into_bytes());
            // Any kind but a private key, which spans lines.
            text.extend(secret(&rng, 1 + rng.below(KINDS - 1)).into_bytes());
            text.push(b' ');
        }
        assert!(!text.contains(&b'\n'));
        let cuts: Vec<usize> = (CHUNK..text.len()).step_by(CHUNK).collect();
        // `streamed` checks the bound after every chunk.
        assert_eq!(streamed(&r, &text, W, &cuts, &[]), whole(&r, &text));

        let value = rng.chars(ALNUM, 1 << 20);
        let text = format!("password={value} and after\n");
        let cuts: Vec<usize> = (CHUNK..text.len()).step_by(CHUNK).collect();
        let (out, _) = streamed(&r, text.as_bytes(), W, &cuts, &[]);
        assert_eq!(out, b"password=[REDACTED:assignment] and after\n");

        let body = rng.chars(B64, 1 << 20);
        for end in ["", "\n-----END RSA PRIVATE KEY-----"] {
            let text = format!("key:\n-----BEGIN RSA PRIVATE KEY-----\n{body}{end}\nafter\n");
            let cuts: Vec<usize> = (CHUNK..text.len()).step_by(CHUNK).collect();
            let got = streamed(&r, text.as_bytes(), W, &cuts, &[]);
            assert_eq!(got, whole(&r, text.as_bytes()));
            let want: &[u8] = if end.is_empty() {
                b"key:\n[REDACTED:private_key]"
            } else {
                b"key:\n[REDACTED:private_key]\nafter\n"
            };
            assert_eq!(got.0, want);
        }
    }
}
