//! `cairn prove`: a proof that a record is in a session's signed checkpoint.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::provecmd;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A session (id, unique prefix, `last`, folder); with --allow, a workspace.
    session: String,
    seq: u64,
    /// Where to write the proof (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Prove a record of the workspace's allow log instead of a session's.
    #[arg(long)]
    allow: bool,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        provecmd::prove(&self.session, self.seq, self.out.as_deref(), self.allow)
    }
}
