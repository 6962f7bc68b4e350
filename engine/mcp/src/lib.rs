//! MCP (Model Context Protocol) both ways.
//!
//! As a client, cairn starts the servers configured for a project (`mcp.json` in the
//! project folder, see [`config`]) on first use, speaks JSON-RPC 2.0 to them over stdio
//! ([`client`]) and appends their tools to the registry as `mcp__{server}__{tool}`, so
//! that no server can ever replace a built-in. Calls to them run through
//! `cairn_engine::Engine::call` like any other: permission (key `mcp:{server}:{tool}`, asked
//! by default), caps, redaction, the repeat rule; `tool_started` names the server and
//! the original tool, `tool_finished` keeps the server's raw result as a blob, and
//! [`Recorded`] answers the same calls from a recording for replay.
//!
//! As a server (`cairn_engine::mcp::serve`), cairn offers its catalogue over stdio and
//! runs every call in one recorded session per connection; that driver lives in the
//! engine, which this crate does not know.

pub mod client;
pub mod config;
mod recorded;
mod result;
mod servers;

use std::time::Duration;

use cairn_core::event::Status;
// Paths the modules name as `crate::…`.
use cairn_core::{event, state};
use cairn_tools::CancelHandle;

pub use cairn_core::event::McpRef;
pub use cairn_tools::mcp_names::{MCP_PREFIX, TOOL_NAME_CHARS_MAX, sanitise, tool_name};
pub use config::{McpConfig, ServerConfig};
pub use recorded::{Recorded, RecordedCall, recorded_calls};
pub use result::to_output;
pub use servers::Servers;

/// The protocol versions cairn speaks, newest first; the first is offered.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// A tool as a server lists it (`tools/list`).
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub description: String,
    /// The input schema, passed through as given.
    pub input_schema: serde_json::Value,
    /// `annotations.readOnlyHint`.
    pub read_only: bool,
}

/// Why an MCP request gave no result. The session goes on: this becomes the call's
/// output, never an engine error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error(
        "mcp server '{server}' is not configured for this project (`cairn mcp list` shows them)"
    )]
    Unknown { server: String },
    #[error("mcp server '{server}' could not start: {detail}")]
    Start { server: String, detail: String },
    #[error("mcp server '{server}' exited: {detail}")]
    Crashed { server: String, detail: String },
    #[error(
        "mcp server '{server}' printed something that is not a JSON-RPC message, so its connection was closed (it restarts on next use): {line}"
    )]
    Garbage { server: String, line: String },
    #[error(
        "mcp server '{server}' did not answer {method} within {ms} ms (mcp_call_timeout_ms); the request was cancelled"
    )]
    Timeout {
        server: String,
        method: String,
        ms: u64,
    },
    #[error("mcp server '{server}': {method} cancelled by the user (the server keeps running)")]
    Cancelled { server: String, method: String },
    #[error("mcp server '{server}': {detail}")]
    Protocol { server: String, detail: String },
    #[error("mcp server '{server}' answered {method} with error {code}: {message}")]
    Rpc {
        server: String,
        method: String,
        code: i64,
        message: String,
    },
    /// An outcome read back from a recording (replay).
    #[error("{text}")]
    Replayed { status: Status, text: String },
}

impl McpError {
    /// The status of a call that failed this way.
    pub fn status(&self) -> Status {
        match self {
            McpError::Timeout { .. } => Status::Timeout,
            McpError::Cancelled { .. } => Status::Cancelled,
            McpError::Replayed { status, .. } => *status,
            _ => Status::Error,
        }
    }
}

/// Where MCP calls go: live servers ([`Servers`]) or a recording ([`Recorded`]).
pub trait McpBackend: Send {
    /// The configured server names.
    fn servers(&self) -> Vec<String>;
    /// Lists a server's tools, starting it when it is not running.
    fn list_tools(&mut self, server: &str, timeout: Duration) -> Result<Vec<ListedTool>, McpError>;
    /// Calls a tool; `Ok` is the raw `tools/call` result. A live server's call is given
    /// up (and the request cancelled) when `cancel` is triggered.
    fn call_tool(
        &mut self,
        server: &str,
        tool: &str,
        arguments: &serde_json::Value,
        timeout: Duration,
        cancel: &crate::CancelHandle,
    ) -> Result<serde_json::Value, McpError>;
    /// Servers that said their tool list changed since the last call; cleared.
    fn take_changed(&mut self) -> Vec<String>;
    /// Stops every server: close stdin, wait, then kill.
    fn shutdown(&mut self);
}
