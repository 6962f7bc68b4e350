//! The engine of cairn: the call path that runs every tool call through the log
//! (record, decide, act), permissions and the allow list, redaction, the project home
//! and its memory, resume, and the drivers (agent loop, scripts, demo, MCP server).
//!
//! The pieces it is built from are crates of their own, re-exported here so that one
//! dependency gives the whole engine: `cairn_core` (events, state, fold, limits, rules;
//! no I/O), `cairn_tools` (the tool trait, catalogues, every tool, the recorder),
//! `cairn_net` (providers, web) and `cairn_mcp` (the MCP client).
//!
//! Invariant: the engine prints nothing to a terminal and parses no command-line flag;
//! that is the cli's.
//!
//! ```no_run
//! use cairn_engine::{Catalog, Engine, EngineConfig, Home};
//! let home = Home::at(std::path::Path::new("/tmp/cairn-home"));
//! let mut engine = Engine::start(&home, std::path::Path::new("."), EngineConfig::new(Catalog::Thoth))?;
//! let out = engine.call("read_file", serde_json::json!({"path": "README.md"}))?;
//! println!("{}", out.output);
//! engine.end("done")?;
//! # Ok::<(), cairn_engine::EngineError>(())
//! ```

pub mod agent;
pub mod demo;
mod engine;
pub mod hook;
mod mcp_proxy;
mod mcp_serve;
pub mod permission;
pub mod project;
pub mod script;
pub mod settings;

pub use cairn_core::{command, decide, diff, event, limits, redact, schema, spill, state};
pub use cairn_net::{provider, web};
pub use cairn_tools::{fold, manifest, memory, process, sandbox, shell, signal, tools};

/// MCP both ways: the client (`cairn_mcp`) and the server driver ([`mcp::serve`]).
pub mod mcp {
    pub use crate::mcp_proxy::{REASON_SERVER_EXITED, proxy_session};
    pub use crate::mcp_serve::{serve, serve_session};
    pub use cairn_mcp::*;
}

pub use cairn_core::{Event, Limits, Process, Record, State};
/// Checkpoints, proofs and logs on disk (`cairn-tlog`; its witness, behind the crate's
/// `http` feature, is the cli's and the archive's).
pub use cairn_tlog as tlog;
pub use cairn_tools::{
    CancelHandle, Catalog, Ctx, EngineError, McpTool, Observer, PathError, RecordSink, Registry,
    Result, SinkStart, Tool, ToolOutput, TypedTool, WsPath, catalog_markdown, parse_input, resolve,
};
pub use engine::{
    AnsweredCall, AnsweredWrite, CallOutcome, Engine, EngineConfig, Finding, GoOn,
    InterruptedOutcome, ModelSetting, Rerun, ResumeOptions, ResumeReport, ScriptPoint, cap_output,
    cap_output_tail, inherit,
};
pub use project::{Handle, Home, Project, SessionRef, find_session, short_ids};
