//! cairn's tools: the [`Tool`] trait and what a running tool sees ([`Ctx`]), the
//! [`Registry`] of the two catalogues, every built-in tool (one type per file in
//! `tools/`), path resolution inside the workspace, the workspace manifest, the one
//! process runner ([`process::Process`]: process groups, kill, capture) and the shell
//! runtime on it, the OS sandbox commands run under ([`sandbox`]: Landlock), the one way a file's content is opened ([`open_regular`]: regular
//! files only), the signals that stop a session ([`signal`]), and the [`Recorder`]
//! that is the only writer of a session's log.
//!
//! Invariants: tools know nothing of model providers or the terminal; a tool never
//! writes the log itself (it asks its [`Ctx`] to record, which folds the event too);
//! the network reaches tools only through the [`web::Web`] trait, so this crate does
//! not link an HTTP client.
//!
//! ```no_run
//! use cairn_tools::{Catalog, Registry};
//! let registry = Registry::new(Catalog::Thoth);
//! for name in registry.names() {
//!     println!("{name}");
//! }
//! ```

mod cancel;
mod catalog;
mod config;
mod error;
pub mod fold;
pub mod git;
pub mod implied;
pub mod links;
pub mod manifest;
pub mod mcp_names;
pub mod memory;
pub mod open;
mod paths;
pub mod process;
mod recorder;
pub mod sandbox;
pub mod shell;
pub mod signal;
mod stamps;
mod tool;
pub mod tools;
mod walk;
pub mod web;

pub use cancel::CancelHandle;
pub use catalog::{
    Catalog, McpTool, McpToolNameError, Registry, effects_of, markdown as catalog_markdown,
};
pub use config::{EngineConfig, ModelSetting};
pub use error::{EngineError, Result, io_at};
pub use open::{OpenError, open_regular};
pub use paths::{
    Parent, PathError, Resolved, Root, SYMLINK_FOLLOWS_MAX, WsPath, landing, resolve, target,
};
pub use recorder::{
    Observer, RecordSink, Recorder, SNAPSHOTS_OLDER_KEPT, STATE_ARCHIVE_SPACED_BYTES_MIN, SinkStart,
};
pub use tool::{
    Asking, Ctx, Effects, Fetches, InputError, Preview, TimeoutField, Tool, ToolOutput, TypedTool,
    parse_input, written_paths,
};

// Paths the modules name as `crate::…`.
use cairn_core::{diff, event, limits, permission, state};
