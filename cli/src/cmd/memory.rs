//! `cairn memory`: the facts remembered for the current project.

use std::process::ExitCode;

use super::flags::{OutputArgs, ProjectArgs, with_arg};
use crate::sessioncmd;

#[derive(Debug, clap::Args)]
#[command(mut_args(with_arg("json", |a| a.help("With no action: list as JSON Lines"))))]
#[command(mut_args(with_arg("workspace", |a| a.global(true))))]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    project: ProjectArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// The facts, numbered.
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Forget fact N (as numbered by `list`).
    Forget { n: usize },
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let (workspace, json) = (&self.project.workspace, self.output.json);
        match self.action {
            None => sessioncmd::memory_list(workspace, json),
            Some(Action::List { output }) => {
                sessioncmd::memory_list(workspace, json || output.json)
            }
            Some(Action::Forget { n }) => sessioncmd::memory_forget(workspace, n, json),
        }
    }
}
