//! The engine: starts a session in a workspace and runs tool calls through it.
//!
//! Record, then act: `tool_started` is appended before any side effect, `file_read` /
//! `file_write` when they happen, `tool_finished` after, then the log is synced (group
//! commit at the tool boundary). Every decision is taken from the folded state and the
//! facts the call's records carry, so that replay can take it again.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use cairn_store::{BlobRef, BlobStore, Head, LogWriter, Options, SnapshotStore};

use crate::event::{
    Answer, AnswerSource, Event, ExecStatus, FORMAT_VERSION, FileWrite, Inherited, Observed,
    Parent, Refusal, SessionStarted, Status, ToolFinished,
};
use crate::manifest;
use crate::mcp::{McpBackend, McpConfig, McpError, Servers};
use crate::permission::{
    AllowList, Approver, CredentialFiles, Need, Policy, RefusedGrant, Request,
};
use crate::project::{Handle, Home, Project, new_session_id};
use crate::redact::{Counts, Redactor};
use crate::shell::{self, Runtime};
use crate::state::{self, Process, State};
use cairn_core::decide::{self, Answered, Permission};
use cairn_core::scrub;
use cairn_tools::CancelHandle;
use cairn_tools::Recorder;
use cairn_tools::ToolOutput;
use cairn_tools::sandbox::Sandbox;
use cairn_tools::{EngineError, InputError, Result, io_at};
use cairn_tools::{McpTool, Registry};

mod call;
mod resume;
pub use cairn_core::decide::{cap_output, cap_output_tail};
pub use cairn_tools::{EngineConfig, ModelSetting};
pub use resume::{
    Finding, GoOn, InterruptedOutcome, Rerun, ResumeOptions, ResumeReport, ScriptPoint, inherit,
};

/// A call's recorded result, given by [`Engine::call_answered`] instead of running it.
#[derive(Debug, Clone, Copy)]
pub struct AnsweredCall<'a> {
    pub status: Status,
    pub output: &'a str,
    pub refusal: Option<&'a Refusal>,
    /// Its recorded workspace changes, already made in the workspace.
    pub writes: &'a [AnsweredWrite],
}

/// One recorded workspace change of an answered call, with the contents its blobs
/// held (`None`: the recorded blob is taken as it is, as when there was no content).
#[derive(Debug, Clone)]
pub struct AnsweredWrite {
    pub write: FileWrite,
    pub before: Option<Vec<u8>>,
    pub after: Option<Vec<u8>>,
}

/// The result of one call. What else the call recorded (its reads, writes, commands)
/// reaches an observer set with [`Engine::set_observer`] as it is appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutcome {
    pub call: String,
    pub tool: String,
    pub status: Status,
    /// What the model is given.
    pub output: String,
    pub refusal: Option<Refusal>,
    /// The call's time as its `tool_finished` records it, in microseconds (0 for a call
    /// answered from a recording).
    pub elapsed_us: u64,
    /// The MCP server's whole `tools/call` result (images, structured content and
    /// all), redacted, as `tool_finished.mcp_result` keeps it: for an MCP call that got
    /// one.
    pub mcp_result: Option<serde_json::Value>,
}

/// What a session is built from ([`Engine::assemble`]): what a start makes and a
/// resume finds.
struct Parts {
    id: String,
    dir: PathBuf,
    root: PathBuf,
    project: Project,
    config: EngineConfig,
    registry: Registry,
    log: LogWriter,
    /// The state the log folds to (a new session's is empty).
    state: State,
    blobs: BlobStore,
    sandbox: Sandbox,
    redactor: Redactor,
    secret_key: cairn_core::scrub::SecretKey,
    credential_files: CredentialFiles,
    manifest_cache: manifest::ScanCache,
    /// The workspace as the log knows it.
    manifest: std::collections::BTreeMap<String, manifest::ManifestEntry>,
}

/// The cairn home's place inside the workspace, when it lies there (it is left out of
/// the manifest).
/// The workspace, canonical: an existing folder, not inside the home. A home inside
/// the workspace is allowed (it is left out of the manifest and tools never reach it).
fn workspace_root(home: &Home, workspace: &Path) -> Result<PathBuf> {
    let root = workspace
        .canonicalize()
        .map_err(|source| EngineError::WorkspaceMissing {
            path: workspace.to_path_buf(),
            source,
        })?;
    if !root.is_dir() {
        return Err(EngineError::WorkspaceNotFolder { path: root });
    }
    if root.starts_with(&home.root) {
        return Err(EngineError::WorkspaceInHome {
            workspace: root,
            home: home.root.clone(),
        });
    }
    Ok(root)
}

/// The project's folders made, what a crash left of sessions being created (before
/// their first record) removed, and the workspace it is of noted.
fn prepare_project(project: &Project, root: &Path) -> Result<()> {
    cairn_store::private::create_dir_all(&project.sessions_dir()).map_err(io_at(&project.dir))?;
    project.remove_unborn()?;
    let ws_note = project.dir.join("workspace");
    if !ws_note.exists() {
        std::fs::write(&ws_note, root.to_string_lossy().as_bytes()).map_err(io_at(&ws_note))?;
    }
    Ok(())
}

fn home_inner(home: &Home, root: &Path) -> Option<String> {
    home.root
        .strip_prefix(root)
        .ok()
        .map(|inner| inner.to_string_lossy().to_string())
}

/// A running session.
pub struct Engine {
    id: String,
    dir: PathBuf,
    root: PathBuf,
    /// The workspace root's descriptor, opened once: every path a tool touches
    /// resolves beneath it.
    fs: cairn_tools::Root,
    home: PathBuf,
    project: Project,
    config: EngineConfig,
    /// The guarded commands of the session's configuration, upgraded.
    guards: Vec<cairn_core::command::Guard>,
    registry: Registry,
    rec: Recorder,
    approver: Box<dyn Approver>,
    redactor: Redactor,
    allow_list: AllowList,
    /// Grants of the allow list refused when the session started (not honoured).
    refused_grants: Vec<RefusedGrant>,
    /// `config.credential_files`, compiled.
    credential_files: CredentialFiles,
    rt: Runtime,
    /// Where MCP calls go; servers start on first use and stop with the session.
    mcp: Box<dyn McpBackend>,
    /// MCP servers whose tools are in the registry.
    mcp_listed: std::collections::BTreeSet<String>,
}

impl Engine {
    /// Starts a new session in `workspace`: scans it into a manifest (contents as
    /// blobs) and records `session_started`.
    pub fn start(home: &Home, workspace: &Path, config: EngineConfig) -> Result<Engine> {
        Engine::start_with_parent(home, workspace, config, None)
    }

    /// Starts a new session for another agent whose calls pass through cairn (an MCP
    /// client of `mcp serve` or `mcp proxy`): `session_started.agent` names it.
    pub fn start_for(
        home: &Home,
        workspace: &Path,
        config: EngineConfig,
        agent: Option<crate::event::Agent>,
    ) -> Result<Engine> {
        Engine::start_inner(home, workspace, config, None, None, agent)
    }

    /// Starts a session that names a parent (a fork or a replay).
    pub fn start_with_parent(
        home: &Home,
        workspace: &Path,
        config: EngineConfig,
        parent: Option<Parent>,
    ) -> Result<Engine> {
        Engine::start_inner(home, workspace, config, parent, None, None)
    }

    /// Starts a fork: a session that names its parent and starts knowing what the
    /// parent knew at the fork point (`inherited`, recorded in `session_started`).
    /// `workspace` should hold the parent's workspace at that point
    /// (`cairn_replay::checkout`), or the inherited read coverage names other contents.
    pub fn start_forked(
        home: &Home,
        workspace: &Path,
        config: EngineConfig,
        parent: Parent,
        inherited: Inherited,
    ) -> Result<Engine> {
        Engine::start_inner(home, workspace, config, Some(parent), Some(inherited), None)
    }

    fn start_inner(
        home: &Home,
        workspace: &Path,
        config: EngineConfig,
        parent: Option<Parent>,
        inherited: Option<Inherited>,
        agent: Option<crate::event::Agent>,
    ) -> Result<Engine> {
        let is_replay = parent.is_some() && inherited.is_none();
        let credential_files = CredentialFiles::new(&config.credential_files)?;
        let root = workspace_root(home, workspace)?;
        let project = home.project(&root);
        prepare_project(&project, &root)?;
        // Blobs are made durable in groups (one syncfs) before the records naming them.
        let blobs = BlobStore::open(&project.blobs_dir())?.without_sync();
        // Kept for the session's rescans: its cache and listing are read once.
        let mut scan_cache =
            manifest::ScanCache::new(project.manifest_cache(), credential_files.clone())
                .with_capture(config.capture, config.limits.capture_file_bytes_max);
        // A warm start where nothing moved names the manifest the start before stored.
        let (files, manifest_blob) = manifest::capture_start(
            &root,
            &blobs,
            &mut scan_cache,
            home_inner(home, &root).as_deref(),
        )?;
        let id = new_session_id();
        // Before the log: a sandbox that cannot be set up (a home commands could write)
        // leaves no session behind.
        let sandbox = Sandbox::new(
            config.sandbox,
            &root,
            &config.sandbox_write_roots,
            &id,
            &home.root,
        )?;
        let dir = project.session_dir(&id);
        let log = LogWriter::create(
            &dir,
            Options {
                durability: config.durability,
                ..Options::default()
            },
        )?;
        let manifest_files = files.len() as u64;
        let mut engine = Engine::assemble(
            home,
            Parts {
                id,
                dir,
                root,
                registry: Registry::new(config.catalog),
                secret_key: project.secret_key()?,
                project,
                config,
                log,
                state: State::default(),
                blobs,
                sandbox,
                redactor: Redactor::with_env(std::env::vars()),
                credential_files,
                manifest_cache: scan_cache,
                manifest: files.into_iter().map(|f| (f.path.clone(), f)).collect(),
            },
        )?;
        // The start's scan stored its manifest and the files git does not hold: those
        // are made durable before `session_started` names them.
        let stored = std::mem::take(&mut engine.rt.manifest_cache.stored);
        engine.rec.note_blobs(&stored);
        let audit = engine.allow_list.audit()?;
        engine.refused_grants = audit.refused;
        let config = &engine.config;
        let started = SessionStarted {
            id: engine.id.clone(),
            format_version: FORMAT_VERSION,
            engine_version: env!("CARGO_PKG_VERSION").to_string(),
            workspace: engine.root.to_string_lossy().into_owned(),
            catalog: config.catalog.name().to_string(),
            tools: engine
                .registry
                .names()
                .iter()
                .map(|s| s.to_string())
                .collect(),
            manifest: manifest_blob,
            manifest_files,
            config: serde_json::to_value(config).unwrap_or_default(),
            parent,
            allow: audit.keys.into_iter().collect(),
            inherited,
            sandbox: Some(engine.rt.sandbox.recorded().clone()),
            imported: None,
            agent: agent.map(Box::new),
        };
        engine.rec.append(&Event::SessionStarted(started))?;
        engine.rec.sync()?;
        // A session with a parent and nothing inherited is a replay
        // (`start_with_parent`); a fork inherits (`start_forked`).
        let handle = if is_replay {
            Handle::Replay
        } else {
            Handle::Last
        };
        engine.project.mark(home, &engine.id, handle)?;
        Ok(engine)
    }

    /// The session built from its parts, by a start and a resume alike: its recorder,
    /// the tools' runtime, the workspace root opened, the project's MCP servers (not
    /// started) and allow list.
    fn assemble(home: &Home, p: Parts) -> Result<Engine> {
        let (config, project, root, dir) = (p.config, p.project, p.root, p.dir);
        let mcp = Box::new(Servers::new(McpConfig::load(&project.dir)?, &root));
        let allow_list = AllowList::new(&project.dir).with_signer(home.log_signer()?);
        let mut rec = Recorder::new(
            p.log,
            p.state,
            p.blobs,
            SnapshotStore::new(&dir),
            config.durability,
            config.snapshot_every,
            config.checkpoint_every,
        );
        rec.set_tree_checkpoints(config.tree_checkpoint_every_records, home.log_signer()?);
        rec.set_sink(home.start_sink(&dir, config.search_index));
        rec.set_redaction(p.redactor.clone(), Some(p.secret_key));
        let rt = Runtime {
            session_dir: dir.clone(),
            tmp_dir: project.dir.join("tmp"),
            manifest_cache: p.manifest_cache,
            home_inner: home_inner(home, &root),
            manifest: p.manifest,
            bg: Default::default(),
            cancel: Default::default(),
            sandbox: p.sandbox,
            output: None,
        };
        let fs = cairn_tools::Root::open(&root, &home.root).map_err(io_at(&root))?;
        Ok(Engine {
            id: p.id,
            dir,
            root,
            fs,
            home: home.root.clone(),
            project,
            guards: config.guards(),
            config,
            registry: p.registry,
            rec,
            approver: Box::new(Policy::Workspace),
            redactor: p.redactor,
            allow_list,
            refused_grants: Vec::new(),
            credential_files: p.credential_files,
            rt,
            mcp,
            mcp_listed: Default::default(),
        })
    }

    /// Sets who answers permission requests. The default ([`Policy::Workspace`]) allows
    /// every request inside the workspace once and nothing outside it, which suits a
    /// library caller that checks calls itself; `cairn run` asks.
    pub fn set_approver(&mut self, approver: Box<dyn Approver>) {
        self.approver = approver;
    }

    /// Sets who sees every record as it is appended to this session's log (with its
    /// seq, time and hash): the records of calls, user messages, background processes'
    /// ends, checkpoints. A live view follows the session through it instead of reading
    /// the log back. It runs on the call path, inside the call: hand the record on (to a
    /// channel, say) rather than work on it.
    pub fn set_observer(&mut self, observer: cairn_tools::Observer) {
        self.rec.set_observer(Some(observer));
    }

    /// Sets who works on every record off the call path (see
    /// [`cairn_tools::RecordSink`]), in place of the sink the home started
    /// ([`Home::with_sink`], when [`EngineConfig::search_index`] asks); it is told when
    /// the session's writer is done. Records appended before are not handed to it.
    pub fn set_sink(&mut self, sink: Box<dyn cairn_tools::RecordSink>) {
        self.rec.set_sink(Some(sink));
    }

    /// Hands what each foreground command prints to `sink` as it prints it, redacted,
    /// in the pieces it was read in (stdout and stderr each from their own thread): a
    /// live view shows a running command's output tail with it. Nothing is recorded
    /// differently.
    pub fn set_output_observer(&mut self, sink: cairn_tools::shell::OutputSink) {
        self.rt.output = Some(sink);
    }

    /// Replaces the redactor (the default knows this process's secret-looking
    /// environment variables).
    pub fn set_redactor(&mut self, redactor: Redactor) {
        self.rec.set_redactor(redactor.clone());
        self.redactor = redactor;
    }

    /// Replaces where MCP calls go (replay answers them from a recording with
    /// [`crate::mcp::Recorded`]); stops the servers started so far.
    pub fn set_mcp_backend(&mut self, backend: Box<dyn McpBackend>) {
        self.mcp.shutdown();
        self.mcp = backend;
        self.mcp_listed.clear();
    }

    /// Starts every configured MCP server not started yet and appends its tools to the
    /// registry (the catalogue a model is offered). Returns the servers that failed; the
    /// session goes on without their tools.
    pub fn start_mcp(&mut self) -> Vec<McpError> {
        let mut failed = Vec::new();
        for server in self.mcp.servers() {
            if !self.mcp_listed.contains(&server)
                && let Err(e) = self.list_mcp(&server)
            {
                failed.push(e);
            }
        }
        failed
    }

    /// Lists a server's tools into the registry.
    fn list_mcp(&mut self, server: &str) -> Result<(), McpError> {
        let timeout = std::time::Duration::from_millis(self.config.limits.mcp_start_timeout_ms);
        let listed = self.mcp.list_tools(server, timeout)?;
        let mut tools: Vec<McpTool> = Vec::new();
        for l in listed {
            let name = crate::mcp::tool_name(server, &l.name, &|n| {
                self.registry.get(n).is_some()
                    || tools.iter().any(|t| t.name == n)
                    || self
                        .registry
                        .mcp_tools()
                        .iter()
                        .any(|t| t.name == n && t.server != server)
            });
            tools.push(McpTool {
                name,
                server: server.to_string(),
                tool: l.name,
                description: l.description,
                schema: l.input_schema,
                read_only: l.read_only,
            });
        }
        self.registry
            .set_mcp_tools(server, tools)
            .map_err(|e| McpError::Protocol {
                server: server.to_string(),
                detail: e.to_string(),
            })?;
        self.mcp_listed.insert(server.to_string());
        Ok(())
    }

    /// A workspace file's text for a permission prompt's preview ([`cairn_tools::Tool::preview`]):
    /// `Some(None)` when there is no such file; `None` when it cannot be told: outside
    /// the workspace, a credential file (its content is never shown), not a regular
    /// file, larger than [`cairn_core::limits::PREVIEW_READ_BYTES_MAX`], not UTF-8.
    /// `resolved` is the call's path as the permission step resolved it, taken when it
    /// is of `path` rather than resolving it again.
    fn preview_read(
        &self,
        path: &str,
        resolved: Option<&cairn_tools::Resolved>,
    ) -> Option<Option<String>> {
        use std::io::Read;
        let (ws, _) = cairn_tools::Resolved::plain_in(resolved, &self.fs, &self.home, path).ok()?;
        if self.credential_files.matches(&ws.rel) {
            return None;
        }
        let (file, meta) = match self.fs.open_read(&ws) {
            Ok(opened) => opened,
            Err(cairn_tools::OpenError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Some(None);
            }
            Err(_) => return None,
        };
        let max = cairn_core::limits::PREVIEW_READ_BYTES_MAX;
        if meta.len() > max {
            return None;
        }
        let mut bytes = Vec::new();
        file.take(max + 1).read_to_end(&mut bytes).ok()?;
        if bytes.len() as u64 > max {
            return None;
        }
        String::from_utf8(bytes).ok().map(Some)
    }

    /// Lists again the servers that said their tools changed.
    fn relist_changed_mcp(&mut self) {
        for server in self.mcp.take_changed() {
            if self.mcp_listed.contains(&server) {
                // A server that fails to list keeps its old tools until it answers.
                let _ = self.list_mcp(&server);
            }
        }
    }

    /// The project's allow list.
    pub fn allow_list(&self) -> &AllowList {
        &self.allow_list
    }

    /// The grants of the allow list refused as the session started: the session does
    /// not honour them (none for a resumed session, which keeps the keys it started
    /// with).
    pub fn refused_grants(&self) -> &[RefusedGrant] {
        &self.refused_grants
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The sandbox commands run under, as recorded: its mode and what the kernel
    /// enforces of it.
    pub fn sandbox(&self) -> &crate::event::Sandboxed {
        self.rt.sandbox.recorded()
    }

    /// The project folder.
    pub fn project(&self) -> &Project {
        &self.project
    }

    /// The folded state.
    pub fn state(&self) -> &State {
        &self.rec.state
    }

    /// The tools offered.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Records a user message (redacted).
    pub fn user_message(&mut self, text: &str) -> Result<()> {
        self.poll_background()?;
        let (text, text_hash) = match self.redactor.redact(text, &mut Counts::new()) {
            Cow::Borrowed(_) => (text.to_string(), None),
            Cow::Owned(redacted) => (
                redacted,
                self.rec.secret_key().map(|k| scrub::text_hash(k, text)),
            ),
        };
        self.rec.append(&Event::UserMessage {
            at: None,
            text,
            text_hash,
        })?;
        self.rec.commit()
    }

    /// Adds a secret the redactor must know (an API key given other than through a
    /// secret-looking environment variable).
    pub fn add_secret(&mut self, name: &str, value: &str) {
        self.redactor.add_value(name, value);
        self.rec.add_secret(name, value);
    }

    /// The session's configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Records one model turn (text and tool-call inputs redacted; hidden reasoning
    /// never reaches here). Gives back the turn as recorded: what may be shown.
    pub fn model_turn(
        &mut self,
        provider: &str,
        model: &str,
        turn: &crate::provider::Turn,
    ) -> Result<crate::provider::Turn> {
        self.record_turn(provider, model, turn, false)
    }

    /// Records that the person switched the model the next turns ask, from `previous`
    /// to `model` of the same `provider` (`/model` in the chat), and commits it.
    pub fn model_switched(&mut self, provider: &str, model: &str, previous: &str) -> Result<()> {
        self.rec.append(&Event::ModelSwitched {
            provider: provider.to_string(),
            model: model.to_string(),
            previous: previous.to_string(),
        })?;
        self.rec.commit()
    }

    /// Records a model turn the person watching interrupted: `text` is what the model
    /// had streamed by then (redacted as any turn); it has no tool calls and no usage.
    /// Gives back the text as recorded.
    pub fn interrupted_turn(&mut self, provider: &str, model: &str, text: &str) -> Result<String> {
        let turn = crate::provider::Turn {
            text: text.to_string(),
            ..Default::default()
        };
        Ok(self.record_turn(provider, model, &turn, true)?.text)
    }

    fn record_turn(
        &mut self,
        provider: &str,
        model: &str,
        turn: &crate::provider::Turn,
        interrupted: bool,
    ) -> Result<crate::provider::Turn> {
        debug_assert!(!interrupted || turn.tool_calls.is_empty());
        let mut counts = Counts::new();
        let shown = crate::provider::Turn {
            text: self.redactor.redact(&turn.text, &mut counts).into_owned(),
            tool_calls: turn
                .tool_calls
                .iter()
                .map(|c| crate::provider::ToolCall {
                    input: self.redactor.redact_json(&c.input, &mut counts),
                    ..c.clone()
                })
                .collect(),
            usage: turn.usage,
        };
        let tool_calls = shown
            .tool_calls
            .iter()
            .map(|c| serde_json::json!({"id": c.id, "name": c.name, "input": c.input}))
            .collect();
        self.rec.append(&Event::ModelTurn {
            at: None,
            provider: provider.to_string(),
            model: model.to_string(),
            text: shown.text.clone(),
            tool_calls,
            usage: turn.usage.and_then(|u| serde_json::to_value(u).ok()),
            interrupted,
        })?;
        self.rec.commit()?;
        Ok(shown)
    }

    /// A token another thread can trigger to cancel the running call (see
    /// [`CancelHandle`]): a foreground shell command is killed with its whole process
    /// group and the call finishes with status `cancelled`; so does an MCP call to a
    /// live server (its request cancelled, the server left running); other tools just
    /// finish.
    /// Each call clears it when it starts.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.rt.cancel.clone()
    }

    /// The signal the session was stopped by ([`CancelHandle::stop`], or one the
    /// process received once [`cairn_tools::signal::install`] ran): the running call
    /// was cancelled, and the driver should end the session with
    /// [`cairn_tools::signal::Signal::reason`] rather than go on.
    pub fn stopped(&self) -> Option<cairn_tools::signal::Signal> {
        self.rt.cancel.stopped()
    }

    /// Runs one tool call through the engine and records it.
    pub fn call(&mut self, tool: &str, input: serde_json::Value) -> Result<CallOutcome> {
        self.call_with(tool, input, None)
    }

    /// Records a call answered from a recording instead of being run (replay answers
    /// network and MCP calls this way, and shell commands with `--shell recorded`): the
    /// call gets its `tool_started` and a `tool_finished` with the recorded result.
    ///
    /// `writes` are the call's recorded workspace changes, which the caller has made
    /// in the workspace already: they are recorded as this call's (their contents
    /// stored as blobs here), so that the fold, later calls and a comparison with the
    /// recording see them as the call's own.
    pub fn call_answered(
        &mut self,
        tool: &str,
        input: serde_json::Value,
        answered: AnsweredCall<'_>,
    ) -> Result<CallOutcome> {
        let AnsweredCall {
            status,
            output,
            refusal,
            writes,
        } = answered;
        self.poll_background()?;
        let call = format!("c{}", self.rec.state.calls_started + 1);
        let mut redactions = Counts::new();
        let redacted = self.redactor.redact_json(&input, &mut redactions);
        let input_hash = match redactions.is_empty() {
            true => None,
            false => self.rec.secret_key().map(|k| scrub::input_hash(k, &input)),
        };
        self.rec.append(&Event::ToolStarted {
            at: None,
            call: call.clone(),
            tool: tool.to_string(),
            input: redacted,
            input_hash,
            mcp: None,
            observed: None,
        })?;
        for w in writes {
            let mut put = |content: &Option<Vec<u8>>, recorded: Option<BlobRef>| match content {
                Some(bytes) => self.rec.put_blob(bytes).map(Some),
                None => Ok(recorded),
            };
            let write = FileWrite {
                call: Some(call.clone()),
                before: put(&w.before, w.write.before)?,
                after: put(&w.after, w.write.after)?,
                ..w.write.clone()
            };
            self.rec.append(&Event::FileWrite(write.clone()))?;
            self.rt.note_write(&write);
        }
        let output = self.redactor.redact(output, &mut redactions).into_owned();
        // The recorded answer is shown as it was: flagged again on the text it was made
        // from, so the note is not doubled.
        let marks = decide::injection(&output);
        let (output, injection) = decide::flagged(decide::unflagged(&output, &marks));
        self.rec.append(&Event::ToolFinished(ToolFinished {
            at: None,
            call: call.clone(),
            status,
            output: output.clone(),
            output_blob: None,
            elapsed_us: 0,
            refusal: refusal.cloned(),
            redactions,
            mcp_result: None,
            injection,
        }))?;
        self.rec.commit()?;
        Ok(CallOutcome {
            call,
            tool: tool.to_string(),
            status,
            output,
            refusal: refusal.cloned(),
            elapsed_us: 0,
            mcp_result: None,
        })
    }

    /// What the one file a call's answer depends on holds now: `None` when the answer
    /// depends on more (a tool answering from outside cairn or from a command, a call
    /// naming no path or several, a folder, or a path outside the workspace, which the
    /// fold does not count by the same name). A special file is not opened (a FIFO
    /// would block): it is "not a regular file", like a missing one.
    fn observe(&self, tool: &str, input: &serde_json::Value) -> Option<Observed> {
        let effects = self.registry.get(tool)?.effects();
        if effects.external || effects.runs_commands {
            return None;
        }
        let workspace = self.root.to_string_lossy();
        let [path] = state::named_paths(input, Some(&workspace))
            .try_into()
            .ok()?;
        let raw = input.get("path")?.as_str()?;
        let ws = cairn_tools::resolve(&self.root, &self.home, raw).ok()?;
        if ws.rel != path {
            return None;
        }
        // Beneath the root, as the tool will open it.
        let hash = match self.fs.open_read(&ws) {
            Ok((f, _)) => cairn_store::hash_reader(f).ok(),
            Err(cairn_tools::OpenError::NotRegular(cairn_tools::open::Kind::Directory)) => {
                return None;
            }
            Err(_) => None,
        };
        Some(Observed { path, hash })
    }

    /// The call's need, widened to a `tool@folder` question when a path it names lies
    /// outside the workspace (and not in the cairn home, which is never reachable).
    fn need(
        &self,
        tool: &str,
        need: Need,
        input: &serde_json::Value,
        resolved: Option<&cairn_tools::Resolved>,
    ) -> Need {
        for raw in cairn_tools::written_paths(input) {
            if let Err(cairn_tools::PathError::Outside(_)) =
                cairn_tools::Resolved::plain_in(resolved, &self.fs, &self.home, raw)
                && let Some(target) = cairn_tools::target(&self.root, raw)
                && !target.starts_with(&self.home)
            {
                return cairn_core::permission::outside_need_of(tool, &target, need, input);
            }
        }
        need
    }

    /// The session's redactor (patterns and the secret environment values).
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Folders outside the workspace allowed for good for `tool`.
    fn allowed_dirs(&self, tool: &str) -> Vec<PathBuf> {
        let prefix = format!("{tool}@");
        self.rec
            .state
            .allow
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .map(PathBuf::from)
            .collect()
    }

    /// Records the permission decision for a call (`permission`, taken on the state
    /// before the call's records) before the call acts, asking when it must.
    /// `Ok` carries a folder outside the workspace allowed for this call only.
    fn decide(
        &mut self,
        call: &str,
        tool: &str,
        permission: Permission,
        given: Option<Answer>,
    ) -> Result<Result<Option<PathBuf>, ToolOutput>> {
        let q = match permission {
            Permission::Auto => return Ok(Ok(None)),
            Permission::AllowList(q) => {
                self.rec.append(&Event::PermissionDecided {
                    call: call.to_string(),
                    key: q.key,
                    answer: Answer::Always,
                    source: AnswerSource::AllowList,
                    grants: Some(Vec::new()),
                })?;
                return Ok(Ok(None));
            }
            Permission::Ask(q) => q,
        };
        let detail = self
            .redactor
            .redact(&q.detail, &mut Counts::new())
            .into_owned();
        self.rec.append(&Event::PermissionRequested {
            call: call.to_string(),
            key: q.key.clone(),
            detail: detail.clone(),
            tool: tool.to_string(),
            guarded: q.guarded,
            keys: q.keys.clone(),
            reasons: q.reasons.clone(),
            guards: q.guards.clone(),
        })?;
        let request = Request {
            call: call.to_string(),
            tool: tool.to_string(),
            key: q.key.clone(),
            detail,
            guarded: q.guarded,
            keys: q.keys.clone(),
            reasons: q.reasons.clone(),
            guards: q.guards.clone(),
        };
        let (answer, by_person) = match given {
            Some(a) => (a, true),
            None => {
                // The question is in the log before it is awaited.
                self.rec.write_held()?;
                self.approver.answer(&request)
            }
        };
        let source = if by_person {
            AnswerSource::User
        } else {
            AnswerSource::Policy
        };
        let grants = q.grants(answer);
        self.rec.append(&Event::PermissionDecided {
            call: call.to_string(),
            key: q.key.clone(),
            answer,
            source,
            grants: (answer == Answer::Always).then(|| grants.clone()),
        })?;
        match decide::answered(tool, &q.key, answer, source) {
            Answered::Confined => Ok(Ok(None)),
            Answered::Denied(text) => Ok(Err(ToolOutput {
                status: Status::Denied,
                text,
                refusal: None,
                redacted: false,
            })),
            Answered::Run { outside } => {
                if !grants.is_empty() {
                    // Each grant names this answer, and is honoured only while the
                    // session's log holds it: the answer reaches the disk first.
                    self.rec.sync()?;
                    for key in &grants {
                        let allowed = self.allow_list.grant(key, &self.id, call)?;
                        debug_assert!(
                            allowed.contains(key),
                            "the allow list refuses the grant of {key} by {call} just recorded"
                        );
                    }
                }
                Ok(Ok(outside.map(PathBuf::from)))
            }
        }
    }

    /// Records the end of every background process that has exited since the last
    /// look (and what it changed in the workspace); returns their ids. Called at the
    /// start of every call and user message, and by `end`.
    pub fn poll_background(&mut self) -> Result<Vec<String>> {
        if self.rt.bg.is_empty() {
            return Ok(Vec::new());
        }
        let done = shell::poll(&mut self.rec, &mut self.rt, &self.root)?;
        if !done.is_empty() {
            self.rec.commit()?;
        }
        Ok(done)
    }

    /// The background processes of this session, as the log knows them.
    pub fn processes(&self) -> Vec<Process> {
        self.rec.state.processes.values().cloned().collect()
    }

    /// Stops a running background process and its whole process group, reaps it and
    /// records it as cancelled (or as what it ended with, when it had already exited).
    pub fn cancel_process(&mut self, id: &str) -> Result<ExecStatus> {
        let grace = self.config.limits.shell_kill_grace_ms;
        match shell::cancel(&mut self.rec, &mut self.rt, &self.root, id, grace)? {
            Some(status) => {
                self.rec.commit()?;
                Ok(status)
            }
            None => Err(EngineError::NotFound(format!(
                "no running background process '{id}'{}",
                match self.rec.state.processes.get(id) {
                    Some(p) => format!(" (it ended: {})", p.status),
                    None => String::from(" (`processes` lists them)"),
                }
            ))),
        }
    }

    /// Ends the session: records the end of finished background processes, cancels and
    /// reaps those still running, stops the MCP servers, kills and reaps the orphans
    /// (when this process is their subreaper, see
    /// [`cairn_tools::process::become_subreaper`]), records `session_ended` (with the
    /// orphans), saves a snapshot, syncs.
    pub fn end(self, reason: &str) -> Result<Head> {
        self.close(reason, false)
    }

    /// Ends the session as [`Engine::end`] does, recorded as failed: it could not go
    /// on because something it needs failed (the model provider), which `reason` says.
    pub fn end_failed(self, reason: &str) -> Result<Head> {
        self.close(reason, true)
    }

    fn close(mut self, reason: &str, failed: bool) -> Result<Head> {
        self.poll_background()?;
        let running: Vec<String> = self.rt.bg.keys().cloned().collect();
        let grace = self.config.limits.shell_kill_grace_ms;
        for id in running {
            shell::cancel(&mut self.rec, &mut self.rt, &self.root, &id, grace)?;
        }
        self.mcp.shutdown();
        // Everything this session started is stopped and reaped: a child left is a
        // process that escaped its command's group.
        let mut orphans = cairn_tools::process::reap_orphans(grace);
        for o in &mut orphans {
            for a in &mut o.argv {
                *a = self.redactor.redact(a, &mut Counts::new()).into_owned();
            }
        }
        self.rec.append(&Event::SessionEnded {
            at: None,
            reason: reason.to_string(),
            failed,
            orphans,
            imported: None,
        })?;
        // The signed head of everything, session_ended included. Unsigned, it would
        // prove nothing the chain does not: only a key makes one at the end.
        if self.rec.signs_checkpoints() {
            self.rec.tree_checkpoint()?;
        }
        self.rec.snapshot()?;
        self.rec.wait_snapshot()?;
        self.rec.sync()?;
        self.rec.log.head().ok_or_else(|| EngineError::EmptyLog {
            dir: self.dir.clone(),
        })
    }
}

/// The checks cairn makes on an MCP tool's input (the server checks its own schema):
/// an object with every `required` field.
fn validate_mcp(t: &McpTool, input: &serde_json::Value) -> Result<(), InputError> {
    let bad = |what: String| InputError::Schema {
        tool: t.name.clone(),
        field: None,
        what,
    };
    let Some(obj) = input.as_object() else {
        return Err(bad("expected an object".into()));
    };
    for field in t.schema["required"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
    {
        if let Some(f) = field.as_str()
            && !obj.contains_key(f)
        {
            return Err(bad(format!("missing field `{f}`")));
        }
    }
    Ok(())
}

/// Whether a tool with these effects acts outside the log in a way that cannot be taken
/// back (runs a program, reaches the network or another server), so that the records
/// announcing the call must be durable before it runs. A workspace write syncs between
/// its `intent` record and the change itself; a call that only reads is committed at
/// its end, within the group-commit window.
fn changes_the_world(effects: cairn_tools::Effects) -> bool {
    effects.runs_commands || effects.external
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::{Catalog, RecordSink, ResumeOptions, SinkStart};

    /// What the sinks a home started saw: the folders they were started for, the seqs
    /// and log lengths they were handed, and how often they were told the writer is done.
    #[derive(Default)]
    struct Seen {
        started: Vec<PathBuf>,
        handed: Vec<(u64, u64)>,
        finished: usize,
    }

    struct Sink(Arc<Mutex<Seen>>);

    impl RecordSink for Sink {
        fn record(&mut self, record: &crate::Record, log_bytes: u64) {
            if let Ok(mut s) = self.0.lock() {
                s.handed.push((record.seq, log_bytes));
            }
        }

        fn finish(&mut self) {
            if let Ok(mut s) = self.0.lock() {
                s.finished += 1;
            }
        }
    }

    fn seen(seen: &Arc<Mutex<Seen>>) -> std::sync::MutexGuard<'_, Seen> {
        seen.lock().unwrap_or_else(|e| panic!("{e}"))
    }

    fn log_bytes(dir: &Path) -> u64 {
        std::fs::metadata(cairn_store::log_path(dir))
            .unwrap_or_else(|e| panic!("{e}"))
            .len()
    }

    fn log_records(dir: &Path) -> u64 {
        std::fs::read_to_string(cairn_store::log_path(dir))
            .unwrap_or_else(|e| panic!("{e}"))
            .lines()
            .count() as u64
    }

    // Guards against the engine indexing on its own again, or a sink given by the
    // caller missing a session's first records: the home's sink start is called for
    // each session whose configuration asks, started or resumed, before its first
    // record, and for no other.
    #[test]
    fn a_homes_sink_start_is_handed_every_record_of_the_sessions_that_ask_and_no_other() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("a.txt"), "a\n").unwrap_or_else(|e| panic!("{e}"));
        let shared = Arc::new(Mutex::new(Seen::default()));
        let s = shared.clone();
        let start: SinkStart = Arc::new(move |dir: &Path| {
            seen(&s).started.push(dir.to_path_buf());
            Box::new(Sink(s.clone())) as Box<dyn RecordSink>
        });
        let home = Home::at(&tmp.path().join("home")).with_sink(start);
        let config = |on: bool| {
            let mut c = EngineConfig::new(Catalog::Thoth);
            c.durability = cairn_store::Durability::None;
            c.search_index = on;
            c
        };

        let off = Engine::start(&home, &ws, config(false)).unwrap_or_else(|e| panic!("{e}"));
        off.end("done").unwrap_or_else(|e| panic!("{e}"));
        assert!(seen(&shared).started.is_empty());

        let mut on = Engine::start(&home, &ws, config(true)).unwrap_or_else(|e| panic!("{e}"));
        on.user_message("hello").unwrap_or_else(|e| panic!("{e}"));
        on.call("read_file", serde_json::json!({ "path": "a.txt" }))
            .unwrap_or_else(|e| panic!("{e}"));
        let dir = on.dir().to_path_buf();
        on.end("done").unwrap_or_else(|e| panic!("{e}"));
        let started_records = log_records(&dir);
        {
            let s = seen(&shared);
            assert_eq!(s.started, std::slice::from_ref(&dir));
            let seqs: Vec<u64> = s.handed.iter().map(|(seq, _)| *seq).collect();
            assert_eq!(seqs, (0..started_records).collect::<Vec<_>>());
            assert_eq!(s.handed.last().map(|(_, b)| *b), Some(log_bytes(&dir)));
            assert_eq!(s.finished, 1);
        }

        // Resumed: asked for by the options over the recorded configuration (where
        // the setting is not recorded).
        let (resumed, _) = Engine::resume(
            &home,
            &dir,
            ResumeOptions {
                search_index: Some(true),
                ..ResumeOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        resumed.end("done").unwrap_or_else(|e| panic!("{e}"));
        let s = seen(&shared);
        assert_eq!(s.started, [dir.clone(), dir.clone()]);
        let seqs: Vec<u64> = s.handed.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(seqs, (0..log_records(&dir)).collect::<Vec<_>>());
        assert!(log_records(&dir) > started_records);
        assert_eq!(s.finished, 2);
    }
}
