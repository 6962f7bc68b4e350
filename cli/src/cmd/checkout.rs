//! `cairn checkout`: the workspace as it was at a point of a session.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::OutputArgs;
use crate::replaycmd;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    session: PathBuf,
    /// The point: a seq, a call id (c6: the end of that call), or end (the default).
    #[arg(long = "at", value_name = "SEQ|CALL", default_value = "end")]
    at: cairn_replay::At,
    dir: PathBuf,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        replaycmd::checkout(&self.session, &self.at, &self.dir, self.output.json)
    }
}
