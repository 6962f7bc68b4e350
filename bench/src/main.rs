//! `cairn-bench`: the benchmark harness of cairn.
//!
//! `cairn-bench store` measures the store on one machine in one run: append throughput
//! per durability mode, `cairn verify` against `b3sum`, open + torn-tail repair time and
//! peak memory of verify and of a streaming read. See `bench/README.md`.
//!
//! The hidden subcommands (`__verify`, `__read`) are what the harness re-executes itself
//! as, so that the peak memory of one operation is measured alone in its own process.

/// mimalloc, not glibc's malloc: a recorded call makes a few hundred small allocations
/// and frees; mimalloc's take about a third of glibc's instructions, and 4 µs off a
/// trivial call's 37 (issue 18, bench/HISTORY.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod archive;
mod capture;
mod child;
mod confine;
mod consent;
mod cpu;
mod engine;
mod events;
mod fleet;
mod hook;
mod import;
mod oracle;
mod otel;
mod redact;
mod replay;
mod report;
mod resume;
mod scan;
mod search;
mod shell;
mod store;
mod tree;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cairn-bench", about = "benchmark harness of cairn", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmark the store: appends, verify (against b3sum), open + repair, memory.
    Store(store::StoreArgs),
    /// Benchmark the engine: search against rg/fd, recording overhead, session start.
    Engine(engine::EngineArgs),
    /// Benchmark the shell tools: a foreground `run_shell true` against spawning `true`.
    Shell(shell::ShellArgs),
    /// Benchmark the permission analysis of command lines (tree-sitter-bash, guards).
    Consent(consent::ConsentArgs),
    /// Run the consent oracle once on a large corpus (100,000 lines by default): real
    /// bash against the permission analysis; prints figures and failures.
    Oracle(oracle::OracleArgs),
    /// Benchmark confinement: read and write access beneath the workspace descriptor
    /// against the string-path way it replaced.
    Confine(confine::ConfineArgs),
    /// Benchmark the no-change workspace scan that follows every command.
    Scan(scan::ScanArgs),
    /// Benchmark the session start on a clean git checkout: time and bytes stored,
    /// capture git against full, cold and warm.
    Capture(capture::CaptureArgs),
    /// Benchmark the redaction of command output as it streams.
    Redact(redact::RedactArgs),
    /// Benchmark replay: deep verify against integrity-only, replay against recorded time.
    Replay(replay::ReplayArgs),
    /// Benchmark resume: time and peak memory, with and without a snapshot.
    Resume(resume::ResumeArgs),
    /// Benchmark `cairn hook claude`: the latency it adds per tool call (p50, p99).
    Hook(hook::HookArgs),
    /// Benchmark import: MB/s and sessions/s on generated Codex rollouts, peak memory.
    Import(import::ImportArgs),
    /// Benchmark search indexing: recording cost per call with and without the index.
    Search(search::SearchArgs),
    /// Benchmark the team archive: push and pull throughput, verify time, on a local
    /// PostgreSQL cluster.
    Archive(archive::ArchiveArgs),
    /// Benchmark many sessions at once: the archive's job queue with 1 and 2 worker
    /// processes, its own cost per job, `replay --all --jobs 2` against `--jobs 1`.
    Fleet(fleet::FleetArgs),
    /// Benchmark search queries on a large generated home (10,000 sessions / 5 GB with
    /// `--sessions 10000 --session-kb 500`).
    SearchQuery(search::QueryArgs),
    /// Import a folder in process and print the summary (used for memory).
    #[command(name = "__import", hide = true)]
    ImportOnce { home: PathBuf, src: PathBuf },
    /// Benchmark the OpenTelemetry export: a trivial call with the live export off and
    /// on (p50, p99), and a 10,000-call session exported from its log.
    Otel(otel::OtelArgs),
    /// Benchmark the Merkle tree: cost per record, per checkpoint, prove and verify --since.
    Tree(tree::TreeArgs),
    /// Resume one session in process and print the time it took (used for memory).
    #[command(name = "__resume", hide = true)]
    ResumeOnce { home: PathBuf, dir: PathBuf },
    /// Verify one session deeply in process and print the time it took (used for memory).
    #[command(name = "__deep-verify", hide = true)]
    DeepVerifyOnce { dir: PathBuf },
    /// Verify one log in process and print `records bytes clean` (used for memory).
    #[command(name = "__verify", hide = true)]
    Verify {
        path: PathBuf,
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Run a command and print `wall_secs cpu_secs max_rss_bytes code` (see `child::run`).
    #[command(name = "__measure", hide = true)]
    Measure {
        stdout: PathBuf,
        stderr: PathBuf,
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Stream every record of a session directory and print `records bytes`.
    #[command(name = "__read", hide = true)]
    Read { dir: PathBuf },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Store(args) => store::run(&args),
        Command::Engine(args) => engine::run(&args),
        Command::Shell(args) => shell::run(&args),
        Command::Consent(args) => consent::run(&args),
        Command::Oracle(args) => oracle::run(&args),
        Command::Confine(args) => confine::run(&args),
        Command::Scan(args) => scan::run(&args),
        Command::Capture(args) => capture::run(&args),
        Command::Redact(args) => redact::run(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Resume(args) => resume::run(&args),
        Command::Import(args) => import::run(&args),
        Command::Search(args) => search::run(&args),
        Command::Archive(args) => archive::run(&args),
        Command::Fleet(args) => fleet::run(&args),
        Command::SearchQuery(args) => search::query(&args),
        Command::Hook(args) => hook::run(&args),
        Command::ImportOnce { home, src } => import::import_once(&home, &src),
        Command::Tree(args) => tree::run(&args),
        Command::Otel(args) => otel::run(&args),
        Command::ResumeOnce { home, dir } => resume::resume_once(&home, &dir),
        Command::DeepVerifyOnce { dir } => resume::deep_verify_once(&dir),
        Command::Verify { path, threads } => {
            let mut options = cairn_store::VerifyOptions::default();
            if let Some(t) = threads {
                options.threads = t;
            }
            let report = cairn_store::verify_path(&path, &options)
                .with_context(|| format!("verifying {}", path.display()))?;
            println!("{} {} {}", report.records, report.bytes, report.is_clean());
            Ok(())
        }
        Command::Measure {
            stdout,
            stderr,
            command,
        } => {
            let (program, args) = command.split_first().context("no command to measure")?;
            let mut cmd = std::process::Command::new(program);
            cmd.args(args);
            let run = child::run_direct(cmd, &stdout, &stderr)?;
            println!("{}", child::Measured::line(&run));
            Ok(())
        }
        Command::Read { dir } => {
            let started = Instant::now();
            let reader = cairn_store::LogReader::open(&dir)
                .with_context(|| format!("opening {}", dir.display()))?;
            let (mut records, mut event_bytes) = (0u64, 0u64);
            for r in reader.records()? {
                let r = r?;
                records += 1;
                event_bytes += r.event.get().len() as u64;
            }
            if records == 0 {
                bail!("{}: no records", dir.display());
            }
            println!(
                "{records} {event_bytes} {:.6}",
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
    }
}
