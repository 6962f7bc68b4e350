//! A worker of the job queue: takes a job, renews its lease from a thread of its own
//! (on a connection of its own) while the job runs, pulls the session into a temporary
//! home (every line and blob checked as a pull does; nothing synced, since the home
//! does not outlive the worker), hands it to the caller's runner, and writes the result
//! back (`queue`); a thread of its own removes the home meanwhile. A database that goes
//! away is connected to again, with a growing pause; a job whose lease was lost
//! meanwhile is abandoned (its result is not written: another worker has it), and one
//! whose result could not be written is tried again once connected, which writes it at
//! most once.

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
    /// Where the time of its jobs went.
    pub phases: Phases,
}

/// Where a worker's time went, summed over its jobs, in microseconds: what is not
/// `run` is the queue's and the pull's cost of a job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Phases {
    /// Taking the jobs (the statements that took one; not the idle polls).
    pub take_us: u64,
    /// Making the session's temporary home ready.
    pub home_us: u64,
    /// Pulling the sessions: records and blobs checked, written, synced.
    pub pull_us: u64,
    /// The runner: opening the pulled session, and the job's own work.
    pub run_us: u64,
    /// Starting the lease's renewal and stopping it.
    pub lease_us: u64,
    /// Writing the results.
    pub finish_us: u64,
    /// Removing what the jobs left.
    pub clean_us: u64,
}

impl Phases {
    /// The sum of `self` and `o`, phase by phase.
    pub fn add(&mut self, o: &Phases) {
        self.take_us += o.take_us;
        self.home_us += o.home_us;
        self.pull_us += o.pull_us;
        self.run_us += o.run_us;
        self.lease_us += o.lease_us;
        self.finish_us += o.finish_us;
        self.clean_us += o.clean_us;
    }
}

/// Microseconds since `t`, then `t` set to now.
fn lap(t: &mut Instant) -> u64 {
    let us = t.elapsed().as_micros() as u64;
    *t = Instant::now();
    us
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
    let cleaner = Cleaner::start();
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
        let mut t = Instant::now();
        let job = match a.take_job(&opts.name, opts.lease_ms) {
            Ok(Taken::Job(j)) => {
                stats.phases.take_us += lap(&mut t);
                j
            }
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
        match one_job(url, a, &job, opts, (run, log), &cleaner, &mut stats.phases) {
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

/// What a worker's caller gives each job: the runner, and the log.
type Hooks<'a> = (
    &'a mut dyn FnMut(&Job, &Path) -> JobOutput,
    &'a mut dyn FnMut(&str),
);

/// Runs one job under a renewed lease; true when its result was written.
fn one_job(
    url: &str,
    archive: &mut Archive,
    job: &Job,
    opts: &WorkerOptions,
    (run, log): Hooks<'_>,
    cleaner: &Cleaner,
    phases: &mut Phases,
) -> Result<bool, ArchiveError> {
    let start = Instant::now();
    let mut t = Instant::now();
    let lease = Lease::hold(url, job, opts.lease_ms);
    phases.lease_us += lap(&mut t);
    let home = tempfile::Builder::new()
        .prefix("cairn-worker-")
        .tempdir()
        .map_err(crate::io_at(&std::env::temp_dir()))?;
    phases.home_us += lap(&mut t);
    let pulled = archive.pull_scratch(&job.session, home.path());
    phases.pull_us += lap(&mut t);
    let (outcome, result) = match pulled {
        Ok(pulled) => run(job, &pulled.dir),
        Err(e @ ArchiveError::Db(_)) => return Err(e),
        Err(e) => (
            "could_not_run".to_string(),
            serde_json::json!({ "outcome": "could_not_run", "error": format!("pull: {e}") }),
        ),
    };
    phases.run_us += lap(&mut t);
    let lost = lease.release();
    phases.lease_us += lap(&mut t);
    cleaner.remove(home);
    phases.clean_us += lap(&mut t);
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
    phases.finish_us += lap(&mut t);
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
    /// Dropped to stop the renewal: the thread wakes at once.
    stop: Option<std::sync::mpsc::Sender<()>>,
    lost: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Lease {
    fn hold(url: &str, job: &Job, lease_ms: u64) -> Lease {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let lost = Arc::new(AtomicBool::new(false));
        let (url, id, attempt) = (url.to_string(), job.id, job.attempt);
        let l = lost.clone();
        let every = Duration::from_millis((lease_ms / 3).max(1));
        let thread = std::thread::spawn(move || {
            let mut client: Option<postgres::Client> = None;
            // Until the lease is released (the sender dropped): a renewal every `every`.
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every)
            {
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
            stop: Some(stop),
            lost,
            thread: Some(thread),
        }
    }

    /// Stops renewing; true when the lease was lost meanwhile.
    fn release(mut self) -> bool {
        self.stop.take();
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
        self.stop.take();
    }
}

/// Removes the jobs' temporary homes on a thread of its own, so that a job's result is
/// not held up by the removal (a few dozen files, whose unlinking costs as much as the
/// replay on a busy disk). At most [`CLEANUP_HOMES_MAX`] wait, then a job waits for
/// room; all are removed when the cleaner is finished.
struct Cleaner {
    homes: Option<std::sync::mpsc::SyncSender<tempfile::TempDir>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The temporary homes that may wait for their removal.
const CLEANUP_HOMES_MAX: usize = 16;

impl Cleaner {
    fn start() -> Cleaner {
        let (homes, waiting) =
            std::sync::mpsc::sync_channel::<tempfile::TempDir>(CLEANUP_HOMES_MAX);
        let thread = std::thread::spawn(move || {
            // Each removed as it is dropped; the loop ends with the last sender.
            for home in waiting {
                drop(home);
            }
        });
        Cleaner {
            homes: Some(homes),
            thread: Some(thread),
        }
    }

    /// `home` removed soon; at once when the cleaner's thread is gone.
    fn remove(&self, home: tempfile::TempDir) {
        if let Some(homes) = &self.homes
            && let Err(std::sync::mpsc::SendError(home)) = homes.send(home)
        {
            drop(home);
        }
    }
}

impl Drop for Cleaner {
    /// Every home handed over is removed before the worker returns.
    fn drop(&mut self) {
        self.homes.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Regression guard: the homes handed to the cleaner are removed off the job's path,
    // and must all be gone once it is dropped (when the worker returns), not left to a
    // thread the process may end before it is done.
    #[test]
    fn every_home_handed_to_the_cleaner_is_gone_when_it_is_dropped() {
        let base = tempfile::tempdir().unwrap();
        let cleaner = Cleaner::start();
        let mut paths = Vec::new();
        // More than wait at once, so that handing one over also waits for room.
        for i in 0..CLEANUP_HOMES_MAX + 4 {
            let home = tempfile::Builder::new()
                .prefix("home-")
                .tempdir_in(base.path())
                .unwrap();
            for f in 0..20 {
                let dir = home.path().join(format!("d{}", f % 4));
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join(format!("{i}-{f}")), b"x").unwrap();
            }
            paths.push(home.path().to_path_buf());
            cleaner.remove(home);
        }
        drop(cleaner);
        let left: Vec<_> = paths.iter().filter(|p| p.exists()).collect();
        assert!(left.is_empty(), "left: {left:?}");
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
    }
}
