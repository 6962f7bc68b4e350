//! The searchable documents of a session: what the user said, what the model said, each
//! tool call's input and output. Read through the same parser every reader of a session
//! uses (`cairn_tools::fold::parse_in`, spilled fields put back from the project's
//! blobs), so what is indexed is what the log holds: redacted before it was written. A
//! capped tool output is read whole from its blob, up to [`SEARCH_DOC_BYTES_MAX`].

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use cairn_core::Record;
use cairn_core::event::Event;
use cairn_store::{BlobStore, LogReader};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The most bytes of one document that are indexed and kept (cut at a character
/// boundary): a 50 MB command output is findable by its first 64 KiB.
pub const SEARCH_DOC_BYTES_MAX: usize = 64 * 1024;

/// What a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A `user_message`.
    User,
    /// The text of a `model_turn`.
    Model,
    /// A call's input (`tool_started`), as compact JSON.
    Input,
    /// A call's output (`tool_finished`), whole when it lives in a blob.
    Output,
}

impl Kind {
    /// Its name in output and in both indexes.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::User => "user",
            Kind::Model => "model",
            Kind::Input => "input",
            Kind::Output => "output",
        }
    }

    /// The kind of a stored name.
    pub fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "user" => Kind::User,
            "model" => Kind::Model,
            "input" => Kind::Input,
            "output" => Kind::Output,
            _ => return None,
        })
    }
}

/// One searchable document: one record's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    pub seq: u64,
    /// The record's time as the log writes it.
    pub ts: String,
    /// The same, in microseconds since the epoch (what `since` compares).
    pub ts_us: i64,
    pub kind: Kind,
    /// The call id, for inputs and outputs.
    pub call: Option<String>,
    /// The tool, for inputs and outputs.
    pub tool: Option<String>,
    /// The text, at most [`SEARCH_DOC_BYTES_MAX`] bytes.
    pub text: String,
}

/// Which session documents belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionMeta {
    pub id: String,
    /// The project's key (its folder under `projects/`).
    pub project: String,
    /// The workspace root the session ran in.
    pub workspace: String,
}

/// A session's documents from some seq on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDocs {
    pub session: SessionMeta,
    pub docs: Vec<Doc>,
    /// The first seq not read yet: where the next update starts.
    pub next_seq: u64,
    /// The hash of the record before `next_seq` (the last one read), when known: what
    /// tells a later update that the log still holds what was indexed.
    pub last_hash: Option<cairn_store::Hash>,
    /// Why reading stopped before the end of the file, when it did (a torn tail of a
    /// session still being written, or damage `cairn verify` reports).
    pub stopped: Option<String>,
    /// The output blobs of each command finished before `next_seq` whose call had not
    /// finished by then: what an update from `next_seq` needs to index that call's
    /// output from its command's stdout and stderr, not the tool's text for the model.
    pub open_commands: OpenCommands,
}

/// The output blobs (stdout, then stderr) of each command finished whose call has not
/// finished, by call id.
pub type OpenCommands = HashMap<String, Vec<cairn_store::BlobRef>>;

/// Where an update of a session starts from: what the index holds of it before.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// The session (needed when starting past seq 0: its id and workspace are in its
    /// first record).
    pub meta: Option<SessionMeta>,
    /// The tool of each call started before, so an output read now is named by its
    /// tool.
    pub tools: HashMap<String, String>,
    /// The commands finished before whose calls had not ([`SessionDocs::open_commands`]).
    pub commands: OpenCommands,
}

/// The text cut to [`SEARCH_DOC_BYTES_MAX`] bytes at a character boundary.
pub fn cap(mut text: String) -> String {
    if text.len() > SEARCH_DOC_BYTES_MAX {
        let mut end = SEARCH_DOC_BYTES_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// The project key and blob store of a session folder (`<project>/sessions/<id>`).
fn project_of(dir: &Path) -> Result<(String, BlobStore)> {
    let project = dir
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| Error::Session {
            path: dir.to_path_buf(),
            what: "not inside a project folder (<project>/sessions/<id>)".into(),
        })?;
    let key = project
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let blobs = project.join("blobs");
    if !blobs.is_dir() {
        return Err(Error::Session {
            path: dir.to_path_buf(),
            what: format!("its project has no blob store at {}", blobs.display()),
        });
    }
    Ok((key, BlobStore::open(&blobs)?))
}

/// Makes a session's documents from its records, one at a time and in seq order: what
/// [`SessionDocs::read_from`] does over a log, and the background indexer over the
/// records a writer hands it.
pub(crate) struct DocMaker {
    dir: PathBuf,
    blobs: BlobStore,
    /// The tool of each call started so far.
    tools: HashMap<String, String>,
    /// The output blobs of each command finished so far whose call has not finished.
    pub(crate) commands: OpenCommands,
    pub session: SessionMeta,
}

impl DocMaker {
    /// For session folder `dir`, after what the index holds of it (`known`).
    pub(crate) fn new(dir: &Path, known: Known) -> Result<DocMaker> {
        let (project, blobs) = project_of(dir)?;
        let Known {
            meta,
            tools,
            commands,
        } = known;
        Ok(DocMaker {
            dir: dir.to_path_buf(),
            blobs,
            tools,
            commands,
            session: meta.unwrap_or(SessionMeta {
                id: String::new(),
                project,
                workspace: String::new(),
            }),
        })
    }

    /// The parsed record of a store record, its spilled fields put back; `None` for a
    /// record of a type this version does not know or one that has nothing to index.
    pub(crate) fn parse(&self, r: &cairn_store::Record) -> Option<Record> {
        if !may_have_doc(r.event.get()) {
            return None;
        }
        cairn_tools::fold::parse_in(r, &self.blobs).ok()
    }

    /// The next record's document, if it makes one.
    pub(crate) fn push(&mut self, rec: &Record) -> Result<Option<Doc>> {
        if let Event::SessionStarted(s) = &rec.event {
            self.session.id = s.id.clone();
            self.session.workspace = s.workspace.clone();
        }
        if let Event::ShellExec(x) = &rec.event
            && let cairn_core::event::ShellPhase::Finished(end) = &x.phase
        {
            let b: Vec<_> = [&end.stdout, &end.stderr]
                .into_iter()
                .flatten()
                .cloned()
                .collect();
            self.commands.insert(x.call.clone(), b);
        }
        let d = doc(rec, &self.blobs, &mut self.tools, &self.commands, &self.dir)?;
        if let Event::ToolFinished(f) = &rec.event {
            self.commands.remove(&f.call);
        }
        Ok(d)
    }
}

/// Whether a record's event may make a document or be needed by one (see
/// [`DocMaker::push`]): what a writer hands the background indexer.
pub(crate) fn needed(event: &Event) -> bool {
    match event {
        Event::SessionStarted(_)
        | Event::UserMessage { .. }
        | Event::ToolStarted { .. }
        | Event::ToolFinished(_) => true,
        Event::ModelTurn { text, .. } => !text.trim().is_empty(),
        Event::ShellExec(x) => matches!(x.phase, cairn_core::event::ShellPhase::Finished(_)),
        _ => false,
    }
}

impl SessionDocs {
    /// Every document of the session in folder `dir`.
    pub fn read(dir: &Path) -> Result<SessionDocs> {
        SessionDocs::read_from(dir, 0, Known::default())
    }

    /// The documents from `seq` on; `known` is what an earlier read found before
    /// `seq`.
    pub fn read_from(dir: &Path, seq: u64, known: Known) -> Result<SessionDocs> {
        let mut maker = DocMaker::new(dir, known)?;
        let reader = LogReader::open(dir)?;
        let mut docs = Vec::new();
        let mut next_seq = seq;
        let mut last_hash = None;
        let mut stopped = None;
        match reader.records_from(seq) {
            Ok(records) => {
                for r in records {
                    let r = match r {
                        Ok(r) => r,
                        Err(e) => {
                            stopped = Some(e.to_string());
                            break;
                        }
                    };
                    next_seq = r.seq + 1;
                    last_hash = Some(r.hash);
                    let Some(rec) = maker.parse(&r) else {
                        continue;
                    };
                    if let Some(d) = maker.push(&rec)? {
                        docs.push(d);
                    }
                }
            }
            Err(e) => stopped = Some(e.to_string()),
        }
        if maker.session.id.is_empty() && next_seq > 0 {
            return Err(Error::Session {
                path: dir.to_path_buf(),
                what: "the log does not start with session_started".into(),
            });
        }
        Ok(SessionDocs {
            session: maker.session,
            docs,
            next_seq,
            last_hash,
            stopped,
            open_commands: maker.commands,
        })
    }
}

/// The event types a document is made of, or that one needs (the session's id, a
/// command's output blobs).
const TYPES_READ: &[&str] = &[
    "session_started",
    "user_message",
    "model_turn",
    "tool_started",
    "shell_exec",
    "tool_finished",
];

/// Whether an event may make a document: false only for an event whose first key is
/// `type` naming another type (as cairn writes every event), so that the others
/// (file reads, permissions, checkpoints: most records) are not parsed at all.
fn may_have_doc(event: &str) -> bool {
    let Some(rest) = event.strip_prefix("{\"type\":\"") else {
        return true;
    };
    match rest.split_once('"') {
        Some((ty, _)) if !ty.contains('\\') => TYPES_READ.contains(&ty),
        _ => true,
    }
}

/// The document of one record, if it has one. `tools` maps call ids to tools.
fn doc(
    rec: &Record,
    blobs: &BlobStore,
    tools: &mut HashMap<String, String>,
    shell: &OpenCommands,
    dir: &Path,
) -> Result<Option<Doc>> {
    let read = |b: &cairn_store::BlobRef, buf: &mut Vec<u8>| -> Result<()> {
        let room = (SEARCH_DOC_BYTES_MAX + 4).saturating_sub(buf.len()) as u64;
        blobs
            .open_blob(&b.hash)?
            .take(room)
            .read_to_end(buf)
            .map_err(|source| Error::Io {
                path: PathBuf::from(format!("{}/blob {}", dir.display(), b.hash)),
                source,
            })?;
        Ok(())
    };
    let (kind, call, tool, text) = match &rec.event {
        Event::UserMessage { text, .. } => (Kind::User, None, None, text.clone()),
        Event::ModelTurn { text, .. } if !text.trim().is_empty() => {
            (Kind::Model, None, None, text.clone())
        }
        Event::ToolStarted {
            call, tool, input, ..
        } => {
            tools.insert(call.clone(), tool.clone());
            (
                Kind::Input,
                Some(call.clone()),
                Some(tool.clone()),
                input.to_string(),
            )
        }
        Event::ToolFinished(f) => {
            // The whole output: the tool's blob when its output was capped, else a
            // command's own output blobs (stdout, then stderr) when it had some.
            let text = match (&f.output_blob, shell.get(&f.call)) {
                (Some(b), _) => {
                    let mut buf = Vec::new();
                    read(b, &mut buf)?;
                    String::from_utf8_lossy(&buf).into_owned()
                }
                (None, Some(bs)) if !bs.is_empty() => {
                    let mut buf = Vec::new();
                    for b in bs {
                        if !buf.is_empty() {
                            buf.push(b'\n');
                        }
                        read(b, &mut buf)?;
                    }
                    String::from_utf8_lossy(&buf).into_owned()
                }
                _ => f.output.clone(),
            };
            (
                Kind::Output,
                Some(f.call.clone()),
                tools.get(&f.call).cloned(),
                text,
            )
        }
        _ => return Ok(None),
    };
    let ts_us = rec
        .time()
        .parse::<jiff::Timestamp>()
        .map(|t| t.as_microsecond())
        .map_err(|e| Error::Session {
            path: dir.to_path_buf(),
            what: format!("seq {}: time {:?} does not parse: {e}", rec.seq, rec.time()),
        })?;
    let text = cap(text);
    Ok(Some(Doc {
        seq: rec.seq,
        ts: rec.time().to_string(),
        ts_us,
        kind,
        call,
        tool,
        text,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_events_of_other_types_written_type_first_are_skipped_unread() {
        for (event, read) in [
            (r#"{"type":"file_read","path":"a"}"#, false),
            (r#"{"type":"checkpoint","state_hash":"00"}"#, false),
            (r#"{"type":"tool_finished","call":"c"}"#, true),
            (r#"{"type":"user_message","text":"x"}"#, true),
            (r#"{"type":"shell_exec","call":"c"}"#, true),
            // Not written as cairn writes: parsed, to be sure.
            (r#"{"text":"x","type":"user_message"}"#, true),
            (r#"{ "type":"file_read"}"#, true),
            (r#"{"type":"file\u005fread"}"#, true),
            (r#"{"type":"#, true),
        ] {
            assert_eq!(may_have_doc(event), read, "{event}");
        }
    }
}
