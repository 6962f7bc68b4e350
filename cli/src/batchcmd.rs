//! `cairn replay --all` and `cairn verify --all`: many sessions of the home (or of the
//! archive, pulled into its cache), `--jobs` at a time, with a progress bar on a
//! terminal and a summary. The work is `cairn_replay::batch`'s; this file picks the
//! sessions, prints and picks the exit code.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use cairn_cli::summary::count;
use cairn_engine::Home;
use cairn_replay::ShellMode;
use cairn_replay::batch::{self, Outcome, SessionOutcome, Summary};

use crate::out;

/// Which sessions, and how many at a time.
pub struct Selection<'a> {
    pub project: Option<&'a str>,
    pub since: Option<&'a str>,
    pub in_archive: bool,
    pub jobs: Option<usize>,
}

impl Selection<'_> {
    fn jobs(&self) -> usize {
        self.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    }

    fn since(&self) -> Result<Option<String>> {
        self.since
            .map(|d| {
                batch::since_prefix(d).ok_or_else(|| {
                    anyhow!("--since {d}: not a date (2026-11-30, or 2026-11-30T12:00)")
                })
            })
            .transpose()
    }

    /// The session folders: the home's (replays of other sessions left out when
    /// `originals`), or the archive's pulled into the cache; oldest first.
    fn sessions(&self, originals: bool) -> Result<Vec<PathBuf>> {
        let since = self.since()?;
        if self.in_archive {
            return crate::archivecmd::pull_all(self.project, since.as_deref());
        }
        let home = Home::from_env()?;
        let mut dirs = Vec::new();
        for p in home.projects() {
            let key = p
                .dir
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            if self.project.is_some_and(|want| !key.contains(want)) {
                continue;
            }
            dirs.extend(p.sessions().iter().map(|s| p.session_dir(s)));
        }
        let mut dirs = batch::keep_since(dirs, since.as_deref());
        if originals {
            // A replay of a replay tells nothing new, and each run would add more.
            // Told `--jobs` at a time: each run adds as many replays as it made.
            let replay =
                batch::run_parallel(&dirs, self.jobs(), |d| cairn_replay::is_replay(d), |_| {});
            dirs = dirs
                .into_iter()
                .zip(replay)
                .filter_map(|(d, replay)| (!replay).then_some(d))
                .collect();
        }
        dirs.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        Ok(dirs)
    }
}

/// `cairn replay --all`.
pub fn replay_all(sel: &Selection<'_>, shell: ShellMode, json: bool) -> Result<ExitCode> {
    let dirs = sel.sessions(true)?;
    let outcomes = run(&dirs, sel.jobs(), "replaying", |d| {
        batch::replay_outcome(d, shell)
    });
    // The replays were written without a flush each: one sync makes them all durable.
    if let Some(home) = replays_home(&dirs) {
        cairn_store::sync_file_system(&home)
            .map_err(|e| anyhow!("syncing the replays under {}: {e}", home.display()))?;
    }
    report(&outcomes, json)
}

/// `cairn verify --all`, each session checked with `checks` as `cairn verify SESSION`
/// checks one with the same `--key` and `--policy`.
pub fn verify_all(
    sel: &Selection<'_>,
    checks: &batch::VerifyChecks<'_>,
    json: bool,
) -> Result<ExitCode> {
    let dirs = sel.sessions(false)?;
    let outcomes = run(&dirs, sel.jobs(), "verifying", |d| {
        batch::verify_outcome_with(d, checks)
    });
    report(&outcomes, json)
}

/// Where the replays of `dirs` were written: the home their sessions are in (the
/// archive's cache is a home too).
fn replays_home(dirs: &[PathBuf]) -> Option<PathBuf> {
    cairn_replay::home_of(dirs.first()?).ok().map(|h| h.root)
}

fn run(
    dirs: &[PathBuf],
    jobs: usize,
    what: &str,
    f: impl Fn(&std::path::Path) -> SessionOutcome + Sync,
) -> Vec<SessionOutcome> {
    let pb = std::io::stderr().is_terminal().then(|| {
        let pb = indicatif::ProgressBar::new(dirs.len() as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} {bar:30} {pos}/{len} sessions, {elapsed} (eta {eta})",
        ) {
            pb.set_style(style);
        }
        pb.set_message(what.to_string());
        pb
    });
    let outcomes = batch::run_parallel(
        dirs,
        jobs,
        |d| f(d),
        |_| {
            if let Some(pb) = &pb {
                pb.inc(1);
            }
        },
    );
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    outcomes
}

/// One line for a session that was not identical or clean.
fn outcome_line(o: &SessionOutcome) -> Option<String> {
    Some(match &o.outcome {
        Outcome::Identical | Outcome::Clean => return None,
        Outcome::Diverged {
            divergences, first, ..
        } => format!(
            "{}: {}, first at seq {}{}: {}",
            o.session,
            count(*divergences, "divergence"),
            first.seq,
            if first.call.is_empty() {
                String::new()
            } else {
                format!(" {} {}", first.call, first.tool)
            },
            first.field
        ),
        Outcome::Problems { problems, first } => {
            format!(
                "{}: {}, first: {first}",
                o.session,
                count(*problems, "problem")
            )
        }
        Outcome::CouldNotRun { error } => format!("{}: could not run: {error}", o.session),
    })
}

/// The summary line: `40 sessions: 38 identical, 1 diverged, 1 could not run`.
pub fn summary_line(s: &Summary) -> String {
    let parts: Vec<String> = [
        (s.identical, "identical"),
        (s.diverged, "diverged"),
        (s.clean, "clean"),
        (s.problems, "with problems"),
        (s.could_not_run, "could not run"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, w)| format!("{n} {w}"))
    .collect();
    format!(
        "{}{}{}",
        count(s.sessions, "session"),
        if parts.is_empty() { "" } else { ": " },
        parts.join(", ")
    )
}

fn report(outcomes: &[SessionOutcome], json: bool) -> Result<ExitCode> {
    let summary = Summary::of(outcomes.iter().map(|o| &o.outcome));
    if json {
        out::line(&serde_json::to_string(&serde_json::json!({
            "summary": summary,
            "sessions": outcomes,
        }))?)?;
    } else {
        for o in outcomes {
            if let Some(l) = outcome_line(o) {
                out::line(&l)?;
            }
        }
        out::line(&summary_line(&summary))?;
    }
    Ok(if summary.could_not_run > 0 {
        ExitCode::from(2)
    } else if summary.all_good() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
