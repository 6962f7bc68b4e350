//! `cairn archive`: the team archive in PostgreSQL (push, pull, list, verify, runs of
//! jobs over its sessions, a local cluster). The archive's URL is the global `--archive` (`archivecmd::url`), or
//! `push --to`.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::{ListOutputArgs, OutputArgs};
use crate::{archivecmd, queuecmd};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
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
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Pull an archived session (id or unique part) into a home, byte-exact: its log,
    /// blobs and checkpoints; `cairn verify` then checks it as any local session.
    Pull {
        session: String,
        /// The home to pull into (default: CAIRN_HOME).
        #[arg(long = "to", value_name = "HOME")]
        home: Option<PathBuf>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// The archived sessions, newest first: id, project, records, first and last time,
    /// blobs, checkpoints.
    List {
        /// Only the projects whose key holds P.
        #[arg(long, value_name = "P")]
        project: Option<String>,
        #[command(flatten)]
        output: ListOutputArgs,
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
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Enqueue a run: one job per archived session (--all, --project, --since, or the
    /// sessions named), for `cairn worker` processes on any machine to take; prints the
    /// run's id.
    Run {
        /// What each job does: replay, verify or rerun.
        #[arg(value_parser = ["replay", "verify", "rerun"])]
        kind: String,
        /// Archived sessions (ids or unique parts).
        #[arg(required_unless_present_any = ["all", "project", "since"])]
        sessions: Vec<String>,
        /// Every archived session.
        #[arg(long, conflicts_with = "sessions")]
        all: bool,
        /// The sessions of the projects whose key holds P.
        #[arg(long, value_name = "P", conflicts_with = "sessions")]
        project: Option<String>,
        /// The sessions started on or after DATE (2026-11-30, 2026-11-30T12:00).
        #[arg(long, value_name = "DATE", conflicts_with = "sessions")]
        since: Option<String>,
        /// The model a rerun runs with.
        #[arg(long)]
        model: Option<String>,
        /// A name for the run, shown by `archive runs`.
        #[arg(long)]
        name: Option<String>,
        /// Times a job may be taken: a job whose lease expires that often (it killed
        /// its worker each time) is failed with the reason.
        #[arg(long, default_value_t = cairn_archive::queue::ATTEMPTS_MAX_DEFAULT, value_parser = clap::value_parser!(u32).range(1..))]
        attempts_max: u32,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// The runs, newest first, with their jobs counted by state.
    Runs {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// A run summarised: results by outcome, divergences grouped by tool and field with
    /// example sessions, failures with their reason, sessions that got slower, workers
    /// and their throughput.
    Report {
        run: i64,
        /// Write the report as an HTML page to FILE.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Start a local archive for trying it: a PostgreSQL cluster in DIR (made the first
    /// time) on 127.0.0.1, with a database `cairn`; prints its URL.
    Local {
        dir: PathBuf,
        /// The port (default: the one it had, else a free one).
        #[arg(long)]
        port: Option<u16>,
        /// Stop it instead.
        #[arg(long)]
        stop: bool,
        #[command(flatten)]
        output: OutputArgs,
    },
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        match self.action {
            Action::Push {
                session,
                all,
                to,
                batch_records_max,
                verbose,
                output,
            } => archivecmd::push(&archivecmd::PushArgs {
                session: session.as_deref(),
                all,
                to: to.as_deref(),
                batch_records_max: batch_records_max as usize,
                verbose,
                json: output.json,
            }),
            Action::Pull {
                session,
                home,
                output,
            } => archivecmd::pull(&session, home.as_deref(), output.json),
            Action::List { project, output } => {
                archivecmd::list(project.as_deref(), output.format())
            }
            Action::Verify {
                session,
                all,
                keys,
                witnesses,
                output,
            } => archivecmd::verify(session.as_deref(), all, &keys, &witnesses, output.json),
            Action::Run {
                kind,
                sessions,
                all: _,
                project,
                since,
                model,
                name,
                attempts_max,
                output,
            } => queuecmd::run(&queuecmd::RunArgs {
                kind: &kind,
                sessions: &sessions,
                project: project.as_deref(),
                since: since.as_deref(),
                model: model.as_deref(),
                name: name.as_deref(),
                attempts_max,
                json: output.json,
            }),
            Action::Runs { output } => queuecmd::runs(output.json),
            Action::Report { run, html, output } => {
                queuecmd::report(run, html.as_deref(), output.json)
            }
            Action::Local {
                dir,
                port,
                stop,
                output,
            } => archivecmd::local_cluster(&dir, port, stop, output.json),
        }
    }
}
