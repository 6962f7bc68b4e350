//! `cairn`: the command line of the cairn engine. Thin glue: every piece of logic lives
//! in the library crates; this crate parses flags and formats output.

/// mimalloc, not glibc's malloc: a recorded call makes a few hundred small allocations
/// and frees; mimalloc's take about a third of glibc's instructions, and 4 µs off a
/// trivial call's 37 (issue 18, bench/HISTORY.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod archivecmd;
mod auditcmd;
mod browsecmd;
mod chatcmd;
mod clidoc;
mod configcmd;
mod exportcmd;
mod hookcmd;
mod importcmd;
mod keycmd;
mod livecmd;
mod locate;
mod logcmd;
mod mcpcmd;
mod out;
mod provecmd;
mod pscmd;
mod replaycmd;
mod resumecmd;
mod screen;
mod searchcmd;
mod sessioncmd;
mod stream;
mod witnesscmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sessioncmd::Format;

/// What `cairn -h` ends with.
macro_rules! exit_codes {
    () => {
        "Exit codes: 0 success (or clean, identical), 1 problems found (verify, replay, diff), 2 could not run; a session stopped by SIGINT, SIGTERM or SIGHUP is ended cleanly, then exits 130, 143 or 129. Errors go to stderr prefixed `cairn:`; a closed pipe exits 0. Colours only on a terminal, and never when NO_COLOR is set and not empty."
    };
}

/// cairn: an event-sourced engine for coding agents.
///
/// Exit codes: 0 success (or clean), 1 problems found, 2 could not run; a session
/// stopped by SIGINT, SIGTERM or SIGHUP exits 130, 143 or 129 once it is ended.
#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    long_about = None,
    after_help = exit_codes!(),
    after_long_help = concat!(
        "A SESSION is an id, any part of one that no other id holds (the short id `cairn sessions` shows), a session folder, `last` (the newest session you started or resumed in this project: run, chat, resume, fork; never a replay; from outside any project, the newest anywhere) or `last-replay`; an ambiguous part is an error listing the candidates. The log verbs also take a log file. Sessions live in $CAIRN_HOME (default ~/.cairn), never in the workspace.\n\n",
        exit_codes!()
    )
)]
struct Cli {
    /// Without a command, on a terminal: `chat`.
    #[command(subcommand)]
    command: Option<Command>,
    /// The team archive (postgres://USER@HOST:PORT/DB) for `cairn archive`,
    /// `archive:<id>` sessions and `search --in-archive` (default: CAIRN_ARCHIVE_URL,
    /// then `url` in the configuration's [archive] table).
    #[arg(long, global = true, value_name = "URL")]
    archive: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Verify a session deeply: integrity, the fold, checkpoints, every recorded
    /// decision taken again, blobs, unfinished calls. A plain log file gets the
    /// integrity check only. Exit 0 clean, 1 problems found, 2 could not run.
    ///
    /// A session's checkpoints are checked too: each file beside the log is the tree
    /// of the log's first records (one past the log: records were removed), and a
    /// session that ended does so under its newest checkpoint. With --key, every
    /// signature must hold with it and a session that ended must have a checkpoint.
    ///
    /// With --since, --policy or --proof it checks the log's Merkle tree instead:
    /// that the session extends an older checkpoint, that its newest checkpoint is
    /// cosigned as a policy asks, or (without a session) a proof file, offline.
    Verify {
        /// A session (id, unique prefix, `last`), a session folder or a log file.
        #[arg(required_unless_present = "proof")]
        path: Option<std::path::PathBuf>,
        /// Print a machine-readable report.
        #[arg(long)]
        json: bool,
        /// A proof file (`cairn prove`) to check offline, with --key or --policy.
        #[arg(long, conflicts_with_all = ["path", "since"])]
        proof: Option<std::path::PathBuf>,
        /// An older checkpoint file of the session: its log must extend it.
        #[arg(long)]
        since: Option<std::path::PathBuf>,
        /// A witness policy (tlog-policy: log, witness, group, quorum lines).
        #[arg(long)]
        policy: Option<std::path::PathBuf>,
        /// A log's verifier key (`cairn key show`), or a file holding it; repeatable.
        #[arg(long = "key")]
        keys: Vec<String>,
    },
    /// Manage the Ed25519 key that signs the tree checkpoints of sessions.
    Key {
        #[command(subcommand)]
        action: KeyAction,
    },
    /// Write a proof (C2SP tlog-proof) that record SEQ is in the session's signed
    /// checkpoint; `cairn verify --proof FILE --key VKEY` checks it without the session.
    Prove {
        /// A session (id, unique prefix, `last`, folder); with --allow, a workspace.
        session: String,
        seq: u64,
        /// Where to write the proof (default: stdout).
        #[arg(long)]
        out: Option<std::path::PathBuf>,
        /// Prove a record of the workspace's allow log instead of a session's.
        #[arg(long)]
        allow: bool,
    },
    /// Run a witness (C2SP tlog-witness): cosigns checkpoints that extend what it saw.
    Witness {
        #[command(subcommand)]
        action: WitnessAction,
    },
    /// Send a session's newest checkpoint to witnesses and keep their cosignatures.
    Checkpoint {
        #[command(subcommand)]
        action: CheckpointAction,
    },
    /// The team archive in PostgreSQL: push sessions (records, blobs, checkpoints),
    /// pull them back byte-exact, list and verify them there. The review verbs (show,
    /// audit, diff, replay, verify) take `archive:<id>` for an archived session.
    Archive {
        #[command(subcommand)]
        action: ArchiveAction,
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
        /// Who answers permission requests: ask (the terminal; denied when there is
        /// none), always (allow each once), never (deny).
        #[arg(long, default_value = "ask")]
        approve: sessioncmd::Approve,
        #[command(flatten)]
        model: ModelArgs,
        /// Ask for whole answers instead of streams.
        #[arg(long)]
        no_stream: bool,
        /// Print the session as a JSON Lines event stream on stdout (docs/STREAM.md);
        /// everything else goes to stderr, and permission is never asked on the
        /// terminal (--approve always, or denied).
        #[arg(long)]
        json: bool,
    },
    /// Talk with the agent on the terminal: the model's text as it streams, each call
    /// with its diff or its command's output, permission asked with one key (y once,
    /// a always, n deny), and your next message after each answer. Ctrl-C cancels the
    /// running call (a second ends the session), Esc interrupts the model. Needs a
    /// terminal; `cairn` alone runs it.
    Chat {
        #[command(flatten)]
        model: chatcmd::ChatArgs,
    },
    /// List (the default) or forget the facts remembered for the current project.
    Memory {
        #[command(subcommand)]
        action: Option<MemoryAction>,
        /// With no action: list as JSON Lines.
        #[arg(long)]
        json: bool,
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
    /// Re-run a session in a fresh copy of its starting workspace (a new session whose
    /// parent is the original) and report where results diverge.
    /// Exit 0 identical, 1 divergences, 2 could not run.
    Replay {
        /// A session: id, unique prefix, folder, or `last`.
        session: std::path::PathBuf,
        /// Shell commands: run again in the strict sandbox (`rerun`: writes only in the
        /// replay's copy and a temporary folder, no network; answered from the recording
        /// when the kernel cannot enforce it), answered from the recording
        /// (`recorded`), or run again without any sandbox (`rerun-unsandboxed`).
        #[arg(long, default_value = "rerun")]
        shell: cairn_replay::ShellMode,
        #[arg(long)]
        json: bool,
    },
    /// Align two sessions' calls and show what differs: calls, inputs, statuses,
    /// outputs, file writes, final workspaces. Exit 0 identical, 1 different.
    Diff {
        a: std::path::PathBuf,
        b: std::path::PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Write the workspace as it was at a point of a session into DIR (new or empty).
    Checkout {
        session: std::path::PathBuf,
        /// The point: a seq, a call id (c6: the end of that call), or end (the default).
        #[arg(long = "at", value_name = "SEQ|CALL", default_value = "end")]
        at: cairn_replay::At,
        dir: std::path::PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Resume a session after a crash (or after it ended): repair a torn tail, fold,
    /// reconcile with the workspace, processes and unfinished calls, record the
    /// findings; with --script, go on at the script's first unfinished step; with
    /// --provider, go on with the model from the conversation in the log (after TASK,
    /// when given, as a new user message).
    Resume {
        /// A session: id, any unique part of one, folder, or `last` (the newest you
        /// started here). None: on a terminal, pick one from a list.
        session: Option<String>,
        /// A new user message for the model (needs --provider).
        #[arg(requires = "provider")]
        task: Option<String>,
        /// The script the session was running; it goes on where it stopped.
        #[arg(long, conflicts_with = "provider")]
        script: Option<std::path::PathBuf>,
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
        /// Print the session as a JSON Lines event stream on stdout (docs/STREAM.md).
        #[arg(long)]
        json: bool,
    },
    /// Go on with the model in this project's `last` session, after MESSAGE when given:
    /// `cairn resume last --provider …` with the provider, model and key of the
    /// configuration (`cairn config`).
    Continue {
        /// A new user message for the model.
        message: Option<String>,
        #[command(flatten)]
        model: ProviderArgs,
        /// Ask for whole answers instead of streams.
        #[arg(long)]
        no_stream: bool,
        #[arg(long, default_value = "ask")]
        approve: sessioncmd::Approve,
        #[arg(long)]
        json: bool,
    },
    /// The configuration in force here and where each value comes from: flags, the
    /// environment, the project's config.toml (in its folder under the cairn home,
    /// never the workspace), the user's $CAIRN_HOME/config.toml, the defaults.
    Config {
        /// The workspace whose project it is.
        #[arg(long, default_value = ".")]
        workspace: std::path::PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Start a new session from a point of another: its workspace at that point is
    /// checked out into DIR, and the new session starts knowing what the parent knew.
    Fork {
        session: String,
        /// The point: a seq, a call id (c6: the end of that call), or end (the default).
        #[arg(long = "at", value_name = "SEQ|CALL", default_value = "end")]
        at: cairn_replay::At,
        /// The new workspace (new or empty).
        #[arg(long, value_name = "DIR")]
        workspace: std::path::PathBuf,
        /// A script to run in the fork.
        #[arg(long)]
        script: Option<std::path::PathBuf>,
        #[arg(long, default_value = "ask")]
        approve: sessioncmd::Approve,
        #[arg(long)]
        json: bool,
    },
    /// List recorded sessions, newest first.
    Sessions {
        /// One JSON array of the sessions (`[]` when there are none).
        #[arg(long, conflicts_with = "jsonl")]
        json: bool,
        /// One JSON object per line, one line per session.
        #[arg(long)]
        jsonl: bool,
    },
    /// The conversation of a session in order: user messages, model text, each call on
    /// one line (tool, key input, status, elapsed), the final answer, then totals (calls
    /// by status, tokens per model, wall time, cost when prices are configured).
    Show {
        /// A session: id, unique prefix, folder, or `last`.
        session: String,
        /// One JSON object: {"session", "steps": [each step of the conversation],
        /// "totals"}.
        #[arg(long, conflicts_with = "jsonl")]
        json: bool,
        /// One JSON object per line: each step of the conversation, then the totals.
        #[arg(long)]
        jsonl: bool,
        /// Each call's input, output and diffs as well.
        #[arg(short, long)]
        verbose: bool,
        /// A JSON file of prices per model: {"MODEL": {"input_per_mtok": 3.0,
        /// "output_per_mtok": 15.0, "cached_per_mtok": 0.3}} (dollars per million
        /// tokens; cached_per_mtok defaults to input_per_mtok). Without it, the
        /// [prices."MODEL"] tables of config.toml.
        #[arg(long, value_name = "FILE")]
        prices: Option<std::path::PathBuf>,
    },
    /// The background processes of a session (live or finished): id, pid, status,
    /// exit, start time, command and log file.
    Ps {
        /// A session: id, unique prefix, folder, or `last` (the default).
        #[arg(default_value = "last")]
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
        /// Also the tools of the project's MCP servers (each server is started).
        #[arg(long, conflicts_with = "markdown")]
        mcp: bool,
        /// The workspace whose project's MCP servers --mcp lists.
        #[arg(long, default_value = ".")]
        workspace: std::path::PathBuf,
    },
    /// MCP: the project's servers, whose tools are offered as mcp__{server}__{tool},
    /// and `serve`, which offers cairn's tools to an MCP client over stdio.
    Mcp {
        #[command(subcommand)]
        action: McpAction,
    },
    /// Record the agents people already use, live, through their hooks: `cairn hook
    /// claude` (Claude Code) and `cairn hook codex` are run by the agent before and
    /// after each tool call; `install` writes them into the agent's settings.
    ///
    /// Each agent session is one cairn session, each call asked of cairn's rules before
    /// it runs: Claude Code's Bash as `shell_exec`, Edit and Write as `file_write` with
    /// the content before and after, MCP tools by name; Codex's shell (as Bash) and
    /// `apply_patch` (a `file_write` per file it names). The workspace is captured at the
    /// start, so `cairn checkout` works on it, except for what a command changed (not
    /// scanned, to keep the hook fast).
    ///
    /// The agent opens the files and runs the programs itself, so the hook's answer is
    /// the only guard. A path is judged where the kernel takes it, not by its text:
    /// symlinks followed, `..` taken physically, a path whose folders do not exist yet
    /// placed by its deepest existing ancestor (with ws/link -> /etc, `Write
    /// ws/link/passwd` asks for `write_file@/etc`, which a grant of `write_file` does not
    /// answer). A Codex argv (`["bash", "-lc", LINE]`) is read as LINE only when `bash`,
    /// found on PATH, is one of the system's shells (/etc/shells) and not a file in the
    /// workspace. An event that cannot be read is refused with `cairn: hook …: <why>`
    /// on stderr, exit 2 for a PreToolUse (the agent does not run the call) and 1
    /// otherwise, and writes nothing in the cairn home.
    ///
    /// Claude Code takes `allow` (nothing to ask, or on the allow list), `ask` (it asks
    /// you; the default) and, with `--approve never`, `deny` with the reason, which the
    /// model is shown. Codex 0.171 takes a denial only (with `--approve never`;
    /// otherwise its own approval policy decides), gives a hook no failure event and no
    /// command's exit code (recorded as `lost`), runs a new hook only once you trust it
    /// (`/hooks`) and reads a project's .codex/config.toml only in a trusted project.
    Hook {
        #[command(subcommand)]
        action: HookAction,
    },
    /// What a session did: header (times, end state, lineage, integrity from a deep
    /// verify, head hash, model and base URL, tokens), the conversation, files written
    /// with diffs, files read, commands, processes left running, network, permissions,
    /// refusals, failed and interrupted calls, redactions. A session that does not
    /// verify is audited from its intact records and exits 1.
    Audit {
        /// A session: id, unique prefix, folder, or `last`.
        session: String,
        #[arg(long, conflicts_with_all = ["markdown", "html"])]
        json: bool,
        #[arg(long, conflicts_with = "html")]
        markdown: bool,
        /// Write one self-contained HTML file (conversation, timeline) to FILE (`-`:
        /// standard output).
        #[arg(long, value_name = "FILE")]
        html: Option<std::path::PathBuf>,
        /// A JSON file of prices per model, as for `cairn show`; without it, the
        /// [prices."MODEL"] tables of config.toml. The cost is in every format.
        #[arg(long, value_name = "FILE")]
        prices: Option<std::path::PathBuf>,
    },
    /// Browse sessions on the terminal: the current project's sessions, a session's
    /// conversation (messages and calls), a call's detail (input, output, diff,
    /// records). Read-only.
    Browse {
        /// Open this session (id, unique prefix, folder, or `last`) directly.
        session: Option<String>,
    },
    /// Print a JSON Schema: `events` (a line of a session log, docs/event.schema.json)
    /// or `stream` (a line of the --json stream, docs/stream.schema.json).
    Schema { which: SchemaKind },
    /// Import Codex CLI rollouts and Claude Code transcripts as cairn sessions (files
    /// or folders; `--codex`, `--claude`: their default locations). Importing a file
    /// again does nothing; one that grew is continued. Exit 0 when every file was
    /// imported (or unchanged), 1 when some could not be, 2 could not run.
    Import(importcmd::ImportArgs),
    /// Search every session's messages, tool inputs and outputs: words (all must
    /// occur), "quoted phrases", prefix*. Newest session first, then by seq. Uses the
    /// index in the home (brought up to date first), or with --in-archive the team
    /// archive's (the one `cairn --archive URL` names, else CAIRN_ARCHIVE_URL, else
    /// `url` of [archive]). Exit 0 with hits, 1 with none, 2 could not run.
    // One flag names the archive for every command: the global `--archive URL`. What
    // search's own arguments call `archive` becomes a switch, `--in-archive` (another
    // id, so that the global flag reaches search as it reaches every command), which
    // `main` turns into the URL that flag, the environment or the configuration gives.
    #[command(mut_arg("archive", |a| a
        .id(IN_ARCHIVE)
        .long("in-archive")
        .num_args(0)
        .action(clap::ArgAction::SetTrue)
        .value_parser(clap::value_parser!(bool))
        .default_missing_value("true")
        .default_value("false")
        .help("Search the team archive's index instead of the home's: the archive --archive URL names, else CAIRN_ARCHIVE_URL, else url in the [archive] table of the configuration")))]
    Search(searchcmd::SearchArgs),
    /// Export sessions in another tool's format: `otel` (OpenTelemetry traces over OTLP).
    Export(exportcmd::Args),
    /// Print shell completions for SHELL (bash, zsh, fish, elvish, powershell).
    Completions { shell: clap_complete::Shell },
    /// Set up a sample project and run a scripted session in it per catalog.
    Demo {
        /// Where to put the sample projects (new or empty; default: a fresh temp folder).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// One JSON object per catalog's session.
        #[arg(long)]
        json: bool,
    },
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

/// Which model a session goes on with, and how commands are confined: what `continue`
/// takes (a resumed session keeps its recorded catalog, limits and tools' settings).
#[derive(Debug, Clone, clap::Args)]
struct ProviderArgs {
    #[command(flatten)]
    sandbox: sessioncmd::SandboxArgs,
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

impl ProviderArgs {
    fn settings(&self) -> cairn_engine::settings::Settings {
        cairn_engine::settings::Settings {
            provider: self.provider,
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            api_key_env: self.api_key_env.clone(),
            turns_max: self.turns_max,
            ..self.sandbox.settings()
        }
    }
}

impl ModelArgs {
    fn settings(&self) -> cairn_engine::settings::Settings {
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

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum SchemaKind {
    Events,
    Stream,
}

#[derive(Debug, Subcommand)]
enum McpAction {
    /// Configure a server started over stdio: cairn mcp add NAME -- COMMAND ARGS...
    Add {
        /// Letters, digits, '_' and '-' (at most 32).
        name: String,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
        #[arg(long, default_value = ".")]
        workspace: std::path::PathBuf,
    },
    /// The configured servers.
    List {
        #[arg(long)]
        json: bool,
        /// Start each server and list its tools, as a session offers them.
        #[arg(long)]
        tools: bool,
        #[arg(long, default_value = ".")]
        workspace: std::path::PathBuf,
    },
    /// Remove a server.
    Remove {
        name: String,
        #[arg(long, default_value = ".")]
        workspace: std::path::PathBuf,
    },
    /// Stand between an MCP client and a real server: cairn mcp proxy NAME -- COMMAND
    /// ARGS... Every message passes through; each tools/call is recorded as a call of
    /// mcp__NAME__<tool> (key mcp:NAME:<tool>, asked per the allow list, then --approve),
    /// redacted and capped, in one session per connection started at its first call.
    Proxy {
        name: String,
        #[arg(last = true, required = true)]
        command: Vec<String>,
        #[arg(long, default_value = ".")]
        workspace: std::path::PathBuf,
        /// Who answers what the allow list does not cover: never (deny, the default)
        /// or always (allow once); `--approve` alone is always.
        #[arg(long, default_value = "never", num_args = 0..=1, default_missing_value = "always")]
        approve: sessioncmd::Approve,
    },
    /// Speak MCP on stdin/stdout: one recorded session per connection, started at its
    /// first tool call, ended when the client closes stdin or on SIGINT, SIGTERM, SIGHUP.
    Serve {
        #[arg(long, default_value = ".")]
        workspace: std::path::PathBuf,
        /// The tool catalog: thndrs or thoth (default: the configuration's, else thoth).
        #[arg(long)]
        catalog: Option<cairn_engine::Catalog>,
        /// Who answers permission requests (there is no terminal): always (allow each
        /// once) or never (deny).
        #[arg(long, default_value = "never")]
        approve: sessioncmd::Approve,
        #[command(flatten)]
        sandbox: sessioncmd::SandboxArgs,
        /// How the workspace is captured at the start: git or full (see `run`).
        #[arg(long)]
        capture: Option<cairn_engine::manifest::Capture>,
    },
}

#[derive(Debug, Subcommand)]
enum HookAction {
    /// Claude Code's hook: one event as JSON on stdin (SessionStart, UserPromptSubmit,
    /// PreToolUse, PostToolUse, PostToolUseFailure, Stop, SessionEnd), recorded in one
    /// cairn session per Claude Code session; PreToolUse answers with cairn's verdict.
    Claude {
        /// Who answers what the project's allow list does not cover: ask (the person,
        /// through Claude Code's prompt), never (deny) or always (allow once).
        #[arg(long, default_value = "ask")]
        approve: sessioncmd::Approve,
    },
    /// Codex's hook (SessionStart, UserPromptSubmit, PreToolUse, PostToolUse,
    /// SessionEnd): the same recording; Codex honours a denial only, so only
    /// `--approve never` refuses.
    Codex {
        #[arg(long, default_value = "ask")]
        approve: sessioncmd::Approve,
    },
    /// Write cairn's hooks into the agent's settings (Claude Code: .claude/settings.json;
    /// Codex: .codex/config.toml), showing the diff first and asking.
    Install {
        agent: hookcmd::AgentName,
        /// Written into the hook's command: who answers what the project's allow list
        /// does not cover (ask, never, always; the hook's default is ask).
        #[arg(long)]
        approve: Option<sessioncmd::Approve>,
        /// The project's settings (the default).
        #[arg(long, conflicts_with = "user")]
        project: bool,
        /// The user's settings.
        #[arg(long)]
        user: bool,
        /// Write without asking.
        #[arg(long)]
        yes: bool,
        #[arg(long, default_value = ".")]
        workspace: std::path::PathBuf,
    },
    /// Remove exactly the hooks `install` added.
    Uninstall {
        agent: hookcmd::AgentName,
        #[arg(long, conflicts_with = "user")]
        project: bool,
        #[arg(long)]
        user: bool,
        #[arg(long)]
        yes: bool,
        #[arg(long, default_value = ".")]
        workspace: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum KeyAction {
    /// Make a key in the home (`log.key`, mode 0600) and print its verifier key.
    Generate {
        /// The key's name: it signs the logs whose origin is below it
        /// (`cairn.local/<project>/<session>`).
        #[arg(long, default_value = "cairn.local")]
        name: String,
        /// Replace an existing key.
        #[arg(long)]
        force: bool,
    },
    /// Print the verifier key (signed-note vkey).
    Show {
        /// The key of its cosignatures (type 0x04), for a witness in a policy.
        #[arg(long)]
        cosigner: bool,
        /// One JSON object: name, vkey, cosigner_vkey and the key file's path.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum WitnessAction {
    /// Serve POST /add-checkpoint until killed.
    Serve {
        /// Address to listen on (port 0: any free port; the address is printed).
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: String,
        /// The witness's key file (`cairn key generate` makes one; see CAIRN_HOME).
        #[arg(long)]
        key: std::path::PathBuf,
        /// A log key it trusts (vkey); repeatable.
        #[arg(long = "log", required = true)]
        logs: Vec<String>,
        /// The file keeping the latest checkpoint cosigned per log.
        #[arg(long)]
        state: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum ArchiveAction {
    /// Push a session (or --all of the home's) to the archive: what it lacks is added,
    /// so a push interrupted and run again ends the same. A session whose history
    /// contradicts the archived one is refused, naming the seq. Exit 0 pushed, 2 not.
    Push {
        /// A session: id, unique prefix, folder, or `last`.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        session: Option<String>,
        /// Every session of the home.
        #[arg(long)]
        all: bool,
        /// The archive (postgres://USER@HOST:PORT/DB); the same as --archive.
        #[arg(long, value_name = "URL")]
        to: Option<String>,
        /// Records per transaction.
        #[arg(long, default_value_t = cairn_archive::BATCH_RECORDS_MAX_DEFAULT as u32, value_parser = clap::value_parser!(u32).range(1..))]
        batch_records_max: u32,
        /// A line on stderr per committed batch.
        #[arg(short, long)]
        verbose: bool,
        #[arg(long)]
        json: bool,
    },
    /// Pull an archived session (id or unique part) into a home, byte-exact: its log,
    /// blobs and checkpoints; `cairn verify` then checks it as any local session.
    Pull {
        session: String,
        /// The home to pull into (default: CAIRN_HOME).
        #[arg(long = "to", value_name = "HOME")]
        home: Option<std::path::PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// The archived sessions, newest first: id, project, records, first and last time,
    /// blobs, checkpoints.
    List {
        /// Only the projects whose key holds P.
        #[arg(long, value_name = "P")]
        project: Option<String>,
        /// One JSON array of the sessions (`[]` when there are none).
        #[arg(long, conflicts_with = "jsonl")]
        json: bool,
        /// One JSON object per line, one line per session.
        #[arg(long)]
        jsonl: bool,
    },
    /// Verify inside the archive, from the stored bytes: every record's hash and chain,
    /// the Merkle tree against each checkpoint, the checkpoints' signatures, the blobs;
    /// then the records against every checkpoint held elsewhere (the archive's
    /// newest-checkpoint record, this home's checkpoint files, witnesses): a history
    /// shorter than one, or rewritten under one, and a session that ended past its
    /// newest checkpoint are problems. Exit 0 clean, 1 problems found, 2 could not run.
    Verify {
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        session: Option<String>,
        #[arg(long)]
        all: bool,
        /// The log's verifier key (or a file holding it), repeatable (default: the key
        /// each session was pushed with). Given, every session that ended must have a
        /// checkpoint signed by it.
        #[arg(long = "key")]
        keys: Vec<String>,
        /// A witness (its URL) to ask for the latest checkpoint it cosigned of each
        /// session (cairn's `GET /latest-checkpoint/<origin>`); repeatable.
        #[arg(long = "witness", value_name = "URL")]
        witnesses: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Start a local archive for trying it: a PostgreSQL cluster in DIR (made the first
    /// time) on 127.0.0.1, with a database `cairn`; prints its URL.
    Local {
        dir: std::path::PathBuf,
        /// The port (default: the one it had, else a free one).
        #[arg(long)]
        port: Option<u16>,
        /// Stop it instead.
        #[arg(long)]
        stop: bool,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum CheckpointAction {
    /// Push the newest checkpoint; cosignatures are added to its file.
    Push {
        /// A session (id, unique prefix, `last`, folder).
        session: String,
        /// A witness's URL (its submission prefix); repeatable.
        #[arg(long = "witness", required = true)]
        witnesses: Vec<String>,
        #[arg(long)]
        json: bool,
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
    /// The keys allowed for good (`shell:git`, `web_fetch:host`, `edit_file`, `tool@dir`),
    /// and the grants refused: those whose session did not record the "always" answer.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Clear the allow list (recorded in the project's allow log).
    Reset {
        #[arg(long)]
        json: bool,
    },
    /// Take one key off the allow list (recorded in the project's allow log, like a
    /// grant); the session answers that granted it no longer count.
    Revoke {
        /// The key, as `cairn allow list` shows it (`shell:git`, `web_fetch:host`).
        key: String,
        #[arg(long)]
        json: bool,
    },
}

/// The id of `search --in-archive`.
const IN_ARCHIVE: &str = "in_archive";

/// The command line parsed, and whether `search --in-archive` was given (a switch the
/// derived `Cli` has no field for: see `Command::Search`); a usage error is printed
/// with the `cairn:` prefix of every error and exits 2, help and version print as usual
/// and exit 0.
fn parse() -> Result<(Cli, bool), ExitCode> {
    use clap::FromArgMatches;
    let parsed = cli_command().try_get_matches().and_then(|mut m| {
        let in_archive = m
            .subcommand_matches("search")
            .is_some_and(|s| s.get_flag(IN_ARCHIVE));
        Cli::from_arg_matches_mut(&mut m)
            .map(|cli| (cli, in_archive))
            .map_err(|e| e.format(&mut cli_command()))
    });
    match parsed {
        Ok(parsed) => Ok(parsed),
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return Err(ExitCode::from(
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        2
                    } else {
                        0
                    },
                ));
            }
            out::note(&usage_error(&e.to_string()));
            Err(ExitCode::from(2))
        }
    }
}

/// The command line as clap parses it, its help listing the commands in groups.
fn cli_command() -> clap::Command {
    use clap::CommandFactory;
    clidoc::with_groups(Cli::command())
}

/// clap's rendering of a usage error (`error: …`), with `cairn:` in place of `error:`.
fn usage_error(rendered: &str) -> String {
    let text = rendered.trim_end();
    format!("cairn: {}", text.strip_prefix("error: ").unwrap_or(text))
}

fn scope(user: bool) -> hookcmd::Scope {
    if user {
        hookcmd::Scope::User
    } else {
        hookcmd::Scope::Project
    }
}

impl Command {
    /// Whether the command runs a session, which it ends cleanly on SIGINT, SIGTERM
    /// and SIGHUP.
    fn runs_session(&self) -> bool {
        matches!(
            self,
            Command::Run { .. }
                | Command::Chat { .. }
                | Command::Resume { .. }
                | Command::Fork { .. }
                | Command::Mcp {
                    action: McpAction::Serve { .. } | McpAction::Proxy { .. }
                }
        )
    }

    /// Whether the command writes sessions, which are indexed as it ends
    /// (docs/SEARCH.md).
    fn writes_sessions(&self) -> bool {
        self.runs_session()
            || matches!(
                self,
                Command::Continue { .. }
                    | Command::Replay { .. }
                    | Command::Import(_)
                    | Command::Demo { .. }
            )
    }

    /// Runs the command; `in_archive` is `search --in-archive` (see `parse`).
    fn run(self, in_archive: bool) -> anyhow::Result<ExitCode> {
        match self {
            Command::Chat { model } => chatcmd::chat(model),
            Command::Verify {
                path,
                json,
                proof,
                since,
                policy,
                keys,
            } => verify(path, json, proof, since, policy, keys),
            Command::Key { action } => match action {
                KeyAction::Generate { name, force } => keycmd::generate(&name, force),
                KeyAction::Show { cosigner, json } => keycmd::show(cosigner, json),
            },
            Command::Prove {
                session,
                seq,
                out,
                allow,
            } => provecmd::prove(&session, seq, out.as_deref(), allow),
            Command::Witness {
                action:
                    WitnessAction::Serve {
                        addr,
                        key,
                        logs,
                        state,
                    },
            } => witnesscmd::serve(&addr, &key, &logs, &state),
            Command::Checkpoint {
                action:
                    CheckpointAction::Push {
                        session,
                        witnesses,
                        json,
                    },
            } => witnesscmd::push(&session, &witnesses, json),
            Command::Archive { action } => action.run(),
            Command::Replay {
                session,
                shell,
                json,
            } => replaycmd::replay(&session, shell, json),
            Command::Diff { a, b, json } => replaycmd::diff(&a, &b, json),
            Command::Checkout {
                session,
                at,
                dir,
                json,
            } => replaycmd::checkout(&session, &at, &dir, json),
            Command::Log { path, json } => logcmd::log(&path, json),
            Command::Head { path, json } => logcmd::head(&path, json),
            command @ Command::Run { .. } => command.run_session(),
            command @ Command::Memory { .. } => command.memory(),
            command @ Command::Allow { .. } => command.allow(),
            resume @ Command::Resume { .. } => resume.resume(),
            command @ Command::Continue { .. } => command.continue_last(),
            Command::Config { workspace, json } => configcmd::show(&workspace, json),
            command @ Command::Schema { .. } => command.schema(),
            Command::Fork {
                session,
                at,
                workspace,
                script,
                approve,
                json,
            } => resumecmd::fork(&session, &at, &workspace, script.as_deref(), approve, json),
            Command::Sessions { json, jsonl } => sessioncmd::sessions(Format::of(json, jsonl)),
            Command::Show {
                session,
                json,
                jsonl,
                verbose,
                prices,
            } => sessioncmd::show(
                &session,
                Format::of(json, jsonl),
                verbose,
                prices.as_deref(),
            ),
            Command::Ps { session, json } => pscmd::ps(&session, json),
            command @ Command::Tools { .. } => command.tools(),
            Command::Mcp { action } => action.run(),
            Command::Hook { action } => action.run(),
            Command::Demo { dir, json } => sessioncmd::demo(dir.as_deref(), json),
            command @ Command::Audit { .. } => command.audit(),
            Command::Browse { session } => browsecmd::browse(session.as_deref()),
            Command::Import(args) => importcmd::import(args),
            command @ Command::Search(_) => command.search(in_archive),
            Command::Export(args) => args.run(),
            command @ Command::Completions { .. } => command.completions(),
        }
    }
}

impl ArchiveAction {
    fn run(self) -> anyhow::Result<ExitCode> {
        match self {
            ArchiveAction::Push {
                session,
                all,
                to,
                batch_records_max,
                verbose,
                json,
            } => archivecmd::push(&archivecmd::PushArgs {
                session: session.as_deref(),
                all,
                to: to.as_deref(),
                batch_records_max: batch_records_max as usize,
                verbose,
                json,
            }),
            ArchiveAction::Pull {
                session,
                home,
                json,
            } => archivecmd::pull(&session, home.as_deref(), json),
            ArchiveAction::List {
                project,
                json,
                jsonl,
            } => archivecmd::list(project.as_deref(), sessioncmd::Format::of(json, jsonl)),
            ArchiveAction::Verify {
                session,
                all,
                keys,
                witnesses,
                json,
            } => archivecmd::verify(session.as_deref(), all, &keys, &witnesses, json),
            ArchiveAction::Local {
                dir,
                port,
                stop,
                json,
            } => archivecmd::local_cluster(&dir, port, stop, json),
        }
    }
}

impl McpAction {
    fn run(self) -> anyhow::Result<ExitCode> {
        match self {
            McpAction::Add {
                name,
                command,
                workspace,
            } => mcpcmd::add(&workspace, &name, &command),
            McpAction::List {
                json,
                tools,
                workspace,
            } => mcpcmd::list(&workspace, json, tools),
            McpAction::Remove { name, workspace } => mcpcmd::remove(&workspace, &name),
            McpAction::Serve {
                workspace,
                catalog,
                approve,
                sandbox,
                capture,
            } => mcpcmd::serve(&workspace, catalog, approve, &sandbox, capture),
            McpAction::Proxy {
                name,
                command,
                workspace,
                approve,
            } => mcpcmd::proxy(&workspace, &name, &command, approve),
        }
    }
}

impl HookAction {
    fn run(self) -> anyhow::Result<ExitCode> {
        match self {
            HookAction::Claude { approve } => Ok(hookcmd::run(hookcmd::AgentName::Claude, approve)),
            HookAction::Codex { approve } => Ok(hookcmd::run(hookcmd::AgentName::Codex, approve)),
            HookAction::Install {
                agent,
                approve,
                user,
                yes,
                workspace,
                ..
            } => hookcmd::install(agent, scope(user), &workspace, yes, Some(approve)),
            HookAction::Uninstall {
                agent,
                user,
                yes,
                workspace,
                ..
            } => hookcmd::install(agent, scope(user), &workspace, yes, None),
        }
    }
}

/// `cairn verify`: a proof file, a session's Merkle tree against a checkpoint or a
/// policy, a session deeply, or a plain log's integrity.
fn verify(
    path: Option<std::path::PathBuf>,
    json: bool,
    proof: Option<std::path::PathBuf>,
    since: Option<std::path::PathBuf>,
    policy: Option<std::path::PathBuf>,
    keys: Vec<String>,
) -> anyhow::Result<ExitCode> {
    let checks = provecmd::Checks {
        since: since.as_deref(),
        policy: policy.as_deref(),
        keys: &keys,
        json,
    };
    match (path, &proof) {
        (_, Some(p)) => provecmd::verify_proof(&checks, p),
        (Some(path), None) if since.is_some() || checks.policy.is_some() => {
            provecmd::verify_session(&checks, &path)
        }
        // With keys, the deep verify checks every checkpoint's signature and
        // that a finished session has one.
        (Some(path), None) if replaycmd::is_session(&path) => replaycmd::verify(&path, &keys, json),
        (Some(path), None) if !keys.is_empty() => provecmd::verify_session(&checks, &path),
        (Some(path), None) => logcmd::verify(&path, json),
        (None, None) => unreachable!("clap requires a path without --proof"),
    }
}

impl Command {
    /// `cairn run`: a script, or a task for the model (on a terminal, in the chat).
    fn run_session(self) -> anyhow::Result<ExitCode> {
        let Command::Run {
            task,
            script,
            workspace,
            approve,
            model,
            no_stream,
            json,
        } = self
        else {
            unreachable!("not a run command")
        };
        match (script, task) {
            (Some(script), _) => {
                sessioncmd::run_script(&script, &workspace, &model.settings(), approve, json)
            }
            (None, task) => {
                let a = sessioncmd::TaskArgs {
                    task: task.unwrap_or_default(),
                    workspace,
                    flags: model.settings(),
                    approve,
                    no_stream,
                    json,
                };
                // On a terminal, the chat (which goes on after the answer); never
                // with --json.
                if !json && chatcmd::on_terminal() {
                    chatcmd::run(&a, Some(a.task.clone()))
                } else {
                    sessioncmd::run_task(&a)
                }
            }
        }
    }

    /// `cairn memory`.
    fn memory(self) -> anyhow::Result<ExitCode> {
        let Command::Memory {
            action,
            json,
            workspace,
        } = self
        else {
            unreachable!("not a memory command")
        };
        match action {
            None => sessioncmd::memory_list(&workspace, json),
            Some(MemoryAction::List { json: j }) => sessioncmd::memory_list(&workspace, json || j),
            Some(MemoryAction::Forget { n }) => sessioncmd::memory_forget(&workspace, n, json),
        }
    }

    /// `cairn allow`.
    fn allow(self) -> anyhow::Result<ExitCode> {
        let Command::Allow { action, workspace } = self else {
            unreachable!("not an allow command")
        };
        match action {
            AllowAction::List { json } => sessioncmd::allow_list(&workspace, json),
            AllowAction::Reset { json } => sessioncmd::allow_reset(&workspace, json),
            AllowAction::Revoke { key, json } => sessioncmd::allow_revoke(&workspace, &key, json),
        }
    }

    /// `cairn continue`: `cairn resume last` with the configuration's model.
    fn continue_last(self) -> anyhow::Result<ExitCode> {
        let Command::Continue {
            message,
            model,
            no_stream,
            approve,
            json,
        } = self
        else {
            unreachable!("not a continue command")
        };
        resumecmd::resume(
            Some("last"),
            None,
            Some(resumecmd::WithModel {
                flags: model.settings(),
                no_stream,
                task: message,
            }),
            approve,
            false,
            &model.sandbox,
            json,
        )
    }

    /// `cairn schema`.
    fn schema(self) -> anyhow::Result<ExitCode> {
        let Command::Schema { which } = self else {
            unreachable!("not a schema command")
        };
        {
            let text = match which {
                SchemaKind::Events => cairn_engine::schema::log_line_schema(),
                SchemaKind::Stream => stream::SCHEMA.to_string(),
            };
            use std::io::Write;
            std::io::stdout()
                .write_all(text.as_bytes())
                .map(|()| ExitCode::SUCCESS)
                .map_err(anyhow::Error::from)
        }
    }

    /// `cairn tools`.
    fn tools(self) -> anyhow::Result<ExitCode> {
        let Command::Tools {
            catalog,
            json,
            markdown,
            mcp,
            workspace,
        } = self
        else {
            unreachable!("not a tools command")
        };
        sessioncmd::tools(catalog, json, markdown).and_then(|code| {
            if mcp {
                mcpcmd::tools(&workspace, json)
            } else {
                Ok(code)
            }
        })
    }

    /// `cairn audit`.
    fn audit(self) -> anyhow::Result<ExitCode> {
        let Command::Audit {
            session,
            json,
            markdown,
            html,
            prices,
        } = self
        else {
            unreachable!("not an audit command")
        };
        auditcmd::audit(
            &session,
            prices.as_deref(),
            match (json, markdown, &html) {
                (true, _, _) => auditcmd::Format::Json,
                (_, true, _) => auditcmd::Format::Markdown,
                (_, _, Some(f)) => auditcmd::Format::Html(f),
                _ => auditcmd::Format::Text,
            },
        )
    }

    /// `cairn search`.
    fn search(self, in_archive: bool) -> anyhow::Result<ExitCode> {
        let Command::Search(mut args) = self else {
            unreachable!("not a search command")
        };
        (|| {
            // The global --archive reaches `args.archive`, but only names the archive:
            // --in-archive searches it, found as every command finds it.
            args.archive = match in_archive {
                true => Some(archivecmd::url(None)?),
                false => None,
            };
            searchcmd::search(args)
        })()
    }

    /// `cairn completions`.
    fn completions(self) -> anyhow::Result<ExitCode> {
        let Command::Completions { shell } = self else {
            unreachable!("not a completions command")
        };
        {
            // Into memory first: the generator panics on a closed pipe.
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut cli_command(), "cairn", &mut buf);
            use std::io::Write;
            std::io::stdout()
                .write_all(&buf)
                .map(|()| ExitCode::SUCCESS)
                .map_err(anyhow::Error::from)
        }
    }

    /// `cairn resume`.
    fn resume(self) -> anyhow::Result<ExitCode> {
        let Command::Resume {
            session,
            task,
            script,
            rerun_interrupted,
            provider,
            model,
            base_url,
            api_key_env,
            turns_max,
            no_stream,
            approve,
            sandbox,
            json,
        } = self
        else {
            unreachable!("only a resume is resumed")
        };
        resumecmd::resume(
            session.as_deref(),
            script.as_deref(),
            provider.map(|provider| resumecmd::WithModel {
                flags: cairn_engine::settings::Settings {
                    provider: Some(provider),
                    model,
                    base_url,
                    api_key_env,
                    turns_max,
                    ..cairn_engine::settings::Settings::default()
                },
                no_stream,
                task,
            }),
            approve,
            rerun_interrupted,
            &sandbox,
            json,
        )
    }
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some((agent, approve)) = hookcmd::fast_args(&args) {
        return hookcmd::run(agent, approve);
    }
    // Hidden, and outside clap (the Command enum stays as it is): docs/CLI.md.
    if args.len() == 1 && args[0] == "help-markdown" {
        use std::io::Write;
        let text = clidoc::markdown(&cli_command());
        return match std::io::stdout().write_all(text.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("cairn: help-markdown: {e}");
                ExitCode::from(2)
            }
        };
    }
    let (cli, in_archive) = match parse() {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    if let Some(url) = cli.archive {
        archivecmd::set_flag_url(url);
    }
    let command = match cli.command {
        Some(c) => c,
        // `cairn` alone: the chat on a terminal, else the help.
        None if chatcmd::on_terminal() => Command::Chat {
            model: chatcmd::ChatArgs::defaults(),
        },
        None => {
            let _ = cli_command().print_help();
            return ExitCode::from(2);
        }
    };
    // The commands that run a session end it cleanly on SIGINT, SIGTERM and SIGHUP.
    if command.runs_session() {
        sessioncmd::prepare();
    }
    let writes_sessions = command.writes_sessions();
    let result = command.run(in_archive);
    if writes_sessions {
        searchcmd::index_quietly();
    }
    // Stopped by a signal: the session is ended and synced by now; exit as a shell
    // reports a process the signal killed (128 + its number).
    if let Some(s) = cairn_engine::signal::received() {
        if let Err(e) = &result
            && !out::is_broken_pipe(e)
        {
            out::note(&format!("cairn: {}", out::error_text(e)));
        }
        return ExitCode::from(s.exit_code());
    }
    match result {
        Ok(code) => code,
        Err(e) if out::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            out::note(&format!("cairn: {}", out::error_text(&e)));
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The hook's command lines dispatched before clap: each one the fast path takes
    /// is parsed by clap to the same command, and every other goes to clap.
    #[test]
    fn the_hook_fast_path_takes_exactly_what_clap_parses_to_a_hook() {
        let cases: &[(&[&str], bool)] = &[
            (&["hook", "claude"], true),
            (&["hook", "codex"], true),
            (&["hook", "claude", "--approve", "never"], true),
            (&["hook", "codex", "--approve=always"], true),
            (&["hook", "claude", "--approve", "ask"], true),
            (&["hook", "claude", "--approve", "maybe"], false),
            (&["hook", "claude", "--approve"], false),
            (&["hook", "claude", "--help"], false),
            (&["hook", "claude", "extra"], false),
            (&["hook", "install", "claude"], false),
            (&["--archive", "postgres://a@b/c", "hook", "claude"], false),
            (&["hook"], false),
            (&["--help"], false),
            (&[], false),
        ];
        for (args, fast) in cases {
            let os: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
            let taken = hookcmd::fast_args(&os);
            assert_eq!(taken.is_some(), *fast, "{args:?}");
            let Some((agent, approve)) = taken else {
                continue;
            };
            let cli = Cli::try_parse_from(std::iter::once("cairn").chain(args.iter().copied()))
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let parsed = match cli.command {
                Some(Command::Hook {
                    action: HookAction::Claude { approve },
                }) => (hookcmd::AgentName::Claude, approve),
                Some(Command::Hook {
                    action: HookAction::Codex { approve },
                }) => (hookcmd::AgentName::Codex, approve),
                other => panic!("{args:?}: {other:?}"),
            };
            assert_eq!(parsed, (agent, approve), "{args:?}");
            assert!(cli.archive.is_none());
        }
    }

    /// Which commands write sessions (and so index them as they end) is a property
    /// of the command, and a command that runs a session writes one.
    #[test]
    fn the_commands_that_write_sessions_are_those_that_record_one() {
        let cases: &[(&[&str], bool, bool)] = &[
            (&["run", "--script", "s.jsonl"], true, true),
            (&["chat"], true, true),
            (&["resume", "last"], true, true),
            (&["fork", "last", "--workspace", "d"], true, true),
            (&["mcp", "serve"], true, true),
            (&["mcp", "proxy", "n", "--", "x"], true, true),
            (&["continue"], false, true),
            (&["replay", "last"], false, true),
            (&["import", "--codex"], false, true),
            (&["demo"], false, true),
            (&["sessions"], false, false),
            (&["show", "last"], false, false),
            (&["mcp", "list"], false, false),
            (&["verify", "last"], false, false),
            (&["search", "word"], false, false),
        ];
        for (args, runs, writes) in cases {
            let cli = Cli::try_parse_from(std::iter::once("cairn").chain(args.iter().copied()))
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let command = cli.command.unwrap();
            assert_eq!(command.runs_session(), *runs, "{args:?}");
            assert_eq!(command.writes_sessions(), *writes, "{args:?}");
        }
    }
}
