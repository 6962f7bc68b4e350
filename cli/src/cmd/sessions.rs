//! `cairn sessions`: the recorded sessions, newest first.

use std::process::ExitCode;

use super::flags::ListOutputArgs;
use crate::sessioncmd;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    output: ListOutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        sessioncmd::sessions(self.output.format())
    }
}
