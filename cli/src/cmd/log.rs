//! `cairn log`: a log's records, one line each.

use std::process::ExitCode;

use super::flags::{LogPathArgs, OutputArgs, with_arg};
use crate::logcmd;

#[derive(Debug, clap::Args)]
#[command(mut_args(with_arg("json", |a| a.help("Pass the records through as JSON Lines"))))]
pub(crate) struct Args {
    #[command(flatten)]
    log: LogPathArgs,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        logcmd::log(&self.log.path, self.output.json)
    }
}
