//! Comparing one call of two sessions (a recording and its replay, or two sessions
//! being diffed) field by field, after normalisation.
//!
//! Normalisation, applied to both sides before comparing:
//! - elapsed times and timestamps are never compared;
//! - the second session's workspace root is replaced by the first's in every output,
//!   so a replay in a temporary folder compares equal to its original;
//!   (and, for a replay, its parent: a path just outside the workspace names it);
//! - in `shell`/`run_shell` outputs, durations (`3 ms`), pids (`pid 123`) and the
//!   session's own folders (`sessions/<id>/`, where background logs live) are masked;
//! - `list_dir` lines of entries marked `ignored` are left out: ignored files are not
//!   in the manifest, so a materialised workspace does not have them;
//! - call ids are compared by position, not by name.

use cairn_core::event::FileWrite;
use cairn_store::BlobStore;
use serde::Serialize;

use crate::session::Call;

/// Which part of a call differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    /// The starting workspace (the manifest).
    Workspace,
    Input,
    Status,
    Output,
    Refusal,
    FileWrites,
    /// The call is not in the other session (or could not be re-run).
    Missing,
}

impl Field {
    pub fn as_str(&self) -> &'static str {
        match self {
            Field::Workspace => "workspace",
            Field::Input => "input",
            Field::Status => "status",
            Field::Output => "output",
            Field::Refusal => "refusal",
            Field::FileWrites => "file writes",
            Field::Missing => "missing",
        }
    }
}

/// One field that differs, with a unified diff of expected (first session) against
/// actual (second).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldDiff {
    pub field: Field,
    pub expected: String,
    pub actual: String,
    pub diff: String,
}

impl FieldDiff {
    pub(crate) fn new(field: Field, label: &str, expected: String, actual: String) -> FieldDiff {
        let diff = unified(
            &format!("a/{label}"),
            &format!("b/{label}"),
            &expected,
            &actual,
        );
        FieldDiff {
            field,
            expected,
            actual,
            diff,
        }
    }
}

/// A unified diff (`---`/`+++` headers, `@@` hunks, 3 lines of context) of two texts.
pub fn unified(a_label: &str, b_label: &str, a: &str, b: &str) -> String {
    similar::TextDiff::from_lines(a, b)
        .unified_diff()
        .context_radius(3)
        .header(a_label, b_label)
        .missing_newline_hint(true)
        .to_string()
}

/// How the second side's text is made comparable with the first's.
#[derive(Debug, Clone)]
pub(crate) struct Norm {
    /// The second session's workspace root, and the first's.
    pub roots: Option<(String, String)>,
}

impl Norm {
    pub(crate) fn text(&self, tool: &str, text: &str, second: bool) -> String {
        let mut t = match (&self.roots, second) {
            (Some((b, a)), true) if !b.is_empty() && b != a => {
                // The workspace root, then its parent (a path just outside the workspace
                // names the parent): both stand for the first session's.
                let parent = |p: &str| {
                    std::path::Path::new(p)
                        .parent()
                        .map(|x| x.to_string_lossy().into_owned())
                        .filter(|x| x.len() > 1)
                };
                let mut t = text.replace(b.as_str(), a);
                if let (Some(pb), Some(pa)) = (parent(b), parent(a))
                    && pb != pa
                    && pb.contains("cairn-replay-")
                {
                    t = t.replace(&pb, &pa);
                }
                t
            }
            _ => text.to_string(),
        };
        let effects = cairn_tools::effects_of(tool).unwrap_or_default();
        if effects.runs_commands {
            // Times, pids and the session's own folders differ from run to run.
            static VOLATILE: std::sync::LazyLock<Vec<(regex::Regex, &'static str)>> =
                std::sync::LazyLock::new(|| {
                    [
                        (r"\b\d+(?:\.\d+)? ?(?:ms|µs|s)\b", "<elapsed>"),
                        (r"\bpid \d+", "pid <pid>"),
                        (r"sessions/[^/\s]+/", "sessions/<session>/"),
                    ]
                    .into_iter()
                    .filter_map(|(re, to)| regex::Regex::new(re).ok().map(|re| (re, to)))
                    .collect()
                });
            for (re, to) in VOLATILE.iter() {
                t = re.replace_all(&t, *to).into_owned();
            }
        }
        if effects.lists_ignored {
            t = t
                .split('\n')
                .filter(|l| !(l.ends_with(" (ignored)") || l.ends_with(", ignored)")))
                .collect::<Vec<_>>()
                .join("\n");
        }
        t
    }
}

fn status_of(c: &Call) -> String {
    c.finished
        .as_ref()
        .map_or("unfinished".to_string(), |(_, f)| {
            f.status.as_str().to_string()
        })
}

fn refusal_of(c: &Call) -> String {
    match c.finished.as_ref().and_then(|(_, f)| f.refusal.as_ref()) {
        None => "none".into(),
        Some(r) => serde_json::to_string_pretty(r).unwrap_or_default(),
    }
}

fn output_of(c: &Call, blobs: &BlobStore) -> String {
    let Some((_, f)) = &c.finished else {
        return String::new();
    };
    // The whole output when it was cut: a difference past the cap still counts.
    if let Some(b) = &f.output_blob
        && let Ok(bytes) = blobs.get(&b.hash)
    {
        return String::from_utf8_lossy(&bytes).into_owned();
    }
    f.output.clone()
}

fn write_line(w: &FileWrite) -> String {
    let h = |b: &Option<cairn_store::BlobRef>| b.map_or("none".to_string(), |b| b.hash.short(16));
    format!(
        "{:?} {} {:?} {} -> {}",
        w.op,
        w.path,
        w.status,
        h(&w.before),
        h(&w.after)
    )
    .to_lowercase()
}

fn content(blobs: &BlobStore, b: &Option<cairn_store::BlobRef>, withheld: bool) -> String {
    match b {
        None => String::new(),
        Some(b) if withheld => format!("(withheld, BLAKE3 {})\n", b.hash),
        Some(b) => match blobs.get(&b.hash) {
            Ok(bytes) if bytes.contains(&0) => format!("(binary, {} bytes)\n", bytes.len()),
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(_) => format!("(blob {} missing)\n", b.hash),
        },
    }
}

/// The fields of call `b` (second session) that differ from call `a` (first session).
pub(crate) fn compare_calls(
    a: &Call,
    a_blobs: &BlobStore,
    b: &Call,
    b_blobs: &BlobStore,
    norm: &Norm,
) -> Vec<FieldDiff> {
    let mut out = Vec::new();
    let label = format!("{}:{}", a.call, a.tool);
    let (ia, ib) = (
        cairn_core::state::canonical_json(&a.input),
        cairn_core::state::canonical_json(&b.input),
    );
    if a.tool != b.tool || ia != ib {
        out.push(FieldDiff::new(
            Field::Input,
            &label,
            format!("{} {}\n", a.tool, pretty(&a.input)),
            format!("{} {}\n", b.tool, pretty(&b.input)),
        ));
    }
    // Equal redacted inputs may still have held different secrets: the keyed hashes
    // of the raw command lines tell (the same project's key made both).
    if a.shell && b.shell && a.tool == b.tool && ia == ib && a.argv_hashes != b.argv_hashes {
        let shown = |hs: &[String]| {
            if hs.is_empty() {
                "no secret in the command line\n".to_string()
            } else {
                hs.iter()
                    .map(|h| format!("a secret with keyed hash {h}\n"))
                    .collect()
            }
        };
        out.push(FieldDiff::new(
            Field::Input,
            &label,
            shown(&a.argv_hashes),
            shown(&b.argv_hashes),
        ));
    }
    let (sa, sb) = (status_of(a), status_of(b));
    if sa != sb {
        out.push(FieldDiff::new(Field::Status, &label, sa + "\n", sb + "\n"));
    }
    let (ra, rb) = (refusal_of(a), refusal_of(b));
    if ra != rb {
        out.push(FieldDiff::new(Field::Refusal, &label, ra + "\n", rb + "\n"));
    }
    let oa = norm.text(&a.tool, &output_of(a, a_blobs), false);
    let ob = norm.text(&b.tool, &output_of(b, b_blobs), true);
    if oa != ob {
        out.push(FieldDiff::new(
            Field::Output,
            &label,
            with_nl(oa),
            with_nl(ob),
        ));
    }
    let wa: Vec<String> = a.writes.iter().map(|(_, w)| write_line(w)).collect();
    let wb: Vec<String> = b.writes.iter().map(|(_, w)| write_line(w)).collect();
    if wa != wb {
        let mut d = FieldDiff::new(Field::FileWrites, &label, lines(&wa), lines(&wb));
        // The content of writes whose result differs.
        type After = (String, Option<cairn_store::BlobRef>, bool);
        let after = |c: &Call| -> Vec<After> {
            c.writes
                .iter()
                .filter(|(_, w)| w.status == cairn_core::event::WriteStatus::Ok)
                .map(|(_, w)| (w.path.clone(), w.after, w.withheld))
                .collect()
        };
        let (aa, ab) = (after(a), after(b));
        for (path, x, xw) in &aa {
            let (y, yw) = ab
                .iter()
                .find(|(p, _, _)| p == path)
                .map_or((None, false), |(_, y, yw)| (*y, *yw));
            if x.map(|x| x.hash) != y.map(|y| y.hash) {
                d.diff.push_str(&unified(
                    &format!("a/{path}"),
                    &format!("b/{path}"),
                    &content(a_blobs, x, *xw),
                    &content(b_blobs, &y, yw),
                ));
            }
        }
        for (path, y, yw) in &ab {
            if !aa.iter().any(|(p, _, _)| p == path) {
                d.diff.push_str(&unified(
                    "/dev/null",
                    &format!("b/{path}"),
                    "",
                    &content(b_blobs, y, *yw),
                ));
            }
        }
        out.push(d);
    }
    out
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn lines(v: &[String]) -> String {
    v.iter().map(|l| format!("{l}\n")).collect()
}

fn with_nl(mut s: String) -> String {
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}
