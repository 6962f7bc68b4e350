//! Deep verification of a session: the store's integrity checks, then the engine's view
//! of every intact record — it parses, the fold runs, every checkpoint and snapshot
//! matches the fold, every recorded decision is taken again from the fold and the
//! facts in its records and must give the recorded answer, every write's before hash
//! is what the fold knew, every referenced blob (those of fields a record moved out of
//! it too) exists and re-hashes to its name (a withheld credential file has none, and
//! must be a credential file of the session), and every started call finished (or the
//! session ends interrupted).
//!
//! A forger who edits records and re-chains the log keeps the integrity check quiet,
//! so the records are also checked against each other: nothing but a resume follows
//! `session_ended`, and only a resume's findings follow a call it ended `interrupted`;
//! a call whose permission was denied has no side effect and ends `denied`; a call's
//! status agrees with its refusal and its permission answer; every call holds exactly
//! the records its tool's effects and its status imply, its permission's included
//! (the one table of `cairn_tools::implied`: a command that ran has its `shell_exec`
//! started and finished, a write that happened its intent and install, a denied call
//! nothing), each inside its call (a background process's end after it, ending a
//! process the fold knows running; none left running at the end); an MCP call ends as
//! its result says; a foreground command's output is what its stdout and stderr blobs
//! give; and every write's after content is what its before content and the call's
//! input give (re-applied with the engine's own edit functions).
//!
//! It reads the log line by line and skips (after the integrity check has reported
//! them) lines whose own hash fails, so one bad record does not hide the problems after
//! it. It never writes.
//!
//! Each concern is a fold of its own, in its own module: the order of the records
//! (`sequence`), the session's terms (`started`), the calls (`calls`), the permissions,
//! the files, the commands, the network, the rules a call's end was decided by
//! (`rules`), the table of what a call records (`table`), the checkpoints, the
//! snapshots, and an imported session's records (`imported`, in place of the others).
//! One loop ([`Folds::record`]) hands every parsed record to each fold
//! (`Fold::apply`), in the order a record's problems are reported in, with the context
//! they share ([`Verifier`]: the engine's fold, the calls started and not finished, the
//! blob checks, the report and the problems).

use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::path::{Path, PathBuf};

use cairn_core::decide::{self, Answered as Outcome, Decision, Permission, Question};
use cairn_core::event::{
    Answer, AnswerSource, Event, ExecStatus, FileWrite, InterruptedStep, McpRef, ProcKind, Refusal,
    Rule, ShellEnd, ShellExec, Status, ToolFinished, WebFetched, WriteOp, WriteStatus,
};
use cairn_core::permission::{CredentialFiles, Need};
use cairn_core::state::{RecordedPath, State, recorded_path};
use cairn_core::{Limits, Record};
use cairn_store::{BlobCheck, BlobRef, BlobStore, Hash, Head, SnapshotStore};
use cairn_tools::implied::{self, Asks, Kind, Misfit};
use cairn_tools::{Catalog, EngineConfig, Registry, manifest};
use serde::Serialize;

use crate::error::Result;
use crate::session::{blob_store_of, check_session_dir};

mod blobs;
mod calls;
mod checkpoints;
mod commands;
mod files;
mod holes;
mod imported;
mod network;
mod permissions;
mod reapply;
mod rules;
mod sequence;
mod shell_output;
mod signed;
mod snapshots;
mod started;
mod table;
#[cfg(test)]
mod testing;

pub use signed::role_of;

use holes::Piece;

/// What kind of problem a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// The store's integrity check: own hash, chain, seq, JSON, torn tail.
    Integrity,
    /// A record of a type this version does not know (written by a newer cairn?).
    UnknownEvent,
    /// A record of a known type whose fields do not parse.
    BadEvent,
    /// Records out of their order: a call finished that never started, a call id out of
    /// sequence, a side effect outside its call, `session_started` not first.
    Structure,
    /// A checkpoint's state hash differs from the fold's.
    Checkpoint,
    /// A snapshot differs from the fold, or names a record the log does not have.
    Snapshot,
    /// A recorded decision the fold and the record's facts do not give again.
    Decision,
    /// A write's before hash differs from what the fold knew, its path is not a
    /// workspace path, or its after content is not what its before content and the
    /// call's input give.
    FileWrite,
    /// A call's output is not what its records give (a command's output and its
    /// stdout and stderr blobs).
    Output,
    /// A referenced blob is missing, damaged, or of another length.
    Blob,
    /// A call started and never finished in a session that ended.
    UnfinishedCall,
    /// The log ends before records that existed (a snapshot names a later seq).
    Truncated,
}

/// One thing wrong with a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub seq: Option<u64>,
    /// 1-based line of the record (0 when the problem has no line, as a missing one).
    pub line: u64,
    /// Byte offset of that line.
    pub offset: u64,
    pub kind: ProblemKind,
    pub what: String,
}

/// A call started and not finished in a session that did not end: what a crash leaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interrupted {
    pub call: String,
    pub tool: String,
    pub seq: u64,
}

/// The summary of a deep verification.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub path: PathBuf,
    pub session: Option<String>,
    /// Lines in the log (good or bad).
    pub records: u64,
    pub bytes: u64,
    /// The last intact record.
    pub head: Option<Head>,
    pub calls: u64,
    pub file_writes: u64,
    pub decisions_checked: u64,
    /// Calls of tools this version does not know, whose decisions were not checked.
    pub decisions_unchecked: u64,
    pub checkpoints: u64,
    pub snapshots: u64,
    pub blobs_checked: u64,
    /// Writes whose after content was re-computed from their before content and input.
    pub writes_reapplied: u64,
    /// Command outputs re-built from their records and blobs.
    pub outputs_checked: u64,
    /// True when the log ends with the session ended (not interrupted).
    pub ended: bool,
    /// Not ended, and a live process holds the log's writer lock: the session is
    /// running, not interrupted (its unfinished calls may still finish).
    pub running: bool,
    /// Calls the session left unfinished without ending: not corruption.
    pub interrupted: Vec<Interrupted>,
    /// Every problem found, kept or not.
    pub problems: u64,
    /// The problems kept in the list: the first [`VerifyOptions::problems_max`] in
    /// order of seq and line.
    pub problems_shown: u64,
    /// The agent an imported session came from (`codex`, `claude`): nothing of it ran
    /// under cairn, so no decision of it is taken again (see `Verifier::imported`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<String>,
}

/// Settings of a deep verification.
#[derive(Debug, Clone, Copy)]
pub struct VerifyOptions {
    /// The store's integrity check settings.
    pub store: cairn_store::VerifyOptions,
    /// Re-hash every referenced blob (the most expensive part on big sessions).
    pub blobs: bool,
    /// Problems kept in the list, the first in order of seq and line; the rest are
    /// counted only, so that a session with millions of them verifies in bounded
    /// memory (default 10,000). The store's integrity check keeps at most its own
    /// `problems_max` of them.
    pub problems_max: usize,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            store: cairn_store::VerifyOptions::default(),
            blobs: true,
            problems_max: 10_000,
        }
    }
}

/// Deep-verifies the session folder `dir` with the default options.
pub fn verify(dir: &Path) -> Result<(Report, Vec<Problem>)> {
    verify_with(dir, &VerifyOptions::default())
}

/// Deep-verifies the session folder `dir`. An error means it could not run; every
/// problem with the session is in the returned list.
pub fn verify_with(dir: &Path, options: &VerifyOptions) -> Result<(Report, Vec<Problem>)> {
    verify_with_keys(dir, options, &[])
}

/// [`verify_with`], the checkpoints' signatures checked with `keys` (the log's
/// verifier keys) when some are given: then every finished session must have a
/// checkpoint (see `verify/signed.rs`).
pub fn verify_with_keys(
    dir: &Path,
    options: &VerifyOptions,
    keys: &[cairn_tlog::Verifier],
) -> Result<(Report, Vec<Problem>)> {
    check_session_dir(dir)?;
    let log = cairn_store::log_path(dir);
    let integrity = cairn_store::verify_path(&log, &options.store)?;
    let mut v = Verifier::new(dir, blob_store_of(dir)?, options);
    v.report.records = integrity.records;
    v.report.bytes = integrity.bytes;
    for p in &integrity.problems {
        v.problems.add(Problem {
            seq: p.seq,
            line: p.line,
            offset: p.offset,
            kind: ProblemKind::Integrity,
            what: format!(
                "{}: {}",
                serde_json::to_value(p.kind)
                    .ok()
                    .and_then(|k| k.as_str().map(str::to_string))
                    .unwrap_or_default(),
                p.what
            ),
        });
    }
    let mut folds = Folds::default();
    folds.snapshots.pending = SnapshotStore::new(dir).list()?;
    v.report.snapshots = folds.snapshots.pending.len() as u64;
    v.signed_start(dir, keys)?;

    crate::session::intact_records(&log, |r| {
        folds.record(&mut v, r);
        v.signed_record(r);
    })?;
    folds.finish(&mut v);
    v.signed_finish();
    v.report.running = !v.report.ended && cairn_store::writer_pid(dir).is_some();
    let mut report = v.report;
    report.head = integrity.head.or(report.head);
    report.problems = v.problems.found + integrity.problems_omitted;
    let problems = v.problems.into_sorted();
    report.problems_shown = problems.len() as u64;
    Ok((report, problems))
}

/// The problems a verification keeps: the first `max` in report order (seq, then
/// line, then the order they were found in), in a heap of at most `max`, and the count
/// of every problem found.
struct Kept {
    max: usize,
    /// The greatest kept problem on top, to be replaced by a smaller one.
    heap: BinaryHeap<Ranked>,
    found: u64,
}

/// A problem and its place in the report.
struct Ranked {
    /// (seq, or `u64::MAX` for none; line; the order found in).
    place: (u64, u64, u64),
    problem: Problem,
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.place == other.place
    }
}

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.place.cmp(&other.place)
    }
}

impl Kept {
    fn new(max: usize) -> Kept {
        Kept {
            max,
            heap: BinaryHeap::new(),
            found: 0,
        }
    }

    /// The one place a problem is added.
    fn add(&mut self, problem: Problem) {
        let place = (problem.seq.unwrap_or(u64::MAX), problem.line, self.found);
        self.found += 1;
        let ranked = Ranked { place, problem };
        if self.heap.len() < self.max {
            self.heap.push(ranked);
        } else if let Some(mut top) = self.heap.peek_mut()
            && ranked < *top
        {
            *top = ranked;
        }
        debug_assert!(self.heap.len() <= self.max);
    }

    /// The kept problems in report order.
    fn into_sorted(self) -> Vec<Problem> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|r| r.problem)
            .collect()
    }
}

/// What a `permission_requested` records besides its key and detail.
struct Asked<'a> {
    guarded: bool,
    keys: &'a [String],
    reasons: &'a [String],
    guards: &'a [String],
}

/// A permission answer of a call, and where it is recorded (seq, line, offset).
struct Answered {
    key: String,
    answer: Answer,
    source: AnswerSource,
    at: (u64, u64, u64),
}

/// A call between its `tool_started` and `tool_finished`.
struct Pending {
    seq: u64,
    tool: String,
    input: serde_json::Value,
    /// The MCP server and tool it went to (`tool_started.mcp`).
    mcp: Option<McpRef>,
    /// What the engine's admission rules (`decide::admit`: input size, schema, repeat
    /// block) give for it on the state before its `tool_started`; `None` for a tool
    /// this version does not know.
    admitted: Option<Decision>,
    /// The repeat counter of this exact call before its `tool_started` was folded.
    repeats: u32,
    /// The keys it asked permission for.
    asked: Vec<String>,
    /// The question the engine asks for it, taken again at its `permission_requested`.
    question: Option<Question>,
    /// Its permission answer.
    answer: Option<Answered>,
    /// The (path, status intent seen) of its writes, to check each write's rules once.
    intents: Vec<String>,
    /// The content hash of its last read, or of its last write with status `ok`: what
    /// a `hash:` line of its output must say.
    last_hash: Option<Hash>,
    /// The permission answer that stops it, when one was denied: (seq, key).
    denied: Option<(u64, String)>,
    /// The permission answer that let it run: (seq, key, answer).
    granted: Option<(u64, String, Answer)>,
    /// Its records between its start and its end as the table of what a call records
    /// tells them apart (`cairn_tools::implied`), each where it is and whether a
    /// problem was reported at it already.
    records: Vec<(Kind, (u64, u64, u64), bool)>,
    /// Its foreground command, once finished.
    exec: Option<ShellExec>,
    /// Files that command changed (what, path), from the call's external writes.
    changes: Vec<(&'static str, String)>,
    /// (path, after hash) of its writes already re-applied.
    reapplied: Vec<(String, Option<Hash>)>,
}

impl Pending {
    /// A call at its `tool_started` (record `seq`), nothing seen of it yet.
    fn new(
        seq: u64,
        tool: &str,
        input: &serde_json::Value,
        mcp: Option<&McpRef>,
        admitted: Option<Decision>,
        repeats: u32,
    ) -> Pending {
        Pending {
            seq,
            tool: tool.to_string(),
            input: input.clone(),
            mcp: mcp.cloned(),
            admitted,
            repeats,
            asked: Vec::new(),
            question: None,
            answer: None,
            intents: Vec::new(),
            last_hash: None,
            denied: None,
            granted: None,
            records: Vec::new(),
            exec: None,
            changes: Vec::new(),
            reapplied: Vec::new(),
        }
    }
}

/// What the folds share: the session's terms, the engine's fold of the records so far,
/// the calls started and not finished, the blobs checked, the report and the problems.
struct Verifier {
    blobs: BlobStore,
    check_blobs: bool,
    blob_checked: HashMap<Hash, BlobCheck>,
    /// Contents the manifest records as git-backed: BLAKE3 → git blob id.
    git_backed: HashMap<Hash, String>,
    /// The workspace's repository, opened at the first git-backed content checked.
    git: Option<cairn_tools::git::Objects>,
    /// The session's workspace (from `session_started`).
    workspace: Option<PathBuf>,
    state: State,
    limits: Limits,
    /// The session's guarded commands (upgraded from older sessions' patterns).
    guarded: Vec<cairn_core::command::Guard>,
    /// The session's credential files.
    credential_files: CredentialFiles,
    registry: Registry,
    pending: BTreeMap<String, Pending>,
    report: Report,
    problems: Kept,
    /// Where the record being checked is.
    at: (u64, u64, u64),
    /// Denied calls that finished (seq and key of the denial): a background
    /// process's end is recorded after its call.
    denied: HashMap<String, (u64, String)>,
    /// Calls that ended `interrupted`, and their tools: what a resume may list as an
    /// interrupted step.
    interrupted: HashMap<String, String>,
    /// The folders commands may write in, from the last `session_started` or
    /// `session_resumed` that names a sandbox (for the sandbox's note).
    writable: Vec<String>,
    /// The session was imported from another agent (`session_started.imported`).
    imported: bool,
    /// The session was recorded from another agent's hooks (`session_started.agent`).
    hooked: bool,
    /// The checkpoint files and the signed end (`verify/signed.rs`).
    signed: signed::Signed,
    /// The session is a replay (`session_started.parent`, nothing `inherited`): some
    /// of its calls may be answered from the recording.
    replay: bool,
    /// A call that ended `interrupted` (where, and its id): only a resume's findings,
    /// then its `session_resumed`, may follow it.
    awaiting_resume: Option<((u64, u64, u64), String)>,
    /// The session's configuration names a check command (`problems`); `None` when it
    /// does not read.
    check_command: Option<bool>,
    /// The call finishing at the record being checked (`verify/calls.rs`).
    finished: Option<Finished>,
}

impl Verifier {
    fn new(dir: &Path, blobs: BlobStore, options: &VerifyOptions) -> Verifier {
        Verifier {
            blobs,
            check_blobs: options.blobs,
            blob_checked: HashMap::new(),
            git_backed: HashMap::new(),
            git: None,
            workspace: None,
            state: State::default(),
            limits: Catalog::Thoth.limits(),
            guarded: cairn_core::command::default_guards(),
            credential_files: CredentialFiles::defaults(),
            registry: Registry::new(Catalog::Thoth),
            pending: BTreeMap::new(),
            report: Report {
                path: dir.to_path_buf(),
                ..Report::default()
            },
            problems: Kept::new(options.problems_max),
            at: (0, 0, 0),
            denied: HashMap::new(),
            interrupted: HashMap::new(),
            writable: Vec::new(),
            imported: false,
            hooked: false,
            signed: signed::Signed::none(),
            replay: false,
            awaiting_resume: None,
            check_command: None,
            finished: None,
        }
    }

    pub(super) fn problem(&mut self, kind: ProblemKind, what: String) {
        let (seq, line, offset) = self.at;
        self.problems.add(Problem {
            seq: Some(seq),
            line,
            offset,
            kind,
            what,
        });
    }

    /// A decision problem of call `f` (of pending `p`) at the record being checked.
    pub(super) fn decision(&mut self, f: &ToolFinished, p: &Pending, what: String) {
        self.problem(
            ProblemKind::Decision,
            format!("call {} ({}): {what}", f.call, p.tool),
        );
    }

    /// Notes a record of `kind` of `call` (for the table of what a call records, at its
    /// end); one after a denial that stopped the call is a problem here.
    pub(super) fn side_effect(&mut self, call: &str, kind: Kind, what: &str) {
        let at = self.at;
        let denied = match self.pending.get_mut(call) {
            Some(p) => {
                p.records.push((kind, at, p.denied.is_some()));
                p.denied.clone()
            }
            None => self.denied.get(call).cloned(),
        };
        if let Some((seq, key)) = denied {
            self.problem(
                ProblemKind::Decision,
                format!(
                    "call {call} ran after deny: {what} recorded after permission for {key} was denied at seq {seq}"
                ),
            );
        }
    }

    fn finish_calls(&mut self) {
        self.report.ended = self.state.ended;
        if !self.state.ended {
            self.report.interrupted = self
                .pending
                .iter()
                .map(|(c, p)| Interrupted {
                    call: c.clone(),
                    tool: p.tool.clone(),
                    seq: p.seq,
                })
                .collect();
        }
    }
}

/// A call at its `tool_finished`: its pending state and what the calls' fold found of
/// it (its tool's effects, whether a replay answered it from the recording).
struct Finished {
    pending: Pending,
    effects: Option<cairn_tools::Effects>,
    replayed: bool,
}

/// One concern of the deep verification, checked record by record: [`Folds::record`]
/// hands every parsed record of the log to each fold, in order, with the context they
/// share (the engine's fold, the calls started and not finished, the report and the
/// problems found).
trait Fold {
    fn apply(&mut self, v: &mut Verifier, r: &Record);
}

/// Every fold, in the order a record's problems are reported in.
#[derive(Default)]
struct Folds {
    sequence: sequence::SequenceFold,
    started: started::StartedFold,
    calls: calls::CallsFold,
    permissions: permissions::PermissionsFold,
    files: files::FilesFold,
    commands: commands::CommandsFold,
    network: network::NetworkFold,
    rules: rules::RulesFold,
    table: table::TableFold,
    checkpoints: checkpoints::CheckpointsFold,
    imported: imported::ImportedFold,
    snapshots: snapshots::SnapshotsFold,
}

impl Folds {
    /// One record of the log: its spilled blobs, its parse, then every fold.
    fn record(&mut self, v: &mut Verifier, raw: &cairn_store::Record) {
        v.at = (raw.seq, raw.line, raw.offset);
        v.report.head = Some(Head {
            seq: raw.seq,
            hash: raw.hash,
        });
        let Some(rec) = v.parse(raw) else {
            return;
        };
        self.sequence.apply(v, &rec);
        started::origin(v, &rec);
        if v.imported {
            self.imported.apply(v, &rec);
        } else {
            let folds: [&mut dyn Fold; 9] = [
                &mut self.started,
                &mut self.calls,
                &mut self.permissions,
                &mut self.files,
                &mut self.commands,
                &mut self.network,
                &mut self.rules,
                &mut self.table,
                &mut self.checkpoints,
            ];
            for f in folds {
                f.apply(v, &rec);
            }
        }
        v.finished = None;
        v.state.apply(&rec);
        self.snapshots.apply(v, &rec);
    }

    /// What is found at the end of the log.
    fn finish(&mut self, v: &mut Verifier) {
        self.sequence.finish(v);
        self.snapshots.finish(v);
        v.finish_calls();
    }
}

impl Verifier {
    /// The record `raw` as the engine reads it, its spilled fields' blobs checked
    /// first; `None` (the problem reported, the fold told) when it does not parse.
    fn parse(&mut self, raw: &cairn_store::Record) -> Option<Record> {
        // The blobs of fields moved out of the record: the event is read from them. A
        // malformed list is the parse's to report, below.
        let before = self.problems.found;
        for (name, s) in cairn_core::spill::spilled(raw.event.get()).unwrap_or_default() {
            self.blob(&s.blob(), &format!("spilled field `{name}`"));
        }
        let blob_problems = self.problems.found > before;
        match cairn_tools::fold::parse_in(raw, &self.blobs) {
            Ok(rec) => Some(rec),
            Err(u) => {
                let known = u.kind.as_deref().is_some_and(|k| Event::KINDS.contains(&k));
                let kind = if known {
                    ProblemKind::BadEvent
                } else {
                    ProblemKind::UnknownEvent
                };
                // A blob problem just reported is why it does not read: once is enough.
                if !(known && blob_problems) {
                    self.problem(kind, u.what);
                }
                self.state.apply_unknown(raw.seq, &raw.hash);
                None
            }
        }
    }
}

/// True when the output of `f` is `message` as the model is shown it; always true
/// when something was redacted or cut (the recorded output is not the message alone).
fn shows(f: &ToolFinished, limits: &Limits, message: &str) -> bool {
    !(f.redactions.is_empty() && f.output_blob.is_none())
        || decide::shown(message, limits).text == f.output
}

/// The size of the input a `tool_started` stands for: a placeholder's, or (a real
/// input is only recorded when it is within `input_bytes_max`) none to speak of.
fn recorded_input_bytes(input: &serde_json::Value) -> usize {
    decide::oversized_input_bytes(input).unwrap_or(0)
}

/// A rule's name as the log spells it (`read_before_edit`), with dashes.
fn rule_name(rule: Rule) -> String {
    serde_json::to_value(rule)
        .ok()
        .and_then(|v| v.as_str().map(|s| s.replace('_', "-")))
        .unwrap_or_else(|| format!("{rule:?}"))
}

fn write_op_name(op: WriteOp) -> &'static str {
    match op {
        WriteOp::Create => "create",
        WriteOp::Replace => "replace",
        WriteOp::Edit => "edit",
        WriteOp::Delete => "delete",
        WriteOp::External => "external",
        WriteOp::Append => "append",
    }
}

fn answer_name(answer: Answer) -> &'static str {
    match answer {
        Answer::Once => "once",
        Answer::Always => "always",
        Answer::Deny => "deny",
    }
}

fn source_name(source: AnswerSource) -> &'static str {
    match source {
        AnswerSource::User => "user",
        AnswerSource::AllowList => "allow list",
        AnswerSource::Policy => "policy",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(seq: Option<u64>, line: u64, what: &str) -> Problem {
        Problem {
            seq,
            line,
            offset: 0,
            kind: ProblemKind::Structure,
            what: what.into(),
        }
    }

    /// Adds `found` in order to a [`Kept`] of `max`; checks the count and what it kept.
    fn check(max: usize, found: &[Problem], expected: &[Problem]) {
        let mut kept = Kept::new(max);
        for p in found {
            kept.add(p.clone());
        }
        assert_eq!(kept.found, found.len() as u64);
        assert_eq!(kept.into_sorted(), expected, "max {max}");
    }

    #[test]
    fn the_first_problems_max_in_report_order_are_kept_and_every_one_counted() {
        // Found out of order: the integrity check's problems come before the fold's,
        // a problem without a seq sorts last, and equal places keep the order found.
        let found = [
            problem(Some(9), 10, "a"),
            problem(None, 0, "b"),
            problem(Some(2), 3, "c"),
            problem(Some(2), 3, "d"),
            problem(Some(1), 2, "e"),
            problem(Some(2), 4, "f"),
        ];
        let sorted = [
            found[4].clone(),
            found[2].clone(),
            found[3].clone(),
            found[5].clone(),
            found[0].clone(),
            found[1].clone(),
        ];
        for max in 0..=found.len() + 1 {
            check(max, &found, &sorted[..max.min(found.len())]);
        }
    }
}
