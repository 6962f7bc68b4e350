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
    /// The catalogue the session offered (`thoth`, `thndrs`); for an imported session,
    /// the agent that wrote it and its version ([`label`]: `claude-code 2.1.3`).
    pub catalog: String,
    /// When it started: for an imported session, the time its source records.
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
    /// A replay (`cairn replay`), which ran in a copy of the workspace that is
    /// usually gone once it ended.
    pub replay: bool,
}

/// Characters of a session's task a listing shows.
pub const TASK_CHARS_MAX: usize = 60;

/// Characters of a session's first message [`first_message`] keeps.
pub const FIRST_MESSAGE_CHARS_MAX: usize = 60;

/// What a session is, in a word or two: the catalogue it offered (`thoth`), or, for a
/// session imported from another agent or recorded through its hooks, that agent as
/// its command line is named and its version (`claude-code 2.1.3`, `codex 0.171.0`,
/// `gemini-cli 0.61.0`): no catalogue offered its tools.
pub fn label(st: &cairn_core::event::SessionStarted) -> String {
    let named = |agent: &str, version: Option<&str>| {
        let name = match agent {
            "claude" => "claude-code",
            "gemini" => "gemini-cli",
            other => other,
        };
        match version {
            Some(v) => format!("{name} {v}"),
            None => name.to_string(),
        }
    };
    match (&st.imported, &st.agent) {
        (Some(i), _) => named(&i.agent, i.agent_version.as_deref()),
        (None, Some(a)) if a.via == "hook" => named(&a.name, a.version.as_deref()),
        (None, _) => st.catalog.clone(),
    }
}

/// Whether the session in `dir` is a replay of another (`SessionRow::replay`): one
/// with no parent is told from its first record, without reading the rest; a log that
/// cannot be read is not one.
pub fn is_replay(dir: &Path) -> bool {
    let parent = || {
        let reader = cairn_store::LogReader::open(dir).ok()?;
        let first = reader.records().ok()?.next()?.ok()?;
        match fold::parse_maybe_in(&first, fold::project_blobs(dir).as_ref())
            .ok()?
            .event
        {
            Event::SessionStarted(st) => Some(st.parent.is_some()),
            _ => None,
        }
    };
    parent() != Some(false) && summarise(dir).is_ok_and(|r| r.replay)
}

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
        replay: false,
    };
    for r in reader.records()? {
        let r = r?;
        row.records += 1;
        // A record this version cannot parse is counted and otherwise left to `verify`.
        match fold::parse_maybe_in(&r, blobs.as_ref()).map(|x| x.event) {
            Ok(Event::SessionStarted(st)) => {
                row.catalog = label(&st);
                row.started = st
                    .imported
                    .as_ref()
                    .and_then(|i| i.started_at.clone())
                    .unwrap_or_else(|| r.ts.clone());
                // A fork carries its parent's conversation: its task is the first
                // message of that.
                if let Some(text) = st.inherited.as_ref().and_then(|i| {
                    i.conversation.iter().find_map(|e| {
                        match cairn_core::state::ConversationEntry::from_json(e) {
                            Some(cairn_core::state::ConversationEntry::User { text }) => Some(text),
                            _ => None,
                        }
                    })
                }) {
                    row.task = crate::audit::one_line(&text)
                        .chars()
                        .take(TASK_CHARS_MAX)
                        .collect();
                }
                row.workspace = st.workspace;
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
            Ok(Event::SessionEnded { failed, reason, .. }) => {
                row.state = if failed { "failed" } else { "finished" }.into();
                row.replay = row.parent.is_some() && reason.starts_with("replay of ");
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
