//! `cairn fork`: a new session from a point of another.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::OutputArgs;
use crate::{resumecmd, sessioncmd};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    session: String,
    /// The point: a seq, a call id (c6: the end of that call), or end (the default).
    #[arg(long = "at", value_name = "SEQ|CALL", default_value = "end")]
    at: cairn_replay::At,
    /// The new workspace (new or empty).
    #[arg(long, value_name = "DIR")]
    workspace: PathBuf,
    /// A script to run in the fork.
    #[arg(long)]
    script: Option<PathBuf>,
    #[arg(long, default_value = "ask")]
    approve: sessioncmd::Approve,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        resumecmd::fork(
            &self.session,
            &self.at,
            &self.workspace,
            self.script.as_deref(),
            self.approve,
            self.output.json,
        )
    }
}
