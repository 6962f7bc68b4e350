//! The flag groups several commands share, flattened into each (`#[command(flatten)]`).
//! Where a command words a shared flag's help its own way, it says so with
//! `mut_arg` on its `Args`, so the flag is declared once and its help stays exact.

use std::path::PathBuf;

use crate::sessioncmd::{Format, SandboxArgs};

/// `--json`: the command's output as JSON.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct OutputArgs {
    #[arg(long)]
    pub json: bool,
}

/// `--json` and `--jsonl`, for the commands that list: one JSON document, or one JSON
/// object per line.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct ListOutputArgs {
    /// One JSON array of the sessions (`[]` when there are none).
    #[arg(long, conflicts_with = "jsonl")]
    pub json: bool,
    /// One JSON object per line, one line per session.
    #[arg(long)]
    pub jsonl: bool,
}

impl ListOutputArgs {
    pub fn format(self) -> Format {
        Format::of(self.json, self.jsonl)
    }
}

/// The session a review verb reads.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SessionArgs {
    /// A session: id, unique prefix, folder, or `last`.
    pub session: String,
}

/// The log a log verb reads.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LogPathArgs {
    /// A session (id, unique prefix, `last`), a session folder or a log file.
    pub path: PathBuf,
}

/// `--workspace`, for the commands that act on the workspace's project.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct WorkspaceArgs {
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
}

/// `--workspace`, worded for the commands that read or change the project's lists and
/// configuration.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ProjectArgs {
    /// The workspace whose project it is.
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
}

/// The settings a run takes as flags; each defaults to the environment, then the
/// project's config.toml, then the user's (`cairn config` shows what is in force).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ModelArgs {
    /// The tool catalog: thndrs or thoth (default: thoth).
    #[arg(long)]
    catalog: Option<cairn_engine::Catalog>,
    #[command(flatten)]
    provider: ProviderArgs,
    /// The model's context window in tokens (sizes the cap on tool results).
    #[arg(long)]
    context_window: Option<u64>,
    /// The command `problems` runs, e.g. "cargo check --message-format=json".
    #[arg(long)]
    check: Option<String>,
    /// How the workspace is captured at the start: git (files git holds unchanged are
    /// recorded by their blob id, read back from the repository) or full (every file
    /// copied into the home). Default: the configuration's `capture`, else git.
    #[arg(long)]
    capture: Option<cairn_engine::manifest::Capture>,
    /// The web_search backend: duckduckgo, searxng or none.
    #[arg(long)]
    search: Option<cairn_engine::web::SearchBackend>,
    /// The SearXNG instance for --search searxng.
    #[arg(long)]
    searxng_url: Option<String>,
}

impl ModelArgs {
    pub fn settings(&self) -> cairn_engine::settings::Settings {
        cairn_engine::settings::Settings {
            catalog: self.catalog,
            search: self.search,
            searxng_url: self.searxng_url.clone(),
            check: self.check.clone(),
            context_window: self.context_window,
            capture: self.capture,
            ..self.provider.settings()
        }
    }
}

/// Which model a session goes on with, and how commands are confined: what `continue`
/// takes (a resumed session keeps its recorded catalog, limits and tools' settings).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ProviderArgs {
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    #[command(flatten)]
    pub model: ModelChoiceArgs,
}

impl ProviderArgs {
    pub fn settings(&self) -> cairn_engine::settings::Settings {
        self.model.settings(self.sandbox.settings())
    }
}

/// Which model runs, without the sandbox's flags: what `rerun` takes, whose runs are
/// always in the strict sandbox.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ModelChoiceArgs {
    /// The model API: openai (any OpenAI-compatible server; the default) or anthropic.
    #[arg(long)]
    provider: Option<cairn_engine::provider::Kind>,
    /// The model (default: CAIRN_MODEL, then `model` of the configuration).
    #[arg(long)]
    model: Option<String>,
    /// The API's base URL (default: CAIRN_BASE_URL, then `base_url`, else the
    /// provider's).
    #[arg(long)]
    base_url: Option<String>,
    /// The environment variable holding the API key (default: `api_key_env`, else
    /// CAIRN_API_KEY, then OPENAI_API_KEY or ANTHROPIC_API_KEY). Keys are never taken
    /// as flags.
    #[arg(long)]
    api_key_env: Option<String>,
    /// Model turns before the run stops (default: 40).
    #[arg(long)]
    turns_max: Option<u32>,
}

impl ModelChoiceArgs {
    /// The flags' settings over `rest`.
    pub fn settings(
        &self,
        rest: cairn_engine::settings::Settings,
    ) -> cairn_engine::settings::Settings {
        cairn_engine::settings::Settings {
            provider: self.provider,
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            api_key_env: self.api_key_env.clone(),
            turns_max: self.turns_max,
            ..rest
        }
    }
}

/// For `#[command(mut_args(with_arg(ID, F)))]`: `F` applied to the argument `ID` of a
/// command, where a command words a shared flag its own way or adds a conflict. Unlike
/// `mut_arg`, which moves the argument to the end of the command's list (and so moves
/// it in `docs/CLI.md` and the shell completions), the arguments keep their order.
pub(crate) fn with_arg(
    id: &'static str,
    f: impl Fn(clap::Arg) -> clap::Arg,
) -> impl FnMut(clap::Arg) -> clap::Arg {
    move |a| if a.get_id() == id { f(a) } else { a }
}

/// `--all` and what narrows it, for the verbs that take many sessions at once
/// (`replay`, `verify`); each declares its own `--since`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BatchArgs {
    /// Every session of the home (or of the archive, with --in-archive), --jobs at a
    /// time, with a summary: identical, diverged (the first divergence of each), could
    /// not run.
    #[arg(long)]
    pub all: bool,
    /// With --all: only the projects whose key holds P.
    #[arg(long, value_name = "P", requires = "all")]
    pub project: Option<String>,
    /// With --all: the archive's sessions (pulled into the archive cache), not the
    /// home's.
    #[arg(long, requires = "all")]
    pub in_archive: bool,
    /// With --all: sessions at a time (default: the number of cores).
    #[arg(long, value_name = "N", requires = "all", value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
}

impl BatchArgs {
    pub fn selection<'a>(&'a self, since: Option<&'a str>) -> crate::batchcmd::Selection<'a> {
        crate::batchcmd::Selection {
            project: self.project.as_deref(),
            since,
            in_archive: self.in_archive,
            jobs: self.jobs.map(|j| j as usize),
        }
    }
}
