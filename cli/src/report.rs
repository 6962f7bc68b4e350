//! Renderings of an audit (`cairn_replay::audit::Audit`): text for an 80-column
//! terminal, Markdown, and one self-contained HTML file with a timeline. The JSON form
//! is the audit value itself, serialised.

use std::fmt::Write as _;

use cairn_replay::audit::{Audit, CommandEntry, PermissionEntry, WorkspaceSecrets, WriteEntry};

use crate::paint::Paint;
use crate::summary::elapsed;

fn short(hash: &Option<String>) -> String {
    hash.as_deref()
        .map_or("-".to_string(), |h| h.chars().take(12).collect())
}

fn ranges(r: &[(u32, u32)]) -> String {
    r.iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn answer(p: &PermissionEntry) -> String {
    let a = p
        .answer
        .map(|a| format!("{a:?}").to_lowercase())
        .unwrap_or_else(|| "unanswered".into());
    let s = p.source.map(|s| match s {
        cairn_engine::event::AnswerSource::User => "user",
        cairn_engine::event::AnswerSource::AllowList => "allow list",
        cairn_engine::event::AnswerSource::Policy => "policy",
    });
    match s {
        Some(s) => format!("{a} ({s})"),
        None => a,
    }
}

fn exit(c: &CommandEntry) -> String {
    match (c.exit_code, c.signal) {
        (Some(x), _) => format!("exit {x}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "no exit".into(),
    }
}

fn op(w: &WriteEntry) -> String {
    format!("{:?}", w.op).to_lowercase()
}

fn kind(c: &CommandEntry) -> &'static str {
    match c.kind {
        cairn_engine::event::ProcKind::Foreground => "foreground",
        cairn_engine::event::ProcKind::Background => "background",
    }
}

fn lineage(a: &Audit) -> String {
    match &a.header.parent {
        Some(p) => format!(
            "forked from {} at seq {} ({})",
            p.session,
            p.seq,
            &p.hash[..12.min(p.hash.len())]
        ),
        None => "none (a new session)".into(),
    }
}

fn integrity(a: &Audit) -> String {
    if a.integrity.clean {
        format!(
            "clean ({} decisions re-checked, {} blobs)",
            a.integrity.decisions_checked, a.integrity.blobs_checked
        )
    } else {
        format!(
            "{} problem{} (run cairn verify)",
            a.integrity.problems,
            if a.integrity.problems == 1 { "" } else { "s" }
        )
    }
}

fn state(a: &Audit) -> String {
    let mut s = a.header.end_state.as_str().to_string();
    if let Some(r) = &a.header.end_reason {
        s.push_str(&format!(": {r}"));
    }
    if a.header.resumed > 0 {
        s.push_str(&format!(" (resumed {}×)", a.header.resumed));
    }
    s
}

fn counts(a: &Audit) -> String {
    let total: u64 = a.calls_by_status.values().sum();
    let parts: Vec<String> = a
        .calls_by_status
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    format!("{total}: {}", parts.join(", "))
}

/// `secrets found in captured workspace content: N (kind n, …)`.
fn secrets_found(s: &WorkspaceSecrets) -> String {
    let kinds: Vec<String> = s.kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
    if kinds.is_empty() {
        format!("secrets found in captured workspace content: {}", s.found)
    } else {
        format!(
            "secrets found in captured workspace content: {} ({})",
            s.found,
            kinds.join(", ")
        )
    }
}

/// What the secret scan read and left out.
fn secrets_scanned(s: &WorkspaceSecrets) -> String {
    let mut out = format!(
        "{} blobs scanned ({} bytes), {} skipped over audit_scan_bytes_max ({} bytes)",
        s.blobs_scanned, s.bytes_scanned, s.blobs_skipped, s.scan_bytes_max
    );
    if s.blobs_missing > 0 {
        out.push_str(&format!("; {} missing", s.blobs_missing));
    }
    out
}

/// The withheld files (credential files, never captured), if any.
fn secrets_withheld(s: &WorkspaceSecrets) -> Option<String> {
    (!s.withheld.is_empty()).then(|| {
        format!(
            "withheld credential files, not captured: {}",
            s.withheld.join(", ")
        )
    })
}

fn secret_kinds(kinds: &std::collections::BTreeMap<String, u64>) -> String {
    kinds
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn host_list(a: &Audit) -> String {
    a.network
        .hosts
        .iter()
        .map(|(h, n)| format!("{h} ({n})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The text report.
pub fn text(a: &Audit, paint: Paint) -> String {
    let mut o = String::new();
    let h = &a.header;
    let field = |o: &mut String, k: &str, v: &str| {
        let _ = writeln!(o, "{} {v}", paint.bold(&format!("{k:<9}")));
    };
    field(&mut o, "session", &h.session);
    field(&mut o, "workspace", &h.workspace);
    field(
        &mut o,
        "catalog",
        &format!("{} (cairn {})", h.catalog, h.engine_version),
    );
    if let Some(i) = &a.imported {
        field(&mut o, "imported", &i.line());
    }
    field(&mut o, "started", &h.started);
    field(
        &mut o,
        "ended",
        &format!("{} ({})", h.ended, elapsed(h.duration_ms * 1000)),
    );
    field(&mut o, "state", &state(a));
    field(&mut o, "lineage", &lineage(a));
    field(&mut o, "integrity", &integrity(a));
    field(&mut o, "head", &format!("seq {}", h.head_seq));
    let _ = writeln!(o, "          {}", h.head_hash);
    field(&mut o, "calls", &counts(a));
    let section = |o: &mut String, title: &str, n: usize| {
        let _ = writeln!(o, "\n{}", paint.head(&format!("== {title} ({n})")));
    };

    section(&mut o, "Files written", a.writes.len());
    for w in &a.writes {
        let _ = writeln!(
            o,
            "seq {} {} {} {}{}",
            w.seq,
            op(w),
            w.path,
            format!("{:?}", w.status).to_lowercase(),
            w.call.as_ref().map_or(String::new(), |c| format!(" ({c})"))
        );
        let _ = writeln!(
            o,
            "  before {}  after {}",
            short(&w.before),
            short(&w.after)
        );
        for l in w.diff.lines() {
            let _ = writeln!(o, "  {}", paint.diff_line(l));
        }
    }

    section(&mut o, "Files read", a.reads.len());
    for r in &a.reads {
        let _ = writeln!(
            o,
            "seq {} {} lines {} of {} ({})",
            r.seq,
            r.path,
            ranges(&r.ranges),
            r.total_lines,
            r.call
        );
    }

    section(&mut o, "Commands run", a.commands.len());
    for c in &a.commands {
        let _ = writeln!(
            o,
            "seq {} {} {} {} {} {} {} bytes out{}",
            c.seq,
            c.call,
            kind(c),
            c.status,
            exit(c),
            c.elapsed_us.map_or("-".into(), elapsed),
            c.output_bytes,
            c.id.as_ref().map_or(String::new(), |i| format!(" [{i}]"))
        );
        let cwd = if c.cwd.is_empty() { "." } else { &c.cwd };
        let _ = writeln!(o, "  in {cwd}: $ {}", c.command);
        if let Some(e) = &c.error {
            let _ = writeln!(o, "  error: {e}");
        }
    }
    section(
        &mut o,
        "Processes still running or lost",
        a.processes_open.len(),
    );
    for p in &a.processes_open {
        let _ = writeln!(
            o,
            "{} pid {} {}: $ {}",
            p.id,
            p.pid.map_or("-".into(), |p| p.to_string()),
            p.state,
            p.command
        );
    }

    section(
        &mut o,
        "Network",
        a.network.fetches.len() + a.network.searches.len(),
    );
    if !a.network.hosts.is_empty() {
        let _ = writeln!(o, "hosts: {}", host_list(a));
    }
    for f in &a.network.fetches {
        let how = match (&f.error, f.status) {
            (Some(e), _) => e.clone(),
            (None, Some(s)) => format!("HTTP {s}, {} bytes", f.bytes),
            (None, None) => format!("{} bytes", f.bytes),
        };
        let _ = writeln!(o, "seq {} fetch {} ({})", f.seq, f.url, f.call);
        let _ = writeln!(o, "  {how}");
    }
    for s in &a.network.searches {
        let _ = writeln!(
            o,
            "seq {} search \"{}\" {} ({})",
            s.seq, s.query, s.status, s.call
        );
    }

    section(&mut o, "Permissions", a.permissions.len());
    for p in &a.permissions {
        let _ = writeln!(
            o,
            "seq {} {} {} {} -> {}{}",
            p.seq,
            p.call,
            p.tool,
            p.key,
            answer(p),
            if p.guarded { " guarded" } else { "" }
        );
        for l in p.detail.lines() {
            let _ = writeln!(o, "  {l}");
        }
    }

    section(&mut o, "Refusals", a.refusals.len());
    for r in &a.refusals {
        let rule = r
            .rule
            .map(|x| format!("{x:?}"))
            .map(|x| snake(&x))
            .unwrap_or_else(|| r.status.as_str().to_string());
        let _ = writeln!(
            o,
            "seq {} {} {} {} {}{}",
            r.seq,
            r.call,
            r.tool,
            r.status.as_str(),
            rule,
            r.path.as_ref().map_or(String::new(), |p| format!(" {p}"))
        );
        let _ = writeln!(o, "  {}", r.reason);
    }

    section(&mut o, "Interrupted calls", a.interrupted.len());
    for i in &a.interrupted {
        let _ = writeln!(
            o,
            "seq {} {} {}: {}",
            i.seq,
            i.call,
            i.tool,
            i.outcome_text()
        );
    }

    if !a.injections.is_empty() {
        section(&mut o, "Injection suspected", a.injections.len());
        for i in &a.injections {
            let _ = writeln!(
                o,
                "seq {} {} {}: {}",
                i.seq,
                i.call,
                i.tool,
                marks(&i.marks)
            );
        }
    }

    section(&mut o, "Redactions", a.redactions.len());
    for (k, n) in &a.redactions {
        let _ = writeln!(o, "{k}: {n}");
    }
    let ws = &a.workspace_secrets;
    section(
        &mut o,
        "Secrets in captured workspace content",
        ws.files.len(),
    );
    let _ = writeln!(o, "{}", secrets_found(ws));
    for f in &ws.files {
        let _ = writeln!(
            o,
            "  {} {}: {}",
            f.path,
            &f.hash[..12.min(f.hash.len())],
            secret_kinds(&f.kinds)
        );
    }
    let _ = writeln!(o, "{}", secrets_scanned(ws));
    if let Some(w) = secrets_withheld(ws) {
        let _ = writeln!(o, "{w}");
    }
    if !a.integrity.clean {
        section(&mut o, "Integrity problems", a.integrity.list.len());
        for p in &a.integrity.list {
            let _ = writeln!(
                o,
                "line {} seq {}: {}",
                p.line,
                p.seq.map_or("-".into(), |s| s.to_string()),
                p.what
            );
        }
    }
    o
}

/// The phrases a flagged result held, quoted.
fn marks(m: &[String]) -> String {
    m.iter()
        .map(|x| format!("\"{x}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `ReadBeforeEdit` → `read_before_edit`.
fn snake(s: &str) -> String {
    let mut o = String::new();
    for (i, c) in s.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 {
                o.push('_');
            }
            o.extend(c.to_lowercase());
        } else {
            o.push(c);
        }
    }
    o
}

/// Escapes `|` and newlines for a Markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ⏎ ")
}

/// The Markdown report.
pub fn markdown(a: &Audit) -> String {
    let mut o = String::new();
    let h = &a.header;
    let _ = writeln!(o, "# Audit of session `{}`\n", h.session);
    let _ = writeln!(o, "| | |\n|---|---|");
    for (k, v) in [
        ("workspace", format!("`{}`", h.workspace)),
        (
            "catalog",
            format!("{} (cairn {})", h.catalog, h.engine_version),
        ),
        ("started", h.started.clone()),
        (
            "ended",
            format!("{} ({})", h.ended, elapsed(h.duration_ms * 1000)),
        ),
        ("state", state(a)),
        ("lineage", lineage(a)),
        ("integrity", integrity(a)),
        ("head", format!("seq {} `{}`", h.head_seq, h.head_hash)),
        ("calls", counts(a)),
    ] {
        let _ = writeln!(o, "| {k} | {} |", cell(&v));
    }

    let _ = writeln!(o, "\n## Files written ({})\n", a.writes.len());
    for w in &a.writes {
        let _ = writeln!(
            o,
            "### `{}` — {} ({}, seq {}{})\n",
            w.path,
            op(w),
            format!("{:?}", w.status).to_lowercase(),
            w.seq,
            w.call.as_ref().map_or(String::new(), |c| format!(", {c}"))
        );
        let _ = writeln!(
            o,
            "before `{}` · after `{}`\n\n```diff\n{}\n```\n",
            short(&w.before),
            short(&w.after),
            w.diff
        );
    }

    let _ = writeln!(o, "## Files read ({})\n", a.reads.len());
    if !a.reads.is_empty() {
        let _ = writeln!(
            o,
            "| seq | call | path | lines | of |\n|---|---|---|---|---|"
        );
        for r in &a.reads {
            let _ = writeln!(
                o,
                "| {} | {} | `{}` | {} | {} |",
                r.seq,
                r.call,
                cell(&r.path),
                ranges(&r.ranges),
                r.total_lines
            );
        }
        o.push('\n');
    }

    let _ = writeln!(o, "## Commands run ({})\n", a.commands.len());
    if !a.commands.is_empty() {
        let _ = writeln!(
            o,
            "| seq | call | command | cwd | kind | status | exit | elapsed | output |\n|---|---|---|---|---|---|---|---|---|"
        );
        for c in &a.commands {
            let _ = writeln!(
                o,
                "| {} | {} | `{}` | `{}` | {} | {} | {} | {} | {} B |",
                c.seq,
                c.call,
                cell(&c.command),
                if c.cwd.is_empty() { "." } else { &c.cwd },
                kind(c),
                c.status,
                exit(c),
                c.elapsed_us.map_or("-".into(), elapsed),
                c.output_bytes
            );
        }
        o.push('\n');
    }
    let _ = writeln!(
        o,
        "## Processes still running or lost ({})\n",
        a.processes_open.len()
    );
    for p in &a.processes_open {
        let _ = writeln!(o, "- {} ({}): `{}`", p.id, p.state, p.command);
    }

    let _ = writeln!(o, "## Network\n");
    let _ = writeln!(
        o,
        "Hosts: {}\n",
        if a.network.hosts.is_empty() {
            "none".to_string()
        } else {
            host_list(a)
        }
    );
    for f in &a.network.fetches {
        let how = match (&f.error, f.status) {
            (Some(e), _) => e.clone(),
            (None, Some(s)) => format!("HTTP {s}, {} bytes", f.bytes),
            (None, None) => format!("{} bytes", f.bytes),
        };
        let _ = writeln!(
            o,
            "- seq {} fetch `{}` ({}): {}",
            f.seq,
            f.url,
            f.call,
            cell(&how)
        );
    }
    for s in &a.network.searches {
        let _ = writeln!(
            o,
            "- seq {} search “{}” ({}): {}",
            s.seq, s.query, s.call, s.status
        );
    }

    let _ = writeln!(o, "\n## Permissions ({})\n", a.permissions.len());
    if !a.permissions.is_empty() {
        let _ = writeln!(
            o,
            "| seq | call | tool | key | decision | guarded | detail |\n|---|---|---|---|---|---|---|"
        );
        for p in &a.permissions {
            let _ = writeln!(
                o,
                "| {} | {} | {} | `{}` | {} | {} | {} |",
                p.seq,
                p.call,
                p.tool,
                cell(&p.key),
                answer(p),
                if p.guarded { "yes" } else { "" },
                cell(&p.detail)
            );
        }
        o.push('\n');
    }

    let _ = writeln!(o, "## Refusals ({})\n", a.refusals.len());
    if !a.refusals.is_empty() {
        let _ = writeln!(
            o,
            "| seq | call | tool | status | rule | path | reason |\n|---|---|---|---|---|---|---|"
        );
        for r in &a.refusals {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.seq,
                r.call,
                r.tool,
                r.status.as_str(),
                r.rule.map_or(String::new(), |x| snake(&format!("{x:?}"))),
                r.path.as_deref().map_or(String::new(), cell),
                cell(&r.reason)
            );
        }
        o.push('\n');
    }

    let _ = writeln!(o, "## Interrupted calls ({})\n", a.interrupted.len());
    for i in &a.interrupted {
        let _ = writeln!(
            o,
            "- seq {} {} {}: {}",
            i.seq,
            i.call,
            i.tool,
            i.outcome_text()
        );
    }
    if !a.injections.is_empty() {
        let _ = writeln!(o, "## Injection suspected ({})\n", a.injections.len());
        let _ = writeln!(o, "| seq | call | tool | marks |\n|---|---|---|---|");
        for i in &a.injections {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} |",
                i.seq,
                i.call,
                i.tool,
                cell(&marks(&i.marks))
            );
        }
        o.push('\n');
    }
    let _ = writeln!(o, "## Redactions ({})\n", a.redactions.len());
    for (k, n) in &a.redactions {
        let _ = writeln!(o, "- {k}: {n}");
    }
    let ws = &a.workspace_secrets;
    if !a.redactions.is_empty() {
        o.push('\n');
    }
    let _ = writeln!(
        o,
        "## Secrets in captured workspace content ({})\n",
        ws.files.len()
    );
    let _ = writeln!(o, "{}\n", secrets_found(ws));
    if !ws.files.is_empty() {
        let _ = writeln!(o, "| path | content | secrets |\n|---|---|---|");
        for f in &ws.files {
            let _ = writeln!(
                o,
                "| `{}` | `{}` | {} |",
                cell(&f.path),
                &f.hash[..12.min(f.hash.len())],
                secret_kinds(&f.kinds)
            );
        }
        o.push('\n');
    }
    let _ = writeln!(o, "{}", secrets_scanned(ws));
    if let Some(w) = secrets_withheld(ws) {
        let _ = writeln!(o, "\n{}", cell(&w));
    }
    if !a.integrity.clean {
        let _ = writeln!(o, "\n## Integrity problems ({})\n", a.integrity.list.len());
        for p in &a.integrity.list {
            let _ = writeln!(
                o,
                "- line {} seq {}: {}",
                p.line,
                p.seq.map_or("-".into(), |s| s.to_string()),
                cell(&p.what)
            );
        }
    }
    o
}

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// The colour of a status on the timeline.
fn colour(status: &str) -> &'static str {
    match status {
        "ok" => "#2e9e4f",
        "error" | "failed" => "#d64541",
        "denied" => "#8e44ad",
        "blocked" => "#e67e22",
        "timeout" => "#c0392b",
        "cancelled" => "#7f8c8d",
        "running" | "unfinished" | "interrupted" => "#f1c40f",
        _ => "#3498db",
    }
}

const CSS: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#1d232a;background:#fdfdfc}
h1{font-size:1.5em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
code,pre{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
table{border-collapse:collapse;width:100%;margin:.5em 0}td,th{border:1px solid #e2e2e2;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f4f6}.hdr td:first-child{font-weight:600;width:9em}
pre.diff{background:#f7f7f7;border:1px solid #e5e5e5;padding:.5em;overflow-x:auto}
.add{background:#e6ffed;display:block}.del{background:#ffeef0;display:block}.hunk{color:#0366d6;display:block}
.clean{color:#2e9e4f;font-weight:600}.bad{color:#d64541;font-weight:600}
#timeline svg{width:100%;height:auto;border:1px solid #e5e5e5;background:#fff}
.legend span{display:inline-block;margin-right:1em}.legend i{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:middle}
summary{cursor:pointer}
"#;

const JS: &str = r#"
document.getElementById('expand').addEventListener('click',function(){
  var open=this.dataset.open!=='1';this.dataset.open=open?'1':'0';
  document.querySelectorAll('details.write').forEach(function(d){d.open=open});
  this.textContent=open?'collapse all diffs':'expand all diffs';
});
"#;

fn diff_html(diff: &str) -> String {
    let mut o = String::new();
    for l in diff.lines() {
        let sign = crate::paint::diff_sign(l);
        let class = if l.starts_with("@@") {
            Some("hunk")
        } else if l.starts_with("---") || l.starts_with("+++") {
            None
        } else {
            match sign {
                Some('+') => Some("add"),
                Some('-') => Some("del"),
                _ => None,
            }
        };
        match class {
            Some(c) => {
                let _ = write!(o, "<span class=\"{c}\">{}</span>", esc(l));
            }
            None => {
                let _ = writeln!(o, "{}", esc(l));
            }
        }
    }
    o
}

/// The timeline: one bar per call and per process, on a time axis.
fn timeline(a: &Audit) -> String {
    // The axis spans the calls and processes (the session's start includes the scan of
    // the workspace, which would squeeze every bar to the right).
    let t0 = a
        .calls
        .iter()
        .map(|c| c.start_ms)
        .chain(a.commands.iter().map(|c| c.start_ms))
        .min()
        .unwrap_or(0);
    let t1 = a
        .calls
        .iter()
        .map(|c| c.end_ms)
        .chain(a.commands.iter().map(|c| c.end_ms))
        .max()
        .unwrap_or(a.header.duration_ms);
    let span = t1.saturating_sub(t0).max(1) as f64;
    let label_w = 190.0;
    let plot_w = 780.0;
    let row_h = 18.0;
    let rows = a.calls.len() + a.commands.len();
    let height = 30.0 + row_h * rows as f64 + 10.0;
    let x = |ms: u64| label_w + plot_w * (ms.saturating_sub(t0) as f64 / span);
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {height}\" role=\"img\" aria-label=\"timeline\">",
        label_w + plot_w + 10.0
    );
    // The axis: five ticks.
    for i in 0..=4 {
        let ms = t0 + (span * f64::from(i) / 4.0) as u64;
        let tx = x(ms);
        let anchor = if i == 4 { "end" } else { "middle" };
        let _ = write!(
            o,
            "<line x1=\"{tx:.1}\" y1=\"18\" x2=\"{tx:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/><text x=\"{tx:.1}\" y=\"13\" font-size=\"10\" text-anchor=\"{anchor}\" fill=\"#666\">+{}</text>",
            height - 5.0,
            esc(&elapsed(ms * 1000))
        );
    }
    let mut y = 24.0;
    let mut bar = |o: &mut String,
                   label: &str,
                   from: u64,
                   to: u64,
                   status: &str,
                   title: &str,
                   class: &str| {
        let x0 = x(from);
        let w = (x(to) - x0).max(2.0);
        let _ = write!(
            o,
            "<g class=\"bar {class}\" data-status=\"{}\"><title>{}</title><text x=\"4\" y=\"{:.1}\" font-size=\"11\" fill=\"#333\">{}</text><rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{:.1}\" rx=\"2\" fill=\"{}\"/></g>",
            esc(status),
            esc(title),
            y + row_h - 6.0,
            esc(label),
            row_h - 4.0,
            colour(status)
        );
        y += row_h;
    };
    for c in &a.calls {
        let label: String = format!("{} {}", c.call, c.tool).chars().take(28).collect();
        let title = format!(
            "{} {} {} ({}): {}",
            c.call,
            c.tool,
            c.status,
            c.elapsed_us.map_or("-".into(), elapsed),
            c.summary
        );
        bar(
            &mut o, &label, c.start_ms, c.end_ms, &c.status, &title, "call",
        );
    }
    for c in &a.commands {
        let label: String = format!("{} {}", c.id.as_deref().unwrap_or("$"), c.command)
            .chars()
            .take(28)
            .collect();
        let title = format!("{} {} {}: {}", c.call, kind(c), c.status, c.command);
        bar(
            &mut o, &label, c.start_ms, c.end_ms, &c.status, &title, "process",
        );
    }
    o.push_str("</svg>");
    o
}

fn table(o: &mut String, head: &[&str], rows: Vec<Vec<String>>) {
    if rows.is_empty() {
        o.push_str("<p>none</p>\n");
        return;
    }
    o.push_str("<table><tr>");
    for h in head {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr>\n");
    for r in rows {
        o.push_str("<tr>");
        for c in r {
            let _ = write!(o, "<td>{c}</td>");
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
}

/// The HTML report: one file, no external resource.
pub fn html(a: &Audit) -> String {
    let h = &a.header;
    let mut o = String::new();
    let _ = write!(
        o,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>cairn audit {}</title><style>{CSS}</style></head><body>\n",
        esc(&h.session)
    );
    let _ = writeln!(
        o,
        "<h1>Audit of session <code>{}</code></h1>",
        esc(&h.session)
    );
    let integ = format!(
        "<span class=\"{}\">{}</span>",
        if a.integrity.clean { "clean" } else { "bad" },
        esc(&integrity(a))
    );
    let rows = [
        ("workspace", format!("<code>{}</code>", esc(&h.workspace))),
        (
            "catalog",
            esc(&format!("{} (cairn {})", h.catalog, h.engine_version)),
        ),
        ("started", esc(&h.started)),
        (
            "ended",
            esc(&format!("{} ({})", h.ended, elapsed(h.duration_ms * 1000))),
        ),
        ("state", esc(&state(a))),
        ("lineage", esc(&lineage(a))),
        ("integrity", integ),
        (
            "head",
            format!("seq {} <code>{}</code>", h.head_seq, esc(&h.head_hash)),
        ),
        ("calls", esc(&counts(a))),
    ];
    o.push_str("<table class=\"hdr\">");
    for (k, v) in rows {
        let _ = write!(o, "<tr><td>{k}</td><td>{v}</td></tr>");
    }
    o.push_str("</table>\n");

    o.push_str("<h2>Timeline</h2>\n<div id=\"timeline\">");
    o.push_str(&timeline(a));
    o.push_str("<p class=\"legend\">");
    for s in [
        "ok",
        "error",
        "denied",
        "blocked",
        "timeout",
        "cancelled",
        "unfinished",
    ] {
        let _ = write!(
            o,
            "<span><i style=\"background:{}\"></i>{s}</span>",
            colour(s)
        );
    }
    o.push_str("</p></div>\n");

    let _ = writeln!(
        o,
        "<h2>Files written ({})</h2>\n<button id=\"expand\">expand all diffs</button>",
        a.writes.len()
    );
    for w in &a.writes {
        let _ = writeln!(
            o,
            "<details class=\"write\" open><summary><code>{}</code> — {} ({}, seq {}{}) before <code>{}</code> after <code>{}</code></summary><pre class=\"diff\">{}</pre></details>",
            esc(&w.path),
            op(w),
            format!("{:?}", w.status).to_lowercase(),
            w.seq,
            w.call
                .as_ref()
                .map_or(String::new(), |c| format!(", {}", esc(c))),
            short(&w.before),
            short(&w.after),
            diff_html(&w.diff)
        );
    }

    let _ = writeln!(o, "<h2>Files read ({})</h2>", a.reads.len());
    table(
        &mut o,
        &["seq", "call", "path", "lines", "of"],
        a.reads
            .iter()
            .map(|r| {
                vec![
                    r.seq.to_string(),
                    esc(&r.call),
                    format!("<code>{}</code>", esc(&r.path)),
                    ranges(&r.ranges),
                    r.total_lines.to_string(),
                ]
            })
            .collect(),
    );
    let _ = writeln!(o, "<h2>Commands run ({})</h2>", a.commands.len());
    table(
        &mut o,
        &[
            "seq", "call", "command", "cwd", "kind", "status", "exit", "elapsed", "output",
        ],
        a.commands
            .iter()
            .map(|c| {
                vec![
                    c.seq.to_string(),
                    esc(&c.call),
                    format!("<code>{}</code>", esc(&c.command)),
                    format!(
                        "<code>{}</code>",
                        esc(if c.cwd.is_empty() { "." } else { &c.cwd })
                    ),
                    kind(c).into(),
                    esc(&c.status),
                    esc(&exit(c)),
                    c.elapsed_us.map_or("-".into(), elapsed),
                    format!("{} B", c.output_bytes),
                ]
            })
            .collect(),
    );
    let _ = writeln!(
        o,
        "<h2>Processes still running or lost ({})</h2>",
        a.processes_open.len()
    );
    table(
        &mut o,
        &["id", "pid", "state", "command"],
        a.processes_open
            .iter()
            .map(|p| {
                vec![
                    esc(&p.id),
                    p.pid.map_or("-".into(), |p| p.to_string()),
                    esc(&p.state),
                    format!("<code>{}</code>", esc(&p.command)),
                ]
            })
            .collect(),
    );
    let _ = writeln!(
        o,
        "<h2>Network</h2><p>Hosts: {}</p>",
        if a.network.hosts.is_empty() {
            "none".into()
        } else {
            esc(&host_list(a))
        }
    );
    let mut net: Vec<Vec<String>> = a
        .network
        .fetches
        .iter()
        .map(|f| {
            vec![
                f.seq.to_string(),
                esc(&f.call),
                "fetch".into(),
                format!("<code>{}</code>", esc(&f.url)),
                esc(&match (&f.error, f.status) {
                    (Some(e), _) => e.clone(),
                    (None, Some(s)) => format!("HTTP {s}, {} bytes", f.bytes),
                    (None, None) => format!("{} bytes", f.bytes),
                }),
            ]
        })
        .collect();
    net.extend(a.network.searches.iter().map(|s| {
        vec![
            s.seq.to_string(),
            esc(&s.call),
            "search".into(),
            esc(&s.query),
            esc(&s.status),
        ]
    }));
    table(&mut o, &["seq", "call", "kind", "what", "outcome"], net);
    let _ = writeln!(o, "<h2>Permissions ({})</h2>", a.permissions.len());
    table(
        &mut o,
        &[
            "seq", "call", "tool", "key", "decision", "guarded", "detail",
        ],
        a.permissions
            .iter()
            .map(|p| {
                vec![
                    p.seq.to_string(),
                    esc(&p.call),
                    esc(&p.tool),
                    format!("<code>{}</code>", esc(&p.key)),
                    esc(&answer(p)),
                    if p.guarded {
                        "yes".into()
                    } else {
                        String::new()
                    },
                    format!("<pre>{}</pre>", esc(&p.detail)),
                ]
            })
            .collect(),
    );
    let _ = writeln!(o, "<h2>Refusals ({})</h2>", a.refusals.len());
    table(
        &mut o,
        &["seq", "call", "tool", "status", "rule", "path", "reason"],
        a.refusals
            .iter()
            .map(|r| {
                vec![
                    r.seq.to_string(),
                    esc(&r.call),
                    esc(&r.tool),
                    r.status.as_str().into(),
                    r.rule.map_or(String::new(), |x| snake(&format!("{x:?}"))),
                    r.path.as_deref().map_or(String::new(), esc),
                    esc(&r.reason),
                ]
            })
            .collect(),
    );
    let _ = writeln!(o, "<h2>Interrupted calls ({})</h2>", a.interrupted.len());
    table(
        &mut o,
        &["seq", "call", "tool", "outcome"],
        a.interrupted
            .iter()
            .map(|i| {
                vec![
                    i.seq.to_string(),
                    esc(&i.call),
                    esc(&i.tool),
                    esc(&i.outcome_text()),
                ]
            })
            .collect(),
    );
    if !a.injections.is_empty() {
        let _ = writeln!(o, "<h2>Injection suspected ({})</h2>", a.injections.len());
        table(
            &mut o,
            &["seq", "call", "tool", "marks"],
            a.injections
                .iter()
                .map(|i| {
                    vec![
                        i.seq.to_string(),
                        esc(&i.call),
                        esc(&i.tool),
                        esc(&marks(&i.marks)),
                    ]
                })
                .collect(),
        );
    }
    let _ = writeln!(o, "<h2>Redactions ({})</h2>", a.redactions.len());
    table(
        &mut o,
        &["kind", "count"],
        a.redactions
            .iter()
            .map(|(k, n)| vec![esc(k), n.to_string()])
            .collect(),
    );
    let ws = &a.workspace_secrets;
    let _ = writeln!(
        o,
        "<h2>Secrets in captured workspace content ({})</h2>",
        ws.files.len()
    );
    let _ = writeln!(o, "<p>{}</p>", esc(&secrets_found(ws)));
    table(
        &mut o,
        &["path", "content", "secrets"],
        ws.files
            .iter()
            .map(|f| {
                vec![
                    esc(&f.path),
                    esc(&f.hash[..12.min(f.hash.len())]),
                    esc(&secret_kinds(&f.kinds)),
                ]
            })
            .collect(),
    );
    let _ = writeln!(o, "<p>{}</p>", esc(&secrets_scanned(ws)));
    if let Some(w) = secrets_withheld(ws) {
        let _ = writeln!(o, "<p>{}</p>", esc(&w));
    }
    if !a.integrity.clean {
        let _ = writeln!(
            o,
            "<h2>Integrity problems ({})</h2>",
            a.integrity.list.len()
        );
        table(
            &mut o,
            &["line", "seq", "problem"],
            a.integrity
                .list
                .iter()
                .map(|p| {
                    vec![
                        p.line.to_string(),
                        p.seq.map_or("-".into(), |s| s.to_string()),
                        esc(&p.what),
                    ]
                })
                .collect(),
        );
    }
    let _ = write!(o, "<script>{JS}</script>\n</body></html>\n");
    o
}
