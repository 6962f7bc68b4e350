//! What every write tool shares: the file as it is before a write (the fact the
//! read-before-write rules of [`cairn_core::decide::write`] decide on), exact and
//! near-miss matching of `old_string`, and the atomic install that is recorded before
//! and after it happens (a `file_write` with status `intent`, then `ok` or `failed`).

use std::io::Read;
use std::os::unix::fs::PermissionsExt;

use cairn_store::{BlobRef, Hash};

use crate::diff;
use crate::error::Result;
use crate::event::{Event, FileWrite, WriteOp, WriteStatus};
use crate::open::{Kind, OpenError};
use crate::paths::WsPath;
use crate::tool::{Ctx, ToolOutput};
use crate::tools::text;

/// A file as it is before a write.
pub struct Current {
    pub bytes: Vec<u8>,
    pub hash: Hash,
    pub mode: u32,
}

/// The file at `ws` as it is now (`None` when it does not exist), or the answer
/// explaining why it cannot be written. Opened beneath the workspace root.
pub fn current(ctx: &Ctx<'_>, ws: &WsPath) -> Result<Option<Current>, ToolOutput> {
    let shown = if ws.rel.is_empty() { "." } else { &ws.rel };
    let (mut file, meta) = match ctx.fs.open_read(ws) {
        Ok(opened) => opened,
        Err(OpenError::Outside(why)) => return Err(Ctx::refuse_outside(&ws.rel, why)),
        Err(OpenError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(OpenError::Io(e)) => {
            return Err(ToolOutput::error(format!("cannot read {}: {e}", ws.rel)));
        }
        Err(OpenError::NotRegular(Kind::Directory)) => {
            return Err(ToolOutput::error(format!(
                "{shown} is a directory, not a file"
            )));
        }
        Err(OpenError::NotRegular(kind)) => return Err(ToolOutput::error(kind.refusal(shown))),
    };
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|e| ToolOutput::error(format!("cannot read {}: {e}", ws.rel)))?;
    Ok(Some(Current {
        hash: Hash::of_recent(&bytes),
        bytes,
        mode: meta.permissions().mode() & 0o7777,
    }))
}

/// Normalises a string for the near-miss match: trailing white space dropped, smart
/// quotes, Unicode dashes and non-breaking spaces made plain.
fn loose(s: &str) -> String {
    s.trim_end()
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{00A0}' | '\u{2007}' | '\u{202F}' => ' ',
            c => c,
        })
        .collect()
}

/// Where `old` matches `content`: byte ranges.
pub enum Found {
    /// Exact occurrences.
    Exact(Vec<std::ops::Range<usize>>),
    /// One whole-line near match (byte range of whole lines).
    Loose(std::ops::Range<usize>),
    /// Nothing; the closest line, if any, for a hint.
    None(Option<(u32, String)>),
}

/// Finds `old` in `content`, exactly, else as whole lines loosely.
pub fn find(content: &str, old: &str) -> Found {
    let exact: Vec<_> = content
        .match_indices(old)
        .map(|(i, m)| i..i + m.len())
        .collect();
    if !exact.is_empty() {
        return Found::Exact(exact);
    }
    let old_lines: Vec<String> = old.trim_end_matches('\n').split('\n').map(loose).collect();
    let mut starts = Vec::new();
    // A BOM is no part of the first line: it stays in place.
    let mut pos = if content.starts_with('\u{feff}') {
        '\u{feff}'.len_utf8()
    } else {
        0
    };
    let file_lines: Vec<&str> = content[pos..].split_inclusive('\n').collect();
    for l in &file_lines {
        starts.push(pos);
        pos += l.len();
    }
    starts.push(pos);
    let loose_file: Vec<String> = file_lines.iter().map(|l| loose(l)).collect();
    let mut hits = Vec::new();
    if !old_lines.is_empty() && old_lines.len() <= loose_file.len() {
        for i in 0..=loose_file.len() - old_lines.len() {
            if loose_file[i..i + old_lines.len()] == old_lines[..] {
                hits.push(i);
            }
        }
    }
    if let [i] = hits[..] {
        let end = starts[i + old_lines.len()];
        // Keep the last line's own newline outside the replaced range.
        let end = if content[..end].ends_with("\r\n") {
            end - 2
        } else if content[..end].ends_with('\n') {
            end - 1
        } else {
            end
        };
        return Found::Loose(starts[i]..end);
    }
    let first = old_lines.first().cloned().unwrap_or_default();
    let best = loose_file
        .iter()
        .enumerate()
        .map(|(i, l)| {
            (
                similar::TextDiff::from_chars(l.as_str(), first.as_str()).ratio(),
                i,
            )
        })
        .filter(|(r, _)| *r >= 0.6)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    Found::None(best.map(|(_, i)| (i as u32 + 1, file_lines[i].trim_end().to_string())))
}

/// 1-based line number of byte offset `at`.
pub fn line_of(content: &str, at: usize) -> usize {
    content[..at].matches('\n').count() + 1
}

/// Converts `\n` in `s` to the file's line ending when the file uses CRLF (and `s`
/// has no CRLF of its own: then it says which line endings it wants).
pub fn follow_line_endings(content: &str, s: &str) -> String {
    if content.contains("\r\n") && !s.contains("\r\n") {
        s.replace('\n', "\r\n")
    } else {
        s.to_string()
    }
}

/// The UTF-8 byte order mark.
const BOM: &str = "\u{feff}";

/// What a whole-file write (`write_file`, a `write_patch` replace) leaves in a file that
/// holds `before` (`None`: a new file, written as given): `content` in the file's own
/// style, as the edits keep it. A file with CRLF line endings keeps them unless
/// `content` has a CRLF of its own; a file that starts with a byte order mark keeps it.
/// So an overwrite changes, and its diff shows, only the lines it means to change.
/// `append` adds `content` at the end instead, after a line break in the file's style
/// when the file does not end with one (a section never lands mid-line).
pub fn whole(before: Option<&[u8]>, content: &str, append: bool) -> Vec<u8> {
    let Some(before) = before else {
        return content.as_bytes().to_vec();
    };
    let crlf = before.windows(2).any(|w| w == b"\r\n");
    let styled = if crlf && !content.contains("\r\n") {
        content.replace('\n', "\r\n")
    } else {
        content.to_string()
    };
    if append {
        let mut out = before.to_vec();
        if !out.is_empty() && !out.ends_with(b"\n") && !styled.is_empty() {
            out.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
        }
        out.extend_from_slice(styled.as_bytes());
        return out;
    }
    let mut out = Vec::with_capacity(styled.len() + BOM.len());
    if before.starts_with(BOM.as_bytes()) && !styled.starts_with(BOM) {
        out.extend_from_slice(BOM.as_bytes());
    }
    out.extend_from_slice(styled.as_bytes());
    out
}

/// What the editing tool offers besides one exact replacement, for the hints its
/// refusals give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offers {
    /// thoth's `edit_file`: `replace_all`, and `write_file` with `append` to add to the
    /// end of a file.
    ReplaceAll,
    /// thndrs' `replace_range`: one unique occurrence (several edits go to
    /// `write_patch`).
    Unique,
}

/// Records and installs new content for a file; returns the answer with its diff.
/// `before` is `None` for a create (which never overwrites).
pub fn install(
    ctx: &mut Ctx<'_>,
    ws: &WsPath,
    op: WriteOp,
    before: Option<&Current>,
    after: &[u8],
    summary: &str,
) -> Result<ToolOutput> {
    if after.len() > ctx.limits.write_bytes_max {
        return Ok(ToolOutput::error(format!(
            "the new content of {} is {} bytes, over write_bytes_max ({} bytes)",
            ws.rel,
            after.len(),
            ctx.limits.write_bytes_max
        )));
    }
    // The folder is opened beneath the root before anything is recorded: the path
    // recorded is the one written (inside symlinks resolved), or nothing is.
    let parent = match ctx.fs.parent(ws, before.is_none()) {
        Ok(p) => p,
        Err(OpenError::Outside(why)) => return Ok(Ctx::refuse_outside(&ws.rel, why)),
        Err(OpenError::Io(e)) => {
            return Ok(ToolOutput::error(format!(
                "could not write {}: {e}",
                ws.rel
            )));
        }
        Err(OpenError::NotRegular(kind)) => {
            return Ok(ToolOutput::error(format!(
                "could not write {}: its folder is {}",
                ws.rel,
                kind.describe()
            )));
        }
    };
    // A credential file's content never reaches the blob store: its write records
    // hashes and lengths only.
    let withheld = ctx.credential_files.matches(parent.real());
    let before_blob = match before {
        Some(c) if withheld => Some(BlobRef {
            hash: c.hash,
            len: c.bytes.len() as u64,
        }),
        Some(c) => Some(ctx.put_blob(&c.bytes)?),
        None => None,
    };
    let after_blob = if withheld {
        BlobRef {
            hash: Hash::of(after),
            len: after.len() as u64,
        }
    } else {
        ctx.put_blob(after)?
    };
    let lines_after =
        u32::try_from(text::lines(&String::from_utf8_lossy(after)).len()).unwrap_or(u32::MAX);
    let mode = before.map(|c| c.mode);
    let write = |status| FileWrite {
        call: Some(ctx.call.clone()),
        op,
        path: parent.real().to_string(),
        before: before_blob,
        after: Some(after_blob),
        lines_after,
        mode,
        status,
        withheld,
        unknown: false,
        diff: None,
    };
    let intent = write(WriteStatus::Intent);
    let mut done = write(WriteStatus::Ok);
    ctx.record(Event::FileWrite(intent))?;
    // The intent is on the disk before the file changes: after a crash, resume tells a
    // write cairn made from one made behind its back by it (docs/FORMAT.md, Durability).
    ctx.rec.sync()?;
    let installed = match before {
        None => parent.create_new(after),
        Some(c) => parent.replace(after, c.mode),
    };
    if let Err(e) = installed {
        parent.undo();
        done.status = WriteStatus::Failed;
        ctx.record(Event::FileWrite(done))?;
        return Ok(ToolOutput::error(format!(
            "could not write {}: {e}",
            ws.rel
        )));
    }
    ctx.record(Event::FileWrite(done))?;
    let old = before
        .map(|c| String::from_utf8_lossy(&c.bytes).into_owned())
        .unwrap_or_default();
    let new = String::from_utf8_lossy(after);
    let d = diff::unified(
        &ws.rel,
        before.is_some().then_some(old.as_str()),
        &new,
        ctx.limits.diff_lines_max,
    );
    Ok(ToolOutput::ok(format!(
        "{summary}\nhash: {}\n{d}",
        after_blob.hash
    )))
}

/// Replaces the single occurrence of `old` by `new` in `content`, or explains why not.
/// `all` replaces every occurrence instead. `offers` is what the calling tool offers
/// besides, which the refusals point to.
pub fn edit_string(
    rel: &str,
    content: &str,
    old: &str,
    new: &str,
    all: bool,
    offers: Offers,
) -> Result<String, ToolOutput> {
    if old.is_empty() {
        return Err(ToolOutput::error(match offers {
            Offers::ReplaceAll => {
                "old_string is empty, so it would match everywhere: to add to the end of a file, call write_file with append true; to change something in the middle, give the exact lines it replaces"
            }
            Offers::Unique => "old_string must not be empty: give the exact text to replace",
        }));
    }
    let old = follow_line_endings(content, old);
    let new = follow_line_endings(content, new);
    if old == new {
        return Err(ToolOutput::error(
            "no changes made: old_string and new_string are the same",
        ));
    }
    match find(content, &old) {
        Found::Exact(hits) if hits.len() == 1 || all => {
            let mut out = String::with_capacity(content.len() + new.len());
            let mut last = 0;
            for h in &hits {
                out.push_str(&content[last..h.start]);
                out.push_str(&new);
                last = h.end;
            }
            out.push_str(&content[last..]);
            Ok(out)
        }
        Found::Exact(hits) => Err(ToolOutput::error(ambiguous(rel, content, &hits, offers))),
        Found::Loose(range) => {
            let mut out = String::with_capacity(content.len() + new.len());
            out.push_str(&content[..range.start]);
            out.push_str(new.trim_end_matches(['\n', '\r']));
            out.push_str(&content[range.end..]);
            Ok(out)
        }
        Found::None(hint) => {
            let hint = hint.map_or(String::new(), |(n, l)| {
                format!("; did you mean line {n}: `{l}`?")
            });
            Err(ToolOutput::error(format!(
                "old_string was not found in {rel}{hint}"
            )))
        }
    }
}

/// Lines listed where an ambiguous `old_string` matches.
const AMBIGUOUS_LINES_SHOWN: usize = 5;

/// Why an `old_string` found at `hits` of `content` is refused: how many places match,
/// on which lines (the first [`AMBIGUOUS_LINES_SHOWN`], each once), and what to do
/// about it.
pub fn ambiguous(
    rel: &str,
    content: &str,
    hits: &[std::ops::Range<usize>],
    offers: Offers,
) -> String {
    let mut all: Vec<usize> = hits.iter().map(|h| line_of(content, h.start)).collect();
    all.dedup();
    let lines: Vec<String> = all
        .iter()
        .take(AMBIGUOUS_LINES_SHOWN)
        .map(usize::to_string)
        .collect();
    let more = if all.len() > AMBIGUOUS_LINES_SHOWN {
        format!(" and {} more", all.len() - AMBIGUOUS_LINES_SHOWN)
    } else {
        String::new()
    };
    let which = if all.len() == 1 { "line" } else { "lines" };
    let what = match offers {
        Offers::ReplaceAll => {
            "add the lines around the one you mean until no other place matches, or set replace_all to change every occurrence"
        }
        Offers::Unique => "include more surrounding text to make it unique",
    };
    format!(
        "old_string occurs {} times in {rel} ({which} {}{more}); {what}",
        hits.len(),
        lines.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(content: &str, old: &str, new: &str, expected: Result<&str, &str>) {
        let got = edit_string("f", content, old, new, false, Offers::Unique).map_err(|o| o.text);
        assert_eq!(got.as_deref(), expected.map_err(str::to_string).as_deref());
    }

    #[test]
    fn edits_exact_loose_crlf_and_misses() {
        check("a\nb\nc\n", "b", "B", Ok("a\nB\nc\n"));
        check("a\r\nb\r\nc\r\n", "a\nb", "x\ny", Ok("x\r\ny\r\nc\r\n"));
        check("\u{feff}a\nb\n", "a", "z", Ok("\u{feff}z\nb\n"));
        check(
            "say \u{201C}hi\u{201D}  \nnext\n",
            "say \"hi\"",
            "say \"yo\"",
            Ok("say \"yo\"\nnext\n"),
        );
        check(
            "x\nx\n",
            "x",
            "y",
            Err(
                "old_string occurs 2 times in f (lines 1, 2); include more surrounding text to make it unique",
            ),
        );
        check(
            "fn main() {}\n",
            "fn mian() {}",
            "",
            Err("old_string was not found in f; did you mean line 1: `fn main() {}`?"),
        );
        check(
            "abc",
            "",
            "x",
            Err("old_string must not be empty: give the exact text to replace"),
        );
        check(
            "abc",
            "b",
            "b",
            Err("no changes made: old_string and new_string are the same"),
        );
    }

    #[test]
    fn refusals_point_to_what_the_tool_offers() {
        let thoth = |content: &str, old: &str| {
            edit_string("f", content, old, "y", false, Offers::ReplaceAll).map_err(|o| o.text)
        };
        assert_eq!(
            thoth("x\na\nx\nx\nx\nx\nx\n", "x"),
            Err("old_string occurs 6 times in f (lines 1, 3, 4, 5, 6 and 1 more); add the lines around the one you mean until no other place matches, or set replace_all to change every occurrence".into())
        );
        // At the number of lines listed, and past it.
        assert_eq!(
            edit_string("f", "x\nx\nx\nx\nx\n", "x", "y", false, Offers::Unique).map_err(|o| o.text),
            Err("old_string occurs 5 times in f (lines 1, 2, 3, 4, 5); include more surrounding text to make it unique".into())
        );
        // Each line once.
        assert_eq!(
            edit_string("f", "x x x\n", "x", "y", false, Offers::Unique).map_err(|o| o.text),
            Err("old_string occurs 3 times in f (line 1); include more surrounding text to make it unique".into())
        );
        assert_eq!(
            thoth("abc", ""),
            Err("old_string is empty, so it would match everywhere: to add to the end of a file, call write_file with append true; to change something in the middle, give the exact lines it replaces".into())
        );
    }

    #[test]
    fn a_whole_write_keeps_the_file_style_unless_the_content_says_otherwise() {
        let w = |before: Option<&str>, content: &str, append: bool| {
            String::from_utf8(whole(before.map(str::as_bytes), content, append)).unwrap()
        };
        // A new file is written as given.
        assert_eq!(w(None, "a\nb\n", false), "a\nb\n");
        assert_eq!(w(None, "a\r\n", false), "a\r\n");
        // CRLF kept, unless the content has CRLF of its own.
        assert_eq!(w(Some("x\r\ny\r\n"), "a\nb\n", false), "a\r\nb\r\n");
        assert_eq!(w(Some("x\r\ny\r\n"), "a\r\nb\n", false), "a\r\nb\n");
        assert_eq!(w(Some("x\ny\n"), "a\r\nb\r\n", false), "a\r\nb\r\n");
        assert_eq!(w(Some("x\ny\n"), "a\nb\n", false), "a\nb\n");
        // A BOM kept, not doubled.
        assert_eq!(w(Some("\u{feff}x\n"), "a\n", false), "\u{feff}a\n");
        assert_eq!(w(Some("\u{feff}x\n"), "\u{feff}a\n", false), "\u{feff}a\n");
        assert_eq!(w(Some("\u{feff}x\r\n"), "a\nb", false), "\u{feff}a\r\nb");
        // Appending: after a line break in the file's style, never mid-line.
        assert_eq!(w(Some("a\n"), "b\n", true), "a\nb\n");
        assert_eq!(w(Some("a"), "b\n", true), "a\nb\n");
        assert_eq!(w(Some("a\r\n"), "b\nc\n", true), "a\r\nb\r\nc\r\n");
        assert_eq!(w(Some("a\r\nz"), "b\n", true), "a\r\nz\r\nb\r\n");
        assert_eq!(w(Some(""), "b\n", true), "b\n");
        assert_eq!(w(Some("a"), "", true), "a");
        assert_eq!(w(Some("\u{feff}a\n"), "b\n", true), "\u{feff}a\nb\n");
    }
}
