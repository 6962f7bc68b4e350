//! A recorded session as the replay verbs read it: its folder, its project's blob store,
//! its records (strictly checked: a damaged log cannot be replayed, only verified), its
//! calls, and the workspace as it was after any record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn_core::state::{RecordedPath, recorded_path};

use cairn_core::Record;
use cairn_core::event::{Event, FileRead, FileWrite, SessionStarted, ToolFinished, WriteStatus};
use cairn_store::{BlobStore, Hash, Head, LogReader};
use cairn_tools::EngineConfig;
use cairn_tools::manifest;

use crate::error::{ReplayError, Result};

/// One recorded session, loaded whole.
#[derive(Debug)]
pub struct Session {
    pub dir: PathBuf,
    pub id: String,
    /// The project's blob store (`<project>/blobs`, the session folder being
    /// `<project>/sessions/<id>`).
    pub blobs: BlobStore,
    pub started: SessionStarted,
    pub records: Vec<Record>,
    pub head: Head,
}

/// The blob store of the project a session folder belongs to.
pub fn blob_store_of(session_dir: &Path) -> Result<BlobStore> {
    let project =
        session_dir
            .parent()
            .and_then(Path::parent)
            .ok_or_else(|| ReplayError::Session {
                path: session_dir.to_path_buf(),
                what: "not inside a project folder (<project>/sessions/<id>)".into(),
            })?;
    let root = project.join("blobs");
    if !root.is_dir() {
        return Err(ReplayError::Session {
            path: session_dir.to_path_buf(),
            what: format!("its project has no blob store at {}", root.display()),
        });
    }
    Ok(BlobStore::open(&root)?)
}

/// Checks that `dir` is a session folder (it holds `events.jsonl`).
pub fn check_session_dir(dir: &Path) -> Result<()> {
    if cairn_store::log_path(dir).is_file() {
        Ok(())
    } else {
        Err(ReplayError::Session {
            path: dir.to_path_buf(),
            what: format!("not a session folder (no {} in it)", cairn_store::LOG_FILE),
        })
    }
}

impl Session {
    /// Reads a session: every record must be intact and parse (run `verify` to list
    /// what is wrong with one that is not).
    pub fn load(dir: &Path) -> Result<Session> {
        check_session_dir(dir)?;
        let bad = |what: String| ReplayError::Session {
            path: dir.to_path_buf(),
            what,
        };
        let reader = LogReader::open(dir)?;
        let blobs = blob_store_of(dir)?;
        let mut records = Vec::new();
        for r in reader.records()? {
            let r = r?;
            let rec = cairn_tools::fold::parse_in(&r, &blobs)
                .map_err(|u| bad(format!("seq {}: {}", u.seq, u.what)))?;
            records.push(rec);
        }
        let started = match records.first().map(|r| &r.event) {
            Some(Event::SessionStarted(s)) => s.clone(),
            _ => return Err(bad("the log does not start with session_started".into())),
        };
        let head = records
            .last()
            .map(|r| Head {
                seq: r.seq,
                hash: r.hash,
            })
            .ok_or_else(|| bad("the log is empty".into()))?;
        Ok(Session {
            dir: dir.to_path_buf(),
            id: started.id.clone(),
            blobs,
            started,
            records,
            head,
        })
    }

    /// Reads what is readable of a session that does not verify: every line whose
    /// own hash holds and whose event parses, the others skipped (`verify` lists
    /// them). For an audit that must still show what the damaged log says.
    pub fn load_intact(dir: &Path) -> Result<Session> {
        check_session_dir(dir)?;
        let bad = |what: String| ReplayError::Session {
            path: dir.to_path_buf(),
            what,
        };
        let log = cairn_store::log_path(dir);
        let blobs = blob_store_of(dir)?;
        let mut records = Vec::new();
        intact_records(&log, |r| {
            if let Ok(rec) = cairn_tools::fold::parse_in(r, &blobs) {
                records.push(rec);
            }
        })?;
        let started = match records.first().map(|r| &r.event) {
            Some(Event::SessionStarted(s)) => s.clone(),
            _ => {
                return Err(bad(
                    "no intact session_started at the start of the log".into()
                ));
            }
        };
        let head = records
            .last()
            .map(|r| Head {
                seq: r.seq,
                hash: r.hash,
            })
            .ok_or_else(|| bad("the log has no intact record".into()))?;
        Ok(Session {
            dir: dir.to_path_buf(),
            id: started.id.clone(),
            blobs,
            started,
            records,
            head,
        })
    }

    /// The engine configuration the session was recorded with.
    pub fn config(&self) -> Result<EngineConfig> {
        serde_json::from_value(self.started.config.clone()).map_err(|e| ReplayError::Session {
            path: self.dir.clone(),
            what: format!("session_started.config does not parse: {e}"),
        })
    }

    /// The calls, in the order they started.
    pub fn calls(&self) -> Vec<Call> {
        calls(&self.records)
    }

    /// The manifest: the workspace when the session started, every entry with its
    /// hash (a git-backed file recorded without one has it computed from its object
    /// in the workspace's repository: an error lists every object the repository no
    /// longer has). Every entry must be a workspace path (an error names the first
    /// that is not, at seq 0).
    pub fn manifest(&self) -> Result<Vec<manifest::ManifestEntry>> {
        let mut entries = self.manifest_unresolved()?;
        let repository = PathBuf::from(&self.started.workspace);
        let mut objects = None;
        let mut missing = Vec::new();
        for e in entries
            .iter_mut()
            .filter(|e| e.hash.is_none() && e.special.is_none())
        {
            let objects =
                objects.get_or_insert_with(|| cairn_tools::git::Objects::open(&repository));
            e.hash = e.content_hash(objects);
            if e.hash.is_none() {
                missing.push((e.path.clone(), e.git.clone().unwrap_or_default()));
            }
        }
        if !missing.is_empty() {
            return Err(ReplayError::MissingGitObjects {
                repository,
                missing,
            });
        }
        Ok(entries)
    }

    /// The manifest as recorded: a git-backed entry may have no hash.
    pub fn manifest_unresolved(&self) -> Result<Vec<manifest::ManifestEntry>> {
        let bytes = self.blob(&self.started.manifest.hash, "the manifest")?;
        let entries = manifest::from_jsonl(&bytes)?;
        for e in &entries {
            let why = match recorded_path(&e.path) {
                RecordedPath::Workspace => continue,
                RecordedPath::Outside => "a manifest entry is never outside the workspace",
                RecordedPath::Bad(why) => why,
            };
            return Err(ReplayError::BadPath {
                seq: 0,
                where_: "manifest entry",
                path: e.path.clone(),
                why,
            });
        }
        Ok(entries)
    }

    /// Checks the path of every `file_write`: a workspace path, or an absolute one (a
    /// write outside the workspace, which no checkout writes). Run before anything is
    /// written from the log.
    pub fn check_write_paths(&self) -> Result<()> {
        // Keys allowed for good so far, and those granted to each call: an outside
        // write needs `<tool>@<folder>` among them.
        let mut always: std::collections::BTreeSet<String> =
            self.started.allow.iter().cloned().collect();
        let mut granted: std::collections::BTreeSet<(String, String)> = Default::default();
        let mut tools: std::collections::HashMap<String, String> = Default::default();
        for r in &self.records {
            match &r.event {
                Event::ToolStarted { call, tool, .. } => {
                    tools.insert(call.clone(), tool.clone());
                }
                Event::PermissionDecided {
                    call, key, answer, ..
                } if *answer != cairn_core::event::Answer::Deny => {
                    granted.insert((call.clone(), key.clone()));
                    if *answer == cairn_core::event::Answer::Always {
                        always.insert(key.clone());
                    }
                }
                Event::FileWrite(w) => {
                    let why = match recorded_path(&w.path) {
                        RecordedPath::Workspace => continue,
                        RecordedPath::Bad(why) => why,
                        // An imported write outside the workspace: no checkout writes
                        // it, and no permission of cairn's was asked for it.
                        RecordedPath::Outside if self.started.imported.is_some() => continue,
                        RecordedPath::Outside => {
                            let call = w.call.clone().unwrap_or_default();
                            let dir = Path::new(&w.path)
                                .parent()
                                .map_or(String::new(), |d| d.to_string_lossy().into_owned());
                            let key =
                                format!("{}@{dir}", tools.get(&call).map_or("", String::as_str));
                            if always.contains(&key) || granted.contains(&(call, key)) {
                                continue;
                            }
                            "an absolute path no permission allowed the call to write"
                        }
                    };
                    return Err(ReplayError::BadPath {
                        seq: r.seq,
                        where_: "file_write",
                        path: w.path.clone(),
                        why,
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A blob's content, checked against its name.
    pub fn blob(&self, hash: &Hash, what: &str) -> Result<Vec<u8>> {
        match self.blobs.get(hash) {
            Ok(b) if Hash::of(&b) == *hash => Ok(b),
            _ => Err(ReplayError::MissingBlobs {
                missing: vec![(what.to_string(), *hash)],
                withheld: Vec::new(),
            }),
        }
    }

    /// The content of withheld file `path` (`f`) from the session's own workspace
    /// folder, the live one, when the file there still has the recorded length and
    /// BLAKE3; `None` otherwise. Opened beneath the workspace's descriptor, regular
    /// files only (never a FIFO or a device), and read no further than the recorded
    /// length.
    pub fn live_content(&self, path: &str, f: &FileAt) -> Option<Vec<u8>> {
        use std::io::Read;
        let root = Path::new(&self.started.workspace);
        // The home may live inside the workspace; a manifest path never names it, so
        // no home needs refusing here (as `checkout::Dest`).
        let live = cairn_tools::Root::open(root, &root.join(".cairn-home-is-elsewhere")).ok()?;
        let ws = cairn_tools::WsPath {
            abs: root.join(path),
            rel: path.to_string(),
        };
        let (file, meta) = live.open_read(&ws).ok()?;
        if meta.len() != f.len {
            return None;
        }
        let mut bytes = Vec::with_capacity(usize::try_from(f.len).ok()?);
        file.take(f.len.saturating_add(1))
            .read_to_end(&mut bytes)
            .ok()?;
        (Hash::of(&bytes) == f.hash).then_some(bytes)
    }

    /// The workspace after record `at` (the head when `None`): the manifest, then every
    /// `file_write` with status `ok` up to `at` applied.
    pub fn workspace_at(&self, at: Option<u64>) -> Result<BTreeMap<String, FileAt>> {
        let at = at.unwrap_or(self.head.seq);
        if at > self.head.seq {
            return Err(ReplayError::PastHead {
                at,
                head: self.head.seq,
            });
        }
        self.check_write_paths()?;
        let mut files: BTreeMap<String, FileAt> = self
            .manifest()?
            .into_iter()
            .filter(|e| e.special.is_none())
            .map(|e| (e.path.clone(), FileAt::of(&e)))
            .collect();
        for r in self.records.iter().take_while(|r| r.seq <= at) {
            if let Event::FileWrite(w) = &r.event {
                apply_write(&mut files, w);
            }
        }
        Ok(files)
    }
}

impl Session {
    /// The files whose content after record `at` (the head when `None`) is not known:
    /// an imported change given as a diff only, with no write of the whole content
    /// after it. A checkout lists them instead of writing them.
    pub fn unknown_at(&self, at: Option<u64>) -> Vec<String> {
        let at = at.unwrap_or(self.head.seq);
        let mut unknown = std::collections::BTreeSet::new();
        for r in self.records.iter().take_while(|r| r.seq <= at) {
            if let Event::FileWrite(w) = &r.event
                && w.status == WriteStatus::Ok
            {
                if w.unknown {
                    unknown.insert(w.path.clone());
                } else {
                    unknown.remove(&w.path);
                }
            }
        }
        unknown.into_iter().collect()
    }
}

/// A file of a workspace at some point of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileAt {
    pub hash: Hash,
    pub len: u64,
    /// Unix permission bits, when known (the manifest's, or the file's before a replace).
    pub mode: Option<u32>,
    /// A credential file recorded by hash only: its content is not in the blob store
    /// (see [`Session::live_content`]).
    pub withheld: bool,
    /// Recorded by hash and size only (the manifest's `not_kept`): no checkout can
    /// write it.
    pub not_kept: Option<manifest::NotKept>,
}

impl FileAt {
    /// A file as the manifest records it.
    pub fn of(e: &manifest::ManifestEntry) -> FileAt {
        FileAt {
            // A broken invariant (an entry not resolved by `Session::manifest`, or a
            // special file) is a bug: it fails loudly.
            hash: e.hash.unwrap_or_else(|| {
                panic!(
                    "{}: Session::manifest gives every file entry its hash",
                    e.path
                )
            }),
            len: e.size,
            mode: Some(e.mode),
            withheld: e.withheld,
            not_kept: e.not_kept,
        }
    }
}

/// Applies one `file_write` to a workspace map (only writes with status `ok` happened;
/// a write outside the workspace, or to a path that is not a workspace path, is not
/// part of it).
pub fn apply_write(files: &mut BTreeMap<String, FileAt>, w: &FileWrite) {
    if w.status != WriteStatus::Ok || recorded_path(&w.path) != RecordedPath::Workspace {
        return;
    }
    if w.unknown {
        // Content unknown (an imported diff): not written (see `Session::unknown_at`).
        files.remove(&w.path);
        return;
    }
    match &w.after {
        None => {
            files.remove(&w.path);
        }
        Some(after) => {
            let mode = w.mode.or_else(|| files.get(&w.path).and_then(|f| f.mode));
            files.insert(
                w.path.clone(),
                FileAt {
                    hash: after.hash,
                    len: after.len,
                    mode,
                    withheld: w.withheld,
                    not_kept: None,
                },
            );
        }
    }
}

/// One call and the records it left.
#[derive(Debug, Clone)]
pub struct Call {
    /// The seq of its `tool_started`.
    pub seq: u64,
    pub call: String,
    pub tool: String,
    pub input: serde_json::Value,
    /// Its `tool_finished` and that record's seq; `None` when it never finished.
    pub finished: Option<(u64, ToolFinished)>,
    pub reads: Vec<FileRead>,
    pub writes: Vec<(u64, FileWrite)>,
    /// True when it recorded `shell_exec` events (a shell tool).
    pub shell: bool,
    /// The keyed hashes of the raw command lines of its `shell_exec` starts whose argv
    /// held a secret, in order.
    pub argv_hashes: Vec<String>,
    /// The permission answer it got, to give again on replay (an answer from the allow
    /// list is given as "once": the replay's project has its own list).
    pub answer: Option<cairn_core::event::Answer>,
}

impl Call {
    /// True when its recorded input held a secret (a redaction marker stands in its
    /// place): it cannot be run again as it ran.
    pub fn input_redacted(&self) -> bool {
        cairn_core::scrub::json_holds_marker(&self.input)
    }
}

/// The calls of a list of records, in the order they started.
pub fn calls(records: &[Record]) -> Vec<Call> {
    let mut out: Vec<Call> = Vec::new();
    let mut by_id: std::collections::HashMap<String, usize> = Default::default();
    for r in records {
        let mut owner = |call: &str| by_id.get(call).copied();
        match &r.event {
            Event::ToolStarted {
                call, tool, input, ..
            } => {
                by_id.insert(call.clone(), out.len());
                out.push(Call {
                    seq: r.seq,
                    call: call.clone(),
                    tool: tool.clone(),
                    input: input.clone(),
                    finished: None,
                    reads: Vec::new(),
                    writes: Vec::new(),
                    shell: false,
                    argv_hashes: Vec::new(),
                    answer: None,
                });
            }
            Event::ToolFinished(f) => {
                if let Some(i) = owner(&f.call) {
                    out[i].finished = Some((r.seq, f.clone()));
                }
            }
            Event::FileRead(fr) => {
                if let Some(i) = owner(&fr.call) {
                    out[i].reads.push(fr.clone());
                }
            }
            Event::FileWrite(w) => {
                if let Some(i) = w.call.as_deref().and_then(&mut owner) {
                    out[i].writes.push((r.seq, w.clone()));
                }
            }
            Event::PermissionDecided {
                call,
                answer,
                source,
                ..
            } => {
                if let Some(i) = owner(call.as_str()) {
                    out[i].answer = Some(match source {
                        cairn_core::event::AnswerSource::AllowList => {
                            cairn_core::event::Answer::Once
                        }
                        _ => *answer,
                    });
                }
            }
            Event::ShellExec(v) => {
                if let Some(i) = owner(v.call.as_str()) {
                    out[i].shell = true;
                    if v.end().is_none()
                        && let Some(h) = &v.argv_hash
                    {
                        out[i].argv_hashes.push(h.clone());
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Calls `each` with every record of the log at `log` whose line is whole, whose own
/// hash holds and whose event is JSON, in order; the other lines are skipped (`verify`
/// lists them). How a damaged log is read as far as it is readable.
pub(crate) fn intact_records(log: &Path, mut each: impl FnMut(&cairn_store::Record)) -> Result<()> {
    use std::io::BufRead;
    let file = std::fs::File::open(log).map_err(crate::error::io_at(log))?;
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
    let mut buf = Vec::new();
    let (mut line, mut offset) = (1u64, 0u64);
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(crate::error::io_at(log))?;
        if n == 0 {
            return Ok(());
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
            if let Ok(fields) = cairn_store::check_line(&buf)
                && let Ok(event) = serde_json::value::RawValue::from_string(
                    String::from_utf8_lossy(fields.event).into_owned(),
                )
            {
                each(&cairn_store::Record {
                    seq: fields.seq,
                    ts: fields.ts.to_string(),
                    prev: fields.prev,
                    hash: fields.hash,
                    event,
                    line,
                    offset,
                });
            }
        }
        line += 1;
        offset += n as u64;
    }
}
