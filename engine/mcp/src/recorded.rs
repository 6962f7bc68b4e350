//! MCP calls read back from a session log, and a backend that answers from them, so
//! that replay re-runs MCP calls through the same engine path without the servers.
//!
//! What a recording holds per MCP call: `tool_started` with `mcp: {server, tool}` and the
//! (redacted) input, and `tool_finished` with the status, the output the model was
//! given and `mcp_result`, the blob of the server's raw `tools/call` result (redacted).
//! A call that got no result (timeout, crash) has no `mcp_result`: its status and
//! output are the answer.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use cairn_store::LogReader;
use serde_json::{Value, json};

use super::{ListedTool, McpBackend, McpError};
use crate::event::{Event, Status};
use crate::state::canonical_json;
use cairn_tools::Result;

/// One MCP call as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedCall {
    /// The seq of its `tool_started`.
    pub seq: u64,
    pub call: String,
    /// The namespaced name the model called.
    pub name: String,
    pub server: String,
    /// The tool's name on its server.
    pub tool: String,
    pub input: Value,
    pub status: Status,
    /// What the model was given.
    pub output: String,
    /// The server's raw `tools/call` result, when it gave one.
    pub result: Option<Value>,
}

/// Every finished MCP call of the session at `session_dir`, in order. Raw results are
/// read from the project's blob store (`<project>/blobs`, two folders up).
pub fn recorded_calls(session_dir: &Path) -> Result<Vec<RecordedCall>> {
    let blobs = cairn_tools::fold::project_blobs(session_dir);
    let mut open: BTreeMap<String, RecordedCall> = BTreeMap::new();
    let mut out = Vec::new();
    for r in LogReader::open(session_dir)?.records()? {
        let Ok(rec) = cairn_tools::fold::parse_maybe_in(&r?, blobs.as_ref()) else {
            continue;
        };
        match rec.event {
            Event::ToolStarted {
                call,
                tool,
                input,
                mcp: Some(m),
                ..
            } => {
                open.insert(
                    call.clone(),
                    RecordedCall {
                        seq: rec.seq,
                        call,
                        name: tool,
                        server: m.server,
                        tool: m.tool,
                        input,
                        status: Status::Interrupted,
                        output: String::new(),
                        result: None,
                    },
                );
            }
            Event::ToolFinished(f) => {
                if let Some(mut c) = open.remove(&f.call) {
                    c.status = f.status;
                    c.output = f.output;
                    c.result = match (&f.mcp_result, &blobs) {
                        (Some(b), Some(store)) => store
                            .get(&b.hash)
                            .ok()
                            .and_then(|bytes| serde_json::from_slice(&bytes).ok()),
                        _ => None,
                    };
                    out.push(c);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Answers MCP calls from a recording: each recorded call once, matched by server,
/// tool and input, in order.
pub struct Recorded {
    calls: Vec<(RecordedCall, bool)>,
}

impl Recorded {
    pub fn new(calls: Vec<RecordedCall>) -> Recorded {
        Recorded {
            calls: calls.into_iter().map(|c| (c, false)).collect(),
        }
    }

    /// The recorded calls of a session.
    pub fn from_session(session_dir: &Path) -> Result<Recorded> {
        Ok(Recorded::new(recorded_calls(session_dir)?))
    }
}

impl McpBackend for Recorded {
    fn servers(&self) -> Vec<String> {
        let mut s: Vec<String> = self.calls.iter().map(|(c, _)| c.server.clone()).collect();
        s.sort();
        s.dedup();
        s
    }

    /// The tools the recording called (their schemas were not recorded: any object).
    fn list_tools(
        &mut self,
        server: &str,
        _timeout: Duration,
    ) -> Result<Vec<ListedTool>, McpError> {
        let mut names: Vec<&str> = self
            .calls
            .iter()
            .filter(|(c, _)| c.server == server)
            .map(|(c, _)| c.tool.as_str())
            .collect();
        names.sort();
        names.dedup();
        Ok(names
            .into_iter()
            .map(|n| ListedTool {
                name: n.to_string(),
                description: "(replayed from a recording)".to_string(),
                input_schema: json!({"type": "object"}),
                read_only: false,
            })
            .collect())
    }

    fn call_tool(
        &mut self,
        server: &str,
        tool: &str,
        arguments: &Value,
        _timeout: Duration,
        _cancel: &crate::CancelHandle,
    ) -> Result<Value, McpError> {
        let want = canonical_json(arguments);
        let found = self.calls.iter_mut().find(|(c, used)| {
            !*used && c.server == server && c.tool == tool && canonical_json(&c.input) == want
        });
        match found {
            Some((c, used)) => {
                *used = true;
                match &c.result {
                    Some(r) => Ok(r.clone()),
                    None => Err(McpError::Replayed {
                        status: c.status,
                        text: c.output.clone(),
                    }),
                }
            }
            None => Err(McpError::Protocol {
                server: server.to_string(),
                detail: format!("the recording has no unanswered call of {tool} with input {want}"),
            }),
        }
    }

    fn take_changed(&mut self) -> Vec<String> {
        Vec::new()
    }

    fn shutdown(&mut self) {}
}
