//! `cairn`: the command line of the cairn engine. Thin glue: every piece of logic lives
//! in the library crates; this crate parses flags and formats output.

mod logcmd;
mod out;

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
        /// A log file or a session directory.
        path: std::path::PathBuf,
        /// Print a machine-readable report.
        #[arg(long)]
        json: bool,
    },
    /// Print a log's records, one line each (seq, time, type, summary).
    Log {
        /// A log file or a session directory.
        path: std::path::PathBuf,
        /// Pass the records through as JSON Lines.
        #[arg(long)]
        json: bool,
    },
    /// Print the last seq and its record hash, to anchor a log elsewhere.
    Head {
        /// A log file or a session directory.
        path: std::path::PathBuf,
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Verify { path, json } => logcmd::verify(&path, json),
        Command::Log { path, json } => logcmd::log(&path, json),
        Command::Head { path, json } => logcmd::head(&path, json),
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
