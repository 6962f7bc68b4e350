//! `cairn resume`: a session after a crash (or after it ended), going on with its
//! script or a model.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::{OutputArgs, with_arg};
use crate::{resumecmd, sessioncmd};

#[derive(Debug, clap::Args)]
#[command(mut_args(with_arg("json", |a| a.help("Print the session as a JSON Lines event stream on stdout (docs/STREAM.md)"))))]
pub(crate) struct Args {
    /// A session: id, any unique part of one, folder, or `last` (the newest you
    /// started here). None: on a terminal, pick one from a list.
    session: Option<String>,
    /// A new user message for the model (needs --provider).
    #[arg(requires = "provider")]
    task: Option<String>,
    /// The script the session was running; it goes on where it stopped.
    #[arg(long, conflicts_with = "provider")]
    script: Option<PathBuf>,
    /// Run again a script step that was interrupted while it could run commands
    /// (its effect is unknown). Without it, a terminal asks; without a terminal the
    /// step is not run again.
    #[arg(long, requires = "script")]
    rerun_interrupted: bool,
    /// Go on with a model: openai (any OpenAI-compatible server) or anthropic.
    #[arg(long)]
    provider: Option<cairn_engine::provider::Kind>,
    /// The model (default: CAIRN_MODEL, then `model` of the configuration).
    #[arg(long, requires = "provider")]
    model: Option<String>,
    /// The API's base URL (default: CAIRN_BASE_URL, then `base_url`, else the
    /// provider's).
    #[arg(long, requires = "provider")]
    base_url: Option<String>,
    /// The environment variable holding the API key (default: `api_key_env`, else
    /// CAIRN_API_KEY, then OPENAI_API_KEY or ANTHROPIC_API_KEY).
    #[arg(long, requires = "provider")]
    api_key_env: Option<String>,
    /// Model turns before the run stops (default: 40).
    #[arg(long)]
    turns_max: Option<u32>,
    /// Ask for whole answers instead of streams.
    #[arg(long)]
    no_stream: bool,
    /// Who answers permission requests: ask, always, never.
    #[arg(long, default_value = "ask")]
    approve: sessioncmd::Approve,
    #[command(flatten)]
    sandbox: sessioncmd::SandboxArgs,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        resumecmd::resume(
            self.session.as_deref(),
            self.script.as_deref(),
            self.provider.map(|provider| resumecmd::WithModel {
                flags: cairn_engine::settings::Settings {
                    provider: Some(provider),
                    model: self.model,
                    base_url: self.base_url,
                    api_key_env: self.api_key_env,
                    turns_max: self.turns_max,
                    ..cairn_engine::settings::Settings::default()
                },
                no_stream: self.no_stream,
                task: self.task,
            }),
            self.approve,
            self.rerun_interrupted,
            &self.sandbox,
            self.output.json,
        )
    }
}
