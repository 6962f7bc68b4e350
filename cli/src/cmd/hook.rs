//! `cairn hook`: the hooks of the agents people already use (Claude Code, Codex,
//! Gemini CLI, OpenCode), and
//! their installation into the agent's settings. The hook itself usually runs before
//! clap (`hookcmd::fast_args`); what clap parses to a hook runs the same.

use std::process::ExitCode;

use super::flags::WorkspaceArgs;
use crate::hookcmd::{self, AgentName};
use crate::sessioncmd::Approve;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Claude Code's hook: one event as JSON on stdin (SessionStart, UserPromptSubmit,
    /// PreToolUse, PostToolUse, PostToolUseFailure, Stop, SessionEnd), recorded in one
    /// cairn session per Claude Code session; PreToolUse answers with cairn's verdict.
    Claude {
        /// Who answers what the project's allow list does not cover: ask (the person,
        /// through Claude Code's prompt), never (deny) or always (allow once).
        #[arg(long, default_value = "ask")]
        approve: Approve,
    },
    /// Codex's hook (SessionStart, UserPromptSubmit, PreToolUse, PostToolUse,
    /// SessionEnd): the same recording; Codex honours a denial only, so only
    /// `--approve never` refuses.
    Codex {
        #[arg(long, default_value = "ask")]
        approve: Approve,
    },
    /// Gemini CLI's hook (SessionStart, BeforeAgent, BeforeTool, AfterTool,
    /// SessionEnd): the same recording, one cairn session per Gemini CLI session;
    /// BeforeTool refuses a call cairn denies and puts one it asks to the person.
    Gemini {
        #[arg(long, default_value = "ask")]
        approve: Approve,
    },
    /// OpenCode's hook, run by the plugin `install` writes (tool.execute.before,
    /// tool.execute.after, and session.exit when OpenCode exits): the same recording,
    /// one cairn session per OpenCode session; the plugin throws on a call cairn
    /// denies or asks about (a plugin cannot ask the person), so that it does not run.
    /// A tool of an MCP server of OpenCode's config (`<server>_<tool>`) is recorded as
    /// that server's (`mcp:<server>:<tool>`).
    #[command(name = "opencode")]
    OpenCode {
        #[arg(long, default_value = "ask")]
        approve: Approve,
    },
    /// Write cairn's hooks into the agent's settings (Claude Code: .claude/settings.json;
    /// Codex: .codex/config.toml; Gemini CLI: .gemini/settings.json; OpenCode: the
    /// plugin .opencode/plugin/cairn.js), showing the diff first and asking.
    Install {
        agent: AgentName,
        /// Written into the hook's command: who answers what the project's allow list
        /// does not cover (ask, never, always; the hook's default is ask).
        #[arg(long)]
        approve: Option<Approve>,
        /// The project's settings (the default).
        #[arg(long, conflicts_with = "user")]
        project: bool,
        /// The user's settings.
        #[arg(long)]
        user: bool,
        /// Write without asking.
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
    /// Remove exactly the hooks `install` added.
    Uninstall {
        agent: AgentName,
        #[arg(long, conflicts_with = "user")]
        project: bool,
        #[arg(long)]
        user: bool,
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
}

fn scope(user: bool) -> hookcmd::Scope {
    if user {
        hookcmd::Scope::User
    } else {
        hookcmd::Scope::Project
    }
}

impl Args {
    /// The agent's hook this runs, with its `--approve`; none for install and
    /// uninstall.
    #[cfg(test)]
    pub fn agent_hook(&self) -> Option<(AgentName, Approve)> {
        match self.action {
            Action::Claude { approve } => Some((AgentName::Claude, approve)),
            Action::Codex { approve } => Some((AgentName::Codex, approve)),
            Action::Gemini { approve } => Some((AgentName::Gemini, approve)),
            Action::OpenCode { approve } => Some((AgentName::OpenCode, approve)),
            Action::Install { .. } | Action::Uninstall { .. } => None,
        }
    }

    pub fn run(self) -> anyhow::Result<ExitCode> {
        match self.action {
            Action::Claude { approve } => Ok(hookcmd::run(AgentName::Claude, approve).into()),
            Action::Codex { approve } => Ok(hookcmd::run(AgentName::Codex, approve).into()),
            Action::Gemini { approve } => Ok(hookcmd::run(AgentName::Gemini, approve).into()),
            Action::OpenCode { approve } => Ok(hookcmd::run(AgentName::OpenCode, approve).into()),
            Action::Install {
                agent,
                approve,
                user,
                yes,
                workspace,
                ..
            } => hookcmd::install(agent, scope(user), &workspace.workspace, yes, Some(approve)),
            Action::Uninstall {
                agent,
                user,
                yes,
                workspace,
                ..
            } => hookcmd::install(agent, scope(user), &workspace.workspace, yes, None),
        }
    }
}
