//! `cairn allow`: the allow list of the current project.

use std::process::ExitCode;

use super::flags::{OutputArgs, ProjectArgs, with_arg};
use crate::sessioncmd;

#[derive(Debug, clap::Args)]
#[command(mut_args(with_arg("workspace", |a| a.global(true))))]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
    #[command(flatten)]
    project: ProjectArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// The keys allowed for good (`shell:git`, `web_fetch:host`, `edit_file`, `tool@dir`),
    /// and the grants refused: those whose session did not record the "always" answer.
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Clear the allow list (recorded in the project's allow log).
    Reset {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Take one key off the allow list (recorded in the project's allow log, like a
    /// grant); the session answers that granted it no longer count.
    Revoke {
        /// The key, as `cairn allow list` shows it (`shell:git`, `web_fetch:host`).
        key: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let workspace = &self.project.workspace;
        match self.action {
            Action::List { output } => sessioncmd::allow_list(workspace, output.json),
            Action::Reset { output } => sessioncmd::allow_reset(workspace, output.json),
            Action::Revoke { key, output } => {
                sessioncmd::allow_revoke(workspace, &key, output.json)
            }
        }
    }
}
