//! `cairn witness`: a witness (C2SP tlog-witness) that cosigns checkpoints.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::witnesscmd;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Serve POST /add-checkpoint until killed.
    Serve {
        /// Address to listen on (port 0: any free port; the address is printed).
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: String,
        /// The witness's key file (`cairn key generate` makes one; see CAIRN_HOME).
        #[arg(long)]
        key: PathBuf,
        /// A log key it trusts (vkey); repeatable.
        #[arg(long = "log", required = true)]
        logs: Vec<String>,
        /// The file keeping the latest checkpoint cosigned per log.
        #[arg(long)]
        state: PathBuf,
    },
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        match self.action {
            Action::Serve {
                addr,
                key,
                logs,
                state,
            } => witnesscmd::serve(&addr, &key, &logs, &state),
        }
    }
}
