//! `cairn`: the command line of the cairn engine. Thin glue: every piece of logic lives
//! in the library crates; this crate parses flags and formats output.

mod logcmd;
mod out;
mod sessioncmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// cairn: an event-sourced engine for coding agents.
///
/// Exit codes: 0 success (or clean), 1 problems found, 2 could not run.
#[derive(Debug, Parser)]
#[command(name = "cairn", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a log's integrity: every record's hash, the chain, seq and JSON.
    /// Exit 0 clean, 1 problems found, 2 could not run.
    Verify {
        /// A session (id, unique prefix, `last`), a session folder or a log file.
        path: std::path::PathBuf,
        /// Print a machine-readable report.
        #[arg(long)]
        json: bool,
    },
    /// Print a log's records, one line each (seq, time, type, summary).
    Log {
        /// A session (id, unique prefix, `last`), a session folder or a log file.
        path: std::path::PathBuf,
        /// Pass the records through as JSON Lines.
        #[arg(long)]
        json: bool,
    },
    /// Print the last seq and its record hash, to anchor a log elsewhere.
    Head {
        /// A session (id, unique prefix, `last`), a session folder or a log file.
        path: std::path::PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Run a session: driven by a model given TASK, or by a script (JSON Lines:
    /// {"tool":…,"input":…} or {"user":…}). Prints the session id (and the model's
    /// answer). Exit 0 even when tools fail; 2 when the script or the provider fails.
    Run {
        /// The task for the model.
        #[arg(required_unless_present = "script", conflicts_with = "script")]
        task: Option<String>,
        /// The script to run instead of a model.
        #[arg(long)]
        script: Option<std::path::PathBuf>,
        /// The workspace folder.
        #[arg(long, default_value = ".")]
        workspace: std::path::PathBuf,
        /// The tool catalog: thndrs or thoth.
        #[arg(long, default_value = "thoth")]
        catalog: cairn_engine::Catalog,
        /// Who answers permission requests: ask (the terminal; denied when there is
        /// none), always (allow each once), never (deny).
        #[arg(long, default_value = "ask")]
        approve: sessioncmd::Approve,
        /// The model API: openai (any OpenAI-compatible server) or anthropic.
        #[arg(long, default_value = "openai")]
        provider: cairn_engine::provider::Kind,
        /// The model (default: CAIRN_MODEL).
        #[arg(long)]
        model: Option<String>,
        /// The API's base URL (default: CAIRN_BASE_URL, else the provider's).
        #[arg(long)]
        base_url: Option<String>,
        /// The environment variable holding the API key (default: CAIRN_API_KEY, then
        /// OPENAI_API_KEY or ANTHROPIC_API_KEY). Keys are never taken as flags.
        #[arg(long)]
        api_key_env: Option<String>,
        /// The model's context window in tokens (sizes the cap on tool results).
        #[arg(long)]
        context_window: Option<u64>,
        /// Model turns before the run stops.
        #[arg(long, default_value_t = cairn_engine::agent::TURNS_MAX_DEFAULT)]
        turns_max: u32,
        /// Ask for whole answers instead of streams.
        #[arg(long)]
        no_stream: bool,
        /// The command `problems` runs, e.g. "cargo check --message-format=json".
        #[arg(long)]
        check: Option<String>,
        /// The web_search backend: duckduckgo, searxng or none.
        #[arg(long)]
        search: Option<cairn_engine::web::SearchBackend>,
        /// The SearXNG instance for --search searxng.
        #[arg(long)]
        searxng_url: Option<String>,
    },
    /// List or forget the facts remembered for the current project.
    Memory {
        #[command(subcommand)]
        action: MemoryAction,
        /// The workspace whose project it is.
        #[arg(long, default_value = ".", global = true)]
        workspace: std::path::PathBuf,
    },
    /// Review or clear the allow list of the current project.
    Allow {
        #[command(subcommand)]
        action: AllowAction,
        /// The workspace whose project it is.
        #[arg(long, default_value = ".", global = true)]
        workspace: std::path::PathBuf,
    },
    /// List recorded sessions, newest first.
    Sessions {
        #[arg(long)]
        json: bool,
    },
    /// One line per call of a session: seq, tool, status, elapsed, summary.
    Show {
        /// A session: id, unique prefix, folder, or `last`.
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// Print a tool catalog.
    Tools {
        /// thndrs or thoth (default: both).
        #[arg(long)]
        catalog: Option<cairn_engine::Catalog>,
        #[arg(long, conflicts_with = "markdown")]
        json: bool,
        /// The Markdown of docs/TOOLS.md.
        #[arg(long)]
        markdown: bool,
    },
    /// Set up a sample project and run a scripted session in it per catalog.
    Demo {
        /// Where to put the sample projects (new or empty; default: a fresh temp folder).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum MemoryAction {
    /// The facts, numbered.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Forget fact N (as numbered by `list`).
    Forget { n: usize },
}

#[derive(Debug, Subcommand)]
enum AllowAction {
    /// The keys allowed for good (`shell:git`, `web_fetch:host`, `edit_file`, `tool@dir`).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Clear the allow list (recorded in the project's allow log).
    Reset,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Verify { path, json } => logcmd::verify(&path, json),
        Command::Log { path, json } => logcmd::log(&path, json),
        Command::Head { path, json } => logcmd::head(&path, json),
        Command::Run {
            task,
            script,
            workspace,
            catalog,
            approve,
            provider,
            model,
            base_url,
            api_key_env,
            context_window,
            turns_max,
            no_stream,
            check,
            search,
            searxng_url,
        } => match (script, task) {
            (Some(script), _) => sessioncmd::run_script(&script, &workspace, catalog, approve),
            (None, task) => sessioncmd::run_task(&sessioncmd::TaskArgs {
                task: task.unwrap_or_default(),
                workspace,
                catalog,
                approve,
                provider,
                overrides: cairn_engine::provider::Overrides {
                    base_url,
                    model,
                    api_key_env,
                    stream: Some(!no_stream),
                },
                context_window,
                turns_max,
                check,
                search,
                searxng_url,
            }),
        },
        Command::Memory { action, workspace } => match action {
            MemoryAction::List { json } => sessioncmd::memory_list(&workspace, json),
            MemoryAction::Forget { n } => sessioncmd::memory_forget(&workspace, n),
        },
        Command::Allow { action, workspace } => match action {
            AllowAction::List { json } => sessioncmd::allow_list(&workspace, json),
            AllowAction::Reset => sessioncmd::allow_reset(&workspace),
        },
        Command::Sessions { json } => sessioncmd::sessions(json),
        Command::Show { session, json } => sessioncmd::show(&session, json),
        Command::Tools {
            catalog,
            json,
            markdown,
        } => sessioncmd::tools(catalog, json, markdown),
        Command::Demo { dir } => sessioncmd::demo(dir.as_deref()),
    };
    match result {
        Ok(code) => code,
        Err(e) if out::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn: {}", out::error_text(&e));
            ExitCode::from(2)
        }
    }
}
