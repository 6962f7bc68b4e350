//! `cairn checkpoint`: a session's newest checkpoint sent to witnesses.

use std::process::ExitCode;

use super::flags::OutputArgs;
use crate::witnesscmd;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Push the newest checkpoint; cosignatures are added to its file.
    Push {
        /// A session (id, unique prefix, `last`, folder).
        session: String,
        /// A witness's URL (its submission prefix); repeatable.
        #[arg(long = "witness", required = true)]
        witnesses: Vec<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        match self.action {
            Action::Push {
                session,
                witnesses,
                output,
            } => witnesscmd::push(&session, &witnesses, output.json),
        }
    }
}
