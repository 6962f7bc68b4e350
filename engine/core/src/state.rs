//! The state of a session: a pure fold of its log. `State::apply` reads no clock, does
//! no I/O and draws no random number; the live engine and replay call the same function
//! on the same records and must reach the same state.

use std::collections::BTreeMap;

use rkyv::{Archive, Deserialize as RDeserialize, Serialize as RSerialize};

use crate::decide::RepeatRule;
use crate::event::{
    Event, ExecStatus, FileWrite, Observed, ProcKind, ShellExec, ShellPhase, Status, WriteOp,
    WriteStatus,
};

/// The version of the archived state in snapshot files; bump it when `State` changes.
pub const STATE_FORMAT_VERSION: u32 = 7;

/// One record as the engine sees it: the store's envelope with a parsed event.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub seq: u64,
    pub ts: String,
    pub hash: cairn_store::Hash,
    pub event: Event,
}

impl Record {
    /// When what the record tells happened: the source's own time (`at`) for an
    /// imported event that carries one, else when the record was written (`ts`).
    /// What a person is shown (timelines, durations, started and ended) uses this.
    pub fn time(&self) -> &str {
        self.event.at().unwrap_or(&self.ts)
    }
}

/// The time of each record as a person reads it, over a log read in order: the
/// record's own [`Record::time`]; in an imported session, a record that carries no
/// source time (a command's run, a file written, a line kept) happened when the last
/// one that did, not when the import wrote it.
#[derive(Debug, Default)]
pub struct Times {
    imported: bool,
    last: Option<String>,
}

impl Times {
    /// The time of `r`, the next record of the log.
    pub fn next(&mut self, r: &Record) -> String {
        if let Event::SessionStarted(s) = &r.event {
            self.imported = s.imported.is_some();
        }
        if let Some(at) = r.event.at() {
            self.last = Some(at.to_string());
            return at.to_string();
        }
        match &self.last {
            Some(last) if self.imported => last.clone(),
            _ => r.ts.clone(),
        }
    }
}

/// What the session knows about one file.
#[derive(
    Debug, Clone, PartialEq, Eq, Default, Archive, RSerialize, RDeserialize, serde::Serialize,
)]
pub struct FileKnowledge {
    /// The last content hash the session saw (read or wrote); `None` once deleted.
    pub hash: Option<[u8; 32]>,
    /// The content hash `ranges` were read at.
    pub read_hash: Option<[u8; 32]>,
    /// Merged, sorted, 1-based inclusive line ranges read at `read_hash`.
    pub ranges: Vec<(u32, u32)>,
    /// Line count at `read_hash`.
    pub total_lines: u32,
}

impl FileKnowledge {
    /// True when the file was read (any part) at content `hash`.
    pub fn read_at(&self, hash: &[u8; 32]) -> bool {
        self.read_hash.as_ref() == Some(hash)
    }

    /// The line ranges of `1..=total_lines` not yet read.
    pub fn missing(&self) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let mut next = 1u32;
        for &(a, b) in &self.ranges {
            if a > next {
                out.push((next, a - 1));
            }
            next = next.max(b.saturating_add(1));
        }
        if next <= self.total_lines {
            out.push((next, self.total_lines));
        }
        out
    }
}

/// Identical calls seen since the last change the log shows that could alter their
/// answer. A counter is dropped by: a user message (all of them); a command that ends,
/// in the foreground or the background (all of them: what a program changed is only
/// partly known, ignored files are not scanned); and a change to a file the counter
/// depends on, which is a write, or a read or an observation (`tool_started.observed`)
/// that finds other content than the log last showed (a change no record announced).
#[derive(
    Debug, Clone, PartialEq, Eq, Default, Archive, RSerialize, RDeserialize, serde::Serialize,
)]
pub struct RepeatCounter {
    pub count: u32,
    /// Paths the call names (a file, or a folder it searches or lists); empty for
    /// calls over the whole workspace, which any change clears.
    pub paths: Vec<String>,
}

impl RepeatCounter {
    /// Whether a change to `path` can alter the answer of the calls counted.
    pub fn depends_on(&self, path: &str) -> bool {
        self.paths.is_empty()
            || self.paths.iter().any(|p| {
                p.is_empty()
                    || p == path
                    || path
                        .strip_prefix(p.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            })
    }
}

/// A call started and not finished.
#[derive(Debug, Clone, PartialEq, Eq, Archive, RSerialize, RDeserialize, serde::Serialize)]
pub struct OpenCall {
    pub tool: String,
    pub seq: u64,
    pub input: String,
    /// Its repeat counter's key ([`repeat_key`]).
    pub repeat_key: String,
}

/// A background process as the log knows it.
#[derive(Debug, Clone, PartialEq, Eq, Archive, RSerialize, RDeserialize, serde::Serialize)]
pub struct Process {
    pub id: String,
    /// The call that started it.
    pub call: String,
    /// The OS process id (and process group id).
    pub pid: Option<u32>,
    /// Its start time in clock ticks since boot (`/proc/<pid>/stat`), when recorded.
    pub start_time: Option<u64>,
    pub argv: Vec<String>,
    /// Workspace-relative working folder.
    pub cwd: String,
    /// The `ts` of its `started` record.
    pub started_at: String,
    pub status: ProcessStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The `ts` of its `finished` record.
    pub finished_at: Option<String>,
    /// Its log file (stdout and stderr), in the session folder.
    pub log: String,
}

impl Process {
    pub fn is_running(&self) -> bool {
        self.status == ProcessStatus::Running
    }
}

/// Where a background process is: running, or ended and how. Serialised as one word,
/// as its `shell_exec` records spell it: `running`, `ok`, `failed`, `timeout`,
/// `cancelled` or `lost`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Archive, RSerialize, RDeserialize)]
pub enum ProcessStatus {
    Running,
    Ended(ExecStatus),
}

impl ProcessStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            ProcessStatus::Running => "running",
            ProcessStatus::Ended(s) => s.as_str(),
        }
    }
}

impl std::fmt::Display for ProcessStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl serde::Serialize for ProcessStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One entry of the conversation a model goes on from, folded from `user_message`,
/// `model_turn` and the `tool_finished` of the calls a model asked for.
///
/// Its JSON (serde) is the text a fork's `inherited.conversation` holds per entry:
/// `{"role":"user","text"}`, `{"role":"assistant","text","tool_calls":[{"id","name","input"}]}`,
/// `{"role":"tool","call_id","name","output","status"}`, keys in that order.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Eq,
    Archive,
    RSerialize,
    RDeserialize,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ConversationEntry {
    User {
        text: String,
    },
    Assistant {
        text: String,
        tool_calls: Vec<ModelCall>,
    },
    /// The result of the call the model asked for with id `call_id`.
    Tool {
        call_id: String,
        name: String,
        output: String,
        status: Status,
    },
}

impl ConversationEntry {
    /// The entry as one JSON object, as a fork's `inherited.conversation` holds it.
    pub fn to_json(&self) -> String {
        match serde_json::to_string(self) {
            Ok(s) => s,
            // Every field is a string but a call's input, which was JSON text when it
            // was folded (see `ModelCall::input`).
            Err(e) => panic!("a conversation entry does not serialise: {e}"),
        }
    }

    /// An entry from its JSON object; `None` when it is not one this version knows.
    pub fn from_json(text: &str) -> Option<ConversationEntry> {
        serde_json::from_str(text).ok()
    }
}

/// A tool call a model asked for in a turn.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Eq,
    Archive,
    RSerialize,
    RDeserialize,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct ModelCall {
    /// The provider's id for the call.
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
    /// The input as compact JSON text (a JSON value cannot be archived); serialised as
    /// the JSON value itself.
    #[serde(default = "json_null", with = "json_text")]
    pub input: String,
}

impl ModelCall {
    /// A call of a `model_turn`'s `tool_calls` (`{"id","name","input"}`; a missing
    /// field is empty, or null for the input).
    pub fn from_value(v: &serde_json::Value) -> ModelCall {
        ModelCall {
            id: v["id"].as_str().unwrap_or("").to_string(),
            name: v["name"].as_str().unwrap_or("").to_string(),
            input: v["input"].to_string(),
        }
    }

    /// The input as a JSON value.
    pub fn input(&self) -> serde_json::Value {
        match serde_json::from_str(&self.input) {
            Ok(v) => v,
            // `input` is only ever set from a JSON value's text.
            Err(e) => panic!("a model call's input is not JSON: {e}"),
        }
    }
}

fn json_null() -> String {
    "null".to_string()
}

/// `ModelCall::input` as the JSON value its text holds.
mod json_text {
    use serde::{Deserialize, Deserializer, Serialize, Serializer, de, ser};

    pub fn serialize<S: Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
        serde_json::from_str::<serde_json::Value>(text)
            .map_err(ser::Error::custom)?
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        // Re-serialising a parsed value cannot fail (object keys are strings).
        serde_json::to_string(&v).map_err(de::Error::custom)
    }
}

/// A file of the workspace as the log knows it.
#[derive(Debug, Clone, PartialEq, Eq, Archive, RSerialize, RDeserialize, serde::Serialize)]
pub struct WsFile {
    pub hash: [u8; 32],
    pub len: u64,
    /// Unix permission bits, when the write recorded them.
    pub mode: Option<u32>,
}

/// Everything the engine knows, derived from the log.
#[derive(
    Debug, Clone, PartialEq, Eq, Default, Archive, RSerialize, RDeserialize, serde::Serialize,
)]
pub struct State {
    pub session: Option<String>,
    pub workspace: Option<String>,
    pub catalog: Option<String>,
    /// The seq of the last record folded.
    pub last_seq: Option<u64>,
    pub files: BTreeMap<String, FileKnowledge>,
    /// The repeat rule the session runs (from its configuration).
    pub repeat_rule: RepeatRule,
    pub repeats: BTreeMap<String, RepeatCounter>,
    pub open_calls: BTreeMap<String, OpenCall>,
    pub calls_started: u64,
    pub calls_by_status: BTreeMap<String, u64>,
    /// Keys allowed for good: the project's allow list at the start, then every
    /// "always" answer (key → the call that granted it, or "project").
    pub allow: BTreeMap<String, String>,
    /// Background processes by id (`p1`, `p2`, …), from their `shell_exec` records.
    pub processes: BTreeMap<String, Process>,
    /// Facts saved with `remember`.
    pub memory: Vec<String>,
    /// The conversation needed to continue with a model (see `agent::messages`).
    pub conversation: Vec<ConversationEntry>,
    /// Tool calls of the last model turn not yet started, in order: (model id, tool).
    /// The engine runs a turn's calls in order, so each `tool_started` takes the first.
    pub model_calls_pending: Vec<(String, String)>,
    /// Engine call id → (model call id, tool) for calls the model asked for.
    pub model_call_of: BTreeMap<String, (String, String)>,
    /// Content hashes of the texts fetched or searched this session (blobs), which
    /// `remember` must not copy into memory.
    pub web_texts: Vec<[u8; 32]>,
    /// Every file written since the session started (by a tool or found changed by a
    /// scan): path → its content now, `None` once deleted. With the starting manifest
    /// this is the workspace as the log knows it, which a resume compares with the
    /// disk without reading the whole log.
    pub ws_changes: BTreeMap<String, Option<WsFile>>,
    pub unknown_events: u64,
    pub ended: bool,
    /// The head of the log's Merkle tree over every record folded (see [`TreeHead`]).
    pub tree: TreeHead,
}

/// A log's Merkle tree head kept as the fold goes (`cairn_tlog::tree::CompactRange`):
/// the roots of its perfect subtrees, O(log n) of them. Every record is a leaf, whatever
/// its event, even one this version cannot read.
#[derive(
    Debug, Clone, PartialEq, Eq, Default, Archive, RSerialize, RDeserialize, serde::Serialize,
)]
pub struct TreeHead {
    /// Leaves: the number of records folded.
    pub size: u64,
    /// The subtree roots, largest first: one per set bit of `size`.
    pub stack: Vec<[u8; 32]>,
}

/// The compact range of a tree head's parts.
fn range_of(size: u64, stack: Vec<[u8; 32]>) -> cairn_tlog::CompactRange {
    let roots = stack.len();
    match cairn_tlog::CompactRange::from_parts(size, stack) {
        Some(r) => r,
        // Only `push` writes them, and a snapshot is checked before it is used.
        None => panic!("tree head of size {size} with {roots} roots"),
    }
}

impl TreeHead {
    fn range(&self) -> cairn_tlog::CompactRange {
        range_of(self.size, self.stack.clone())
    }

    /// Adds record `seq` (whose hash is `hash`) as the next leaf. A log read from the
    /// store has `seq` equal to the leaf's index (the store refuses a gap); the fold
    /// does not check it, so that a state can be folded from made-up records.
    pub fn push(&mut self, seq: u64, hash: &cairn_store::Hash) {
        // The stack is moved into the range and back, never copied (every record).
        let mut r = range_of(self.size, std::mem::take(&mut self.stack));
        r.push(cairn_tlog::tree::record_leaf_hash(seq, &hash.0));
        (self.size, self.stack) = r.into_parts();
    }

    /// The root hash over the records folded.
    pub fn root(&self) -> [u8; 32] {
        self.range().root()
    }
}

impl State {
    /// Folds one record into the state.
    pub fn apply(&mut self, record: &Record) {
        self.last_seq = Some(record.seq);
        self.tree.push(record.seq, &record.hash);
        match &record.event {
            Event::SessionStarted(s) => self.apply_session_started(s),
            Event::UserMessage { text, .. } => {
                // A new request: what was pointless to repeat may be useful again.
                self.repeats.clear();
                self.model_calls_pending.clear();
                self.conversation
                    .push(ConversationEntry::User { text: text.clone() });
            }
            Event::ModelTurn {
                text,
                tool_calls,
                interrupted,
                ..
            } => {
                let calls: Vec<ModelCall> = tool_calls.iter().map(ModelCall::from_value).collect();
                self.model_calls_pending = calls
                    .iter()
                    .map(|c| (c.id.clone(), c.name.clone()))
                    .collect();
                // An interrupted turn that said nothing is nothing to tell the model.
                if !(*interrupted && text.is_empty()) {
                    self.conversation.push(ConversationEntry::Assistant {
                        text: text.clone(),
                        tool_calls: calls,
                    });
                }
            }
            Event::ToolStarted {
                call,
                tool,
                input,
                observed,
                ..
            } => self.apply_tool_started(record.seq, call, tool, input, observed.as_ref()),
            Event::FileRead(r) => self.apply_read(r),
            Event::FileWrite(w) => self.apply_write(w),
            Event::MemoryWritten { text } => self.memory.push(text.clone()),
            Event::ToolFinished(f) => self.apply_finished(f),
            Event::ShellExec(x) => self.apply_shell(x, &record.ts),
            Event::SessionEnded { .. } => self.ended = true,
            Event::SessionResumed { .. } => self.ended = false,
            Event::PermissionDecided {
                call,
                key,
                answer: crate::event::Answer::Always,
                grants,
                ..
            } => match grants {
                Some(keys) => {
                    for k in keys {
                        self.allow.insert(k.clone(), call.clone());
                    }
                }
                None => {
                    self.allow.insert(key.clone(), call.clone());
                }
            },
            Event::WebFetched(w) => {
                if let Some(t) = &w.text
                    && !self.web_texts.contains(&t.hash.0)
                {
                    self.web_texts.push(t.hash.0);
                }
            }
            Event::PermissionRequested { .. }
            | Event::PermissionDecided { .. }
            | Event::Checkpoint { .. }
            | Event::SourceItem { .. }
            | Event::ModelSwitched { .. }
            | Event::TreeCheckpoint { .. } => {}
        }
    }

    /// The session's settings, and what a fork inherited from its parent.
    fn apply_session_started(&mut self, s: &crate::event::SessionStarted) {
        self.session = Some(s.id.clone());
        self.workspace = Some(s.workspace.clone());
        self.catalog = Some(s.catalog.clone());
        self.repeat_rule = s
            .config
            .get("repeat_rule")
            .and_then(|r| serde_json::from_value(r.clone()).ok())
            .unwrap_or_else(RepeatRule::before_facts);
        self.allow = s
            .allow
            .iter()
            .map(|k| (k.clone(), "project".to_string()))
            .collect();
        if let Some(inh) = &s.inherited {
            for f in &inh.files {
                self.files.insert(
                    f.path.clone(),
                    FileKnowledge {
                        hash: f.hash.map(|h| h.0),
                        read_hash: f.read_hash.map(|h| h.0),
                        ranges: f.ranges.clone(),
                        total_lines: f.total_lines,
                    },
                );
            }
            self.memory = inh.memory.clone();
            // An entry this version does not know is left out, as a model
            // would not be shown it.
            self.conversation = inh
                .conversation
                .iter()
                .filter_map(|e| ConversationEntry::from_json(e))
                .collect();
        }
    }

    /// A call opened: matched to the model's call it answers, and counted towards
    /// repeats.
    fn apply_tool_started(
        &mut self,
        seq: u64,
        call: &str,
        tool: &str,
        input: &serde_json::Value,
        observed: Option<&Observed>,
    ) {
        self.calls_started += 1;
        if !self.model_calls_pending.is_empty() {
            let asked = self.model_calls_pending.remove(0);
            self.model_call_of.insert(call.to_string(), asked);
        }
        if let Some(o) = observed
            && self.repeat_rule == RepeatRule::Facts
        {
            self.apply_observed(o);
        }
        let key = repeat_key(tool, input);
        let counter = self.repeats.entry(key.clone()).or_default();
        counter.count += 1;
        counter.paths = named_paths(input, self.workspace.as_deref());
        self.open_calls.insert(
            call.to_string(),
            OpenCall {
                tool: tool.to_string(),
                seq,
                input: input.to_string(),
                repeat_key: key,
            },
        );
    }

    /// Lines read: the file known at the content read, its ranges merged.
    fn apply_read(&mut self, r: &crate::event::FileRead) {
        let known = self.files.get(&r.path).map(|k| k.hash);
        if self.repeat_rule == RepeatRule::Facts && known != Some(Some(r.hash.0)) {
            // Changed with no record saying so, or seen for the first time:
            // what the calls counted before saw may differ. The reading call
            // is the first at this content.
            let own = self.open_calls.get(&r.call).map(|c| c.repeat_key.clone());
            self.forget_repeats(&r.path, own.as_deref(), known.is_some());
        }
        let k = self.files.entry(r.path.clone()).or_default();
        if k.read_hash != Some(r.hash.0) {
            k.ranges.clear();
        }
        k.hash = Some(r.hash.0);
        k.read_hash = Some(r.hash.0);
        k.total_lines = r.total_lines;
        for &range in &r.ranges {
            merge_range(&mut k.ranges, range);
        }
    }

    /// A call closed, its output given to the model when the model asked for it.
    fn apply_finished(&mut self, f: &crate::event::ToolFinished) {
        self.open_calls.remove(&f.call);
        if let Some((id, name)) = self.model_call_of.remove(&f.call) {
            self.conversation.push(ConversationEntry::Tool {
                call_id: id,
                name,
                output: f.output.clone(),
                status: f.status,
            });
        }
        *self
            .calls_by_status
            .entry(f.status.as_str().to_string())
            .or_default() += 1;
    }

    /// Notes a record whose event this version cannot parse.
    pub fn apply_unknown(&mut self, seq: u64, hash: &cairn_store::Hash) {
        self.last_seq = Some(seq);
        self.tree.push(seq, hash);
        self.unknown_events += 1;
    }

    /// A file as the engine found it when admitting a call: when it is not what the log
    /// last showed (or the log showed nothing of it), it changed with no record
    /// saying so, and is known from now on at the content found.
    fn apply_observed(&mut self, o: &Observed) {
        let hash = o.hash.map(|h| h.0);
        let known = self.files.get(&o.path).map(|k| k.hash);
        if known == Some(hash) {
            return;
        }
        self.forget_repeats(&o.path, None, known.is_some());
        let k = self.files.entry(o.path.clone()).or_default();
        k.hash = hash;
        if k.read_hash.is_some() && k.read_hash != hash {
            // Changed behind the agent's back, as an external write: read it again.
            k.read_hash = None;
            k.ranges.clear();
            k.total_lines = 0;
        }
    }

    /// Drops the repeat counters whose answer a change to `path` can alter
    /// (`changed`), or, when the file is only seen for the first time, those that name
    /// it (the repeat rule compares what they saw with what the log knows of it, which
    /// was nothing). The counter `own` (the call that saw it) restarts at one instead.
    fn forget_repeats(&mut self, path: &str, own: Option<&str>, changed: bool) {
        let hit = |c: &RepeatCounter| {
            if changed {
                c.depends_on(path)
            } else {
                c.paths.iter().any(|p| p == path)
            }
        };
        self.repeats
            .retain(|key, c| Some(key.as_str()) == own || !hit(c));
        if let Some(c) = own.and_then(|k| self.repeats.get_mut(k))
            && hit(c)
        {
            c.count = 1;
        }
    }

    fn apply_shell(&mut self, x: &ShellExec, ts: &str) {
        if self.repeat_rule == RepeatRule::Facts && x.end().is_some() {
            // A program ended: what it changed is only partly known (a scan records
            // the workspace's files, not ignored ones, nor anything outside).
            self.repeats.clear();
        }
        // Foreground runs leave no trace in the table: their end is in the same call.
        let (ProcKind::Background, Some(id)) = (x.kind, &x.id) else {
            return;
        };
        match &x.phase {
            ShellPhase::Started => {
                self.processes.insert(
                    id.clone(),
                    Process {
                        id: id.clone(),
                        call: x.call.clone(),
                        pid: x.pid,
                        start_time: x.start_time,
                        argv: x.argv.clone(),
                        cwd: x.cwd.clone(),
                        started_at: ts.to_string(),
                        status: ProcessStatus::Running,
                        exit_code: None,
                        signal: None,
                        finished_at: None,
                        log: x.log.clone().unwrap_or_default(),
                    },
                );
            }
            ShellPhase::Finished(end) => {
                let p = self.processes.entry(id.clone()).or_insert_with(|| Process {
                    id: id.clone(),
                    call: x.call.clone(),
                    pid: x.pid,
                    start_time: x.start_time,
                    argv: x.argv.clone(),
                    cwd: x.cwd.clone(),
                    started_at: String::new(),
                    status: ProcessStatus::Ended(end.status),
                    exit_code: None,
                    signal: None,
                    finished_at: None,
                    log: x.log.clone().unwrap_or_default(),
                });
                p.status = ProcessStatus::Ended(end.status);
                p.exit_code = end.exit_code;
                p.signal = end.signal;
                p.finished_at = Some(ts.to_string());
            }
        }
    }

    fn apply_write(&mut self, w: &FileWrite) {
        if w.status != WriteStatus::Ok {
            return;
        }
        if w.unknown {
            // An imported change known only as a diff: nothing is known of the file
            // now, neither its content nor what of it was read.
            self.ws_changes.remove(&w.path);
            self.files.remove(&w.path);
            return;
        }
        let mode = w.mode.or_else(|| {
            self.ws_changes
                .get(&w.path)
                .and_then(|f| f.as_ref().and_then(|f| f.mode))
        });
        self.ws_changes.insert(
            w.path.clone(),
            w.after.map(|a| WsFile {
                hash: a.hash.0,
                len: a.len,
                mode,
            }),
        );
        // Answers about this path, and searches and listings, may differ now.
        match self.repeat_rule {
            RepeatRule::Facts => self.forget_repeats(&w.path, None, true),
            RepeatRule::Counted => self
                .repeats
                .retain(|_, c| !c.paths.is_empty() && !c.paths.iter().any(|p| p == &w.path)),
        }
        let k = self.files.entry(w.path.clone()).or_default();
        match (&w.after, w.op) {
            (None, _) => {
                *k = FileKnowledge::default();
            }
            (Some(after), WriteOp::External) => {
                // Changed behind the agent's back: it must read the file again.
                k.hash = Some(after.hash.0);
                k.read_hash = None;
                k.ranges.clear();
                k.total_lines = w.lines_after;
            }
            (Some(after), WriteOp::Append) => {
                // The agent knows what it added; the rest only if it had read all of it
                // as it was. Otherwise it must read the file before changing it.
                let whole = w
                    .before
                    .is_some_and(|b| k.read_at(&b.hash.0) && k.missing().is_empty());
                k.hash = Some(after.hash.0);
                k.total_lines = w.lines_after;
                if whole {
                    k.read_hash = Some(after.hash.0);
                    k.ranges = if w.lines_after == 0 {
                        Vec::new()
                    } else {
                        vec![(1, w.lines_after)]
                    };
                } else {
                    k.read_hash = None;
                    k.ranges.clear();
                }
            }
            (Some(after), _) => {
                // Writing a file counts as having read all of it.
                k.hash = Some(after.hash.0);
                k.read_hash = Some(after.hash.0);
                k.total_lines = w.lines_after;
                k.ranges = if w.lines_after == 0 {
                    Vec::new()
                } else {
                    vec![(1, w.lines_after)]
                };
            }
        }
    }

    /// Archives the state (rkyv) for a snapshot or a checkpoint hash.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_bytes_sized(0)
    }

    /// [`State::to_bytes`] into a buffer of `capacity` bytes at first (the size of the
    /// last archive, when known): archived in place, not grown by doubling and then
    /// copied. The bytes are the same whatever the buffer (positions in an archive are
    /// relative to its start).
    pub fn to_bytes_sized(&self, capacity: usize) -> Vec<u8> {
        match rkyv::api::high::to_bytes_in::<_, rkyv::rancor::Error>(
            self,
            Vec::with_capacity(capacity),
        ) {
            Ok(b) => b,
            // Serialising plain owned data into memory cannot fail short of allocation.
            Err(e) => panic!("state archive failed: {e}"),
        }
    }

    /// Loads an archived state, validating it; the error says what does not check.
    pub fn from_bytes(bytes: &[u8]) -> Result<State, rkyv::rancor::Error> {
        let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len());
        aligned.extend_from_slice(bytes);
        rkyv::from_bytes::<State, rkyv::rancor::Error>(&aligned)
    }

    /// BLAKE3 of the archived state: what `checkpoint` records.
    pub fn hash(&self) -> cairn_store::Hash {
        State::hash_of(&self.to_bytes())
    }

    /// [`State::hash`] of a state already archived ([`State::to_bytes`]): a recorder
    /// that snapshots the same archive hashes it without archiving again.
    pub fn hash_of(archive: &[u8]) -> cairn_store::Hash {
        cairn_store::Hash::of(archive)
    }
}

/// Inserts a range into a sorted list of disjoint ranges, merging touching ones.
pub fn merge_range(ranges: &mut Vec<(u32, u32)>, (a, b): (u32, u32)) {
    if a > b {
        return;
    }
    let (mut a, mut b) = (a, b);
    let mut out = Vec::with_capacity(ranges.len() + 1);
    let mut placed = false;
    for &(x, y) in ranges.iter() {
        if y.saturating_add(1) < a {
            out.push((x, y));
        } else if b.saturating_add(1) < x {
            if !placed {
                out.push((a, b));
                placed = true;
            }
            out.push((x, y));
        } else {
            a = a.min(x);
            b = b.max(y);
        }
    }
    if !placed {
        out.push((a, b));
    }
    out.sort_unstable();
    *ranges = out;
}

/// The key of the repeated-call counter: tool and canonical input. The canonical text
/// is written with no sorted copy of the input: the call path makes this key three
/// times a call (the engine's two checks and the fold).
pub fn repeat_key(tool: &str, input: &serde_json::Value) -> String {
    thread_local! {
        /// The last key made on this thread, with its tool and input: a call asks for
        /// its key three times (the engine's two checks, then the fold).
        static LAST: std::cell::RefCell<Option<(String, serde_json::Value, String)>> =
            const { std::cell::RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| {
        if let Some((t, i, key)) = last.as_ref()
            && t == tool
            && same_json(i, input)
        {
            return key.clone();
        }
        let key = repeat_key_of(tool, input);
        *last = Some((tool.to_string(), input.clone(), key.clone()));
        key
    })
}

/// Whether `a` and `b` have the same canonical text: equal, with every number of the
/// same kind and bits (`0.0 == -0.0` as numbers, but not as text), objects in any order.
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            _ if x.is_f64() != y.is_f64() => false,
            (Some(f), Some(g)) if x.is_f64() => f.to_bits() == g.to_bits(),
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// [`repeat_key`], made.
fn repeat_key_of(tool: &str, input: &serde_json::Value) -> String {
    // Written whole, then hashed once: the serializer's many small writes would each be
    // a call into the hasher.
    let mut canonical = Vec::with_capacity(256);
    serde_json::to_writer(&mut canonical, &Canonical(input))
        .unwrap_or_else(|e| panic!("a JSON value always serializes: {e}"));
    let hex = cairn_store::Hash::of(&canonical).to_hex();
    let mut key = String::with_capacity(tool.len() + 33);
    key.push_str(tool);
    key.push(':');
    key.push_str(&hex[..32]);
    key
}

/// JSON with object keys sorted at every level: equal values give equal text.
pub fn canonical_json(v: &serde_json::Value) -> String {
    serde_json::to_string(&Canonical(v))
        .unwrap_or_else(|e| panic!("a JSON value always serializes: {e}"))
}

/// A value serialized as [`canonical_json`] writes it: the keys of every object in byte
/// order, the rest as `serde_json` writes it.
struct Canonical<'a>(&'a serde_json::Value);

impl serde::Serialize for Canonical<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            serde_json::Value::Object(m) => {
                let mut entries: Vec<(&String, &serde_json::Value)> = m.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                let mut map = ser.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, &Canonical(v))?;
                }
                map.end()
            }
            serde_json::Value::Array(a) => {
                let mut seq = ser.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(&Canonical(v))?;
                }
                seq.end()
            }
            other => other.serialize(ser),
        }
    }
}

/// The workspace paths a call's input names (`path`, and `path` of each patch), spelt as
/// the tools record them: an absolute path inside `workspace` made relative, `.` and
/// `..` applied (no I/O, so a symlink in the path is not followed).
pub fn named_paths(input: &serde_json::Value, workspace: Option<&str>) -> Vec<String> {
    let rel = |p: &str| {
        let inside = workspace.and_then(|w| std::path::Path::new(p).strip_prefix(w).ok());
        match inside.and_then(|r| r.to_str()) {
            Some(r) => normalise_rel(r),
            None => normalise_rel(p),
        }
    };
    let mut out = Vec::new();
    if let Some(p) = input.get("path").and_then(|p| p.as_str()) {
        out.push(rel(p));
    }
    if let Some(patches) = input.get("patches").and_then(|p| p.as_array()) {
        for p in patches {
            if let Some(p) = p.get("path").and_then(|p| p.as_str()) {
                out.push(rel(p));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A relative path with `.` segments and duplicate slashes removed and `..` applied
/// (no I/O). A path that climbs out with `..` is kept as given: it names no file of the
/// workspace.
/// What a path recorded in a log (a manifest entry, a `file_write`) names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordedPath {
    /// A workspace path: relative, `/`-separated, normalised.
    Workspace,
    /// An absolute, normalised path: a file outside the workspace a call was allowed
    /// to write (`<tool>@<folder>`). Never part of a workspace a checkout writes.
    Outside,
    /// Neither: what is wrong with it. A log holding one was forged or damaged, and
    /// nothing may be written from it.
    Bad(&'static str),
}

/// Classifies a path read from a log. Every path a checkout, fork or replay writes is
/// checked with this first: a log is data, and its paths must not climb out of the
/// folder they are written into.
pub fn recorded_path(path: &str) -> RecordedPath {
    if path.is_empty() {
        return RecordedPath::Bad("the path is empty");
    }
    if path.chars().any(char::is_control) {
        return RecordedPath::Bad("the path holds a NUL or control character");
    }
    let (outside, rest) = match path.strip_prefix('/') {
        Some(rest) => (true, rest),
        None => (false, path),
    };
    for part in rest.split('/') {
        match part {
            ".." => return RecordedPath::Bad("the path climbs with `..`"),
            "." | "" => {
                return RecordedPath::Bad("the path is not normalised (an empty or `.` component)");
            }
            _ => {}
        }
    }
    if outside {
        RecordedPath::Outside
    } else {
        RecordedPath::Workspace
    }
}

pub fn normalise_rel(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for s in p.split('/') {
        match s {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return p.to_string();
                }
            }
            s => parts.push(s),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_paths_are_workspace_outside_or_bad() {
        use RecordedPath::*;
        for (path, class) in [
            ("a.txt", Workspace),
            ("src/lib.rs", Workspace),
            (".env", Workspace),
            ("a..b/c", Workspace),
            ("dir/...", Workspace),
            ("/etc/x", Outside),
            ("/tmp/a/b.txt", Outside),
            ("", Bad("the path is empty")),
            ("../x", Bad("the path climbs with `..`")),
            ("a/../../x", Bad("the path climbs with `..`")),
            ("/tmp/../etc/x", Bad("the path climbs with `..`")),
            (
                "./a",
                Bad("the path is not normalised (an empty or `.` component)"),
            ),
            (
                "a//b",
                Bad("the path is not normalised (an empty or `.` component)"),
            ),
            (
                "a/",
                Bad("the path is not normalised (an empty or `.` component)"),
            ),
            (
                "/",
                Bad("the path is not normalised (an empty or `.` component)"),
            ),
            (
                "//etc/x",
                Bad("the path is not normalised (an empty or `.` component)"),
            ),
            ("a\0b", Bad("the path holds a NUL or control character")),
            ("a\nb", Bad("the path holds a NUL or control character")),
            (
                "a\u{1b}[31m",
                Bad("the path holds a NUL or control character"),
            ),
            ("a\u{7f}", Bad("the path holds a NUL or control character")),
        ] {
            assert_eq!(recorded_path(path), class, "{path:?}");
        }
    }

    #[test]
    fn merge_range_joins_touching_and_overlapping() {
        let mut r = Vec::new();
        for x in [(5, 7), (1, 2), (3, 4), (10, 12), (6, 11)] {
            merge_range(&mut r, x);
        }
        assert_eq!(r, vec![(1, 12)]);
        let mut r = vec![(1, 2), (8, 9)];
        merge_range(&mut r, (4, 5));
        assert_eq!(r, vec![(1, 2), (4, 5), (8, 9)]);
    }

    #[test]
    fn missing_lists_the_gaps() {
        let k = FileKnowledge {
            ranges: vec![(2, 3), (6, 6)],
            total_lines: 8,
            ..Default::default()
        };
        assert_eq!(k.missing(), vec![(1, 1), (4, 5), (7, 8)]);
    }

    fn counter(paths: &[&str]) -> RepeatCounter {
        RepeatCounter {
            count: 1,
            paths: paths.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn a_counter_depends_on_its_files_and_on_everything_under_its_folders() {
        let cases = [
            (counter(&["a.txt"]), "a.txt", true),
            (counter(&["a.txt"]), "b.txt", false),
            (counter(&["src"]), "src/a.rs", true),
            (counter(&["src"]), "src/deep/a.rs", true),
            (counter(&["src"]), "srcs/a.rs", false),
            (counter(&["src"]), "sr", false),
            (counter(&[""]), "any/thing", true),
            (counter(&[]), "any/thing", true),
        ];
        for (c, path, want) in cases {
            assert_eq!(c.depends_on(path), want, "{:?} {path}", c.paths);
        }
    }

    /// The counters left after folding `events` into a state holding `before`.
    fn counters_after(
        before: &[(&str, &[&str])],
        known: &[(&str, [u8; 32])],
        event: Event,
    ) -> Vec<String> {
        let mut s = State::default();
        for (key, paths) in before {
            s.repeats.insert(key.to_string(), counter(paths));
        }
        for (path, hash) in known {
            s.files.insert(
                path.to_string(),
                FileKnowledge {
                    hash: Some(*hash),
                    ..Default::default()
                },
            );
        }
        s.apply(&Record {
            seq: 0,
            ts: String::new(),
            hash: cairn_store::Hash::ZERO,
            event,
        });
        s.repeats.keys().cloned().collect()
    }

    /// The archive made in a buffer of any first size is rkyv's own, byte for byte: a
    /// checkpoint's hash does not depend on how the recorder sized its buffer.
    #[test]
    fn a_state_archived_into_a_buffer_of_any_size_is_rkyv_s_own_archive() {
        let mut s = State::default();
        for i in 0..300u32 {
            s.repeats.insert(
                format!("read_file:{i:032}"),
                counter(&[&format!("f{i}.rs")]),
            );
            s.files.insert(
                format!("src/f{i}.rs"),
                FileKnowledge {
                    hash: Some([u8::try_from(i % 251).unwrap(); 32]),
                    total_lines: i,
                    ..Default::default()
                },
            );
        }
        for state in [State::default(), s] {
            let own = rkyv::to_bytes::<rkyv::rancor::Error>(&state)
                .unwrap()
                .to_vec();
            assert!(!own.is_empty());
            for capacity in [
                0,
                1,
                7,
                own.len() - 1,
                own.len(),
                own.len() + 1,
                2 * own.len(),
            ] {
                assert_eq!(state.to_bytes_sized(capacity), own, "capacity {capacity}");
            }
            assert_eq!(state.to_bytes(), own);
            assert_eq!(State::from_bytes(&own).unwrap(), state);
        }
    }

    #[test]
    fn what_clears_repeat_counters() {
        let before: &[(&str, &[&str])] = &[
            ("read_a", &["a.txt"]),
            ("read_b", &["b.txt"]),
            ("grep_src", &["src"]),
            ("grep_all", &[]),
        ];
        let h = |n: u8| cairn_store::Hash::of(&[n]);
        let read = |path: &str, hash| {
            Event::FileRead(crate::event::FileRead {
                call: "c9".into(),
                path: path.into(),
                ranges: vec![(1, 1)],
                total_lines: 1,
                hash,
            })
        };
        let write = |path: &str| {
            Event::FileWrite(FileWrite {
                call: None,
                op: WriteOp::External,
                path: path.into(),
                before: None,
                after: None,
                lines_after: 0,
                mode: None,
                status: WriteStatus::Ok,
                withheld: false,
                unknown: false,
                diff: None,
            })
        };
        let keys = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // A write: the counters that depend on the file.
        assert_eq!(
            counters_after(before, &[], write("src/x.rs")),
            keys(&["read_a", "read_b"])
        );
        assert_eq!(
            counters_after(before, &[], write("a.txt")),
            keys(&["grep_src", "read_b"])
        );
        // A read at the content the log knows: nothing.
        let known = [("a.txt", h(1).0)];
        assert_eq!(
            counters_after(before, &known, read("a.txt", h(1))),
            keys(&["grep_all", "grep_src", "read_a", "read_b"])
        );
        // A read at other content: changed with no record, as a write.
        assert_eq!(
            counters_after(before, &known, read("a.txt", h(2))),
            keys(&["grep_src", "read_b"])
        );
        // A first read: only the counters naming the file compared it with nothing.
        assert_eq!(
            counters_after(before, &[], read("a.txt", h(1))),
            keys(&["grep_all", "grep_src", "read_b"])
        );
        // A command that ends: all of them.
        let end = Event::ShellExec(ShellExec {
            call: "c9".into(),
            id: None,
            argv: vec!["true".into()],
            argv_hash: None,
            cwd: String::new(),
            pid: Some(7),
            start_time: Some(1),
            kind: ProcKind::Foreground,
            timeout_ms: None,
            log: None,
            sandbox: None,
            phase: ShellPhase::Finished(crate::event::ShellEnd::new(ExecStatus::Ok)),
        });
        assert_eq!(counters_after(before, &known, end), Vec::<String>::new());
    }

    /// Numbers equal as numbers but written differently, and objects in another order.
    #[test]
    fn a_kept_repeat_key_tells_numbers_by_their_text() {
        let pairs = [
            (r#"{"x":0.0}"#, r#"{"x":-0.0}"#, false),
            (r#"{"x":1}"#, r#"{"x":1.0}"#, false),
            (r#"{"x":-1}"#, r#"{"x":-1.0}"#, false),
            (
                r#"{"x":18446744073709551615}"#,
                r#"{"x":1.8446744073709552e19}"#,
                false,
            ),
            (
                r#"{"a":1,"b":[2,{"c":3}]}"#,
                r#"{"b":[2,{"c":3}],"a":1}"#,
                true,
            ),
            (r#"[1,2]"#, r#"[2,1]"#, false),
            (r#"{"a":null}"#, r#"{"b":null}"#, false),
        ];
        for (a, b, same) in pairs {
            let (a, b): (serde_json::Value, serde_json::Value) = (
                serde_json::from_str(a).unwrap(),
                serde_json::from_str(b).unwrap(),
            );
            assert_eq!(same_json(&a, &b), same, "{a} {b}");
            assert_eq!(same, canonical_json(&a) == canonical_json(&b), "{a} {b}");
            assert_eq!(repeat_key("t", &a), repeat_key_of("t", &a));
            assert_eq!(repeat_key("t", &b), repeat_key_of("t", &b), "{b} after {a}");
        }
    }

    #[test]
    fn canonical_json_ignores_key_order() {
        let a: serde_json::Value = serde_json::from_str(r#"{"b":1,"a":{"y":2,"x":3}}"#).unwrap();
        let b: serde_json::Value = serde_json::from_str(r#"{"a":{"x":3,"y":2},"b":1}"#).unwrap();
        assert_eq!(repeat_key("t", &a), repeat_key("t", &b));
    }

    /// The canonical text as it was first made: a sorted copy of the value, then its
    /// text. Repeat keys are kept in snapshots and hashed into checkpoints, so the
    /// streaming writer must give exactly these bytes.
    fn canonical_by_copy(v: &serde_json::Value) -> String {
        fn sort(v: &serde_json::Value) -> serde_json::Value {
            match v {
                serde_json::Value::Object(m) => {
                    let mut keys: Vec<_> = m.keys().collect();
                    keys.sort();
                    let mut out = serde_json::Map::new();
                    for k in keys {
                        out.insert(k.clone(), sort(&m[k]));
                    }
                    serde_json::Value::Object(out)
                }
                serde_json::Value::Array(a) => {
                    serde_json::Value::Array(a.iter().map(sort).collect())
                }
                other => other.clone(),
            }
        }
        sort(v).to_string()
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(|n| serde_json::json!(n)),
            any::<u64>().prop_map(|n| serde_json::json!(n)),
            (-1e12f64..1e12).prop_map(|f| serde_json::json!(f)),
            r#"[a-zA-Z\\"\x00-\x1f\x7f-\u{10ffff} ]{0,8}"#.prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                proptest::collection::vec((r#"[a-zA-Zé_"\\\x01]{0,5}"#, inner), 0..6)
                    .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// The key kept from the last call is given only for an input of the same
        /// canonical text: the keys asked in turn for any two inputs are the keys made.
        #[test]
        fn a_kept_repeat_key_is_the_key_made(a in json_value(), b in json_value()) {
            for (x, y) in [(&a, &b), (&a, &a), (&b, &a)] {
                proptest::prop_assert_eq!(repeat_key("t", x), repeat_key_of("t", x));
                proptest::prop_assert_eq!(repeat_key("t", y), repeat_key_of("t", y));
                proptest::prop_assert_eq!(
                    same_json(x, y),
                    canonical_json(x) == canonical_json(y)
                );
            }
            proptest::prop_assert_eq!(repeat_key("u", &a), repeat_key_of("u", &a));
        }

        #[test]
        fn canonical_json_is_the_sorted_copy_s_text(v in json_value()) {
            let want = canonical_by_copy(&v);
            proptest::prop_assert_eq!(canonical_json(&v), want.clone());
            let key = format!("t:{}", cairn_store::Hash::of(want.as_bytes()).short(32));
            proptest::prop_assert_eq!(repeat_key("t", &v), key);
        }
    }

    #[test]
    fn repeat_keys_keep_their_bytes() {
        let input = serde_json::json!({"path": "small.rs", "start_line": 3, "end_line": 12,
            "nested": {"b": [1, 2.5, null, "x\u{1}y"], "a": true}});
        assert_eq!(
            canonical_json(&input),
            r#"{"end_line":12,"nested":{"a":true,"b":[1,2.5,null,"x\u0001y"]},"path":"small.rs","start_line":3}"#
        );
        assert_eq!(
            repeat_key("read_file_range", &input),
            format!(
                "read_file_range:{}",
                cairn_store::Hash::of(canonical_json(&input).as_bytes()).short(32)
            )
        );
    }
}
