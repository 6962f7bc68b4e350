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

use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::path::{Path, PathBuf};

use cairn_core::Limits;
use cairn_core::decide::{self, Answered as Outcome, Decision, Permission, Question};
use cairn_core::event::{
    Answer, AnswerSource, Event, ExecStatus, FileWrite, InterruptedStep, McpRef, ProcKind, Refusal,
    Rule, ShellEnd, ShellExec, Status, ToolFinished, WebFetched, WriteOp, WriteStatus,
};
use cairn_core::permission::{CredentialFiles, Need};
use cairn_core::state::{RecordedPath, State, recorded_path};
use cairn_store::{BlobCheck, BlobRef, BlobStore, Hash, Head, SnapshotStore};
use cairn_tools::implied::{self, Asks, Kind, Misfit};
use cairn_tools::{Catalog, EngineConfig, Registry, manifest};
use serde::Serialize;

use crate::error::Result;
use crate::session::{blob_store_of, check_session_dir};

mod holes;
mod reapply;
mod shell_output;
mod signed;

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
    v.snapshots = SnapshotStore::new(dir).list()?;
    v.report.snapshots = v.snapshots.len() as u64;
    v.signed_start(dir, keys)?;

    crate::session::intact_records(&log, |r| {
        v.record(r);
        v.signed_record(r);
    })?;
    v.finish();
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
    snapshots: Vec<(u64, PathBuf)>,
    report: Report,
    problems: Kept,
    /// Where the record being checked is.
    at: (u64, u64, u64),
    /// Denied calls that finished (seq and key of the denial): a background
    /// process's end is recorded after its call.
    denied: HashMap<String, (u64, String)>,
    /// The seq of `session_ended`, until a `session_resumed` reopens the session.
    ended_at: Option<u64>,
    /// Records after the end of the kinds a resume writes before its
    /// `session_resumed`: problems unless one follows.
    after_end: Vec<((u64, u64, u64), &'static str)>,
    /// The session names a parent: a replay, whose calls may be answered from the
    /// recording without their permission records.
    has_parent: bool,
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
            snapshots: Vec::new(),
            report: Report {
                path: dir.to_path_buf(),
                ..Report::default()
            },
            problems: Kept::new(options.problems_max),
            at: (0, 0, 0),
            denied: HashMap::new(),
            ended_at: None,
            after_end: Vec::new(),
            has_parent: false,
            interrupted: HashMap::new(),
            writable: Vec::new(),
            imported: false,
            hooked: false,
            signed: signed::Signed::none(),
            replay: false,
            awaiting_resume: None,
            check_command: None,
        }
    }

    /// Whether a blob checked so far is intact (true when it was not checked).
    fn blob_intact(&self, blob: &BlobRef) -> bool {
        self.blob_checked
            .get(&blob.hash)
            .is_none_or(|c| *c == BlobCheck::Ok)
    }

    fn problem(&mut self, kind: ProblemKind, what: String) {
        let (seq, line, offset) = self.at;
        self.problems.add(Problem {
            seq: Some(seq),
            line,
            offset,
            kind,
            what,
        });
    }

    fn blob(&mut self, blob: &BlobRef, what: &str) {
        if !self.check_blobs {
            return;
        }
        let check = match self.blob_checked.get(&blob.hash) {
            Some(c) => *c,
            None => {
                self.report.blobs_checked += 1;
                let mut c = match self.blobs.verify(&blob.hash) {
                    Ok(c) => c,
                    Err(e) => {
                        self.problem(ProblemKind::Blob, format!("{what}: cannot read blob: {e}"));
                        return;
                    }
                };
                // Git-backed content is read from the workspace's repository and
                // hashed; a repository without the object cannot vouch for it.
                if c == BlobCheck::Missing
                    && let Some(oid) = self.git_backed.get(&blob.hash).cloned()
                {
                    let workspace = self.workspace.clone().unwrap_or_default();
                    let objects = self
                        .git
                        .get_or_insert_with(|| cairn_tools::git::Objects::open(&workspace));
                    match objects.blob(&oid) {
                        Some(bytes) => {
                            let actual = Hash::of(&bytes);
                            c = if actual == blob.hash && bytes.len() as u64 == blob.len {
                                BlobCheck::Ok
                            } else {
                                BlobCheck::Mismatch { actual }
                            };
                        }
                        None => {
                            self.blob_checked.insert(blob.hash, c);
                            self.problem(
                                ProblemKind::Blob,
                                format!(
                                    "{what}: git object {oid} (content {}) is missing from the repository of {}",
                                    blob.hash,
                                    workspace.display()
                                ),
                            );
                            return;
                        }
                    }
                }
                self.blob_checked.insert(blob.hash, c);
                c
            }
        };
        match check {
            BlobCheck::Ok => {
                let len = std::fs::metadata(self.blobs.path(&blob.hash)).map(|m| m.len());
                if let Ok(len) = len
                    && len != blob.len
                {
                    self.problem(
                        ProblemKind::Blob,
                        format!(
                            "{what}: blob {} is {len} bytes, the record says {}",
                            blob.hash.short(12),
                            blob.len
                        ),
                    );
                }
            }
            BlobCheck::Missing => self.problem(
                ProblemKind::Blob,
                format!("{what}: blob {} is missing", blob.hash),
            ),
            BlobCheck::Mismatch { actual } => self.problem(
                ProblemKind::Blob,
                format!(
                    "{what}: blob {} is damaged: its content hashes to {actual}",
                    blob.hash
                ),
            ),
        }
    }

    /// A recorded tree head must be the tree of the records before it, and its note
    /// (when signed) must say the same. The signature itself needs the log's key:
    /// `cairn_tlog` checks it where one is given.
    fn tree_checkpoint(&mut self, size: u64, root: &str, origin: &str, note: Option<&str>) {
        let tree = &self.state.tree;
        let ours = cairn_store::Hash(tree.root()).to_hex();
        if size != tree.size || root != ours {
            self.problem(
                ProblemKind::Checkpoint,
                format!(
                    "tree checkpoint of size {size} with root {root} differs from the tree of the log: size {}, root {ours}",
                    tree.size
                ),
            );
            return;
        }
        let Some(note) = note else { return };
        let read = cairn_tlog::Note::parse(note)
            .map_err(|e| e.to_string())
            .and_then(|n| cairn_tlog::Checkpoint::parse(&n.text).map_err(|e| e.to_string()));
        match read {
            Ok(c) if c.size == size && c.root == tree.root() && c.origin == origin => {}
            Ok(c) => self.problem(
                ProblemKind::Checkpoint,
                format!(
                    "the signed note of the tree checkpoint at size {size} says {:?} size {}, root {}",
                    c.origin,
                    c.size,
                    cairn_store::Hash(c.root).to_hex()
                ),
            ),
            Err(e) => self.problem(
                ProblemKind::Checkpoint,
                format!("the signed note of the tree checkpoint at size {size}: {e}"),
            ),
        }
        self.signed_note(size, note);
    }

    fn record(&mut self, raw: &cairn_store::Record) {
        self.at = (raw.seq, raw.line, raw.offset);
        self.report.head = Some(Head {
            seq: raw.seq,
            hash: raw.hash,
        });
        // The blobs of fields moved out of the record: the event is read from them. A
        // malformed list is the parse's to report, below.
        let before = self.problems.found;
        for (name, s) in cairn_core::spill::spilled(raw.event.get()).unwrap_or_default() {
            self.blob(&s.blob(), &format!("spilled field `{name}`"));
        }
        let blob_problems = self.problems.found > before;
        let rec = match cairn_tools::fold::parse_in(raw, &self.blobs) {
            Ok(rec) => rec,
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
                return;
            }
        };
        if raw.seq != 0 && matches!(rec.event, Event::SessionStarted(_)) {
            self.problem(
                ProblemKind::Structure,
                "session_started after the first record".into(),
            );
        }
        if raw.seq == 0 && !matches!(rec.event, Event::SessionStarted(_)) {
            self.problem(
                ProblemKind::Structure,
                format!(
                    "the first record is {}, not session_started",
                    rec.event.kind()
                ),
            );
        }
        self.after_end(&rec.event);
        self.after_interrupted(&rec.event);
        if let Event::SessionStarted(s) = &rec.event {
            // A session recorded from another agent's hooks ran its calls under that
            // agent too: checked like an imported one.
            self.imported =
                s.imported.is_some() || s.agent.as_ref().is_some_and(|a| a.via == "hook");
            self.hooked = s.agent.as_ref().is_some_and(|a| a.via == "hook");
            self.report.imported = s.imported.as_ref().map(|i| i.agent.clone()).or_else(|| {
                s.agent
                    .as_ref()
                    .filter(|a| a.via == "hook")
                    .map(|a| a.name.clone())
            });
        }
        if self.imported {
            self.imported_record(&rec);
            self.state.apply(&rec);
            self.snapshot_at(rec.seq, rec.hash);
            return;
        }
        match &rec.event {
            Event::SessionResumed {
                interrupted_steps,
                sandbox,
                ..
            } => {
                if let Some(sb) = sandbox {
                    self.writable = sb.writable.clone();
                }
                self.interrupted_steps(interrupted_steps)
            }
            Event::SessionStarted(s) => {
                self.report.session = Some(s.id.clone());
                if let Some(sb) = &s.sandbox {
                    self.writable = sb.writable.clone();
                }
                self.has_parent = s.parent.is_some();
                self.replay = s.parent.is_some() && s.inherited.is_none();
                match serde_json::from_value::<EngineConfig>(s.config.clone()) {
                    Ok(c) => {
                        self.check_command =
                            Some(c.check_command.as_ref().is_some_and(|a| !a.is_empty()));
                        self.guarded = c.guards();
                        self.limits = c.limits;
                        match CredentialFiles::new(&c.credential_files) {
                            Ok(files) => self.credential_files = files,
                            Err(e) => self.problem(
                                ProblemKind::BadEvent,
                                format!(
                                    "session_started.config: {e}; decisions are checked with the default credential files"
                                ),
                            ),
                        }
                        self.registry = Registry::new(c.catalog);
                    }
                    Err(e) => self.problem(
                        ProblemKind::BadEvent,
                        format!(
                            "session_started.config does not parse ({e}); decisions are checked with the defaults of catalog {}",
                            s.catalog
                        ),
                    ),
                }
                self.blob(&s.manifest, "the manifest");
                self.workspace = Some(PathBuf::from(&s.workspace));
                self.manifest_entries(&s.manifest);
            }
            Event::ToolStarted {
                call,
                tool,
                input,
                observed,
                mcp,
                input_hash: _,
            } => {
                self.report.calls += 1;
                let expected = format!("c{}", self.state.calls_started + 1);
                if *call != expected {
                    self.problem(
                        ProblemKind::Structure,
                        format!("call id {call} out of sequence: the fold expects {expected} (a record missing or moved?)"),
                    );
                }
                // Taken on the state before this record, as the engine took it.
                let admitted = self.registry.get(tool).map(|t| {
                    decide::admit(
                        &self.state,
                        &self.limits,
                        tool,
                        input,
                        recorded_input_bytes(input),
                        observed.as_ref(),
                        || t.validate(input),
                    )
                });
                self.pending.insert(
                    call.clone(),
                    Pending::new(
                        rec.seq,
                        tool,
                        input,
                        mcp.as_ref(),
                        admitted,
                        decide::repeats(&self.state, tool, input),
                    ),
                );
            }
            Event::FileRead(r) => {
                self.side_effect(&r.call, Kind::Read, &format!("file_read of {}", r.path));
                if let Some(p) = self.pending.get_mut(&r.call) {
                    p.last_hash = Some(r.hash);
                } else {
                    self.problem(
                        ProblemKind::Structure,
                        format!("file_read of {} outside its call {}", r.path, r.call),
                    );
                }
            }
            Event::FileWrite(w) => {
                self.file_write(w);
                self.reapply(w);
            }
            Event::ShellExec(x) => self.shell_exec(x),
            Event::WebFetched(w) => self.web_fetched(w),
            Event::MemoryWritten { .. } => {
                // Memory names no call: it belongs to the one call running.
                match self.pending.keys().collect::<Vec<_>>()[..] {
                    [call] => {
                        let call = call.clone();
                        self.side_effect(&call, Kind::Memory, "memory_written");
                    }
                    [] => self.problem(
                        ProblemKind::Structure,
                        "memory_written outside any call: only a call writes memory".into(),
                    ),
                    // The engine runs one call at a time: another writer's log.
                    _ => {}
                }
            }
            Event::PermissionRequested {
                call,
                key,
                detail,
                guarded,
                keys,
                reasons,
                guards,
                ..
            } => self.permission_requested(
                call,
                key,
                detail,
                Asked {
                    guarded: *guarded,
                    keys,
                    reasons,
                    guards,
                },
            ),
            Event::PermissionDecided {
                call,
                key,
                answer,
                source,
                grants,
            } => self.permission_decided(call, key, *answer, *source, grants.as_deref()),
            Event::ToolFinished(f) => self.tool_finished(f),
            Event::Checkpoint { state_hash, at_seq } => {
                self.report.checkpoints += 1;
                if self.state.last_seq != Some(*at_seq) {
                    self.problem(
                        ProblemKind::Checkpoint,
                        format!(
                            "checkpoint for seq {at_seq} follows seq {}",
                            self.state.last_seq.map_or("none".into(), |s| s.to_string())
                        ),
                    );
                } else if self.state.hash() != *state_hash {
                    self.problem(
                        ProblemKind::Checkpoint,
                        format!(
                            "checkpoint state hash {} differs from the fold's {} at seq {at_seq}",
                            state_hash.short(16),
                            self.state.hash().short(16)
                        ),
                    );
                }
            }
            Event::TreeCheckpoint {
                size,
                root,
                origin,
                note,
            } => self.tree_checkpoint(*size, root, origin, note.as_deref()),
            Event::SessionEnded { .. } => {
                let open: Vec<String> = self
                    .pending
                    .iter()
                    .map(|(c, p)| format!("{c} ({}, seq {})", p.tool, p.seq))
                    .collect();
                if !open.is_empty() {
                    self.problem(
                        ProblemKind::UnfinishedCall,
                        format!(
                            "the session ended with calls started and never finished: {}",
                            open.join(", ")
                        ),
                    );
                    self.pending.clear();
                }
                // The engine records the end of every background process before its
                // own: those still running are stopped and recorded cancelled.
                let running: Vec<String> = self
                    .state
                    .processes
                    .values()
                    .filter(|p| p.is_running())
                    .map(|p| format!("{} (call {})", p.id, p.call))
                    .collect();
                if !running.is_empty() {
                    self.problem(
                        ProblemKind::Structure,
                        format!(
                            "the session ended with background processes whose end the log never recorded: {}",
                            running.join(", ")
                        ),
                    );
                }
                self.ended_at.get_or_insert(rec.seq);
            }
            _ => {}
        }
        self.state.apply(&rec);
        self.snapshot_at(rec.seq, rec.hash);
    }

    /// One record of an imported session. Its calls ran under another agent, not
    /// under cairn's rules: no decision is taken again, no write re-applied, no output
    /// rebuilt, and its `shell_exec` and `file_write` records are not checked against a
    /// workspace manifest (there is none). What is checked: the structure (calls in
    /// sequence, every effect inside its call, every call finished before the end),
    /// every blob, and that a kept original still hashes to what the import recorded.
    fn imported_record(&mut self, rec: &cairn_core::Record) {
        match &rec.event {
            Event::SessionStarted(s) => {
                self.report.session = Some(s.id.clone());
                self.blob(&s.manifest, "the manifest");
                if let Some(i) = &s.imported {
                    self.original(&i.file);
                }
            }
            Event::SessionResumed {
                imported: Some(f), ..
            } => self.original(f),
            Event::ToolStarted {
                call,
                tool,
                input,
                mcp,
                ..
            } => {
                self.report.calls += 1;
                self.report.decisions_unchecked += 1;
                let expected = format!("c{}", self.state.calls_started + 1);
                if *call != expected {
                    self.problem(
                        ProblemKind::Structure,
                        format!("call id {call} out of sequence: the fold expects {expected} (a record missing or moved?)"),
                    );
                }
                self.pending.insert(
                    call.clone(),
                    Pending::new(rec.seq, tool, input, mcp.as_ref(), None, 0),
                );
            }
            Event::FileRead(r) => {
                self.imported_effect(&r.call, Kind::Read, &format!("file_read of {}", r.path))
            }
            Event::FileWrite(w) => {
                self.report.file_writes += 1;
                for (b, what) in [
                    (&w.before, "before"),
                    (&w.after, "after"),
                    (&w.diff, "diff"),
                ] {
                    if let Some(b) = b {
                        self.blob(b, &format!("file_write of {} ({what})", w.path));
                    }
                }
                if w.unknown && w.after.is_some() {
                    self.problem(
                        ProblemKind::FileWrite,
                        format!(
                            "file_write of {}: marked unknown but names its content after",
                            w.path
                        ),
                    );
                }
                let call = w.call.clone().unwrap_or_default();
                let kind = Kind::of_write(w, true);
                self.imported_effect(&call, kind, &format!("file_write of {}", w.path));
            }
            Event::ShellExec(x) => {
                if let Some(end) = x.end() {
                    for (b, name) in [
                        (&end.stdout, "stdout"),
                        (&end.stderr, "stderr"),
                        (&end.log_blob, "log"),
                    ] {
                        if let Some(b) = b {
                            self.blob(b, &format!("call {} {name}", x.call));
                        }
                    }
                }
                self.imported_effect(&x.call, Kind::of_exec(x), "shell_exec");
            }
            Event::WebFetched(w) => self.web_fetched(w),
            Event::ToolFinished(f) => {
                if let Some(b) = &f.output_blob {
                    self.blob(b, &format!("call {} output", f.call));
                }
                match self.pending.remove(&f.call) {
                    Some(p) => self.imported_finished(f, p),
                    None => self.problem(
                        ProblemKind::Structure,
                        format!(
                            "tool_finished of {}, which is not a call started and not finished",
                            f.call
                        ),
                    ),
                }
            }
            Event::SourceItem { kind, item, .. } => self.blob(item, &format!("source item {kind}")),
            Event::Checkpoint { state_hash, at_seq } => {
                self.report.checkpoints += 1;
                if self.state.last_seq != Some(*at_seq) || self.state.hash() != *state_hash {
                    self.problem(
                        ProblemKind::Checkpoint,
                        format!("checkpoint for seq {at_seq} differs from the fold"),
                    );
                }
            }
            Event::SessionEnded { .. } => {
                let open: Vec<String> = self
                    .pending
                    .iter()
                    .map(|(c, p)| format!("{c} ({}, seq {})", p.tool, p.seq))
                    .collect();
                if !open.is_empty() {
                    self.problem(
                        ProblemKind::UnfinishedCall,
                        format!(
                            "the session ended with calls started and never finished: {}",
                            open.join(", ")
                        ),
                    );
                    self.pending.clear();
                }
                self.ended_at.get_or_insert(rec.seq);
            }
            // A hook asked cairn before each call: its questions and answers are in
            // the call (the allow list it answered from is `session_started.allow`).
            Event::PermissionRequested { call, .. } | Event::PermissionDecided { call, .. }
                if self.hooked && !self.pending.contains_key(call) =>
            {
                self.problem(
                    ProblemKind::Structure,
                    format!("a permission record outside its call {call}"),
                );
            }
            Event::PermissionRequested { call, .. } if self.hooked => {
                let at = self.at;
                if let Some(p) = self.pending.get_mut(call) {
                    p.records.push((Kind::Asked, at, false));
                }
            }
            Event::PermissionDecided {
                call,
                key,
                answer,
                source,
                ..
            } if self.hooked => {
                let at = self.at;
                if let Some(p) = self.pending.get_mut(call) {
                    p.records.push((Kind::of_decided(*source), at, false));
                    p.answer = Some(Answered {
                        key: key.clone(),
                        answer: *answer,
                        source: *source,
                        at,
                    });
                }
            }
            Event::PermissionRequested { call, .. } | Event::PermissionDecided { call, .. } => {
                self.problem(
                    ProblemKind::Structure,
                    format!("a permission record of call {call} in an imported session, which asked cairn nothing"),
                );
            }
            _ => {}
        }
    }

    /// A side effect of an imported call: inside the call.
    fn imported_effect(&mut self, call: &str, kind: Kind, what: &str) {
        let at = self.at;
        match self.pending.get_mut(call) {
            Some(p) => p.records.push((kind, at, false)),
            None => self.problem(
                ProblemKind::Structure,
                format!("{what} outside its call {call}"),
            ),
        }
    }

    /// The end of an imported call. Its tool is another agent's, so the table of what
    /// a call records holds only where the writers make it hold: a call denied was
    /// asked and denied (only a hook asks and denies: an imported session never ends a
    /// call denied), and does nothing; a hook's denial ends its call denied.
    fn imported_finished(&mut self, f: &ToolFinished, p: Pending) {
        if let Some(a) = &p.answer
            && a.answer == Answer::Deny
            && !matches!(f.status, Status::Denied | Status::Interrupted)
        {
            self.problem(
                ProblemKind::Decision,
                format!(
                    "call {} ({}) ended {}, but permission for {} was denied at seq {}: a hook's denial ends its call denied",
                    f.call,
                    p.tool,
                    f.status.as_str(),
                    a.key,
                    a.at.0
                ),
            );
        }
        if f.status == Status::Denied {
            self.implied(f, &p, &cairn_tools::Effects::NONE, false);
        }
    }

    /// The kept bytes of an imported file still hash to what the import recorded.
    fn original(&mut self, f: &cairn_core::event::ImportedFile) {
        let Some(b) = &f.original else {
            return;
        };
        if b.hash != f.hash || b.len != f.bytes {
            self.problem(
                ProblemKind::Blob,
                format!(
                    "the original of {} is blob {} ({} bytes), but the file read hashed to {} ({} bytes)",
                    f.path,
                    b.hash.short(12),
                    b.len,
                    f.hash.short(12),
                    f.bytes
                ),
            );
        }
        self.blob(b, &format!("the original of {}", f.path));
    }

    /// Checks the path of every entry of the manifest, and (deep) every file blob it
    /// names.
    fn manifest_entries(&mut self, blob: &BlobRef) {
        let Ok(bytes) = self.blobs.get(&blob.hash) else {
            return;
        };
        match manifest::from_jsonl(&bytes) {
            Ok(entries) => {
                for e in entries {
                    let why = match recorded_path(&e.path) {
                        RecordedPath::Workspace => None,
                        RecordedPath::Outside => {
                            Some("a manifest entry is never outside the workspace")
                        }
                        RecordedPath::Bad(why) => Some(why),
                    };
                    if let Some(why) = why {
                        self.problem(
                            ProblemKind::BadEvent,
                            format!("manifest entry {:?}: not a workspace path: {why}", e.path),
                        );
                    }
                    if e.withheld {
                        self.withheld(&e.path, &format!("manifest entry {}", e.path));
                        continue;
                    }
                    // Recorded by hash and size only: nothing holds the content.
                    if e.not_kept.is_some() {
                        continue;
                    }
                    if !self.check_blobs && e.hash.is_none() {
                        continue;
                    }
                    // A git-backed file recorded without its hash: the hash is the
                    // object's content's, checked against the blob id on reading.
                    let hash = match (e.hash, &e.git) {
                        (Some(h), _) => h,
                        (None, Some(oid)) => {
                            let workspace = self.workspace.clone().unwrap_or_default();
                            let objects = self
                                .git
                                .get_or_insert_with(|| cairn_tools::git::Objects::open(&workspace));
                            self.report.blobs_checked += 1;
                            match e.content_hash(objects) {
                                Some(h) => {
                                    self.git_backed.insert(h, oid.clone());
                                    continue;
                                }
                                None => {
                                    self.problem(
                                        ProblemKind::Blob,
                                        format!(
                                            "manifest entry {}: git object {oid} is missing from the repository of {} (or is not {} bytes)",
                                            e.path,
                                            workspace.display(),
                                            e.size
                                        ),
                                    );
                                    continue;
                                }
                            }
                        }
                        (None, None) => continue,
                    };
                    if let Some(oid) = &e.git {
                        self.git_backed.insert(hash, oid.clone());
                    }
                    if !self.check_blobs {
                        continue;
                    }
                    let r = BlobRef { hash, len: e.size };
                    self.blob(&r, &format!("manifest entry {}", e.path));
                }
            }
            Err(e) => self.problem(ProblemKind::Blob, format!("the manifest: {e}")),
        }
    }

    /// A file recorded withheld (hash only, no blob) must be a credential file of the
    /// session: marking any other file so would hide its content from every check.
    fn withheld(&mut self, path: &str, what: &str) {
        if !self.credential_files.matches(path) {
            self.problem(
                ProblemKind::Blob,
                format!(
                    "{what}: recorded withheld (no blob), but it is not a credential file of the session"
                ),
            );
        }
    }

    fn file_write(&mut self, w: &FileWrite) {
        self.report.file_writes += 1;
        match &w.call {
            Some(call) => {
                // A change a scan found after the call's command ended (one that
                // started: a program that could not start changed nothing).
                let ran = self.pending.get(call).is_some_and(|p| {
                    p.exec
                        .as_ref()
                        .is_some_and(|x| Kind::of_exec(x) != Kind::NotStarted)
                });
                let kind = Kind::of_write(w, ran);
                self.side_effect(call, kind, &format!("file_write of {}", w.path));
            }
            // Only a scan (after a background process's end, at a resume) records a
            // change that names no call.
            None if w.op != WriteOp::External => self.problem(
                ProblemKind::Structure,
                format!(
                    "file_write ({}) of {} names no call: only a scan's external write does",
                    write_op_name(w.op),
                    w.path
                ),
            ),
            None => {}
        }
        if w.withheld {
            self.withheld(&w.path, &format!("file_write {}", w.path));
        } else {
            if let Some(b) = &w.before {
                self.blob(b, &format!("file_write {} before", w.path));
            }
            if let Some(a) = &w.after {
                self.blob(a, &format!("file_write {} after", w.path));
            }
        }
        let class = recorded_path(&w.path);
        if let RecordedPath::Bad(why) = class {
            self.problem(
                ProblemKind::FileWrite,
                format!("write to {:?}: not a workspace path: {why}", w.path),
            );
        }
        // What the fold knew of the file before this write: for a tool's write, the
        // content the session last saw (read, wrote or observed), which the tool found
        // on disk; for a change a scan found, the workspace as the log's writes left
        // it, which is what the scan compares with (a read may have seen the change
        // first: the scan still records it, from the content written last).
        let known = match w.op {
            WriteOp::External => self
                .state
                .ws_changes
                .get(&w.path)
                .and_then(|f| f.as_ref().map(|f| f.hash)),
            _ => self.state.files.get(&w.path).and_then(|k| k.hash),
        };
        let before = w.before.map(|b| b.hash.0);
        if let Some(known) = known
            && before != Some(known)
        {
            self.problem(
                ProblemKind::FileWrite,
                format!(
                    "write to {}: before hash {} but the fold knew {}",
                    w.path,
                    w.before.map_or("none".into(), |b| b.hash.short(16)),
                    Hash(known).short(16)
                ),
            );
        }
        let Some(call) = w.call.clone() else {
            return;
        };
        let Some(p) = self.pending.get(&call) else {
            self.problem(
                ProblemKind::Structure,
                format!("file_write of {} outside its call {call}", w.path),
            );
            return;
        };
        if class == RecordedPath::Outside {
            // A write outside the workspace needs the folder allowed to the call's tool:
            // for this call, or for good.
            let dir = Path::new(&w.path)
                .parent()
                .map_or(String::new(), |d| d.to_string_lossy().into_owned());
            let key = format!("{}@{dir}", p.tool);
            let allowed = p.granted.as_ref().is_some_and(|(_, k, _)| *k == key)
                || self.state.allow.contains_key(&key);
            if !allowed {
                let what = format!(
                    "write to {}: outside the workspace, but {key} was not allowed to call {call}",
                    w.path
                );
                self.problem(ProblemKind::FileWrite, what);
                return;
            }
        }
        let Some(p) = self.pending.get_mut(&call) else {
            return;
        };
        if w.status == WriteStatus::Ok {
            p.last_hash = w.after.map(|a| a.hash);
        }
        // What its command's output lists as changed.
        if w.op == WriteOp::External && w.status == WriteStatus::Ok && p.exec.is_some() {
            let what = match (&w.before, &w.after) {
                (None, Some(_)) => Some("created"),
                (Some(_), Some(_)) => Some("changed"),
                (Some(_), None) => Some("deleted"),
                (None, None) => None,
            };
            if let Some(what) = what {
                p.changes.push((what, w.path.clone()));
            }
        }
        // The rules are checked once per write: at its intent, or at the write itself
        // when no intent came first.
        let first = if p.intents.contains(&w.path) {
            if w.status != WriteStatus::Intent {
                p.intents.retain(|x| x != &w.path);
            }
            false
        } else {
            if w.status == WriteStatus::Intent {
                p.intents.push(w.path.clone());
            }
            true
        };
        if !first || w.op == WriteOp::External {
            return;
        }
        let expected = decide::expected_before_hashes(&p.input);
        self.report.decisions_checked += 1;
        let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
        let before = w.before.map(|b| b.hash);
        if let Decision::Refuse(r) =
            decide::write(&self.state, w.op, &w.path, before.as_ref(), &expected)
        {
            self.problem(
                ProblemKind::Decision,
                format!(
                    "write to {} at content {}: {} should have refused it ({})",
                    w.path,
                    before.map_or("none".into(), |h| h.short(16)),
                    rule_name(r.rule),
                    r.message
                ),
            );
        }
    }

    /// The need the engine takes for call `p` when it asks for `key`: the tool's own,
    /// when it is that key; otherwise (a folder outside the workspace, or a key of an
    /// older version) a plain question for `key`.
    fn need_of(&self, p: &Pending, key: &str, detail: &str, recorded: &[String]) -> Need {
        let root = self.state.workspace.as_deref().unwrap_or("/");
        match self.registry.get(&p.tool).map(|t| {
            t.permission(
                &p.input,
                &cairn_tools::Asking {
                    root: Path::new(root),
                    credential_files: &self.credential_files,
                    // What the workspace held when the question was asked is a fact
                    // the log recorded.
                    links: cairn_tools::links::Links::Recorded(recorded),
                },
            )
        }) {
            Some(need) if matches!(&need, Need::Ask { key: k, .. } if k == key) => need,
            Some(need) => match key.strip_prefix(&format!("{}@", p.tool)) {
                Some(dir) => cairn_core::permission::outside_need(&p.tool, dir, need, &p.input),
                // A key of another call (copied?): this one needs none of its own.
                None if need == Need::Auto => Need::Auto,
                None => Need::ask(key, detail),
            },
            None => Need::ask(key, detail),
        }
    }

    fn permission_requested(&mut self, call: &str, key: &str, detail: &str, asked: Asked<'_>) {
        let Some(p) = self.pending.get(call) else {
            self.problem(
                ProblemKind::Structure,
                format!("permission_requested for {key} outside its call {call}"),
            );
            return;
        };
        let need = self.need_of(p, key, detail, asked.reasons);
        // Logs written before command lines were parsed keyed a line by its first word
        // and recorded no keys: their question is taken as recorded.
        let legacy = asked.keys.is_empty() && key.starts_with("shell:");
        let need = if legacy { Need::ask(key, detail) } else { need };
        let mut problems = Vec::new();
        let question = match decide::permission(&self.state, need, &self.guarded) {
            Permission::Auto => {
                problems.push(format!("asked for {key}, but the call needs no permission"));
                None
            }
            Permission::AllowList(q) => {
                problems.push(format!(
                    "asked for {key}, but the allow list covers it: the engine answers from the allow list"
                ));
                Some(q)
            }
            Permission::Ask(q) => Some(q),
        };
        if let Some(q) = &question
            && !legacy
        {
            let recorded_keys: Vec<String> = if asked.keys.is_empty() {
                vec![key.to_string()]
            } else {
                asked.keys.to_vec()
            };
            if q.key != key {
                problems.push(format!("the question is {}, not {key}", q.key));
            }
            if q.keys != recorded_keys {
                problems.push(format!(
                    "it records the keys [{}], but the call's keys are [{}]",
                    recorded_keys.join(", "),
                    q.keys.join(", ")
                ));
            }
            if q.reasons != asked.reasons {
                problems.push(format!(
                    "it records why no always covers it as [{}], but the call gives [{}]",
                    asked.reasons.join("; "),
                    q.reasons.join("; ")
                ));
            }
            if q.guards != asked.guards {
                problems.push(format!(
                    "it records the guarded commands [{}], but the line matches [{}]",
                    asked.guards.join(", "),
                    q.guards.join(", ")
                ));
            }
            if q.guarded != asked.guarded {
                problems.push(format!(
                    "the request is {}marked guarded, but the call is {}guarded",
                    if asked.guarded { "" } else { "not " },
                    if q.guarded { "" } else { "not " }
                ));
            }
        }
        self.report.decisions_checked += 1;
        for what in problems {
            self.problem(
                ProblemKind::Decision,
                format!("call {call} ({key}): {what}"),
            );
        }
        let at = self.at;
        if let Some(p) = self.pending.get_mut(call) {
            p.asked.push(key.to_string());
            p.question = question;
            p.records.push((Kind::Asked, at, false));
        }
    }

    fn permission_decided(
        &mut self,
        call: &str,
        key: &str,
        answer: Answer,
        source: AnswerSource,
        grants: Option<&[String]>,
    ) {
        let at = self.at;
        let Some(p) = self.pending.get(call) else {
            self.problem(
                ProblemKind::Structure,
                format!("permission_decided for {key} outside its call {call}"),
            );
            return;
        };
        let asked = p.asked.iter().any(|k| k == key);
        let mut problems = Vec::new();
        if source == AnswerSource::AllowList {
            let need = self.need_of(p, key, "", &[]);
            self.report.decisions_checked += 1;
            if asked {
                problems.push(format!(
                    "{key} answered from the allow list after a question was asked"
                ));
            } else if answer != Answer::Always {
                problems.push(format!(
                    "{key} answered {} from the allow list, which only answers always",
                    answer_name(answer)
                ));
            } else {
                match decide::permission(&self.state, need, &self.guarded) {
                    Permission::AllowList(_) => {}
                    Permission::Ask(q) if q.guarded => problems.push(format!(
                        "{key} answered from the allow list, but the command line is guarded: it must be asked"
                    )),
                    Permission::Ask(q) if !q.reasons.is_empty() => problems.push(format!(
                        "{key} answered from the allow list, but no always can cover it: {}",
                        q.reasons.join("; ")
                    )),
                    Permission::Auto => problems.push(format!(
                        "{key} answered from the allow list, but the call needs no permission"
                    )),
                    _ => problems.push(format!(
                        "{key} answered from the allow list, but the fold's allow list does not hold every key of it"
                    )),
                }
            }
            if grants.is_some_and(|g| !g.is_empty()) {
                problems.push(format!(
                    "{key} answered from the allow list records grants: only an answer that was asked grants"
                ));
            }
        } else if !asked {
            problems.push(format!(
                "{key} answered {} by {} without a permission_requested",
                answer_name(answer),
                source_name(source)
            ));
        } else if let (Some(recorded), Some(q)) = (grants, &p.question) {
            let expected = q.grants(answer);
            if recorded != expected.as_slice() {
                problems.push(format!(
                    "{key} answered {} records grants [{}], but that answer grants [{}]",
                    answer_name(answer),
                    recorded.join(", "),
                    expected.join(", ")
                ));
            }
        }
        for what in problems {
            self.problem(ProblemKind::Decision, format!("call {call}: {what}"));
        }
        let Some(p) = self.pending.get_mut(call) else {
            return;
        };
        p.records.push((Kind::of_decided(source), at, false));
        p.answer = Some(Answered {
            key: key.to_string(),
            answer,
            source,
            at,
        });
        // A denial that stops the call (not a policy's confined run) forbids any side
        // effect after it; a grant is remembered for the status check.
        match decide::answered(&p.tool, key, answer, source) {
            Outcome::Denied(_) => p.denied = Some((at.0, key.to_string())),
            Outcome::Confined => {}
            Outcome::Run { .. } => p.granted = Some((at.0, key.to_string(), answer)),
        }
    }

    fn tool_finished(&mut self, f: &ToolFinished) {
        let Some(mut p) = self.pending.remove(&f.call) else {
            self.problem(
                ProblemKind::Structure,
                format!(
                    "tool_finished of call {} that did not start (or finished twice)",
                    f.call
                ),
            );
            return;
        };
        if let Some(b) = &f.output_blob {
            self.blob(b, &format!("call {} output", f.call));
        }
        if let Some(b) = &f.mcp_result {
            self.blob(b, &format!("call {} MCP result", f.call));
            p.records.push((Kind::McpResult, self.at, false));
            self.mcp_status(f, &p, b);
        }
        self.status_agrees(f, &p);
        if let Some(x) = &p.exec
            && f.status != Status::Interrupted
            && p.denied.is_none()
            && answers_with_command(&p.tool)
        {
            self.shell_output(f, &p, x);
        }
        if let Some(d) = &p.denied {
            self.denied.insert(f.call.clone(), d.clone());
        }
        if f.status == Status::Interrupted {
            self.interrupted.insert(f.call.clone(), p.tool.clone());
        }
        self.rules(f, &p);
        // An MCP tool, a built-in of the session's catalog, or a tool this version does
        // not know.
        let effects = match &p.mcp {
            Some(_) => Some(cairn_tools::Effects::MCP),
            None => self.registry.effects(&p.tool),
        };
        // A replay's call that may have been answered from the recording
        // (`Engine::call_answered`): one reaching outside, running commands or whose
        // input held a secret, which took no time.
        let replayed = self.replay
            && f.elapsed_us == 0
            && effects.is_none_or(|e| {
                e.external
                    || e.runs_commands
                    || cairn_core::scrub::holds_marker(&p.input.to_string())
            });
        if let Some(effects) = effects {
            self.implied(f, &p, &effects, replayed);
        }
        if f.status == Status::Interrupted && !replayed {
            self.awaiting_resume = Some((self.at, f.call.clone()));
        }
    }

    /// The rules the engine decided the call's end by, taken again: its refusal, its
    /// admission, its permission answer, what its output shows.
    fn rules(&mut self, f: &ToolFinished, p: &Pending) {
        let wrong = |v: &mut Verifier, what: String| {
            v.problem(
                ProblemKind::Decision,
                format!("call {} ({}): {what}", f.call, p.tool),
            )
        };
        // The status follows the refusal, whatever the tool (an MCP server's too). What
        // it wrote, ran and fetched for its status: `Verifier::implied`.
        let status = f.status.as_str();
        match &f.refusal {
            Some(r) if f.status != decide::refusal_status(r.rule) => wrong(
                self,
                format!(
                    "status {status} with refusal {}: a refused call ends {}",
                    rule_name(r.rule),
                    decide::refusal_status(r.rule).as_str()
                ),
            ),
            None if f.status == Status::Blocked => wrong(
                self,
                "status blocked without a refusal: only a repeat refusal blocks".into(),
            ),
            _ => {}
        }
        if self.registry.get(&p.tool).is_none() {
            // A tool of another catalog or a newer cairn: its rules are not known here.
            if f.status != Status::Error {
                self.report.decisions_unchecked += 1;
            }
            return;
        }
        self.report.decisions_checked += 1;
        let limits = self.limits.clone();
        let shows = |message: &str| shows(f, &limits, message);
        // Admission: input size, schema, repeat block.
        let admitted = p.admitted.clone().unwrap_or(Decision::Allow);
        let admission = |r: &Refusal| matches!(r.rule, Rule::Input | Rule::Repeat);
        match (&admitted, &f.refusal) {
            (Decision::Refuse(d), Some(r)) if d.refusal() == *r => {
                if !shows(&d.message) {
                    wrong(
                        self,
                        format!(
                            "refused by {}, but the output is not the rule's message: {}",
                            rule_name(r.rule),
                            d.message
                        ),
                    );
                }
            }
            // A crash (or a kill) between the start and the refusal.
            (Decision::Refuse(_), None) if f.status == Status::Interrupted => {}
            (Decision::Refuse(d), _) => wrong(
                self,
                match d.rule {
                    Rule::Repeat => format!(
                        "recorded {status}, but the fold says this exact call was already made {} times (repeat_calls_max {}) and its answer could not have changed: it should have been blocked ({})",
                        p.repeats, limits.repeat_calls_max, d.message
                    ),
                    rule => format!(
                        "recorded {status}, but {} refuses it: {}",
                        rule_name(rule),
                        d.message
                    ),
                },
            ),
            (Decision::Allow, Some(r)) if admission(r) => wrong(
                self,
                match r.rule {
                    Rule::Repeat if p.repeats < limits.repeat_calls_max => format!(
                        "blocked as a repeat, but the fold counts {} earlier identical calls (repeat_calls_max {})",
                        p.repeats, limits.repeat_calls_max
                    ),
                    Rule::Repeat => format!(
                        "blocked as a repeat, but its answer could have changed since the last identical call ({}): a file it depends on differs from what the log last showed, or a background process was running",
                        p.repeats
                    ),
                    _ => "refused as bad input, but the input is within input_bytes_max and matches the tool's schema".into(),
                },
            ),
            (Decision::Allow, _) => {}
        }
        // A write rule's refusal is taken again from the fold and its observed hash.
        if let Some(r) = &f.refusal
            && let Some(op) = match r.rule {
                Rule::ReadBeforeEdit => Some(WriteOp::Edit),
                Rule::ReadBeforeOverwrite => Some(WriteOp::Replace),
                // Its guards come first: no read rule of an op decides it.
                Rule::StaleWrite => Some(WriteOp::Create),
                _ => None,
            }
        {
            self.write_refusal(f, p, r, op);
        }
        // The permission answer decides whether the call ran.
        if let Some(Answered {
            key,
            answer,
            source,
            at,
        }) = &p.answer
        {
            let denied = match decide::answered(&p.tool, key, *answer, *source) {
                Outcome::Denied(message) => Some(message),
                Outcome::Run { .. } | Outcome::Confined => None,
            };
            let answered = format!(
                "permission for {key} was answered {} ({}) at seq {}",
                answer_name(*answer),
                source_name(*source),
                at.0
            );
            let what = match (denied, f.status == Status::Denied) {
                _ if f.status == Status::Interrupted => None,
                (Some(message), true) => (!shows(&message)).then(|| {
                    format!("denied, but the output is not the denial's message: {message}")
                }),
                (None, false) => None,
                (Some(_), false) => Some(format!(
                    "status {status}, but {answered}: the call does not run"
                )),
                (None, true) => Some(format!("status denied, but {answered}: the call runs")),
            };
            if let Some(what) = what {
                // Either record may be the forged one: both are reported.
                let here = self.at;
                wrong(self, what.clone());
                self.at = *at;
                self.problem(
                    ProblemKind::Decision,
                    format!("call {}: {what} (it finished at seq {})", f.call, here.0),
                );
                self.at = here;
            }
        }
        // The content hash an output reports is the one its records name.
        if f.status == Status::Ok
            && let Some(h) = p.last_hash
            && let Some(said) = f
                .output
                .lines()
                .rev()
                .find_map(|l| l.strip_prefix("hash: "))
            && said.trim() != h.to_hex()
        {
            wrong(
                self,
                format!(
                    "the output reports content hash {} but the call's records name {}",
                    said.trim(),
                    h.to_hex()
                ),
            );
        }
        // Caps: the output given to the model is the capped whole output, flagged (with
        // the injection note) exactly when what it shows reads like an instruction.
        let (lines_max, bytes_max) = (self.limits.output_lines_max, self.limits.output_bytes_max);
        let shown = match &f.output_blob {
            Some(b) => match self.blobs.get(&b.hash) {
                Ok(whole) => {
                    let shown = decide::shown(&String::from_utf8_lossy(&whole), &self.limits);
                    if !shown.cut || shown.text != f.output {
                        wrong(
                            self,
                            "the output is not the whole output (in its blob) capped by output_bytes_max and output_lines_max".into(),
                        );
                    }
                    Some(shown)
                }
                Err(_) => None,
            },
            None => {
                let shown = decide::shown(decide::unflagged(&f.output, &f.injection), &self.limits);
                if shown.cut {
                    wrong(
                        self,
                        format!(
                            "the output is over the caps ({bytes_max} bytes, {lines_max} lines) and has no output blob"
                        ),
                    );
                }
                Some(shown)
            }
        };
        match shown {
            Some(shown) if shown.injection != f.injection => wrong(
                self,
                format!(
                    "the output's injection flag is {:?} but what it shows gives {:?}",
                    f.injection, shown.injection
                ),
            ),
            Some(shown) if !shown.cut && shown.text != f.output => wrong(
                self,
                "the output does not end with the injection note its flag calls for".into(),
            ),
            _ => {}
        }
    }

    /// Each step a resume decided about is a call that ended interrupted, of a tool
    /// that runs commands.
    fn interrupted_steps(&mut self, steps: &[InterruptedStep]) {
        for s in steps {
            let what = match self.interrupted.get(&s.call) {
                None => format!(
                    "session_resumed decides about step {} (call {}), but that call did not end interrupted",
                    s.step, s.call
                ),
                Some(tool) if *tool != s.tool => format!(
                    "session_resumed names call {} a {} call, but it was a {tool} call",
                    s.call, s.tool
                ),
                Some(tool)
                    if self
                        .registry
                        .get(tool)
                        .is_some_and(|t| !t.effects().runs_commands) =>
                {
                    format!(
                        "session_resumed decides whether call {} runs again, but {tool} runs no command: an interrupted {tool} call always runs again",
                        s.call
                    )
                }
                Some(_) => continue,
            };
            self.problem(ProblemKind::Structure, what);
        }
    }

    /// Nothing but a resume follows `session_ended`: checkpoints (placed by interval,
    /// so one may fall right after the end), and what a resume records before its
    /// `session_resumed` (its findings: external writes, lost processes, interrupted
    /// calls). Anything else after the end is a record the session never wrote.
    fn after_end(&mut self, event: &Event) {
        let Some(end) = self.ended_at else {
            return;
        };
        match event {
            // The signed tree head of the whole session follows its end.
            Event::Checkpoint { .. } | Event::TreeCheckpoint { .. } => {}
            Event::SessionResumed { .. } => {
                self.after_end.clear();
                self.ended_at = None;
            }
            e if resume_writes(e) => self.after_end.push((self.at, e.kind())),
            e => {
                self.flush_after_end();
                self.problem(ProblemKind::Structure, after_end_what(e.kind(), end));
            }
        }
    }

    /// A call ends `interrupted` only when a resume finds it unfinished: what follows
    /// its `tool_finished` is the resume's findings (and checkpoints), then its
    /// `session_resumed`. A log that ends there is a resume that stopped before it.
    fn after_interrupted(&mut self, event: &Event) {
        let Some((at, call)) = self.awaiting_resume.take() else {
            return;
        };
        match event {
            Event::SessionResumed { .. } => {}
            Event::Checkpoint { .. } | Event::TreeCheckpoint { .. } => {
                self.awaiting_resume = Some((at, call));
            }
            e if resume_writes(e) => self.awaiting_resume = Some((at, call)),
            e => {
                let here = self.at;
                self.at = at;
                self.problem(
                    ProblemKind::Decision,
                    format!(
                        "call {call} ended interrupted, but a {} follows (at seq {}) before any session_resumed: a call ends interrupted only when a resume finds it unfinished",
                        e.kind(),
                        here.0
                    ),
                );
                self.at = here;
            }
        }
    }

    /// Reports the records after the end that no `session_resumed` followed.
    fn flush_after_end(&mut self) {
        let Some(end) = self.ended_at else {
            return;
        };
        for ((seq, line, offset), kind) in std::mem::take(&mut self.after_end) {
            self.problems.add(Problem {
                seq: Some(seq),
                line,
                offset,
                kind: ProblemKind::Structure,
                what: after_end_what(kind, end),
            });
        }
    }

    /// Notes a record of `kind` of `call` (for the table of what a call records, at its
    /// end); one after a denial that stopped the call is a problem here.
    fn side_effect(&mut self, call: &str, kind: Kind, what: &str) {
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

    fn shell_exec(&mut self, x: &ShellExec) {
        if let Some(end) = x.end() {
            self.shell_end(&x.call, end);
        }
        let kind = Kind::of_exec(x);
        let shown = cairn_tools::shell::shown_argv(&x.argv);
        self.side_effect(&x.call, kind, &format!("shell_exec of `{shown}`"));
        let inside = self.pending.contains_key(&x.call);
        match x.kind {
            ProcKind::Foreground => match self.pending.get_mut(&x.call) {
                None => self.problem(
                    ProblemKind::Structure,
                    format!("foreground shell_exec outside its call {}", x.call),
                ),
                Some(p) if x.end().is_some() => {
                    p.exec = Some(x.clone());
                    p.changes.clear();
                }
                Some(_) => {}
            },
            // A background process's end is recorded when it exits, after its call
            // (at a later call's start, a cancel, the session's end or a resume): it
            // ends a process that call started and the fold knows running.
            ProcKind::Background if kind == Kind::BgEnded && !inside => {
                let id = x.id.as_deref().unwrap_or_default();
                let why = match self.state.processes.get(id) {
                    None => Some(format!("the log started no background process {id:?}")),
                    Some(p) if p.call != x.call => {
                        Some(format!("process {id} was started by call {}", p.call))
                    }
                    Some(p) if !p.is_running() => {
                        Some(format!("process {id} had ended already ({})", p.status))
                    }
                    Some(_) => None,
                };
                if let Some(why) = why {
                    self.problem(
                        ProblemKind::Structure,
                        format!(
                            "background shell_exec of `{shown}` finished for call {}, but {why}",
                            x.call
                        ),
                    );
                }
            }
            ProcKind::Background if !inside && kind != Kind::BgEnded => self.problem(
                ProblemKind::Structure,
                format!(
                    "background shell_exec of `{shown}` ({}) outside its call {}",
                    x.phase_name(),
                    x.call
                ),
            ),
            ProcKind::Background => {}
        }
    }

    /// The blobs of a process's end, and the sizes it gives for them.
    fn shell_end(&mut self, call: &str, end: &ShellEnd) {
        for (blob, name) in [
            (&end.stdout, "stdout"),
            (&end.stderr, "stderr"),
            (&end.log_blob, "log"),
        ] {
            if let Some(b) = blob {
                self.blob(b, &format!("call {call} {name}"));
            }
        }
        for (bytes, blob, cut, name) in [
            (end.stdout_bytes, &end.stdout, end.stdout_cut, "stdout"),
            (end.stderr_bytes, &end.stderr, end.stderr_cut, "stderr"),
        ] {
            // A cut says where its blob joins head and tail and how much went between:
            // the blob and the count must agree with it.
            if let (Some(n), Some(b), Some(c)) = (bytes, blob, cut)
                && (c.at > b.len || b.len.checked_add(c.dropped_bytes) != Some(n))
            {
                self.problem(
                    ProblemKind::Output,
                    format!(
                        "call {call}: {name} cut at {} dropping {} bytes, but {name}_bytes is {n} and its blob {} bytes",
                        c.at, c.dropped_bytes, b.len
                    ),
                );
            }
            // Past the capture limit the blob keeps the first bytes only.
            if let (Some(n), Some(b)) = (bytes, blob)
                && b.len != n.min(self.limits.shell_capture_bytes_max)
            {
                self.problem(
                    ProblemKind::Output,
                    format!(
                        "call {call}: {name}_bytes is {n} but its {name} blob is {} bytes",
                        b.len
                    ),
                );
            }
        }
    }

    fn web_fetched(&mut self, w: &WebFetched) {
        if let Some(b) = &w.text {
            self.blob(b, &format!("call {} text of {}", w.call, w.url));
        }
        if !self.pending.contains_key(&w.call) {
            self.problem(
                ProblemKind::Structure,
                format!("web_fetched of {} outside its call {}", w.url, w.call),
            );
        }
        self.side_effect(
            &w.call,
            Kind::of_fetch(w),
            &format!("web_fetched of {}", w.url),
        );
    }

    /// Re-applies a write of a file tool: its before content and its call's input must
    /// give its after content. Checked once per (path, after hash) in a call, so an
    /// intent and its outcome are one check unless they disagree.
    fn reapply(&mut self, w: &FileWrite) {
        if w.op == WriteOp::External {
            return;
        }
        let Some(call) = &w.call else {
            return;
        };
        let after = w.after.map(|a| a.hash);
        let input = match self.pending.get_mut(call) {
            Some(p) if !p.reapplied.contains(&(w.path.clone(), after)) => {
                p.reapplied.push((w.path.clone(), after));
                p.input.clone()
            }
            // Outside its call (reported), or checked already.
            _ => return,
        };
        let Some(change) = reapply::change_of(&input) else {
            return;
        };
        let before = match &w.before {
            None => None,
            // A withheld file's content before is not kept: only a create re-applies.
            Some(_) if w.withheld => return,
            Some(b) => match self.blobs.get(&b.hash) {
                Ok(bytes) if Hash::of(&bytes) == b.hash => Some(bytes),
                // Missing or damaged: reported by the blob check.
                _ => return,
            },
        };
        // A redacted input holds markers where the workspace holds the secret.
        let redacted = cairn_core::scrub::holds_marker(&input.to_string());
        if redacted && w.withheld {
            // The secrets the markers stand for are in no blob to compare with.
            return;
        }
        let what = match w.op {
            WriteOp::Create => "create",
            WriteOp::Replace => "overwrite",
            WriteOp::Edit => "edit",
            WriteOp::Delete => "delete",
            WriteOp::Append => "append",
            WriteOp::External => return,
        };
        let computed = reapply::apply(&change, &w.path, before.as_deref());
        self.report.writes_reapplied += 1;
        match (computed, &w.after) {
            (Err(_), _) if redacted => {}
            (Err(why), _) => self.problem(
                ProblemKind::FileWrite,
                format!(
                    "{what} of {} by call {call}: the call's input does not apply to the content before ({why}), yet the write is recorded",
                    w.path
                ),
            ),
            (Ok(_), None) => self.problem(
                ProblemKind::FileWrite,
                format!(
                    "{what} of {} by call {call}: the write records no content after, but the call's input gives some",
                    w.path
                ),
            ),
            (Ok(content), Some(a)) => {
                let got = Hash::of(&content);
                if got == a.hash {
                    return;
                }
                if redacted
                    && let Ok(actual) = self.blobs.get(&a.hash)
                    && holes::fits(
                        &holes::markers_as_holes(&String::from_utf8_lossy(&content), false),
                        &String::from_utf8_lossy(&actual),
                    )
                {
                    return;
                }
                self.problem(
                    ProblemKind::FileWrite,
                    format!(
                        "{what} of {} by call {call}: the content before and the call's input give {} ({} bytes), but the write records after {} ({} bytes)",
                        w.path,
                        got.short(16),
                        content.len(),
                        a.hash.short(16),
                        a.len
                    ),
                );
            }
        }
    }

    /// A call's status agrees with its permission answer, its refusal, its writes and
    /// its command.
    fn status_agrees(&mut self, f: &ToolFinished, p: &Pending) {
        let status = f.status.as_str();
        let wrong = |v: &mut Verifier, what: String| {
            v.problem(
                ProblemKind::Decision,
                format!("call {} ({}): {what}", f.call, p.tool),
            )
        };
        match (&p.denied, f.status) {
            // A crash between the denial and the end leaves it interrupted.
            (Some(_), Status::Denied | Status::Interrupted) => {}
            (Some((seq, key)), _) => wrong(
                self,
                format!(
                    "status {status}, but permission for {key} was denied at seq {seq}: ran after deny (a denied call ends denied)"
                ),
            ),
            (None, Status::Denied) => match (&p.granted, &p.answer) {
                (Some((seq, key, answer)), _) => wrong(
                    self,
                    format!(
                        "status denied, but permission for {key} was granted ({}) at seq {seq}",
                        answer_name(*answer)
                    ),
                ),
                (None, Some(a)) => wrong(
                    self,
                    format!(
                        "status denied, but no permission was denied to it: {} answered {} by {} lets it run (confined)",
                        a.key,
                        answer_name(a.answer),
                        source_name(a.source)
                    ),
                ),
                // With no answer at all, what the table of what a call records says
                // (`Verifier::implied`).
                (None, None) => {}
            },
            _ => {}
        }
        // A refusal's status is `decide::refusal_status`, checked in `tool_finished`;
        // its writes and its command for its status, in `Verifier::implied`.
    }

    /// The call's records are those its tool's effects and how it ended imply (the
    /// table of `cairn_tools::implied`): one missing is reported at the call's end, one
    /// too many where it is (unless it was reported there already, as one after a
    /// denial).
    fn implied(
        &mut self,
        f: &ToolFinished,
        p: &Pending,
        effects: &cairn_tools::Effects,
        replayed: bool,
    ) {
        let background = effects
            .background
            .and_then(|field| p.input.get(field))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        // Whether its command may have failed before it ran: a working folder its input
        // names, no check command, the most background processes running.
        let running = || {
            let n = self.state.processes.values().filter(|p| p.is_running());
            n.count() >= self.limits.shell_background_max
        };
        let early = effects
            .cwd
            .is_some_and(|field| p.input.get(field).is_some_and(|v| !v.is_null()))
            || (effects.runs_commands
                && !effects.command_output
                && self.check_command != Some(true))
            || (background && running());
        let call = implied::Call {
            status: f.status,
            refusal: f.refusal.as_ref().map(|r| r.rule),
            asks: self.asks(f, p),
            stopped: p.denied.is_some(),
            background,
            early,
            replayed,
        };
        let expect = implied::implied(effects, &call);
        let status = f.status.as_str();
        let end = self.at;
        if !expect.possible() {
            let statuses: Vec<&str> = implied::statuses(effects)
                .iter()
                .map(Status::as_str)
                .collect();
            self.problem(
                ProblemKind::Decision,
                format!(
                    "call {} ({}) ended {status}, which no call of {} ends with: it ends {} (or denied, blocked, interrupted)",
                    f.call,
                    p.tool,
                    p.tool,
                    statuses.join(", ")
                ),
            );
            return;
        }
        let counts = implied::counts(p.records.iter().map(|(k, _, _)| *k));
        for m in expect.misfits(&counts) {
            match m {
                Misfit::Missing { kind, have, min } => {
                    let how = if have == 0 && min == 1 {
                        "a".to_string()
                    } else {
                        format!("{have} (of at least {min})")
                    };
                    self.problem(
                        ProblemKind::Decision,
                        format!(
                            "call {} ({}) ended {status} without {how} {}: {}",
                            f.call,
                            p.tool,
                            kind.name(),
                            expect.why(kind)
                        ),
                    );
                }
                Misfit::Extra { kind, have, max } => {
                    // The records past the most allowed; reported at the first of them
                    // no problem was reported at yet.
                    let Some(at) = p
                        .records
                        .iter()
                        .filter(|(k, _, _)| *k == kind)
                        .skip(max as usize)
                        .find(|(_, _, reported)| !reported)
                        .map(|(_, at, _)| *at)
                    else {
                        continue;
                    };
                    let what = match max {
                        0 => format!("holds a {}", kind.name()),
                        _ => format!("holds {have} {}, more than {max}", kind.name()),
                    };
                    self.at = at;
                    self.problem(
                        ProblemKind::Decision,
                        format!(
                            "call {} ({}) {what}, but it ended {status} (at seq {}): {}",
                            f.call,
                            p.tool,
                            end.0,
                            expect.why(kind)
                        ),
                    );
                    self.at = end;
                }
            }
        }
    }

    /// What the permission step of call `p` gave: what its records say, or when it
    /// records none, what the engine's permission step gives for it on the fold (whose
    /// allow list only a recorded answer changes). Nothing when the table does not
    /// depend on it (a call refused before it was asked, or interrupted).
    fn asks(&self, f: &ToolFinished, p: &Pending) -> Asks {
        match &p.answer {
            Some(a) if a.source == AnswerSource::AllowList => return Asks::AllowList,
            Some(_) => return Asks::Question,
            None if !p.asked.is_empty() => return Asks::Question,
            None => {}
        }
        let admission = f
            .refusal
            .as_ref()
            .is_some_and(|r| matches!(r.rule, Rule::Input | Rule::Repeat));
        if admission || f.status == Status::Interrupted {
            return Asks::Nothing;
        }
        let need = match (&p.mcp, self.registry.get(&p.tool)) {
            (Some(m), _) => Need::ask(
                cairn_tools::mcp_names::permission_key(&m.server, &m.tool),
                String::new(),
            ),
            (None, Some(t)) => {
                let root = self.state.workspace.as_deref().unwrap_or("/");
                t.permission(
                    &p.input,
                    &cairn_tools::Asking {
                        root: Path::new(root),
                        credential_files: &self.credential_files,
                        // No question was recorded, so no write through a link was found.
                        links: cairn_tools::links::Links::Recorded(&[]),
                    },
                )
            }
            (None, None) => return Asks::Nothing,
        };
        match decide::permission(&self.state, need, &self.guarded) {
            Permission::Auto => Asks::Nothing,
            Permission::AllowList(_) => Asks::AllowList,
            Permission::Ask(_) => Asks::Question,
        }
    }

    /// An MCP call the server answered ends as its result says (`isError`).
    fn mcp_status(&mut self, f: &ToolFinished, p: &Pending, b: &BlobRef) {
        if f.status == Status::Interrupted || !self.blob_intact(b) {
            return;
        }
        let Some(result) = self
            .blobs
            .get(&b.hash)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        else {
            return;
        };
        let expected = cairn_tools::mcp_names::result_status(&result);
        if f.status != expected {
            self.problem(
                ProblemKind::Decision,
                format!(
                    "call {} ({}) ended {}, but the MCP server's result {} isError: the call ends {}",
                    f.call,
                    p.tool,
                    f.status.as_str(),
                    if expected == Status::Error {
                        "says"
                    } else {
                        "does not say"
                    },
                    expected.as_str()
                ),
            );
        }
    }

    /// A foreground command's output is what its records and blobs give.
    fn shell_output(&mut self, f: &ToolFinished, p: &Pending, exec: &ShellExec) {
        let Some(x) = exec.end() else {
            return;
        };
        if x.error.is_some() {
            // It never started: the output is the system's error, not in the log.
            return;
        }
        // A stream's preview, from its blob; `None` when the blob is reported.
        let stream = |v: &Verifier, blob: &Option<BlobRef>, bytes: Option<u64>| match blob {
            None => Some(shell_output::Stream::Lost),
            // Past the capture limit the blob keeps the head only, and the preview was
            // made from every byte: it cannot be rebuilt.
            Some(b) if bytes.is_some_and(|n| b.len < n) => Some(shell_output::Stream::Cut),
            Some(b) if v.blob_intact(b) => {
                shell_output::preview(&v.blobs, b, &v.limits).map(shell_output::Stream::Shown)
            }
            Some(_) => None,
        };
        let (Some(out), Some(err)) = (
            stream(self, &x.stdout, x.stdout_bytes),
            stream(self, &x.stderr, x.stderr_bytes),
        ) else {
            return;
        };
        // The timeout field is the tool's own (`timeout_ms`, `timeout_secs`): asked of it.
        let field = self
            .registry
            .effects(&p.tool)
            .and_then(|e| e.timeout)
            .unwrap_or(cairn_tools::TimeoutField::MS);
        let note = field
            .asked_ms(&p.input)
            .filter(|t| *t > self.limits.shell_timeout_ms_max);
        let expected = shell_output::expected(
            exec,
            x,
            [out, err],
            &p.changes,
            (field, note),
            &self.writable,
            &self.limits,
        );
        let recorded = match &f.output_blob {
            None => decide::unflagged(&f.output, &f.injection).to_string(),
            Some(b) if self.blob_intact(b) => match self.blobs.get(&b.hash) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(_) => return,
            },
            Some(_) => return,
        };
        let env = holes::has_env_marker(&recorded);
        let fits = match (&expected[..], env) {
            ([Piece::Text(e)], false) => *e == recorded,
            ([Piece::Text(e)], true) => holes::fits(&holes::markers_as_holes(&recorded, true), e),
            (_, false) => holes::fits(&expected, &recorded),
            // Holes on both sides: nothing certain to compare.
            (_, true) => return,
        };
        self.report.outputs_checked += 1;
        if !fits {
            let hint = match (&expected[..], env) {
                ([Piece::Text(e)], false) => first_difference(e, &recorded),
                _ => String::new(),
            };
            self.problem(
                ProblemKind::Output,
                format!(
                    "call {} ({}): the output differs from what its command's records give (exit status, time, stdout and stderr blobs, files changed){hint}",
                    f.call, p.tool
                ),
            );
        }
    }

    /// Takes a write rule's refusal again: the fold and the refusal's observed hash
    /// (with the input's `expected_before_hash` guards) must give the same refusal.
    fn write_refusal(&mut self, f: &ToolFinished, p: &Pending, r: &Refusal, op: WriteOp) {
        let wrong = |v: &mut Verifier, what: String| {
            v.problem(
                ProblemKind::Decision,
                format!("call {} ({}): {what}", f.call, p.tool),
            )
        };
        let rule = rule_name(r.rule);
        if r.rule != Rule::StaleWrite && r.observed.is_none() {
            wrong(
                self,
                "a read-before-write refusal without the observed hash".into(),
            );
            return;
        }
        let path = r.path.as_deref().unwrap_or_default();
        let expected = decide::expected_before_hashes(&p.input);
        let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
        let observed = r.observed.map_or("none".into(), |h| h.short(16));
        match decide::write(&self.state, op, path, r.observed.as_ref(), &expected) {
            Decision::Allow => {
                let why = match r.rule {
                    Rule::ReadBeforeEdit => format!("{path} was read at that content"),
                    Rule::ReadBeforeOverwrite => {
                        format!("every line of {path} was read at that content")
                    }
                    _ => "every expected_before_hash matches that content".into(),
                };
                wrong(
                    self,
                    format!(
                        "refused by {rule} at content {observed}, but the rules allow it: the fold says {why}"
                    ),
                );
            }
            Decision::Refuse(d) if d.refusal() != *r => wrong(
                self,
                format!(
                    "refused by {rule} of {path} at content {observed}, but the rules give {} of {} at {}: {}",
                    rule_name(d.rule),
                    d.path.as_deref().unwrap_or("?"),
                    d.observed.map_or("none".into(), |h| h.short(16)),
                    d.message
                ),
            ),
            Decision::Refuse(d) if !shows(f, &self.limits, &d.message) => wrong(
                self,
                format!(
                    "refused by {rule}, but the output is not the rule's message: {}",
                    d.message
                ),
            ),
            Decision::Refuse(_) => {}
        }
    }

    /// Compares the snapshot taken at `seq`, if any, with the fold.
    fn snapshot_at(&mut self, seq: u64, hash: Hash) {
        let Some(i) = self.snapshots.iter().position(|(s, _)| *s == seq) else {
            return;
        };
        let (_, path) = self.snapshots.remove(i);
        match SnapshotStore::load(&path) {
            Err(e) => self.problem(ProblemKind::Snapshot, format!("{e}")),
            Ok(s) if s.meta.record_hash != hash => self.problem(
                ProblemKind::Snapshot,
                format!(
                    "snapshot {} is tagged with record hash {}, the log's record is {}",
                    path.display(),
                    s.meta.record_hash.short(16),
                    hash.short(16)
                ),
            ),
            Ok(s) if s.meta.format_version == cairn_core::state::STATE_FORMAT_VERSION => {
                match State::from_bytes(&s.body) {
                    Ok(st) if st == self.state => {}
                    Ok(_) => self.problem(
                        ProblemKind::Snapshot,
                        format!(
                            "snapshot {} differs from the fold at seq {seq}",
                            path.display()
                        ),
                    ),
                    Err(e) => self.problem(
                        ProblemKind::Snapshot,
                        format!("snapshot {} does not load: {e}", path.display()),
                    ),
                }
            }
            // A snapshot of another state version is a cache this version ignores.
            Ok(_) => {}
        }
    }

    fn finish(&mut self) {
        self.flush_after_end();
        let last = self.state.last_seq;
        let remaining = std::mem::take(&mut self.snapshots);
        for (seq, path) in remaining {
            if last.is_none_or(|l| seq > l) {
                let first_missing = last.map_or(0, |l| l + 1);
                self.problems.add(Problem {
                    seq: Some(first_missing),
                    line: self.at.1 + 1,
                    offset: self.report.bytes,
                    kind: ProblemKind::Truncated,
                    what: format!(
                        "the log ends at seq {} but snapshot {} was taken at seq {seq}: records from seq {first_missing} on are missing",
                        last.map_or("none".into(), |l| l.to_string()),
                        path.display()
                    ),
                });
            }
        }
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

/// Records a resume writes before its `session_resumed`: findings of the
/// reconciliation (calls interrupted, their installed writes, processes lost, files
/// changed meanwhile).
fn resume_writes(event: &Event) -> bool {
    match event {
        Event::FileWrite(w) => {
            (w.op == WriteOp::External && w.call.is_none())
                || (w.status == WriteStatus::Ok && w.call.is_some())
        }
        Event::ShellExec(x) => x.end().is_some_and(|e| e.status == ExecStatus::Lost),
        Event::ToolFinished(f) => f.status == Status::Interrupted,
        _ => false,
    }
}

fn after_end_what(kind: &str, end: u64) -> String {
    format!(
        "{kind} after the session ended at seq {end}: only a resume (its findings, then session_resumed) may follow session_ended"
    )
}

/// `: line N is …, the records give …` for the first line where two texts differ.
fn first_difference(expected: &str, recorded: &str) -> String {
    let short = |s: &str| {
        let mut t: String = s.chars().take(80).collect();
        if t.len() < s.len() {
            t.push('…');
        }
        t
    };
    let mut e = expected.split_inclusive('\n');
    let mut r = recorded.split_inclusive('\n');
    for n in 1.. {
        match (e.next(), r.next()) {
            (None, None) => break,
            (a, b) if a == b => {}
            (a, b) => {
                return format!(
                    ": line {n} is {:?}, the records give {:?}",
                    short(b.unwrap_or("(nothing)")),
                    short(a.unwrap_or("(nothing)"))
                );
            }
        }
    }
    String::new()
}
/// True when the tool answers with its command's own output and status (the shell
/// tools), which verify rebuilds from the `shell_exec` records; `problems` runs a
/// command too but answers with what it parsed from it.
fn answers_with_command(tool: &str) -> bool {
    cairn_tools::effects_of(tool).is_some_and(|e| e.command_output)
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
