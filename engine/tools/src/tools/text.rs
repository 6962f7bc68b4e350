//! Loading a file to show it to the model: confinement, size limit, binary refusal,
//! lossy UTF-8 with a note, and numbered line output.

use std::fmt::Write as _;
use std::io::Read;

use cairn_store::Hash;

use crate::open::{Kind, OpenError};
use crate::paths::WsPath;
use crate::tool::{Ctx, ToolOutput};

/// A text file as read.
pub struct TextFile {
    pub ws: WsPath,
    pub text: String,
    /// True when invalid UTF-8 was replaced.
    pub lossy: bool,
    pub hash: Hash,
    pub total_lines: u32,
}

/// Bytes looked at to tell binary from text.
pub const SNIFF_BYTES: usize = 8192;

/// True when the bytes look binary (a NUL in the first [`SNIFF_BYTES`]).
pub fn is_binary(bytes: &[u8]) -> bool {
    // The vectorized search: every read sniffs up to 8 KiB.
    memchr::memchr(0, &bytes[..bytes.len().min(SNIFF_BYTES)]).is_some()
}

/// Lines of `text`: split on `\n`, a final newline does not start another line.
pub fn lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n').collect()
}

/// How many [`lines`] `text` has, counted without collecting them (every read counts
/// the lines of its whole file).
pub fn line_count(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    memchr::memchr_iter(b'\n', body.as_bytes()).count() + 1
}

/// Loads `path` for reading, or the answer that explains why not.
pub fn load(ctx: &Ctx<'_>, path: &str, how_to_narrow: &str) -> Result<TextFile, ToolOutput> {
    let ws = ctx.resolve(path)?;
    let shown = if ws.rel.is_empty() { "." } else { &ws.rel };
    let (file, meta) = match ctx.fs.open_read(&ws) {
        Ok(opened) => opened,
        Err(OpenError::Outside(why)) => return Err(Ctx::refuse_outside(path, why)),
        Err(OpenError::NotRegular(Kind::Directory)) => {
            return Err(ToolOutput::error(format!(
                "{shown} is a directory, not a file; list it instead"
            )));
        }
        Err(OpenError::NotRegular(kind)) => return Err(ToolOutput::error(kind.refusal(shown))),
        Err(OpenError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ctx.not_found("file", &ws.rel, ""));
        }
        Err(OpenError::Io(e)) => {
            return Err(ToolOutput::error(format!("cannot read {}: {e}", ws.rel)));
        }
    };
    let bytes_max = ctx.limits.read_file_bytes_max;
    let too_big = |len: u64| {
        ToolOutput::error(format!(
            "{} is {len} bytes, over read_file_bytes_max ({bytes_max} bytes); {how_to_narrow}",
            ws.rel,
        ))
    };
    if meta.len() > bytes_max {
        return Err(too_big(meta.len()));
    }
    // At most one byte past the limit is read, even from a file that grows meanwhile.
    let bytes = read_at_most(file, meta.len(), bytes_max.saturating_add(1))
        .map_err(|e| ToolOutput::error(format!("cannot read {}: {e}", ws.rel)))?;
    if bytes.len() as u64 > bytes_max {
        return Err(too_big(bytes.len() as u64));
    }
    if is_binary(&bytes) {
        return Err(ToolOutput::error(format!(
            "{} is a binary file ({} bytes); the read tools show text only",
            ws.rel,
            bytes.len()
        )));
    }
    // Reads come back to the same files: their hash is remembered by their bytes.
    let hash = Hash::of_recent(&bytes);
    let (text, lossy) = match String::from_utf8(bytes) {
        Ok(t) => (t, false),
        Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), true),
    };
    let total_lines = u32::try_from(line_count(&text)).unwrap_or(u32::MAX);
    Ok(TextFile {
        ws,
        text,
        lossy,
        hash,
        total_lines,
    })
}

/// `reader` read to its end, or to `limit` bytes if it holds more. `expected` is the
/// length its metadata gave: a file of that length is read by one `read` of it and
/// one that sees the end, where growing a buffer from a guess takes more.
pub fn read_at_most(mut reader: impl Read, expected: u64, limit: u64) -> std::io::Result<Vec<u8>> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let first = usize::try_from(expected)
        .unwrap_or(usize::MAX)
        .saturating_add(1)
        .min(limit);
    let mut buf = vec![0u8; first];
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            if filled >= limit {
                break;
            }
            // More than the metadata said (the file grew): grow as `read_to_end` does.
            let more = buf.len().max(READ_GROWTH_BYTES_MIN).min(limit - filled);
            buf.resize(filled + more, 0);
        }
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

/// The least a [`read_at_most`] buffer grows by once the file proved longer than its
/// metadata said.
const READ_GROWTH_BYTES_MIN: usize = 8192;

/// The note a read ends with when it showed fewer lines than asked, to fit the caps.
pub const FITTED_NOTE: &str =
    "\n(cut to fit the output caps, output_bytes_max and output_lines_max)";

/// A read's answer: lines `first..=last` (1-based) numbered, each cut to `chars_max`,
/// then the footer ([`footer`], how to read on by `read_on`, and `also` when every line
/// asked for is shown). When the whole answer would pass the output caps (`limits`), it
/// shows as many lines as fit with the footer and [`FITTED_NOTE`], so the model always
/// learns where to read on, and a line the caps would have hidden is never recorded as
/// read. When not even one line fits with its footer, the whole answer is given (the
/// engine's caps then cut it, and keep it whole). Returns the answer and the lines
/// shown (`None` when none were).
pub fn answer(
    file: &TextFile,
    first: u32,
    last: u32,
    chars_max: usize,
    limits: &crate::limits::Limits,
    read_on: impl Fn(u32) -> String,
    also: Option<String>,
) -> (String, Option<(u32, u32)>) {
    let numbered = numbered(file, first, last, chars_max);
    let shown_first = first;
    let text = |k: usize, fitted: bool| -> (String, Option<(u32, u32)>) {
        let shown = (k > 0).then(|| (shown_first, shown_first + k as u32 - 1));
        let lines = match file.total_lines {
            0 => "(empty file)\n",
            _ => numbered.first(k),
        };
        let mut out = String::with_capacity(lines.len() + FOOTER_BYTES + FITTED_NOTE.len());
        out.push_str(lines);
        push_footer(&mut out, file, shown, &read_on);
        match (&also, fitted) {
            (_, true) => out.push_str(FITTED_NOTE),
            (Some(a), false) => out.push_str(a),
            (None, false) => {}
        }
        (out, shown)
    };
    let fits = |t: &str| {
        !cairn_core::decide::cap_output(t, limits.output_bytes_max, limits.output_lines_max).1
    };
    let whole = text(numbered.len(), false);
    if numbered.len() <= 1 || fits(&whole.0) {
        return whole;
    }
    // The most lines that fit with their footer: the answer grows with them.
    let (mut lo, mut hi) = (1, numbered.len() - 1);
    if !fits(&text(lo, true).0) {
        return whole;
    }
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(&text(mid, true).0) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    text(lo, true)
}

/// Lines `first..=last` (1-based, `last` cut to the file's end) numbered, each cut to
/// `chars_max` characters with a note of how many more it has: the lines in one text,
/// and where each one ends in it (the first `k` lines are `text[..ends[k - 1]]`).
fn numbered(file: &TextFile, first: u32, last: u32, chars_max: usize) -> Numbered {
    let mut out = Numbered::default();
    let last = last.min(file.total_lines);
    if file.total_lines == 0 || first == 0 || first > last {
        return out;
    }
    // Only the lines up to the last one shown are split off: a read of ten lines does
    // not cut the whole file into lines.
    let body = file.text.strip_suffix('\n').unwrap_or(&file.text);
    let from = line_start(body.as_bytes(), first as usize);
    let count = (last - first + 1) as usize;
    // Sized once: the lines' bytes and a number and a tab each (a cut line is shorter,
    // its note only a few bytes more).
    let to = from + line_start(&body.as_bytes()[from..], count + 1);
    out.text.reserve(to - from + count * 8);
    out.ends.reserve(count);
    let shown = body[from..].split('\n').take(count);
    for (n, line) in (first..=last).zip(shown) {
        let line = line.trim_end_matches('\r');
        push_number(&mut out.text, n);
        out.text.push('\t');
        // Counted only when it may be over: a line of at most `chars_max` bytes is not.
        let count = match line.len() > chars_max {
            true => line.chars().count(),
            false => 0,
        };
        if count > chars_max {
            out.text.extend(line.chars().take(chars_max));
            let _ = write!(out.text, "…({} more characters)", count - chars_max);
        } else {
            out.text.push_str(line);
        }
        out.text.push('\n');
        out.ends.push(out.text.len());
    }
    out
}

/// Bytes of `body` whose newlines [`line_start`] counts at once before it looks for
/// one of them.
const LINE_COUNT_CHUNK_BYTES: usize = 256;

/// Where line `n` (from 1) of `body` starts: just past its `n - 1`th newline, or at
/// the end of `body` when it has fewer. Newlines are counted a chunk at a time (a
/// vectorized count) and only the chunk holding the one sought is searched newline by
/// newline: a read far into a file passes over its earlier lines at the cost of a
/// count, not of a search per line.
fn line_start(body: &[u8], n: usize) -> usize {
    let Some(mut skip) = n.checked_sub(2) else {
        return 0;
    };
    let mut base = 0;
    for chunk in body.chunks(LINE_COUNT_CHUNK_BYTES) {
        let newlines = memchr::memchr_iter(b'\n', chunk).count();
        if skip < newlines {
            return memchr::memchr_iter(b'\n', chunk)
                .nth(skip)
                .map_or(body.len(), |at| base + at + 1);
        }
        skip -= newlines;
        base += chunk.len();
    }
    body.len()
}

/// Numbered lines (see [`numbered`]).
#[derive(Debug, Default, PartialEq, Eq)]
struct Numbered {
    text: String,
    ends: Vec<usize>,
}

impl Numbered {
    fn len(&self) -> usize {
        self.ends.len()
    }

    /// The first `k` lines.
    fn first(&self, k: usize) -> &str {
        match k {
            0 => "",
            k => &self.text[..self.ends[k - 1]],
        }
    }
}

/// `n` right-aligned in six columns, as `format!("{n:>6}")` writes it, without the
/// formatting machinery (ten of them a read).
fn push_number(out: &mut String, n: u32) {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n);
    for _ in digits.len()..6 {
        out.push(' ');
    }
    out.push_str(digits);
}

/// Bytes set aside for a footer (see [`push_footer`]): most fit.
const FOOTER_BYTES: usize = 192;

/// The footer of a read, pushed onto `out`: what was shown, how to read on, the
/// content hash.
fn push_footer(
    out: &mut String,
    file: &TextFile,
    shown: Option<(u32, u32)>,
    read_on: &impl Fn(u32) -> String,
) {
    if file.lossy {
        out.push_str("(the file is not valid UTF-8: invalid bytes are shown as \u{FFFD})\n");
    }
    let total = file.total_lines;
    // Writing to a `String` does not fail.
    let _ = match shown {
        Some((a, b)) if b < total => {
            writeln!(out, "(lines {a}-{b} of {total}; {})", read_on(b + 1))
        }
        Some((a, b)) => writeln!(out, "(lines {a}-{b} of {total}, end of file)"),
        None => writeln!(out, "({total} lines)"),
    };
    let _ = write!(out, "hash: {}", file.hash);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_count_counts_what_lines_splits() {
        for text in [
            "",
            "\n",
            "\n\n",
            "a",
            "a\n",
            "a\nb",
            "a\n\nb\n",
            "a\r\nb\r\n",
            "é\nü",
        ] {
            assert_eq!(line_count(text), lines(text).len(), "{text:?}");
        }
    }

    /// A reader of `bytes` that hands out at most `chunk` bytes a call, and says
    /// "interrupted" before every other call, as a slow or signalled read may.
    struct Trickle<'a> {
        bytes: &'a [u8],
        chunk: usize,
        calls: usize,
        reads: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.calls.is_multiple_of(2) {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            self.reads += 1;
            let n = buf.len().min(self.chunk).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    #[test]
    fn read_at_most_reads_to_the_end_or_the_limit_whatever_the_metadata_said() {
        let data: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        for len in [0, 1, 7, 8191, 8192, 8193, 20_000, 40_000] {
            let bytes = &data[..len];
            // The metadata's length right, short (the file grew) and long (it shrank).
            for expected in [len as u64, 0, len as u64 / 2, len as u64 + 100, u64::MAX] {
                for limit in [0, 1, len, len + 1, len.saturating_sub(1), 100_000] {
                    for chunk in [1, 3, 4096, usize::MAX] {
                        let mut r = Trickle {
                            bytes,
                            chunk,
                            calls: 0,
                            reads: 0,
                        };
                        let got = read_at_most(&mut r, expected, limit as u64).unwrap();
                        let want = &bytes[..len.min(limit)];
                        assert_eq!(
                            got, want,
                            "len {len} expected {expected} limit {limit} chunk {chunk}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn read_at_most_reads_a_file_of_its_stated_length_in_two_reads() {
        let data = vec![b'x'; 9_470];
        let mut r = Trickle {
            bytes: &data,
            chunk: usize::MAX,
            calls: 0,
            reads: 0,
        };
        let got = read_at_most(&mut r, 9_470, 1 << 20).unwrap();
        assert_eq!(got.len(), 9_470);
        // One read of the whole file, one that sees its end.
        assert_eq!(r.reads, 2);
    }

    #[test]
    fn read_at_most_passes_on_an_error() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk on fire"))
            }
        }
        let e = read_at_most(Broken, 10, 100).unwrap_err();
        assert_eq!(e.to_string(), "disk on fire");
    }

    fn file(text: &str) -> TextFile {
        TextFile {
            ws: WsPath {
                abs: "/ws/f".into(),
                rel: "f".into(),
            },
            text: text.into(),
            lossy: false,
            hash: Hash::of(text.as_bytes()),
            total_lines: u32::try_from(line_count(text)).unwrap_or(u32::MAX),
        }
    }

    #[test]
    fn line_start_is_past_the_newline_before_the_line_whatever_the_chunks() {
        // Lines of lengths that put newlines on, before and after chunk edges.
        let mut seed = 7u64;
        for round in 0..40 {
            let mut body = String::new();
            for i in 0..(round * 7 % 90) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let len = match i % 5 {
                    0 => 0,
                    1 => LINE_COUNT_CHUNK_BYTES - 1,
                    2 => LINE_COUNT_CHUNK_BYTES,
                    _ => (seed >> 33) as usize % 300,
                };
                body.push_str(&"x".repeat(len));
                body.push('\n');
            }
            body.push_str("tail");
            let starts: Vec<usize> = std::iter::once(0)
                .chain(memchr::memchr_iter(b'\n', body.as_bytes()).map(|at| at + 1))
                .collect();
            for n in 0..starts.len() + 3 {
                let want = match n {
                    0 | 1 => 0,
                    n => starts.get(n - 1).copied().unwrap_or(body.len()),
                };
                assert_eq!(
                    line_start(body.as_bytes(), n),
                    want,
                    "round {round}, line {n}"
                );
            }
        }
    }

    #[test]
    fn numbered_shows_the_lines_asked_for_up_to_the_last_one() {
        let text = "one\ntwo\r\n\nfour\nfive\n";
        let f = file(text);
        let all = lines(text);
        for first in 1..=6 {
            for last in first..=7 {
                let want: Vec<String> = (first..=last.min(5))
                    .map(|n| format!("{n:>6}\t{}\n", all[n as usize - 1].trim_end_matches('\r')))
                    .collect();
                assert_eq!(
                    lines_of(&numbered(&f, first, last, 100)),
                    want,
                    "{first}..={last}"
                );
            }
        }
        assert_eq!(numbered(&file(""), 1, 3, 100), Numbered::default());
        assert_eq!(
            lines_of(&numbered(&file("no newline"), 1, 1, 100)),
            ["     1\tno newline\n"]
        );
    }

    /// Each line of `n`, taken by its ends.
    fn lines_of(n: &Numbered) -> Vec<String> {
        (1..=n.len())
            .map(|k| n.first(k)[n.first(k - 1).len()..].to_string())
            .collect()
    }

    /// Numbers of every width, and lines at, under and past `chars_max` in characters
    /// that take one to four bytes: as `format!` and a count of characters give them.
    #[test]
    fn numbered_lines_are_formatted_as_before() {
        for n in [
            0,
            1,
            9,
            10,
            99_999,
            100_000,
            999_999,
            1_000_000,
            12_345_678,
            u32::MAX,
        ] {
            let mut got = String::new();
            push_number(&mut got, n);
            assert_eq!(got, format!("{n:>6}"));
        }
        let lines = [
            "",
            "abc",
            "abcd",
            "abcde",
            "éü",
            "éüa",
            "éüab",
            "€€€€€",
            "𝄞",
            "a\r",
        ];
        let text = lines.join("\n");
        let f = file(&text);
        for chars_max in 0..6 {
            let want: Vec<String> = lines
                .iter()
                .enumerate()
                .map(|(i, line)| {
                    let line = line.trim_end_matches('\r');
                    let count = line.chars().count();
                    let shown: String = if count > chars_max {
                        let mut s: String = line.chars().take(chars_max).collect();
                        s.push_str(&format!("…({} more characters)", count - chars_max));
                        s
                    } else {
                        line.to_string()
                    };
                    format!("{:>6}\t{shown}\n", i + 1)
                })
                .collect();
            let got = numbered(&f, 1, lines.len() as u32, chars_max);
            assert_eq!(lines_of(&got), want, "chars_max {chars_max}");
            assert_eq!(got.text, want.concat());
        }
    }
}
