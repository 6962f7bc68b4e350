//! `cairn show`: the conversation of a session in order, then its totals.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::{ListOutputArgs, SessionArgs, with_arg};
use crate::sessioncmd;

#[derive(Debug, clap::Args)]
#[command(mut_args(with_arg("json", |a| a.help("One JSON object: {\"session\", \"steps\": [each step of the conversation], \"totals\"}"))))]
#[command(mut_args(with_arg("jsonl", |a| a.help("One JSON object per line: each step of the conversation, then the totals"))))]
pub(crate) struct Args {
    #[command(flatten)]
    session: SessionArgs,
    #[command(flatten)]
    output: ListOutputArgs,
    /// Each call's input, output and diffs as well.
    #[arg(short, long)]
    verbose: bool,
    /// A JSON file of prices per model: {"MODEL": {"input_per_mtok": 3.0,
    /// "output_per_mtok": 15.0, "cached_per_mtok": 0.3}} (dollars per million
    /// tokens; cached_per_mtok defaults to input_per_mtok). Without it, the
    /// [prices."MODEL"] tables of config.toml.
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        sessioncmd::show(
            &self.session.session,
            self.output.format(),
            self.verbose,
            self.prices.as_deref(),
        )
    }
}
