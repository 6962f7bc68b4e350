//! `cairn run`: a script, or a task for the model (on a terminal, in the chat).

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::{ModelArgs, OutputArgs, with_arg};
use crate::{chatcmd, sessioncmd};

#[derive(Debug, clap::Args)]
#[command(mut_args(with_arg("json", |a| a.help("Print the session as a JSON Lines event stream on stdout (docs/STREAM.md); everything else goes to stderr, and permission is never asked on the terminal (--approve always, or denied)"))))]
pub(crate) struct Args {
    /// The task for the model.
    #[arg(required_unless_present = "script", conflicts_with = "script")]
    task: Option<String>,
    /// The script to run instead of a model.
    #[arg(long)]
    script: Option<PathBuf>,
    /// The workspace folder.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// Who answers permission requests: ask (the terminal; denied when there is
    /// none), always (allow each once), never (deny).
    #[arg(long, default_value = "ask")]
    approve: sessioncmd::Approve,
    #[command(flatten)]
    model: ModelArgs,
    /// Ask for whole answers instead of streams.
    #[arg(long)]
    no_stream: bool,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let json = self.output.json;
        if let Some(script) = &self.script {
            return sessioncmd::run_script(
                script,
                &self.workspace,
                &self.model.settings(),
                self.approve,
                json,
            );
        }
        let a = sessioncmd::TaskArgs {
            task: self.task.unwrap_or_default(),
            workspace: self.workspace,
            flags: self.model.settings(),
            approve: self.approve,
            no_stream: self.no_stream,
            json,
        };
        // On a terminal, the chat (which goes on after the answer); never with --json.
        if !json && chatcmd::on_terminal() {
            chatcmd::run(&a, Some(a.task.clone()))
        } else {
            sessioncmd::run_task(&a)
        }
    }
}
