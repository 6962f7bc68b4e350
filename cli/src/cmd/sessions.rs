//! `cairn sessions`: the recorded sessions, newest first.

use std::process::ExitCode;

use super::flags::ListOutputArgs;
use crate::sessioncmd;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Also replays whose workspace copy is gone (left out by default).
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    output: ListOutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        sessioncmd::sessions(self.output.format(), self.all)
    }
}
