//! `cairn rerun`: a recorded task run again by a model, from the start or from a call,
//! as a child session, diffed against the original.

use std::process::ExitCode;

use super::flags::{OutputArgs, SessionArgs};
use crate::reruncmd;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    session: SessionArgs,
    /// Where the new run starts: `start` (before the first user message; the
    /// default), a seq, or a call id (c12: after that call).
    #[arg(long = "at", value_name = "start|SEQ|CALL")]
    at: Option<String>,
    /// The model API: openai (any OpenAI-compatible server; the default) or anthropic.
    #[arg(long)]
    provider: Option<cairn_engine::provider::Kind>,
    /// The model (default: CAIRN_MODEL).
    #[arg(long)]
    model: Option<String>,
    /// The API's base URL (default: CAIRN_BASE_URL, else the provider's).
    #[arg(long)]
    base_url: Option<String>,
    /// The environment variable holding the API key (default: CAIRN_API_KEY, then
    /// OPENAI_API_KEY or ANTHROPIC_API_KEY).
    #[arg(long)]
    api_key_env: Option<String>,
    /// Model turns per user message before the run stops (default: 40).
    #[arg(long)]
    turns_max: Option<u32>,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        reruncmd::rerun(&reruncmd::RerunArgs {
            session: &self.session.session,
            at: self.at.as_deref(),
            model: reruncmd::ModelChoice {
                provider: self.provider,
                model: self.model,
                base_url: self.base_url,
                api_key_env: self.api_key_env,
            },
            turns_max: self.turns_max,
            json: self.output.json,
        })
    }
}
