//! `cairn diff`: two sessions' calls aligned, and what differs.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::OutputArgs;
use crate::replaycmd;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    a: PathBuf,
    b: PathBuf,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        replaycmd::diff(&self.a, &self.b, self.output.json)
    }
}
