//! The report's content, built once from an audit: [`sections`], in the order every
//! format shows them.

use std::collections::HashMap;

use cairn_replay::audit::{
    Audit, CommandEntry, PermissionEntry, TokenUse, Turn, WorkspaceSecrets, WriteEntry,
};

use super::{Block, Cell, Conversation, Diff, Field, Item, Row, Section, Step, Style, Table};
use crate::summary::{count, elapsed};

/// The report: its header, what is wrong with the log (when something is), the
/// timeline, the conversation, then every kind of entry the audit gathered.
pub fn sections(a: &Audit) -> Vec<Section<'_>> {
    let mut s = vec![header(a)];
    if !a.integrity.clean {
        s.push(problems(a));
    }
    s.push(section("Timeline", None, vec![Block::Timeline(a)]));
    s.push(conversation(a));
    s.push(section(
        "Files written",
        Some(a.writes.len()),
        vec![Block::Diffs(a.writes.iter().map(diff).collect())],
    ));
    s.extend([reads(a), commands(a), processes(a), network(a)]);
    s.extend([permissions(a), refusals(a), failed(a), interrupted(a)]);
    if !a.injections.is_empty() {
        s.push(injections(a));
    }
    s.push(redactions(a));
    s.push(secrets(&a.workspace_secrets));
    s
}

fn section<'a>(title: &'static str, count: Option<usize>, blocks: Vec<Block<'a>>) -> Section<'a> {
    Section {
        title,
        subject: None,
        count,
        alarm: false,
        blocks,
    }
}

/// A section of one table of `rows` under `head`.
fn table<'a>(title: &'static str, head: &[&'static str], rows: Vec<Row>) -> Section<'a> {
    section(
        title,
        Some(rows.len()),
        vec![Block::Table(Table {
            head: head.to_vec(),
            rows,
        })],
    )
}

fn row(cells: Vec<Cell>, line: String, details: Vec<String>) -> Row {
    Row {
        cells,
        item: Item { line, details },
    }
}

fn plain(s: impl ToString) -> Cell {
    Cell::plain(s.to_string())
}

fn call(c: &str) -> Cell {
    Cell::new(c, Style::Call)
}

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

/// The session's fields. An imported session says so first: where it came from is
/// half of what it is.
fn header(a: &Audit) -> Section<'_> {
    let h = &a.header;
    let one = |key, cells: Vec<Cell>| Field {
        key,
        values: vec![cells],
    };
    let mut fields: Vec<Field> = a
        .imported
        .iter()
        .map(|i| one("imported", vec![plain(i.line())]))
        .collect();
    let model = match models(a) {
        m if m.is_empty() => vec!["none (no model turn)".to_string()],
        m => m,
    };
    fields.extend([
        one("workspace", vec![Cell::code(&h.workspace)]),
        // An imported session offered no catalogue: the agent that wrote it.
        match &a.imported {
            Some(i) => one(
                "agent",
                vec![plain(format!(
                    "{} (imported by cairn {})",
                    i.agent_name(),
                    h.engine_version
                ))],
            ),
            None => one(
                "catalog",
                vec![plain(format!("{} (cairn {})", h.catalog, h.engine_version))],
            ),
        },
        one("started", vec![plain(&h.started)]),
        one(
            "ended",
            vec![plain(format!(
                "{} ({})",
                h.ended,
                elapsed(h.duration_ms * 1000)
            ))],
        ),
        one("state", vec![plain(state(a))]),
        one("lineage", vec![plain(lineage(a))]),
        one("integrity", vec![integrity(a)]),
        one(
            "head",
            vec![
                plain(format!("seq {}", h.head_seq)),
                Cell::new(&h.head_hash, Style::Hash),
            ],
        ),
        one("calls", vec![plain(counts(a))]),
        Field {
            key: "model",
            values: model.into_iter().map(|m| vec![plain(m)]).collect(),
        },
        Field {
            key: "tokens",
            values: a
                .tokens
                .iter()
                .map(|t| vec![plain(tokens_line(t))])
                .collect(),
        },
    ]);
    if let Some(c) = &a.cost {
        fields.push(one("cost", vec![plain(crate::summary::cost_line(c))]));
    }
    Section {
        title: "session",
        subject: Some(&h.session),
        count: None,
        alarm: false,
        blocks: vec![Block::Fields(fields)],
    }
}

/// A log that does not verify: what is wrong comes first.
fn problems(a: &Audit) -> Section<'_> {
    let rows = a
        .integrity
        .list
        .iter()
        .map(|p| {
            let seq = p.seq.map_or("-".into(), |s| s.to_string());
            row(
                vec![plain(p.line), plain(&seq), plain(&p.what)],
                format!("line {} seq {seq}: {}", p.line, p.what),
                vec![],
            )
        })
        .collect();
    Section {
        alarm: true,
        ..table("Integrity problems", &["line", "seq", "problem"], rows)
    }
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

/// The conversation's steps: messages, model text, calls (each with what it wrote and
/// what it did). Exported to `cairn show` through [`super::conversation_text`].
pub(super) fn steps(a: &Audit) -> Conversation<'_> {
    let mut writes: HashMap<&str, Vec<&WriteEntry>> = HashMap::new();
    for w in &a.writes {
        if let Some(c) = &w.call {
            writes.entry(c.as_str()).or_default().push(w);
        }
    }
    let tags = tags(a, &writes);
    let calls: HashMap<&str, _> = a.calls.iter().map(|c| (c.call.as_str(), c)).collect();
    let steps = a
        .conversation
        .iter()
        .filter_map(|t| match t {
            Turn::User { seq, text, .. } => Some(Step::User { seq: *seq, text }),
            Turn::Model {
                seq,
                text,
                model,
                interrupted,
                ..
            } if !text.is_empty() && !is_answer(a, t) => Some(Step::Model {
                seq: *seq,
                model,
                text,
                interrupted: *interrupted,
            }),
            Turn::Model { .. } => None,
            Turn::Call { seq, call } => calls.get(call.as_str()).map(|c| Step::Call {
                seq: *seq,
                call: c,
                writes: writes.get(call.as_str()).cloned().unwrap_or_default(),
                tags: tags.get(call.as_str()).cloned().unwrap_or_default(),
            }),
            Turn::Switch { seq, from, to, .. } => Some(Step::Switch {
                seq: *seq,
                from,
                to,
            }),
        })
        .collect();
    Conversation {
        steps,
        answer: a.answer.as_deref(),
    }
}

/// What each call did, for the HTML filters.
fn tags<'a>(
    a: &'a Audit,
    writes: &HashMap<&'a str, Vec<&WriteEntry>>,
) -> HashMap<&'a str, Vec<&'static str>> {
    let mut tags: HashMap<&str, Vec<&'static str>> = HashMap::new();
    let mut tag = |call: &'a str, k: &'static str| {
        let v = tags.entry(call).or_default();
        if !v.contains(&k) {
            v.push(k);
        }
    };
    for c in writes.keys() {
        tag(c, "writes");
    }
    for c in &a.commands {
        tag(&c.call, "commands");
    }
    for f in &a.network.fetches {
        tag(&f.call, "network");
    }
    for s in &a.network.searches {
        tag(&s.call, "network");
    }
    for p in &a.permissions {
        tag(&p.call, "permissions");
    }
    for c in a.calls.iter().filter(|c| c.status != "ok") {
        tag(&c.call, "errors");
    }
    tags
}

/// The conversation, counting its messages, model text and calls (a call whose
/// record is lost counts, though it has no step to show).
fn conversation(a: &Audit) -> Section<'_> {
    let n = a
        .conversation
        .iter()
        .filter(|t| !matches!(t, Turn::Model { text, .. } if text.is_empty()))
        .count();
    section("Conversation", Some(n), vec![Block::Conversation(steps(a))])
}

fn diff(w: &WriteEntry) -> Diff<'_> {
    let status = format!("{:?}", w.status).to_lowercase();
    let op = op(w);
    Diff {
        title: vec![
            Cell::code(&w.path),
            plain(format!(
                "— {op} ({status}, seq {}{})",
                w.seq,
                w.call.as_ref().map_or(String::new(), |c| format!(", {c}"))
            )),
        ],
        line: format!(
            "seq {} {op} {} {status}{}",
            w.seq,
            w.path,
            w.call.as_ref().map_or(String::new(), |c| format!(" ({c})"))
        ),
        before: short(&w.before),
        after: short(&w.after),
        diff: &w.diff,
    }
}

fn reads(a: &Audit) -> Section<'_> {
    let rows = a
        .reads
        .iter()
        .map(|r| {
            let lines = ranges(&r.ranges);
            row(
                vec![
                    plain(r.seq),
                    plain(&r.call),
                    Cell::code(&r.path),
                    plain(&lines),
                    plain(r.total_lines),
                ],
                format!(
                    "seq {} {} lines {lines} of {} ({})",
                    r.seq, r.path, r.total_lines, r.call
                ),
                vec![],
            )
        })
        .collect();
    table("Files read", &["seq", "call", "path", "lines", "of"], rows)
}

fn commands(a: &Audit) -> Section<'_> {
    let rows = a
        .commands
        .iter()
        .map(|c| {
            let cwd = if c.cwd.is_empty() { "." } else { &c.cwd };
            let took = c.elapsed_us.map_or("-".into(), elapsed);
            let (kind, exit) = (kind(c), exit(c));
            let line = format!(
                "seq {} {} {kind} {} {exit} {took} {} out{}",
                c.seq,
                c.call,
                c.status,
                count(c.output_bytes, "byte"),
                c.id.as_ref().map_or(String::new(), |i| format!(" [{i}]"))
            );
            let mut details = vec![format!("in {cwd}: $ {}", c.command)];
            details.extend(c.error.iter().map(|e| format!("error: {e}")));
            let cells = vec![
                plain(c.seq),
                plain(&c.call),
                Cell::code(&c.command),
                Cell::code(cwd),
                plain(kind),
                plain(&c.status),
                plain(exit),
                plain(took),
                plain(format!("{} B", c.output_bytes)),
            ];
            row(cells, line, details)
        })
        .collect();
    let head = [
        "seq", "call", "command", "cwd", "kind", "status", "exit", "elapsed", "output",
    ];
    table("Commands run", &head, rows)
}

fn processes(a: &Audit) -> Section<'_> {
    let rows = a
        .processes_open
        .iter()
        .map(|p| {
            let pid = p.pid.map_or("-".into(), |p| p.to_string());
            row(
                vec![
                    plain(&p.id),
                    plain(&pid),
                    plain(&p.state),
                    Cell::code(&p.command),
                ],
                format!("{} pid {pid} {}: $ {}", p.id, p.state, p.command),
                vec![],
            )
        })
        .collect();
    table(
        "Processes still running or lost",
        &["id", "pid", "state", "command"],
        rows,
    )
}

/// Fetches and searches together, in seq order, after the hosts asked for.
fn network(a: &Audit) -> Section<'_> {
    let mut rows: Vec<(u64, Row)> = a
        .network
        .fetches
        .iter()
        .map(|f| {
            // The host as asked for, and the host answering after redirects when it
            // differs.
            let host = match &f.resolved_host {
                Some(h) => format!("{} → {h}", f.host),
                None => f.host.clone(),
            };
            let outcome = match (&f.error, f.status) {
                (Some(e), _) => e.clone(),
                (None, Some(s)) => format!("HTTP {s}, {}", count(f.bytes, "byte")),
                (None, None) => count(f.bytes, "byte"),
            };
            net_row(f.seq, &f.call, "fetch", &f.url, host, outcome)
        })
        .chain(a.network.searches.iter().map(|s| {
            net_row(
                s.seq,
                &s.call,
                "search",
                &s.query,
                String::new(),
                s.status.clone(),
            )
        }))
        .collect();
    rows.sort_by_key(|(seq, _)| *seq);
    let mut s = table(
        "Network",
        &["seq", "call", "kind", "what", "host", "outcome"],
        rows.into_iter().map(|(_, r)| r).collect(),
    );
    if !a.network.hosts.is_empty() {
        let hosts: Vec<String> = a
            .network
            .hosts
            .iter()
            .map(|(h, n)| format!("{h} ({n})"))
            .collect();
        let line = vec![plain(format!("hosts: {}", hosts.join(", ")))];
        s.blocks.insert(0, Block::Text(line));
    }
    s
}

fn net_row(seq: u64, c: &str, kind: &str, what: &str, host: String, outcome: String) -> (u64, Row) {
    let bracket = if host.is_empty() {
        String::new()
    } else {
        format!(" [{host}]")
    };
    let line = format!("seq {seq} {kind} {what}{bracket} ({c})");
    let cells = vec![
        plain(seq),
        call(c),
        plain(kind),
        Cell::code(what),
        plain(host),
        plain(&outcome),
    ];
    (seq, row(cells, line, vec![outcome]))
}

fn permissions(a: &Audit) -> Section<'_> {
    let rows = a
        .permissions
        .iter()
        .map(|p| {
            let (key, answer) = (perm_key(p), answer(p));
            row(
                vec![
                    plain(p.seq),
                    call(&p.call),
                    Cell::code(&key),
                    plain(&answer),
                    plain(if p.guarded { "yes" } else { "" }),
                    Cell::new(&p.detail, Style::Pre),
                ],
                format!(
                    "seq {} {} {key} -> {answer}{}",
                    p.seq,
                    p.call,
                    if p.guarded { " guarded" } else { "" }
                ),
                vec![p.detail.clone()],
            )
        })
        .collect();
    table(
        "Permissions",
        &["seq", "call", "key", "decision", "guarded", "detail"],
        rows,
    )
}

fn refusals(a: &Audit) -> Section<'_> {
    let rows = a
        .refusals
        .iter()
        .map(|r| {
            let rule = r.rule.map(|x| snake(&format!("{x:?}")));
            let path = r.path.as_deref().unwrap_or_default();
            let line = format!(
                "seq {} {} {} {} {}{}",
                r.seq,
                r.call,
                r.tool,
                r.status.as_str(),
                rule.as_deref().unwrap_or(r.status.as_str()),
                r.path.as_ref().map_or(String::new(), |p| format!(" {p}"))
            );
            let cells = vec![
                plain(r.seq),
                call(&r.call),
                plain(&r.tool),
                plain(r.status.as_str()),
                plain(rule.unwrap_or_default()),
                plain(path),
                plain(&r.reason),
            ];
            row(cells, line, vec![r.reason.clone()])
        })
        .collect();
    let head = ["seq", "call", "tool", "status", "rule", "path", "reason"];
    table("Refusals", &head, rows)
}

fn failed(a: &Audit) -> Section<'_> {
    let rows = a
        .failed
        .iter()
        .map(|r| {
            row(
                vec![
                    plain(r.seq),
                    call(&r.call),
                    plain(&r.tool),
                    plain(r.status.as_str()),
                    plain(&r.reason),
                ],
                format!("seq {} {} {} {}", r.seq, r.call, r.tool, r.status.as_str()),
                vec![r.reason.clone()],
            )
        })
        .collect();
    let head = ["seq", "call", "tool", "status", "reason"];
    table("Failed calls", &head, rows)
}

/// A section of calls with one thing to say of each, `what` (`outcome`): each a line
/// `seq 2 c1 read_file: unfinished`.
fn calls_saying<'s>(
    title: &'static str,
    what: &'static str,
    calls: impl Iterator<Item = (u64, &'s str, &'s str, String)>,
) -> Section<'static> {
    let rows = calls
        .map(|(seq, c, tool, said)| {
            row(
                vec![plain(seq), plain(c), plain(tool), plain(&said)],
                format!("seq {seq} {c} {tool}: {said}"),
                vec![],
            )
        })
        .collect();
    table(title, &["seq", "call", "tool", what], rows)
}

fn interrupted(a: &Audit) -> Section<'_> {
    let calls = a.interrupted.iter();
    let calls = calls.map(|i| (i.seq, i.call.as_str(), i.tool.as_str(), i.outcome_text()));
    calls_saying("Interrupted calls", "outcome", calls)
}

/// Results that read like instructions aimed at the model, with the phrases found.
fn injections(a: &Audit) -> Section<'_> {
    let calls = a.injections.iter().map(|i| {
        let marks: Vec<String> = i.marks.iter().map(|x| format!("\"{x}\"")).collect();
        (i.seq, i.call.as_str(), i.tool.as_str(), marks.join(", "))
    });
    calls_saying("Injection suspected", "marks", calls)
}

fn redactions(a: &Audit) -> Section<'_> {
    let rows = a
        .redactions
        .iter()
        .map(|(k, n)| row(vec![plain(k), plain(n)], format!("{k}: {n}"), vec![]))
        .collect();
    table("Redactions", &["kind", "count"], rows)
}

/// What the secret patterns found in the workspace content the session captured, what
/// they read and left out, and the credential files never captured.
fn secrets(s: &WorkspaceSecrets) -> Section<'_> {
    let kinds = |kinds: &std::collections::BTreeMap<String, u64>| {
        kinds
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let found = match kinds(&s.kinds) {
        k if k.is_empty() => s.found.to_string(),
        k => format!("{} ({k})", s.found),
    };
    let rows = s
        .files
        .iter()
        .map(|f| {
            let hash = &f.hash[..12.min(f.hash.len())];
            let kinds = kinds(&f.kinds);
            row(
                vec![Cell::code(&f.path), Cell::code(hash), plain(&kinds)],
                format!("  {} {hash}: {kinds}", f.path),
                vec![],
            )
        })
        .collect();
    let mut scanned = format!(
        "{} scanned ({}), {} skipped over audit_scan_bytes_max ({})",
        count(s.blobs_scanned, "blob"),
        count(s.bytes_scanned, "byte"),
        s.blobs_skipped,
        count(s.scan_bytes_max, "byte")
    );
    if s.blobs_missing > 0 {
        scanned.push_str(&format!("; {} missing", s.blobs_missing));
    }
    let mut blocks = vec![
        Block::Text(vec![plain(format!(
            "secrets found in captured workspace content: {found}"
        ))]),
        Block::Table(Table {
            head: vec!["path", "content", "secrets"],
            rows,
        }),
        Block::Text(vec![plain(scanned)]),
    ];
    if !s.withheld.is_empty() {
        blocks.push(Block::Text(vec![plain(format!(
            "withheld credential files, not captured: {}",
            s.withheld.join(", ")
        ))]));
    }
    section(
        "Secrets in captured workspace content",
        Some(s.files.len()),
        blocks,
    )
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

/// The first 12 characters of a content hash, `-` for none.
pub(super) fn short(hash: &Option<String>) -> String {
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

/// `edit`, `create`, `replace`, …
pub(super) fn op(w: &WriteEntry) -> String {
    format!("{:?}", w.op).to_lowercase()
}

/// `foreground` or `background`.
pub(super) fn kind(c: &CommandEntry) -> &'static str {
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

fn integrity(a: &Audit) -> Cell {
    if a.integrity.clean {
        let text = format!(
            "clean ({} re-checked, {})",
            count(a.integrity.decisions_checked, "decision"),
            count(a.integrity.blobs_checked, "blob")
        );
        Cell::new(text, Style::Good)
    } else {
        let text = format!(
            "{}: the report shows what the intact records say (cairn verify lists them)",
            count(a.integrity.problems, "problem")
        );
        Cell::new(text, Style::Bad)
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
    match calls_by_status(a) {
        parts if parts.is_empty() => "0".into(),
        parts => format!("{total}: {}", parts.join(", ")),
    }
}

/// The calls by status: `13 ok`, `5 error`, …
pub fn calls_by_status(a: &Audit) -> Vec<String> {
    a.calls_by_status
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect()
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
