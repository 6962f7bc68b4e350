//! The commands: one module each, holding the command's flags (a clap `Args`, with the
//! shared groups of [`flags`] flattened in) and its `run`, which hands them to the code
//! that does the work. A variant's doc comment is the command's help (`clidoc` orders
//! the commands in `cairn --help` and `docs/CLI.md`).

mod allow;
mod archive;
mod audit;
mod browse;
pub(crate) mod chat;
mod checkout;
mod checkpoint;
mod completions;
mod config;
mod continue_last;
mod demo;
mod diff;
mod flags;
mod fork;
mod head;
mod hook;
mod import;
mod key;
mod log;
mod mcp;
mod memory;
mod prove;
mod ps;
mod replay;
mod rerun;
mod resume;
mod run;
mod schema;
pub(crate) mod search;
mod sessions;
mod show;
mod tools;
mod verify;
mod witness;
mod worker;

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
    Verify(verify::Args),
    /// Manage the Ed25519 key that signs the tree checkpoints of sessions.
    Key(key::Args),
    /// Write a proof (C2SP tlog-proof) that record SEQ is in the session's signed
    /// checkpoint; `cairn verify --proof FILE --key VKEY` checks it without the session.
    Prove(prove::Args),
    /// Run a witness (C2SP tlog-witness): cosigns checkpoints that extend what it saw.
    Witness(witness::Args),
    /// Send a session's newest checkpoint to witnesses and keep their cosignatures.
    Checkpoint(checkpoint::Args),
    /// The team archive in PostgreSQL: push sessions (records, blobs, checkpoints),
    /// pull them back byte-exact, list and verify them there. The review verbs (show,
    /// audit, diff, replay, verify) take `archive:<id>` for an archived session.
    Archive(archive::Args),
    /// Take jobs of the archive's runs (`cairn archive run`) and write their results
    /// back: a lease renewed while a job runs, so a worker that dies loses nothing.
    Worker(worker::Args),
    /// Print a log's records, one line each (seq, time, type, summary).
    Log(log::Args),
    /// Print the last seq and its record hash, to anchor a log elsewhere.
    Head(head::Args),
    /// Run a session: driven by a model given TASK, or by a script (JSON Lines:
    /// {"tool":…,"input":…} or {"user":…}). Prints the session id (and the model's
    /// answer). Exit 0 even when tools fail; 2 when the script or the provider fails.
    Run(run::Args),
    /// Talk with the agent on the terminal: the model's text as it streams, each call
    /// with its diff or its command's output, permission asked with one key (y once,
    /// a always, n deny), and your next message after each answer. Ctrl-C cancels the
    /// running call (a second ends the session), Esc interrupts the model. Needs a
    /// terminal; `cairn` alone runs it.
    Chat(chat::Args),
    /// List (the default) or forget the facts remembered for the current project.
    Memory(memory::Args),
    /// Review or clear the allow list of the current project.
    Allow(allow::Args),
    /// Re-run a session in a fresh copy of its starting workspace (a new session whose
    /// parent is the original) and report where results diverge.
    /// Exit 0 identical, 1 divergences, 2 could not run.
    Replay(replay::Args),
    /// Run a recorded task again with a model (another, or the same one), from the
    /// start or from a call: a fork at that point, the recorded user messages given
    /// again, the new run recorded as a child session and compared with the original
    /// (calls, files, final answer). Exit 0 identical, 1 different, 2 could not run.
    Rerun(rerun::Args),
    /// Align two sessions' calls and show what differs: calls, inputs, statuses,
    /// outputs, file writes, final workspaces. Exit 0 identical, 1 different.
    Diff(diff::Args),
    /// Write the workspace as it was at a point of a session into DIR (new or empty).
    Checkout(checkout::Args),
    /// Resume a session after a crash (or after it ended): repair a torn tail, fold,
    /// reconcile with the workspace, processes and unfinished calls, record the
    /// findings; with --script, go on at the script's first unfinished step; with
    /// --provider, go on with the model from the conversation in the log (after TASK,
    /// when given, as a new user message).
    Resume(resume::Args),
    /// Go on with the model in this project's `last` session, after MESSAGE when given:
    /// `cairn resume last --provider …` with the provider, model and key of the
    /// configuration (`cairn config`).
    Continue(continue_last::Args),
    /// The configuration in force here and where each value comes from: flags, the
    /// environment, the project's config.toml (in its folder under the cairn home,
    /// never the workspace), the user's $CAIRN_HOME/config.toml, the defaults.
    Config(config::Args),
    /// Start a new session from a point of another: its workspace at that point is
    /// checked out into DIR, and the new session starts knowing what the parent knew.
    Fork(fork::Args),
    /// List recorded sessions, newest first.
    Sessions(sessions::Args),
    /// The conversation of a session in order: user messages, model text, each call on
    /// one line (tool, key input, status, elapsed), the final answer, then totals (calls
    /// by status, tokens per model, wall time, cost when prices are configured).
    Show(show::Args),
    /// The background processes of a session (live or finished): id, pid, status,
    /// exit, start time, command and log file.
    Ps(ps::Args),
    /// Print a tool catalog.
    Tools(tools::Args),
    /// MCP: the project's servers, whose tools are offered as mcp__{server}__{tool},
    /// and `serve`, which offers cairn's tools to an MCP client over stdio.
    Mcp(mcp::Args),
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
    /// workspace. An event that cannot be read is refused with `cairn: <why> (in the
    /// claude hook; …)` on stderr, exit 2 for a PreToolUse (the agent does not run the
    /// call) and 1 otherwise, and writes nothing in the cairn home.
    ///
    /// Claude Code takes `allow` (nothing to ask, or on the allow list), `ask` (it asks
    /// you; the default) and, with `--approve never`, `deny` with the reason, which the
    /// model is shown. With the default, a command line of known read-only programs
    /// (`cat`, `ls`, `grep`, `head`, … alone, writing nothing) gets no answer: Claude
    /// Code decides as it would without cairn, so recording adds no prompt; the question
    /// is recorded as before, answered when the call runs. `install` writes the
    /// command `cairn-hook claude`: the same hook in a small binary of its own beside
    /// `cairn`, which an agent starts and ends in about two thirds of `cairn`'s time
    /// (`cairn hook claude` when only `cairn` is on PATH). It is named as found on
    /// PATH when the agent runs it (its path beside this binary when neither is on
    /// PATH), so a project's shared settings work for everyone; `uninstall` removes exactly what it added, the file too when install
    /// made it. Codex 0.171 takes a denial only (with `--approve never`;
    /// otherwise its own approval policy decides), gives a hook no failure event and no
    /// command's exit code (recorded as `lost`), runs a new hook only once you trust it
    /// (`/hooks`) and reads a project's .codex/config.toml only in a trusted project.
    Hook(hook::Args),
    /// What a session did: header (times, end state, lineage, integrity from a deep
    /// verify, head hash, model and base URL, tokens), the conversation, files written
    /// with diffs, files read, commands, processes left running, network, permissions,
    /// refusals, failed and interrupted calls, redactions. A session that does not
    /// verify is audited from its intact records and exits 1.
    Audit(audit::Args),
    /// Browse sessions on the terminal: the current project's sessions, a session's
    /// conversation (messages and calls), a call's detail (input, output, diff,
    /// records). Read-only.
    Browse(browse::Args),
    /// Print a JSON Schema: `events` (a line of a session log, docs/event.schema.json)
    /// or `stream` (a line of the --json stream, docs/stream.schema.json).
    Schema(schema::Args),
    /// Import Codex CLI rollouts, Claude Code transcripts and ATIF trajectories as
    /// cairn sessions (files or folders; `--codex`, `--claude`: their default
    /// locations). Importing a file again does nothing; a rollout or transcript that
    /// grew is continued. Exit 0 when every file was
    /// imported (or unchanged), 1 when some could not be, 2 could not run.
    Import(import::Args),
    /// Search every session's messages, tool inputs and outputs: words (all must
    /// occur), "quoted phrases", prefix*. Newest session first, then by seq. Uses the
    /// index in the home (brought up to date first), or with --in-archive the team
    /// archive's (the one `cairn --archive URL` names, else CAIRN_ARCHIVE_URL, else
    /// `url` of [archive]). Exit 0 with hits, 1 with none, 2 could not run.
    Search(search::Args),
    /// Export sessions in another tool's format: `otel` (OpenTelemetry traces over OTLP),
    /// `atif` (Harbor's trajectory files).
    Export(crate::exportcmd::Args),
    /// Print shell completions for SHELL (bash, zsh, fish, elvish, powershell).
    Completions(completions::Args),
    /// Set up a sample project and run a scripted session in it per catalog.
    Demo(demo::Args),
}

impl Command {
    /// Whether the command runs a session, which it ends cleanly on SIGINT, SIGTERM
    /// and SIGHUP.
    pub fn runs_session(&self) -> bool {
        match self {
            Command::Run(_) | Command::Chat(_) | Command::Resume(_) | Command::Fork(_) => true,
            Command::Mcp(mcp) => mcp.runs_session(),
            _ => false,
        }
    }

    /// Whether the command writes sessions, which are indexed as it ends
    /// (docs/SEARCH.md).
    pub fn writes_sessions(&self) -> bool {
        self.runs_session()
            || matches!(
                self,
                Command::Continue(_)
                    | Command::Replay(_)
                    | Command::Rerun(_)
                    | Command::Import(_)
                    | Command::Demo(_)
            )
    }

    /// Runs the command; `in_archive` is `search --in-archive` (see `parse` in
    /// `main`).
    pub fn run(self, in_archive: bool) -> anyhow::Result<ExitCode> {
        match self {
            Command::Verify(a) => a.run(),
            Command::Key(a) => a.run(),
            Command::Prove(a) => a.run(),
            Command::Witness(a) => a.run(),
            Command::Checkpoint(a) => a.run(),
            Command::Archive(a) => a.run(),
            Command::Worker(a) => a.run(),
            Command::Log(a) => a.run(),
            Command::Head(a) => a.run(),
            Command::Run(a) => a.run(),
            Command::Chat(a) => a.run(),
            Command::Memory(a) => a.run(),
            Command::Allow(a) => a.run(),
            Command::Replay(a) => a.run(),
            Command::Rerun(a) => a.run(),
            Command::Diff(a) => a.run(),
            Command::Checkout(a) => a.run(),
            Command::Resume(a) => a.run(),
            Command::Continue(a) => a.run(),
            Command::Config(a) => a.run(),
            Command::Fork(a) => a.run(),
            Command::Sessions(a) => a.run(),
            Command::Show(a) => a.run(),
            Command::Ps(a) => a.run(),
            Command::Tools(a) => a.run(),
            Command::Mcp(a) => a.run(),
            Command::Hook(a) => a.run(),
            Command::Audit(a) => a.run(),
            Command::Browse(a) => a.run(),
            Command::Schema(a) => a.run(),
            Command::Import(a) => a.run(),
            Command::Search(a) => a.run(in_archive),
            Command::Export(a) => a.run(),
            Command::Completions(a) => a.run(),
            Command::Demo(a) => a.run(),
        }
    }
}
