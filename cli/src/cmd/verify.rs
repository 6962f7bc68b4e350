//! `cairn verify`: a proof file, a session's Merkle tree against a checkpoint or a
//! policy, a session deeply, or a plain log's integrity.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::{BatchArgs, OutputArgs, with_arg};
use crate::{batchcmd, logcmd, provecmd, replaycmd};

#[derive(Debug, clap::Args)]
#[command(mut_args(with_arg("json", |a| a.help("Print a machine-readable report"))))]
pub(crate) struct Args {
    /// A session (id, unique prefix, `last`), a session folder or a log file.
    #[arg(required_unless_present_any = ["proof", "all"], conflicts_with = "all")]
    path: Option<PathBuf>,
    #[command(flatten)]
    batch: BatchArgs,
    #[command(flatten)]
    output: OutputArgs,
    /// A proof file (`cairn prove`) to check offline, with --key or --policy.
    #[arg(long, conflicts_with_all = ["path", "since", "all"])]
    proof: Option<PathBuf>,
    /// An older checkpoint file of the session: its log must extend it. With --all, a
    /// date instead: only sessions started on or after it (2026-11-30).
    #[arg(long)]
    since: Option<PathBuf>,
    /// A witness policy (tlog-policy: log, witness, group, quorum lines). With --all,
    /// every session's newest checkpoint must meet it.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// A log's verifier key (`cairn key show`), or a file holding it; repeatable. With
    /// --all, every session's checkpoints are checked with them.
    #[arg(long = "key")]
    keys: Vec<String>,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let json = self.output.json;
        let checks = provecmd::Checks {
            since: self.since.as_deref(),
            policy: self.policy.as_deref(),
            keys: &self.keys,
            json,
        };
        if self.batch.all {
            let since = self.since.as_deref().map(|s| s.to_string_lossy());
            let keys = provecmd::keys(&self.keys)?;
            let policy = self.policy.as_deref().map(provecmd::policy).transpose()?;
            return batchcmd::verify_all(
                &self.batch.selection(since.as_deref()),
                &cairn_replay::batch::VerifyChecks {
                    keys: &keys,
                    policy: policy.as_ref(),
                },
                json,
            );
        }
        match (&self.path, &self.proof) {
            (_, Some(p)) => provecmd::verify_proof(&checks, p),
            (Some(path), None) if checks.since.is_some() || checks.policy.is_some() => {
                provecmd::verify_session(&checks, path)
            }
            // With keys, the deep verify checks every checkpoint's signature and
            // that a finished session has one.
            (Some(path), None) if replaycmd::is_session(path) => {
                replaycmd::verify(path, &self.keys, json)
            }
            (Some(path), None) if !self.keys.is_empty() => provecmd::verify_session(&checks, path),
            (Some(path), None) => logcmd::verify(path, json),
            (None, None) => unreachable!("clap requires a path without --proof"),
        }
    }
}
