//! A text as a reader decodes it before reading it: a URL's `%20`, a JSON string's
//! `\u0020`, a shell word's `\ ` or `$'\x20'`, HTML's `&#32;` or `&nbsp;` are spaces to
//! whoever reads them, and a secret spelled with them is a secret. The redactor looks
//! for secrets in these views of a text too ([`super::Redactor`]'s decoded pass); a view
//! keeps where each of its bytes came from, so that what is found in it is replaced in
//! the text as it is stored, escapes and all.
//!
//! Two readings, because they disagree on a backslash: [`Reading::Web`] (percent
//! escapes, `+` for a space in a query, JSON string escapes, HTML character
//! references) and [`Reading::Shell`] (backslash escapes, `$'…'` strings, and percent
//! escapes and HTML references as the web reading has them). A view is decoded again
//! while it changes, up to [`DECODE_ROUNDS_MAX`] times: a percent-encoded
//! percent-encoding, an HTML-escaped HTML reference.

use std::ops::Range;

/// How many times a text is decoded over: a secret encoded this many times over is
/// still found, one encoded once more is not (each round costs a pass over the text).
pub const DECODE_ROUNDS_MAX: usize = 3;

/// A way of reading a text's escapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// A URL, a JSON string, HTML: `%XX`, `+` for a space in a query, `\uXXXX` and the
    /// other JSON string escapes, `&#32;`, `&#x20;` and named references.
    Web,
    /// A shell line: `\X` for `X` (a backslash before a line end joins the lines),
    /// `$'…'` strings with their escapes (`\x20`, `\040`, `\u0020`, `\n`…), and `%XX`
    /// and HTML references as [`Reading::Web`] reads them.
    Shell,
}

/// Every reading, in the order the redactor tries them.
pub(crate) const READINGS: [Reading; 2] = [Reading::Web, Reading::Shell];

impl Reading {
    /// Whether `text` may hold an escape of this reading: a byte that starts one. A
    /// text with none is not decoded at all.
    pub(crate) fn may_hold_escape(self, text: &[u8]) -> bool {
        match self {
            Reading::Web => {
                memchr::memchr3(b'%', b'&', b'\\', text).is_some()
                    || memchr::memchr(b'+', text).is_some()
            }
            Reading::Shell => memchr::memchr3(b'%', b'&', b'\\', text).is_some(),
        }
    }

    /// Whether a chain of this reading's rounds starts on `text`: the shell reading
    /// only on a text with a backslash, since without one it decodes what the web
    /// reading does (a later round, on a view the shell reading made, has none left and
    /// still decodes its `%20`: a shell word in a URL, `\%20`).
    pub(crate) fn starts_on(self, text: &[u8]) -> bool {
        match self {
            Reading::Web => self.may_hold_escape(text),
            Reading::Shell => memchr::memchr(b'\\', text).is_some(),
        }
    }
}

/// Whether `text` holds a byte that starts an escape of some reading: `%`, `&`, `\` or
/// `+`. Most text holds none and is never decoded.
pub(crate) fn may_be_encoded(text: &[u8]) -> bool {
    Reading::Web.may_hold_escape(text)
}

/// One escape: where it stands in the text and where what it decodes to stands in the
/// view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Escape {
    enc: usize,
    enc_len: usize,
    dec: usize,
    dec_len: usize,
}

/// A text decoded, with where each of its bytes came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    /// The decoded bytes (not always UTF-8: `%FF` is a byte).
    pub(crate) text: Vec<u8>,
    /// Every escape decoded, in order; the bytes between them are the text's own.
    escapes: Vec<Escape>,
}

impl View {
    /// Where each escape's decoded bytes stand in the view (empty for an escape that
    /// decodes to nothing: a joined line end, the quotes of `$'…'`).
    pub(crate) fn escapes(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        self.escapes.iter().map(|e| e.dec..e.dec + e.dec_len)
    }

    /// Whether the text's last escape ends where the text does.
    pub(crate) fn ends_with_escape(&self, text_len: usize) -> bool {
        self.escapes
            .last()
            .is_some_and(|e| e.enc + e.enc_len == text_len)
    }

    /// The stretch of the text that `view` (a non-empty stretch of the view) was
    /// decoded from: it holds whole escapes.
    pub(crate) fn source(&self, view: Range<usize>) -> Range<usize> {
        debug_assert!(view.start < view.end, "an empty stretch: {view:?}");
        self.byte_source(view.start).start..self.byte_source(view.end - 1).end
    }

    /// Where the text's own byte at `at` stands in the view; `None` when the byte is
    /// part of an escape.
    pub(crate) fn view_at(&self, at: usize) -> Option<usize> {
        let k = self.escapes.partition_point(|e| e.enc + e.enc_len <= at);
        if self.escapes.get(k).is_some_and(|e| e.enc <= at) {
            return None;
        }
        Some(match k.checked_sub(1).map(|k| self.escapes[k]) {
            None => at,
            Some(e) => e.dec + e.dec_len + (at - e.enc - e.enc_len),
        })
    }

    /// Where the view's byte at `at` came from: its escape, or the text's own byte.
    fn byte_source(&self, at: usize) -> Range<usize> {
        let k = self.escapes.partition_point(|e| e.dec <= at);
        match k.checked_sub(1).map(|k| self.escapes[k]) {
            None => at..at + 1,
            Some(e) if at < e.dec + e.dec_len => e.enc..e.enc + e.enc_len,
            Some(e) => {
                let from = e.enc + e.enc_len + (at - e.dec - e.dec_len);
                from..from + 1
            }
        }
    }
}

/// What one escape decodes to: at most one character's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Out {
    bytes: [u8; 4],
    len: u8,
}

impl Out {
    const NOTHING: Out = Out {
        bytes: [0; 4],
        len: 0,
    };

    fn byte(b: u8) -> Out {
        Out {
            bytes: [b, 0, 0, 0],
            len: 1,
        }
    }

    fn char(c: char) -> Out {
        let mut bytes = [0; 4];
        let len = c.encode_utf8(&mut bytes).len() as u8;
        Out { bytes, len }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// `text` as `reading` decodes it once, or `None` when it holds no escape of it.
pub(crate) fn decode(reading: Reading, text: &[u8]) -> Option<View> {
    if !reading.may_hold_escape(text) {
        return None;
    }
    let mut view: Option<View> = None;
    // Where the text's own bytes not yet copied start.
    let mut copied = 0;
    let mut i = 0;
    // Inside a URL's query (or a form's value): `+` is a space.
    let mut query = false;
    // The end of the `$'…'` string being read (its closing quote).
    let mut ansi_end: Option<usize> = None;
    while i < text.len() {
        let b = text[i];
        let found: Option<(usize, Out)> = match ansi_end {
            Some(end) if i == end => {
                ansi_end = None;
                Some((1, Out::NOTHING))
            }
            // An escape bash leaves as it is keeps its backslash.
            Some(_) if b == b'\\' => ansi_c_escape(text, i),
            Some(_) => None,
            None => match b {
                b'%' => percent(text, i),
                b'&' => html(text, i),
                b'+' if reading == Reading::Web && query => Some((1, Out::byte(b' '))),
                b'\\' if reading == Reading::Web => json(text, i),
                b'\\' => shell(text, i),
                b'$' if reading == Reading::Shell && text.get(i + 1) == Some(&b'\'') => {
                    ansi_c_end(text, i + 2).map(|end| {
                        ansi_end = Some(end);
                        (2, Out::NOTHING)
                    })
                }
                _ => None,
            },
        };
        match b {
            b'?' | b'=' => query = true,
            b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'\'' | b'<' | b'>' | b'`' => query = false,
            _ => {}
        }
        let Some((enc_len, out)) = found else {
            i += 1;
            continue;
        };
        // An escape of a byte past the text's end is not one (the finders check).
        debug_assert!(i + enc_len <= text.len());
        let v = view.get_or_insert_with(|| View {
            text: Vec::with_capacity(text.len()),
            escapes: Vec::new(),
        });
        v.text.extend_from_slice(&text[copied..i]);
        v.escapes.push(Escape {
            enc: i,
            enc_len,
            dec: v.text.len(),
            dec_len: usize::from(out.len),
        });
        v.text.extend_from_slice(out.as_bytes());
        i += enc_len;
        copied = i;
    }
    let mut v = view?;
    v.text.extend_from_slice(&text[copied..]);
    Some(v)
}

fn hex(b: u8) -> Option<u32> {
    char::from(b).to_digit(16)
}

/// `%XX` at `i`.
fn percent(text: &[u8], i: usize) -> Option<(usize, Out)> {
    let hi = hex(*text.get(i + 1)?)?;
    let lo = hex(*text.get(i + 2)?)?;
    Some((3, Out::byte((hi * 16 + lo) as u8)))
}

/// Up to `max` digits of `radix` from `at`: their value and how many there were (at
/// least one).
fn digits(text: &[u8], at: usize, radix: u32, max: usize) -> Option<(u32, usize)> {
    let mut value: u32 = 0;
    let mut n = 0;
    while n < max {
        let Some(d) = text
            .get(at + n)
            .and_then(|&b| char::from(b).to_digit(radix))
        else {
            break;
        };
        value = value.checked_mul(radix)?.checked_add(d)?;
        n += 1;
    }
    (n > 0).then_some((value, n))
}

/// A JSON string escape at `i` (a backslash).
fn json(text: &[u8], i: usize) -> Option<(usize, Out)> {
    let out = match *text.get(i + 1)? {
        b'"' => b'"',
        b'\\' => b'\\',
        b'/' => b'/',
        b'b' => 0x08,
        b'f' => 0x0C,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' => {
            let unit = |at: usize| -> Option<u32> {
                let (v, n) = digits(text, at, 16, 4)?;
                (n == 4).then_some(v)
            };
            let first = unit(i + 2)?;
            if (0xD800..0xDC00).contains(&first) {
                // A high surrogate: a character only with the low one after it.
                if text.get(i + 6..i + 8) != Some(b"\\u") {
                    return None;
                }
                let second = unit(i + 8)?;
                if !(0xDC00..0xE000).contains(&second) {
                    return None;
                }
                let c = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return char::from_u32(c).map(|c| (12, Out::char(c)));
            }
            return char::from_u32(first).map(|c| (6, Out::char(c)));
        }
        _ => return None,
    };
    Some((2, Out::byte(out)))
}

/// A shell backslash escape at `i`: the space or punctuation after it, or nothing for
/// a line end (the lines are joined). A letter or a digit after a backslash is left as
/// it is: in shell `\n` is `n`, but text holding it is far more often C, JSON or a
/// regular expression, where it is not (the web reading takes JSON's).
fn shell(text: &[u8], i: usize) -> Option<(usize, Out)> {
    let rest = &text[i + 1..];
    if rest.starts_with(b"\r\n") {
        return Some((3, Out::NOTHING));
    }
    match *rest.first()? {
        b'\n' => Some((2, Out::NOTHING)),
        b @ (b' ' | b'\t') => Some((2, Out::byte(b))),
        b if b.is_ascii_punctuation() => Some((2, Out::byte(b))),
        _ => None,
    }
}

/// Where the `$'…'` string whose text starts at `from` ends: its closing quote (a
/// quote after a backslash is part of it). `None` when it is not closed on its line:
/// such a string is read only within a line, so that a view of a text's lines is the
/// view of each line (a search's answer is redacted a file at a time).
fn ansi_c_end(text: &[u8], from: usize) -> Option<usize> {
    let mut j = from;
    while j < text.len() {
        match text[j] {
            b'\n' => return None,
            b'\\' if text.get(j + 1) == Some(&b'\n') => return None,
            b'\\' => j += 2,
            b'\'' => return Some(j),
            _ => j += 1,
        }
    }
    None
}

/// An escape of a `$'…'` string at `i` (a backslash), as bash reads it; `None` for one
/// bash leaves as it is (the backslash stays).
fn ansi_c_escape(text: &[u8], i: usize) -> Option<(usize, Out)> {
    let simple = |b: u8| Some((2, Out::byte(b)));
    match *text.get(i + 1)? {
        b'n' => simple(b'\n'),
        b't' => simple(b'\t'),
        b'r' => simple(b'\r'),
        b'a' => simple(0x07),
        b'b' => simple(0x08),
        b'e' | b'E' => simple(0x1B),
        b'f' => simple(0x0C),
        b'v' => simple(0x0B),
        b'\\' => simple(b'\\'),
        b'\'' => simple(b'\''),
        b'"' => simple(b'"'),
        b'?' => simple(b'?'),
        b'x' => {
            let (v, n) = digits(text, i + 2, 16, 2)?;
            Some((2 + n, Out::byte(v as u8)))
        }
        b'0'..=b'7' => {
            let (v, n) = digits(text, i + 1, 8, 3)?;
            Some((1 + n, Out::byte((v & 0xFF) as u8)))
        }
        b'u' | b'U' => {
            let max = if text[i + 1] == b'u' { 4 } else { 8 };
            let (v, n) = digits(text, i + 2, 16, max)?;
            char::from_u32(v).map(|c| (2 + n, Out::char(c)))
        }
        b'c' => {
            let &x = text.get(i + 2)?;
            x.is_ascii().then(|| (3, Out::byte(x & 0x1F)))
        }
        _ => None,
    }
}

/// Named character references that spell what a secret or its separators may be made
/// of: ASCII punctuation, and the spaces (read as a plain space).
const NAMED: &[(&str, char)] = &[
    ("amp", '&'),
    ("AMP", '&'),
    ("lt", '<'),
    ("LT", '<'),
    ("gt", '>'),
    ("GT", '>'),
    ("quot", '"'),
    ("QUOT", '"'),
    ("apos", '\''),
    ("nbsp", ' '),
    ("NonBreakingSpace", ' '),
    ("ensp", ' '),
    ("emsp", ' '),
    ("thinsp", ' '),
    ("Tab", '\t'),
    ("NewLine", '\n'),
    ("colon", ':'),
    ("equals", '='),
    ("sol", '/'),
    ("bsol", '\\'),
    ("period", '.'),
    ("lowbar", '_'),
    ("UnderBar", '_'),
    ("hyphen", '-'),
    ("dash", '-'),
    ("plus", '+'),
    ("commat", '@'),
    ("quest", '?'),
    ("num", '#'),
    ("percnt", '%'),
    ("excl", '!'),
    ("dollar", '$'),
    ("lpar", '('),
    ("rpar", ')'),
    ("ast", '*'),
    ("midast", '*'),
    ("comma", ','),
    ("semi", ';'),
    ("lsqb", '['),
    ("lbrack", '['),
    ("rsqb", ']'),
    ("rbrack", ']'),
    ("lcub", '{'),
    ("lbrace", '{'),
    ("rcub", '}'),
    ("rbrace", '}'),
    ("verbar", '|'),
    ("vert", '|'),
    ("Hat", '^'),
    ("grave", '`'),
    ("tilde", '~'),
];

/// An HTML character reference at `i` (an `&`): `&#32;`, `&#x20;` (the `;` may be
/// left out, as browsers allow), or a name of [`NAMED`] and its `;`.
fn html(text: &[u8], i: usize) -> Option<(usize, Out)> {
    if text.get(i + 1) == Some(&b'#') {
        let (radix, at, max) = match text.get(i + 2) {
            Some(b'x' | b'X') => (16, i + 3, 6),
            _ => (10, i + 2, 7),
        };
        let (v, n) = digits(text, at, radix, max)?;
        let end = at + n;
        let len = end - i + usize::from(text.get(end) == Some(&b';'));
        // A character reference of nothing (NUL, or past Unicode) is not read.
        return char::from_u32(v)
            .filter(|&c| c != '\0')
            .map(|c| (len, Out::char(c)));
    }
    let name_len = text[i + 1..]
        .iter()
        .take(33)
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    if text.get(i + 1 + name_len) != Some(&b';') {
        return None;
    }
    let name = &text[i + 1..i + 1 + name_len];
    NAMED
        .iter()
        .find(|(n, _)| n.as_bytes() == name)
        .map(|&(_, c)| (name_len + 2, Out::char(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` read by `reading`: the view's text, and the source of each escape.
    fn check(reading: Reading, text: &str, want: Option<&str>) {
        let got = decode(reading, text.as_bytes());
        assert_eq!(
            got.as_ref()
                .map(|v| String::from_utf8_lossy(&v.text).into_owned()),
            want.map(str::to_string),
            "{reading:?} of {text:?}"
        );
        if let Some(v) = got {
            // Every byte of the view maps into the text, in order, and the whole view
            // maps onto the whole text (no escape decodes to nothing at either end
            // in these cases).
            if !v.text.is_empty() {
                let all = v.source(0..v.text.len());
                assert!(all.end <= text.len(), "{all:?} past {text:?}");
            }
        }
    }

    #[test]
    fn each_escape_of_the_web_reading() {
        use Reading::Web;
        check(Web, "plain text", None);
        check(Web, "a%20b%2Fc%zz%4", Some("a b/c%zz%4"));
        check(
            Web,
            "https://h/?q=a+b+c&x=1+2",
            Some("https://h/?q=a b c&x=1 2"),
        );
        // Not in a query, `+` is itself.
        check(Web, "1 + 2 a+b", None);
        check(Web, r#"\u0020\"\\\/\n\t\q\u12"#, Some(" \"\\/\n\t\\q\\u12"));
        check(Web, r"\ud83d\ude00 \ud83d", Some("\u{1F600} \\ud83d"));
        check(
            Web,
            "&#32;&#x20;&#X3a&amp;&nbsp;&colon;&bogus;&#0;&",
            Some("  :& :&bogus;&#0;&"),
        );
    }

    #[test]
    fn each_escape_of_the_shell_reading() {
        use Reading::Shell;
        // Without a backslash it reads as the web reading does, but a chain of its
        // rounds does not start there (the web reading's does).
        check(Shell, "no backslash %20", Some("no backslash  "));
        assert!(!Shell.starts_on(b"no backslash %20"));
        assert!(Shell.starts_on(br"a\:b"));
        check(Shell, "nothing at all", None);
        check(Shell, r"a\ b\:c\\d\é\n\1", Some("a b:c\\d\\é\\n\\1"));
        check(Shell, "joined\\\nline", Some("joinedline"));
        // A `$'…'` string is read within its line.
        check(Shell, "$'\\x41\n'", None);
        check(
            Shell,
            r"$'\x20\040\u0020\n\q\'' $'open",
            Some(" \u{20} \n\\q' $'open"),
        );
        check(Shell, r"x\ %41&#66;", Some("x AB"));
    }

    /// A stretch of the view maps back to whole escapes of the text: inside one, to the
    /// escape; after one, to the text's own bytes further on.
    #[test]
    fn a_stretch_of_the_view_maps_to_whole_escapes() {
        let text = "ab%20cd&amp;e\\u0041f";
        let v = decode(Reading::Web, text.as_bytes()).expect("decodes");
        assert_eq!(v.text, b"ab cd&eAf");
        let src = |r: Range<usize>| &text[v.source(r)];
        assert_eq!(src(0..2), "ab");
        assert_eq!(src(2..3), "%20");
        assert_eq!(src(1..4), "b%20c");
        assert_eq!(src(5..6), "&amp;");
        assert_eq!(src(6..9), "e\\u0041f");
        assert_eq!(src(0..9), text);
        // And back: the text's own bytes to where they stand in the view, none inside
        // an escape.
        let at: Vec<Option<usize>> = (0..text.len()).map(|i| v.view_at(i)).collect();
        assert_eq!(&at[..4], [Some(0), Some(1), None, None]);
        assert_eq!(&at[5..8], [Some(3), Some(4), None]);
        assert_eq!(
            at[12..],
            [Some(6), None, None, None, None, None, None, Some(8)]
        );
        // An escape that decodes to nothing: the bytes after it map past it.
        let text = "$'\\x41'B";
        let v = decode(Reading::Shell, text.as_bytes()).expect("decodes");
        assert_eq!(v.text, b"AB");
        assert_eq!(&text[v.source(0..1)], "\\x41");
        assert_eq!(&text[v.source(1..2)], "B");
        assert_eq!(
            v.escapes().collect::<Vec<_>>(),
            vec![0..0, 0..1, 1..1],
            "the quotes decode to nothing"
        );
    }
}
