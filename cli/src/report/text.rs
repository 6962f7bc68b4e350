//! The report as text for an 80-column terminal: the header as named fields, then a
//! `== Title (n)` head per section and one entry a line, details indented below.

use std::fmt::Write as _;

use cairn_replay::audit::{Audit, CallEntry};

use super::sections::{op, sections, steps};
use super::{Block, Cell, Conversation, Diff, SUMMARY_CHARS_MAX, Section, Step, Style};
use crate::paint::Paint;
use crate::summary::elapsed;

/// The text report.
pub fn text(a: &Audit, paint: Paint) -> String {
    let mut o = String::new();
    for s in &sections(a) {
        section(&mut o, s, paint);
    }
    o
}

fn section(o: &mut String, s: &Section<'_>, paint: Paint) {
    if s.blocks.iter().all(|b| matches!(b, Block::Timeline(_))) {
        return;
    }
    match (s.subject, s.count) {
        (Some(subject), _) => field(o, paint, s.title, &[Cell::plain(subject)]),
        (None, Some(n)) => head(o, paint, &format!("{} ({n})", s.title)),
        (None, None) => head(o, paint, s.title),
    }
    for b in &s.blocks {
        match b {
            Block::Fields(fields) => {
                for f in fields {
                    for v in &f.values {
                        field(o, paint, f.key, v);
                    }
                }
            }
            Block::Text(line) => {
                let _ = writeln!(o, "{}", join(line));
            }
            Block::Table(t) => {
                for r in &t.rows {
                    let _ = writeln!(o, "{}", r.item.line);
                    for l in r.item.details.iter().flat_map(|d| d.lines()) {
                        let _ = writeln!(o, "  {l}");
                    }
                }
            }
            Block::Conversation(c) => {
                for l in lines(c, false, paint) {
                    let _ = writeln!(o, "{l}");
                }
            }
            Block::Diffs(diffs) => {
                for d in diffs {
                    diff(o, d, paint);
                }
            }
            Block::Timeline(_) => {}
        }
    }
}

fn head(o: &mut String, paint: Paint, title: &str) {
    let _ = writeln!(o, "\n{}", paint.head(&format!("== {title}")));
}

/// `key       value`; a record hash goes on a line of its own, under the value.
fn field(o: &mut String, paint: Paint, key: &str, value: &[Cell]) {
    let _ = write!(o, "{}", paint.bold(&format!("{key:<9}")));
    for c in value {
        if c.style == Style::Hash {
            let _ = write!(o, "\n{:9}", "");
        }
        let _ = write!(o, " {}", c.text);
    }
    o.push('\n');
}

/// The cells of a line, a space between them.
fn join(line: &[Cell]) -> String {
    line.iter()
        .map(|c| c.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

fn diff(o: &mut String, d: &Diff<'_>, paint: Paint) {
    let _ = writeln!(o, "{}", d.line);
    let _ = writeln!(o, "  before {}  after {}", d.before, d.after);
    for l in d.diff.lines() {
        let _ = writeln!(o, "  {}", paint.diff_line(l));
    }
}

/// A call's one line: call, tool, status, elapsed, key input (and the wait for a
/// permission answer, apart from the run time).
fn call_line(c: &CallEntry) -> String {
    let summary: String = c.summary.chars().take(SUMMARY_CHARS_MAX).collect();
    let s = format!(
        "{:<5} {:<22} {:<10} {:>9}  {summary}",
        c.call,
        c.tool,
        c.status,
        c.elapsed_us.map_or("-".into(), elapsed)
    );
    let mut s = s.trim_end().to_string();
    if let Some(w) = c.wait_ms {
        s.push_str(&format!(" (waited {} for permission)", elapsed(w * 1000)));
    }
    s
}

/// The conversation as text lines: user messages, model text, each call on one line
/// (with its first output line when it did not end `ok`); `verbose` adds every call's
/// input, output and diffs. Then the final answer.
pub fn conversation_text(a: &Audit, verbose: bool, paint: Paint) -> Vec<String> {
    lines(&steps(a), verbose, paint)
}

fn lines(c: &Conversation<'_>, verbose: bool, paint: Paint) -> Vec<String> {
    let mut o = Vec::new();
    let text = |o: &mut Vec<String>, seq: u64, who: &str, t: &str| {
        let t = t.replace('\t', "    ");
        let mut lines = t.lines();
        o.push(format!(
            "{seq:>6}  {}: {}",
            paint.bold(who),
            lines.next().unwrap_or("")
        ));
        for l in lines {
            o.push(format!("{:>6}  {}", "", l));
        }
    };
    for step in &c.steps {
        match step {
            Step::User { seq, text: t } => text(&mut o, *seq, "user", t),
            Step::Switch { seq, from, to } => {
                text(&mut o, *seq, "model switched", &format!("{from} → {to}"));
            }
            Step::Model {
                seq,
                text: t,
                interrupted,
                ..
            } => {
                let who = if *interrupted {
                    "model (interrupted)"
                } else {
                    "model"
                };
                text(&mut o, *seq, who, t);
            }
            Step::Call {
                seq, call, writes, ..
            } => {
                o.push(format!("{seq:>6}  {}", call_line(call)));
                if verbose {
                    call_verbose(&mut o, call, writes, paint);
                } else if call.status != "ok"
                    && let Some(l) = call.output.lines().next()
                {
                    let l: String = cairn_replay::audit::one_line(l).chars().take(100).collect();
                    o.push(format!("{:>6}    → {l}", ""));
                }
            }
        }
    }
    if let Some(ans) = c.answer {
        o.push(String::new());
        o.push(paint.bold("answer:"));
        o.extend(
            ans.lines()
                .map(|l| format!("  {}", l.replace('\t', "    "))),
        );
    }
    o
}

/// A call's input, output and diffs, under its line.
fn call_verbose(
    o: &mut Vec<String>,
    c: &CallEntry,
    writes: &[&cairn_replay::audit::WriteEntry],
    paint: Paint,
) {
    o.push(format!("{:>6}    input:", ""));
    for l in serde_json::to_string_pretty(&c.input)
        .unwrap_or_default()
        .lines()
    {
        o.push(format!("{:>6}      {l}", ""));
    }
    o.push(format!("{:>6}    output:", ""));
    for l in c.output.lines() {
        o.push(format!("{:>6}      {}", "", l.replace('\t', "    ")));
    }
    for w in writes {
        o.push(format!("{:>6}    {} {}:", "", op(w), w.path));
        for l in w.diff.lines() {
            o.push(format!("{:>6}      {}", "", paint.diff_line(l)));
        }
    }
}
