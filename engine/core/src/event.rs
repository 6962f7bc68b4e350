//! The events of a session: one `type`-tagged JSON object per record. Variants and
//! fields are only ever added (new fields are optional), so every cairn reads every
//! older log; a record whose type this version does not know is reported, not fatal.

use cairn_store::{BlobRef, Hash};
use serde::{Deserialize, Serialize};

/// The version of the event format written in `session_started`.
pub const FORMAT_VERSION: u32 = 1;

/// Which server and original tool an MCP call went to (on `tool_started`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpRef {
    pub server: String,
    pub tool: String,
}

/// One event of a session log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    SessionStarted(SessionStarted),
    UserMessage {
        text: String,
        /// The keyed hash of the text as given (`hmac-sha256:<hex>`, see
        /// `scrub::text_hash`), when redaction changed it: a script's step is matched
        /// with the recorded message by it, and a different secret is told apart
        /// (`resume --script`). Absent when nothing was redacted and in older logs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text_hash: Option<String>,
        /// When the source said this happened (RFC 3339), for an imported session: the
        /// log's `ts` is when the import wrote the record. Absent for cairn's own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<String>,
    },
    ModelTurn {
        provider: String,
        model: String,
        text: String,
        #[serde(default)]
        tool_calls: Vec<serde_json::Value>,
        /// Tokens the turn used, as the provider counted them: `input_tokens` (every
        /// input token, those read from or written to a prompt cache included),
        /// `output_tokens`, and when not 0 `cached_tokens` (the part of the input read
        /// from the cache) and `cache_write_tokens` (written to it). Imported sessions
        /// count the same fields from their source's own object, kept in `source`.
        /// Absent when the provider gave none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<serde_json::Value>,
        /// True when the person watching interrupted the turn (Esc in the chat) while
        /// it streamed: `text` is what the model had sent by then, the rest of its
        /// answer and its tool calls were dropped (its request closed). Absent when
        /// false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        interrupted: bool,
        /// When the source said this happened (RFC 3339), for an imported session: the
        /// log's `ts` is when the import wrote the record. Absent for cairn's own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<String>,
    },
    /// The person switched the model the next turns ask (`/model NAME` in the chat):
    /// the provider stays, `model` answers from here on, `previous` did until now.
    ModelSwitched {
        provider: String,
        model: String,
        previous: String,
    },
    ToolStarted {
        call: String,
        tool: String,
        /// The input as given (redacted), after validation.
        input: serde_json::Value,
        /// The keyed hash of the input as given (`hmac-sha256:<hex>` of its canonical
        /// JSON, see `scrub::input_hash`), when redaction changed it: a script's step
        /// is matched with the recorded call by it. Absent when nothing was redacted
        /// and in older logs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input_hash: Option<String>,
        /// For a tool of an MCP server: the server and the tool's own name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mcp: Option<McpRef>,
        /// The file the call's answer depends on, as it was when the call was
        /// admitted: recorded when the repeat rule needed it (see
        /// `decide::repeat`), so that verify decides on the same fact.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        observed: Option<Observed>,
        /// When the source said this happened (RFC 3339), for an imported session: the
        /// log's `ts` is when the import wrote the record. Absent for cairn's own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<String>,
    },
    PermissionRequested {
        call: String,
        key: String,
        /// Exactly what is being allowed: the command line, the host, the change.
        detail: String,
        #[serde(default)]
        tool: String,
        /// A guarded pattern matched: asked even though the key may be allowed.
        #[serde(default)]
        guarded: bool,
        /// Every key an "always" answer grants and the allow list must hold to cover
        /// the call: `shell:<program>` of each program of a command line. Empty in logs
        /// written before lines were parsed: then it is `[key]`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        keys: Vec<String>,
        /// Why no "always" can cover the call (a command substitution, a nested shell,
        /// …): it asks every time and an "always" answer grants nothing.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        reasons: Vec<String>,
        /// The names of the guarded commands the line matched (`git push --force`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        guards: Vec<String>,
    },
    PermissionDecided {
        call: String,
        key: String,
        answer: Answer,
        source: AnswerSource,
        /// The keys an "always" answer added to the allow list: the question's keys,
        /// or none when no "always" could cover it. Absent in logs written before
        /// lines were parsed: then an "always" grants `key`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grants: Option<Vec<String>>,
    },
    FileRead(FileRead),
    FileWrite(FileWrite),
    ShellExec(ShellExec),
    MemoryWritten {
        text: String,
    },
    ToolFinished(ToolFinished),
    /// A page fetched for a call (read_url, web_fetch, web_search's extraction): what
    /// replay answers from.
    WebFetched(WebFetched),
    Checkpoint {
        /// BLAKE3 of the folded state after the record before this one.
        state_hash: Hash,
        /// The seq the state was folded up to.
        at_seq: u64,
    },
    /// The head of the log's Merkle tree (RFC 6962, see `cairn_tlog::tree`) over the
    /// records before this one, and the checkpoint note of it, signed when the home
    /// holds a key.
    TreeCheckpoint {
        /// The number of records covered: every record before this one.
        size: u64,
        /// The tree's root (SHA-256, hex).
        root: String,
        /// The log's origin line: `cairn.local/<project key>/<session id>`.
        origin: String,
        /// The checkpoint as a C2SP signed note; absent when no key signed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    SessionResumed {
        previous_head: Hash,
        #[serde(default)]
        findings: Vec<serde_json::Value>,
        /// The script step this resume goes on with, when its last call was
        /// interrupted while it could run commands (its effect is unknown), and
        /// whether it runs again: see [`InterruptedStep`]. Empty when the resume goes
        /// on with no script, or the script's next step is not such a step.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        interrupted_steps: Vec<InterruptedStep>,
        /// The sandbox commands run under from here on (a new temporary folder, the
        /// mode the resume was given); none in logs from before the sandbox.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<Sandboxed>,
        /// For an imported session: the source file read again because it grew (a
        /// live session); the records after this one import its new part.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        imported: Option<ImportedFile>,
    },
    /// A line of an imported source kept as it is (imported sessions only): what
    /// cairn has no event for (a Codex turn context or compaction, a Claude Code
    /// summary, compact boundary or file snapshot, reasoning) and, with `unknown`,
    /// lines of a type this version does not map.
    SourceItem {
        /// The line's type in its source (`turn_context`, `event_msg:agent_reasoning`…).
        kind: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unknown: bool,
        /// The line's JSON, redacted, as a blob.
        item: BlobRef,
    },
    SessionEnded {
        /// Why: `script finished`, `answered`, `signal: SIGTERM`, `provider failed: …`
        reason: String,
        /// True when the session ended because something it could not go on without
        /// failed (the model provider, after its retries); `reason` says what and why.
        /// Absent when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        failed: bool,
        /// Processes that had left their command's process group (`setsid`, a double
        /// fork) and were still this session's at its end: killed and reaped.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        orphans: Vec<Orphan>,
        /// For an imported session: how far this pass of the import read its source
        /// file (what a later import of the same file continues from).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        imported: Option<ImportProgress>,
        /// When the source's last line was written (RFC 3339), for an imported session: the
        /// log's `ts` is when the import wrote the record. Absent for cairn's own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<String>,
    },
}

/// A process found at a session's end that had escaped its command's process group,
/// so that stopping the command did not stop it (cairn is the child subreaper of its
/// sessions: such a process is reparented to it when its parent dies). It is killed
/// (SIGTERM, the kill grace, SIGKILL: its own group when it leads one) and reaped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Orphan {
    pub pid: u32,
    /// Its command line (`/proc/<pid>/cmdline`); `[name]` for one that had already
    /// exited, whose command line is gone.
    pub argv: Vec<String>,
    /// How it ended, as for a command: an exit code or the signal that killed it
    /// (neither when it could not be reaped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

impl Event {
    /// When the source said this happened, for an event of an imported session that
    /// carries it (`at`): see [`crate::state::Record::time`].
    pub fn at(&self) -> Option<&str> {
        match self {
            Event::SessionStarted(s) => s.imported.as_ref()?.started_at.as_deref(),
            Event::UserMessage { at, .. }
            | Event::ModelTurn { at, .. }
            | Event::ToolStarted { at, .. }
            | Event::SessionEnded { at, .. }
            | Event::ToolFinished(ToolFinished { at, .. }) => at.as_deref(),
            _ => None,
        }
    }

    /// The `type` tag of this event.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::SessionStarted(_) => "session_started",
            Event::UserMessage { .. } => "user_message",
            Event::ModelTurn { .. } => "model_turn",
            Event::ModelSwitched { .. } => "model_switched",
            Event::ToolStarted { .. } => "tool_started",
            Event::PermissionRequested { .. } => "permission_requested",
            Event::PermissionDecided { .. } => "permission_decided",
            Event::FileRead(_) => "file_read",
            Event::FileWrite(_) => "file_write",
            Event::ShellExec(_) => "shell_exec",
            Event::MemoryWritten { .. } => "memory_written",
            Event::ToolFinished(_) => "tool_finished",
            Event::WebFetched(_) => "web_fetched",
            Event::Checkpoint { .. } => "checkpoint",
            Event::TreeCheckpoint { .. } => "tree_checkpoint",
            Event::SessionResumed { .. } => "session_resumed",
            Event::SessionEnded { .. } => "session_ended",
            Event::SourceItem { .. } => "source_item",
        }
    }

    /// Every event type this version knows.
    pub const KINDS: &'static [&'static str] = &[
        "session_started",
        "user_message",
        "model_turn",
        "model_switched",
        "tool_started",
        "permission_requested",
        "permission_decided",
        "file_read",
        "file_write",
        "shell_exec",
        "memory_written",
        "tool_finished",
        "web_fetched",
        "checkpoint",
        "tree_checkpoint",
        "session_resumed",
        "session_ended",
        "source_item",
    ];
}

/// A script step whose call was interrupted while it could run commands (a tool whose
/// effects say `runs_commands`), so that what it did is unknown, and what the resume
/// that goes on with the script decided about it. It is recorded in that resume's
/// `session_resumed`, after the call's `tool_finished` (status `interrupted`):
///
/// - `rerun: false`: the step is not run again; for this resume and every later one
///   it counts as done, and the script goes on with the step after it;
/// - `rerun: true`: the step runs again, as a new call right after the
///   `session_resumed`.
///
/// A step whose interrupted call only read, or wrote with a known before and after,
/// is not listed: its outcome was decided from the disk, and it runs again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InterruptedStep {
    /// The interrupted call.
    pub call: String,
    /// The script step it ran, from 1 (user messages count as steps).
    pub step: u32,
    pub tool: String,
    /// Whether the step runs again.
    pub rerun: bool,
    pub decided_by: RerunSource,
}

impl InterruptedStep {
    /// What was decided, in a few words: `not run again (unattended)`.
    pub fn decision(&self) -> String {
        format!(
            "{} ({})",
            if self.rerun {
                "run again"
            } else {
                "not run again"
            },
            self.decided_by.as_str()
        )
    }
}

/// Who decided whether an interrupted step runs again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RerunSource {
    /// The user answered the question.
    User,
    /// The resume was asked up front to run interrupted steps again.
    Requested,
    /// There was nobody to ask: the step is not run again.
    Unattended,
}

impl RerunSource {
    pub fn as_str(&self) -> &'static str {
        match self {
            RerunSource::User => "user",
            RerunSource::Requested => "requested",
            RerunSource::Unattended => "unattended",
        }
    }
}

/// The first record of every session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionStarted {
    pub id: String,
    pub format_version: u32,
    pub engine_version: String,
    /// The workspace root, absolute.
    pub workspace: String,
    /// The catalog profile (`thndrs` or `thoth`).
    pub catalog: String,
    /// The tool names offered, in order.
    pub tools: Vec<String>,
    /// The workspace manifest (JSON Lines of path, size, mode, hash) as a blob.
    pub manifest: BlobRef,
    pub manifest_files: u64,
    pub config: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Parent>,
    /// The project's allow list when the session started.
    #[serde(default)]
    pub allow: Vec<String>,
    /// For a fork: what the session knew at the fork point, so that this log folds
    /// to the parent's knowledge by itself (read coverage, memory, conversation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherited: Option<Inherited>,
    /// The sandbox commands run under (none in logs from before the sandbox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Sandboxed>,
    /// A session imported from another agent's files: none of its calls ran here, so
    /// verify checks its chain, structure and blobs, never the engine's rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<Box<Imported>>,
    /// A session recorded live from another agent's hooks or through `mcp proxy`:
    /// which agent, which version, and how cairn saw its calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<Box<Agent>>,
}

/// The agent a session was recorded from as it ran (on `session_started`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Agent {
    /// The agent: `claude` (Claude Code), `codex` (Codex CLI), or an MCP client's
    /// `clientInfo.name`.
    pub name: String,
    /// Its version, when it says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// How cairn saw its calls: `hook` (the agent ran them and told cairn before and
    /// after each, so their effects are what the agent reported and what cairn read
    /// from disk) or `proxy` (they passed through cairn on their way to an MCP server).
    pub via: String,
    /// The agent's own id of the session, when it has one (Claude Code's `session_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
}

/// Where an imported session comes from (on `session_started`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Imported {
    /// The agent that wrote it: `codex` or `claude`.
    pub agent: String,
    /// Its version, as its file records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// The source session's own id.
    pub source_id: String,
    /// What part of the source this session is: `main`, `fork` (another branch of a
    /// Claude Code conversation), `sidechain` or `subagent`.
    pub branch: String,
    /// The source file as it was read (a rotated Codex rollout's later segments, and
    /// the part a file grew by, come as continuations: `session_resumed.imported`).
    pub file: ImportedFile,
    /// When the source session started, as it records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
}

/// One source file of an import.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImportedFile {
    /// Absolute path when it was read.
    pub path: String,
    /// BLAKE3 of the file's bytes (compressed, for a `.zst` file), and their number.
    pub hash: Hash,
    pub bytes: u64,
    /// The file's bytes, kept only when asked (they hold the source's secrets raw):
    /// deep verify checks that this blob still hashes to `hash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original: Option<BlobRef>,
}

/// How far one pass of an import read its source (on the `session_ended` closing it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImportProgress {
    /// Bytes of content (decompressed) imported: up to the end of the last complete
    /// line; a later import goes on from here when the first `read_to` bytes still
    /// hash to `read_hash`.
    pub read_to: u64,
    /// BLAKE3 of the content's first `read_to` bytes.
    pub read_hash: Hash,
    /// Lines read in this pass, lines that were not JSON or cut short (warnings), and
    /// lines of a type this version does not map (kept as blobs).
    pub lines: u64,
    pub warnings: u64,
    pub unknown: u64,
    /// Secrets the source held in the lines read, by kind: redacted in what this
    /// session stores.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub secrets: std::collections::BTreeMap<String, u64>,
}

/// What a forked session inherits from its parent's fold at the fork point.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Inherited {
    /// Read coverage of each file the parent knew.
    #[serde(default)]
    pub files: Vec<InheritedFile>,
    #[serde(default)]
    pub memory: Vec<String>,
    /// The conversation entries, each a `state::ConversationEntry` as one JSON object
    /// in a string (see `ConversationEntry::to_json`).
    #[serde(default)]
    pub conversation: Vec<String>,
}

/// One file's knowledge carried into a fork.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InheritedFile {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<Hash>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_hash: Option<Hash>,
    #[serde(default)]
    pub ranges: Vec<(u32, u32)>,
    #[serde(default)]
    pub total_lines: u32,
}

/// Where a forked or replayed session comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Parent {
    pub session: String,
    pub seq: u64,
    pub hash: Hash,
}

/// What one file held when a call was admitted: the fact the repeat rule decides on
/// for a call whose answer depends on that file alone (it names one path, and the path
/// is not a folder).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Observed {
    /// Workspace-relative, `/`-separated, as the fold counts the call's path.
    pub path: String,
    /// BLAKE3 of its content; `None` when it is not a regular file (missing, say).
    pub hash: Option<Hash>,
}

/// A permission answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Once,
    Always,
    Deny,
}

/// Who answered a permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnswerSource {
    User,
    AllowList,
    Policy,
}

/// Lines of a file the agent saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileRead {
    pub call: String,
    /// Workspace-relative, `/`-separated.
    pub path: String,
    /// 1-based inclusive line ranges returned to the model.
    pub ranges: Vec<(u32, u32)>,
    pub total_lines: u32,
    /// BLAKE3 of the file's content when it was read.
    pub hash: Hash,
}

/// How a file was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriteOp {
    Create,
    Replace,
    Edit,
    Delete,
    /// A change made outside cairn's file tools (a shell command), found by a scan.
    External,
    /// Content added at the end of an existing file (thoth's `write_file` with
    /// `append`): it changes no line already there, so it needs no read.
    Append,
}

/// A change to a file of the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileWrite {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    pub op: WriteOp,
    pub path: String,
    /// Content before (none when the file did not exist).
    pub before: Option<BlobRef>,
    /// Content after (none when the file was deleted).
    pub after: Option<BlobRef>,
    /// Line count after the write.
    #[serde(default)]
    pub lines_after: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    pub status: WriteStatus,
    /// A credential file (the session's `credential_files`): `before` and `after` are
    /// its hash and length only; its content is not in the blob store.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub withheld: bool,
    /// An imported change whose content after is not known (the source gave a diff
    /// only): `after` is none, and the file is unknown from here until a write with
    /// content. Never set by the engine.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unknown: bool,
    /// An imported change as the source recorded it (a unified diff), as a blob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<BlobRef>,
}

/// Whether a write was installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriteStatus {
    /// Recorded before the install: the write may or may not have happened.
    Intent,
    Ok,
    Failed,
}

/// How a call ended.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Error,
    Denied,
    Blocked,
    Timeout,
    Cancelled,
    Interrupted,
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Denied => "denied",
            Status::Blocked => "blocked",
            Status::Timeout => "timeout",
            Status::Cancelled => "cancelled",
            Status::Interrupted => "interrupted",
        }
    }
}

/// A rule that refused a call, with the facts it decided on, so that the decision can
/// be recomputed from the fold and this record alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Refusal {
    pub rule: Rule,
    pub path: Option<String>,
    /// The file's hash observed when deciding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<Hash>,
}

/// The rules that can refuse a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// An edit of a file not read at its current content.
    ReadBeforeEdit,
    /// An overwrite without every line read.
    ReadBeforeOverwrite,
    /// `expected_before_hash` differs from the file.
    StaleWrite,
    /// The same call a third time with nothing changed.
    Repeat,
    /// A path outside the workspace.
    Confinement,
    /// The input did not match the tool's schema.
    Input,
    /// A `remember` whose text overlaps what a fetch or search returned this session.
    WebToMemory,
}

/// One fetch of a web page (or of a search backend's answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WebFetched {
    pub call: String,
    /// The URL asked for.
    pub url: String,
    /// The URL the answer came from, after redirects (none when refused before any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_url: Option<String>,
    /// Every URL redirected to, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redirects: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Bytes of the body read.
    #[serde(default)]
    pub bytes: u64,
    /// BLAKE3 of the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<Hash>,
    /// The readable text given to the model, as a blob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<BlobRef>,
    /// Why the fetch was refused or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The end of a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolFinished {
    pub call: String,
    pub status: Status,
    /// What the model was given (capped).
    pub output: String,
    /// The whole output, when the cap cut it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_blob: Option<BlobRef>,
    pub elapsed_us: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
    /// Secrets redacted from the input and output, by kind.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub redactions: std::collections::BTreeMap<String, u32>,
    /// For an MCP call that got a result: the server's raw `tools/call` result
    /// (redacted, as JSON), which replay answers the call with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_result: Option<BlobRef>,
    /// The phrases by which what the model was shown reads like an instruction aimed at
    /// it (prompt injection, `decide::injection`); the output then ends with
    /// `decide::INJECTION_NOTE`. Absent in older logs and when there were none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub injection: Vec<String>,
    /// When the source said this happened (RFC 3339), for an imported session: the
    /// log's `ts` is when the import wrote the record. Absent for cairn's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

/// How shell commands are confined (the OS sandbox of cairn-tools `sandbox`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Writes only in the workspace, the session's temporary folder and the configured
    /// roots; the network is allowed.
    #[default]
    WorkspaceWrite,
    /// As `workspace-write`, and the network is cut: TCP `bind`/`connect` refused by
    /// Landlock, every socket but a Unix one refused by a seccomp filter.
    Strict,
    /// No sandbox: commands run with the engine's own rights.
    Off,
}

impl SandboxMode {
    /// The mode sessions recorded before there was a sandbox ran with.
    pub fn before_sandbox() -> SandboxMode {
        SandboxMode::Off
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::Strict => "strict",
            SandboxMode::Off => "off",
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl std::str::FromStr for SandboxMode {
    type Err = cairn_store::ParseNameError;
    fn from_str(s: &str) -> Result<SandboxMode, cairn_store::ParseNameError> {
        match s {
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "strict" => Ok(SandboxMode::Strict),
            "off" => Ok(SandboxMode::Off),
            _ => Err(cairn_store::ParseNameError {
                what: "sandbox mode",
                name: s.to_string(),
                expected: &["workspace-write", "strict", "off"],
            }),
        }
    }
}

/// How much of a sandbox's ruleset the kernel enforced (Landlock's `RulesetStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// Every rule asked for.
    Full,
    /// Some: the kernel's Landlock ABI lacks part of what was asked (say, TCP rules
    /// before ABI 4).
    Partial,
    /// None: the kernel has no Landlock, or the mode is `off`.
    None,
}

impl Enforcement {
    pub fn as_str(&self) -> &'static str {
        match self {
            Enforcement::Full => "full",
            Enforcement::Partial => "partial",
            Enforcement::None => "none",
        }
    }
}

/// The sandbox commands run under, as `session_started` and each started `shell_exec`
/// record it. Logs from before the sandbox have none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sandboxed {
    pub mode: SandboxMode,
    /// The kernel's Landlock ABI version (0: no Landlock).
    pub abi: u32,
    pub enforced: Enforcement,
    /// The session's temporary folder, given to commands as `TMPDIR` (absolute;
    /// `session_started` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp: Option<String>,
    /// Every folder commands may write in, absolute: the workspace, the temporary folder,
    /// the configured roots (`session_started` only; device files are not listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// What each part of the sandbox does for the session's commands on this kernel
    /// (`session_started` and `session_resumed` only; none in logs from before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<SandboxFeatures>,
}

impl Sandboxed {
    /// What a `shell_exec` start record carries: the mode and its enforcement.
    pub fn brief(&self) -> Sandboxed {
        Sandboxed {
            tmp: None,
            writable: Vec::new(),
            features: None,
            ..self.clone()
        }
    }
}

/// The parts of a sandbox, each with what the kernel enforces of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SandboxFeatures {
    /// Landlock's filesystem rules: writes only in `writable` and a few devices
    /// (partial before Landlock ABI 5, which lacks some rights).
    pub filesystem: Feature,
    /// Landlock's TCP rules (`strict`): every TCP `bind` and `connect` refused (ABI 4).
    pub tcp: Feature,
    /// The seccomp filter of `strict` refusing `socket` for every family but `AF_UNIX`
    /// (`EACCES`).
    pub sockets: Feature,
    /// The seccomp filter of `strict` refusing io_uring (`io_uring_setup`,
    /// `io_uring_enter`, `io_uring_register`: `EPERM`), whose operations open and use
    /// sockets without the system calls the socket filter sees.
    pub io_uring: Feature,
    /// Landlock's signal scope: a command signals only processes of its own Landlock
    /// domain (itself and what it starts), never the engine or another process (ABI 6).
    pub signals: Feature,
    /// Landlock's abstract Unix socket scope: a command connects only to abstract
    /// sockets made in its own Landlock domain (ABI 6).
    pub abstract_unix: Feature,
    /// How the cairn home is kept from commands' writes.
    pub home: HomeGuard,
}

/// What the kernel enforces of one part of a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// On every command.
    Enforced,
    /// In part: the kernel lacks some of its rights.
    Partial,
    /// Asked for, but the kernel (or the architecture) lacks it: commands run without
    /// it.
    Missing,
    /// Not part of the session's mode.
    Off,
}

impl Feature {
    pub fn as_str(&self) -> &'static str {
        match self {
            Feature::Enforced => "enforced",
            Feature::Partial => "partial",
            Feature::Missing => "missing",
            Feature::Off => "off",
        }
    }
}

/// How the cairn home is kept from commands' writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HomeGuard {
    /// The home lies outside every place commands may write: the filesystem rules
    /// refuse writes there.
    Outside,
    /// The home lies where commands may write (the workspace, a configured root,
    /// `/dev/shm`): each command runs in a private mount namespace where the home is a
    /// read-only bind mount.
    MountNamespace,
    /// As `mount_namespace`, in a new user namespace too (the engine may not make a
    /// mount namespace by itself), the command's user and group mapped to themselves.
    UserNamespace,
    /// Nothing keeps a command from writing it: mode `off`, or a kernel without
    /// Landlock, with the home outside the workspace.
    Unguarded,
}

/// How a process was run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProcKind {
    /// The call waits for it.
    Foreground,
    /// The call returns at once; its end is recorded when it exits.
    Background,
}

/// How a process ended, as a finished `shell_exec` records it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ExecStatus {
    /// Exited with code 0.
    Ok,
    /// Exited with another code, was killed by a signal it did not get from cairn, or
    /// could not be started.
    Failed,
    /// Killed by cairn when its time ran out.
    Timeout,
    /// Killed by cairn on request or at the end of the session.
    Cancelled,
    /// Gone without cairn seeing it end: not running (or another process holds its
    /// pid) at resume, or exited while adopted after a resume; its exit status is
    /// unknown.
    Lost,
}

impl ExecStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            ExecStatus::Ok => "ok",
            ExecStatus::Failed => "failed",
            ExecStatus::Timeout => "timeout",
            ExecStatus::Cancelled => "cancelled",
            ExecStatus::Lost => "lost",
        }
    }
}

impl std::fmt::Display for ExecStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// A process run by a shell tool: recorded once when it starts (phase `started`) and
/// once when it ends (phase `finished`); a program that could not start has only the
/// second. What only an end has lives in [`ShellPhase::Finished`], so a started record
/// cannot carry an exit and a finished one always carries its status.
///
/// On disk it is one flat object, exactly as before the phases were typed (see
/// `ShellExecWire`): `"phase":"started","status":"running"` or
/// `"phase":"finished","status":<how it ended>`, each field at its old place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ShellExecWire", into = "ShellExecWire")]
pub struct ShellExec {
    /// The call that started the process.
    pub call: String,
    /// The process-table id of a background process (`p1`, `p2`, …).
    pub id: Option<String>,
    /// What ran: the program and its arguments (`sh -c LINE` for `shell`).
    pub argv: Vec<String>,
    /// The keyed hash of the raw argv (`hmac-sha256:…`) when redaction changed it: the
    /// project's key tells the same secret from a different one without keeping either
    /// ([`crate::scrub`]).
    pub argv_hash: Option<String>,
    /// The working folder, workspace-relative (`""` is the root).
    pub cwd: String,
    /// The OS process id (also the process group id); none when it did not start.
    /// Both records of a process carry it.
    pub pid: Option<u32>,
    /// The process's start time (field 22 of `/proc/<pid>/stat`, clock ticks since
    /// boot): with the pid, it tells a resume whether the process still runs.
    pub start_time: Option<u64>,
    pub kind: ProcKind,
    /// The time limit in force, in milliseconds (foreground only).
    pub timeout_ms: Option<u64>,
    /// The log file of a background process (stdout and stderr), absolute; it lives in
    /// the session folder, never in the workspace.
    pub log: Option<String>,
    /// The sandbox it ran under (started records; none in logs from before the
    /// sandbox).
    pub sandbox: Option<Sandboxed>,
    pub phase: ShellPhase,
}

/// Which end of a process a `shell_exec` records.
// A record is built, appended and dropped, never kept in bulk: boxing the end would only
// add an allocation per record.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShellPhase {
    /// The process runs (`"status":"running"` on disk).
    Started,
    /// The process ended, or never started.
    Finished(ShellEnd),
}

/// The end of a process: what only a finished `shell_exec` has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellEnd {
    pub status: ExecStatus,
    pub exit_code: Option<i32>,
    /// The signal that ended the process.
    pub signal: Option<i32>,
    /// None for a process found lost at resume.
    pub elapsed_us: Option<u64>,
    /// Bytes of standard output once redacted (foreground): its blob holds fewer only
    /// when the capture limit cut it.
    pub stdout_bytes: Option<u64>,
    /// Bytes of standard error once redacted (foreground).
    pub stderr_bytes: Option<u64>,
    /// The whole standard output, redacted (foreground).
    pub stdout: Option<BlobRef>,
    /// The whole standard error, redacted (foreground).
    pub stderr: Option<BlobRef>,
    /// The log's content when the process ended, redacted as it was written
    /// (background).
    pub log_blob: Option<BlobRef>,
    /// Standard output was longer than `shell_capture_bytes_max`: its blob keeps the
    /// head and the tail, and this says what was dropped between them. Absent when
    /// nothing was dropped, and in logs from before (whose blob kept the head only).
    pub stdout_cut: Option<OutputCut>,
    /// The same for standard error.
    pub stderr_cut: Option<OutputCut>,
    /// Why the process could not start, why its end is unknown, or what of its output
    /// its log is missing (background).
    pub error: Option<String>,
}

impl ShellEnd {
    /// An end with `status` and nothing else known yet.
    pub fn new(status: ExecStatus) -> ShellEnd {
        ShellEnd {
            status,
            exit_code: None,
            signal: None,
            elapsed_us: None,
            stdout_bytes: None,
            stderr_bytes: None,
            stdout: None,
            stderr: None,
            log_blob: None,
            stdout_cut: None,
            stderr_cut: None,
            error: None,
        }
    }
}

/// Bytes dropped from the middle of a command's output stream kept whole up to the
/// capture limit: the blob holds the stream's first `at` bytes, then its last ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutputCut {
    /// Offset in the stream (and in the blob) where the bytes were dropped.
    pub at: u64,
    /// How many bytes were dropped there.
    pub dropped_bytes: u64,
}

impl ShellExec {
    /// The end this record holds; `None` for a start.
    pub fn end(&self) -> Option<&ShellEnd> {
        match &self.phase {
            ShellPhase::Started => None,
            ShellPhase::Finished(end) => Some(end),
        }
    }

    /// `started` or `finished`, as on disk.
    pub fn phase_name(&self) -> &'static str {
        match self.phase {
            ShellPhase::Started => "started",
            ShellPhase::Finished(_) => "finished",
        }
    }

    /// `running` for a start, else how the process ended, as on disk.
    pub fn status_name(&self) -> &'static str {
        self.end().map_or("running", |e| e.status.as_str())
    }
}

/// On disk, and so in the schema, a `shell_exec` is its wire form.
impl schemars::JsonSchema for ShellExec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ShellExec".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        ShellExecWire::json_schema(generator)
    }
}

/// `shell_exec` as it is on disk: one flat object, the fields in this order. Only
/// [`ShellExec`]'s serde (and its schema) goes through it.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct ShellExecWire {
    call: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    argv: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    argv_hash: Option<String>,
    cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    start_time: Option<u64>,
    kind: ProcKind,
    phase: WirePhase,
    status: WireStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sandbox: Option<Sandboxed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signal: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    elapsed_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stdout_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stderr_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stdout: Option<BlobRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stderr: Option<BlobRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    log: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    log_blob: Option<BlobRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stdout_cut: Option<OutputCut>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stderr_cut: Option<OutputCut>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Clone, Copy, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum WirePhase {
    Started,
    Finished,
}

/// `running` or how the process ended.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum WireStatus {
    Running,
    Ok,
    Failed,
    Timeout,
    Cancelled,
    Lost,
}

impl From<ExecStatus> for WireStatus {
    fn from(s: ExecStatus) -> WireStatus {
        match s {
            ExecStatus::Ok => WireStatus::Ok,
            ExecStatus::Failed => WireStatus::Failed,
            ExecStatus::Timeout => WireStatus::Timeout,
            ExecStatus::Cancelled => WireStatus::Cancelled,
            ExecStatus::Lost => WireStatus::Lost,
        }
    }
}

impl From<ShellExec> for ShellExecWire {
    fn from(x: ShellExec) -> ShellExecWire {
        let (phase, status, end) = match x.phase {
            ShellPhase::Started => (WirePhase::Started, WireStatus::Running, None),
            ShellPhase::Finished(end) => (WirePhase::Finished, end.status.into(), Some(end)),
        };
        let end = end.as_ref();
        ShellExecWire {
            call: x.call,
            id: x.id,
            argv: x.argv,
            argv_hash: x.argv_hash,
            cwd: x.cwd,
            pid: x.pid,
            start_time: x.start_time,
            kind: x.kind,
            phase,
            status,
            timeout_ms: x.timeout_ms,
            sandbox: x.sandbox,
            exit_code: end.and_then(|e| e.exit_code),
            signal: end.and_then(|e| e.signal),
            elapsed_us: end.and_then(|e| e.elapsed_us),
            stdout_bytes: end.and_then(|e| e.stdout_bytes),
            stderr_bytes: end.and_then(|e| e.stderr_bytes),
            stdout: end.and_then(|e| e.stdout),
            stderr: end.and_then(|e| e.stderr),
            log: x.log,
            log_blob: end.and_then(|e| e.log_blob),
            stdout_cut: end.and_then(|e| e.stdout_cut),
            stderr_cut: end.and_then(|e| e.stderr_cut),
            error: end.and_then(|e| e.error.clone()),
        }
    }
}

impl TryFrom<ShellExecWire> for ShellExec {
    type Error = String;

    fn try_from(w: ShellExecWire) -> Result<ShellExec, String> {
        let phase = match (w.phase, w.status) {
            (WirePhase::Started, WireStatus::Running) => {
                let finish_fields = [
                    ("exit_code", w.exit_code.is_some()),
                    ("signal", w.signal.is_some()),
                    ("elapsed_us", w.elapsed_us.is_some()),
                    ("stdout_bytes", w.stdout_bytes.is_some()),
                    ("stderr_bytes", w.stderr_bytes.is_some()),
                    ("stdout", w.stdout.is_some()),
                    ("stderr", w.stderr.is_some()),
                    ("log_blob", w.log_blob.is_some()),
                    ("stdout_cut", w.stdout_cut.is_some()),
                    ("stderr_cut", w.stderr_cut.is_some()),
                    ("error", w.error.is_some()),
                ];
                if let Some((name, _)) = finish_fields.iter().find(|(_, set)| *set) {
                    return Err(format!(
                        "a started shell_exec has `{name}`, which only a finished one has"
                    ));
                }
                ShellPhase::Started
            }
            (WirePhase::Started, _) => {
                return Err("a started shell_exec has a status other than running".into());
            }
            (WirePhase::Finished, status) => {
                let status = match status {
                    WireStatus::Running => {
                        return Err("a finished shell_exec has status running".into());
                    }
                    WireStatus::Ok => ExecStatus::Ok,
                    WireStatus::Failed => ExecStatus::Failed,
                    WireStatus::Timeout => ExecStatus::Timeout,
                    WireStatus::Cancelled => ExecStatus::Cancelled,
                    WireStatus::Lost => ExecStatus::Lost,
                };
                ShellPhase::Finished(ShellEnd {
                    status,
                    exit_code: w.exit_code,
                    signal: w.signal,
                    elapsed_us: w.elapsed_us,
                    stdout_bytes: w.stdout_bytes,
                    stderr_bytes: w.stderr_bytes,
                    stdout: w.stdout,
                    stderr: w.stderr,
                    log_blob: w.log_blob,
                    stdout_cut: w.stdout_cut,
                    stderr_cut: w.stderr_cut,
                    error: w.error,
                })
            }
        };
        Ok(ShellExec {
            call: w.call,
            id: w.id,
            argv: w.argv,
            argv_hash: w.argv_hash,
            cwd: w.cwd,
            pid: w.pid,
            start_time: w.start_time,
            kind: w.kind,
            timeout_ms: w.timeout_ms,
            log: w.log,
            sandbox: w.sandbox,
            phase,
        })
    }
}

#[cfg(test)]
mod tests;
