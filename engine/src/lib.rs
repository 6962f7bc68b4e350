//! The engine of cairn: the events of a session, the fold that derives everything the
//! engine knows from them, the tool catalogue and the runtime that runs every call
//! through the log.
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
mod cancel;
mod catalog;
pub mod demo;
pub mod diff;
mod engine;
mod error;
pub mod event;
pub mod fold;
mod limits;
pub mod manifest;
pub mod mcp;
pub mod memory;
mod paths;
pub mod permission;
pub mod project;
pub mod provider;
mod recorder;
pub mod redact;
pub mod script;
pub mod shell;
pub mod state;
mod tool;
pub mod tools;
pub mod web;

pub use cancel::CancelHandle;
pub use catalog::{Catalog, McpTool, Registry, markdown as catalog_markdown};
pub use engine::{
    CallOutcome, Engine, EngineConfig, Finding, ResumeOptions, ResumeReport, cap_output, inherit,
};
pub use error::{EngineError, Result};
pub use event::Event;
pub use limits::Limits;
pub use paths::{PathError, WsPath, resolve};
pub use project::{Home, Project, SessionRef, find_session};
pub use state::{Process, Record, State};
pub use tool::{Ctx, Tool, ToolOutput, TypedTool, parse_input};
