//! `cairn replay`: a session run again in a fresh copy of its starting workspace.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::OutputArgs;
use crate::replaycmd;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A session: id, unique prefix, folder, or `last`.
    session: PathBuf,
    /// Shell commands: run again in the strict sandbox (`rerun`: writes only in the
    /// replay's copy and a temporary folder, no network; answered from the recording
    /// when the kernel cannot enforce it), answered from the recording
    /// (`recorded`), or run again without any sandbox (`rerun-unsandboxed`).
    #[arg(long, default_value = "rerun")]
    shell: cairn_replay::ShellMode,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        replaycmd::replay(&self.session, self.shell, self.output.json)
    }
}
