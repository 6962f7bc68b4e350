//! Resuming a session after a crash (or after it ended): open the log for append
//! (repairing a torn tail), fold from the newest valid snapshot, reconcile the state
//! with the world, record every finding, append `session_resumed`, go on.
//!
//! Reconciliation, in order:
//! 1. calls started and never finished: each write intent is compared with the file on
//!    disk (its after hash: applied, and recorded as installed; its before hash: not
//!    applied; else unknown); a foreground command still running (same pid and start
//!    time) is stopped; each call gets `tool_finished` with status `interrupted` and
//!    what is known in its output, which is what a model is told;
//! 2. background processes the table shows running: the same pid with the same start
//!    time → adopted (watched through `/proc`, stopped by `end`); otherwise recorded as
//!    finished with status `lost`. An adopted process's output pipes lost their only
//!    reader (the relay thread of the engine that crashed): its log keeps what was
//!    relayed, redacted, before the crash; what it prints after is not logged (a write
//!    gets SIGPIPE, so a process that prints is usually found lost), and its recorded
//!    end says so in `error`;
//! 3. the workspace is scanned against what the log knows of it (the starting manifest
//!    plus every recorded write, which the fold keeps): every difference is recorded as
//!    an `external` write, which drops the file's read coverage.
//!
//! Resuming a session that ended is allowed: `session_resumed` reopens it (the fold
//! clears `ended`), and the report says it had ended.
//!
//! What the session goes on with ([`GoOn`]) is checked before anything is recorded: a
//! script must match the log step for step, a model needs a conversation to go on
//! with. A resume that cannot go on fails with the log as it was (a torn tail aside,
//! which is moved to quarantine when the log is opened). A script step interrupted
//! while it could run commands has an unknown effect: it runs again only when the
//! caller says so ([`Rerun`]), and the decision is recorded in `session_resumed`.
//!
//! Memory is bounded by the state and the workspace manifest: the log is streamed, and
//! only the records after the earliest unfinished call are read again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn_store::{BlobStore, Hash, Head, LogReader, LogWriter, Options};
use serde::Serialize;

use super::{Engine, EngineConfig, Parts};
use crate::event::{
    Event, ExecStatus, FileWrite, Inherited, InheritedFile, InterruptedStep, ProcKind, RerunSource,
    SessionStarted, ShellEnd, ShellExec, ShellPhase, Status, ToolFinished, WriteStatus,
};
use crate::fold;
use crate::manifest::{self, ManifestEntry};
use crate::permission::CredentialFiles;
use crate::project::{Handle, Home, Project};
use crate::redact::Redactor;
use crate::script::{self, InterruptedCall, Step};
use crate::shell::{self, ChangeKind};
use crate::state::State;
use cairn_tools::Registry;
use cairn_tools::sandbox::Sandbox;
use cairn_tools::{EngineError, Result};

/// How to resume.
#[derive(Debug, Default)]
pub struct ResumeOptions {
    /// The configuration to go on with (default: the one the session started with).
    pub config: Option<EngineConfig>,
    /// The sandbox to go on with, over the configuration's.
    pub sandbox: Option<crate::event::SandboxMode>,
    /// The extra folders commands may write in, over the configuration's.
    pub sandbox_write_roots: Option<Vec<PathBuf>>,
    /// What the session goes on with, checked against the log before anything is
    /// recorded.
    pub then: GoOn,
    /// Whether the records are added to the search index as they are appended, over
    /// the configuration's (see [`EngineConfig::search_index`]).
    pub search_index: Option<bool>,
}

/// What a resumed session goes on with.
#[derive(Debug, Default)]
pub enum GoOn {
    /// Nothing the resume checks: the caller decides.
    #[default]
    Nothing,
    /// The script the session was running. Its steps must be the log's, in order (see
    /// [`script::resume_point`]); where it goes on is in [`ResumeReport::script`].
    Script {
        steps: Vec<(usize, Step)>,
        /// Whether a step interrupted while it could run commands runs again.
        rerun: Rerun,
    },
    /// A model, with the conversation in the log: it needs one to go on with, whose
    /// last word is not already the model's answer, unless a new task is given.
    Model { task: bool },
}

/// Whether a script step interrupted while it could run commands (its effect is
/// unknown: a command may have run, in part or in full) runs again. What is decided is
/// recorded in `session_resumed` (see [`InterruptedStep`]).
#[derive(Default)]
pub enum Rerun {
    /// Not run again, as nobody can be asked; recorded as `unattended`.
    #[default]
    No,
    /// Run again, as asked for up front; recorded as `requested`.
    Yes,
    /// Ask: `true` runs it again. Recorded as the user's answer.
    Ask(Box<dyn FnMut(&InterruptedCall) -> bool>),
}

impl std::fmt::Debug for Rerun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Rerun::No => "No",
            Rerun::Yes => "Yes",
            Rerun::Ask(_) => "Ask",
        })
    }
}

/// Where a resumed script goes on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScriptPoint {
    /// The index of the step to run next: the steps before it had finished, or were
    /// decided not to run again.
    pub from: usize,
    /// The script's steps.
    pub steps: usize,
    /// The step at the resume point whose call was interrupted, if any.
    pub interrupted: Option<InterruptedCall>,
    /// What was decided about it, when it could run commands (as recorded).
    pub decision: Option<InterruptedStep>,
}

/// One thing reconciliation found, as recorded in `session_resumed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// The log ended in a torn record, moved aside.
    TornTail {
        bytes: u64,
        quarantine: Option<String>,
    },
    /// A call that never finished, and what the world says about it.
    CallInterrupted {
        call: String,
        tool: String,
        outcome: InterruptedOutcome,
        detail: String,
    },
    /// A background process still running: tracked again.
    ProcessAdopted { id: String, pid: u32 },
    /// A background process gone while the session was not watching.
    ProcessLost { id: String, pid: Option<u32> },
    /// A file that differs from what the log knows.
    FileChanged { path: String, what: ChangeKind },
}

/// What a resume could tell of an interrupted call's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptedOutcome {
    /// Its write was installed (and is now recorded as the call's).
    Applied,
    /// Its write was not installed: the file is as it was before.
    NotApplied,
    /// Neither can be told (or its effects disagree).
    Unknown,
    /// Its command was still running at resume, and was stopped.
    Stopped,
}

impl InterruptedOutcome {
    pub fn as_str(&self) -> &'static str {
        match self {
            InterruptedOutcome::Applied => "applied",
            InterruptedOutcome::NotApplied => "not_applied",
            InterruptedOutcome::Unknown => "unknown",
            InterruptedOutcome::Stopped => "stopped",
        }
    }
}

impl std::fmt::Display for InterruptedOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// What a resume did.
#[derive(Debug, Clone, Serialize)]
pub struct ResumeReport {
    pub session: String,
    /// The head before the resume's own records.
    pub previous_head: Option<Head>,
    /// The seq of the snapshot the fold started from.
    pub from_snapshot: Option<u64>,
    /// Records folded after the snapshot (all of them without one).
    pub records_folded: u64,
    /// The session had ended (`session_ended`) before this resume.
    pub was_ended: bool,
    pub findings: Vec<Finding>,
    /// Where the script goes on, when the resume goes on with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script: Option<ScriptPoint>,
}

/// The knowledge of `state` a fork carries (read coverage, memory, conversation).
pub fn inherit(state: &State) -> Inherited {
    Inherited {
        files: state
            .files
            .iter()
            .map(|(path, k)| InheritedFile {
                path: path.clone(),
                hash: k.hash.map(Hash),
                read_hash: k.read_hash.map(Hash),
                ranges: k.ranges.clone(),
                total_lines: k.total_lines,
            })
            .collect(),
        memory: state.memory.clone(),
        conversation: state.conversation.iter().map(|e| e.to_json()).collect(),
    }
}

/// What the log holds about one unfinished call, after its `tool_started`.
#[derive(Default)]
struct CallTrace {
    /// Write intents not followed by their outcome.
    intents: Vec<FileWrite>,
    /// Foreground commands started and not finished.
    running: Vec<ShellExec>,
}

impl Engine {
    /// Resumes the session at `session_dir` (see the module docs). Refuses a log locked
    /// by a live writer (naming its pid), a log corrupt before its tail (naming the
    /// place), a session whose workspace is gone and one that cannot go on with what
    /// `options.then` says, recording nothing; a torn tail is repaired and reported.
    pub fn resume(
        home: &Home,
        session_dir: &Path,
        mut options: ResumeOptions,
    ) -> Result<(Engine, ResumeReport)> {
        let dir = session_dir;
        let started = first_record(dir)?;
        let config = resume_config(dir, &started, &mut options)?;
        let credential_files = CredentialFiles::new(&config.credential_files)?;
        let root = PathBuf::from(&started.workspace);
        if !root.is_dir() {
            return Err(EngineError::WorkspaceGone {
                workspace: root,
                session: started.id,
            });
        }
        let (log, recovery) = open_log(
            dir,
            Options {
                durability: config.durability,
                ..Options::default()
            },
        )?;
        let folded = fold::fold_with_snapshot(dir)?;
        let state = folded.state;
        let registry = Registry::new(config.catalog);
        let project = project_of(dir)?;
        let redactor = Redactor::with_env(std::env::vars());
        let secret_key = project.secret_key()?;
        // Every check comes before the first record.
        let script = match &mut options.then {
            GoOn::Nothing => None,
            GoOn::Script { steps, rerun } => Some(plan_script(
                dir,
                steps,
                rerun,
                &registry,
                &script::Secrets {
                    key: Some(&secret_key),
                    redactor: &redactor,
                },
            )?),
            GoOn::Model { task } => {
                can_go_on_with_model(&state, *task, &started.id)?;
                None
            }
        };
        let blobs = BlobStore::open(&project.blobs_dir())?.without_sync();
        let known = known_manifest(&blobs, &started, &state, &credential_files)?;
        let was_ended = state.ended;
        let sandbox = Sandbox::new(
            config.sandbox,
            &root,
            &config.sandbox_write_roots,
            &started.id,
            &home.root,
        )?;
        let manifest_cache =
            manifest::ScanCache::new(project.manifest_cache(), credential_files.clone())
                .with_capture(config.capture, config.limits.capture_file_bytes_max);
        let mut engine = Engine::assemble(
            home,
            Parts {
                id: started.id.clone(),
                dir: dir.to_path_buf(),
                root,
                project,
                config,
                registry,
                log,
                state,
                blobs,
                sandbox,
                redactor,
                secret_key,
                credential_files,
                manifest_cache,
                manifest: known,
            },
        )?;
        let findings = engine.resume_findings(&recovery)?;
        engine.rec.append(&Event::SessionResumed {
            previous_head: recovery.head.map_or(Hash::ZERO, |h| h.hash),
            findings: findings
                .iter()
                .filter_map(|f| serde_json::to_value(f).ok())
                .collect(),
            interrupted_steps: script.iter().filter_map(|s| s.decision.clone()).collect(),
            sandbox: Some(engine.rt.sandbox.recorded().clone()),
            imported: None,
        })?;
        engine.rec.sync()?;
        engine.project.mark(home, &engine.id, handle_of(&started))?;
        let report = ResumeReport {
            session: engine.id.clone(),
            previous_head: recovery.head,
            from_snapshot: folded.from_snapshot,
            records_folded: folded.records,
            was_ended,
            findings,
            script,
        };
        Ok((engine, report))
    }

    /// Decides what is known of every call started and never finished, and records
    /// its end as interrupted.
    fn finish_open_calls(&mut self, findings: &mut Vec<Finding>) -> Result<()> {
        let mut open: Vec<(String, String, u64)> = self
            .rec
            .state
            .open_calls
            .iter()
            .map(|(id, c)| (id.clone(), c.tool.clone(), c.seq))
            .collect();
        if open.is_empty() {
            return Ok(());
        }
        open.sort_by_key(|(_, _, seq)| *seq);
        let mut traces = self.trace_open_calls(&open)?;
        let grace = self.config.limits.shell_kill_grace_ms;
        for (call, tool, _) in open {
            let trace = traces.remove(&call).unwrap_or_default();
            let mut outcomes: Vec<(InterruptedOutcome, String)> = Vec::new();
            for w in trace.intents {
                outcomes.push(self.write_outcome(w)?);
            }
            for x in trace.running {
                outcomes.push(command_outcome(&x, grace));
            }
            if outcomes.is_empty() {
                outcomes.push((
                    InterruptedOutcome::Unknown,
                    "no side effect of this call was recorded; its result is unknown".to_string(),
                ));
            }
            let outcome = if outcomes.iter().all(|(o, _)| *o == outcomes[0].0) {
                outcomes[0].0
            } else {
                InterruptedOutcome::Unknown
            };
            let detail = outcomes
                .iter()
                .map(|(_, d)| d.as_str())
                .collect::<Vec<_>>()
                .join("; ");
            let output = format!(
                "interrupted: the session stopped during this call and was resumed; outcome {outcome}: {detail}. Check the workspace before repeating it."
            );
            self.rec.append(&Event::ToolFinished(ToolFinished {
                at: None,
                call: call.clone(),
                status: Status::Interrupted,
                output,
                output_blob: None,
                elapsed_us: 0,
                refusal: None,
                redactions: Default::default(),
                mcp_result: None,
                injection: Vec::new(),
            }))?;
            findings.push(Finding::CallInterrupted {
                call,
                tool,
                outcome,
                detail,
            });
        }
        Ok(())
    }

    /// What the resume found: a torn tail, calls left open, background processes, and
    /// what changed in the workspace meanwhile (recorded as external changes).
    fn resume_findings(&mut self, recovery: &cairn_store::Recovery) -> Result<Vec<Finding>> {
        let mut findings = Vec::new();
        if recovery.quarantined_bytes > 0 {
            findings.push(Finding::TornTail {
                bytes: recovery.quarantined_bytes,
                quarantine: recovery
                    .quarantine_file
                    .as_ref()
                    .map(|p| p.to_string_lossy().into_owned()),
            });
        }
        self.finish_open_calls(&mut findings)?;
        self.reconcile_processes(&mut findings)?;
        let changes = shell::record_external(&mut self.rec, &mut self.rt, &self.root, None)?;
        findings.extend(changes.into_iter().map(|c| Finding::FileChanged {
            path: c.path,
            what: c.what,
        }));
        Ok(findings)
    }

    /// The write intents and foreground commands of each open call (`open` sorted by
    /// seq) left without their outcome: only the records after the earliest are read.
    fn trace_open_calls(
        &self,
        open: &[(String, String, u64)],
    ) -> Result<BTreeMap<String, CallTrace>> {
        let mut traces: BTreeMap<String, CallTrace> = open
            .iter()
            .map(|(id, _, _)| (id.clone(), CallTrace::default()))
            .collect();
        let reader = LogReader::open(&self.dir)?;
        for r in reader.records_from(open[0].2)? {
            let r = r?;
            let Ok(rec) = fold::parse_in(&r, &self.rec.blobs) else {
                continue;
            };
            match rec.event {
                Event::FileWrite(w) => {
                    let Some(t) = w.call.as_ref().and_then(|c| traces.get_mut(c)) else {
                        continue;
                    };
                    match w.status {
                        WriteStatus::Intent => t.intents.push(w),
                        // The outcome of an intent was recorded: nothing to decide.
                        _ => t.intents.retain(|i| i.path != w.path),
                    }
                }
                Event::ShellExec(x) if x.kind == ProcKind::Foreground => {
                    let Some(t) = traces.get_mut(&x.call) else {
                        continue;
                    };
                    match x.phase {
                        ShellPhase::Started => t.running.push(x),
                        ShellPhase::Finished(_) => t.running.clear(),
                    }
                }
                _ => {}
            }
        }
        Ok(traces)
    }

    /// What became of a write intent, judged by the file's content now: installed (its
    /// outcome recorded now), not installed, or unknown.
    fn write_outcome(&mut self, w: FileWrite) -> Result<(InterruptedOutcome, String)> {
        remove_temp_files(&self.root.join(&w.path));
        let now = file_hash(&self.root.join(&w.path));
        let before = w.before.map(|b| b.hash);
        let after = w.after.map(|b| b.hash);
        Ok(if now == after {
            let mut done = w.clone();
            done.status = WriteStatus::Ok;
            self.rt.note_write(&done);
            self.rec.append(&Event::FileWrite(done))?;
            (
                InterruptedOutcome::Applied,
                format!(
                    "the write to {} was installed: the file holds the new content",
                    w.path
                ),
            )
        } else if now == before {
            (
                InterruptedOutcome::NotApplied,
                format!(
                    "the write to {} was not installed: the file is as it was before",
                    w.path
                ),
            )
        } else {
            (
                InterruptedOutcome::Unknown,
                format!(
                    "{} holds neither the content before nor the content after the write: read it again",
                    w.path
                ),
            )
        })
    }

    /// Adopts the background processes still running; records the others as lost.
    fn reconcile_processes(&mut self, findings: &mut Vec<Finding>) -> Result<()> {
        let running: Vec<crate::state::Process> = self
            .rec
            .state
            .processes
            .values()
            .filter(|p| p.is_running())
            .cloned()
            .collect();
        for p in running {
            match (p.pid, p.start_time) {
                (Some(pid), Some(t)) if shell::alive(pid, t) => {
                    self.rt.adopt(&p, t, &self.dir);
                    findings.push(Finding::ProcessAdopted {
                        id: p.id.clone(),
                        pid,
                    });
                }
                _ => {
                    self.rec.append(&Event::ShellExec(ShellExec {
                        call: p.call.clone(),
                        id: Some(p.id.clone()),
                        // As folded: redacted already, its keyed hash only in the start.
                        argv: p.argv.clone(),
                        argv_hash: None,
                        cwd: p.cwd.clone(),
                        pid: p.pid,
                        start_time: p.start_time,
                        kind: ProcKind::Background,
                        timeout_ms: None,
                        log: (!p.log.is_empty()).then(|| p.log.clone()),
                        sandbox: None,
                        phase: ShellPhase::Finished(ShellEnd {
                            error: Some(
                                "not running at resume (or its pid now belongs to another process); how it ended is unknown"
                                    .to_string(),
                            ),
                            ..ShellEnd::new(ExecStatus::Lost)
                        }),
                    }))?;
                    findings.push(Finding::ProcessLost {
                        id: p.id.clone(),
                        pid: p.pid,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Where `steps` go on in the session at `dir`, and whether its interrupted step (if
/// one that could run commands) runs again: `rerun` decides, and may ask. Records
/// nothing.
fn plan_script(
    dir: &Path,
    steps: &[(usize, Step)],
    rerun: &mut Rerun,
    registry: &Registry,
    secrets: &script::Secrets<'_>,
) -> Result<ScriptPoint> {
    let point = script::resume_point(dir, steps, secrets)?;
    let runs_commands = |tool: &str| {
        registry
            .get(tool)
            .is_some_and(|t| t.effects().runs_commands)
    };
    let decision = match &point.interrupted {
        Some(i) if runs_commands(&i.tool) => {
            let (again, decided_by) = match rerun {
                Rerun::No => (false, RerunSource::Unattended),
                Rerun::Yes => (true, RerunSource::Requested),
                Rerun::Ask(ask) => (ask(i), RerunSource::User),
            };
            Some(InterruptedStep {
                call: i.call.clone(),
                step: u32::try_from(i.step).unwrap_or(u32::MAX),
                tool: i.tool.clone(),
                rerun: again,
                decided_by,
            })
        }
        _ => None,
    };
    let skipped = decision.as_ref().is_some_and(|d| !d.rerun);
    Ok(ScriptPoint {
        from: point.done + usize::from(skipped),
        steps: steps.len(),
        interrupted: point.interrupted,
        decision,
    })
}

/// Whether a model can go on in a session whose fold is `state`: with a new task, or
/// with a conversation whose last word is not the model's final answer.
fn can_go_on_with_model(state: &State, task: bool, session: &str) -> Result<()> {
    if task {
        return Ok(());
    }
    match crate::agent::messages(state).last() {
        None => Err(EngineError::NoConversation {
            session: session.to_string(),
        }),
        Some(crate::provider::Message::Assistant { tool_calls, .. }) if tool_calls.is_empty() => {
            Err(EngineError::ModelAnswered {
                session: session.to_string(),
            })
        }
        Some(_) => Ok(()),
    }
}

/// Opens the log for append. A lock whose named writer is dead can still be held for
/// a moment by a child it forked and that has not yet reached `exec` (which closes the
/// lock): that is waited for, up to `LOCK_WAIT_MS`. A live writer is refused at once.
fn open_log(dir: &Path, options: Options) -> Result<(LogWriter, cairn_store::Recovery)> {
    const LOCK_WAIT_MS: u64 = 2_000;
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(LOCK_WAIT_MS);
    loop {
        match LogWriter::open(dir, options) {
            Err(cairn_store::Error::Locked { pid: Some(pid), .. })
                if !Path::new(&format!("/proc/{pid}")).exists()
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return Ok(other?),
        }
    }
}

/// Removes the temporary files a write tool leaves beside its target when it is
/// killed before the rename (`.cairn-tmp-*`): they were never part of the workspace.
fn remove_temp_files(target: &Path) {
    let Some(parent) = target.parent() else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(".cairn-tmp-") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The session's `session_started` (record 0, before any repair of the tail). A log
/// without a whole record (empty, zero bytes, its first line cut short) is a session
/// that never started, and a complete last line that fails is corruption.
/// The session's configuration, as recorded or as given, with what the options
/// change in it.
fn resume_config(
    dir: &Path,
    started: &SessionStarted,
    options: &mut ResumeOptions,
) -> Result<EngineConfig> {
    let mut config = match options.config.take() {
        Some(c) => c,
        None => serde_json::from_value(started.config.clone()).map_err(|source| {
            EngineError::SessionConfig {
                dir: dir.to_path_buf(),
                source,
            }
        })?,
    };
    if let Some(mode) = options.sandbox {
        config.sandbox = mode;
    }
    if let Some(roots) = options.sandbox_write_roots.take() {
        config.sandbox_write_roots = roots;
    }
    if let Some(on) = options.search_index {
        config.search_index = on;
    }
    Ok(config)
}

/// The workspace as the log knows it: the manifest of the start with every change
/// recorded since applied.
fn known_manifest(
    blobs: &BlobStore,
    started: &SessionStarted,
    state: &State,
    credential_files: &CredentialFiles,
) -> Result<BTreeMap<String, ManifestEntry>> {
    let mut known: BTreeMap<String, ManifestEntry> =
        manifest::from_jsonl(&blobs.get(&started.manifest.hash)?)?
            .into_iter()
            .map(|f| (f.path.clone(), f))
            .collect();
    for (path, f) in &state.ws_changes {
        match f {
            Some(f) => {
                let mode = f
                    .mode
                    .or_else(|| known.get(path).map(|m| m.mode))
                    .unwrap_or(0o644);
                known.insert(
                    path.clone(),
                    ManifestEntry {
                        path: path.clone(),
                        size: f.len,
                        mode,
                        hash: Some(Hash(f.hash)),
                        withheld: credential_files.matches(path),
                        git: None,
                        not_kept: None,
                        special: None,
                    },
                );
            }
            None => {
                known.remove(path);
            }
        }
    }
    Ok(known)
}

/// The project a session folder is in (`<project>/sessions/<id>`).
fn project_of(dir: &Path) -> Result<Project> {
    Ok(Project {
        dir: dir
            .parent()
            .and_then(Path::parent)
            .ok_or_else(|| EngineError::NotInProject {
                dir: dir.to_path_buf(),
            })?
            .to_path_buf(),
    })
}

/// A resumed session is the user's newest; a resumed replay stays a replay.
fn handle_of(started: &SessionStarted) -> Handle {
    if started.parent.is_some() && started.inherited.is_none() {
        Handle::Replay
    } else {
        Handle::Last
    }
}

/// What became of a foreground command running when the session stopped: stopped
/// now if it still runs, else unknown.
fn command_outcome(x: &ShellExec, grace_ms: u64) -> (InterruptedOutcome, String) {
    let live = match (x.pid, x.start_time) {
        (Some(pid), Some(t)) if shell::alive(pid, t) => Some((pid, t)),
        _ => None,
    };
    match live {
        Some((pid, t)) => {
            shell::stop_adopted(pid, t, grace_ms);
            (
                InterruptedOutcome::Stopped,
                format!(
                    "`{}` was still running at resume and was stopped; its output was not recorded",
                    shell::shown_argv(&x.argv)
                ),
            )
        }
        None => (
            InterruptedOutcome::Unknown,
            format!(
                "`{}` was running when the session stopped; whether it finished and what it printed is unknown (files it changed are recorded as external changes)",
                shell::shown_argv(&x.argv)
            ),
        ),
    }
}

fn first_record(dir: &Path) -> Result<SessionStarted> {
    let reader = LogReader::open(dir)?;
    let never_started = || EngineError::EmptyLog {
        dir: dir.to_path_buf(),
    };
    if reader.tail()?.head.is_none() {
        return Err(never_started());
    }
    let first = reader.get(0)?.ok_or_else(never_started)?;
    match fold::parse_maybe_in(&first, fold::project_blobs(dir).as_ref()) {
        Ok(crate::state::Record {
            event: Event::SessionStarted(s),
            ..
        }) => Ok(s),
        _ => Err(EngineError::NotSessionStart {
            dir: dir.to_path_buf(),
        }),
    }
}

/// The BLAKE3 of a file's content, `None` when it does not exist (or cannot be read,
/// or is not a regular file: a FIFO is never opened for a blocking read).
fn file_hash(path: &Path) -> Option<Hash> {
    let (f, _) = cairn_tools::open_regular(path).ok()?;
    cairn_store::hash_reader(f).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON of every finding is what `session_resumed`, `resume --json` and the
    /// `found:` lines showed when kinds and outcomes were strings.
    #[test]
    fn findings_serialise_as_before_they_were_typed() {
        let interrupted = |outcome| Finding::CallInterrupted {
            call: "c2".into(),
            tool: "edit_file".into(),
            outcome,
            detail: "d".into(),
        };
        let changed = |what| Finding::FileChanged {
            path: "a.txt".into(),
            what,
        };
        let findings = [
            Finding::TornTail {
                bytes: 13,
                quarantine: Some("/q/1.tail".into()),
            },
            Finding::TornTail {
                bytes: 1,
                quarantine: None,
            },
            interrupted(InterruptedOutcome::Applied),
            interrupted(InterruptedOutcome::NotApplied),
            interrupted(InterruptedOutcome::Unknown),
            interrupted(InterruptedOutcome::Stopped),
            Finding::ProcessAdopted {
                id: "p1".into(),
                pid: 7,
            },
            Finding::ProcessLost {
                id: "p1".into(),
                pid: None,
            },
            changed(ChangeKind::Created),
            changed(ChangeKind::Changed),
            changed(ChangeKind::Deleted),
        ];
        let json: Vec<String> = findings
            .iter()
            .map(|f| serde_json::to_string(f).unwrap())
            .collect();
        let call = |o: &str| {
            format!(
                r#"{{"kind":"call_interrupted","call":"c2","tool":"edit_file","outcome":"{o}","detail":"d"}}"#
            )
        };
        let file = |w: &str| format!(r#"{{"kind":"file_changed","path":"a.txt","what":"{w}"}}"#);
        assert_eq!(
            json,
            [
                r#"{"kind":"torn_tail","bytes":13,"quarantine":"/q/1.tail"}"#.to_string(),
                r#"{"kind":"torn_tail","bytes":1,"quarantine":null}"#.to_string(),
                call("applied"),
                call("not_applied"),
                call("unknown"),
                call("stopped"),
                r#"{"kind":"process_adopted","id":"p1","pid":7}"#.to_string(),
                r#"{"kind":"process_lost","id":"p1","pid":null}"#.to_string(),
                file("created"),
                file("changed"),
                file("deleted"),
            ]
        );
    }
}
