//! `cairn continue`: `cairn resume last` with the configuration's model.

use std::process::ExitCode;

use super::flags::{OutputArgs, ProviderArgs};
use crate::{resumecmd, sessioncmd};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A new user message for the model.
    message: Option<String>,
    #[command(flatten)]
    model: ProviderArgs,
    /// Ask for whole answers instead of streams.
    #[arg(long)]
    no_stream: bool,
    #[arg(long, default_value = "ask")]
    approve: sessioncmd::Approve,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        resumecmd::resume(
            Some("last"),
            None,
            Some(resumecmd::WithModel {
                flags: self.model.settings(),
                no_stream: self.no_stream,
                task: self.message,
            }),
            self.approve,
            false,
            &self.model.sandbox,
            self.output.json,
        )
    }
}
