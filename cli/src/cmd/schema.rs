//! `cairn schema`: the JSON Schema of a log line or of a line of the --json stream.

use std::io::Write;
use std::process::ExitCode;

use crate::stream;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    which: SchemaKind,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum SchemaKind {
    Events,
    Stream,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let text = match self.which {
            SchemaKind::Events => cairn_engine::schema::log_line_schema(),
            SchemaKind::Stream => stream::SCHEMA.to_string(),
        };
        std::io::stdout().write_all(text.as_bytes())?;
        Ok(ExitCode::SUCCESS)
    }
}
