//! The archive's job queue: a run (replay, verify or rerun over many archived
//! sessions) is one row of `runs` and one row of `jobs` per session; workers on any
//! number of machines take jobs with `SELECT … FOR UPDATE SKIP LOCKED`, hold a lease
//! they renew (the job's `lease_until`, in the database's clock), and write the result
//! in one transaction with the job's state, keyed by job and attempt.
//!
//! Nothing lost: a worker that dies stops renewing, its lease expires and the next
//! worker that looks takes the job again (its attempt counts up). Nothing twice: a
//! result is written only while the job is still running under the writer's attempt,
//! in the transaction that marks it done, so a worker whose lease was taken over
//! writes nothing; `results` holds at most one row per job. A job whose lease expired
//! `attempts_max` times (it killed its worker each time) is failed with that reason.
//!
//! The queue knows no event kind, as the rest of the archive: a result is the JSON a
//! worker gives (its `outcome` names it; a report reads `fields`, `calls_us`, `first`
//! and `error` when they are there).

use std::collections::BTreeMap;

use postgres::GenericClient;
use serde::Serialize;

use crate::{Archive, ArchiveError};

/// The kinds of job a run can hold.
pub const KINDS: &[&str] = &["replay", "verify", "rerun"];

/// Times a job may be taken before a lease that expires again fails it.
pub const ATTEMPTS_MAX_DEFAULT: u32 = 3;

/// How long a lease lasts unless renewed, by default.
pub const LEASE_MS_DEFAULT: u64 = 30_000;

/// The outcome of a job failed by the queue itself.
pub const FAILED: &str = "failed";

/// Set at the start of the queue's transactions (and for a whole worker connection,
/// [`Archive::without_flush_wait`]): a commit does not wait for the write-ahead log to
/// reach the disk (an fsync per take, renewal and result would be most of a job's queue
/// cost). A server that crashes may forget the last leases and results; their jobs are
/// then taken and done again, and never written twice: a job's state and its result
/// commit together, or not at all, and a result needs the job running under its attempt.
const NO_FLUSH_WAIT: &str = "set local synchronous_commit = off";

/// The oldest queued job taken under a lease, in one statement ($1 worker, $2 lease ms).
const TAKE_QUEUED_SQL: &str = "with next as (
        select id from jobs where state = 'queued' order by id limit 1 for update skip locked
    )
    update jobs j set state = 'running', attempt = j.attempt + 1, worker = $1,
        lease_until = now() + $2 * interval '1 millisecond'
    from next, runs r
    where j.id = next.id and r.id = j.run
    returning j.id, j.run, j.session, j.attempt, r.kind, r.model";

/// A run to create.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    pub kind: &'a str,
    pub name: Option<&'a str>,
    pub model: Option<&'a str>,
    pub attempts_max: u32,
}

/// A job a worker took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub id: i64,
    pub run: i64,
    pub session: String,
    /// Which time it is taken, from 1: the key of its lease and its result.
    pub attempt: i32,
    pub kind: String,
    pub model: Option<String>,
}

/// What [`Archive::take_job`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    Job(Job),
    /// Jobs are running under other workers' leases; none to take now.
    Busy,
    /// No job queued or running.
    Idle,
}

/// One run, as `runs` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunRow {
    pub id: i64,
    pub kind: String,
    pub name: Option<String>,
    pub model: Option<String>,
    pub created: String,
    pub jobs: u64,
    pub queued: u64,
    pub running: u64,
    pub done: u64,
    pub failed: u64,
}

/// A group of divergences: one tool and field, the sessions where it diverged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DivergenceGroup {
    pub tool: String,
    pub field: String,
    /// Divergences of this tool and field, over every session.
    pub divergences: u64,
    pub sessions: u64,
    /// The first sessions (by id) where it happened.
    pub examples: Vec<String>,
}

/// A session whose calls took longer than recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Slower {
    pub session: String,
    pub recorded_us: u64,
    pub now_us: u64,
}

/// What a worker did in a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkerRow {
    pub worker: String,
    pub jobs: u64,
    /// Jobs per second, from its first result to its last (its jobs' own time when
    /// they all finished at once).
    pub jobs_per_s: f64,
}

/// A run summarised: what every session came to, grouped; then timings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    pub run: RunRow,
    /// Results by outcome (`failed`: failed by the queue).
    pub outcomes: BTreeMap<String, u64>,
    /// Every session's outcome, by session id.
    pub sessions: BTreeMap<String, String>,
    pub divergences: Vec<DivergenceGroup>,
    /// Failed and could-not-run sessions with the reason.
    pub failures: BTreeMap<String, String>,
    /// Sessions whose calls took more than twice as long (and 100 ms more) as recorded.
    pub slower: Vec<Slower>,
    pub workers: Vec<WorkerRow>,
}

/// Examples a divergence group keeps.
pub const EXAMPLES_MAX: usize = 3;

impl Archive {
    /// Creates a run over `sessions` (archived ids): one job each, queued. Its id.
    pub fn create_run(
        &mut self,
        run: &NewRun<'_>,
        sessions: &[String],
    ) -> Result<i64, ArchiveError> {
        if !KINDS.contains(&run.kind) {
            return Err(ArchiveError::Limit(format!(
                "unknown job kind '{}' (expected one of {})",
                run.kind,
                KINDS.join(", ")
            )));
        }
        let attempts_max = i32::try_from(run.attempts_max.max(1)).unwrap_or(i32::MAX);
        let mut tx = self.client.transaction()?;
        let id: i64 = tx
            .query_one(
                "insert into runs (kind, name, model, attempts_max) values ($1, $2, $3, $4) returning id",
                &[&run.kind, &run.name, &run.model, &attempts_max],
            )?
            .get(0);
        tx.execute(
            "insert into jobs (run, session) select $1, s from unnest($2::text[]) s order by s",
            &[&id, &sessions],
        )?;
        tx.commit()?;
        Ok(id)
    }

    /// Takes the oldest job that is queued or whose lease expired, under a lease of
    /// `lease_ms` for `worker`. A job whose lease expired with its last attempt is
    /// failed instead (its result says why), and the next one looked at.
    pub fn take_job(&mut self, worker: &str, lease_ms: u64) -> Result<Taken, ArchiveError> {
        // The common case in one statement: the oldest queued job.
        let lease = lease_ms_i64(lease_ms) as f64;
        if let Some(row) = self.client.query_opt(TAKE_QUEUED_SQL, &[&worker, &lease])? {
            return Ok(Taken::Job(Job {
                id: row.get(0),
                run: row.get(1),
                session: row.get(2),
                attempt: row.get(3),
                kind: row.get(4),
                model: row.get(5),
            }));
        }
        loop {
            let mut tx = self.client.transaction()?;
            tx.batch_execute(NO_FLUSH_WAIT)?;
            let row = tx.query_opt(
                "select j.id, j.run, j.session, j.attempt, j.state, j.worker, r.kind, r.model, r.attempts_max
                 from jobs j join runs r on r.id = j.run
                 where j.state = 'queued' or (j.state = 'running' and j.lease_until < now())
                 order by j.id
                 limit 1
                 for update of j skip locked",
                &[],
            )?;
            let Some(row) = row else {
                let open: i64 = tx
                    .query_one(
                        "select count(*) from jobs where state in ('queued', 'running')",
                        &[],
                    )?
                    .get(0);
                tx.commit()?;
                return Ok(if open == 0 { Taken::Idle } else { Taken::Busy });
            };
            let id: i64 = row.get(0);
            let attempt: i32 = row.get(3);
            let state: String = row.get(4);
            let attempts_max: i32 = row.get(8);
            if state == "running" && attempt >= attempts_max {
                let last: Option<String> = row.get(5);
                let reason = format!(
                    "its worker stopped renewing the lease {attempt} time{} (killed, or lost the database), the last {}",
                    if attempt == 1 { "" } else { "s" },
                    last.as_deref().unwrap_or("unknown")
                );
                let result = serde_json::json!({ "outcome": FAILED, "error": reason });
                write_result(
                    &mut tx,
                    id,
                    attempt,
                    last.as_deref().unwrap_or(worker),
                    FAILED,
                    &result,
                    0,
                )?;
                tx.execute(
                    "update jobs set state = 'failed', lease_until = null where id = $1",
                    &[&id],
                )?;
                tx.commit()?;
                continue;
            }
            let lease = lease_ms_i64(lease_ms);
            let attempt: i32 = tx
                .query_one(
                    "update jobs set state = 'running', attempt = attempt + 1, worker = $2,
                        lease_until = now() + $3 * interval '1 millisecond'
                     where id = $1 returning attempt",
                    &[&id, &worker, &(lease as f64)],
                )?
                .get(0);
            tx.commit()?;
            return Ok(Taken::Job(Job {
                id,
                run: row.get(1),
                session: row.get(2),
                attempt,
                kind: row.get(6),
                model: row.get(7),
            }));
        }
    }

    /// Makes this connection's commits not wait for the write-ahead log's flush: for a
    /// connection that only works the queue (a worker's), never for pushes.
    pub fn without_flush_wait(&mut self) -> Result<(), ArchiveError> {
        self.client.batch_execute("set synchronous_commit = off")?;
        Ok(())
    }

    /// Renews the lease of `job`'s `attempt` for `lease_ms` more; false when the lease
    /// is no longer this attempt's (it expired and another worker took the job).
    pub fn renew_lease(
        &mut self,
        job: i64,
        attempt: i32,
        lease_ms: u64,
    ) -> Result<bool, ArchiveError> {
        renew_lease(&mut self.client, job, attempt, lease_ms)
    }

    /// Writes the result of `job`'s `attempt` and marks it done, in one transaction;
    /// false (nothing written) when the job is no longer running under that attempt.
    pub fn finish_job(
        &mut self,
        job: &Job,
        worker: &str,
        outcome: &str,
        result: &serde_json::Value,
        elapsed_ms: u64,
    ) -> Result<bool, ArchiveError> {
        let mut tx = self.client.transaction()?;
        tx.batch_execute(NO_FLUSH_WAIT)?;
        let updated = tx.execute(
            "update jobs set state = 'done', lease_until = null
             where id = $1 and attempt = $2 and state = 'running'",
            &[&job.id, &job.attempt],
        )?;
        if updated == 0 {
            tx.rollback()?;
            return Ok(false);
        }
        write_result(
            &mut tx,
            job.id,
            job.attempt,
            worker,
            outcome,
            result,
            elapsed_ms,
        )?;
        tx.commit()?;
        Ok(true)
    }

    /// The runs, newest first, with their jobs counted by state.
    pub fn runs(&mut self) -> Result<Vec<RunRow>, ArchiveError> {
        let rows = self.client.query(RUNS_SQL, &[&None::<i64>])?;
        Ok(rows.iter().map(run_row).collect())
    }

    /// Run `run` summarised.
    pub fn report(&mut self, run: i64) -> Result<RunReport, ArchiveError> {
        let row = self
            .client
            .query_opt(RUNS_SQL, &[&Some(run)])?
            .ok_or_else(|| ArchiveError::NoSession(format!("run {run}")))?;
        let run = run_row(&row);
        let rows = self.client.query(
            "select j.session, r.outcome, r.result::text, r.worker, r.elapsed_ms,
                    extract(epoch from r.finished)::float8
             from results r join jobs j on j.id = r.job
             where j.run = $1 order by j.session",
            &[&run.id],
        )?;
        let mut report = RunReport {
            run,
            outcomes: BTreeMap::new(),
            sessions: BTreeMap::new(),
            divergences: Vec::new(),
            failures: BTreeMap::new(),
            slower: Vec::new(),
            workers: Vec::new(),
        };
        let mut groups: BTreeMap<(String, String), DivergenceGroup> = BTreeMap::new();
        // Per worker: jobs, first and last finish, time spent on its jobs.
        let mut workers: BTreeMap<String, (u64, f64, f64, u64)> = BTreeMap::new();
        for r in &rows {
            let session: String = r.get(0);
            let outcome: String = r.get(1);
            let text: String = r.get(2);
            let worker: String = r.get(3);
            let elapsed_ms: i64 = r.get(4);
            let finished: f64 = r.get(5);
            let result: serde_json::Value =
                serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
            *report.outcomes.entry(outcome.clone()).or_insert(0) += 1;
            report.sessions.insert(session.clone(), outcome.clone());
            if let Some(reason) = result
                .get("error")
                .or_else(|| result.get("first").filter(|f| f.is_string()))
                .and_then(|e| e.as_str())
            {
                report.failures.insert(session.clone(), reason.to_string());
            }
            add_divergences(&mut groups, &session, &result);
            if let Some(slower) = slower_of(&session, &result) {
                report.slower.push(slower);
            }
            if outcome != FAILED {
                let w = workers.entry(worker).or_insert((0, f64::MAX, f64::MIN, 0));
                w.0 += 1;
                w.1 = w.1.min(finished);
                w.2 = w.2.max(finished);
                w.3 += elapsed_ms.max(0) as u64;
            }
        }
        report.divergences = groups.into_values().collect();
        report.divergences.sort_by(|a, b| {
            b.sessions
                .cmp(&a.sessions)
                .then(a.tool.cmp(&b.tool))
                .then(a.field.cmp(&b.field))
        });
        report.workers = worker_rows(workers);
        Ok(report)
    }
}

/// Adds the divergences of one session's result (its `fields`: tool and field of each)
/// to their groups.
fn add_divergences(
    groups: &mut BTreeMap<(String, String), DivergenceGroup>,
    session: &str,
    result: &serde_json::Value,
) {
    let mut seen: Vec<(String, String)> = Vec::new();
    for f in result
        .get("fields")
        .and_then(|f| f.as_array())
        .into_iter()
        .flatten()
    {
        let (Some(tool), Some(field)) = (
            f.get(0).and_then(|t| t.as_str()),
            f.get(1).and_then(|t| t.as_str()),
        ) else {
            continue;
        };
        let key = (tool.to_string(), field.to_string());
        let g = groups
            .entry(key.clone())
            .or_insert_with(|| DivergenceGroup {
                tool: key.0.clone(),
                field: key.1.clone(),
                divergences: 0,
                sessions: 0,
                examples: Vec::new(),
            });
        g.divergences += 1;
        if !seen.contains(&key) {
            g.sessions += 1;
            if g.examples.len() < EXAMPLES_MAX {
                g.examples.push(session.to_string());
            }
            seen.push(key);
        }
    }
}

/// The session, when its result's `calls_us` (recorded, now) say it got slower.
fn slower_of(session: &str, result: &serde_json::Value) -> Option<Slower> {
    let [before, after] =
        serde_json::from_value::<[u64; 2]>(result.get("calls_us")?.clone()).ok()?;
    (after > before.saturating_mul(2) && after - before > SLOWER_US_MIN).then(|| Slower {
        session: session.to_string(),
        recorded_us: before,
        now_us: after,
    })
}

/// Microseconds a session's calls must take more than recorded to count as slower
/// (besides twice as long): noise below it.
pub const SLOWER_US_MIN: u64 = 100_000;

/// Each worker's row from its jobs, first and last finish (seconds) and time spent on
/// its jobs (ms).
fn worker_rows(workers: BTreeMap<String, (u64, f64, f64, u64)>) -> Vec<WorkerRow> {
    workers
        .into_iter()
        .map(|(worker, (jobs, first, last, spent_ms))| {
            // From its first finish to its last covers jobs - 1 of them; its own
            // time per job stands in when there is only one.
            let span = last - first;
            let jobs_per_s = if jobs > 1 && span > 0.0 {
                (jobs - 1) as f64 / span
            } else if spent_ms > 0 {
                jobs as f64 * 1000.0 / spent_ms as f64
            } else {
                0.0
            };
            WorkerRow {
                worker,
                jobs,
                jobs_per_s,
            }
        })
        .collect()
}

/// Renews a lease on any connection (a worker renews on one of its own while its job
/// runs).
pub fn renew_lease(
    client: &mut impl GenericClient,
    job: i64,
    attempt: i32,
    lease_ms: u64,
) -> Result<bool, ArchiveError> {
    let lease = lease_ms_i64(lease_ms) as f64;
    let n = client.execute(
        "update jobs set lease_until = now() + $3 * interval '1 millisecond'
         where id = $1 and attempt = $2 and state = 'running'",
        &[&job, &attempt, &lease],
    )?;
    Ok(n == 1)
}

fn lease_ms_i64(lease_ms: u64) -> i64 {
    i64::try_from(lease_ms.max(1)).unwrap_or(i64::MAX)
}

fn write_result(
    tx: &mut postgres::Transaction<'_>,
    job: i64,
    attempt: i32,
    worker: &str,
    outcome: &str,
    result: &serde_json::Value,
    elapsed_ms: u64,
) -> Result<(), ArchiveError> {
    let elapsed = i64::try_from(elapsed_ms).unwrap_or(i64::MAX);
    tx.execute(
        "insert into results (job, attempt, worker, outcome, result, elapsed_ms)
         values ($1, $2, $3, $4, $5::text::jsonb, $6)",
        &[
            &job,
            &attempt,
            &worker,
            &outcome,
            &result.to_string(),
            &elapsed,
        ],
    )?;
    Ok(())
}

const RUNS_SQL: &str = "select r.id, r.kind, r.name, r.model, r.created::text,
        count(j.id), count(j.id) filter (where j.state = 'queued'),
        count(j.id) filter (where j.state = 'running'),
        count(j.id) filter (where j.state = 'done'),
        count(j.id) filter (where j.state = 'failed')
     from runs r left join jobs j on j.run = r.id
     where $1::bigint is null or r.id = $1
     group by r.id order by r.id desc";

fn run_row(r: &postgres::Row) -> RunRow {
    let n = |i: usize| r.get::<_, i64>(i) as u64;
    RunRow {
        id: r.get(0),
        kind: r.get(1),
        name: r.get(2),
        model: r.get(3),
        created: r.get(4),
        jobs: n(5),
        queued: n(6),
        running: n(7),
        done: n(8),
        failed: n(9),
    }
}
