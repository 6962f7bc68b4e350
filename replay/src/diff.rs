//! Diffing two sessions: their calls are aligned by a sequence alignment (Myers, which
//! finds a longest common subsequence) over tool + canonical input; calls left over
//! between two aligned ones are paired when they name the same tool (a call whose input
//! changed), the rest are only in one session. Matched calls are compared field by
//! field (`compare`), then the final workspaces (manifest + writes) file by file.
//!
//! An imported session knows of its workspace only what it wrote (its source captured
//! no manifest), and of some of that only a diff: the files it did not write are left
//! out of the comparison, and those whose content it does not know are listed as
//! unknown, not as removed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cairn_core::event::{Event, WriteStatus};
use cairn_core::state::canonical_json;
use serde::Serialize;

use crate::compare::{FieldDiff, Norm, compare_calls, unified};
use crate::error::Result;
use crate::session::{Call, FileAt, Session};

/// A call of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallRef {
    pub seq: u64,
    pub call: String,
    pub tool: String,
    pub input: serde_json::Value,
    pub status: String,
}

impl CallRef {
    fn of(c: &Call) -> CallRef {
        CallRef {
            seq: c.seq,
            call: c.call.clone(),
            tool: c.tool.clone(),
            input: c.input.clone(),
            status: c
                .finished
                .as_ref()
                .map_or("unfinished".into(), |(_, f)| f.status.as_str().into()),
        }
    }
}

/// Two aligned calls that differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangedCall {
    pub a: CallRef,
    pub b: CallRef,
    pub fields: Vec<FieldDiff>,
}

/// How a file of the final workspace differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileChange {
    Added,
    Removed,
    Changed,
}

/// One file of the final workspaces that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileDiff {
    pub path: String,
    pub change: FileChange,
    pub diff: String,
}

/// Everything that differs between two sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffReport {
    pub a: String,
    pub b: String,
    pub only_a: Vec<CallRef>,
    pub only_b: Vec<CallRef>,
    pub changed: Vec<ChangedCall>,
    /// The final workspaces, file by file.
    pub workspace: Vec<FileDiff>,
    /// Files left out of the final workspaces' comparison because one session does not
    /// know their content at its end (an imported change known only as a diff).
    pub unknown: Vec<String>,
}

impl DiffReport {
    pub fn is_empty(&self) -> bool {
        self.only_a.is_empty()
            && self.only_b.is_empty()
            && self.changed.is_empty()
            && self.workspace.is_empty()
    }
}

/// Diffs the sessions in folders `a` and `b`.
pub fn diff(a: &Path, b: &Path) -> Result<DiffReport> {
    let (sa, sb) = (Session::load(a)?, Session::load(b)?);
    let (ca, cb) = (sa.calls(), sb.calls());
    let key = |c: &Call| format!("{}\u{0}{}", c.tool, canonical_json(&c.input));
    let ka: Vec<String> = ca.iter().map(key).collect();
    let kb: Vec<String> = cb.iter().map(key).collect();
    let norm = Norm {
        roots: Some((sb.started.workspace.clone(), sa.started.workspace.clone())),
    };
    let mut report = DiffReport {
        a: sa.id.clone(),
        b: sb.id.clone(),
        only_a: Vec::new(),
        only_b: Vec::new(),
        changed: Vec::new(),
        workspace: Vec::new(),
        unknown: Vec::new(),
    };
    let matched = |i: usize, j: usize, report: &mut DiffReport| {
        let fields = compare_calls(&ca[i], &sa.blobs, &cb[j], &sb.blobs, &norm);
        if !fields.is_empty() {
            report.changed.push(ChangedCall {
                a: CallRef::of(&ca[i]),
                b: CallRef::of(&cb[j]),
                fields,
            });
        }
    };
    let ops = similar::capture_diff_slices(similar::Algorithm::Myers, &ka, &kb);
    for op in ops {
        match op {
            similar::DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => {
                for k in 0..len {
                    matched(old_index + k, new_index + k, &mut report);
                }
            }
            similar::DiffOp::Delete {
                old_index, old_len, ..
            } => report
                .only_a
                .extend(ca[old_index..old_index + old_len].iter().map(CallRef::of)),
            similar::DiffOp::Insert {
                new_index, new_len, ..
            } => report
                .only_b
                .extend(cb[new_index..new_index + new_len].iter().map(CallRef::of)),
            similar::DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                // Pair calls of the same tool in order: an input that changed.
                let mut j = new_index;
                let end = new_index + new_len;
                for (i, a) in ca.iter().enumerate().skip(old_index).take(old_len) {
                    match (j..end).find(|&x| cb[x].tool == a.tool) {
                        Some(x) => {
                            report.only_b.extend(cb[j..x].iter().map(CallRef::of));
                            matched(i, x, &mut report);
                            j = x + 1;
                        }
                        None => report.only_a.push(CallRef::of(a)),
                    }
                }
                report.only_b.extend(cb[j..end].iter().map(CallRef::of));
            }
        }
    }
    (report.workspace, report.unknown) = workspace_diff(&sa, &sb)?;
    Ok(report)
}

fn text_of(s: &Session, f: Option<&FileAt>) -> Option<String> {
    let f = f?;
    if f.withheld {
        return Some(format!("(withheld, BLAKE3 {})\n", f.hash));
    }
    match s.blobs.get(&f.hash) {
        Ok(b) if b.contains(&0) || std::str::from_utf8(&b).is_err() => None,
        Ok(b) => String::from_utf8(b).ok(),
        Err(_) => Some(format!("(blob {} missing)\n", f.hash)),
    }
}

/// The paths an imported session wrote (all it knows of its workspace); `None` for a
/// session recorded by cairn, which knows all of it.
fn written_paths(s: &Session) -> Option<BTreeSet<&str>> {
    s.started.imported.as_ref()?;
    Some(
        s.records
            .iter()
            .filter_map(|r| match &r.event {
                Event::FileWrite(w) if w.status == WriteStatus::Ok => Some(w.path.as_str()),
                _ => None,
            })
            .collect(),
    )
}

/// The files that differ, and those left out as unknown (sorted).
fn workspace_diff(a: &Session, b: &Session) -> Result<(Vec<FileDiff>, Vec<String>)> {
    let (wa, wb) = (a.workspace_at(None)?, b.workspace_at(None)?);
    let unknown: BTreeSet<String> = a
        .unknown_at(None)
        .into_iter()
        .chain(b.unknown_at(None))
        .collect();
    let (known_a, known_b) = (written_paths(a), written_paths(b));
    let known = |p: &str| {
        known_a.as_ref().is_none_or(|k| k.contains(p))
            && known_b.as_ref().is_none_or(|k| k.contains(p))
    };
    let mut paths: BTreeMap<&String, ()> = BTreeMap::new();
    for p in wa.keys().chain(wb.keys()) {
        paths.insert(p, ());
    }
    let mut out = Vec::new();
    for path in paths.keys() {
        if unknown.contains(*path) || !known(path) {
            continue;
        }
        let (x, y) = (wa.get(*path), wb.get(*path));
        let change = match (x, y) {
            (Some(x), Some(y)) if x.hash == y.hash => continue,
            (Some(_), Some(_)) => FileChange::Changed,
            (Some(_), None) => FileChange::Removed,
            (None, Some(_)) => FileChange::Added,
            (None, None) => continue,
        };
        let (la, lb) = match change {
            FileChange::Added => ("/dev/null".to_string(), format!("b/{path}")),
            FileChange::Removed => (format!("a/{path}"), "/dev/null".to_string()),
            FileChange::Changed => (format!("a/{path}"), format!("b/{path}")),
        };
        let diff = match (text_of(a, x), text_of(b, y)) {
            (tx, ty) if (x.is_none() || tx.is_some()) && (y.is_none() || ty.is_some()) => {
                unified(&la, &lb, &tx.unwrap_or_default(), &ty.unwrap_or_default())
            }
            _ => format!("Binary files {la} and {lb} differ\n"),
        };
        out.push(FileDiff {
            path: (*path).clone(),
            change,
            diff,
        });
    }
    Ok((out, unknown.into_iter().collect()))
}
