//! The audit of a session: what an agent did, gathered from its records, its blobs and
//! a deep verification into one plain value that the command line renders as text,
//! Markdown, JSON or HTML. Gathering is pure: it reads only the loaded session (records
//! and blob store) and the verify report it is given.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;

use cairn_core::event::{
    Answer, AnswerSource, Event, InterruptedStep, ProcKind, Rule, ShellPhase, Status, WebFetched,
    WriteOp, WriteStatus,
};
use cairn_core::redact::{Counts, Redactor};
use cairn_store::{BlobRef, Hash};
use serde::Serialize;

use crate::session::Session;
use crate::verify::{Problem, Report};

/// Diff lines kept per file write (a note says how many more there were).
pub const DIFF_LINES_MAX: usize = 400;

/// A workspace blob larger than this is not scanned for secrets (the audit counts it
/// as skipped): 64 MiB.
pub const AUDIT_SCAN_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// How much of a blob the secret scan reads at a time.
pub const SCAN_CHUNK_BYTES: usize = 1024 * 1024;

/// How much of the text before a chunk the secret scan looks at again with it, so that
/// a secret cut by a chunk's end is found whole: longer than any secret the patterns
/// match.
pub const SCAN_OVERLAP_BYTES: usize = 64 * 1024;

/// How a session's log ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndState {
    /// Its last session event is `session_ended`.
    Finished,
    /// Its last session event is `session_ended` marked `failed` (the provider failed).
    Failed,
    /// It stops without `session_ended` and no process holds its log (a crash, a kill).
    Interrupted,
    /// It was resumed after an interruption and has not ended since.
    Resumed,
    /// It has not ended and its writer still holds the log: a live session.
    Running,
}

impl EndState {
    pub fn as_str(&self) -> &'static str {
        match self {
            EndState::Finished => "finished",
            EndState::Failed => "failed",
            EndState::Interrupted => "interrupted",
            EndState::Running => "running",
            EndState::Resumed => "resumed",
        }
    }
}

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

/// What a session's tokens cost, in dollars.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Cost {
    /// Each model that has a price, with what its tokens cost.
    pub models: BTreeMap<String, f64>,
    /// Models used without a price: their cost is left out of `total`.
    pub unpriced: Vec<String>,
    pub total: f64,
}

/// A model's prices, in dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// Input tokens read from the provider's cache.
    pub cached_per_mtok: f64,
}

impl Price {
    /// What `t`'s tokens cost, in dollars: cached input at the cached price, the rest
    /// of the input at the input price, the output at the output price.
    pub fn cost(&self, t: &TokenUse) -> f64 {
        let cached = t.cached.min(t.input);
        ((t.input - cached) as f64 * self.input_per_mtok
            + cached as f64 * self.cached_per_mtok
            + t.output as f64 * self.output_per_mtok)
            / 1e6
    }
}

impl Audit {
    /// Sets [`Audit::cost`] from `prices` (by model name).
    pub fn price(&mut self, prices: &BTreeMap<String, Price>) {
        let mut cost = Cost::default();
        for t in &self.tokens {
            match prices.get(&t.model) {
                Some(p) => {
                    let c = p.cost(t);
                    *cost.models.entry(t.model.clone()).or_default() += c;
                    cost.total += c;
                }
                None if !cost.unpriced.contains(&t.model) => cost.unpriced.push(t.model.clone()),
                None => {}
            }
        }
        self.cost = Some(cost);
    }
}

/// An imported session's source, and what the import found in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportInfo {
    /// `codex` or `claude`.
    pub agent: String,
    pub agent_version: Option<String>,
    /// The source file (the last one read, for a continued import).
    pub path: String,
    pub source_id: String,
    /// `main`, `fork`, `sidechain` or `subagent`.
    pub branch: String,
    /// Secrets the source held, by kind, over every pass: redacted in this session.
    pub secrets: BTreeMap<String, u64>,
    /// Source lines of types not mapped (kept as blobs), and warnings.
    pub unknown: u64,
    pub warnings: u64,
    /// Passes over the source (1, then one per continuation).
    pub passes: u32,
}

impl ImportInfo {
    /// `Codex 0.171.0`, `Claude Code 2.1.3`.
    pub fn agent_name(&self) -> String {
        let name = match self.agent.as_str() {
            "codex" => "Codex",
            "claude" => "Claude Code",
            other => other,
        };
        match &self.agent_version {
            Some(v) => format!("{name} {v}"),
            None => name.to_string(),
        }
    }

    /// One line: `imported from Codex 0.171.0 (main): /path; 2 secrets in the source,
    /// redacted here`.
    pub fn line(&self) -> String {
        let secrets: u64 = self.secrets.values().sum();
        format!(
            "imported from {} ({}): {}; {secrets} secret{} in the source, redacted here; {} unknown line{}, {} warning{}",
            self.agent_name(),
            self.branch,
            self.path,
            if secrets == 1 { "" } else { "s" },
            self.unknown,
            if self.unknown == 1 { "" } else { "s" },
            self.warnings,
            if self.warnings == 1 { "" } else { "s" },
        )
    }
}

/// The import facts of a session: its `session_started.imported` and every pass's
/// `session_ended.imported`.
pub fn import_info(session: &Session) -> Option<ImportInfo> {
    let i = session.started.imported.as_ref()?;
    let mut info = ImportInfo {
        agent: i.agent.clone(),
        agent_version: i.agent_version.clone(),
        path: i.file.path.clone(),
        source_id: i.source_id.clone(),
        branch: i.branch.clone(),
        secrets: BTreeMap::new(),
        unknown: 0,
        warnings: 0,
        passes: 0,
    };
    for r in &session.records {
        match &r.event {
            Event::SessionResumed {
                imported: Some(f), ..
            } => info.path = f.path.clone(),
            Event::SessionEnded {
                imported: Some(p), ..
            } => {
                info.passes += 1;
                info.unknown += p.unknown;
                info.warnings += p.warnings;
                for (k, n) in &p.secrets {
                    *info.secrets.entry(k.clone()).or_default() += n;
                }
            }
            _ => {}
        }
    }
    Some(info)
}

/// Who, where and when.
#[derive(Debug, Clone, Serialize)]
pub struct Header {
    pub session: String,
    pub workspace: String,
    pub catalog: String,
    pub engine_version: String,
    /// The models that answered: from `session_started.config.model` (which holds the
    /// base URL) and every `model_turn`, each provider and model once.
    pub models: Vec<ModelInfo>,
    /// `ts` of the first record.
    pub started: String,
    /// `ts` of the last record.
    pub ended: String,
    /// Milliseconds between the two.
    pub duration_ms: u64,
    pub end_state: EndState,
    /// The reason given in the last `session_ended`.
    pub end_reason: Option<String>,
    /// How often the session was resumed.
    pub resumed: u32,
    /// The parent session (a fork or a replay): id, seq, hash.
    pub parent: Option<Lineage>,
    pub records: u64,
    pub head_seq: u64,
    pub head_hash: String,
}

/// A model the session talked to. The API key is never recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelInfo {
    pub provider: String,
    pub model: String,
    /// The server's address, when the session recorded it (`session_started.config`).
    pub base_url: Option<String>,
}

/// The tokens one model used over the session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TokenUse {
    pub provider: String,
    pub model: String,
    /// Model turns.
    pub turns: u64,
    /// Turns that recorded no usage.
    pub turns_without_usage: u64,
    pub input: u64,
    pub output: u64,
    /// Input tokens read from the provider's cache (part of `input`), when it says.
    pub cached: u64,
}

/// One step of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Turn {
    /// A message from the user (`user_message`).
    User { seq: u64, ts: String, text: String },
    /// What the model said (`model_turn.text`), and how many calls it asked for.
    Model {
        seq: u64,
        ts: String,
        model: String,
        text: String,
        calls: u64,
        /// The person watching interrupted the turn (`model_turn.interrupted`): `text`
        /// is what it had said by then. Absent when false.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        interrupted: bool,
    },
    /// A call: its entry in [`Audit::calls`] has the same `call`.
    Call { seq: u64, call: String },
}

/// Where a session comes from.
#[derive(Debug, Clone, Serialize)]
pub struct Lineage {
    pub session: String,
    pub seq: u64,
    pub hash: String,
}

/// The outcome of the deep verification the audit ran.
#[derive(Debug, Clone, Serialize)]
pub struct Integrity {
    pub clean: bool,
    pub problems: u64,
    pub decisions_checked: u64,
    pub blobs_checked: u64,
    /// The problems verify kept (the first `problems_max` of `problems`), in order.
    pub list: Vec<Problem>,
}

/// One call.
#[derive(Debug, Clone, Serialize)]
pub struct CallEntry {
    pub seq: u64,
    pub call: String,
    pub tool: String,
    /// `ok`, `error`, … or `unfinished`.
    pub status: String,
    pub started: String,
    pub finished: Option<String>,
    /// Milliseconds from the session start to the call's start and end (the timeline).
    pub start_ms: u64,
    pub end_ms: u64,
    pub elapsed_us: Option<u64>,
    /// Milliseconds spent waiting for a person's permission answers (from each
    /// `permission_requested` to its `permission_decided`), apart from the run time;
    /// none when no person was asked.
    pub wait_ms: Option<u64>,
    /// A one-line summary of the input.
    pub summary: String,
    /// The input as recorded (redacted).
    pub input: serde_json::Value,
    /// The output as the model was shown it (capped; the whole in the output blob).
    pub output: String,
}

/// One change to a file.
#[derive(Debug, Clone, Serialize)]
pub struct WriteEntry {
    pub seq: u64,
    pub call: Option<String>,
    pub op: WriteOp,
    pub path: String,
    pub status: WriteStatus,
    pub before: Option<String>,
    pub after: Option<String>,
    pub before_bytes: Option<u64>,
    pub after_bytes: Option<u64>,
    /// The unified diff with line numbers, or why there is none (binary, missing blob,
    /// withheld).
    pub diff: String,
    /// A credential file: hashes and lengths only, its content not kept.
    pub withheld: bool,
}

/// The lines of a file a call read.
#[derive(Debug, Clone, Serialize)]
pub struct ReadEntry {
    pub seq: u64,
    pub call: String,
    pub path: String,
    pub ranges: Vec<(u32, u32)>,
    pub total_lines: u32,
}

/// One process a shell tool ran.
#[derive(Debug, Clone, Serialize)]
pub struct CommandEntry {
    pub seq: u64,
    pub call: String,
    /// The process-table id of a background process.
    pub id: Option<String>,
    /// The full command line, quoted as a shell would need.
    pub command: String,
    pub cwd: String,
    pub kind: ProcKind,
    /// `ok`, `failed`, `timeout`, `cancelled` or `running` (no end recorded).
    pub status: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub elapsed_us: Option<u64>,
    /// Bytes of standard output and error (or of the log of a background process).
    pub output_bytes: u64,
    pub error: Option<String>,
    pub start_ms: u64,
    pub end_ms: u64,
}

/// A background process with no recorded end.
#[derive(Debug, Clone, Serialize)]
pub struct OpenProcess {
    pub id: String,
    pub pid: Option<u32>,
    pub command: String,
    /// `running` when the session has not ended, `lost` when it ended (or was resumed)
    /// without recording the process's end.
    pub state: String,
}

/// What the session reached on the network.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Network {
    /// Hosts asked for, with how many fetches each.
    pub hosts: BTreeMap<String, u64>,
    pub fetches: Vec<FetchEntry>,
    pub searches: Vec<SearchEntry>,
}

/// One fetch.
#[derive(Debug, Clone, Serialize)]
pub struct FetchEntry {
    pub seq: u64,
    pub call: String,
    /// The host as asked for: as written in `url`.
    pub host: String,
    /// The host as resolved, when it differs: the URL parser's reading of it
    /// (`0x7f000001` is `127.0.0.1`), or the host the answer came from after redirects.
    pub resolved_host: Option<String>,
    pub url: String,
    pub final_url: Option<String>,
    pub status: Option<u16>,
    pub bytes: u64,
    pub error: Option<String>,
}

/// One search.
#[derive(Debug, Clone, Serialize)]
pub struct SearchEntry {
    pub seq: u64,
    pub call: String,
    pub query: String,
    pub status: String,
}

/// A permission request and its decision (or a decision from the allow list alone).
#[derive(Debug, Clone, Serialize)]
pub struct PermissionEntry {
    pub seq: u64,
    pub call: String,
    pub tool: String,
    pub key: String,
    /// Exactly what was asked about (empty for an allow-list decision, never asked).
    pub detail: String,
    pub guarded: bool,
    /// None when the request was never answered (the session stopped while asking).
    pub answer: Option<Answer>,
    pub source: Option<AnswerSource>,
    /// Milliseconds between the question and a person's answer (none when the answer
    /// came from the allow list or a policy, or never came).
    pub wait_ms: Option<u64>,
}

/// A call a rule refused.
#[derive(Debug, Clone, Serialize)]
pub struct RefusalEntry {
    pub seq: u64,
    pub call: String,
    pub tool: String,
    pub status: Status,
    pub rule: Option<Rule>,
    pub path: Option<String>,
    /// The first line of what the model was told.
    pub reason: String,
}

/// A call whose result was flagged as reading like an instruction aimed at the model.
#[derive(Debug, Clone, Serialize)]
pub struct InjectionEntry {
    pub seq: u64,
    pub call: String,
    pub tool: String,
    /// The phrases found (`decide::INJECTION_MARKS`).
    pub marks: Vec<String>,
}

/// A call the session left unfinished or recorded as interrupted.
#[derive(Debug, Clone, Serialize)]
pub struct InterruptedEntry {
    pub seq: u64,
    pub call: String,
    pub tool: String,
    /// `unfinished` (no end recorded) or the outcome decided at resume.
    pub outcome: String,
    /// For a script step that could run commands: whether a resume ran it again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun: Option<InterruptedStep>,
}

impl InterruptedEntry {
    /// The outcome, and what a resume decided about running it again.
    pub fn outcome_text(&self) -> String {
        match &self.rerun {
            Some(r) => format!("{}, {}", self.outcome, r.decision()),
            None => self.outcome.clone(),
        }
    }
}

/// What the secret patterns find in the workspace content a session captured: the
/// blobs of its manifest and of its writes' before and after, each scanned once.
/// Credential files are withheld (no blob): they are listed, not scanned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WorkspaceSecrets {
    /// Secrets found, over every distinct blob.
    pub found: u64,
    /// Secrets found, per kind (the redaction patterns' names).
    pub kinds: BTreeMap<String, u64>,
    /// The files holding them: one entry per path and content.
    pub files: Vec<SecretFile>,
    /// Distinct blobs scanned, and their bytes.
    pub blobs_scanned: u64,
    pub bytes_scanned: u64,
    /// Blobs larger than `scan_bytes_max`, not scanned.
    pub blobs_skipped: u64,
    pub scan_bytes_max: u64,
    /// Blobs missing or unreadable, not scanned (verify reports them).
    pub blobs_missing: u64,
    /// Paths of the files recorded withheld (credential files), in the order first
    /// seen: their content is in no blob.
    pub withheld: Vec<String>,
}

/// A captured file that holds secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretFile {
    pub path: String,
    /// The BLAKE3 of the content they were found in.
    pub hash: String,
    /// Secrets found, per kind.
    pub kinds: BTreeMap<String, u64>,
}

/// Scans the workspace blobs `session` references (its manifest's files, then every
/// write's before and after, each distinct blob once) with the redaction patterns
/// (no environment values), skipping blobs over `scan_bytes_max` bytes.
pub fn workspace_secrets(session: &Session, scan_bytes_max: u64) -> WorkspaceSecrets {
    let mut out = WorkspaceSecrets {
        scan_bytes_max,
        ..WorkspaceSecrets::default()
    };
    // Each distinct blob, in the order first seen, with the paths that hold it.
    let mut order: Vec<Hash> = Vec::new();
    let mut paths: HashMap<Hash, Vec<String>> = HashMap::new();
    let mut seen_withheld: BTreeSet<String> = BTreeSet::new();
    let mut note = |path: &str, hash: Option<Hash>, withheld: bool| {
        if withheld {
            if seen_withheld.insert(path.to_string()) {
                out.withheld.push(path.to_string());
            }
            return;
        }
        let Some(hash) = hash else { return };
        let at = paths.entry(hash).or_insert_with(|| {
            order.push(hash);
            Vec::new()
        });
        if !at.iter().any(|p| p == path) {
            at.push(path.to_string());
        }
    };
    match session.manifest() {
        Ok(entries) => {
            for e in &entries {
                note(&e.path, e.hash, e.withheld);
            }
        }
        // Reported by verify; nothing of it can be scanned.
        Err(_) => out.blobs_missing += 1,
    }
    for r in &session.records {
        if let Event::FileWrite(w) = &r.event {
            for b in [&w.before, &w.after] {
                note(&w.path, b.map(|b| b.hash), w.withheld);
            }
        }
    }
    for hash in order {
        let size = std::fs::metadata(session.blobs.path(&hash)).map(|m| m.len());
        let counts = match size {
            Err(_) => None,
            Ok(size) if size > scan_bytes_max => {
                out.blobs_skipped += 1;
                continue;
            }
            Ok(size) => session
                .blobs
                .open_blob(&hash)
                .ok()
                // A small blob is read whole, without a buffer of a full chunk.
                .and_then(|f| {
                    let chunk = usize::try_from(size.saturating_add(1))
                        .map_or(SCAN_CHUNK_BYTES, |s| s.min(SCAN_CHUNK_BYTES));
                    count_secrets(f, chunk, SCAN_OVERLAP_BYTES).ok()
                })
                .map(|c| (size, c)),
        };
        let Some((size, counts)) = counts else {
            out.blobs_missing += 1;
            continue;
        };
        out.blobs_scanned += 1;
        out.bytes_scanned += size;
        if counts.is_empty() {
            continue;
        }
        let kinds: BTreeMap<String, u64> =
            counts.into_iter().map(|(k, n)| (k, u64::from(n))).collect();
        for (k, n) in &kinds {
            out.found += n;
            *out.kinds.entry(k.clone()).or_default() += n;
        }
        for path in paths.remove(&hash).unwrap_or_default() {
            out.files.push(SecretFile {
                path,
                hash: hash.to_hex(),
                kinds: kinds.clone(),
            });
        }
    }
    out
}

/// Counts the secrets in what `reader` yields, streaming: about `chunk_bytes` at a
/// time, each chunk scanned (as bytes, as the redactor scans command output) together with the last `overlap_bytes`
/// before it. A secret is counted in the first window where it is whole: the window's
/// counts less those of its overlap alone. Chunks end at a line's end, so that no
/// secret is cut there and seen, cut, as a secret of another kind; only a line longer
/// than `overlap_bytes` is cut where the chunk ends. Exact while no secret is longer
/// than the overlap and no line is cut.
pub fn count_secrets(
    mut reader: impl Read,
    chunk_bytes: usize,
    overlap_bytes: usize,
) -> std::io::Result<Counts> {
    assert!(chunk_bytes > 0, "a scan reads at least one byte at a time");
    let redactor = Redactor::default();
    let mut total = Counts::new();
    let mut window: Vec<u8> = Vec::new();
    // Read and not yet scanned: the end of a line.
    let mut carry: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; chunk_bytes];
    loop {
        let n = read_full(&mut reader, &mut buf)?;
        let end = n < chunk_bytes;
        carry.extend_from_slice(&buf[..n]);
        let cut = match carry.iter().rposition(|&b| b == b'\n') {
            _ if end => carry.len(),
            Some(i) => i + 1,
            None if carry.len() < overlap_bytes => continue,
            None => carry.len(),
        };
        if cut > 0 {
            let overlap = window.len();
            window.extend(carry.drain(..cut));
            let mut all = Counts::new();
            redactor.redact_bytes(&window, &mut all);
            let mut before = Counts::new();
            if overlap > 0 && !all.is_empty() {
                redactor.redact_bytes(&window[..overlap], &mut before);
            }
            for (kind, n) in all {
                let seen = before.get(&kind).copied().unwrap_or(0);
                if n > seen {
                    *total.entry(kind).or_default() += n - seen;
                }
            }
            let keep = window.len().min(overlap_bytes);
            window.drain(..window.len() - keep);
        }
        if end {
            break;
        }
    }
    Ok(total)
}

/// Reads until `buf` is full or the end; the bytes read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
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

fn gather(session: &Session, verified: &(Report, Vec<Problem>), scan: bool) -> Audit {
    let (report, problems) = verified;
    let records = &session.records;
    let t0 = records.first().map(|r| millis(&r.ts)).unwrap_or(0);
    let at = |ts: &str| millis(ts).saturating_sub(t0);
    let last_ts = records.last().map(|r| r.ts.clone()).unwrap_or_default();
    let end_ms = at(&last_ts);

    let mut calls: Vec<CallEntry> = Vec::new();
    let mut call_index: HashMap<String, usize> = HashMap::new();
    let mut writes = Vec::new();
    let mut reads = Vec::new();
    let mut commands: Vec<CommandEntry> = Vec::new();
    let mut open_cmds: HashMap<(String, Option<String>), usize> = HashMap::new();
    let mut network = Network::default();
    let mut permissions: Vec<PermissionEntry> = Vec::new();
    let mut pending_perm: HashMap<(String, String), usize> = HashMap::new();
    let mut refusals = Vec::new();
    let mut injections = Vec::new();
    let mut redactions: BTreeMap<String, u64> = BTreeMap::new();
    let mut end_state = EndState::Interrupted;
    let mut end_reason = None;
    let mut resumed = 0u32;
    let mut reruns: HashMap<String, InterruptedStep> = HashMap::new();
    let mut open_bg: BTreeMap<String, (Option<u32>, String)> = BTreeMap::new();
    let mut conversation: Vec<Turn> = Vec::new();
    let mut answer: Option<String> = None;
    let mut tokens: Vec<TokenUse> = Vec::new();
    let mut models: Vec<ModelInfo> = Vec::new();
    if let Some(m) = configured_model(&session.started.config) {
        models.push(m);
    }
    let mut asked_at: HashMap<(String, String), u64> = HashMap::new();
    let mut failed = Vec::new();

    for r in records {
        match &r.event {
            Event::UserMessage { text, .. } => conversation.push(Turn::User {
                seq: r.seq,
                ts: r.ts.clone(),
                text: text.clone(),
            }),
            Event::ModelTurn {
                provider,
                model,
                text,
                tool_calls,
                usage,
                interrupted,
            } => {
                if !models
                    .iter()
                    .any(|m| &m.provider == provider && &m.model == model)
                {
                    models.push(ModelInfo {
                        provider: provider.clone(),
                        model: model.clone(),
                        base_url: None,
                    });
                }
                let i = match tokens
                    .iter()
                    .position(|t| &t.provider == provider && &t.model == model)
                {
                    Some(i) => i,
                    None => {
                        tokens.push(TokenUse {
                            provider: provider.clone(),
                            model: model.clone(),
                            ..TokenUse::default()
                        });
                        tokens.len() - 1
                    }
                };
                let t = &mut tokens[i];
                t.turns += 1;
                match usage.as_ref().filter(|u| u.is_object()) {
                    Some(u) => {
                        let n = |k: &str| u.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
                        t.input += n("input_tokens");
                        t.output += n("output_tokens");
                        t.cached += n("cached_tokens");
                    }
                    None => t.turns_without_usage += 1,
                }
                // An interrupted turn is no answer.
                answer = (tool_calls.is_empty() && !text.is_empty() && !interrupted)
                    .then(|| text.clone());
                conversation.push(Turn::Model {
                    seq: r.seq,
                    ts: r.ts.clone(),
                    model: model.clone(),
                    text: text.clone(),
                    calls: tool_calls.len() as u64,
                    interrupted: *interrupted,
                });
            }
            Event::ToolStarted {
                call, tool, input, ..
            } => {
                conversation.push(Turn::Call {
                    seq: r.seq,
                    call: call.clone(),
                });
                call_index.insert(call.clone(), calls.len());
                if let Some(field) = cairn_tools::effects_of(tool).and_then(|e| e.search_query)
                    && let Some(q) = input.get(field).and_then(|q| q.as_str())
                {
                    network.searches.push(SearchEntry {
                        seq: r.seq,
                        call: call.clone(),
                        query: q.to_string(),
                        status: "unfinished".into(),
                    });
                }
                calls.push(CallEntry {
                    seq: r.seq,
                    call: call.clone(),
                    tool: tool.clone(),
                    status: "unfinished".into(),
                    started: r.ts.clone(),
                    finished: None,
                    start_ms: at(&r.ts),
                    end_ms,
                    elapsed_us: None,
                    wait_ms: None,
                    summary: input_summary(input),
                    input: input.clone(),
                    output: String::new(),
                });
            }
            Event::ToolFinished(f) => {
                for (k, n) in &f.redactions {
                    *redactions.entry(k.clone()).or_default() += u64::from(*n);
                }
                let Some(&i) = call_index.get(&f.call) else {
                    continue;
                };
                let c = &mut calls[i];
                c.status = f.status.as_str().to_string();
                c.finished = Some(r.ts.clone());
                c.end_ms = at(&r.ts);
                c.elapsed_us = Some(f.elapsed_us);
                c.output = f.output.clone();
                for s in network.searches.iter_mut().filter(|s| s.call == f.call) {
                    s.status = f.status.as_str().to_string();
                }
                if !f.injection.is_empty() {
                    injections.push(InjectionEntry {
                        seq: r.seq,
                        call: f.call.clone(),
                        tool: c.tool.clone(),
                        marks: f.injection.clone(),
                    });
                }
                let refused =
                    f.refusal.is_some() || matches!(f.status, Status::Blocked | Status::Denied);
                let entry = RefusalEntry {
                    seq: r.seq,
                    call: f.call.clone(),
                    tool: c.tool.clone(),
                    status: f.status,
                    rule: f.refusal.as_ref().map(|x| x.rule),
                    path: f.refusal.as_ref().and_then(|x| x.path.clone()),
                    reason: one_line(f.output.lines().next().unwrap_or("")),
                };
                if refused {
                    refusals.push(entry);
                } else if !matches!(f.status, Status::Ok | Status::Interrupted) {
                    failed.push(entry);
                }
            }
            Event::FileWrite(w) => {
                // The end of a write replaces its intent: one entry per change.
                if w.status != WriteStatus::Intent
                    && let Some(last) = writes.iter_mut().rev().find(|e: &&mut WriteEntry| {
                        e.status == WriteStatus::Intent && e.path == w.path && e.call == w.call
                    })
                {
                    last.seq = r.seq;
                    last.status = w.status;
                    continue;
                }
                writes.push(WriteEntry {
                    seq: r.seq,
                    call: w.call.clone(),
                    op: w.op,
                    path: w.path.clone(),
                    status: w.status,
                    before: w.before.as_ref().map(|b| b.hash.to_hex()),
                    after: w.after.as_ref().map(|b| b.hash.to_hex()),
                    before_bytes: w.before.as_ref().map(|b| b.len),
                    after_bytes: w.after.as_ref().map(|b| b.len),
                    withheld: w.withheld,
                    diff: if w.withheld {
                        NoDiff::Withheld.to_string()
                    } else {
                        write_diff(session, &w.path, w.before.as_ref(), w.after.as_ref())
                    },
                });
            }
            Event::FileRead(fr) => reads.push(ReadEntry {
                seq: r.seq,
                call: fr.call.clone(),
                path: fr.path.clone(),
                ranges: fr.ranges.clone(),
                total_lines: fr.total_lines,
            }),
            Event::ShellExec(x) => {
                let key = (x.call.clone(), x.id.clone());
                match &x.phase {
                    ShellPhase::Started => {
                        open_cmds.insert(key, commands.len());
                        if let (ProcKind::Background, Some(id)) = (x.kind, &x.id) {
                            open_bg.insert(
                                id.clone(),
                                (x.pid, cairn_tools::shell::shown_argv(&x.argv)),
                            );
                        }
                        commands.push(CommandEntry {
                            seq: r.seq,
                            call: x.call.clone(),
                            id: x.id.clone(),
                            command: cairn_tools::shell::shown_argv(&x.argv),
                            cwd: x.cwd.clone(),
                            kind: x.kind,
                            status: x.status_name().to_string(),
                            exit_code: None,
                            signal: None,
                            elapsed_us: None,
                            output_bytes: 0,
                            error: None,
                            start_ms: at(&r.ts),
                            end_ms,
                        });
                    }
                    ShellPhase::Finished(end) => {
                        let output = end.stdout_bytes.unwrap_or(0)
                            + end.stderr_bytes.unwrap_or(0)
                            + end.log_blob.as_ref().map_or(0, |b| b.len);
                        if let Some(id) = &x.id {
                            open_bg.remove(id);
                        }
                        let i = match open_cmds.remove(&key) {
                            Some(i) => i,
                            None => {
                                // A process that failed to start has no `started` record.
                                commands.push(CommandEntry {
                                    seq: r.seq,
                                    call: x.call.clone(),
                                    id: x.id.clone(),
                                    command: cairn_tools::shell::shown_argv(&x.argv),
                                    cwd: x.cwd.clone(),
                                    kind: x.kind,
                                    status: String::new(),
                                    exit_code: None,
                                    signal: None,
                                    elapsed_us: None,
                                    output_bytes: 0,
                                    error: None,
                                    start_ms: at(&r.ts),
                                    end_ms,
                                });
                                commands.len() - 1
                            }
                        };
                        let c = &mut commands[i];
                        c.status = end.status.as_str().to_string();
                        c.exit_code = end.exit_code;
                        c.signal = end.signal;
                        c.elapsed_us = end.elapsed_us;
                        c.output_bytes = output;
                        c.error = end.error.clone();
                        c.end_ms = at(&r.ts);
                    }
                }
            }
            Event::WebFetched(w) => {
                // Hosts as asked for: a redirect's target is shown with its fetch.
                *network.hosts.entry(host_of(&w.url)).or_default() += 1;
                network.fetches.push(fetch_entry(r.seq, w));
            }
            Event::PermissionRequested {
                call,
                key,
                detail,
                tool,
                guarded,
                ..
            } => {
                pending_perm.insert((call.clone(), key.clone()), permissions.len());
                asked_at.insert((call.clone(), key.clone()), millis(&r.ts));
                permissions.push(PermissionEntry {
                    seq: r.seq,
                    call: call.clone(),
                    tool: tool.clone(),
                    key: key.clone(),
                    detail: detail.clone(),
                    guarded: *guarded,
                    answer: None,
                    source: None,
                    wait_ms: None,
                });
            }
            Event::PermissionDecided {
                call,
                key,
                answer,
                source,
                ..
            } => match pending_perm.remove(&(call.clone(), key.clone())) {
                Some(i) => {
                    permissions[i].answer = Some(*answer);
                    permissions[i].source = Some(*source);
                    if let Some(t) = asked_at.remove(&(call.clone(), key.clone()))
                        && *source == AnswerSource::User
                    {
                        let wait = millis(&r.ts).saturating_sub(t);
                        permissions[i].wait_ms = Some(wait);
                        if let Some(&c) = call_index.get(call) {
                            *calls[c].wait_ms.get_or_insert(0) += wait;
                        }
                    }
                }
                None => {
                    let tool = call_index
                        .get(call)
                        .map(|&i| calls[i].tool.clone())
                        .unwrap_or_default();
                    permissions.push(PermissionEntry {
                        seq: r.seq,
                        call: call.clone(),
                        tool,
                        key: key.clone(),
                        detail: String::new(),
                        guarded: false,
                        answer: Some(*answer),
                        source: Some(*source),
                        wait_ms: None,
                    });
                }
            },
            Event::SessionEnded { reason, failed, .. } => {
                end_state = if *failed {
                    EndState::Failed
                } else {
                    EndState::Finished
                };
                end_reason = Some(reason.clone());
            }
            Event::SessionResumed {
                interrupted_steps, ..
            } => {
                end_state = EndState::Resumed;
                resumed += 1;
                for s in interrupted_steps {
                    reruns.insert(s.call.clone(), s.clone());
                }
            }
            _ => {}
        }
    }

    let ended = matches!(end_state, EndState::Finished | EndState::Failed);
    if !ended && cairn_store::writer_pid(&session.dir).is_some() {
        end_state = EndState::Running;
    }
    // Processes still open at a recorded end were lost; an interrupted or running
    // session's may still run.
    let lost = matches!(
        end_state,
        EndState::Finished | EndState::Failed | EndState::Resumed
    );
    let processes_open = open_bg
        .into_iter()
        .map(|(id, (pid, command))| OpenProcess {
            id,
            pid,
            command,
            state: if lost { "lost" } else { "running" }.into(),
        })
        .collect();
    let interrupted = calls
        .iter()
        .filter(|c| c.status == "unfinished" || c.status == "interrupted")
        .map(|c| InterruptedEntry {
            seq: c.seq,
            call: c.call.clone(),
            tool: c.tool.clone(),
            outcome: c.status.clone(),
            rerun: reruns.get(&c.call).cloned(),
        })
        .collect();
    let mut calls_by_status: BTreeMap<String, u64> = BTreeMap::new();
    for c in &calls {
        *calls_by_status.entry(c.status.clone()).or_default() += 1;
    }
    let s = &session.started;
    Audit {
        header: Header {
            session: session.id.clone(),
            workspace: s.workspace.clone(),
            catalog: s.catalog.clone(),
            engine_version: s.engine_version.clone(),
            models,
            started: records.first().map(|r| r.ts.clone()).unwrap_or_default(),
            ended: last_ts,
            duration_ms: end_ms,
            end_state,
            end_reason,
            resumed,
            parent: s.parent.as_ref().map(|p| Lineage {
                session: p.session.clone(),
                seq: p.seq,
                hash: p.hash.to_hex(),
            }),
            records: records.len() as u64,
            head_seq: session.head.seq,
            head_hash: session.head.hash.to_hex(),
        },
        integrity: Integrity {
            clean: report.problems == 0,
            problems: report.problems,
            decisions_checked: report.decisions_checked,
            blobs_checked: report.blobs_checked,
            list: problems.clone(),
        },
        conversation,
        answer,
        tokens,
        calls,
        writes,
        reads,
        commands,
        processes_open,
        network,
        permissions,
        refusals,
        failed,
        interrupted,
        injections,
        redactions,
        workspace_secrets: if scan {
            workspace_secrets(session, AUDIT_SCAN_BYTES_MAX)
        } else {
            WorkspaceSecrets::default()
        },
        calls_by_status,
        imported: import_info(session),
        cost: None,
    }
}

/// The model `session_started.config.model` names (provider, model, base URL), when
/// the session was started with one.
pub fn configured_model(config: &serde_json::Value) -> Option<ModelInfo> {
    let m = config.get("model")?;
    let text = |k: &str| m.get(k).and_then(|v| v.as_str()).map(str::to_string);
    Some(ModelInfo {
        provider: text("provider")?,
        model: text("model")?,
        base_url: text("base_url"),
    })
}

fn fetch_entry(seq: u64, w: &WebFetched) -> FetchEntry {
    let host = host_of(&w.url);
    let parsed = |u: &str| {
        url::Url::parse(u)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
    };
    let resolved_host = w
        .final_url
        .as_deref()
        .and_then(parsed)
        .or_else(|| parsed(&w.url))
        .filter(|h| *h != host && Some(h.as_str()) != without_port(&host));
    FetchEntry {
        seq,
        call: w.call.clone(),
        host,
        resolved_host,
        url: w.url.clone(),
        final_url: w.final_url.clone(),
        status: w.status,
        bytes: w.bytes,
        error: w.error.clone(),
    }
}

/// The host of a URL (what is between `://` and the next `/`, `?` or `#`, without a
/// user part); the whole text when it has no scheme.
pub fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, h)| h)
        .to_string()
}

/// `host` without its `:port`, if it has one.
fn without_port(host: &str) -> Option<&str> {
    host.rsplit_once(':')
        .filter(|(h, p)| {
            !h.ends_with(':') && !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())
        })
        .map(|(h, _)| h)
}

/// Why a write shows no diff: what is shown in its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum NoDiff {
    #[error("(blob {} is missing)", .0.short(12))]
    Missing(cairn_store::Hash),
    #[error("(binary, {0} bytes)")]
    Binary(u64),
    #[error("(withheld: a credential file, its content is not kept)")]
    Withheld,
}

/// The diff of one write, from its blobs.
fn write_diff(
    session: &Session,
    path: &str,
    before: Option<&BlobRef>,
    after: Option<&BlobRef>,
) -> String {
    let text = |b: Option<&BlobRef>| -> Result<String, NoDiff> {
        let Some(b) = b else {
            return Ok(String::new());
        };
        let bytes = session
            .blob(&b.hash, path)
            .map_err(|_| NoDiff::Missing(b.hash))?;
        String::from_utf8(bytes).map_err(|_| NoDiff::Binary(b.len))
    };
    match (text(before), text(after)) {
        (Ok(a), Ok(b)) => cairn_core::diff::unified(
            path,
            before.is_some().then_some(a.as_str()),
            &b,
            DIFF_LINES_MAX,
        ),
        (Err(e), _) | (_, Err(e)) => e.to_string(),
    }
}

/// Milliseconds since the epoch of an RFC 3339 time (0 when it does not parse).
fn millis(ts: &str) -> u64 {
    ts.parse::<jiff::Timestamp>()
        .map(|t| u64::try_from(t.as_millisecond()).unwrap_or(0))
        .unwrap_or(0)
}

/// A one-line summary of a call's input: `key=value` pairs, newlines shown as `⏎`.
pub fn input_summary(input: &serde_json::Value) -> String {
    let Some(map) = input.as_object() else {
        return input.to_string();
    };
    map.iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={}", one_line(s)),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_without_a_diff_says_why() {
        let h = cairn_store::Hash::of(b"x");
        assert_eq!(
            NoDiff::Missing(h).to_string(),
            format!("(blob {} is missing)", h.short(12))
        );
        assert_eq!(NoDiff::Binary(7).to_string(), "(binary, 7 bytes)");
    }

    #[test]
    fn host_of_takes_the_authority_without_user() {
        assert_eq!(
            host_of("https://u:p@example.org:8080/a?b"),
            "example.org:8080"
        );
        assert_eq!(host_of("http://0x7f000001/admin"), "0x7f000001");
        assert_eq!(host_of("example.org"), "example.org");
    }

    /// Text with secrets of several kinds (made here, none written out in the source),
    /// and what one pass over all of it counts.
    fn secrets_text() -> (String, Counts) {
        let gh = format!("ghp_{}", "Ab1".repeat(12));
        let aws = format!("AKIA{}", "Z7".repeat(8));
        let key = format!(
            "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
            "QUJD".repeat(30)
        );
        // Non-ASCII text around them (a letter, a non-breaking space, a dash), which
        // the scan reads as ASCII of the same class.
        let text = format!(
            "intro line, naïve café\ntoken\u{a0}= {gh}\n{}\nkey_id {aws} — and {gh}\n{key}\nend {aws}é\n",
            "filler ".repeat(9)
        );
        // The second AWS key runs into a letter that is not ASCII: the patterns' word
        // boundaries are ASCII ones, so it is a key.
        let expected: Counts = [
            ("aws_access_key".to_string(), 2),
            ("github_token".to_string(), 2),
            ("private_key".to_string(), 1),
        ]
        .into_iter()
        .collect();
        (text, expected)
    }

    #[test]
    fn one_pass_counts_every_secret_once() {
        let (text, expected) = secrets_text();
        let mut once = Counts::new();
        Redactor::default().redact(&text, &mut once);
        assert_eq!(once, expected);
        assert_eq!(
            count_secrets(text.as_bytes(), SCAN_CHUNK_BYTES, SCAN_OVERLAP_BYTES).unwrap(),
            expected
        );
    }

    // Regression guard: a secret cut by a chunk's end, or lying whole in the overlap
    // scanned twice, is counted exactly once, whatever the chunk size.
    #[test]
    fn chunked_counts_equal_one_pass_at_every_chunk_size() {
        let (text, expected) = secrets_text();
        for chunk in 1..=text.len() + 1 {
            assert_eq!(
                count_secrets(text.as_bytes(), chunk, 256).unwrap(),
                expected,
                "chunk {chunk} bytes"
            );
        }
    }

    #[test]
    fn no_secret_counts_nothing() {
        assert_eq!(
            count_secrets(&b"plain text, max_tokens = 5\n"[..], 4, 16).unwrap(),
            Counts::new()
        );
        assert_eq!(count_secrets(&b""[..], 4, 16).unwrap(), Counts::new());
    }
}
