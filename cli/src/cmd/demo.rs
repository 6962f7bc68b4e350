//! `cairn demo`: a sample project and a scripted session in it per catalog.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::{OutputArgs, with_arg};
use crate::sessioncmd;

#[derive(Debug, clap::Args)]
#[command(mut_args(with_arg("json", |a| a.help("One JSON object per catalog's session"))))]
pub(crate) struct Args {
    /// Where to put the sample projects (new or empty; default: a fresh temp folder).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        sessioncmd::demo(self.dir.as_deref(), self.output.json)
    }
}
