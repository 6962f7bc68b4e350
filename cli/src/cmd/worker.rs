//! `cairn worker`: takes jobs of the archive's runs (`cairn archive run`) and writes
//! their results back, on as many machines as there are workers.

use std::process::ExitCode;

use super::flags::OutputArgs;
use crate::queuecmd;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Jobs at a time in this process (each on connections of its own).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: u32,
    /// How long a lease lasts unless renewed (every third of it): how long a job of a
    /// worker that died waits before another takes it.
    #[arg(long, default_value_t = cairn_archive::queue::LEASE_MS_DEFAULT, value_parser = clap::value_parser!(u64).range(30..))]
    lease_ms: u64,
    /// The pause before looking again when no job can be taken.
    #[arg(long, default_value_t = 1000)]
    poll_ms: u64,
    /// Exit once no job is queued or running, instead of waiting for more.
    #[arg(long)]
    exit_when_idle: bool,
    /// Shell commands of replay jobs: as `cairn replay --shell`.
    #[arg(long, default_value = "rerun")]
    shell: cairn_replay::ShellMode,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        queuecmd::work(&queuecmd::WorkArgs {
            jobs: self.jobs as usize,
            lease_ms: self.lease_ms,
            poll_ms: self.poll_ms,
            exit_when_idle: self.exit_when_idle,
            shell: self.shell,
            json: self.output.json,
        })
    }
}
