//! Many sessions at once: each session replayed or verified on its own, `jobs` at a
//! time on threads of this process, into one outcome per session (identical, diverged
//! with its first divergence, clean, problems with the first, could not run) and a
//! summary that counts them. The same outcome is what a worker of the archive's job
//! queue writes back for a session, so a run on one machine and one spread over many
//! report alike.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// What became of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Replayed, every call as recorded.
    Identical,
    /// Replayed, with `divergences` differences; the first of them.
    Diverged {
        divergences: u64,
        first: FirstDivergence,
        /// Every divergence's tool and field, in order (for grouping in reports).
        fields: Vec<(String, String)>,
    },
    /// Verified, no problem.
    Clean,
    /// Verified, `problems` found; the first of them.
    Problems { problems: u64, first: String },
    /// The replay or verify itself failed (a session that cannot be read, a workspace
    /// that cannot be materialised, …).
    CouldNotRun { error: String },
}

impl Outcome {
    /// The outcome's name, as its JSON tag says it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Identical => "identical",
            Outcome::Diverged { .. } => "diverged",
            Outcome::Clean => "clean",
            Outcome::Problems { .. } => "problems",
            Outcome::CouldNotRun { .. } => "could_not_run",
        }
    }

    /// True for identical and clean.
    pub fn is_good(&self) -> bool {
        matches!(self, Outcome::Identical | Outcome::Clean)
    }
}

/// The first divergence of a replay, without its texts (its diff is kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirstDivergence {
    pub seq: u64,
    pub call: String,
    pub tool: String,
    pub field: String,
    pub diff: String,
}

/// One session's outcome, with how long its calls took when recorded and now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionOutcome {
    pub session: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Time the job took here.
    pub elapsed_ms: u64,
    /// The recorded calls' time, and the replayed calls' (replay only), in
    /// microseconds: a session that got slower shows here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_us: Option<(u64, u64)>,
}

/// Counts of outcomes over many sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub sessions: u64,
    pub identical: u64,
    pub diverged: u64,
    pub clean: u64,
    pub problems: u64,
    pub could_not_run: u64,
}

impl Summary {
    /// The counts of `outcomes`.
    pub fn of<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Summary {
        let mut s = Summary::default();
        for o in outcomes {
            s.sessions += 1;
            *match o {
                Outcome::Identical => &mut s.identical,
                Outcome::Diverged { .. } => &mut s.diverged,
                Outcome::Clean => &mut s.clean,
                Outcome::Problems { .. } => &mut s.problems,
                Outcome::CouldNotRun { .. } => &mut s.could_not_run,
            } += 1;
        }
        s
    }

    /// True when every session was identical or clean.
    pub fn all_good(&self) -> bool {
        self.diverged + self.problems + self.could_not_run == 0
    }
}

/// Characters of a first divergence's diff an outcome keeps.
pub const FIRST_DIFF_CHARS_MAX: usize = 4_000;

fn session_id(dir: &Path) -> String {
    dir.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// Replays the session at `dir` (its shell calls in `shell` mode) into an outcome, the
/// replay written with durability `none`: the caller of many makes them durable at once
/// (`cairn_store::sync_file_system`).
#[cfg(feature = "run")]
pub fn replay_outcome(dir: &Path, shell: crate::ShellMode) -> SessionOutcome {
    replay_outcome_with(
        dir,
        crate::ReplayOptions {
            shell,
            // One of many: the caller syncs once at the end (`sync_file_system`), or
            // its home does not outlive it (a worker's).
            durability: Some(cairn_store::Durability::None),
            ..Default::default()
        },
    )
}

/// Replays the session at `dir` with `options` into an outcome.
#[cfg(feature = "run")]
pub fn replay_outcome_with(dir: &Path, options: crate::ReplayOptions) -> SessionOutcome {
    let start = Instant::now();
    let replayed = crate::replay(dir, options).and_then(|r| {
        let recorded = crate::Session::load(dir)?;
        let replay = crate::Session::load(&r.replay_dir)?;
        Ok((r, calls_us(&recorded), calls_us(&replay)))
    });
    let (outcome, calls) = match replayed {
        Ok((r, before, after)) => (outcome_of_replay(&r), Some((before, after))),
        Err(e) => (
            Outcome::CouldNotRun {
                error: e.to_string(),
            },
            None,
        ),
    };
    SessionOutcome {
        session: session_id(dir),
        outcome,
        elapsed_ms: start.elapsed().as_millis() as u64,
        calls_us: calls,
    }
}

/// The outcome a replay's report says.
#[cfg(feature = "run")]
pub fn outcome_of_replay(r: &crate::ReplayReport) -> Outcome {
    match r.divergences.first() {
        None => Outcome::Identical,
        Some(d) => Outcome::Diverged {
            divergences: r.divergences.len() as u64,
            first: FirstDivergence {
                seq: d.seq,
                call: d.call.clone(),
                tool: d.tool.clone(),
                field: d.diff.field.as_str().to_string(),
                diff: d.diff.diff.chars().take(FIRST_DIFF_CHARS_MAX).collect(),
            },
            fields: r
                .divergences
                .iter()
                .map(|d| (d.tool.clone(), d.diff.field.as_str().to_string()))
                .collect(),
        },
    }
}

/// The outcome a what-if run's report says: diverged at its first call that differs,
/// else at the final workspace or answer.
#[cfg(feature = "run")]
pub fn outcome_of_what_if(r: &crate::WhatIfReport) -> Outcome {
    if r.is_identical() {
        return Outcome::Identical;
    }
    let mut fields: Vec<(String, String)> = r
        .divergences
        .iter()
        .map(|d| (d.tool.clone(), d.diff.field.as_str().to_string()))
        .collect();
    if !r.workspace.is_empty() {
        fields.push((String::new(), "final workspace".into()));
    }
    if r.answer_original != r.answer_rerun {
        fields.push((String::new(), "final answer".into()));
    }
    let first = match r.divergences.first() {
        Some(d) => FirstDivergence {
            seq: d.seq,
            call: d.call.clone(),
            tool: d.tool.clone(),
            field: d.diff.field.as_str().to_string(),
            diff: d.diff.diff.chars().take(FIRST_DIFF_CHARS_MAX).collect(),
        },
        None => FirstDivergence {
            seq: 0,
            call: String::new(),
            tool: String::new(),
            field: fields.first().map_or_else(String::new, |f| f.1.clone()),
            diff: crate::unified("a/answer", "b/answer", &r.answer_original, &r.answer_rerun)
                .chars()
                .take(FIRST_DIFF_CHARS_MAX)
                .collect(),
        },
    };
    Outcome::Diverged {
        divergences: fields.len() as u64,
        first,
        fields,
    }
}

/// The time a session's finished calls took, in microseconds.
#[cfg(feature = "run")]
fn calls_us(s: &crate::Session) -> u64 {
    s.calls()
        .iter()
        .filter_map(|c| c.finished.as_ref().map(|(_, f)| f.elapsed_us))
        .sum()
}

/// Verifies the session at `dir` deeply into an outcome.
pub fn verify_outcome(dir: &Path) -> SessionOutcome {
    verify_outcome_with(dir, &VerifyChecks::default())
}

/// What a verify of many sessions checks of each besides the deep verify, as a
/// single session's verify does with the same keys and policy.
#[derive(Debug, Default, Clone, Copy)]
pub struct VerifyChecks<'a> {
    /// The log's verifier keys: every checkpoint's signature is checked with them, and
    /// a finished session must have one (`crate::verify_with_keys`).
    pub keys: &'a [cairn_tlog::Verifier],
    /// A witness policy the newest checkpoint of each session must meet, that
    /// checkpoint being of the session's own history.
    pub policy: Option<&'a cairn_tlog::Policy>,
}

/// [`verify_outcome`] with `checks`: a policy not met is one more problem.
pub fn verify_outcome_with(dir: &Path, checks: &VerifyChecks<'_>) -> SessionOutcome {
    let start = Instant::now();
    let outcome = match crate::verify_with_keys(dir, &crate::VerifyOptions::default(), checks.keys)
    {
        Ok((report, problems)) => {
            let mut firsts: Vec<String> = problems
                .first()
                .map(|p| {
                    let seq = p.seq.map_or("-".to_string(), |s| s.to_string());
                    format!("seq {seq} line {}: {}", p.line, p.what)
                })
                .into_iter()
                .collect();
            let mut count = report.problems;
            if let Some(policy) = checks.policy {
                match policy_problem(dir, policy) {
                    Ok(None) => {}
                    Ok(Some(p)) => {
                        count += 1;
                        firsts.push(p);
                    }
                    Err(e) => {
                        return SessionOutcome {
                            session: session_id(dir),
                            outcome: Outcome::CouldNotRun {
                                error: e.to_string(),
                            },
                            elapsed_ms: start.elapsed().as_millis() as u64,
                            calls_us: None,
                        };
                    }
                }
            }
            match firsts.into_iter().next() {
                Some(first) if count > 0 => Outcome::Problems {
                    problems: count,
                    first,
                },
                _ => Outcome::Clean,
            }
        }
        Err(e) => Outcome::CouldNotRun {
            error: e.to_string(),
        },
    };
    SessionOutcome {
        session: session_id(dir),
        outcome,
        elapsed_ms: start.elapsed().as_millis() as u64,
        calls_us: None,
    }
}

/// Why the session at `dir` does not meet `policy`, if it does not: its newest
/// checkpoint must be cosigned as the policy says and of this log's history. An error
/// when the checkpoints cannot be read.
fn policy_problem(
    dir: &Path,
    policy: &cairn_tlog::Policy,
) -> std::result::Result<Option<String>, cairn_tlog::TlogError> {
    use cairn_tlog::TlogError;
    let Some((size, _, note)) = cairn_tlog::log::latest_checkpoint(dir)? else {
        return Ok(Some("policy: the session has no signed checkpoint".into()));
    };
    if let Err(e) = policy.check(&note) {
        return Ok(Some(format!(
            "policy: the checkpoint of {size} records: {e}"
        )));
    }
    match cairn_tlog::log::verify_since(dir, &note, &policy.logs) {
        Ok(_) => Ok(None),
        Err(e @ (TlogError::Io { .. } | TlogError::Store(_))) => Err(e),
        Err(e) => Ok(Some(format!(
            "policy: the checkpoint of {size} records: {e}"
        ))),
    }
}

/// Runs `f` on every item, `jobs` at a time (at least one) on threads of this process,
/// calling `done` as each finishes (in the order they finish); the results in the
/// items' order.
pub fn run_parallel<I, T, F, D>(items: &[I], jobs: usize, f: F, done: D) -> Vec<T>
where
    I: Sync,
    T: Send,
    F: Fn(&I) -> T + Sync,
    D: Fn(&T) + Sync,
{
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let threads = jobs.clamp(1, items.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    done(&r);
                    // A poisoned lock means another job panicked: the scope re-raises
                    // that panic when it joins, so this result is not needed.
                    if let Ok(mut all) = results.lock() {
                        all[i] = Some(r);
                    }
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .flatten()
        .collect()
}

/// The prefix of session ids (`20261130T120000.000000-…`) on or after `date`
/// (`2026-11-30`, `2026-11-30T12:00`, `2026-11-30T12:00:00`), for `id >= prefix`;
/// none when `date` is not such a date.
pub fn since_prefix(date: &str) -> Option<String> {
    let key: String = date.chars().filter(|c| *c != '-' && *c != ':').collect();
    let (day, time) = key.split_once('T').unwrap_or((&key, ""));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    let ok = day.len() == 8 && digits(day) && matches!(time.len(), 0 | 2 | 4 | 6) && digits(time);
    ok.then_some(key)
}

/// The session folders of `dirs` that `since` (a [`since_prefix`]) keeps, in order.
pub fn keep_since(dirs: Vec<PathBuf>, since: Option<&str>) -> Vec<PathBuf> {
    match since {
        None => dirs,
        Some(p) => dirs
            .into_iter()
            .filter(|d| session_id(d).as_str() >= p)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_prefix_takes_dates_and_times_only() {
        for (date, want) in [
            ("2026-11-30", Some("20261130")),
            ("2026-11-30T12:00", Some("20261130T1200")),
            ("2026-11-30T12:00:05", Some("20261130T120005")),
            ("2026-11", None),
            ("yesterday", None),
            ("2026-11-30T1", None),
        ] {
            assert_eq!(since_prefix(date).as_deref(), want, "{date}");
        }
        let dirs = vec![
            PathBuf::from("s/20261129T235959.000000-aaaaaa"),
            PathBuf::from("s/20261130T000000.000000-bbbbbb"),
        ];
        assert_eq!(
            keep_since(dirs.clone(), Some("20261130")),
            vec![dirs[1].clone()]
        );
    }

    #[test]
    fn run_parallel_keeps_the_items_order_and_calls_done_once_each() {
        let items: Vec<u64> = (0..50).collect();
        let seen = AtomicUsize::new(0);
        let out = run_parallel(
            &items,
            4,
            |i| {
                std::thread::sleep(std::time::Duration::from_millis(50 - i));
                i * 2
            },
            |_| {
                seen.fetch_add(1, Ordering::Relaxed);
            },
        );
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert_eq!(seen.load(Ordering::Relaxed), 50);
    }

    #[test]
    fn summary_counts_each_outcome() {
        let outcomes = [
            Outcome::Identical,
            Outcome::Clean,
            Outcome::Identical,
            Outcome::CouldNotRun { error: "x".into() },
        ];
        let s = Summary::of(&outcomes);
        assert_eq!(
            s,
            Summary {
                sessions: 4,
                identical: 2,
                clean: 1,
                could_not_run: 1,
                ..Summary::default()
            }
        );
        assert!(!s.all_good());
    }
}
