//! What a source line means, in the terms cairn records: the parsers of both formats
//! turn lines into steps, and the writer turns steps into events. Call ids are the
//! source's own; the writer maps them to cairn's `c1`, `c2`, ….

use cairn_core::event::{McpRef, Status};

/// One thing a source session did.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The source's time (RFC 3339) of the steps after this one, until the next: the
    /// time of the line they come from. `None`: that line gave no time.
    At(Option<String>),
    User {
        text: String,
    },
    /// One model response: its text, the calls it asked for, its usage (once).
    Model {
        model: String,
        text: String,
        calls: Vec<ModelCall>,
        usage: Option<serde_json::Value>,
    },
    /// A call started.
    Call {
        id: String,
        tool: String,
        input: serde_json::Value,
        mcp: Option<McpRef>,
    },
    /// A command a call ran, with how it ended.
    Shell(Shell),
    /// A file a call changed.
    Write(Write),
    /// Lines of a file a call showed.
    Read {
        id: String,
        path: String,
        first: u32,
        lines: u32,
        total_lines: u32,
        content: String,
    },
    /// A page fetched or a search made by a call.
    Fetch {
        id: String,
        url: String,
        status: Option<u16>,
        text: Option<String>,
        error: Option<String>,
    },
    /// What an MCP server answered a call (its raw `tools/call` result), before the
    /// call's end; `failed`: the server said the call failed.
    McpResult {
        id: String,
        result: serde_json::Value,
        failed: bool,
    },
    /// A call ended.
    End {
        id: String,
        status: Status,
        output: String,
    },
    /// A line kept as it is (`unknown`: of a type not mapped).
    Item {
        kind: String,
        unknown: bool,
        raw: Vec<u8>,
    },
}

/// A call as the model asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    pub id: String,
    pub name: String,
    pub input: serde_json::Value,
}

/// A command run by a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Shell {
    pub id: String,
    pub argv: Vec<String>,
    /// As the source gave it: absolute, or none.
    pub cwd: Option<String>,
    pub exit_code: Option<i32>,
    /// Stopped before it ended (a user's interrupt, a kill).
    pub interrupted: bool,
    pub stdout: String,
    pub stderr: String,
    pub elapsed_us: Option<u64>,
}

/// How a file was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    Create,
    Replace,
    Edit,
    Delete,
}

/// A file changed by a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub id: String,
    /// As the source gave it: absolute or relative to the working directory.
    pub path: String,
    pub kind: WriteKind,
    /// The content before, when the source has it.
    pub before: Option<String>,
    /// The content after, when known (none for a delete, or a change given as a diff
    /// only).
    pub after: Option<String>,
    /// The change as the source recorded it (a unified diff).
    pub diff: Option<String>,
    /// Whether the change was applied.
    pub ok: bool,
}
