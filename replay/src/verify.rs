//! Deep verification of a session: the store's integrity checks, then the engine's view
//! of every intact record — it parses, the fold runs, every checkpoint and snapshot
//! matches the fold, every recorded decision is taken again from the fold and the
//! facts in its records and must give the recorded answer, every write's before hash
//! is what the fold knew, every referenced blob exists and re-hashes to its name, and
//! every started call finished (or the session ends interrupted).
//!
//! It reads the log line by line and skips (after the integrity check has reported
//! them) lines whose own hash fails, so one bad record does not hide the problems after
//! it. It never writes.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use cairn_core::Limits;
use cairn_core::decide::{self, Answered as Outcome, Decision, Permission};
use cairn_core::event::{
    Answer, AnswerSource, Event, FileWrite, Refusal, Rule, Status, ToolFinished, WriteOp,
    WriteStatus,
};
use cairn_core::permission::Need;
use cairn_core::state::State;
use cairn_store::{BlobCheck, BlobRef, BlobStore, Hash, Head, SnapshotStore};
use cairn_tools::{Catalog, EngineConfig, Registry, manifest};
use serde::Serialize;

use crate::error::{Result, io_at};
use crate::session::{blob_store_of, check_session_dir};

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
    /// A write's before hash differs from what the fold knew, or its path is not a
    /// workspace path.
    FileWrite,
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
    /// True when the log ends with the session ended (not interrupted).
    pub ended: bool,
    /// Calls the session left unfinished without ending: not corruption.
    pub interrupted: Vec<Interrupted>,
    pub problems: u64,
}

/// Settings of a deep verification.
#[derive(Debug, Clone, Copy)]
pub struct VerifyOptions {
    /// The store's integrity check settings.
    pub store: cairn_store::VerifyOptions,
    /// Re-hash every referenced blob (the most expensive part on big sessions).
    pub blobs: bool,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            store: cairn_store::VerifyOptions::default(),
            blobs: true,
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
    check_session_dir(dir)?;
    let log = cairn_store::log_path(dir);
    let integrity = cairn_store::verify_path(&log, &options.store)?;
    let mut v = Verifier::new(dir, blob_store_of(dir)?, options.blobs);
    v.report.records = integrity.records;
    v.report.bytes = integrity.bytes;
    for p in &integrity.problems {
        v.problems.push(Problem {
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

    let file = std::fs::File::open(&log).map_err(io_at(&log))?;
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
    let mut buf = Vec::new();
    let (mut line, mut offset) = (1u64, 0u64);
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(io_at(&log))?;
        if n == 0 {
            break;
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
            if let Ok(fields) = cairn_store::check_line(&buf)
                && let Ok(event) = serde_json::value::RawValue::from_string(
                    String::from_utf8_lossy(fields.event).into_owned(),
                )
            {
                let r = cairn_store::Record {
                    seq: fields.seq,
                    ts: fields.ts.to_string(),
                    prev: fields.prev,
                    hash: fields.hash,
                    event,
                    line,
                    offset,
                };
                v.record(&r);
            }
        }
        line += 1;
        offset += n as u64;
    }
    v.finish();
    let mut problems = v.problems;
    problems.sort_by_key(|p| (p.seq.unwrap_or(u64::MAX), p.line));
    let mut report = v.report;
    report.head = integrity.head.or(report.head);
    report.problems = problems.len() as u64 + integrity.problems_omitted;
    Ok((report, problems))
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
    /// What the engine's admission rules (`decide::admit`: input size, schema, repeat
    /// block) give for it on the state before its `tool_started`; `None` for a tool
    /// this version does not know.
    admitted: Option<Decision>,
    /// The repeat counter of this exact call before its `tool_started` was folded.
    repeats: u32,
    /// The keys it asked permission for.
    asked: Vec<String>,
    /// Its permission answer.
    answer: Option<Answered>,
    /// The (path, status intent seen) of its writes, to check each write's rules once.
    intents: Vec<String>,
    /// Writes of this call with status `ok`.
    wrote_ok: u32,
    /// The content hash of its last read, or of its last write with status `ok`: what
    /// a `hash:` line of its output must say.
    last_hash: Option<Hash>,
}

struct Verifier {
    blobs: BlobStore,
    check_blobs: bool,
    blob_checked: HashMap<Hash, BlobCheck>,
    state: State,
    limits: Limits,
    /// The session's guarded command patterns.
    guarded: Vec<String>,
    registry: Registry,
    pending: BTreeMap<String, Pending>,
    snapshots: Vec<(u64, PathBuf)>,
    report: Report,
    problems: Vec<Problem>,
    /// Where the record being checked is.
    at: (u64, u64, u64),
}

impl Verifier {
    fn new(dir: &Path, blobs: BlobStore, check_blobs: bool) -> Verifier {
        Verifier {
            blobs,
            check_blobs,
            blob_checked: HashMap::new(),
            state: State::default(),
            limits: Catalog::Thoth.limits(),
            guarded: cairn_core::permission::default_guarded(),
            registry: Registry::new(Catalog::Thoth),
            pending: BTreeMap::new(),
            snapshots: Vec::new(),
            report: Report {
                path: dir.to_path_buf(),
                ..Report::default()
            },
            problems: Vec::new(),
            at: (0, 0, 0),
        }
    }

    fn problem(&mut self, kind: ProblemKind, what: String) {
        let (seq, line, offset) = self.at;
        self.problems.push(Problem {
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
                let c = match self.blobs.verify(&blob.hash) {
                    Ok(c) => c,
                    Err(e) => {
                        self.problem(ProblemKind::Blob, format!("{what}: cannot read blob: {e}"));
                        return;
                    }
                };
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

    fn record(&mut self, raw: &cairn_store::Record) {
        self.at = (raw.seq, raw.line, raw.offset);
        self.report.head = Some(Head {
            seq: raw.seq,
            hash: raw.hash,
        });
        let rec = match cairn_tools::fold::parse(raw) {
            Ok(rec) => rec,
            Err(u) => {
                let known = u.kind.as_deref().is_some_and(|k| Event::KINDS.contains(&k));
                let kind = if known {
                    ProblemKind::BadEvent
                } else {
                    ProblemKind::UnknownEvent
                };
                self.problem(kind, u.what);
                self.state.apply_unknown(raw.seq);
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
        match &rec.event {
            Event::SessionStarted(s) => {
                self.report.session = Some(s.id.clone());
                match serde_json::from_value::<EngineConfig>(s.config.clone()) {
                    Ok(c) => {
                        self.limits = c.limits;
                        self.guarded = c.guarded_commands;
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
                if self.check_blobs {
                    self.manifest_blobs(&s.manifest);
                }
            }
            Event::ToolStarted {
                call, tool, input, ..
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
                        || t.validate(input),
                    )
                });
                self.pending.insert(
                    call.clone(),
                    Pending {
                        seq: rec.seq,
                        tool: tool.clone(),
                        input: input.clone(),
                        admitted,
                        repeats: decide::repeats(&self.state, tool, input),
                        asked: Vec::new(),
                        answer: None,
                        intents: Vec::new(),
                        wrote_ok: 0,
                        last_hash: None,
                    },
                );
            }
            Event::FileRead(r) => {
                if let Some(p) = self.pending.get_mut(&r.call) {
                    p.last_hash = Some(r.hash);
                } else {
                    self.problem(
                        ProblemKind::Structure,
                        format!("file_read of {} outside its call {}", r.path, r.call),
                    );
                }
            }
            Event::FileWrite(w) => self.file_write(w),
            Event::PermissionRequested {
                call,
                key,
                detail,
                guarded,
                ..
            } => self.permission_requested(call, key, detail, *guarded),
            Event::PermissionDecided {
                call,
                key,
                answer,
                source,
            } => self.permission_decided(call, key, *answer, *source),
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
            }
            _ => {}
        }
        self.state.apply(&rec);
        self.snapshot_at(rec.seq, rec.hash);
    }

    /// Checks every file blob the manifest names.
    fn manifest_blobs(&mut self, blob: &BlobRef) {
        let Ok(bytes) = self.blobs.get(&blob.hash) else {
            return;
        };
        match manifest::from_jsonl(&bytes) {
            Ok(entries) => {
                for e in entries {
                    let r = BlobRef {
                        hash: e.hash,
                        len: e.size,
                    };
                    self.blob(&r, &format!("manifest entry {}", e.path));
                }
            }
            Err(e) => self.problem(ProblemKind::Blob, format!("the manifest: {e}")),
        }
    }

    fn file_write(&mut self, w: &FileWrite) {
        self.report.file_writes += 1;
        if let Some(b) = &w.before {
            self.blob(b, &format!("file_write {} before", w.path));
        }
        if let Some(a) = &w.after {
            self.blob(a, &format!("file_write {} after", w.path));
        }
        if w.path.is_empty()
            || w.path.starts_with('/')
            || w.path
                .split('/')
                .any(|s| s == ".." || s == "." || s.is_empty())
        {
            self.problem(
                ProblemKind::FileWrite,
                format!("write to {:?}: not a normalised workspace path", w.path),
            );
        }
        // What the fold knew of the file before this write.
        if let Some(k) = self.state.files.get(&w.path) {
            let before = w.before.map(|b| b.hash.0);
            if k.hash.is_some() && before != k.hash {
                self.problem(
                    ProblemKind::FileWrite,
                    format!(
                        "write to {}: before hash {} but the fold knew {}",
                        w.path,
                        w.before.map_or("none".into(), |b| b.hash.short(16)),
                        k.hash.map_or("none".into(), |h| Hash(h).short(16))
                    ),
                );
            }
        }
        let Some(call) = w.call.clone() else {
            return;
        };
        let Some(p) = self.pending.get_mut(&call) else {
            self.problem(
                ProblemKind::Structure,
                format!("file_write of {} outside its call {call}", w.path),
            );
            return;
        };
        if w.status == WriteStatus::Ok {
            p.wrote_ok += 1;
            p.last_hash = w.after.map(|a| a.hash);
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

    fn permission_requested(&mut self, call: &str, key: &str, detail: &str, guarded: bool) {
        let need = Need::Ask {
            key: key.to_string(),
            detail: detail.to_string(),
            guarded,
        };
        let problem = match decide::permission(&self.state, need, &self.guarded) {
            Permission::AllowList { .. } => Some(format!(
                "asked for {key}, but the allow list covers it: the engine answers from the allow list"
            )),
            Permission::Ask { guarded: g, .. } if g != guarded => Some(format!(
                "the request for {key} is not marked guarded, but its detail matches a guarded command pattern"
            )),
            _ => None,
        };
        self.report.decisions_checked += 1;
        if let Some(what) = problem {
            self.problem(ProblemKind::Decision, format!("call {call}: {what}"));
        }
        match self.pending.get_mut(call) {
            Some(p) => p.asked.push(key.to_string()),
            None => self.problem(
                ProblemKind::Structure,
                format!("permission_requested for {key} outside its call {call}"),
            ),
        }
    }

    fn permission_decided(&mut self, call: &str, key: &str, answer: Answer, source: AnswerSource) {
        let at = self.at;
        let Some(p) = self.pending.get_mut(call) else {
            self.problem(
                ProblemKind::Structure,
                format!("permission_decided for {key} outside its call {call}"),
            );
            return;
        };
        p.answer = Some(Answered {
            key: key.to_string(),
            answer,
            source,
            at,
        });
        let asked = p.asked.iter().any(|k| k == key);
        let problem = if source == AnswerSource::AllowList {
            // The tool's own question for the call, when it is this key, says whether
            // the command line is guarded (an outside folder's key has no other detail).
            let need = match self.registry.get(&p.tool).map(|t| t.permission(&p.input)) {
                Some(need) if matches!(&need, Need::Ask { key: k, .. } if k == key) => need,
                _ => Need::Ask {
                    key: key.to_string(),
                    detail: String::new(),
                    guarded: false,
                },
            };
            self.report.decisions_checked += 1;
            match decide::permission(&self.state, need, &self.guarded) {
                _ if asked => Some(format!(
                    "{key} answered from the allow list after a question was asked"
                )),
                _ if answer != Answer::Always => Some(format!(
                    "{key} answered {} from the allow list, which only answers always",
                    answer_name(answer)
                )),
                Permission::AllowList { .. } => None,
                Permission::Ask { guarded: true, .. } => Some(format!(
                    "{key} answered from the allow list, but the command line is guarded: it must be asked"
                )),
                _ => Some(format!(
                    "{key} answered from the allow list, but the fold's allow list does not hold it"
                )),
            }
        } else if !asked {
            Some(format!(
                "{key} answered {} by {} without a permission_requested",
                answer_name(answer),
                source_name(source)
            ))
        } else {
            None
        };
        if let Some(what) = problem {
            self.problem(ProblemKind::Decision, format!("call {call}: {what}"));
        }
    }

    fn tool_finished(&mut self, f: &ToolFinished) {
        let Some(p) = self.pending.remove(&f.call) else {
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
        let Some(tool) = self.registry.get(&p.tool) else {
            // A tool of another catalog or a newer cairn: its rules are not known here.
            if f.status != Status::Error {
                self.report.decisions_unchecked += 1;
            }
            return;
        };
        self.report.decisions_checked += 1;
        let wrong = |v: &mut Verifier, what: String| {
            v.problem(
                ProblemKind::Decision,
                format!("call {} ({}): {what}", f.call, p.tool),
            )
        };
        // A mutating call that succeeded wrote; one that was refused did not.
        // (A command may well change nothing: the shell tools are left out.)
        let may_write_nothing = matches!(p.tool.as_str(), "run_shell" | "shell");
        if tool.is_mutating() && !may_write_nothing && f.status == Status::Ok && p.wrote_ok == 0 {
            wrong(self, "recorded ok, but it wrote nothing".into());
        }
        if f.refusal.is_some() && p.wrote_ok > 0 {
            wrong(self, "refused, yet it wrote".into());
        }
        // The status follows the refusal.
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
                        "recorded {status}, but the fold says this exact call was already made {} times (repeat_calls_max {}): it should have been blocked",
                        p.repeats, limits.repeat_calls_max
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
                    Rule::Repeat => format!(
                        "blocked as a repeat, but the fold counts {} earlier identical calls (repeat_calls_max {})",
                        p.repeats, limits.repeat_calls_max
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
            self.write_refusal(f, &p, r, op);
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
        // Caps: the output given to the model is the capped whole output.
        let (lines_max, bytes_max) = (self.limits.output_lines_max, self.limits.output_bytes_max);
        match &f.output_blob {
            Some(b) => {
                if let Ok(whole) = self.blobs.get(&b.hash) {
                    let whole = String::from_utf8_lossy(&whole);
                    let (capped, cut) = decide::output(&whole, &self.limits);
                    if !cut || capped != f.output {
                        wrong(
                            self,
                            "the output is not the whole output (in its blob) capped by output_bytes_max and output_lines_max".into(),
                        );
                    }
                }
            }
            None => {
                let (_, cut) = decide::output(&f.output, &self.limits);
                if cut {
                    wrong(
                        self,
                        format!(
                            "the output is over the caps ({bytes_max} bytes, {lines_max} lines) and has no output blob"
                        ),
                    );
                }
            }
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
        let last = self.state.last_seq;
        let remaining = std::mem::take(&mut self.snapshots);
        for (seq, path) in remaining {
            if last.is_none_or(|l| seq > l) {
                let first_missing = last.map_or(0, |l| l + 1);
                self.problems.push(Problem {
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
        || decide::output(message, limits).0 == f.output
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
