//! `cairn rerun`: a recorded task run again by a model, from the start or from a call,
//! as a child session, diffed against the original.

use std::process::ExitCode;

use super::flags::{ModelChoiceArgs, OutputArgs, SessionArgs};
use crate::reruncmd;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    session: SessionArgs,
    /// Where the new run starts: `start` (before the first user message; the
    /// default), a seq, or a call id (c12: after that call).
    #[arg(long = "at", value_name = "start|SEQ|CALL")]
    at: Option<String>,
    #[command(flatten)]
    model: ModelChoiceArgs,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        reruncmd::rerun(&reruncmd::RerunArgs {
            session: &self.session.session,
            at: self.at.as_deref(),
            flags: self.model.settings(Default::default()),
            json: self.output.json,
        })
    }
}
