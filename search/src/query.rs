//! The query language both backends implement, and the one tokeniser behind it.
//!
//! A token is a maximal run of alphanumeric characters (`char::is_alphanumeric`:
//! Unicode letters and digits), lower-cased (`char::to_lowercase`); everything else
//! separates tokens. Accents are kept (`é` is not `e`).
//!
//! A query is a list of items, all of which must occur in a document (AND):
//! - `word`: a token equal to it; `src/main.rs` is three tokens that must follow
//!   each other (as a phrase);
//! - `"quoted words"`: a phrase, its tokens one after the other;
//! - `word*` or `"a phrase"*`: the last token is a prefix.
//!
//! Each backend finds candidates by their token sets only (every token of every item
//! present, the last of a prefix item as a prefix); [`Query::find`] then checks the
//! order of phrases on the document's text, the same function for both, so both give
//! the same documents by construction.

use crate::error::{Error, Result};

/// The most tokens a query may hold (over all its items).
pub const SEARCH_QUERY_TOKENS_MAX: usize = 32;

/// Index tokens are cut to this many bytes (at a character boundary): a long run such
/// as a base64 string stays findable by its start, and a PostgreSQL lexeme stays far
/// below its 2046-byte limit. A query token is cut the same way for finding
/// candidates; [`Query::find`] then compares whole tokens.
pub const SEARCH_TOKEN_BYTES_MAX: usize = 64;

/// One token of a text: its lower-cased form and where it is in the text (bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub text: String,
    pub start: usize,
    pub end: usize,
}

/// The tokens of `text`, in order.
pub fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, c) in text.char_indices() {
        if c.is_alphanumeric() {
            let (_, t) = cur.get_or_insert_with(|| (i, String::new()));
            t.extend(c.to_lowercase());
        } else if let Some((start, t)) = cur.take() {
            out.push(Token {
                text: t,
                start,
                end: i,
            });
        }
    }
    if let Some((start, t)) = cur {
        out.push(Token {
            text: t,
            start,
            end: text.len(),
        });
    }
    out
}

/// `token` cut to [`SEARCH_TOKEN_BYTES_MAX`] bytes at a character boundary.
pub fn index_form(token: &str) -> &str {
    if token.len() <= SEARCH_TOKEN_BYTES_MAX {
        return token;
    }
    let mut end = SEARCH_TOKEN_BYTES_MAX;
    while !token.is_char_boundary(end) {
        end -= 1;
    }
    &token[..end]
}

/// The distinct index forms of `text`'s tokens, sorted: what both backends index.
pub fn index_terms(text: &str) -> Vec<String> {
    let mut v: Vec<String> = tokens(text)
        .into_iter()
        .map(|t| index_form(&t.text).to_string())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// One item of a query: tokens that must follow each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub tokens: Vec<String>,
    /// The last token matches any token it begins.
    pub prefix: bool,
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub items: Vec<Item>,
}

/// A term for candidate search: an index form, maybe a prefix.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Term {
    pub text: String,
    pub prefix: bool,
}

/// Where one occurrence of an item is in a text (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Query {
    /// Parses a query. Errors say what is wrong: an unclosed quote, no words, too many.
    pub fn parse(q: &str) -> Result<Query> {
        let bad = |what: String| Error::Query { what };
        let mut items = Vec::new();
        let mut rest = q;
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            let (body, prefix, after) = if let Some(r) = rest.strip_prefix('"') {
                let Some(close) = r.find('"') else {
                    return Err(bad(format!(
                        "the quote opened before `{}` is not closed: end the phrase with \"",
                        r.trim()
                    )));
                };
                let after = &r[close + 1..];
                match after.strip_prefix('*') {
                    Some(a) => (&r[..close], true, a),
                    None => (&r[..close], false, after),
                }
            } else {
                let end = rest
                    .find(|c: char| c.is_whitespace() || c == '"')
                    .unwrap_or(rest.len());
                let word = &rest[..end];
                match word.strip_suffix('*') {
                    Some(w) => (w, true, &rest[end..]),
                    None => (word, false, &rest[end..]),
                }
            };
            let toks: Vec<String> = tokens(body).into_iter().map(|t| t.text).collect();
            if !toks.is_empty() {
                items.push(Item {
                    tokens: toks,
                    prefix,
                });
            }
            rest = after;
        }
        let n: usize = items.iter().map(|i| i.tokens.len()).sum();
        if n == 0 {
            return Err(bad(
                "the query has no words: give a word, a \"quoted phrase\" or a prefix*".into(),
            ));
        }
        if n > SEARCH_QUERY_TOKENS_MAX {
            return Err(bad(format!(
                "the query has {n} words, more than the {SEARCH_QUERY_TOKENS_MAX} a query may hold: leave some out"
            )));
        }
        Ok(Query { items })
    }

    /// Every token as a candidate term, deduplicated and sorted (an exact term and a
    /// prefix term of the same text are both kept).
    pub fn terms(&self) -> Vec<Term> {
        let mut v: Vec<Term> = Vec::new();
        for item in &self.items {
            let last = item.tokens.len() - 1;
            for (i, t) in item.tokens.iter().enumerate() {
                let cut = index_form(t);
                v.push(Term {
                    text: cut.to_string(),
                    // A cut token matches the index's cut form exactly; a cut prefix
                    // likewise.
                    prefix: i == last && item.prefix,
                });
            }
        }
        v.sort();
        v.dedup();
        v
    }

    /// Whether the candidate search alone decides (every item one token no longer than
    /// the index keeps); else [`Query::find`] must check each candidate.
    pub fn exact_in_index(&self) -> bool {
        self.items
            .iter()
            .all(|i| i.tokens.len() == 1 && i.tokens[0].len() <= SEARCH_TOKEN_BYTES_MAX)
    }

    /// Every occurrence of every item in `text`, by position, or `None` when some item
    /// does not occur.
    pub fn find(&self, text: &str) -> Option<Vec<Span>> {
        // Where the tokens are; each is lower-cased only as far as it is compared.
        let toks = token_spans(text);
        let mut spans = Vec::new();
        for item in &self.items {
            let n = item.tokens.len();
            let mut found = false;
            if toks.len() >= n {
                for i in 0..=toks.len() - n {
                    let ok = item.tokens.iter().enumerate().all(|(j, want)| {
                        let t = toks[i + j];
                        lower_matches(&text[t.start..t.end], want, j == n - 1 && item.prefix)
                    });
                    if ok {
                        found = true;
                        spans.push(Span {
                            start: toks[i].start,
                            end: toks[i + n - 1].end,
                        });
                    }
                }
            }
            if !found {
                return None;
            }
        }
        spans.sort_by_key(|s| (s.start, s.end));
        Some(spans)
    }
}

/// Where the tokens of `text` are, in order (as [`tokens`] finds them, without
/// lower-casing them).
fn token_spans(text: &str) -> Vec<Span> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        if c.is_alphanumeric() {
            start.get_or_insert(i);
        } else if let Some(s) = start.take() {
            out.push(Span { start: s, end: i });
        }
    }
    if let Some(s) = start {
        out.push(Span {
            start: s,
            end: text.len(),
        });
    }
    out
}

/// Whether token `tok`, lower-cased, is `want` (or begins with it, for a prefix).
fn lower_matches(tok: &str, want: &str, prefix: bool) -> bool {
    let mut w = want.chars();
    for c in tok.chars().flat_map(char::to_lowercase) {
        match w.next() {
            Some(x) if x == c => {}
            Some(_) => return false,
            None => return prefix,
        }
    }
    w.next().is_none()
}

/// Characters of context before the first match in a snippet.
pub const SNIPPET_BEFORE_CHARS: usize = 40;
/// Characters a snippet shows from its first match on.
pub const SNIPPET_AFTER_CHARS: usize = 120;

/// A one-line excerpt of `text` around the first span, every span inside it marked
/// `**so**`, white space runs made one space, `…` where it was cut.
pub fn snippet(text: &str, spans: &[Span]) -> String {
    snippet_marked(text, spans).0
}

/// [`snippet`], with the byte ranges of the excerpt that its `**` markers enclose (the
/// matched words, markers left out), so that a reader can show the matches another
/// way, or plainly, without mistaking a `**` of the text itself for a marker.
pub fn snippet_marked(text: &str, spans: &[Span]) -> (String, Vec<std::ops::Range<usize>>) {
    let mut marks = Vec::new();
    let Some(first) = spans.first() else {
        return (String::new(), marks);
    };
    let start = text[..first.start]
        .char_indices()
        .rev()
        .nth(SNIPPET_BEFORE_CHARS.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    let end = text[first.start..]
        .char_indices()
        .nth(SNIPPET_AFTER_CHARS)
        .map_or(text.len(), |(i, _)| first.start + i)
        .max(first.end);
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    let mut at = start;
    for s in spans {
        if s.start < at || s.end > end {
            continue;
        }
        push_flat(&mut out, &text[at..s.start]);
        out.push_str("**");
        let from = out.len();
        push_flat(&mut out, &text[s.start..s.end]);
        marks.push(from..out.len());
        out.push_str("**");
        at = s.end;
    }
    push_flat(&mut out, &text[at..end]);
    if end < text.len() {
        out.push('…');
    }
    (out, marks)
}

/// Appends `s` with each run of white space (newlines included) as one space.
fn push_flat(out: &mut String, s: &str) {
    for c in s.chars() {
        if c.is_whitespace() {
            if !out.ends_with(' ') {
                out.push(' ');
            }
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(q: &str) -> Vec<(Vec<String>, bool)> {
        let q = Query::parse(q).unwrap_or_else(|e| panic!("{e}"));
        q.items.into_iter().map(|i| (i.tokens, i.prefix)).collect()
    }

    fn want(items: &[(&[&str], bool)]) -> Vec<(Vec<String>, bool)> {
        items
            .iter()
            .map(|(t, p)| (t.iter().map(|s| s.to_string()).collect(), *p))
            .collect()
    }

    #[test]
    fn words_phrases_and_prefixes_parse() {
        assert_eq!(
            items(r#"Cargo "unit tests" pan* src/main.rs "a b"*"#),
            want(&[
                (&["cargo"], false),
                (&["unit", "tests"], false),
                (&["pan"], true),
                (&["src", "main", "rs"], false),
                (&["a", "b"], true),
            ])
        );
        assert_eq!(
            items("Ünïcode ÉTÉ"),
            want(&[(&["ünïcode"], false), (&["été"], false)])
        );
    }

    #[test]
    fn bad_queries_say_what_is_wrong() {
        let err = |q: &str| Query::parse(q).map(|_| ()).unwrap_err().to_string();
        assert!(
            err(r#"one "two"#).contains("not closed"),
            "{}",
            err(r#"one "two"#)
        );
        assert!(err("  -- ** ").contains("no words"));
        let at = vec!["w"; SEARCH_QUERY_TOKENS_MAX].join(" ");
        assert!(Query::parse(&at).is_ok());
        let past = vec!["w"; SEARCH_QUERY_TOKENS_MAX + 1].join(" ");
        assert!(err(&past).contains("more than the 32"));
    }

    #[test]
    fn find_checks_order_and_prefix_and_snippet_marks_matches() {
        let q = Query::parse(r#""unit tests" car*"#).unwrap_or_else(|e| panic!("{e}"));
        assert!(q.find("tests unit cargo").is_none());
        let text = "ran the\nunit   tests with cargo";
        let spans = q.find(text).unwrap_or_else(|| panic!("no match"));
        assert_eq!(
            snippet(text, &spans),
            "ran the **unit   tests** with **cargo**".replace("   ", " ")
        );
        assert!(!q.exact_in_index());
        assert!(Query::parse("a b*").is_ok_and(|q| q.exact_in_index()));
    }

    #[test]
    fn tokens_are_cut_for_the_index_at_the_limit() {
        let at = "a".repeat(SEARCH_TOKEN_BYTES_MAX);
        let past = format!("{at}é");
        assert_eq!(index_form(&at), at);
        assert_eq!(index_form(&past), at);
        let q = Query::parse(&past).unwrap_or_else(|e| panic!("{e}"));
        assert!(!q.exact_in_index());
        assert!(q.find(&at).is_none());
        assert!(q.find(&past).is_some());
    }
}
