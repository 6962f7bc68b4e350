//! Comparing a text with an expected one that has holes: parts the log cannot give
//! back. Redaction markers stand for the secret they replaced (verify does not know the
//! environment's secrets), and a stream whose output was never collected stands for
//! the one line the engine wrote in its place. Everything else must match byte for
//! byte.

use std::sync::LazyLock;

use regex::Regex;

/// One part of an expected text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Piece {
    /// Exactly this text.
    Text(String),
    /// At least one character; within one line when `line` is set.
    Hole { line: bool },
}

/// A marker of a value only the recording process knew (its environment's secrets).
static ENV_MARKER: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\[REDACTED:env:[^\]\n]{0,200}\]").ok());

/// True when `text` holds a marker of an environment secret.
pub(super) fn has_env_marker(text: &str) -> bool {
    ENV_MARKER.as_ref().is_some_and(|re| re.is_match(text))
}

/// `text` with every redaction marker (`env` only: environment ones) made a hole.
pub(super) fn markers_as_holes(text: &str, env_only: bool) -> Vec<Piece> {
    let re = if env_only {
        ENV_MARKER.as_ref()
    } else {
        cairn_core::scrub::marker_regex()
    };
    let Some(re) = re else {
        return vec![Piece::Text(text.to_string())];
    };
    let mut out = Vec::new();
    let mut last = 0;
    for m in re.find_iter(text) {
        out.push(Piece::Text(text[last..m.start()].to_string()));
        out.push(Piece::Hole { line: false });
        last = m.end();
    }
    out.push(Piece::Text(text[last..].to_string()));
    out
}

/// True when `text` is `pieces` with each hole filled. Each text piece is taken at its
/// leftmost place after the hole before it (the last one at the very end). That is
/// always right for holes of any text: a later place only leaves less room for what
/// follows. A line hole is only ever followed by text that starts a new line, which
/// then has one place only (the end of the hole's line), so it is right for them too.
pub(super) fn fits(pieces: &[Piece], text: &str) -> bool {
    debug_assert!(
        pieces.windows(2).all(|w| match w {
            [Piece::Hole { line: true }, Piece::Text(t)] => t.is_empty() || t.starts_with('\n'),
            _ => true,
        }),
        "a line hole followed by text that does not start a line: {pieces:?}"
    );
    let mut at = 0usize;
    let mut hole: Option<bool> = None;
    let last_text = pieces.iter().rposition(|p| matches!(p, Piece::Text(_)));
    for (i, p) in pieces.iter().enumerate() {
        match p {
            Piece::Hole { line } => {
                // Two holes in a row: one line-bound hole keeps the stricter rule.
                hole = Some(hole.unwrap_or(true) && *line);
            }
            Piece::Text(t) => {
                let found = match hole.take() {
                    None => text[at..].starts_with(t.as_str()).then_some(at),
                    Some(line) => {
                        let from = next_char(text, at);
                        let Some(from) = from else { return false };
                        let place = if Some(i) == last_text && i + 1 == pieces.len() {
                            // The last piece ends the text.
                            text.len()
                                .checked_sub(t.len())
                                .filter(|&s| s >= from && text.is_char_boundary(s))
                                .filter(|&s| text[s..] == *t)
                        } else {
                            text[from..].find(t.as_str()).map(|s| from + s)
                        };
                        place.filter(|&s| !line || !text[at..s].contains('\n'))
                    }
                };
                let Some(s) = found else { return false };
                at = s + t.len();
            }
        }
    }
    match hole {
        None => at == text.len(),
        Some(line) => at < text.len() && (!line || !text[at..].contains('\n')),
    }
}

/// The offset after the character at `at`, if there is one.
fn next_char(text: &str, at: usize) -> Option<usize> {
    text[at..].chars().next().map(|c| at + c.len_utf8())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Piece {
        Piece::Text(s.to_string())
    }

    const ANY: Piece = Piece::Hole { line: false };
    const LINE: Piece = Piece::Hole { line: true };

    #[test]
    fn holes_take_at_least_one_character_and_lines_stay_lines() {
        let check = |pieces: &[Piece], text: &str, expected: bool| {
            assert_eq!(fits(pieces, text), expected, "{pieces:?} against {text:?}");
        };
        check(&[t("abc")], "abc", true);
        check(&[t("abc")], "abcd", false);
        check(&[t("a"), ANY, t("c")], "abc", true);
        check(&[t("a"), ANY, t("c")], "ac", false);
        check(&[t("a"), ANY, t("c")], "axxc", true);
        check(&[t("a"), ANY, t("")], "ab", true);
        check(&[t("a"), ANY, t("")], "a", false);
        check(&[t("a"), ANY, t("b"), ANY, t("b")], "axbyb", true);
        check(&[t("a"), ANY, t("b"), ANY, t("b")], "axbb", false);
        check(&[t("x\n"), LINE, t("\ny")], "x\none line\ny", true);
        check(&[t("x\n"), LINE, t("\ny")], "x\ntwo\nlines\ny", false);
        check(&[t("x\n"), ANY, t("\ny")], "x\ntwo\nlines\ny", true);
        // The last piece is a suffix, not its first occurrence.
        check(&[t("a"), ANY, t("b")], "abxb", true);
    }

    #[test]
    fn markers_become_holes() {
        assert_eq!(
            markers_as_holes("k=[REDACTED:assignment] [REDACTED:env:MY_TOKEN]!", false),
            vec![t("k="), ANY, t(" "), ANY, t("!")]
        );
        assert_eq!(
            markers_as_holes("k=[REDACTED:assignment] [REDACTED:env:MY_TOKEN]!", true),
            vec![t("k=[REDACTED:assignment] "), ANY, t("!")]
        );
        assert!(fits(
            &markers_as_holes("echo [REDACTED:env:T] done", true),
            "echo s3cr3t-value done"
        ));
    }
}
