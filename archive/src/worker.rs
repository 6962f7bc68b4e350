//! A worker of the job queue: takes a job, renews its lease from a thread of its own
//! (on a connection of its own) while the job runs, pulls the session into a temporary
//! home (every line and blob checked as a pull does), hands it to the caller's runner,
//! and writes the result back (`queue`). A database that goes away is connected to
//! again, with a growing pause; a job whose lease was lost meanwhile is abandoned (its
//! result is not written: another worker has it), and one whose result could not be
//! written is tried again once connected, which writes it at most once.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::queue::{Job, Taken};
use crate::{Archive, ArchiveError};

/// How a worker works.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The worker's name in leases and results (host and pid).
    pub name: String,
    /// How long a lease lasts unless renewed; renewed every third of it.
    pub lease_ms: u64,
    /// The pause before looking again when no job can be taken.
    pub poll_ms: u64,
    /// Return once no job is queued or running, instead of waiting for more.
    pub exit_when_idle: bool,
    /// Return after this many jobs.
    pub jobs_max: Option<u64>,
    /// The longest pause between attempts to connect again.
    pub reconnect_ms_max: u64,
}

/// What a worker did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct WorkerStats {
    /// Jobs whose result it wrote.
    pub jobs: u64,
    /// Jobs it gave up: their lease was lost, or their result found another's.
    pub abandoned: u64,
    /// Times it connected again after losing the database.
    pub reconnects: u64,
}

/// What the runner returns for a job: its outcome and its result.
pub type JobOutput = (String, serde_json::Value);

/// Works on the queue of the archive at `url` until it is idle (with
/// `exit_when_idle`) or `jobs_max` jobs are done; `run` runs a job on the session
/// pulled into a temporary folder; `log` hears what happens.
pub fn work(
    url: &str,
    opts: &WorkerOptions,
    run: &mut dyn FnMut(&Job, &Path) -> JobOutput,
    log: &mut dyn FnMut(&str),
) -> Result<WorkerStats, ArchiveError> {
    let mut stats = WorkerStats::default();
    let mut archive: Option<Archive> = None;
    let mut pause_ms = 100u64;
    loop {
        if opts
            .jobs_max
            .is_some_and(|m| stats.jobs + stats.abandoned >= m)
        {
            return Ok(stats);
        }
        let a = match archive.as_mut() {
            Some(a) => a,
            None => match Archive::connect(url).and_then(|mut a| {
                a.without_flush_wait()?;
                Ok(a)
            }) {
                Ok(a) => {
                    pause_ms = 100;
                    archive.insert(a)
                }
                Err(e) => {
                    log(&format!(
                        "cannot reach the archive ({e}); trying again in {pause_ms} ms"
                    ));
                    std::thread::sleep(Duration::from_millis(pause_ms));
                    pause_ms = (pause_ms * 2).min(opts.reconnect_ms_max.max(100));
                    stats.reconnects += 1;
                    continue;
                }
            },
        };
        let job = match a.take_job(&opts.name, opts.lease_ms) {
            Ok(Taken::Job(j)) => j,
            Ok(Taken::Idle) if opts.exit_when_idle => return Ok(stats),
            Ok(Taken::Idle | Taken::Busy) => {
                std::thread::sleep(Duration::from_millis(opts.poll_ms));
                continue;
            }
            Err(e) => {
                log(&format!("lost the archive ({e}); connecting again"));
                archive = None;
                continue;
            }
        };
        match one_job(url, a, &job, opts, run, log) {
            Ok(true) => stats.jobs += 1,
            Ok(false) => stats.abandoned += 1,
            Err(e) => {
                // The result could not be written: connect again and write it, which
                // succeeds only if the job is still this attempt's.
                log(&format!(
                    "job {} (session {}): lost the archive ({e}); connecting again",
                    job.id, job.session
                ));
                archive = None;
                stats.abandoned += 1;
            }
        }
    }
}

/// Runs one job under a renewed lease; true when its result was written.
fn one_job(
    url: &str,
    archive: &mut Archive,
    job: &Job,
    opts: &WorkerOptions,
    run: &mut dyn FnMut(&Job, &Path) -> JobOutput,
    log: &mut dyn FnMut(&str),
) -> Result<bool, ArchiveError> {
    let start = Instant::now();
    let lease = Lease::hold(url, job, opts.lease_ms);
    let home = tempfile::Builder::new()
        .prefix("cairn-worker-")
        .tempdir()
        .map_err(crate::io_at(&std::env::temp_dir()))?;
    let (outcome, result) = match archive.pull(&job.session, home.path()) {
        Ok(pulled) => run(job, &pulled.dir),
        Err(e @ ArchiveError::Db(_)) => return Err(e),
        Err(e) => (
            "could_not_run".to_string(),
            serde_json::json!({ "outcome": "could_not_run", "error": format!("pull: {e}") }),
        ),
    };
    let lost = lease.release();
    if lost {
        log(&format!(
            "job {} (session {}): the lease was lost; abandoned",
            job.id, job.session
        ));
        return Ok(false);
    }
    let elapsed_ms = start.elapsed().as_millis() as u64;
    let mut written = archive.finish_job(job, &opts.name, &outcome, &result, elapsed_ms);
    if let Err(e) = &written {
        // Once more on a new connection: the first may have died before its commit.
        log(&format!(
            "job {}: writing the result failed ({e}); trying again",
            job.id
        ));
        let mut again = Archive::connect(url)?;
        again.without_flush_wait()?;
        written = again.finish_job(job, &opts.name, &outcome, &result, elapsed_ms);
        *archive = again;
    }
    let written = written?;
    if !written {
        log(&format!(
            "job {} (session {}): another worker has it now; result not written",
            job.id, job.session
        ));
    }
    Ok(written)
}

/// A lease renewed from a thread every third of its length, until released.
struct Lease {
    stop: Arc<AtomicBool>,
    lost: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Lease {
    fn hold(url: &str, job: &Job, lease_ms: u64) -> Lease {
        let stop = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(AtomicBool::new(false));
        let (url, id, attempt) = (url.to_string(), job.id, job.attempt);
        let (s, l) = (stop.clone(), lost.clone());
        let every = Duration::from_millis((lease_ms / 3).max(1));
        let thread = std::thread::spawn(move || {
            let mut client: Option<postgres::Client> = None;
            let mut last = Instant::now();
            while !s.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10).min(every));
                if last.elapsed() < every {
                    continue;
                }
                last = Instant::now();
                if client.is_none() {
                    client = crate::open_client(&url)
                        .and_then(|mut c| {
                            c.batch_execute("set synchronous_commit = off")?;
                            Ok(c)
                        })
                        .ok();
                }
                let Some(c) = client.as_mut() else { continue };
                match crate::queue::renew_lease(c, id, attempt, lease_ms) {
                    Ok(true) => {}
                    Ok(false) => {
                        l.store(true, Ordering::Relaxed);
                        return;
                    }
                    // Renewed again on a new connection next time.
                    Err(_) => client = None,
                }
            }
        });
        Lease {
            stop,
            lost,
            thread: Some(thread),
        }
    }

    /// Stops renewing; true when the lease was lost meanwhile.
    fn release(mut self) -> bool {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            // A renewal thread that panicked renews no more: the lease may be lost,
            // which the result's own check finds.
            let _ = t.join();
        }
        self.lost.load(Ordering::Relaxed)
    }
}

impl Drop for Lease {
    /// A job given up (the database lost while it ran) stops being renewed, so that
    /// its lease expires and another worker takes it. Regression: the renewal thread
    /// outlived the job and held its lease for ever.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
