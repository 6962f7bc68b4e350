//! Renderings of an audit (`cairn_replay::audit::Audit`): text for an 80-column
//! terminal, Markdown, and one self-contained HTML file with a timeline. The JSON form
//! is the audit value itself, serialised.

use std::fmt::Write as _;

use std::collections::HashMap;

use cairn_replay::audit::{
    Audit, CallEntry, CommandEntry, PermissionEntry, TokenUse, Turn, WorkspaceSecrets, WriteEntry,
};

use crate::paint::Paint;
use crate::summary::{count, elapsed};

/// Characters of a call's input summary on its conversation line.
pub const SUMMARY_CHARS_MAX: usize = 70;

/// Bytes of a call's output the HTML report shows (the rest is in the session's
/// output blob): at 10,000 calls, the page stays a few tens of megabytes.
pub const HTML_OUTPUT_BYTES_MAX: usize = 4096;

/// Calls up to which the HTML timeline draws one bar per call; past it, calls are
/// counted into [`TIMELINE_BUCKETS`] columns of time.
pub const TIMELINE_BARS_MAX: usize = 200;

/// Columns of the aggregated timeline.
pub const TIMELINE_BUCKETS: usize = 120;

/// The models of a session: `openai m-1 at http://host/v1`, one per model.
pub fn models(a: &Audit) -> Vec<String> {
    a.header
        .models
        .iter()
        .map(|m| match &m.base_url {
            Some(u) => format!("{} {} at {u}", m.provider, m.model),
            None => format!("{} {}", m.provider, m.model),
        })
        .collect()
}

/// One model's tokens: `m-1: 360 in (0 cached), 90 out over 3 turns`.
pub fn tokens_line(t: &TokenUse) -> String {
    let mut s = format!(
        "{}: {} in ({} cached), {} out over {}",
        t.model,
        t.input,
        t.cached,
        t.output,
        count(t.turns, "turn")
    );
    if t.turns_without_usage > 0 {
        s.push_str(&format!(
            " ({} without usage)",
            count(t.turns_without_usage, "turn")
        ));
    }
    s
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
    let calls: HashMap<&str, &CallEntry> = a.calls.iter().map(|c| (c.call.as_str(), c)).collect();
    let mut writes: HashMap<&str, Vec<&WriteEntry>> = HashMap::new();
    for w in &a.writes {
        if let Some(c) = &w.call {
            writes.entry(c.as_str()).or_default().push(w);
        }
    }
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
    for turn in &a.conversation {
        match turn {
            Turn::User { seq, text: t, .. } => text(&mut o, *seq, "user", t),
            Turn::Model {
                seq,
                text: t,
                interrupted,
                ..
            } if !t.is_empty() && !is_answer(a, turn) => text(
                &mut o,
                *seq,
                if *interrupted {
                    "model (interrupted)"
                } else {
                    "model"
                },
                t,
            ),
            Turn::Model { .. } => {}
            Turn::Call { seq, call } => {
                let Some(c) = calls.get(call.as_str()) else {
                    continue;
                };
                o.push(format!("{seq:>6}  {}", call_line(c)));
                if c.status != "ok"
                    && !verbose
                    && let Some(l) = c.output.lines().next()
                {
                    let l: String = cairn_replay::audit::one_line(l).chars().take(100).collect();
                    o.push(format!("{:>6}    → {l}", ""));
                }
                if verbose {
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
                    for w in writes.get(call.as_str()).into_iter().flatten() {
                        o.push(format!("{:>6}    {} {}:", "", op(w), w.path));
                        for l in w.diff.lines() {
                            o.push(format!("{:>6}      {}", "", paint.diff_line(l)));
                        }
                    }
                }
            }
        }
    }
    if let Some(ans) = &a.answer {
        o.push(String::new());
        o.push(paint.bold("answer:"));
        o.extend(
            ans.lines()
                .map(|l| format!("  {}", l.replace('\t', "    "))),
        );
    }
    o
}

/// True for the model turn that is the final answer (shown once, as the answer).
fn is_answer(a: &Audit, t: &Turn) -> bool {
    let Turn::Model { seq, .. } = t else {
        return false;
    };
    a.answer.is_some()
        && a.conversation.iter().rev().find_map(|t| match t {
            Turn::Model { seq, .. } => Some(*seq),
            _ => None,
        }) == Some(*seq)
}

/// The number of steps a conversation section counts: messages, model text, calls.
fn steps(a: &Audit) -> usize {
    a.conversation
        .iter()
        .filter(|t| !matches!(t, Turn::Model { text, .. } if text.is_empty()))
        .count()
}

/// A permission's key, with the tool's name only when the key does not start with it
/// (`edit_file`, `shell shell:git` is `shell:git`).
fn perm_key(p: &PermissionEntry) -> String {
    if p.key.starts_with(&p.tool) {
        p.key.clone()
    } else {
        format!("{} {}", p.tool, p.key)
    }
}

/// One network entry: fetches and searches together, in seq order.
struct NetRow {
    seq: u64,
    call: String,
    kind: &'static str,
    what: String,
    /// The host as asked for, and the host answering after redirects when it differs.
    host: String,
    outcome: String,
}

fn net_rows(a: &Audit) -> Vec<NetRow> {
    let mut rows: Vec<NetRow> = a
        .network
        .fetches
        .iter()
        .map(|f| NetRow {
            seq: f.seq,
            call: f.call.clone(),
            kind: "fetch",
            what: f.url.clone(),
            host: match &f.resolved_host {
                Some(h) => format!("{} → {h}", f.host),
                None => f.host.clone(),
            },
            outcome: match (&f.error, f.status) {
                (Some(e), _) => e.clone(),
                (None, Some(s)) => format!("HTTP {s}, {}", count(f.bytes, "byte")),
                (None, None) => count(f.bytes, "byte"),
            },
        })
        .chain(a.network.searches.iter().map(|s| NetRow {
            seq: s.seq,
            call: s.call.clone(),
            kind: "search",
            what: s.query.clone(),
            host: String::new(),
            outcome: s.status.clone(),
        }))
        .collect();
    rows.sort_by_key(|r| r.seq);
    rows
}

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
    let wait = p.wait_ms.map(|w| format!(" after {}", elapsed(w * 1000)));
    match s {
        Some(s) => format!("{a} ({s}{})", wait.unwrap_or_default()),
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
            "clean ({} re-checked, {})",
            count(a.integrity.decisions_checked, "decision"),
            count(a.integrity.blobs_checked, "blob")
        )
    } else {
        format!(
            "{}: the report shows what the intact records say (cairn verify lists them)",
            count(a.integrity.problems, "problem")
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
    if parts.is_empty() {
        return "0".into();
    }
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
        "{} scanned ({}), {} skipped over audit_scan_bytes_max ({})",
        count(s.blobs_scanned, "blob"),
        count(s.bytes_scanned, "byte"),
        s.blobs_skipped,
        count(s.scan_bytes_max, "byte")
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
    let ms = models(a);
    if ms.is_empty() {
        field(&mut o, "model", "none (no model turn)");
    }
    for m in &ms {
        field(&mut o, "model", m);
    }
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
    for t in &a.tokens {
        field(&mut o, "tokens", &tokens_line(t));
    }
    if let Some(c) = &a.cost {
        field(&mut o, "cost", &crate::summary::cost_line(c));
    }
    let section = |o: &mut String, title: &str, n: usize| {
        let _ = writeln!(o, "\n{}", paint.head(&format!("== {title} ({n})")));
    };

    // A log that does not verify: what is wrong comes first.
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

    section(&mut o, "Conversation", steps(a));
    for l in conversation_text(a, false, paint) {
        let _ = writeln!(o, "{l}");
    }

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
            "seq {} {} {} {} {} {} {} out{}",
            c.seq,
            c.call,
            kind(c),
            c.status,
            exit(c),
            c.elapsed_us.map_or("-".into(), elapsed),
            count(c.output_bytes, "byte"),
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

    let net = net_rows(a);
    section(&mut o, "Network", net.len());
    if !a.network.hosts.is_empty() {
        let _ = writeln!(o, "hosts: {}", host_list(a));
    }
    for n in &net {
        let host = if n.host.is_empty() {
            String::new()
        } else {
            format!(" [{}]", n.host)
        };
        let _ = writeln!(o, "seq {} {} {}{host} ({})", n.seq, n.kind, n.what, n.call);
        let _ = writeln!(o, "  {}", n.outcome);
    }

    section(&mut o, "Permissions", a.permissions.len());
    for p in &a.permissions {
        let _ = writeln!(
            o,
            "seq {} {} {} -> {}{}",
            p.seq,
            p.call,
            perm_key(p),
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

    section(&mut o, "Failed calls", a.failed.len());
    for r in &a.failed {
        let _ = writeln!(
            o,
            "seq {} {} {} {}",
            r.seq,
            r.call,
            r.tool,
            r.status.as_str()
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
    s.replace('|', "\\|")
        .replace('\n', " ⏎ ")
        .replace('\t', "    ")
}

/// The Markdown report.
pub fn markdown(a: &Audit) -> String {
    let mut o = String::new();
    let h = &a.header;
    let _ = writeln!(o, "# Audit of session `{}`\n", h.session);
    // An imported session says so first: where it came from is half of what it is.
    let imported = a.imported.as_ref().map(|i| ("imported", i.line()));
    let head = [
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
        (
            "model",
            match models(a) {
                m if m.is_empty() => "none (no model turn)".into(),
                m => m.join("; "),
            },
        ),
        (
            "tokens",
            match a.tokens.iter().map(tokens_line).collect::<Vec<_>>() {
                t if t.is_empty() => "none".into(),
                t => t.join("; "),
            },
        ),
    ];
    let cost = a
        .cost
        .as_ref()
        .map(|c| ("cost", crate::summary::cost_line(c)));
    md_table(
        &mut o,
        &["", ""],
        imported
            .into_iter()
            .chain(head)
            .chain(cost)
            .map(|(k, v)| vec![k.to_string(), cell(&v)]),
    );

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

    let _ = writeln!(o, "\n## Conversation ({})\n", steps(a));
    let calls: HashMap<&str, &CallEntry> = a.calls.iter().map(|c| (c.call.as_str(), c)).collect();
    for t in &a.conversation {
        match t {
            Turn::User { seq, text, .. } => {
                let _ = writeln!(o, "- **user** (seq {seq}): {}", cell(text));
            }
            Turn::Model {
                seq,
                text,
                interrupted,
                ..
            } if !text.is_empty() && !is_answer(a, t) => {
                let cut = if *interrupted { " (interrupted)" } else { "" };
                let _ = writeln!(o, "- **model**{cut} (seq {seq}): {}", cell(text));
            }
            Turn::Model { .. } => {}
            Turn::Call { seq, call } => {
                let Some(c) = calls.get(call.as_str()) else {
                    continue;
                };
                let summary: String = c.summary.chars().take(SUMMARY_CHARS_MAX).collect();
                let wait = c.wait_ms.map_or(String::new(), |w| {
                    format!(", waited {} for permission", elapsed(w * 1000))
                });
                let _ = writeln!(
                    o,
                    "- `{}` {} `{}` — {}, {}{wait} (seq {seq})",
                    c.call,
                    c.tool,
                    summary.replace('`', "'"),
                    c.status,
                    c.elapsed_us.map_or("-".into(), elapsed),
                );
            }
        }
    }
    if let Some(ans) = &a.answer {
        let _ = writeln!(o, "\n**Answer:**\n");
        for l in ans.lines() {
            let _ = writeln!(o, "> {l}");
        }
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
    if md_table(
        &mut o,
        &["seq", "call", "path", "lines", "of"],
        a.reads.iter().map(|r| {
            vec![
                r.seq.to_string(),
                r.call.clone(),
                format!("`{}`", cell(&r.path)),
                ranges(&r.ranges),
                r.total_lines.to_string(),
            ]
        }),
    ) {
        o.push('\n');
    }

    let _ = writeln!(o, "## Commands run ({})\n", a.commands.len());
    if md_table(
        &mut o,
        &[
            "seq", "call", "command", "cwd", "kind", "status", "exit", "elapsed", "output",
        ],
        a.commands.iter().map(|c| {
            vec![
                c.seq.to_string(),
                c.call.clone(),
                format!("`{}`", cell(&c.command)),
                format!("`{}`", if c.cwd.is_empty() { "." } else { &c.cwd }),
                kind(c).to_string(),
                c.status.to_string(),
                exit(c),
                c.elapsed_us.map_or("-".into(), elapsed),
                format!("{} B", c.output_bytes),
            ]
        }),
    ) {
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

    let net = net_rows(a);
    let _ = writeln!(o, "## Network ({})\n", net.len());
    let _ = writeln!(
        o,
        "Hosts: {}\n",
        if a.network.hosts.is_empty() {
            "none".to_string()
        } else {
            host_list(a)
        }
    );
    md_table(
        &mut o,
        &["seq", "call", "kind", "what", "host", "outcome"],
        net.iter().map(|n| {
            vec![
                n.seq.to_string(),
                n.call.to_string(),
                n.kind.to_string(),
                format!("`{}`", cell(&n.what)),
                cell(&n.host),
                cell(&n.outcome),
            ]
        }),
    );
    let _ = writeln!(o, "\n## Permissions ({})\n", a.permissions.len());
    if md_table(
        &mut o,
        &["seq", "call", "key", "decision", "guarded", "detail"],
        a.permissions.iter().map(|p| {
            vec![
                p.seq.to_string(),
                p.call.clone(),
                format!("`{}`", cell(&perm_key(p))),
                answer(p),
                if p.guarded { "yes" } else { "" }.to_string(),
                cell(&p.detail),
            ]
        }),
    ) {
        o.push('\n');
    }

    let _ = writeln!(o, "## Refusals ({})\n", a.refusals.len());
    if md_table(
        &mut o,
        &["seq", "call", "tool", "status", "rule", "path", "reason"],
        a.refusals.iter().map(|r| {
            vec![
                r.seq.to_string(),
                r.call.clone(),
                r.tool.clone(),
                r.status.as_str().to_string(),
                r.rule.map_or(String::new(), |x| snake(&format!("{x:?}"))),
                r.path.as_deref().map_or(String::new(), cell),
                cell(&r.reason),
            ]
        }),
    ) {
        o.push('\n');
    }

    let _ = writeln!(o, "## Failed calls ({})\n", a.failed.len());
    if md_table(
        &mut o,
        &["seq", "call", "tool", "status", "reason"],
        a.failed.iter().map(|r| {
            vec![
                r.seq.to_string(),
                r.call.clone(),
                r.tool.clone(),
                r.status.as_str().to_string(),
                cell(&r.reason),
            ]
        }),
    ) {
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
        md_table(
            &mut o,
            &["seq", "call", "tool", "marks"],
            a.injections.iter().map(|i| {
                vec![
                    i.seq.to_string(),
                    i.call.clone(),
                    i.tool.clone(),
                    cell(&marks(&i.marks)),
                ]
            }),
        );
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
    if md_table(
        &mut o,
        &["path", "content", "secrets"],
        ws.files.iter().map(|f| {
            vec![
                format!("`{}`", cell(&f.path)),
                format!("`{}`", &f.hash[..12.min(f.hash.len())]),
                secret_kinds(&f.kinds),
            ]
        }),
    ) {
        o.push('\n');
    }
    let _ = writeln!(o, "{}", secrets_scanned(ws));
    if let Some(w) = secrets_withheld(ws) {
        let _ = writeln!(o, "\n{}", cell(&w));
    }
    o
}

/// Writes a Markdown table: its head (an empty name is a blank head cell), the rule,
/// then a line per row, whose cells are written as given (the caller escapes them).
/// Nothing when there is no row; true when the table was written.
fn md_table(o: &mut String, head: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> bool {
    let mut rows = rows.into_iter().peekable();
    if rows.peek().is_none() {
        return false;
    }
    o.push('|');
    for h in head {
        o.push_str(if h.is_empty() { " |" } else { " " });
        if !h.is_empty() {
            o.push_str(h);
            o.push_str(" |");
        }
    }
    o.push_str("\n|");
    for _ in head {
        o.push_str("---|");
    }
    o.push('\n');
    for row in rows {
        debug_assert_eq!(row.len(), head.len(), "a row of {head:?}");
        o.push('|');
        for c in &row {
            let _ = write!(o, " {c} |");
        }
        o.push('\n');
    }
    true
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

/// The span of the timeline's axis: the calls and processes (the session's start
/// includes the scan of the workspace, which would squeeze every bar to the right).
fn axis(a: &Audit) -> (u64, f64) {
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
    (t0, t1.saturating_sub(t0).max(1) as f64)
}

const LABEL_W: f64 = 190.0;
const PLOT_W: f64 = 780.0;

/// Five ticks of the time axis, their lines `height` tall.
fn ticks(o: &mut String, t0: u64, span: f64, height: f64) {
    for i in 0..=4 {
        let ms = t0 + (span * f64::from(i) / 4.0) as u64;
        let tx = LABEL_W + PLOT_W * f64::from(i) / 4.0;
        let anchor = if i == 4 { "end" } else { "middle" };
        let _ = write!(
            o,
            "<line x1=\"{tx:.1}\" y1=\"18\" x2=\"{tx:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/><text x=\"{tx:.1}\" y=\"13\" font-size=\"10\" text-anchor=\"{anchor}\" fill=\"#666\">+{}</text>",
            height - 5.0,
            esc(&elapsed(ms.saturating_sub(t0) * 1000))
        );
    }
}

/// The timeline: one bar per call and per process up to [`TIMELINE_BARS_MAX`] calls
/// (a call's wait for a permission answer drawn grey, apart from its run), each linking
/// to the call in the conversation; past it, [`timeline_buckets`].
fn timeline(a: &Audit) -> String {
    if a.calls.len() > TIMELINE_BARS_MAX {
        return timeline_buckets(a);
    }
    let (t0, span) = axis(a);
    let row_h = 18.0;
    let rows = a.calls.len() + a.commands.len();
    let height = 30.0 + row_h * rows as f64 + 10.0;
    let x = |ms: u64| LABEL_W + PLOT_W * (ms.saturating_sub(t0) as f64 / span);
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {height}\" role=\"img\" aria-label=\"timeline\">",
        LABEL_W + PLOT_W + 10.0
    );
    ticks(&mut o, t0, span, height);
    let mut y = 24.0;
    for c in &a.calls {
        let label: String = format!("{} {}", c.call, c.tool).chars().take(28).collect();
        let wait = c.wait_ms.unwrap_or(0);
        let title = format!(
            "{} {} {} (ran {}{}): {}",
            c.call,
            c.tool,
            c.status,
            c.elapsed_us.map_or("-".into(), elapsed),
            c.wait_ms.map_or(String::new(), |w| format!(
                ", waited {} for permission",
                elapsed(w * 1000)
            )),
            c.summary
        );
        let x0 = x(c.start_ms);
        let w = (x(c.end_ms) - x0).max(2.0);
        let ww = (x(c.start_ms + wait) - x0).min(w);
        let _ = write!(
            o,
            "<a href=\"#call-{}\"><g class=\"bar call\" data-status=\"{}\"><title>{}</title><text x=\"4\" y=\"{:.1}\" font-size=\"11\" fill=\"#333\">{}</text><rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{:.1}\" rx=\"2\" fill=\"{}\"/>",
            esc(&c.call),
            esc(&c.status),
            esc(&title),
            y + row_h - 6.0,
            esc(&label),
            row_h - 4.0,
            colour(&c.status)
        );
        if ww >= 1.0 {
            let _ = write!(
                o,
                "<rect class=\"wait\" x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{ww:.1}\" height=\"{:.1}\" fill=\"#b0b7bf\"/>",
                row_h - 4.0
            );
        }
        o.push_str("</g></a>");
        y += row_h;
    }
    for c in &a.commands {
        let label: String = format!("{} {}", c.id.as_deref().unwrap_or("$"), c.command)
            .chars()
            .take(28)
            .collect();
        let title = format!("{} {} {}: {}", c.call, kind(c), c.status, c.command);
        let x0 = x(c.start_ms);
        let w = (x(c.end_ms) - x0).max(2.0);
        let _ = write!(
            o,
            "<a href=\"#call-{}\"><g class=\"bar process\" data-status=\"{}\"><title>{}</title><text x=\"4\" y=\"{:.1}\" font-size=\"11\" fill=\"#333\">{}</text><rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{:.1}\" rx=\"2\" fill=\"{}\"/></g></a>",
            esc(&c.call),
            esc(&c.status),
            esc(&title),
            y + row_h - 6.0,
            esc(&label),
            row_h - 4.0,
            colour(&c.status)
        );
        y += row_h;
    }
    o.push_str("</svg>");
    o
}

/// The timeline of a long session: the time axis cut into [`TIMELINE_BUCKETS`]
/// columns, each a stack of the calls started in it by status, with a grey row below
/// for the time spent waiting for permission answers; a column links to its first call.
fn timeline_buckets(a: &Audit) -> String {
    let (t0, span) = axis(a);
    let n = TIMELINE_BUCKETS;
    let bucket = |ms: u64| (((ms.saturating_sub(t0)) as f64 / span * n as f64) as usize).min(n - 1);
    // Per column: calls by status, the first call, the wait.
    let mut cols: Vec<(std::collections::BTreeMap<&str, u64>, Option<&str>, u64)> =
        vec![(Default::default(), None, 0); n];
    for c in &a.calls {
        let col = &mut cols[bucket(c.start_ms)];
        *col.0.entry(c.status.as_str()).or_default() += 1;
        col.1.get_or_insert(c.call.as_str());
        col.2 += c.wait_ms.unwrap_or(0);
    }
    let most = cols
        .iter()
        .map(|c| c.0.values().sum::<u64>())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let most_wait = cols.iter().map(|c| c.2).max().unwrap_or(0);
    let (plot_h, wait_h) = (140.0, 30.0);
    let height = 24.0 + plot_h + 8.0 + wait_h + 20.0;
    let col_w = PLOT_W / n as f64;
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {height}\" role=\"img\" aria-label=\"timeline\">",
        LABEL_W + PLOT_W + 10.0
    );
    ticks(&mut o, t0, span, height);
    let _ = write!(
        o,
        "<text x=\"4\" y=\"{:.1}\" font-size=\"11\" fill=\"#333\">{} started,</text><text x=\"4\" y=\"{:.1}\" font-size=\"11\" fill=\"#333\">by time (column max {})</text><text x=\"4\" y=\"{:.1}\" font-size=\"11\" fill=\"#333\">waiting for permission</text>",
        24.0 + plot_h / 2.0,
        count(a.calls.len() as u64, "call"),
        24.0 + plot_h / 2.0 + 14.0,
        most,
        24.0 + plot_h + 8.0 + wait_h / 2.0
    );
    for (i, (statuses, first, wait)) in cols.iter().enumerate() {
        let Some(first) = first else { continue };
        let total: u64 = statuses.values().sum();
        let x0 = LABEL_W + col_w * i as f64;
        let parts: Vec<String> = statuses.iter().map(|(s, k)| format!("{k} {s}")).collect();
        let _ = write!(
            o,
            "<a href=\"#call-{}\"><g class=\"bucket\"><title>{} from {}: {}; waited {} for permission</title>",
            esc(first),
            count(total, "call"),
            esc(first),
            esc(&parts.join(", ")),
            elapsed(wait * 1000)
        );
        let mut y = 24.0 + plot_h;
        for (s, k) in statuses {
            let h = plot_h * *k as f64 / most;
            y -= h;
            let _ = write!(
                o,
                "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{}\"/>",
                (col_w - 1.0).max(1.0),
                colour(s)
            );
        }
        if *wait > 0 && most_wait > 0 {
            let h = wait_h * *wait as f64 / most_wait as f64;
            let _ = write!(
                o,
                "<rect class=\"wait\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"#b0b7bf\"/>",
                24.0 + plot_h + 8.0 + wait_h - h,
                (col_w - 1.0).max(1.0)
            );
        }
        o.push_str("</g></a>");
    }
    o.push_str("</svg>");
    o
}

fn table(o: &mut String, head: &[&str], rows: Vec<Vec<String>>) {
    if rows.is_empty() {
        o.push_str("<p>none</p>\n");
        return;
    }
    o.push_str("<div class=\"box\"><table><tr>");
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
    o.push_str("</table></div>\n");
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

/// The conversation: messages, and each call as a `<details>` (input, output, diffs)
/// tagged with what it did, for the filters.
fn conversation_html(o: &mut String, a: &Audit) {
    let mut kinds: HashMap<&str, Vec<&'static str>> = HashMap::new();
    fn tag<'a>(kinds: &mut HashMap<&'a str, Vec<&'static str>>, call: &'a str, k: &'static str) {
        let v = kinds.entry(call).or_default();
        if !v.contains(&k) {
            v.push(k);
        }
    }
    let mut writes: HashMap<&str, Vec<&WriteEntry>> = HashMap::new();
    for w in &a.writes {
        if let Some(c) = &w.call {
            writes.entry(c.as_str()).or_default().push(w);
        }
    }
    for c in writes.keys() {
        tag(&mut kinds, c, "writes");
    }
    for c in &a.commands {
        tag(&mut kinds, &c.call, "commands");
    }
    for f in &a.network.fetches {
        tag(&mut kinds, &f.call, "network");
    }
    for s in &a.network.searches {
        tag(&mut kinds, &s.call, "network");
    }
    for p in &a.permissions {
        tag(&mut kinds, &p.call, "permissions");
    }
    for c in &a.calls {
        if c.status != "ok" {
            tag(&mut kinds, &c.call, "errors");
        }
    }
    let calls: HashMap<&str, &CallEntry> = a.calls.iter().map(|c| (c.call.as_str(), c)).collect();
    let _ = writeln!(o, "<h2>Conversation ({})</h2>", steps(a));
    o.push_str("<div class=\"filters\">show: ");
    for (f, label) in [
        ("all", "all"),
        ("errors", "errors"),
        ("writes", "writes"),
        ("commands", "commands"),
        ("network", "network"),
        ("permissions", "permissions"),
    ] {
        let _ = write!(
            o,
            "<button data-f=\"{f}\"{}>{label}</button>",
            if f == "all" { " class=\"on\"" } else { "" }
        );
    }
    o.push_str("</div>\n<div id=\"conversation\">\n");
    for t in &a.conversation {
        match t {
            Turn::User { seq, text, .. } => {
                let _ = writeln!(
                    o,
                    "<div class=\"msg user\" id=\"seq-{seq}\"><b>user · seq {seq}</b>{}</div>",
                    esc(text)
                );
            }
            Turn::Model {
                seq,
                text,
                model,
                interrupted,
                ..
            } if !text.is_empty() && !is_answer(a, t) => {
                let _ = writeln!(
                    o,
                    "<div class=\"msg model\" id=\"seq-{seq}\"><b>{}{} · seq {seq}</b>{}</div>",
                    esc(model),
                    if *interrupted { " (interrupted)" } else { "" },
                    esc(text)
                );
            }
            Turn::Model { .. } => {}
            Turn::Call { seq, call } => {
                let Some(c) = calls.get(call.as_str()) else {
                    continue;
                };
                let summary: String = c.summary.chars().take(SUMMARY_CHARS_MAX * 2).collect();
                let wait = c.wait_ms.map_or(String::new(), |w| {
                    format!(" · waited {} for permission", elapsed(w * 1000))
                });
                let _ = write!(
                    o,
                    "<details class=\"call\" id=\"call-{}\" data-k=\"{}\"><summary><i class=\"st\" style=\"background:{}\"></i><code>{}</code> <span class=\"tool\">{}</span> <span class=\"stname\">{}</span> {}{} <code>{}</code></summary><div>",
                    esc(&c.call),
                    kinds
                        .get(c.call.as_str())
                        .map_or(String::new(), |k| k.join(" ")),
                    colour(&c.status),
                    esc(&c.call),
                    esc(&c.tool),
                    esc(&c.status),
                    c.elapsed_us.map_or("-".into(), elapsed),
                    esc(&wait),
                    esc(&summary)
                );
                let _ = write!(
                    o,
                    "<p>seq {seq} · started {}{}</p><h4>input</h4><pre>{}</pre><h4>output</h4>",
                    esc(&c.started),
                    c.finished
                        .as_ref()
                        .map_or(String::new(), |f| format!(" · finished {}", esc(f))),
                    esc(&serde_json::to_string_pretty(&c.input).unwrap_or_default())
                );
                let (shown, was_cut) = cut(&c.output, HTML_OUTPUT_BYTES_MAX);
                let _ = write!(o, "<pre>{}</pre>", esc(shown));
                if was_cut {
                    let _ = write!(
                        o,
                        "<p>(output cut at {} of {}: cairn show -v has it whole)</p>",
                        count(HTML_OUTPUT_BYTES_MAX as u64, "byte"),
                        count(c.output.len() as u64, "byte")
                    );
                }
                for w in writes.get(call.as_str()).into_iter().flatten() {
                    let _ = write!(
                        o,
                        "<h4>{} <code>{}</code></h4><pre class=\"diff\">{}</pre>",
                        op(w),
                        esc(&w.path),
                        diff_html(&w.diff)
                    );
                }
                o.push_str("</div></details>\n");
            }
        }
    }
    if let Some(ans) = &a.answer {
        let _ = writeln!(
            o,
            "<div class=\"msg answer\"><b>answer</b>{}</div>",
            esc(ans)
        );
    }
    o.push_str("</div>\n");
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
        (
            "model",
            match models(a) {
                m if m.is_empty() => "none (no model turn)".into(),
                m => esc(&m.join("; ")),
            },
        ),
        (
            "tokens",
            match a.tokens.iter().map(tokens_line).collect::<Vec<_>>() {
                t if t.is_empty() => "none".into(),
                t => esc(&t.join("; ")),
            },
        ),
    ];
    o.push_str("<div class=\"box\"><table class=\"hdr\">");
    if let Some(i) = &a.imported {
        let _ = write!(o, "<tr><td>imported</td><td>{}</td></tr>", esc(&i.line()));
    }
    for (k, v) in rows {
        let _ = write!(o, "<tr><td>{k}</td><td>{v}</td></tr>");
    }
    if let Some(c) = &a.cost {
        let _ = write!(
            o,
            "<tr><td>cost</td><td>{}</td></tr>",
            esc(&crate::summary::cost_line(c))
        );
    }
    o.push_str("</table></div>\n");
    if !a.integrity.clean {
        let _ = writeln!(
            o,
            "<div class=\"alarm\"><h2>Integrity problems ({})</h2>",
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
        o.push_str("</div>\n");
    }

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
    let _ = write!(
        o,
        "<span><i style=\"background:#b0b7bf\"></i>waiting for permission</span>"
    );
    o.push_str("</p></div>\n");
    conversation_html(&mut o, a);

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
    let net = net_rows(a);
    let _ = writeln!(
        o,
        "<h2>Network ({})</h2><p>Hosts: {}</p>",
        net.len(),
        if a.network.hosts.is_empty() {
            "none".into()
        } else {
            esc(&host_list(a))
        }
    );
    table(
        &mut o,
        &["seq", "call", "kind", "what", "host", "outcome"],
        net.iter()
            .map(|n| {
                vec![
                    n.seq.to_string(),
                    format!("<a href=\"#call-{0}\">{0}</a>", esc(&n.call)),
                    n.kind.into(),
                    format!("<code>{}</code>", esc(&n.what)),
                    esc(&n.host),
                    esc(&n.outcome),
                ]
            })
            .collect(),
    );
    let _ = writeln!(o, "<h2>Permissions ({})</h2>", a.permissions.len());
    table(
        &mut o,
        &["seq", "call", "key", "decision", "guarded", "detail"],
        a.permissions
            .iter()
            .map(|p| {
                vec![
                    p.seq.to_string(),
                    format!("<a href=\"#call-{0}\">{0}</a>", esc(&p.call)),
                    format!("<code>{}</code>", esc(&perm_key(p))),
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
                    format!("<a href=\"#call-{0}\">{0}</a>", esc(&r.call)),
                    esc(&r.tool),
                    r.status.as_str().into(),
                    r.rule.map_or(String::new(), |x| snake(&format!("{x:?}"))),
                    r.path.as_deref().map_or(String::new(), esc),
                    esc(&r.reason),
                ]
            })
            .collect(),
    );
    let _ = writeln!(o, "<h2>Failed calls ({})</h2>", a.failed.len());
    table(
        &mut o,
        &["seq", "call", "tool", "status", "reason"],
        a.failed
            .iter()
            .map(|r| {
                vec![
                    r.seq.to_string(),
                    format!("<a href=\"#call-{0}\">{0}</a>", esc(&r.call)),
                    esc(&r.tool),
                    r.status.as_str().into(),
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
    let _ = write!(o, "<script>{JS}</script>\n</body></html>\n");
    o
}
