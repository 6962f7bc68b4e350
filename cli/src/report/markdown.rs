//! The report in Markdown: a title, the header as a table, then a `##` head per
//! section; its paragraphs, lists and tables separated by one blank line.

use cairn_replay::audit::Audit;

use super::sections::sections;
use super::{
    Block, Cell, Conversation, Diff, Field, SUMMARY_CHARS_MAX, Section, Step, Style, Table,
};
use crate::summary::elapsed;

/// The Markdown report.
pub fn markdown(a: &Audit) -> String {
    let mut chunks: Vec<String> = Vec::new();
    for s in &sections(a) {
        section(&mut chunks, s);
    }
    let mut o = chunks.join("\n\n");
    o.push('\n');
    o
}

/// Escapes `|` and newlines for a Markdown table cell.
fn escape(s: &str) -> String {
    s.replace('|', "\\|")
        .replace('\n', " ⏎ ")
        .replace('\t', "    ")
}

/// A cell in a table (`in_table`: escaped for it) or in running text.
fn cell(c: &Cell, in_table: bool) -> String {
    let t = if in_table {
        escape(&c.text)
    } else {
        c.text.clone()
    };
    match c.style {
        Style::Code | Style::Hash => format!("`{t}`"),
        _ => t,
    }
}

fn line(cells: &[Cell], in_table: bool) -> String {
    cells
        .iter()
        .map(|c| cell(c, in_table))
        .collect::<Vec<_>>()
        .join(" ")
}

fn section(o: &mut Vec<String>, s: &Section<'_>) {
    if s.blocks.iter().all(|b| matches!(b, Block::Timeline(_))) {
        return;
    }
    o.push(match (s.subject, s.count) {
        (Some(subject), _) => format!("# Audit of {} `{subject}`", s.title),
        (None, Some(n)) => format!("## {} ({n})", s.title),
        (None, None) => format!("## {}", s.title),
    });
    for b in &s.blocks {
        match b {
            Block::Fields(fields) => o.push(header(fields)),
            Block::Text(l) => o.push(line(l, false)),
            Block::Table(t) if t.rows.is_empty() => {}
            Block::Table(t) => o.push(table(t)),
            Block::Conversation(c) => conversation(o, c),
            Block::Diffs(diffs) => o.extend(diffs.iter().flat_map(diff)),
            Block::Timeline(_) => {}
        }
    }
}

/// The header: a table of two columns without heads, the values of a field joined
/// (a field without a value is left out).
fn header(fields: &[Field]) -> String {
    let mut o = String::from("| | |\n|---|---|");
    for f in fields.iter().filter(|f| !f.values.is_empty()) {
        let v: Vec<String> = f.values.iter().map(|v| line(v, true)).collect();
        o.push_str(&format!("\n| {} | {} |", f.key, v.join("; ")));
    }
    o
}

fn table(t: &Table) -> String {
    let mut o = format!("| {} |\n|", t.head.join(" | "));
    o.push_str(&"---|".repeat(t.head.len()));
    for r in &t.rows {
        debug_assert_eq!(r.cells.len(), t.head.len(), "a row of {:?}", t.head);
        let cells: Vec<String> = r.cells.iter().map(|c| cell(c, true)).collect();
        o.push_str(&format!("\n| {} |", cells.join(" | ")));
    }
    o
}

/// The steps as a list; the answer quoted below it.
fn conversation(o: &mut Vec<String>, c: &Conversation<'_>) {
    let steps: Vec<String> = c
        .steps
        .iter()
        .map(|s| match s {
            Step::User { seq, text } => format!("- **user** (seq {seq}): {}", escape(text)),
            Step::Switch { seq, from, to } => format!(
                "- **model switched** (seq {seq}): {} → {}",
                escape(from),
                escape(to)
            ),
            Step::Model {
                seq,
                text,
                interrupted,
                ..
            } => {
                let cut = if *interrupted { " (interrupted)" } else { "" };
                format!("- **model**{cut} (seq {seq}): {}", escape(text))
            }
            Step::Call { seq, call: c, .. } => {
                let summary: String = c.summary.chars().take(SUMMARY_CHARS_MAX).collect();
                let wait = c.wait_ms.map_or(String::new(), |w| {
                    format!(", waited {} for permission", elapsed(w * 1000))
                });
                format!(
                    "- `{}` {} `{}` — {}, {}{wait} (seq {seq})",
                    c.call,
                    c.tool,
                    summary.replace('`', "'"),
                    c.status,
                    c.elapsed_us.map_or("-".into(), elapsed),
                )
            }
        })
        .collect();
    if !steps.is_empty() {
        o.push(steps.join("\n"));
    }
    if let Some(ans) = c.answer {
        o.push("**Answer:**".into());
        let quoted: Vec<String> = ans.lines().map(|l| format!("> {l}")).collect();
        o.push(quoted.join("\n"));
    }
}

fn diff(d: &Diff<'_>) -> [String; 3] {
    [
        format!("### {}", line(&d.title, false)),
        format!("before `{}` · after `{}`", d.before, d.after),
        format!("```diff\n{}\n```", d.diff),
    ]
}
