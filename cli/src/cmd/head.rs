//! `cairn head`: the last seq and its record hash.

use std::process::ExitCode;

use super::flags::{LogPathArgs, OutputArgs};
use crate::logcmd;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    log: LogPathArgs,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        logcmd::head(&self.log.path, self.output.json)
    }
}
