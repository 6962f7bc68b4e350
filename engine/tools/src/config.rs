//! How a session is set up: the configuration `session_started` records, which replay
//! and verify read back.

use cairn_core::command::Guard;
use cairn_core::limits::Limits;
use cairn_store::Durability;
use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use cairn_core::decide::RepeatRule;
use cairn_core::event::SandboxMode;
use std::path::PathBuf;

/// How a session is set up.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineConfig {
    pub catalog: Catalog,
    pub durability: Durability,
    /// Records between snapshots (0: only at session end); more for a large state
    /// (see [`crate::STATE_ARCHIVE_SPACED_BYTES_MIN`]).
    pub snapshot_every: u64,
    /// Records between checkpoints (0: none); more for a large state, as snapshots.
    pub checkpoint_every: u64,
    /// Records between tree checkpoints (`tree_checkpoint` events, signed when the
    /// home holds a key; 0: only at the session's end).
    #[serde(default = "default_tree_checkpoint_every_records")]
    pub tree_checkpoint_every_records: u64,
    pub limits: Limits,
    /// Guarded commands: always asked, even when every program is allowed (rules
    /// matched on parsed argv, or regular expressions; see `cairn_core::command::guard`).
    /// Sessions recorded before rules hold the old default expressions: read them with
    /// [`EngineConfig::guards`].
    #[serde(default = "cairn_core::command::default_guards")]
    pub guarded_commands: Vec<Guard>,
    /// Files that ask before they are read, even inside the workspace (glob patterns,
    /// see [`cairn_core::permission::CredentialFiles`]). Sessions recorded before the
    /// list was configurable read back with today's default.
    #[serde(default = "cairn_core::permission::default_credential_files")]
    pub credential_files: Vec<String>,
    /// The web tools' backends and limits.
    #[serde(default)]
    pub web: crate::web::WebConfig,
    /// The command `problems` runs (argv, e.g. `["cargo", "check",
    /// "--message-format=json"]`); none: `problems` says how to configure one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_command: Option<Vec<String>>,
    /// Milliseconds the check command may run.
    #[serde(default = "default_check_timeout_ms")]
    pub check_timeout_ms: u64,
    /// The repeat rule (see `cairn_core::decide::repeat`). A configuration recorded
    /// before there was a choice names none: its session keeps the rule it ran with.
    #[serde(default = "RepeatRule::before_facts")]
    pub repeat_rule: RepeatRule,
    /// The OS sandbox commands run under (see [`crate::sandbox`]). A configuration
    /// recorded before there was a sandbox names none: its commands ran unconfined.
    #[serde(default = "SandboxMode::before_sandbox")]
    pub sandbox: SandboxMode,
    /// Folders commands may write in besides the workspace and the session's temporary
    /// folder (a build tool's cache such as `~/.cargo/registry`), absolute.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandbox_write_roots: Vec<PathBuf>,
    /// The model the session was started with (an agent session), for audits: never
    /// its key. None for a script or an MCP session, and in logs from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelSetting>,
    /// How the workspace is captured (see [`crate::manifest::Capture`]). A
    /// configuration recorded before there was a choice names none: it copied every
    /// file.
    #[serde(default = "crate::manifest::Capture::before_git")]
    pub capture: crate::manifest::Capture,
    /// Whether the session's records are added to the home's search index as they are
    /// appended, off the call path: handed to the sink the engine's home starts for the
    /// session (`Home::with_sink`; the cli gives `cairn_search::Indexer`), none when
    /// the home has no sink start. Not recorded: it changes nothing the session does;
    /// off unless the caller (the cli, from `search_index`) turns it on.
    #[serde(skip)]
    pub search_index: bool,
}

/// Which model a session talks to, as recorded in its configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSetting {
    /// `openai` or `anthropic`.
    pub provider: String,
    pub model: String,
    /// The server's address (for OpenAI-compatible servers, up to and including `/v1`).
    pub base_url: String,
}

/// The default number of records between tree checkpoints.
pub const TREE_CHECKPOINT_EVERY_RECORDS: u64 = 10_000;

fn default_tree_checkpoint_every_records() -> u64 {
    TREE_CHECKPOINT_EVERY_RECORDS
}

fn default_check_timeout_ms() -> u64 {
    300_000
}

impl EngineConfig {
    /// The defaults for a catalog.
    pub fn new(catalog: Catalog) -> EngineConfig {
        EngineConfig {
            catalog,
            durability: Durability::Batch,
            snapshot_every: 1000,
            checkpoint_every: 1000,
            tree_checkpoint_every_records: TREE_CHECKPOINT_EVERY_RECORDS,
            limits: catalog.limits(),
            guarded_commands: cairn_core::command::default_guards(),
            credential_files: cairn_core::permission::default_credential_files(),
            web: crate::web::WebConfig::default(),
            check_command: None,
            check_timeout_ms: default_check_timeout_ms(),
            repeat_rule: RepeatRule::Facts,
            sandbox: SandboxMode::default(),
            sandbox_write_roots: Vec::new(),
            model: None,
            capture: crate::manifest::Capture::Git,
            search_index: false,
        }
    }

    /// The guarded commands to match, the old default expressions of older sessions
    /// read as today's default rules.
    pub fn guards(&self) -> Vec<Guard> {
        cairn_core::command::upgrade_guards(&self.guarded_commands)
    }
}
