//! `cairn audit`: what a session did, as text, JSON, Markdown or one HTML file.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::{OutputArgs, SessionArgs, with_arg};
use crate::auditcmd;

#[derive(Debug, clap::Args)]
#[command(mut_args(with_arg("json", |a| a.conflicts_with_all(["markdown", "html"]))))]
pub(crate) struct Args {
    #[command(flatten)]
    session: SessionArgs,
    #[command(flatten)]
    output: OutputArgs,
    #[arg(long, conflicts_with = "html")]
    markdown: bool,
    /// Write one self-contained HTML file (conversation, timeline) to FILE (`-`:
    /// standard output).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// A JSON file of prices per model, as for `cairn show`; without it, the
    /// [prices."MODEL"] tables of config.toml. The cost is in every format.
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let format = match (self.output.json, self.markdown, &self.html) {
            (true, _, _) => auditcmd::Format::Json,
            (_, true, _) => auditcmd::Format::Markdown,
            (_, _, Some(f)) => auditcmd::Format::Html(f),
            _ => auditcmd::Format::Text,
        };
        auditcmd::audit(&self.session.session, self.prices.as_deref(), format)
    }
}
