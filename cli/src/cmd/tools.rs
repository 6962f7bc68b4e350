//! `cairn tools`: a tool catalog, and the tools of the project's MCP servers.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::{OutputArgs, with_arg};
use crate::{mcpcmd, sessioncmd};

#[derive(Debug, clap::Args)]
#[command(mut_args(with_arg("json", |a| a.conflicts_with("markdown"))))]
pub(crate) struct Args {
    /// thndrs or thoth (default: both).
    #[arg(long)]
    catalog: Option<cairn_engine::Catalog>,
    #[command(flatten)]
    output: OutputArgs,
    /// The Markdown of docs/TOOLS.md.
    #[arg(long)]
    markdown: bool,
    /// Also the tools of the project's MCP servers (each server is started).
    #[arg(long, conflicts_with = "markdown")]
    mcp: bool,
    /// The workspace whose project's MCP servers --mcp lists.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let json = self.output.json;
        let code = sessioncmd::tools(self.catalog, json, self.markdown)?;
        if self.mcp {
            mcpcmd::tools(&self.workspace, json)
        } else {
            Ok(code)
        }
    }
}
