//! `cairn mcp`: the project's MCP servers, and cairn's tools offered over MCP.

use std::process::ExitCode;

use super::flags::{OutputArgs, WorkspaceArgs};
use crate::{mcpcmd, sessioncmd};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Configure a server started over stdio: cairn mcp add NAME -- COMMAND ARGS...
    Add {
        /// Letters, digits, '_' and '-' (at most 32).
        name: String,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
    /// The configured servers.
    List {
        #[command(flatten)]
        output: OutputArgs,
        /// Start each server and list its tools, as a session offers them.
        #[arg(long)]
        tools: bool,
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
    /// Remove a server.
    Remove {
        name: String,
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
    /// Stand between an MCP client and a real server: cairn mcp proxy NAME -- COMMAND
    /// ARGS... Every message passes through; each tools/call is recorded as a call of
    /// mcp__NAME__<tool> (key mcp:NAME:<tool>, asked per the allow list, then --approve),
    /// redacted and capped, in one session per connection started at its first call.
    Proxy {
        name: String,
        #[arg(last = true, required = true)]
        command: Vec<String>,
        #[command(flatten)]
        workspace: WorkspaceArgs,
        /// Who answers what the allow list does not cover: never (deny, the default)
        /// or always (allow once); `--approve` alone is always.
        #[arg(long, default_value = "never", num_args = 0..=1, default_missing_value = "always")]
        approve: sessioncmd::Approve,
    },
    /// Speak MCP on stdin/stdout: one recorded session per connection, started at its
    /// first tool call, ended when the client closes stdin or on SIGINT, SIGTERM, SIGHUP.
    Serve {
        #[command(flatten)]
        workspace: WorkspaceArgs,
        /// The tool catalog: thndrs or thoth (default: the configuration's, else thoth).
        #[arg(long)]
        catalog: Option<cairn_engine::Catalog>,
        /// Who answers permission requests (there is no terminal): always (allow each
        /// once) or never (deny).
        #[arg(long, default_value = "never")]
        approve: sessioncmd::Approve,
        #[command(flatten)]
        sandbox: sessioncmd::SandboxArgs,
        /// How the workspace is captured at the start: git or full (see `run`).
        #[arg(long)]
        capture: Option<cairn_engine::manifest::Capture>,
    },
}

impl Args {
    /// Whether it runs sessions: `serve` and `proxy` record one per connection.
    pub fn runs_session(&self) -> bool {
        matches!(self.action, Action::Serve { .. } | Action::Proxy { .. })
    }

    pub fn run(self) -> anyhow::Result<ExitCode> {
        match self.action {
            Action::Add {
                name,
                command,
                workspace,
            } => mcpcmd::add(&workspace.workspace, &name, &command),
            Action::List {
                output,
                tools,
                workspace,
            } => mcpcmd::list(&workspace.workspace, output.json, tools),
            Action::Remove { name, workspace } => mcpcmd::remove(&workspace.workspace, &name),
            Action::Serve {
                workspace,
                catalog,
                approve,
                sandbox,
                capture,
            } => mcpcmd::serve(&workspace.workspace, catalog, approve, &sandbox, capture),
            Action::Proxy {
                name,
                command,
                workspace,
                approve,
            } => mcpcmd::proxy(&workspace.workspace, &name, &command, approve),
        }
    }
}
