//! `cairn replay`: a session run again in a fresh copy of its starting workspace; with
//! `--all`, every session of the home or the archive.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::{BatchArgs, OutputArgs};
use crate::{batchcmd, replaycmd};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A session: id, unique prefix, folder, or `last`.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    session: Option<PathBuf>,
    /// Shell commands: run again in the strict sandbox (`rerun`: writes only in the
    /// replay's copy and a temporary folder, no network; answered from the recording
    /// when the kernel cannot enforce it), answered from the recording
    /// (`recorded`), or run again without any sandbox (`rerun-unsandboxed`).
    #[arg(long, default_value = "rerun")]
    shell: cairn_replay::ShellMode,
    #[command(flatten)]
    batch: BatchArgs,
    /// With --all: only sessions started on or after DATE (2026-11-30, 2026-11-30T12:00).
    #[arg(long, value_name = "DATE", requires = "all")]
    since: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        match &self.session {
            Some(s) => replaycmd::replay(s, self.shell, self.output.json),
            None => batchcmd::replay_all(
                &self.batch.selection(self.since.as_deref()),
                self.shell,
                self.output.json,
            ),
        }
    }
}
