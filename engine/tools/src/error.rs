//! Engine errors: failures of the engine itself (the log, the blob store, bad
//! configuration). A tool that fails is not an error here: that is an event and an
//! answer to the model.
//!
//! Each variant holds the facts (paths, ids, the name at fault); what a user can do
//! about it in terms of a command line or its flags is the caller's to say.

use std::path::PathBuf;

use crate::mcp_names::ServerNameError;

/// What stops the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The log, the blob store or a snapshot failed.
    #[error(transparent)]
    Store(#[from] cairn_store::Error),
    /// A tree checkpoint could not be made or written.
    #[error(transparent)]
    Tlog(#[from] cairn_tlog::TlogError),
    /// A signing key could not be read, or a note not signed.
    #[error(transparent)]
    Note(#[from] cairn_tlog::NoteError),
    /// The home's log key file does not read as a key.
    #[error("{}: {what}", path.display())]
    KeyFile { path: PathBuf, what: String },
    /// The OS sandbox of commands could not be set up.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// The workspace given cannot be reached (it does not exist, or may not be read).
    #[error("workspace {}: {source} (give an existing folder)", path.display())]
    WorkspaceMissing {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The workspace given is a file (or something else that is not a folder).
    #[error("workspace {} is not a folder", path.display())]
    WorkspaceNotFolder { path: PathBuf },
    /// The workspace is inside the cairn home, which tools never touch.
    #[error(
        "workspace {} is inside the cairn home {}: choose another workspace or CAIRN_HOME",
        workspace.display(),
        home.display()
    )]
    WorkspaceInHome { workspace: PathBuf, home: PathBuf },
    /// The workspace a session recorded is gone, so the session cannot be resumed there.
    #[error("the workspace {} of session {session} is gone", workspace.display())]
    WorkspaceGone { workspace: PathBuf, session: String },
    /// Neither `CAIRN_HOME` nor `HOME` is set: there is nowhere to keep cairn's data.
    #[error("neither CAIRN_HOME nor HOME is set: set CAIRN_HOME to a folder for cairn's data")]
    NoHome,
    /// The home holds no session yet.
    #[error("no sessions in {} yet", home.display())]
    NoSessions { home: PathBuf },
    /// No session matches what was given (an id, a prefix, a folder or `last`).
    #[error("no session matches '{spec}'")]
    NoSessionMatch { spec: String },
    /// A session log holds no record: the session never started (its creation was cut
    /// short by a crash, before sessions were born whole with their first record).
    #[error("{}: the session never started: its log holds no record", dir.display())]
    EmptyLog { dir: PathBuf },
    /// The first record of a session log is not `session_started`.
    #[error("{}: the log does not start with session_started", dir.display())]
    NotSessionStart { dir: PathBuf },
    /// The configuration recorded in a session's `session_started` does not load.
    #[error("{}: the session's configuration does not load: {source}", dir.display())]
    SessionConfig {
        dir: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A session folder that is not `<project>/sessions/<id>`.
    #[error("{}: not inside a project folder (<project>/sessions/<id>)", dir.display())]
    NotInProject { dir: PathBuf },
    /// A line of a manifest blob does not parse: cairn's own data is damaged.
    #[error("bad manifest entry (line {line}): {source}")]
    BadManifest {
        /// The line in the manifest blob, from 1.
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    /// A project's `mcp.json` does not parse.
    #[error("{}: {source}", path.display())]
    McpConfig {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// An MCP server name that tool names cannot be built from.
    #[error(transparent)]
    McpServerName(#[from] ServerNameError),
    /// A credential-file pattern of the configuration is not a glob.
    #[error(transparent)]
    CredentialPattern(#[from] cairn_core::permission::CredentialPatternError),
    /// An MCP server configured without the command that starts it.
    #[error("mcp server '{server}': no command given")]
    McpNoCommand { server: String },
    /// No fact with this number in the project's memory.
    #[error("no fact {n}: memory holds {facts}")]
    NoFact { n: usize, facts: usize },
    /// A record whose redacted form is no longer a valid event: it was not written.
    #[error(transparent)]
    Scrub(#[from] cairn_core::scrub::ScrubError),
    /// Something named (a background process, an MCP server…) does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A configuration file (or the settings merged from the layers) is wrong: what,
    /// with the key, and where.
    #[error("{}: {what}", path.display())]
    Config { path: PathBuf, what: String },
    /// The operating system refused an operation on `path` (or writing it failed).
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A line of a script is not a step.
    #[error("script line {line}: {what}")]
    Script { line: usize, what: String },
    /// A model was to go on in a session with no conversation (it was not driven by a
    /// model) and no new task.
    #[error("session {session} has no conversation for a model to go on with")]
    NoConversation { session: String },
    /// A model was to go on in a session whose model had given its final answer, with
    /// no new task.
    #[error("the model had already answered in session {session}")]
    ModelAnswered { session: String },
    /// A session's log does not follow the script given to go on with it.
    #[error(
        "the session does not follow this script: step {step} ({}) {what}",
        line.map_or_else(|| String::from("past its end"), |l| format!("line {l}"))
    )]
    ScriptMismatch {
        /// The step, from 1.
        step: usize,
        /// The step's line in the script; `None` past the script's last step.
        line: Option<usize>,
        /// What the log has instead.
        what: String,
    },
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

pub fn io_at(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> EngineError + '_ {
    move |source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_error() -> serde_json::Error {
        match serde_json::from_str::<serde_json::Value>("{") {
            Err(e) => e,
            Ok(v) => panic!("parsed {v}"),
        }
    }

    /// True when `text` names a command of the command line or one of its flags.
    fn names_a_command(text: &str) -> bool {
        text.contains("--")
            || [
                "verify", "fork", "mcp", "demo", "run", "sessions", "memory", "resume",
            ]
            .iter()
            .any(|c| text.contains(&format!("cairn {c}")))
    }

    #[test]
    #[expect(
        clippy::too_many_lines,
        reason = "a data table: one error of each variant and its message, checked by one loop"
    )]
    fn every_variant_says_what_happened_and_names_no_command() {
        let p = PathBuf::from;
        let cases: Vec<(EngineError, String)> = vec![
            (
                EngineError::Store(cairn_store::Error::Format {
                    path: p("/l"),
                    what: "not a log".into(),
                }),
                "/l: not a log".into(),
            ),
            (
                EngineError::WorkspaceMissing {
                    path: p("/w"),
                    source: std::io::Error::new(std::io::ErrorKind::NotFound, "gone"),
                },
                "workspace /w: gone (give an existing folder)".into(),
            ),
            (
                EngineError::WorkspaceNotFolder { path: p("/w/f") },
                "workspace /w/f is not a folder".into(),
            ),
            (
                EngineError::WorkspaceInHome {
                    workspace: p("/h/x"),
                    home: p("/h"),
                },
                "workspace /h/x is inside the cairn home /h: choose another workspace or CAIRN_HOME"
                    .into(),
            ),
            (
                EngineError::WorkspaceGone {
                    workspace: p("/w"),
                    session: "s1".into(),
                },
                "the workspace /w of session s1 is gone".into(),
            ),
            (
                EngineError::NoHome,
                "neither CAIRN_HOME nor HOME is set: set CAIRN_HOME to a folder for cairn's data"
                    .into(),
            ),
            (
                EngineError::NoSessions { home: p("/h") },
                "no sessions in /h yet".into(),
            ),
            (
                EngineError::NoSessionMatch { spec: "ab".into() },
                "no session matches 'ab'".into(),
            ),
            (
                EngineError::EmptyLog { dir: p("/s") },
                "/s: the session never started: its log holds no record".into(),
            ),
            (
                EngineError::NotSessionStart { dir: p("/s") },
                "/s: the log does not start with session_started".into(),
            ),
            (
                EngineError::SessionConfig {
                    dir: p("/s"),
                    source: json_error(),
                },
                format!(
                    "/s: the session's configuration does not load: {}",
                    json_error()
                ),
            ),
            (
                EngineError::NotInProject { dir: p("s") },
                "s: not inside a project folder (<project>/sessions/<id>)".into(),
            ),
            (
                EngineError::BadManifest {
                    line: 2,
                    source: json_error(),
                },
                format!("bad manifest entry (line 2): {}", json_error()),
            ),
            (
                EngineError::McpConfig {
                    path: p("/p/mcp.json"),
                    source: json_error(),
                },
                format!("/p/mcp.json: {}", json_error()),
            ),
            (
                EngineError::McpServerName(ServerNameError::Length {
                    name: String::new(),
                    max: 32,
                }),
                "server name '' must have 1 to 32 characters".into(),
            ),
            (
                EngineError::McpNoCommand { server: "fs".into() },
                "mcp server 'fs': no command given".into(),
            ),
            (
                EngineError::NoFact { n: 3, facts: 2 },
                "no fact 3: memory holds 2".into(),
            ),
            (
                EngineError::NotFound("no running background process 'p1'".into()),
                "no running background process 'p1'".into(),
            ),
            (
                io_at(std::path::Path::new("/p/allow.json"))(std::io::Error::other("full")),
                "/p/allow.json: full".into(),
            ),
            (
                EngineError::Script {
                    line: 3,
                    what: "input must be a JSON object".into(),
                },
                "script line 3: input must be a JSON object".into(),
            ),
            (
                EngineError::ScriptMismatch {
                    step: 2,
                    line: Some(4),
                    what: "but the log has a grep call".into(),
                },
                "the session does not follow this script: step 2 (line 4) but the log has a grep call"
                    .into(),
            ),
            (
                EngineError::ScriptMismatch {
                    step: 5,
                    line: None,
                    what: "but the log has user message \"hi\"".into(),
                },
                "the session does not follow this script: step 5 (past its end) but the log has user message \"hi\""
                    .into(),
            ),
        ];
        for (e, want) in cases {
            let text = e.to_string();
            assert_eq!(text, want);
            assert!(!names_a_command(&text), "{text}");
        }
    }
}
