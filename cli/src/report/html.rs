//! The report as one self-contained HTML file (no external resource): the header, the
//! timeline, the conversation with each call as a collapsible entry (input, output,
//! diffs) and filters, then a table per section. Written with maud's compile-time
//! templates, which escape every value they are given.

use cairn_replay::audit::{Audit, CallEntry, WriteEntry};
use maud::{Markup, PreEscaped, html as h};

use super::sections::{op, sections};
use super::timeline::{colour, timeline};
use super::{
    Block, Cell, Conversation, Diff, Field, HTML_OUTPUT_BYTES_MAX, SUMMARY_CHARS_MAX, Section,
    Step, Style, Table,
};
use crate::summary::{count, elapsed};

/// The HTML report: one file, no external resource.
pub fn html(a: &Audit) -> String {
    let sections = sections(a);
    let page = h! {
        (PreEscaped("<!doctype html>\n"))
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width";
                title { "cairn audit " (a.header.session) }
                style { (PreEscaped(CSS)) }
            }
            body {
                "\n"
                @for s in &sections { (section(s)) }
                script { (PreEscaped(JS)) }
                "\n"
            }
        }
        "\n"
    };
    page.into_string()
}

fn section(s: &Section<'_>) -> Markup {
    let blocks = h! { @for b in &s.blocks { (block(b)) } };
    let title = match s.count {
        Some(n) => format!("{} ({n})", s.title),
        None => s.title.to_string(),
    };
    match s.subject {
        Some(subject) => h! {
            h1 { "Audit of " (s.title) " " code { (subject) } } "\n"
            (blocks)
        },
        None if s.alarm => h! {
            div class="alarm" { h2 { (title) } "\n" (blocks) } "\n"
        },
        None => h! { h2 { (title) } "\n" (blocks) },
    }
}

fn block(b: &Block<'_>) -> Markup {
    match b {
        Block::Fields(fields) => header(fields),
        Block::Text(l) => h! { p { (line(l)) } "\n" },
        Block::Table(t) => table(t),
        Block::Conversation(c) => conversation(c),
        // No button over no diffs (a session that wrote nothing).
        Block::Diffs(diffs) => h! {
            @if !diffs.is_empty() { button id="expand" { "expand all diffs" } "\n" }
            @for d in diffs { (diff(d)) }
        },
        Block::Timeline(a) => h! {
            div id="timeline" { (timeline(a)) (legend()) } "\n"
        },
    }
}

fn cell(c: &Cell) -> Markup {
    let t = &c.text;
    match c.style {
        Style::Plain => h! { (t) },
        Style::Code | Style::Hash => h! { code { (t) } },
        Style::Call => h! { a href={ "#call-" (t) } { (t) } },
        Style::Pre => h! { pre { (t) } },
        Style::Good => h! { span class="clean" { (t) } },
        Style::Bad => h! { span class="bad" { (t) } },
    }
}

/// The cells of a line, a space between them.
fn line(cells: &[Cell]) -> Markup {
    h! {
        @for (i, c) in cells.iter().enumerate() {
            @if i > 0 { " " }
            (cell(c))
        }
    }
}

/// The header's fields, the values of one joined with `; ` (a field without a value is
/// left out).
fn header(fields: &[Field]) -> Markup {
    h! {
        div class="box" { table class="hdr" {
            @for f in fields.iter().filter(|f| !f.values.is_empty()) {
                tr { td { (f.key) } td {
                    @for (i, v) in f.values.iter().enumerate() {
                        @if i > 0 { "; " }
                        (line(v))
                    }
                } }
            }
        } }
        "\n"
    }
}

fn table(t: &Table) -> Markup {
    if t.rows.is_empty() {
        return h! { p { "none" } "\n" };
    }
    h! {
        div class="box" { table {
            tr { @for head in &t.head { th { (head) } } } "\n"
            @for r in &t.rows {
                tr { @for c in &r.cells { td { (cell(c)) } } } "\n"
            }
        } }
        "\n"
    }
}

/// The status colours of the timeline, and the wait for a permission answer.
fn legend() -> Markup {
    let statuses = [
        "ok",
        "error",
        "denied",
        "blocked",
        "timeout",
        "cancelled",
        "unfinished",
    ];
    h! {
        p class="legend" {
            @for s in statuses {
                span { i style={ "background:" (colour(s)) } {} (s) }
            }
            span { i style="background:#b0b7bf" {} "waiting for permission" }
        }
    }
}

/// The conversation: filters, messages, and each call as a `<details>` (input,
/// output, diffs) tagged with what it did, for the filters.
fn conversation(c: &Conversation<'_>) -> Markup {
    let filters = [
        "all",
        "errors",
        "writes",
        "commands",
        "network",
        "permissions",
    ];
    h! {
        div class="filters" {
            "show: "
            @for f in filters {
                button data-f=(f) class=[(f == "all").then_some("on")] { (f) }
            }
        }
        "\n"
        div id="conversation" {
            "\n"
            @for s in &c.steps {
                @match s {
                    Step::User { seq, text } => div class="msg user" id={ "seq-" (seq) } {
                        b { "user · seq " (seq) } (text)
                    },
                    Step::Model { seq, model, text, interrupted } => {
                        div class="msg model" id={ "seq-" (seq) } {
                            b { (model) @if *interrupted { " (interrupted)" } " · seq " (seq) }
                            (text)
                        }
                    },
                    Step::Call { seq, call, writes, tags } => (call_entry(*seq, call, writes, tags)),
                    Step::Switch { seq, from, to } => div class="msg switch" id={ "seq-" (seq) } {
                        b { "model switched · seq " (seq) } (from) " → " (to)
                    },
                }
                "\n"
            }
            @if let Some(ans) = c.answer {
                div class="msg answer" { b { "answer" } (ans) } "\n"
            }
        }
        "\n"
    }
}

/// A call: its line (status, call, tool, elapsed, wait, key input), opening on its
/// times, input, output (cut at [`HTML_OUTPUT_BYTES_MAX`]) and diffs.
fn call_entry(seq: u64, c: &CallEntry, writes: &[&WriteEntry], tags: &[&str]) -> Markup {
    let summary: String = c.summary.chars().take(SUMMARY_CHARS_MAX * 2).collect();
    let wait = c.wait_ms.map_or(String::new(), |w| {
        format!(" · waited {} for permission", elapsed(w * 1000))
    });
    let input = serde_json::to_string_pretty(&c.input).unwrap_or_default();
    let (shown, was_cut) = cut(&c.output, HTML_OUTPUT_BYTES_MAX);
    h! {
        details class="call" id={ "call-" (c.call) } data-k=(tags.join(" ")) {
            summary {
                i class="st" style={ "background:" (colour(&c.status)) } {}
                code { (c.call) } " " span class="tool" { (c.tool) } " "
                span class="stname" { (c.status) } " "
                (c.elapsed_us.map_or("-".into(), elapsed)) (wait) " " code { (summary) }
            }
            div {
                p {
                    "seq " (seq) " · started " (c.started)
                    @if let Some(f) = &c.finished { " · finished " (f) }
                }
                h4 { "input" } pre { (input) }
                h4 { "output" } pre { (shown) }
                @if was_cut {
                    p {
                        "(output cut at " (count(HTML_OUTPUT_BYTES_MAX as u64, "byte"))
                        " of " (count(c.output.len() as u64, "byte"))
                        ": cairn show -v has it whole)"
                    }
                }
                @for w in writes {
                    h4 { (op(w)) " " code { (w.path) } }
                    pre class="diff" { (diff_lines(&w.diff)) }
                }
            }
        }
    }
}

/// At most `bytes_max` bytes of `s`, cut at a character boundary, and whether it was cut.
fn cut(s: &str, bytes_max: usize) -> (&str, bool) {
    if s.len() <= bytes_max {
        return (s, false);
    }
    let mut end = bytes_max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (&s[..end], true)
}

/// A file written, open on its diff.
fn diff(d: &Diff<'_>) -> Markup {
    h! {
        details class="write" open {
            summary {
                (line(&d.title))
                " before " code { (d.before) } " after " code { (d.after) }
            }
            pre class="diff" { (diff_lines(d.diff)) }
        }
        "\n"
    }
}

/// A diff's lines, the added, removed and hunk lines marked for their colours.
fn diff_lines(diff: &str) -> Markup {
    let class = |l: &str| {
        if l.starts_with("@@") {
            Some("hunk")
        } else if l.starts_with("---") || l.starts_with("+++") {
            None
        } else {
            match crate::paint::diff_sign(l) {
                Some('+') => Some("add"),
                Some('-') => Some("del"),
                _ => None,
            }
        }
    };
    h! {
        @for l in diff.lines() {
            @match class(l) {
                Some(c) => span class=(c) { (l) },
                None => { (l) "\n" },
            }
        }
    }
}

const CSS: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#1d232a;background:#fdfdfc}
h1{font-size:1.5em;margin-bottom:.2em;overflow-wrap:anywhere}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
code,pre{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3em 0}
.box{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;width:100%;margin:.5em 0}td,th{border:1px solid #e2e2e2;padding:3px 6px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f3f4f6}.hdr td:first-child{font-weight:600;width:9em}
pre.diff{background:#f7f7f7;border:1px solid #e5e5e5;padding:.5em;white-space:pre;overflow-x:auto}
.add{background:#e6ffed;display:block}.del{background:#ffeef0;display:block}.hunk{color:#0366d6;display:block}
.clean{color:#2e9e4f;font-weight:600}.bad{color:#d64541;font-weight:600}
.alarm{border:2px solid #d64541;background:#fff5f5;padding:.2em 1em;margin:1em 0}
#timeline svg{width:100%;height:auto;border:1px solid #e5e5e5;background:#fff}
#timeline a:hover rect{stroke:#000;stroke-width:1}
.legend span{display:inline-block;margin-right:1em}.legend i{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:middle}
summary{cursor:pointer}
.msg{border-left:4px solid #3498db;background:#eef6fc;padding:.3em .8em;margin:.5em 0;white-space:pre-wrap;overflow-wrap:anywhere}
.msg.model{border-color:#8e44ad;background:#f7f1fa}.msg.answer{border-color:#2e9e4f;background:#eefaf1}
.msg b{display:block;font-size:.85em;color:#555}
details.call{border:1px solid #e5e5e5;border-radius:3px;margin:2px 0;background:#fff}
details.call>summary{padding:2px 6px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
details.call>div{padding:.2em .8em .6em;border-top:1px solid #eee}
details.call h4{margin:.5em 0 .1em;font-size:.85em;color:#555}
.st{display:inline-block;width:.75em;height:.75em;border-radius:50%;margin-right:.4em;vertical-align:middle}
.stname{display:inline-block;min-width:6em}details.call>summary>code:first-of-type{display:inline-block;min-width:3.5em}.tool{display:inline-block;min-width:11em}
.filters{position:sticky;top:0;background:#fdfdfc;padding:.4em 0;z-index:1}
.filters button{margin-right:.4em;border:1px solid #bbb;background:#fff;border-radius:3px;padding:2px 10px;cursor:pointer}
.filters button.on{background:#1d232a;color:#fff}
.hidden{display:none}
"#;

const JS: &str = r#"
document.querySelectorAll('.filters button').forEach(function(b){b.addEventListener('click',function(){
  var f=b.dataset.f;
  document.querySelectorAll('.filters button').forEach(function(x){x.classList.toggle('on',x===b)});
  document.querySelectorAll('#conversation .msg').forEach(function(m){m.classList.toggle('hidden',f!=='all')});
  document.querySelectorAll('#conversation details.call').forEach(function(d){
    d.classList.toggle('hidden',f!=='all'&&(' '+d.dataset.k+' ').indexOf(' '+f+' ')<0)});
})});
function reveal(){var d=document.getElementById(location.hash.slice(1));
  if(d&&d.tagName==='DETAILS'){d.classList.remove('hidden');d.open=true;}}
window.addEventListener('hashchange',reveal);reveal();
var expand=document.getElementById('expand');
if(expand)expand.addEventListener('click',function(){
  var open=this.dataset.open!=='1';this.dataset.open=open?'1':'0';
  document.querySelectorAll('details.write').forEach(function(d){d.open=open});
  this.textContent=open?'collapse all diffs':'expand all diffs';
});
"#;
