//! The audit of a session: what an agent did, gathered from its records, its blobs and
//! a deep verification into one plain value that the command line renders as text,
//! Markdown, JSON or HTML. Gathering is pure: it reads only the loaded session (records
//! and blob store) and the verify report it is given.
//!
//! Each concern is a fold of its own, in its own module: the calls, what the model was
//! told of them (refusals, failures, interruptions, injections), the conversation, the
//! tokens, the files, the commands, the network, the permissions, how the session
//! ended, the redactions, the secrets of the captured workspace and the import. One
//! loop over the log hands every record to each fold (`Fold::apply`); each then
//! finishes into its part of [`Audit`], some with what another found (the permission
//! waits of each call, the end state that tells a lost process from a running one).

mod calls;
mod commands;
mod conversation;
mod files;
mod header;
mod import;
mod integrity;
mod network;
mod outcomes;
mod permissions;
mod secrets;
mod tokens;

use std::collections::{BTreeMap, BTreeSet};

use cairn_core::Record;
use serde::Serialize;

use crate::session::Session;
use crate::verify::{Problem, Report};

pub use calls::{CallEntry, input_summary};
pub use commands::{CommandEntry, OpenProcess};
pub use conversation::Turn;
pub use files::{DIFF_LINES_MAX, ReadEntry, WriteEntry};
pub use header::{EndState, Header, Lineage, ModelInfo, configured_model};
pub use import::{ImportInfo, import_info};
pub use integrity::Integrity;
pub use network::{FetchEntry, Network, SearchEntry, host_of};
pub use outcomes::{InjectionEntry, InterruptedEntry, RefusalEntry};
pub use permissions::PermissionEntry;
pub use secrets::{
    AUDIT_SCAN_BYTES_MAX, SCAN_CHUNK_BYTES, SCAN_OVERLAP_BYTES, SecretFile, WorkspaceSecrets,
    count_secrets, workspace_secrets,
};
pub use tokens::{
    Cost, PRICES_FILE_BYTES_MAX, Price, PricesError, TokenUse, parse_prices, read_prices,
};

/// Everything an audit shows.
#[derive(Debug, Clone, Serialize)]
pub struct Audit {
    pub header: Header,
    pub integrity: Integrity,
    /// What was said and done, in log order: user messages, model text, calls.
    pub conversation: Vec<Turn>,
    /// The model's final answer: the text of the last model turn when it asked for
    /// no call.
    pub answer: Option<String>,
    /// Tokens per model (from `model_turn.usage`), in the order first used.
    pub tokens: Vec<TokenUse>,
    /// Calls in the order they started (also the timeline's bars).
    pub calls: Vec<CallEntry>,
    pub writes: Vec<WriteEntry>,
    pub reads: Vec<ReadEntry>,
    pub commands: Vec<CommandEntry>,
    /// Background processes not finished at the end of the log.
    pub processes_open: Vec<OpenProcess>,
    pub network: Network,
    pub permissions: Vec<PermissionEntry>,
    pub refusals: Vec<RefusalEntry>,
    /// Calls that ended neither ok nor refused nor interrupted (`error`, `timeout`,
    /// `cancelled` without a rule): with the refusals and the interrupted calls, every
    /// call whose status is not `ok` is listed somewhere.
    pub failed: Vec<RefusalEntry>,
    pub interrupted: Vec<InterruptedEntry>,
    /// Calls whose result read like an instruction aimed at the model (prompt
    /// injection), flagged to it.
    pub injections: Vec<InjectionEntry>,
    /// Secrets redacted, per kind, over the whole session.
    pub redactions: BTreeMap<String, u64>,
    /// Secrets found in the workspace content the session captured as blobs.
    pub workspace_secrets: WorkspaceSecrets,
    /// Calls by final status (`unfinished` for calls without an end).
    pub calls_by_status: BTreeMap<String, u64>,
    /// Where an imported session came from; none for a session cairn ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported: Option<ImportInfo>,
    /// What the tokens cost, when the caller knows prices ([`Audit::price`]); the
    /// audit itself reads no prices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
}

/// Gathers the audit of a loaded session, given its deep verification.
pub fn audit(session: &Session, verified: &(Report, Vec<Problem>)) -> Audit {
    gather(session, verified, true)
}

/// What a session said and did, without a verification and without the workspace
/// secret scan (`cairn show`): its `integrity` says nothing was checked (zero
/// decisions, zero blobs) and its `workspace_secrets` is empty.
pub fn transcript(session: &Session) -> Audit {
    gather(session, &(Report::default(), Vec::new()), false)
}

/// One concern of the audit, built record by record: [`gather`] hands every record of
/// the log to it, in order, then finishes it into its part of the audit (each fold's
/// own `finish`, which may take what another fold found).
trait Fold {
    fn apply(&mut self, r: &Record);
}

/// A fold that may not run (the secret scan of `cairn show`).
impl<F: Fold> Fold for Option<F> {
    fn apply(&mut self, r: &Record) {
        if let Some(f) = self {
            f.apply(r);
        }
    }
}

/// One pass over the log through every fold, then each finished into its part of the
/// audit; `scan`: the captured workspace is scanned for secrets too.
fn gather(session: &Session, verified: &(Report, Vec<Problem>), scan: bool) -> Audit {
    let clock = Clock::of(&session.records);
    let mut calls = calls::CallsFold::new(clock.clone());
    let mut outcomes = outcomes::OutcomesFold::default();
    let mut conversation = conversation::ConversationFold::default();
    let mut tokens = tokens::TokensFold::default();
    let mut files = files::FilesFold::default();
    let mut commands = commands::CommandsFold::new(clock.clone());
    let mut network = network::NetworkFold::default();
    let mut permissions = permissions::PermissionsFold::default();
    let mut end = header::EndFold::default();
    let mut redactions = secrets::RedactionsFold::default();
    let mut captured = scan.then(|| secrets::CapturedFold::new(session.manifest().ok().as_deref()));
    let mut import = import::ImportFold::default();
    let mut folds: [&mut dyn Fold; 12] = [
        &mut calls,
        &mut outcomes,
        &mut conversation,
        &mut tokens,
        &mut files,
        &mut commands,
        &mut network,
        &mut permissions,
        &mut end,
        &mut redactions,
        &mut captured,
        &mut import,
    ];
    for r in &session.records {
        for f in &mut folds {
            f.apply(r);
        }
    }

    let end = end.finish(|| cairn_store::writer_pid(&session.dir).is_some());
    let (permissions, waits) = permissions.finish();
    let calls = calls.finish(&waits);
    let outcomes = outcomes.finish(&calls);
    let (commands, processes_open) = commands.finish(end.state);
    let (writes, reads) = files.finish(|hash| session.blob(hash, "a write's content").ok());
    let tokens = tokens.finish();
    let (conversation, answer) = conversation.finish();
    Audit {
        header: header::header(session, clock, end, &tokens),
        integrity: integrity::integrity(verified),
        conversation,
        answer,
        calls_by_status: calls::calls_by_status(&calls),
        tokens,
        calls,
        writes,
        reads,
        commands,
        processes_open,
        network: network.finish(),
        permissions,
        refusals: outcomes.refusals,
        failed: outcomes.failed,
        interrupted: outcomes.interrupted,
        injections: outcomes.injections,
        redactions: redactions.finish(),
        workspace_secrets: captured.map_or_else(WorkspaceSecrets::default, |c| {
            c.finish(&session.blobs, AUDIT_SCAN_BYTES_MAX)
        }),
        imported: import.finish(session.started.imported.as_deref()),
        cost: None,
    }
}

/// The session's time as the timeline counts it: milliseconds from its first record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Clock {
    /// The first record's time, in milliseconds since the epoch.
    t0: u64,
    /// The last record's time on this clock: where what has no end ends.
    end_ms: u64,
    /// Each record's time ([`cairn_core::state::Times`]) on this clock, by seq.
    times: std::rc::Rc<std::collections::HashMap<u64, u64>>,
}

impl Clock {
    fn of(records: &[Record]) -> Clock {
        let mut times = cairn_core::state::Times::default();
        let ms: Vec<(u64, u64)> = records
            .iter()
            .map(|r| (r.seq, millis(&times.next(r))))
            .collect();
        let t0 = ms.first().map_or(0, |m| m.1);
        let last = ms.last().map_or(0, |m| m.1);
        Clock {
            t0,
            end_ms: last.saturating_sub(t0),
            times: std::rc::Rc::new(
                ms.into_iter()
                    .map(|(seq, t)| (seq, t.saturating_sub(t0)))
                    .collect(),
            ),
        }
    }

    /// When `r` happened on this clock (0 before the first record, or when its time
    /// does not parse).
    fn at(&self, r: &Record) -> u64 {
        self.times.get(&r.seq).copied().unwrap_or(0)
    }
}

/// Milliseconds since the epoch of an RFC 3339 time (0 when it does not parse).
fn millis(ts: &str) -> u64 {
    ts.parse::<jiff::Timestamp>()
        .map(|t| u64::try_from(t.as_millisecond()).unwrap_or(0))
        .unwrap_or(0)
}

/// Text on one line for people: newlines shown as `⏎`, tabs as `⇥`, carriage returns
/// and other control characters dropped.
pub fn one_line(s: &str) -> String {
    s.chars()
        .filter_map(|c| match c {
            '\n' => Some('⏎'),
            '\t' => Some('⇥'),
            c if c.is_control() => None,
            c => Some(c),
        })
        .collect()
}

/// The set of statuses a timeline colours by, in legend order.
pub fn statuses(a: &Audit) -> BTreeSet<String> {
    a.calls.iter().map(|c| c.status.clone()).collect()
}

/// Records built in a test, and the folds run over them.
#[cfg(test)]
mod testing {
    use cairn_core::Record;
    use cairn_core::event::Event;

    use super::Fold;

    /// The time of a record `ms` milliseconds after the first, which is at
    /// `2025-01-02T03:04:05Z`.
    pub fn ts(ms: u64) -> String {
        let t = jiff::Timestamp::from_millisecond(1_735_787_045_000 + ms as i64).unwrap();
        t.to_string()
    }

    /// Record `seq` at `ms` milliseconds: the event is written as it is logged.
    pub fn rec(seq: u64, ms: u64, event: serde_json::Value) -> Record {
        let event: Event = serde_json::from_value(event).unwrap();
        record(seq, ms, event)
    }

    /// Record `seq` at `ms` milliseconds, of an event built in Rust.
    pub fn record(seq: u64, ms: u64, event: Event) -> Record {
        Record {
            seq,
            ts: ts(ms),
            hash: cairn_store::Hash::of(seq.to_string().as_bytes()),
            event,
        }
    }

    /// `fold` after every record of `records`.
    pub fn run<F: Fold>(mut fold: F, records: &[Record]) -> F {
        for r in records {
            fold.apply(r);
        }
        fold
    }

    /// `tool_started` of `call`, a `tool` with `input`.
    pub fn started(seq: u64, ms: u64, call: &str, tool: &str, input: serde_json::Value) -> Record {
        rec(
            seq,
            ms,
            serde_json::json!({"type": "tool_started", "call": call, "tool": tool, "input": input}),
        )
    }

    /// `tool_finished` of `call` with `status` and `output`.
    pub fn finished(seq: u64, ms: u64, call: &str, status: &str, output: &str) -> Record {
        rec(
            seq,
            ms,
            serde_json::json!({"type": "tool_finished", "call": call, "status": status,
                "output": output, "elapsed_us": 1000 * ms}),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{rec, ts};
    use super::*;

    #[test]
    fn the_clock_counts_from_the_first_record_to_the_last() {
        let records = [
            rec(
                1,
                0,
                serde_json::json!({"type": "user_message", "text": "a"}),
            ),
            rec(
                2,
                2500,
                serde_json::json!({"type": "user_message", "text": "b"}),
            ),
        ];
        let clock = Clock::of(&records);
        assert_eq!(clock.end_ms, 2500);
        assert_eq!(clock.at(&records[1]), 2500);
        let other = serde_json::json!({"type": "user_message", "text": "c"});
        assert_eq!(clock.at(&rec(9, 700, other)), 0, "not on it");
        assert_eq!(Clock::of(&[]), Clock::default());
    }

    /// Guards against an imported session timed by when it was imported: its start is
    /// the source's, each event with `at` is at it, and a command's record (no `at`)
    /// is at the last source time before it.
    #[test]
    fn an_imported_session_is_on_its_sources_clock() {
        let src = |ms: u64| ts(ms - 100_000);
        let hash = cairn_store::Hash::of(b"m").to_hex();
        let started = serde_json::json!({"type": "session_started", "id": "s",
            "format_version": 1, "engine_version": "0", "workspace": "/w",
            "catalog": "thoth", "tools": [], "manifest": {"hash": hash, "len": 1},
            "manifest_files": 0, "config": {}, "imported": {"agent": "codex",
            "source_id": "x", "branch": "main", "file": {"path": "/r", "hash": hash,
            "bytes": 0}, "started_at": src(100_000)}});
        let records = [
            rec(1, 500_000, started),
            rec(
                2,
                500_001,
                serde_json::json!({"type": "tool_started", "call": "c1", "tool": "shell",
                    "input": {}, "at": src(102_000)}),
            ),
            rec(
                3,
                500_002,
                serde_json::json!({"type": "memory_written", "text": "m"}),
            ),
            rec(
                4,
                500_003,
                serde_json::json!({"type": "tool_finished", "call": "c1", "status": "ok",
                    "output": "", "elapsed_us": 0, "at": src(105_000)}),
            ),
        ];
        let clock = Clock::of(&records);
        let at: Vec<u64> = records.iter().map(|r| clock.at(r)).collect();
        assert_eq!(at, [0, 2000, 2000, 5000]);
        assert_eq!(clock.end_ms, 5000);
    }

    #[test]
    fn one_line_shows_newlines_and_tabs_and_drops_control_characters() {
        assert_eq!(one_line("a\nb\tc\r\u{7}d"), "a⏎b⇥cd");
    }
}
