//! Sessions as listings show them: each session's log read once into a row (`cairn
//! sessions`, the browser's list, the resume picker), and a session's first user
//! message.

use std::path::{Path, PathBuf};

use cairn_core::event::{Event, Status};
use cairn_tools::fold;

/// What a session's log says about it, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub id: String,
    pub dir: PathBuf,
    pub workspace: String,
    /// The catalogue the session offered (`thoth`, `thndrs`).
    pub catalog: String,
    pub started: String,
    /// `finished`, `failed` (ended because the provider failed), `interrupted`,
    /// `resumed`, or `running` (not ended, and its log's writer lock held by a live
    /// process).
    pub state: String,
    /// Records in the log, including ones this version cannot parse.
    pub records: u64,
    pub calls: u64,
    /// Calls whose status is not `ok`.
    pub not_ok: u64,
    /// The first user message, on one line and cut to [`TASK_CHARS_MAX`] characters.
    pub task: String,
    /// The session this one was forked or replayed from.
    pub parent: Option<String>,
}

/// Characters of a session's task a listing shows.
pub const TASK_CHARS_MAX: usize = 60;

/// Characters of a session's first message [`first_message`] keeps.
pub const FIRST_MESSAGE_CHARS_MAX: usize = 60;

/// Reads a session's log once, start to end, into its row.
pub fn summarise(dir: &Path) -> cairn_store::Result<SessionRow> {
    let reader = cairn_store::LogReader::open(dir)?;
    let blobs = fold::project_blobs(dir);
    let mut row = SessionRow {
        id: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        dir: dir.to_path_buf(),
        workspace: String::new(),
        catalog: String::new(),
        started: String::new(),
        state: "interrupted".into(),
        records: 0,
        calls: 0,
        not_ok: 0,
        task: String::new(),
        parent: None,
    };
    for r in reader.records()? {
        let r = r?;
        row.records += 1;
        // A record this version cannot parse is counted and otherwise left to `verify`.
        match fold::parse_maybe_in(&r, blobs.as_ref()).map(|x| x.event) {
            Ok(Event::SessionStarted(st)) => {
                row.workspace = st.workspace;
                row.catalog = st.catalog;
                row.started = r.ts.clone();
                row.parent = st.parent.map(|p| p.session);
            }
            Ok(Event::UserMessage { text, .. }) if row.task.is_empty() => {
                row.task = crate::audit::one_line(&text)
                    .chars()
                    .take(TASK_CHARS_MAX)
                    .collect();
            }
            Ok(Event::ToolStarted { .. }) => row.calls += 1,
            Ok(Event::ToolFinished(f)) if f.status != Status::Ok => row.not_ok += 1,
            Ok(Event::SessionEnded { failed, .. }) => {
                row.state = if failed { "failed" } else { "finished" }.into()
            }
            Ok(Event::SessionResumed { .. }) => row.state = "resumed".into(),
            _ => {}
        }
    }
    if !matches!(row.state.as_str(), "finished" | "failed")
        && cairn_store::writer_pid(dir).is_some()
    {
        row.state = "running".into();
    }
    Ok(row)
}

/// The first user message of a session, its first line cut to
/// [`FIRST_MESSAGE_CHARS_MAX`] characters; none when the log cannot be read up to one.
pub fn first_message(dir: &Path) -> Option<String> {
    let reader = cairn_store::LogReader::open(dir).ok()?;
    let blobs = fold::project_blobs(dir);
    for r in reader.records().ok()? {
        let r = r.ok()?;
        if let Ok(rec) = fold::parse_maybe_in(&r, blobs.as_ref())
            && let Event::UserMessage { text, .. } = rec.event
        {
            let line = text.lines().next().unwrap_or("");
            return Some(line.chars().take(FIRST_MESSAGE_CHARS_MAX).collect());
        }
    }
    None
}
