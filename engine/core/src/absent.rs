//! A quick, exact test that a text holds none of a set of literals in any ASCII case,
//! made before a full search that would find where and which: every call's answer is
//! searched for the redaction patterns' literals and for the injection marks, and most
//! answers hold none of them.
//!
//! An Aho-Corasick automaton that folds ASCII case steps through the text a byte at a
//! time (about 1.5 ns a byte here). The text folded to lower case instead, a few KiB
//! at a time on the stack, is searched by a packed (SIMD) searcher over the literals
//! folded the same way, several times faster; folding both sides is what matching in
//! any ASCII case means, and a byte outside ASCII is left as it is by either.

use aho_corasick::{AhoCorasick, AhoCorasickKind, BuildError, Match, packed};

/// Texts shorter than this are better searched by the full automaton straight away:
/// for them the packed searcher's set-up costs about what the automaton's pass does.
const ABSENT_TEXT_BYTES_MIN: usize = 64;

/// The bytes folded and searched at a time: a stack buffer. Consecutive stretches
/// overlap by the longest literal less one byte, so that every occurrence lies whole in
/// one of them.
const FOLDED_CHUNK_BYTES: usize = 2048;

/// Literals found in any ASCII case, overlapping ones too: an Aho-Corasick automaton
/// that folds ASCII case, run only on a text that [`Absent`] does not vouch for.
pub struct FoldedLiterals {
    automaton: AhoCorasick,
    absent: Absent,
}

impl FoldedLiterals {
    /// The search for `literals` (pattern `i` in a match is the `i`th literal).
    pub fn new<I, P>(literals: I) -> Result<FoldedLiterals, BuildError>
    where
        I: IntoIterator<Item = P>,
        P: AsRef<[u8]>,
    {
        let literals: Vec<P> = literals.into_iter().collect();
        Ok(FoldedLiterals {
            // A contiguous NFA, not the DFA the builder picks for a few hundred
            // literals: the DFA took 4 % of a hook process's CPU to build, and the
            // automaton only runs on the rare text the packed test cannot vouch for.
            automaton: AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .kind(Some(AhoCorasickKind::ContiguousNFA))
                .build(&literals)?,
            absent: Absent::new(&literals),
        })
    }

    /// Every occurrence of a literal in `hay`, overlapping ones included, in the order
    /// of their ends.
    pub fn overlapping<'a>(&'a self, hay: &'a [u8]) -> impl Iterator<Item = Match> + 'a {
        let none = hay.len() >= ABSENT_TEXT_BYTES_MIN && self.absent.surely_none(hay);
        (!none)
            .then(|| self.automaton.find_overlapping_iter(hay))
            .into_iter()
            .flatten()
    }
}

/// Literals, any of which a text may hold in any ASCII case.
struct Absent {
    /// `None` when no packed searcher could be built: then no text is vouched for.
    searcher: Option<packed::Searcher>,
    /// The longest literal's bytes.
    longest: usize,
}

impl Absent {
    /// The test for `literals`. At most [`FOLDED_CHUNK_BYTES`] / 2 bytes each: a
    /// longer one is never vouched absent (the test then always says "maybe").
    fn new<I, P>(literals: I) -> Absent
    where
        I: IntoIterator<Item = P>,
        P: AsRef<[u8]>,
    {
        let folded: Vec<Vec<u8>> = literals
            .into_iter()
            .map(|l| l.as_ref().to_ascii_lowercase())
            .collect();
        let longest = folded.iter().map(Vec::len).max().unwrap_or(0);
        let searcher = match longest <= FOLDED_CHUNK_BYTES / 2 {
            true => packed::Config::new().builder().extend(&folded).build(),
            false => None,
        };
        Absent { searcher, longest }
    }

    /// Whether `hay` surely holds none of the literals in any ASCII case. `false` when
    /// it holds one (or no searcher could be built): the full search then decides.
    fn surely_none(&self, hay: &[u8]) -> bool {
        let Some(searcher) = &self.searcher else {
            return false;
        };
        let mut buf = [0u8; FOLDED_CHUNK_BYTES];
        // Each stretch starts this far after the last, so it holds again the last
        // `longest - 1` bytes of the one before.
        let step = FOLDED_CHUNK_BYTES - self.longest.saturating_sub(1);
        let mut start = 0;
        loop {
            let end = hay.len().min(start + FOLDED_CHUNK_BYTES);
            let stretch = &mut buf[..end - start];
            stretch.copy_from_slice(&hay[start..end]);
            stretch.make_ascii_lowercase();
            if searcher.find(&*stretch).is_some() {
                return false;
            }
            if end == hay.len() {
                return true;
            }
            start += step;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aho_corasick::AhoCorasick;
    use proptest::prelude::*;

    const LITERALS: [&str; 5] = ["key", "SK", "ghp_", "ignore the above", "\u{212A}"];

    /// The definition: an automaton that folds ASCII case finds none.
    fn none_in(hay: &[u8]) -> bool {
        let ac = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(LITERALS)
            .unwrap();
        ac.find(hay).is_none()
    }

    proptest! {
        #[test]
        fn vouches_exactly_for_the_texts_that_hold_none(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("key".to_string()), Just("KeY".to_string()), Just("ke".to_string()),
                    Just("sK".to_string()), Just("s".to_string()), Just("GHP_".to_string()),
                    Just("gh".to_string()), Just("Ignore THE above".to_string()),
                    Just("ignore the".to_string()), Just("\u{212A}".to_string()),
                    Just("\u{17F}".to_string()), Just("x".repeat(700)), "[a-z _\n]{0,40}",
                ],
                0..12,
            ),
        ) {
            let hay = parts.concat();
            let absent = Absent::new(LITERALS);
            prop_assert_eq!(absent.surely_none(hay.as_bytes()), none_in(hay.as_bytes()), "{:?}", hay);
        }
    }

    /// A literal across the end of a stretch is found in the next one: each literal at
    /// every offset around the first three stretches' ends.
    #[test]
    fn a_literal_across_two_stretches_is_found() {
        let absent = Absent::new(LITERALS);
        let step = FOLDED_CHUNK_BYTES - ("ignore the above".len() - 1);
        for lit in LITERALS {
            for boundary in [
                FOLDED_CHUNK_BYTES,
                step + FOLDED_CHUNK_BYTES,
                2 * step + FOLDED_CHUNK_BYTES,
            ] {
                for at in boundary - lit.len() - 2..boundary + 2 {
                    let mut hay = "z".repeat(3 * FOLDED_CHUNK_BYTES);
                    hay.replace_range(at..at + lit.len(), &lit.to_uppercase());
                    assert!(!absent.surely_none(hay.as_bytes()), "{lit} at {at}");
                }
            }
            assert!(absent.surely_none("z".repeat(3 * FOLDED_CHUNK_BYTES).as_bytes()));
        }
    }

    #[test]
    fn an_empty_text_holds_none_and_a_long_literal_is_never_vouched_for() {
        assert!(Absent::new(LITERALS).surely_none(b""));
        let long = "a".repeat(FOLDED_CHUNK_BYTES / 2 + 1);
        let absent = Absent::new([long.as_str()]);
        assert!(!absent.surely_none(b"bbb"));
        let at_limit = "a".repeat(FOLDED_CHUNK_BYTES / 2);
        assert!(Absent::new([at_limit.as_str()]).surely_none(b"bbb"));
    }
}
