//! Re-applying a recorded write: the content a write call's input gives from the
//! content before it, computed with the engine's own edit functions
//! (`tools::write::edit_string`, `find`, `follow_line_endings`), so that verify can
//! compare it with the write's after blob.
//!
//! The input is read by its shape, never by the tool's name: a whole `content` (with
//! `append`), one `old_string`/`new_string` replacement (with `replace_all`), or
//! `patches` (one create or replace, or edits of one file, all matched against the
//! original content).

use cairn_tools::tools::write::{self, Found};
use serde_json::Value;

/// What a write call's input asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Change<'a> {
    /// The whole new content (in the file's style, [`write::whole`]), or what is added
    /// at its end when `append`.
    Whole { content: &'a str, append: bool },
    /// One replacement, or every occurrence when `all`.
    Replace {
        old: &'a str,
        new: &'a str,
        all: bool,
    },
    /// Edits of the original content, each matching a separate part of it.
    Edits(Vec<(&'a str, &'a str)>),
}

/// The change an input asks for; `None` when its shape is none of the above (a tool
/// this check does not know how to re-apply).
pub(super) fn change_of(input: &Value) -> Option<Change<'_>> {
    fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
        v.get(k).and_then(Value::as_str)
    }
    if let Some(patches) = input.get("patches").and_then(Value::as_array) {
        return match patches.as_slice() {
            [p] if matches!(s(p, "op"), Some("create" | "replace")) => {
                s(p, "content").map(|content| Change::Whole {
                    content,
                    append: false,
                })
            }
            ps if !ps.is_empty() && ps.iter().all(|p| s(p, "op") == Some("edit")) => ps
                .iter()
                .map(|p| Some((s(p, "old_string")?, s(p, "new_string")?)))
                .collect::<Option<Vec<_>>>()
                .map(Change::Edits),
            _ => None,
        };
    }
    if let (Some(old), Some(new)) = (s(input, "old_string"), s(input, "new_string")) {
        let all = input
            .get("replace_all")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        return Some(Change::Replace { old, new, all });
    }
    let append = input
        .get("append")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    s(input, "content").map(|content| Change::Whole { content, append })
}

/// Why a change does not apply to the content before it, in the engine's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum NotApplied {
    #[error("no content before the edit of {path}")]
    NoBefore { path: String },
    #[error("{path} is not valid UTF-8; string edits would corrupt it")]
    NotUtf8 { path: String },
    /// The engine's edit refused it; its answer.
    #[error("{0}")]
    Refused(String),
    #[error("patch {patch}: old_string is empty")]
    EmptyOld { patch: usize },
    #[error("patch {patch}: old_string occurs {times} times")]
    Occurs { patch: usize, times: usize },
    #[error("patch {patch}: old_string was not found")]
    NotFound { patch: usize },
    #[error("patches {0} and {1} overlap")]
    Overlap(usize, usize),
}

/// The content `change` gives from `before` (`None`: the file did not exist), or why
/// it does not apply, in the engine's words.
pub(super) fn apply(
    change: &Change<'_>,
    path: &str,
    before: Option<&[u8]>,
) -> Result<Vec<u8>, NotApplied> {
    let text = || {
        let bytes = before.ok_or_else(|| NotApplied::NoBefore {
            path: path.to_string(),
        })?;
        std::str::from_utf8(bytes).map_err(|_| NotApplied::NotUtf8 {
            path: path.to_string(),
        })
    };
    match change {
        Change::Whole { content, append } => Ok(write::whole(before, content, *append)),
        Change::Replace { old, new, all } => {
            write::edit_string(path, text()?, old, new, *all, write::Offers::Unique)
                .map(String::into_bytes)
                .map_err(|o| NotApplied::Refused(o.text))
        }
        Change::Edits(edits) => apply_edits(text()?, edits).map(String::into_bytes),
    }
}

/// Edits of one original content, as `write_patch` applies them: each old string
/// found in the original (exactly once, or as one loose whole-line match), no two
/// overlapping, all spliced in at once.
///
/// The engine keeps this loop inside `write_patch`'s private `plan`, next to its reads
/// of the disk; it is repeated here with the engine's own `find` and
/// `follow_line_endings` until it becomes a pure function the tool and verify share.
fn apply_edits(content: &str, edits: &[(&str, &str)]) -> Result<String, NotApplied> {
    let mut ranges = Vec::with_capacity(edits.len());
    for (i, (old, new)) in edits.iter().enumerate() {
        let n = i + 1;
        if old.is_empty() {
            return Err(NotApplied::EmptyOld { patch: n });
        }
        let old = write::follow_line_endings(content, old);
        let new = write::follow_line_endings(content, new);
        let range = match write::find(content, &old) {
            Found::Exact(hits) if hits.len() == 1 => hits[0].clone(),
            Found::Exact(hits) => {
                return Err(NotApplied::Occurs {
                    patch: n,
                    times: hits.len(),
                });
            }
            Found::Loose(r) => r,
            Found::None(_) => return Err(NotApplied::NotFound { patch: n }),
        };
        ranges.push((range, new, n));
    }
    ranges.sort_by_key(|(r, _, _)| r.start);
    for w in ranges.windows(2) {
        if w[1].0.start < w[0].0.end {
            return Err(NotApplied::Overlap(w[0].2, w[1].2));
        }
    }
    let mut after = String::with_capacity(content.len());
    let mut last = 0;
    for (r, new, _) in &ranges {
        after.push_str(&content[last..r.start]);
        after.push_str(new);
        last = r.end;
    }
    after.push_str(&content[last..]);
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(input: Value, before: Option<&str>, expected: Result<&str, &str>) {
        let change = change_of(&input).expect("a known shape");
        let got = apply(&change, "f", before.map(str::as_bytes))
            .map(|b| String::from_utf8(b).expect("utf-8"));
        match expected {
            Ok(e) => assert_eq!(got.as_deref(), Ok(e), "{input}"),
            Err(e) => assert!(
                got.as_ref().is_err_and(|g| g.to_string().contains(e)),
                "{input}: {got:?}"
            ),
        }
    }

    #[test]
    fn why_a_change_does_not_apply() {
        let cases = [
            (
                NotApplied::NoBefore { path: "f".into() },
                "no content before the edit of f",
            ),
            (
                NotApplied::NotUtf8 { path: "f".into() },
                "f is not valid UTF-8; string edits would corrupt it",
            ),
            (NotApplied::Refused("no match".into()), "no match"),
            (
                NotApplied::EmptyOld { patch: 1 },
                "patch 1: old_string is empty",
            ),
            (
                NotApplied::Occurs { patch: 2, times: 3 },
                "patch 2: old_string occurs 3 times",
            ),
            (
                NotApplied::NotFound { patch: 1 },
                "patch 1: old_string was not found",
            ),
            (NotApplied::Overlap(1, 2), "patches 1 and 2 overlap"),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
        assert_eq!(
            apply(&Change::Edits(vec![("", "x")]), "f", Some(b"a")),
            Err(NotApplied::EmptyOld { patch: 1 })
        );
    }

    #[test]
    fn every_input_shape_re_applies() {
        check(
            json!({"path": "f", "content": "new\n"}),
            Some("old\n"),
            Ok("new\n"),
        );
        check(json!({"path": "f", "content": "new\n"}), None, Ok("new\n"));
        check(
            json!({"path": "f", "old_string": "b", "new_string": "B"}),
            Some("a\nb\n"),
            Ok("a\nB\n"),
        );
        check(
            json!({"path": "f", "old_string": "x", "new_string": "y", "replace_all": true}),
            Some("x x\n"),
            Ok("y y\n"),
        );
        check(
            json!({"path": "f", "old_string": "x", "new_string": "y"}),
            Some("x x\n"),
            Err("occurs 2 times"),
        );
        check(
            json!({"patches": [{"op": "replace", "path": "f", "content": "c\n"}]}),
            Some("a\n"),
            Ok("c\n"),
        );
        check(
            json!({"patches": [
                {"op": "edit", "path": "f", "old_string": "c", "new_string": "C"},
                {"op": "edit", "path": "f", "old_string": "a", "new_string": "A"}
            ]}),
            Some("a\nb\nc\n"),
            Ok("A\nb\nC\n"),
        );
        check(
            json!({"patches": [
                {"op": "edit", "path": "f", "old_string": "a\nb", "new_string": "x"},
                {"op": "edit", "path": "f", "old_string": "b\nc", "new_string": "y"}
            ]}),
            Some("a\nb\nc\n"),
            Err("overlap"),
        );
        // A whole write keeps a CRLF file's line endings and its byte order mark, and
        // an append goes at the end, after a line break.
        check(
            json!({"path": "f", "content": "x\ny\n"}),
            Some("\u{feff}a\r\nb\r\n"),
            Ok("\u{feff}x\r\ny\r\n"),
        );
        check(
            json!({"patches": [{"op": "replace", "path": "f", "content": "c\n"}]}),
            Some("a\r\n"),
            Ok("c\r\n"),
        );
        check(
            json!({"path": "f", "content": "b\n", "append": true}),
            Some("a"),
            Ok("a\nb\n"),
        );
        check(
            json!({"path": "f", "content": "b\n", "append": true}),
            None,
            Ok("b\n"),
        );
        // CRLF files keep their line endings.
        check(
            json!({"patches": [{"op": "edit", "path": "f", "old_string": "a\nb", "new_string": "x\ny"}]}),
            Some("a\r\nb\r\n"),
            Ok("x\r\ny\r\n"),
        );
        assert_eq!(change_of(&json!({"path": "f"})), None);
        assert_eq!(
            change_of(&json!({"patches": [{"op": "create", "path": "a"}, {"op": "edit"}]})),
            None
        );
    }
}
