//! Steps into a cairn session, through the one writer every session has (the
//! [`Recorder`]): the hash chain and the redaction pass apply to imported records as to
//! any. Source call ids become `c1`, `c2`, … in the order calls start; a call the
//! source never finished is finished here as `interrupted` when the pass ends.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use cairn_core::event::{
    Agent, Event, ExecStatus, FORMAT_VERSION, FileRead, FileWrite, ImportProgress, Imported,
    ImportedFile, Parent, ProcKind, SessionStarted, ShellEnd, ShellExec, ShellPhase, Status,
    ToolFinished, WebFetched, WriteOp, WriteStatus,
};
use cairn_core::redact::{Counts, Redactor};
use cairn_core::state::State;
use cairn_engine::project::{Home, new_session_id};
use cairn_store::{BlobRef, BlobStore, Durability, Hash, LogWriter, Options, SnapshotStore};
use cairn_tools::{EngineConfig, Recorder};

use crate::error::{ImportError, Result};
use crate::step::{ModelCall, Shell, Step, Write, WriteKind};

/// Bytes of a call's output kept inline in its `tool_finished`; the whole output goes
/// into `output_blob` past it.
pub const OUTPUT_INLINE_BYTES_MAX: usize = 16 * 1024;

/// What a session written by an import holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Written {
    pub calls: u64,
    pub records: u64,
}

/// A pass written and ended.
#[derive(Debug, Clone)]
pub struct Finished {
    pub id: String,
    pub dir: PathBuf,
    pub written: Written,
    /// Its last record: (seq, hash).
    pub head: (u64, Hash),
    pub interrupted: u64,
}

/// A session being written by an import.
pub struct Writer {
    rec: Recorder,
    pub id: String,
    pub dir: PathBuf,
    root: PathBuf,
    /// The provider model turns are recorded with (the agent's, until told otherwise).
    provider: String,
    /// Source call id → (cairn call id, tool).
    calls: HashMap<String, (String, String)>,
    /// Source ids of calls started and not finished, in order.
    open: Vec<String>,
    /// Calls that ran a command already (so an output does not record it again).
    ran: std::collections::HashSet<String>,
    redactor: Redactor,
    pub written: Written,
    /// Calls finished here as interrupted at the end of the pass.
    pub interrupted: u64,
    /// Calls the session had before this pass (a continuation numbers on from them).
    base: u64,
    /// MCP results waiting for their call's end: the redacted result, and whether the
    /// server said the call failed.
    mcp_results: HashMap<String, (BlobRef, bool)>,
    /// The source's time of what is being written ([`Step::At`]), normalised to
    /// RFC 3339: carried as `at` by the events a person reads times from.
    at: Option<String>,
    /// Source call id → the source's time of its start, in µs since the epoch: its
    /// end's time less this is the call's `elapsed_us`.
    started_us: HashMap<String, i64>,
}

/// An import writes with durability `none` and makes each pass durable once, at its
/// end ([`Writer::finish`]): with `batch`, every record after a blob paid a `syncfs`.
/// A pass cut short by a crash has no `session_ended.imported` on the disk, so the
/// index ([`crate::Index`]) does not count it and the next import writes it anew.
const IMPORT_DURABILITY: Durability = Durability::None;

fn import_options() -> Options {
    Options {
        durability: IMPORT_DURABILITY,
        ..Options::default()
    }
}

/// A hook appends to a live session and exits at once: each of its records is durable
/// as with a live session's `batch`.
fn durable_options() -> Options {
    Options {
        durability: Durability::Batch,
        ..Options::default()
    }
}

impl Writer {
    /// Starts a new session in the project of `root` (the source's working directory).
    pub fn create(
        home: &Home,
        root: &Path,
        imported: Imported,
        parent: Option<Parent>,
    ) -> Result<Writer> {
        Writer::create_as(home, root, Some(imported), None, parent, Vec::new())
    }

    /// Starts a session recorded live from another agent (its hooks): `allow` is the
    /// project's allow list now, which its permission answers are taken from. The
    /// workspace is scanned into the session's manifest first, as a session of cairn's
    /// own starts (so that `checkout` at any point starts from it).
    pub fn create_live(
        home: &Home,
        root: &Path,
        agent: Agent,
        allow: Vec<String>,
    ) -> Result<Writer> {
        Writer::create_as(home, root, None, Some(agent), None, allow)
    }

    fn create_as(
        home: &Home,
        root: &Path,
        imported: Option<Imported>,
        agent: Option<Agent>,
        parent: Option<Parent>,
        allow: Vec<String>,
    ) -> Result<Writer> {
        let project = home.project(root);
        cairn_store::private::create_dir_all(&project.sessions_dir())
            .map_err(ImportError::io(&project.dir))?;
        let note = project.dir.join("workspace");
        if !note.exists() {
            std::fs::write(&note, root.to_string_lossy().as_bytes())
                .map_err(ImportError::io(&note))?;
        }
        let blobs = BlobStore::open(&project.blobs_dir())?.without_sync();
        let (manifest, manifest_files, stored) = if agent.is_some() {
            // Live: the workspace as it is now, as cairn's own sessions capture it.
            live_manifest(home, root, &project, &blobs)?
        } else {
            // Imported: nothing of the workspace was captured, the manifest is empty.
            let empty = blobs.put(b"")?;
            (empty, 0, vec![empty.hash])
        };
        let id = new_session_id();
        let dir = project.session_dir(&id);
        // A live session is born as cairn's own are, its first record durable; an
        // import makes a pass durable once, at its end.
        let options = if agent.is_some() {
            durable_options()
        } else {
            import_options()
        };
        let log = LogWriter::create(&dir, options)?;
        let config = EngineConfig::new(cairn_tools::Catalog::Thoth);
        let mut rec = Recorder::new(
            log,
            State::default(),
            blobs,
            SnapshotStore::new(&dir),
            options.durability,
            // One snapshot, at the end of the pass: a snapshot every 1000 records
            // archived the whole growing conversation each time, and made the home 14
            // times the size of the sources (1 GB of rollouts: 14 GB).
            0,
            config.checkpoint_every,
        );
        // What the start stored (the manifest, files git does not hold) is made
        // durable, file by file when few, before the first record names it.
        rec.note_blobs(&stored);
        // A live session (another agent's, through its hooks or `mcp proxy`) hands its
        // records to the export sink its home was given (the live OpenTelemetry
        // export), as cairn's own sessions do; an import's home has none.
        if agent.is_some() {
            rec.set_sink(home.start_sink(&dir, false));
        }
        let redactor = Redactor::with_env(std::env::vars());
        rec.set_redaction(redactor.clone(), Some(project.secret_key()?));
        let provider = provider_of(
            imported
                .as_ref()
                .map(|i| i.agent.as_str())
                .or(agent.as_ref().map(|a| a.name.as_str()))
                .unwrap_or(""),
        );
        let started = SessionStarted {
            id: id.clone(),
            format_version: FORMAT_VERSION,
            engine_version: env!("CARGO_PKG_VERSION").to_string(),
            workspace: root.to_string_lossy().into_owned(),
            catalog: config.catalog.name().to_string(),
            tools: Vec::new(),
            manifest,
            manifest_files,
            config: serde_json::to_value(&config).unwrap_or_default(),
            parent,
            allow,
            inherited: None,
            sandbox: None,
            imported: imported.map(Box::new),
            agent: agent.map(Box::new),
        };
        rec.append(&Event::SessionStarted(started))?;
        Ok(Writer {
            rec,
            id,
            dir,
            root: root.to_path_buf(),
            provider: provider.to_string(),
            calls: HashMap::new(),
            open: Vec::new(),
            ran: Default::default(),
            redactor,
            written: Written {
                calls: 0,
                records: 1,
            },
            interrupted: 0,
            base: 0,
            mcp_results: HashMap::new(),
            at: None,
            started_us: HashMap::new(),
        })
    }

    /// Opens an imported session to append the part its source grew by: records
    /// `session_resumed` naming the file as read now.
    pub fn resume(home: &Home, dir: &Path, file: ImportedFile) -> Result<Writer> {
        // One snapshot, at the end of the pass: a snapshot every 1000 records archived
        // the whole growing conversation each time, and made the home 14 times the size
        // of the sources (1 GB of rollouts: 14 GB).
        let (mut w, previous_head) = Writer::open_existing(home, dir, import_options(), None)?;
        w.rec.append(&Event::SessionResumed {
            previous_head,
            findings: Vec::new(),
            interrupted_steps: Vec::new(),
            sandbox: None,
            imported: Some(file),
        })?;
        w.written.records = 1;
        Ok(w)
    }

    /// Opens a live session that `agent`'s hook started, to append to it as it is:
    /// nothing is recorded by opening (a hook opens its session once per call). The
    /// log's torn tail, if any, is repaired; the state is folded from the latest
    /// snapshot.
    pub fn reopen(home: &Home, dir: &Path, agent: &str) -> Result<Writer> {
        // No snapshot on the way: the session's end takes one.
        Ok(Writer::open_existing(home, dir, durable_options(), Some(agent))?.0)
    }

    /// A writer appending to the session in `dir` (torn tail repaired, state folded
    /// from the latest snapshot, no snapshot taken on the way) with the log's
    /// `options`, and the hash of the head it found. `live_agent` names the agent
    /// whose hook started the session: then its id and workspace are the fold's, and
    /// the first record is not read again (a tenth of a hook process's work).
    fn open_existing(
        home: &Home,
        dir: &Path,
        options: Options,
        live_agent: Option<&str>,
    ) -> Result<(Writer, Hash)> {
        let durability = options.durability;
        let (log, recovery) = LogWriter::open(dir, options)?;
        let folded = cairn_tools::fold::fold_with_snapshot(dir)?;
        let started = match (live_agent, &folded.state.session, &folded.state.workspace) {
            (Some(agent), Some(id), Some(workspace)) => Origin {
                id: id.clone(),
                workspace: workspace.clone(),
                agent: Some(agent.to_string()),
                live: true,
            },
            _ => Origin::of(first_started(dir)?),
        };
        let root = PathBuf::from(&started.workspace);
        let project = home.project(&root);
        let blobs = BlobStore::open(&project.blobs_dir())?.without_sync();
        let config = EngineConfig::new(cairn_tools::Catalog::Thoth);
        let calls_started = folded.state.calls_started;
        let mut rec = Recorder::new(
            log,
            folded.state,
            blobs,
            SnapshotStore::new(dir),
            durability,
            0,
            config.checkpoint_every,
        );
        if started.live {
            rec.set_sink(home.start_sink(dir, false));
        }
        let redactor = Redactor::with_env(std::env::vars());
        rec.set_redaction(redactor.clone(), Some(project.secret_key()?));
        let agent = started.agent.unwrap_or_default();
        let writer = Writer {
            rec,
            id: started.id,
            dir: dir.to_path_buf(),
            root,
            provider: provider_of(&agent).to_string(),
            calls: HashMap::new(),
            open: Vec::new(),
            ran: Default::default(),
            redactor,
            written: Written::default(),
            interrupted: 0,
            base: calls_started,
            mcp_results: HashMap::new(),
            at: None,
            started_us: HashMap::new(),
        };
        Ok((writer, recovery.head.map_or(Hash::ZERO, |h| h.hash)))
    }

    /// Records the model turns that follow as `provider`'s (an ATIF step names its own).
    pub fn set_provider(&mut self, provider: &str) {
        provider.clone_into(&mut self.provider);
    }

    /// The folded state of the session as written so far.
    pub fn state(&self) -> &State {
        &self.rec.state
    }

    /// Takes up a call started by an earlier writer of this session: `source` is the
    /// agent's id of it, `call` cairn's, still open.
    pub fn adopt(&mut self, source: &str, call: &str, tool: &str) {
        self.calls
            .insert(source.to_string(), (call.to_string(), tool.to_string()));
        self.open.push(source.to_string());
    }

    /// The cairn id of the agent's call `source`, once started.
    pub fn call_id(&self, source: &str) -> Option<&str> {
        self.call_of(source)
    }

    /// Records an event that is not a step (a permission question and its answer, the
    /// end of a live session).
    pub fn record(&mut self, event: &Event) -> Result<()> {
        self.append(event)
    }

    /// A blob of `bytes` as they are (a file's content: the workspace's own bytes,
    /// which checkout writes back; a credential file is never read into one).
    pub fn blob(&mut self, bytes: &[u8]) -> Result<BlobRef> {
        Ok(self.rec.put_blob(bytes)?)
    }

    /// Makes what was written durable (records and blobs), then takes a snapshot
    /// when `snapshot` (the end of a live session).
    pub fn close(mut self, snapshot: bool) -> Result<(u64, Hash)> {
        if snapshot {
            self.rec.snapshot()?;
            self.rec.wait_snapshot()?;
        }
        self.rec.sync()?;
        Ok(self.head())
    }

    /// Makes what was written durable (records and blobs), then leaves the state at the
    /// head as the session's one snapshot, written without waiting for the disk
    /// ([`SnapshotStore::save_only_cache`]): the next process to open the session folds
    /// nothing ([`Writer::reopen`]). A hook closes so after each event.
    pub fn close_cached(mut self) -> Result<(u64, Hash)> {
        self.rec.sync()?;
        if let Some(head) = self.rec.log.head() {
            let meta = cairn_store::SnapshotMeta {
                format_version: cairn_core::state::STATE_FORMAT_VERSION,
                seq: head.seq,
                record_hash: head.hash,
            };
            self.rec
                .snapshots
                .save_only_cache(&meta, &self.rec.state.to_bytes())?;
        }
        Ok(self.head())
    }

    /// The last record written: (seq, hash).
    pub fn head(&self) -> (u64, Hash) {
        match self.rec.log.head() {
            Some(h) => (h.seq, h.hash),
            None => (0, Hash::ZERO),
        }
    }

    fn append(&mut self, event: &Event) -> Result<()> {
        self.rec.append(event)?;
        self.written.records += 1;
        Ok(())
    }

    /// A blob of `bytes` redacted.
    fn redacted_blob(&mut self, bytes: &[u8]) -> Result<BlobRef> {
        let clean = self.redactor.redact_bytes(bytes, &mut Counts::new());
        Ok(self.rec.put_blob(&clean)?)
    }

    /// A workspace path for `path`: relative to the root when inside it, else
    /// absolute (a write outside the workspace, which no checkout writes).
    fn ws_path(&self, path: &str, cwd: Option<&str>) -> String {
        let root = self.root.to_string_lossy();
        if crate::foreign_path(&root) || crate::foreign_path(path) {
            return foreign_ws_path(&root, path);
        }
        let p = Path::new(path);
        let abs = if p.is_absolute() {
            p.to_path_buf()
        } else {
            Path::new(cwd.unwrap_or(&self.root.to_string_lossy())).join(p)
        };
        let abs = normalise(&abs);
        match abs.strip_prefix(&self.root) {
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => abs.to_string_lossy().into_owned(),
        }
    }

    fn call_of(&self, source: &str) -> Option<&str> {
        self.calls.get(source).map(|(c, _)| c.as_str())
    }

    /// The cairn id of source call `id`, starting a call of `tool` for it when the
    /// source showed an outcome without its call.
    fn ensure_call(&mut self, id: &str, tool: &str, input: serde_json::Value) -> Result<String> {
        if let Some(c) = self.call_of(id) {
            return Ok(c.to_string());
        }
        self.step(Step::Call {
            id: id.to_string(),
            tool: tool.to_string(),
            input,
            mcp: None,
        })?;
        Ok(self.call_of(id).unwrap_or_default().to_string())
    }

    /// Records one step.
    pub fn step(&mut self, step: Step) -> Result<()> {
        match step {
            Step::At(t) => {
                // A time that does not parse is no time: the events after it carry
                // none rather than a text no view can read.
                self.at = t
                    .as_deref()
                    .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                    .map(|t| t.to_string());
                Ok(())
            }
            Step::User { text } => self.append(&Event::UserMessage {
                at: self.at.clone(),
                text,
                text_hash: None,
            }),
            Step::Model {
                model,
                text,
                calls,
                usage,
            } => self.append(&Event::ModelTurn {
                at: self.at.clone(),
                provider: self.provider.clone(),
                model,
                text,
                tool_calls: calls.iter().map(model_call).collect(),
                usage: usage.map(|u| usage_of(&self.provider, u)),
                interrupted: false,
            }),
            Step::Call {
                id,
                tool,
                input,
                mcp,
            } => self.start(id, tool, input, mcp),
            Step::Shell(s) => self.shell(s),
            Step::Write(w) => self.write(w),
            Step::Read {
                id,
                path,
                first,
                lines,
                total_lines,
                content,
            } => self.read(&id, &path, (first, lines, total_lines), &content),
            Step::Fetch {
                id,
                url,
                status,
                text,
                error,
            } => self.fetch(&id, url, status, text, error),
            Step::McpResult { id, result, failed } => {
                let blob = self.redacted_blob(result.to_string().as_bytes())?;
                self.mcp_results.insert(id, (blob, failed));
                Ok(())
            }
            Step::End { id, status, output } => self.end(&id, status, &output),
            Step::Item { kind, unknown, raw } => {
                let item = self.redacted_blob(&raw)?;
                self.append(&Event::SourceItem {
                    kind,
                    unknown,
                    item,
                })
            }
        }
    }

    /// A call started, once: a second start of the same id adds nothing.
    fn start(
        &mut self,
        id: String,
        tool: String,
        input: serde_json::Value,
        mcp: Option<cairn_core::event::McpRef>,
    ) -> Result<()> {
        if self.calls.contains_key(&id) {
            return Ok(());
        }
        let call = format!("c{}", self.base + self.written.calls + 1);
        self.written.calls += 1;
        self.calls.insert(id.clone(), (call.clone(), tool.clone()));
        if let Some(us) = micros(self.at.as_deref()) {
            self.started_us.insert(id.clone(), us);
        }
        self.open.push(id);
        self.append(&Event::ToolStarted {
            at: self.at.clone(),
            call,
            tool,
            input,
            input_hash: None,
            mcp,
            observed: None,
        })
    }

    /// Lines read: `lines` lines from line `first`, of a file of `total_lines`.
    fn read(
        &mut self,
        id: &str,
        path: &str,
        (first, lines, total_lines): (u32, u32, u32),
        content: &str,
    ) -> Result<()> {
        let call = self.ensure_call(id, "read", serde_json::json!({ "path": path }))?;
        let path = self.ws_path(path, None);
        let last = first.saturating_add(lines.saturating_sub(1));
        self.append(&Event::FileRead(FileRead {
            call,
            path,
            ranges: if lines == 0 {
                Vec::new()
            } else {
                vec![(first.max(1), last.max(1))]
            },
            total_lines,
            hash: Hash::of(content.as_bytes()),
        }))
    }

    /// A fetch, its text kept as a blob, redacted.
    fn fetch(
        &mut self,
        id: &str,
        url: String,
        status: Option<u16>,
        text: Option<String>,
        error: Option<String>,
    ) -> Result<()> {
        let call = self.ensure_call(id, "fetch", serde_json::json!({ "url": url }))?;
        let (bytes, hash, text) = match text {
            Some(t) => (
                t.len() as u64,
                Some(Hash::of(t.as_bytes())),
                Some(self.redacted_blob(t.as_bytes())?),
            ),
            None => (0, None, None),
        };
        self.append(&Event::WebFetched(WebFetched {
            call,
            url,
            final_url: None,
            redirects: Vec::new(),
            status,
            content_type: None,
            bytes,
            hash,
            text,
            error,
        }))
    }

    fn end(&mut self, id: &str, status: Status, output: &str) -> Result<()> {
        let call = self.ensure_call(id, "unknown", serde_json::Value::Null)?;
        let Some(pos) = self.open.iter().position(|o| o == id) else {
            // Finished already: a second outcome adds nothing.
            return Ok(());
        };
        self.open.remove(pos);
        let (mcp_result, status) = match self.mcp_results.remove(id) {
            Some((blob, true)) if status == Status::Ok => (Some(blob), Status::Error),
            Some((blob, _)) => (Some(blob), status),
            None => (None, status),
        };
        let (output, output_blob) = if output.len() > OUTPUT_INLINE_BYTES_MAX {
            let blob = self.redacted_blob(output.as_bytes())?;
            let mut cut = OUTPUT_INLINE_BYTES_MAX;
            while !output.is_char_boundary(cut) {
                cut -= 1;
            }
            (output[..cut].to_string(), Some(blob))
        } else {
            (output.to_string(), None)
        };
        // The call's own run time: from its start's source time to its end's, when
        // the source gave both (0 when not, or when the clock went back).
        let elapsed_us = match (self.started_us.remove(id), micros(self.at.as_deref())) {
            (Some(start), Some(end)) => u64::try_from(end - start).unwrap_or(0),
            _ => 0,
        };
        self.append(&Event::ToolFinished(ToolFinished {
            at: self.at.clone(),
            call,
            status,
            output,
            output_blob,
            elapsed_us,
            refusal: None,
            redactions: Default::default(),
            mcp_result,
            injection: Vec::new(),
        }))
    }

    fn shell(&mut self, s: Shell) -> Result<()> {
        let call = self.ensure_call(
            &s.id,
            "shell",
            serde_json::json!({ "command": s.argv.join(" ") }),
        )?;
        if !self.ran.insert(s.id.clone()) {
            return Ok(());
        }
        let cwd = match &s.cwd {
            Some(c) => self.ws_path(c, None),
            None => String::new(),
        };
        let started = ShellExec {
            call: call.clone(),
            id: None,
            argv: s.argv.clone(),
            argv_hash: None,
            cwd: cwd.clone(),
            pid: None,
            start_time: None,
            kind: ProcKind::Foreground,
            timeout_ms: None,
            log: None,
            sandbox: None,
            phase: ShellPhase::Started,
        };
        self.append(&Event::ShellExec(started.clone()))?;
        let mut end = ShellEnd::new(match (s.interrupted, s.exit_code) {
            (true, _) => ExecStatus::Cancelled,
            (false, Some(0)) => ExecStatus::Ok,
            (false, Some(_)) => ExecStatus::Failed,
            (false, None) => ExecStatus::Lost,
        });
        end.exit_code = s.exit_code;
        end.elapsed_us = s.elapsed_us;
        let mut out = |text: &str| -> Result<(u64, Option<BlobRef>)> {
            if text.is_empty() {
                return Ok((0, None));
            }
            let clean = self.redactor.redact(text, &mut Counts::new()).into_owned();
            Ok((
                clean.len() as u64,
                Some(self.rec.put_blob(clean.as_bytes())?),
            ))
        };
        let (n, blob) = out(&s.stdout)?;
        end.stdout_bytes = Some(n);
        end.stdout = blob;
        let (n, blob) = out(&s.stderr)?;
        end.stderr_bytes = Some(n);
        end.stderr = blob;
        if s.exit_code.is_none() && !s.interrupted {
            end.error = Some("the source does not record how the command ended".into());
        }
        self.append(&Event::ShellExec(ShellExec {
            phase: ShellPhase::Finished(end),
            ..started
        }))
    }

    fn write(&mut self, w: Write) -> Result<()> {
        let call = self.ensure_call(&w.id, "write", serde_json::json!({ "path": w.path }))?;
        let path = self.ws_path(&w.path, None);
        let before = match &w.before {
            Some(b) => Some(self.rec.put_blob(b.as_bytes())?),
            None => None,
        };
        let after = match &w.after {
            Some(a) => Some(self.rec.put_blob(a.as_bytes())?),
            None => None,
        };
        let diff = match &w.diff {
            Some(d) => Some(self.redacted_blob(d.as_bytes())?),
            None => None,
        };
        let unknown = after.is_none() && w.kind != WriteKind::Delete;
        let lines_after = w.after.as_deref().map_or(0, |a| a.lines().count() as u32);
        self.append(&Event::FileWrite(FileWrite {
            call: Some(call),
            op: match w.kind {
                WriteKind::Create => WriteOp::Create,
                WriteKind::Replace => WriteOp::Replace,
                WriteKind::Edit => WriteOp::Edit,
                WriteKind::Delete => WriteOp::Delete,
            },
            path,
            before,
            after,
            lines_after,
            mode: None,
            status: if w.ok {
                WriteStatus::Ok
            } else {
                WriteStatus::Failed
            },
            withheld: false,
            unknown,
            diff,
        }))
    }

    /// Records a file written by the agent's call `id`, its contents before and
    /// after already stored as blobs (`None`: no such file).
    pub fn file_write(
        &mut self,
        id: &str,
        path: &str,
        op: WriteOp,
        before: Option<BlobRef>,
        after: Option<(BlobRef, u32)>,
        ok: bool,
    ) -> Result<()> {
        let call = self.ensure_call(id, "write", serde_json::json!({ "path": path }))?;
        let path = self.ws_path(path, None);
        self.append(&Event::FileWrite(FileWrite {
            call: Some(call),
            op,
            path,
            before,
            after: after.map(|a| a.0),
            lines_after: after.map_or(0, |a| a.1),
            mode: None,
            status: if ok {
                WriteStatus::Ok
            } else {
                WriteStatus::Failed
            },
            withheld: false,
            unknown: after.is_none() && op != WriteOp::Delete,
            diff: None,
        }))
    }

    /// Ends a live session: calls left open are finished as interrupted, then
    /// `session_ended` with `reason`, a snapshot, and everything made durable.
    pub fn end_live(mut self, reason: &str) -> Result<(u64, Hash)> {
        // A call the source never ended has no end time: it is not said to have
        // run until the last line.
        let last = self.at.take();
        for id in self.open.clone() {
            self.interrupted += 1;
            self.end(
                &id,
                Status::Interrupted,
                "the agent never said how this call ended: it was interrupted",
            )?;
        }
        self.append(&Event::SessionEnded {
            at: last,
            reason: reason.to_string(),
            orphans: Vec::new(),
            failed: false,
            imported: None,
        })?;
        self.close(true)
    }

    /// Ends the pass: calls left open are finished as interrupted, then
    /// `session_ended` records how far the source was read.
    pub fn finish(mut self, progress: ImportProgress) -> Result<Finished> {
        // A call the source never ended has no end time: it is not said to have
        // run until the last line.
        let last = self.at.take();
        for id in self.open.clone() {
            self.interrupted += 1;
            self.end(
                &id,
                Status::Interrupted,
                "the source has no result for this call: it was interrupted (or its result is in a part of the file not written yet)",
            )?;
        }
        self.append(&Event::SessionEnded {
            at: last,
            reason: "imported".into(),
            orphans: Vec::new(),
            failed: false,
            imported: Some(progress),
        })?;
        self.rec.snapshot()?;
        self.rec.wait_snapshot()?;
        // The one durable flush of the pass: blobs, then the log.
        self.rec.flush_durable()?;
        let head = self.head();
        Ok(Finished {
            id: self.id,
            dir: self.dir,
            written: self.written,
            head,
            interrupted: self.interrupted,
        })
    }
}

/// The manifest of a live session: the workspace as it is now (cairn's home left out
/// when it lies inside), and the number of files in it.
fn live_manifest(
    home: &Home,
    root: &Path,
    project: &cairn_engine::Project,
    blobs: &BlobStore,
) -> Result<(BlobRef, u64, Vec<Hash>)> {
    // Captured as a session of cairn's own starts, with its default capture (`git`:
    // files git holds unchanged are named by their git blob, not copied into the home).
    let config = EngineConfig::new(cairn_tools::Catalog::Thoth);
    let credentials = cairn_core::permission::CredentialFiles::new(&config.credential_files)
        .map_err(|e| ImportError::HookInput {
            what: e.to_string(),
        })?;
    let mut cache = cairn_tools::manifest::ScanCache::new(project.manifest_cache(), credentials)
        .with_capture(config.capture, config.limits.capture_file_bytes_max);
    let inner = home
        .root
        .strip_prefix(root)
        .ok()
        .map(|inner| inner.to_string_lossy().into_owned());
    let (files, manifest) =
        cairn_tools::manifest::capture_start(root, blobs, &mut cache, inner.as_deref())?;
    Ok((
        manifest,
        files.len() as u64,
        std::mem::take(&mut cache.stored),
    ))
}

fn provider_of(agent: &str) -> &'static str {
    match agent {
        "codex" => "openai",
        "claude" => "anthropic",
        "gemini" => "google",
        _ => "unknown",
    }
}

/// A source's usage object in cairn's terms (see `Event::ModelTurn`): `input_tokens`
/// counting every input token, `cached_tokens` and `cache_write_tokens` the parts read
/// from and written to the prompt cache (left out when 0), and the source's own object
/// as it was under `source`. Codex (`openai`) counts cached input inside
/// `input_tokens` (`cached_input_tokens`, `cache_write_input_tokens`); Claude Code
/// (`anthropic`) leaves it out (`cache_read_input_tokens`,
/// `cache_creation_input_tokens`).
pub fn usage_of(provider: &str, source: serde_json::Value) -> serde_json::Value {
    let n = |k: &str| {
        source
            .get(k)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    let (input, cached, written) = match provider {
        "anthropic" => {
            let (cached, written) = (
                n("cache_read_input_tokens"),
                n("cache_creation_input_tokens"),
            );
            (n("input_tokens") + cached + written, cached, written)
        }
        _ => (
            n("input_tokens"),
            n("cached_input_tokens"),
            n("cache_write_input_tokens"),
        ),
    };
    let mut u = serde_json::json!({
        "input_tokens": input,
        "output_tokens": n("output_tokens"),
    });
    if cached > 0 {
        u["cached_tokens"] = cached.into();
    }
    if written > 0 {
        u["cache_write_tokens"] = written.into();
    }
    u["source"] = source;
    u
}

/// µs since the epoch of an RFC 3339 time.
fn micros(t: Option<&str>) -> Option<i64> {
    t?.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_microsecond())
}

fn model_call(c: &ModelCall) -> serde_json::Value {
    serde_json::json!({ "id": c.id, "name": c.name, "input": c.input })
}

/// `path` with `.` and `..` taken lexically.
/// [`Writer::ws_path`] where the root or the path is another system's
/// ([`crate::foreign_path`]): inside the root (compared as Windows compares, letters
/// in any case, `\\` or `/`), relative with `/` between its parts; else the source's
/// own text (a relative path named from the root).
fn foreign_ws_path(root: &str, path: &str) -> String {
    let flat = |s: &str| s.replace('\\', "/").to_ascii_lowercase();
    let (r, p) = (flat(root.trim_end_matches(['\\', '/'])), flat(path));
    if !crate::foreign_path(path) {
        return path.replace('\\', "/");
    }
    match p.strip_prefix(&r) {
        Some(rest) if rest.starts_with('/') && path.is_char_boundary(r.len() + 1) => {
            path[r.len() + 1..].replace('\\', "/")
        }
        _ => path.to_string(),
    }
}

fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What a writer reopened needs of a session's `session_started`.
struct Origin {
    id: String,
    workspace: String,
    /// The agent that made it: live (`agent.name`) or imported (`imported.agent`).
    agent: Option<String>,
    /// Recorded live, by an agent's hook: its records go to the home's sink too.
    live: bool,
}

impl Origin {
    fn of(started: SessionStarted) -> Origin {
        Origin {
            live: started.agent.is_some(),
            agent: started
                .agent
                .map(|a| a.name)
                .or(started.imported.map(|i| i.agent)),
            id: started.id,
            workspace: started.workspace,
        }
    }
}

/// The `session_started` of the session at `dir`.
pub fn first_started(dir: &Path) -> Result<SessionStarted> {
    let reader = cairn_store::LogReader::open(dir)?;
    let blobs = cairn_tools::fold::project_blobs(dir);
    if let Some(raw) = reader.first()? {
        let rec = cairn_tools::fold::parse_maybe_in(&raw, blobs.as_ref());
        if let Ok(r) = rec
            && let Event::SessionStarted(s) = r.event
        {
            return Ok(s);
        }
    }
    Err(ImportError::NotImported {
        dir: dir.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    // Regression: a Windows path of a transcript was joined to the folder the import
    // ran in (`/current/dir/e:\Workspace\…`).
    #[test]
    fn another_systems_paths_stay_the_sources_own_text() {
        let root = r"e:\Workspace\app";
        assert!(crate::foreign_path(root));
        assert!(crate::foreign_path("C:/x") && crate::foreign_path("C:"));
        assert!(crate::foreign_path(r"\\server\share\x"));
        assert!(!crate::foreign_path("/home/x") && !crate::foreign_path("src/a.rs"));
        assert!(!crate::foreign_path("a:b"));
        assert_eq!(crate::root_of(root), std::path::PathBuf::from(root));
        assert_eq!(
            super::foreign_ws_path(root, r"E:\workspace\app\src\main.rs"),
            "src/main.rs"
        );
        assert_eq!(super::foreign_ws_path(root, r"src\lib.rs"), "src/lib.rs");
        assert_eq!(
            super::foreign_ws_path(root, r"e:\Workspace\application\x.rs"),
            r"e:\Workspace\application\x.rs"
        );
        assert_eq!(
            super::foreign_ws_path(root, r"d:\other\y.rs"),
            r"d:\other\y.rs"
        );
    }
}
