//! `cairn completions`: shell completions, from the same clap definitions.

use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    shell: clap_complete::Shell,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        // Into memory first: the generator panics on a closed pipe.
        let mut buf = Vec::new();
        clap_complete::generate(self.shell, &mut crate::cli_command(), "cairn", &mut buf);
        std::io::stdout().write_all(&buf)?;
        Ok(ExitCode::SUCCESS)
    }
}
