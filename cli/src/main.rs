//! `cairn`: the command line of the cairn engine. Thin glue: every piece of logic lives
//! in the library crates; this crate parses flags and formats output.

mod auditcmd;
mod browsecmd;
mod keycmd;
mod livecmd;
mod logcmd;
mod mcpcmd;
mod out;
mod provecmd;
mod pscmd;
mod replaycmd;
mod resumecmd;
mod sessioncmd;
mod witnesscmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// cairn: an event-sourced engine for coding agents.
///
/// Exit codes: 0 success (or clean), 1 problems found, 2 could not run; a session
/// stopped by SIGINT, SIGTERM or SIGHUP exits 130, 143 or 129 once it is ended.
#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    about,
    long_about = None,
    after_help = "Exit codes: 0 success (or clean, identical), 1 problems found (verify, replay, diff), 2 could not run; a session stopped by SIGINT, SIGTERM or SIGHUP is ended cleanly, then exits 130, 143 or 129. Errors go to stderr prefixed `cairn:`; a closed pipe exits 0. Colours only on a terminal, and never when NO_COLOR is set and not empty."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Verify a session deeply: integrity, the fold, checkpoints, every recorded
    /// decision taken again, blobs, unfinished calls. A plain log file gets the
    /// integrity check only. Exit 0 clean, 1 problems found, 2 could not run.
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
        #[command(flatten)]
        sandbox: sessioncmd::SandboxArgs,
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
    /// Write the workspace as it was after record SEQ into DIR (new or empty).
    Checkout {
        session: std::path::PathBuf,
        #[arg(long = "at", value_name = "SEQ")]
        at: u64,
        dir: std::path::PathBuf,
    },
    /// Resume a session after a crash (or after it ended): repair a torn tail, fold,
    /// reconcile with the workspace, processes and unfinished calls, record the
    /// findings; with --script, go on at the script's first unfinished step; with
    /// --provider, go on with the model from the conversation in the log (after TASK,
    /// when given, as a new user message).
    Resume {
        /// A session: id, unique prefix, folder, or `last` (the newest of this workspace).
        session: String,
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
        /// The model (default: CAIRN_MODEL).
        #[arg(long, requires = "provider")]
        model: Option<String>,
        /// The API's base URL (default: CAIRN_BASE_URL, else the provider's).
        #[arg(long, requires = "provider")]
        base_url: Option<String>,
        /// The environment variable holding the API key (default: CAIRN_API_KEY, then
        /// OPENAI_API_KEY or ANTHROPIC_API_KEY).
        #[arg(long, requires = "provider")]
        api_key_env: Option<String>,
        /// Model turns before the run stops.
        #[arg(long, default_value_t = cairn_engine::agent::TURNS_MAX_DEFAULT)]
        turns_max: u32,
        /// Ask for whole answers instead of streams.
        #[arg(long)]
        no_stream: bool,
        /// Who answers permission requests: ask, always, never.
        #[arg(long, default_value = "ask")]
        approve: sessioncmd::Approve,
        #[command(flatten)]
        sandbox: sessioncmd::SandboxArgs,
        #[arg(long)]
        json: bool,
    },
    /// Start a new session from a point of another: its workspace after record SEQ is
    /// checked out into DIR, and the new session starts knowing what the parent knew.
    Fork {
        session: String,
        #[arg(long = "at", value_name = "SEQ")]
        at: u64,
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
    },
    /// MCP: the project's servers, whose tools are offered as mcp__{server}__{tool},
    /// and `serve`, which offers cairn's tools to an MCP client over stdio.
    Mcp {
        #[command(subcommand)]
        action: McpAction,
    },
    /// What a session did: header (times, end state, lineage, integrity from a deep
    /// verify, head hash), files written with diffs, files read, commands, processes
    /// left running, network, permissions, refusals, interrupted calls, redactions.
    Audit {
        /// A session: id, unique prefix, folder, or `last`.
        session: String,
        #[arg(long, conflicts_with_all = ["markdown", "html"])]
        json: bool,
        #[arg(long, conflicts_with = "html")]
        markdown: bool,
        /// Write one self-contained HTML file (with a timeline) to FILE.
        #[arg(long, value_name = "FILE")]
        html: Option<std::path::PathBuf>,
    },
    /// Browse sessions on the terminal: the current project's sessions, a session's
    /// calls, a call's detail (input, output, diff, records). Read-only.
    Browse {
        /// Open this session (id, unique prefix, folder, or `last`) directly.
        session: Option<String>,
    },
    /// Print shell completions for SHELL (bash, zsh, fish, elvish, powershell).
    Completions { shell: clap_complete::Shell },
    /// Set up a sample project and run a scripted session in it per catalog.
    Demo {
        /// Where to put the sample projects (new or empty; default: a fresh temp folder).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
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
        #[arg(long, default_value = ".")]
        workspace: std::path::PathBuf,
    },
    /// Remove a server.
    Remove {
        name: String,
        #[arg(long, default_value = ".")]
        workspace: std::path::PathBuf,
    },
    /// Speak MCP on stdin/stdout: one recorded session per connection, started at its
    /// first tool call, ended when the client closes stdin or on SIGINT, SIGTERM, SIGHUP.
    Serve {
        #[arg(long, default_value = ".")]
        workspace: std::path::PathBuf,
        /// The tool catalog: thndrs or thoth.
        #[arg(long, default_value = "thoth")]
        catalog: cairn_engine::Catalog,
        /// Who answers permission requests (there is no terminal): always (allow each
        /// once) or never (deny).
        #[arg(long, default_value = "never")]
        approve: sessioncmd::Approve,
        #[command(flatten)]
        sandbox: sessioncmd::SandboxArgs,
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
    Reset,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The commands that run a session end it cleanly on SIGINT, SIGTERM and SIGHUP.
    if matches!(
        cli.command,
        Command::Run { .. }
            | Command::Resume { .. }
            | Command::Fork { .. }
            | Command::Mcp {
                action: McpAction::Serve { .. }
            }
    ) {
        sessioncmd::prepare();
    }
    let result = match cli.command {
        Command::Verify {
            path,
            json,
            proof,
            since,
            policy,
            keys,
        } => {
            let checks = provecmd::Checks {
                since: since.as_deref(),
                policy: policy.as_deref(),
                keys: &keys,
                json,
            };
            match (path, &proof) {
                (_, Some(p)) => provecmd::verify_proof(&checks, p),
                (Some(path), None)
                    if since.is_some() || checks.policy.is_some() || !keys.is_empty() =>
                {
                    provecmd::verify_session(&checks, &path)
                }
                (Some(path), None) if replaycmd::is_session(&path) => {
                    replaycmd::verify(&path, json)
                }
                (Some(path), None) => logcmd::verify(&path, json),
                (None, None) => unreachable!("clap requires a path without --proof"),
            }
        }
        Command::Key { action } => match action {
            KeyAction::Generate { name, force } => keycmd::generate(&name, force),
            KeyAction::Show { cosigner } => keycmd::show(cosigner),
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
        Command::Replay {
            session,
            shell,
            json,
        } => replaycmd::replay(&session, shell, json),
        Command::Diff { a, b, json } => replaycmd::diff(&a, &b, json),
        Command::Checkout { session, at, dir } => replaycmd::checkout(&session, at, &dir),
        Command::Log { path, json } => logcmd::log(&path, json),
        Command::Head { path, json } => logcmd::head(&path, json),
        Command::Run {
            task,
            script,
            workspace,
            catalog,
            approve,
            sandbox,
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
            (Some(script), _) => {
                sessioncmd::run_script(&script, &workspace, catalog, approve, &sandbox)
            }
            (None, task) => sessioncmd::run_task(&sessioncmd::TaskArgs {
                task: task.unwrap_or_default(),
                workspace,
                catalog,
                sandbox,
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
        Command::Resume {
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
        } => resumecmd::resume(
            &session,
            script.as_deref(),
            provider.map(|provider| resumecmd::WithModel {
                provider,
                overrides: cairn_engine::provider::Overrides {
                    base_url,
                    model,
                    api_key_env,
                    stream: Some(!no_stream),
                },
                task,
                turns_max,
            }),
            approve,
            rerun_interrupted,
            &sandbox,
            json,
        ),
        Command::Fork {
            session,
            at,
            workspace,
            script,
            approve,
            json,
        } => resumecmd::fork(&session, at, &workspace, script.as_deref(), approve, json),
        Command::Sessions { json } => sessioncmd::sessions(json),
        Command::Show { session, json } => sessioncmd::show(&session, json),
        Command::Ps { session, json } => pscmd::ps(&session, json),
        Command::Tools {
            catalog,
            json,
            markdown,
        } => sessioncmd::tools(catalog, json, markdown),
        Command::Mcp { action } => match action {
            McpAction::Add {
                name,
                command,
                workspace,
            } => mcpcmd::add(&workspace, &name, &command),
            McpAction::List { json, workspace } => mcpcmd::list(&workspace, json),
            McpAction::Remove { name, workspace } => mcpcmd::remove(&workspace, &name),
            McpAction::Serve {
                workspace,
                catalog,
                approve,
                sandbox,
            } => mcpcmd::serve(&workspace, catalog, approve, &sandbox),
        },
        Command::Demo { dir } => sessioncmd::demo(dir.as_deref()),
        Command::Audit {
            session,
            json,
            markdown,
            html,
        } => auditcmd::audit(
            &session,
            match (json, markdown, &html) {
                (true, _, _) => auditcmd::Format::Json,
                (_, true, _) => auditcmd::Format::Markdown,
                (_, _, Some(f)) => auditcmd::Format::Html(f),
                _ => auditcmd::Format::Text,
            },
        ),
        Command::Browse { session } => browsecmd::browse(session.as_deref()),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            // Into memory first: the generator panics on a closed pipe.
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "cairn", &mut buf);
            use std::io::Write;
            std::io::stdout()
                .write_all(&buf)
                .map(|()| ExitCode::SUCCESS)
                .map_err(anyhow::Error::from)
        }
    };
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
            eprintln!("cairn: {}", out::error_text(&e));
            ExitCode::from(2)
        }
    }
}
