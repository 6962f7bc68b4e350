//! `cairn chat` (and `cairn` alone on a terminal): the agent on the terminal.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::ModelArgs;
use crate::{chatcmd, sessioncmd};

// The flags of `cairn chat` (those of `cairn run TASK` that a chat needs); what they
// leave unset comes from the environment and the configuration files.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// The workspace folder.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// Who answers permission requests: ask (the overlay), always (allow each once),
    /// never (deny).
    #[arg(long, default_value = "ask")]
    approve: sessioncmd::Approve,
    #[command(flatten)]
    model: ModelArgs,
    /// Ask for whole answers instead of streams.
    #[arg(long)]
    no_stream: bool,
}

/// Only the chat's flags, to get their defaults.
#[derive(clap::Parser)]
struct ChatOnly {
    #[command(flatten)]
    args: Args,
}

impl Args {
    /// The flags' defaults (`cairn` alone).
    pub fn defaults() -> Args {
        use clap::Parser;
        ChatOnly::parse_from(["cairn"]).args
    }

    pub fn run(self) -> anyhow::Result<ExitCode> {
        // No model anywhere: on a terminal, the first-run questions; without one, the
        // error lists the ways to give one.
        let flags = self.model.settings();
        let home = cairn_engine::Home::from_env()?;
        let project = sessioncmd::project_for(&home, &self.workspace);
        if crate::firstrun::needed(&sessioncmd::effective(&home, project.as_ref(), &flags)?) {
            if !chatcmd::on_terminal() {
                return Err(cairn_engine::provider::ProviderError::NoModel.into());
            }
            if !crate::firstrun::guide(&home)? {
                return Ok(ExitCode::from(2));
            }
        }
        if !chatcmd::on_terminal() {
            anyhow::bail!(
                "cairn chat needs a terminal (standard input and output, and CI not set): use cairn run TASK for plain lines"
            );
        }
        let a = sessioncmd::TaskArgs {
            task: String::new(),
            workspace: self.workspace,
            flags,
            approve: self.approve,
            no_stream: self.no_stream,
            json: false,
        };
        chatcmd::run(&a, None)
    }
}
