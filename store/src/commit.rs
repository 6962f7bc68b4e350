//! The group commit of `batch` durability: a thread that makes a log durable within a
//! bounded window, so that recording a call does not wait for the disk.
//!
//! [`LogWriter::commit`](crate::LogWriter::commit) asks for every byte written so far to
//! reach the disk; the thread lets more gather for the first half of
//! [`Options::commit_window_ms`](crate::Options), then runs one `fdatasync` for all of
//! them at the next commit (the end of a call), or when the window ends if none comes
//! first. A sync started at a call's end runs while the writer is between calls: one
//! started in the middle of a call makes the call's next append wait for the page the
//! writeback holds locked (ext4 locks the log's last page, and allocates its blocks,
//! while it submits it). A caller that must know the
//! records are on the disk before it acts (a command is about to run, a request about to
//! leave) calls [`LogWriter::sync`](crate::LogWriter::sync) instead, which returns only
//! once they are. A failed `fdatasync` poisons the writer, as on the call path: what
//! reached the disk is unknown after it.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The environment variable naming a file where every log sync is traced as a line
/// `synced <log path> <bytes>` once its `fdatasync` returned. For tests and debugging:
/// it lets a test check, from outside, that a log was durable up to a record before an
/// action the record announces was taken.
pub const SYNC_TRACE_ENV: &str = "CAIRN_SYNC_TRACE";

/// What the thread and the writer share. The writer's side of a request (the end of
/// every call) takes no lock: it counts the request and raises `wanted` with atomics,
/// and wakes the thread only when the thread sleeps until the next request (idle, or
/// in the second half of its window), which happens at most once a window. A lock
/// taken per call met the thread holding it now and then, and a writer that found it
/// held slept until the thread, descheduled meanwhile, ran again.
///
/// The wake-up cannot be lost: the writer stores its request, then reads
/// `sleeps_for_request`; the thread stores `sleeps_for_request`, then reads the
/// requests, and sleeps only if none came, with `state` locked from that reading until
/// it sleeps. With sequentially consistent order at least one sees the other's store:
/// the thread sees the request and does not sleep, or the writer sees the flag and
/// takes `state`'s lock to wake it, which it can only do once the thread sleeps.
#[derive(Debug, Default)]
struct Shared {
    /// Whether the thread is to stop (a drop), and why its last sync failed.
    state: Mutex<State>,
    wake: Condvar,
    /// Bytes asked to be durable.
    wanted: AtomicU64,
    /// Bytes known to be durable.
    synced: AtomicU64,
    /// Requests so far: each is the end of a call, a user message or a model turn.
    requests: AtomicU64,
    /// The thread sleeps until the next request: a request must wake it.
    sleeps_for_request: AtomicBool,
    /// A sync failed (`state` says why).
    failed: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    failed: Option<String>,
    stop: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a flag and a message, consistent after any panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether bytes asked for are not yet known durable.
    fn behind(&self) -> bool {
        self.wanted.load(SeqCst) > self.synced.load(SeqCst)
    }
}

/// The bytes of a log known to be durable, and the thread that makes them so.
#[derive(Debug)]
pub(crate) struct Committer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
    window: Duration,
    trace: Option<Arc<Mutex<File>>>,
}

impl Committer {
    /// A committer for the log at `path`, whose first `synced` bytes are durable; each
    /// sync is traced to `trace` (see [`trace_file`]).
    pub(crate) fn new(
        path: &Path,
        synced: u64,
        window: Duration,
        trace: Option<File>,
    ) -> Committer {
        let shared = Arc::new(Shared::default());
        shared.synced.store(synced, SeqCst);
        shared.wanted.store(synced, SeqCst);
        Committer {
            shared,
            thread: None,
            path: path.to_path_buf(),
            window,
            trace: trace.map(|f| Arc::new(Mutex::new(f))),
        }
    }

    /// Bytes known to be durable.
    pub(crate) fn synced(&self) -> u64 {
        self.shared.synced.load(SeqCst)
    }

    /// Why the thread's last sync failed, if it did.
    pub(crate) fn failed(&self) -> Option<String> {
        match self.shared.failed.load(SeqCst) {
            false => None,
            true => self.shared.lock().failed.clone(),
        }
    }

    /// Traces this log's syncs to `file` (as [`SYNC_TRACE_ENV`] does for every log),
    /// without the process-wide environment that tests running in parallel share.
    #[cfg(test)]
    pub(crate) fn trace_to(&mut self, file: File) {
        self.trace = Some(Arc::new(Mutex::new(file)));
    }

    /// Records that the first `len` bytes were made durable on the caller's thread.
    pub(crate) fn note_synced(&self, len: u64) {
        self.shared.synced.fetch_max(len, SeqCst);
        self.shared.wanted.fetch_max(len, SeqCst);
        trace(self.trace.as_deref(), &self.path, len);
    }

    /// Asks for the first `len` bytes of `file` to be made durable within the window;
    /// starts the thread on first use.
    pub(crate) fn request(&mut self, file: &File, len: u64) -> std::io::Result<()> {
        let shared = &self.shared;
        shared.requests.fetch_add(1, SeqCst);
        let before = shared.wanted.fetch_max(len, SeqCst);
        if self.thread.is_none() {
            if len <= before {
                return Ok(());
            }
            let file = file.try_clone()?;
            let shared = Arc::clone(&self.shared);
            let window = self.window;
            let path = self.path.clone();
            let trace = self.trace.clone();
            self.thread = Some(
                std::thread::Builder::new()
                    .name("cairn-commit".into())
                    .spawn(move || run(&shared, &file, window, &path, trace.as_deref()))?,
            );
        } else if shared.sleeps_for_request.load(SeqCst) {
            // Idle, or waiting for a call's end to start its sync (see the module's
            // doc). Inside the first half of a window the thread is not woken: it
            // syncs every request of the window at once.
            let _locked = shared.lock();
            shared.wake.notify_all();
        }
        Ok(())
    }
}

impl Drop for Committer {
    /// What was asked for is still made durable: the thread syncs it, then ends.
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Makes the calling thread background work for the scheduler (`SCHED_BATCH`): woken,
/// it does not preempt the thread running on its CPU, it runs on a free CPU or once the
/// running thread sleeps or its slice ends (at worst the next scheduler tick). The
/// group-commit thread is woken by the call that ends (a futex wake-up, usually placed
/// on the caller's own CPU); as an ordinary thread it preempted that caller on its way
/// back from the system call, and its `fdatasync` then ran on the caller's time. Where
/// the policy cannot be set (a sandbox that refuses it), the thread runs as it was.
pub fn run_in_background() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `sched_setscheduler` on the calling thread (pid 0), with a valid
    // parameter that outlives the call; it reads nothing else.
    let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
}

fn run(
    shared: &Shared,
    file: &File,
    window: Duration,
    path: &Path,
    trace_to: Option<&Mutex<File>>,
) {
    run_in_background();
    loop {
        // Idle until bytes are asked for.
        let mut s = shared.lock();
        while !s.stop && s.failed.is_none() {
            shared.sleeps_for_request.store(true, SeqCst);
            if shared.behind() {
                break;
            }
            s = shared.wake.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        shared.sleeps_for_request.store(false, SeqCst);
        if s.failed.is_some() || !shared.behind() {
            return;
        }
        // Let the records of the next millisecond or so join this sync, then start it at
        // the next request (a call's end: see the module's doc), and when the window
        // ends at the latest. A drop of the committer ends the window at once (it waits
        // for this sync).
        let opened = Instant::now();
        s = wait_until(shared, s, opened + window / 2, || false);
        let seen = shared.requests.load(SeqCst);
        shared.sleeps_for_request.store(true, SeqCst);
        s = wait_until(shared, s, opened + window, || {
            shared.requests.load(SeqCst) != seen
        });
        shared.sleeps_for_request.store(false, SeqCst);
        drop(s);
        let target = shared.wanted.load(SeqCst);
        let result = file.sync_data();
        match result {
            Ok(()) => {
                shared.synced.fetch_max(target, SeqCst);
                trace(trace_to, path, target);
            }
            Err(e) => {
                shared.lock().failed = Some(format!("fsync failed: {e}"));
                shared.failed.store(true, SeqCst);
                return;
            }
        }
    }
}

/// Waits on `shared`'s condition until `deadline`, a stop, or `done` holds.
fn wait_until<'a>(
    shared: &'a Shared,
    mut s: MutexGuard<'a, State>,
    deadline: Instant,
    done: impl Fn() -> bool,
) -> MutexGuard<'a, State> {
    while !s.stop && !done() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        s = (shared.wake.wait_timeout(s, left))
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    s
}

/// The file [`SYNC_TRACE_ENV`] names, opened for append, if it is set and opens.
pub(crate) fn trace_file() -> Option<File> {
    let path = std::env::var_os(SYNC_TRACE_ENV)?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .ok()
}

fn trace(to: Option<&Mutex<File>>, path: &Path, len: u64) {
    if let Some(f) = to {
        let mut f = f.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = writeln!(f, "synced {} {len}", path.display());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn traced(dir: &Path) -> (PathBuf, File) {
        let path = dir.join("trace");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        (path, f)
    }

    /// A log in `dir`, its file, its trace file and a committer of it with `window`.
    fn committer(dir: &Path, window: Duration) -> (PathBuf, File, PathBuf, Committer) {
        let log = dir.join("log");
        let file = File::create(&log).unwrap();
        let (trace_path, trace_file) = traced(dir);
        let c = Committer::new(&log, 0, window, Some(trace_file));
        (log, file, trace_path, c)
    }

    /// [`committer`] with a window far longer than a test: only a drop can make it sync
    /// in time.
    fn long_window(dir: &Path) -> (PathBuf, File, PathBuf, Committer) {
        committer(dir, Duration::from_secs(600))
    }

    #[test]
    fn a_committer_dropped_before_its_window_ends_still_syncs_what_was_asked() {
        let dir = tempfile::tempdir().unwrap();
        let (log, file, trace_path, mut c) = long_window(dir.path());
        c.request(&file, 10).unwrap();
        let started = std::time::Instant::now();
        drop(c);
        assert!(started.elapsed() < Duration::from_secs(60));
        let trace = std::fs::read_to_string(trace_path).unwrap();
        assert_eq!(trace, format!("synced {} 10\n", log.display()));
    }

    #[test]
    fn a_drop_ends_a_window_the_thread_is_already_waiting_in() {
        let dir = tempfile::tempdir().unwrap();
        let (log, file, trace_path, mut c) = long_window(dir.path());
        c.request(&file, 10).unwrap();
        // The thread is in its window by now (it used to sleep through all of it).
        std::thread::sleep(Duration::from_millis(200));
        c.request(&file, 20).unwrap();
        let started = std::time::Instant::now();
        drop(c);
        assert!(started.elapsed() < Duration::from_secs(60));
        let trace = std::fs::read_to_string(trace_path).unwrap();
        assert_eq!(trace, format!("synced {} 20\n", log.display()));
    }

    #[test]
    fn requests_within_one_window_share_one_sync() {
        let dir = tempfile::tempdir().unwrap();
        let (log, file, trace_path, mut c) = committer(dir.path(), Duration::from_millis(300));
        for len in 1..=50 {
            c.request(&file, len).unwrap();
        }
        wait_synced(&c, 50);
        drop(c);
        let trace = std::fs::read_to_string(trace_path).unwrap();
        assert_eq!(trace, format!("synced {} 50\n", log.display()));
    }

    /// Polls until `c` has synced `len` bytes; panics after a minute.
    fn wait_synced(c: &Committer, len: u64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while c.synced() < len {
            assert!(std::time::Instant::now() < deadline, "never synced");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_sync_starts_at_the_first_request_in_the_second_half_of_its_window() {
        let dir = tempfile::tempdir().unwrap();
        let window = Duration::from_secs(10);
        let (log, file, trace_path, mut c) = committer(dir.path(), window);
        let opened = std::time::Instant::now();
        c.request(&file, 10).unwrap();
        // A request in the first half joins the sync and does not start it.
        std::thread::sleep(Duration::from_millis(200));
        c.request(&file, 20).unwrap();
        std::thread::sleep(window / 2 + Duration::from_millis(500));
        // Past the half, with no request since: the thread still waits.
        assert_eq!(c.synced(), 0, "synced before a request in the second half");
        c.request(&file, 30).unwrap();
        wait_synced(&c, 30);
        // It did not wait for the window's end (4 s of slack for a slow machine).
        let took = opened.elapsed();
        assert!(
            took < window - Duration::from_secs(4),
            "synced after {took:?}"
        );
        drop(c);
        let trace = std::fs::read_to_string(trace_path).unwrap();
        assert_eq!(trace, format!("synced {} 30\n", log.display()));
    }

    #[test]
    fn with_no_request_in_the_second_half_the_sync_starts_when_the_window_ends() {
        let dir = tempfile::tempdir().unwrap();
        let window = Duration::from_millis(600);
        let (_, file, _, mut c) = committer(dir.path(), window);
        let opened = std::time::Instant::now();
        c.request(&file, 10).unwrap();
        wait_synced(&c, 10);
        assert!(opened.elapsed() >= window, "synced before the window ended");
    }

    #[test]
    fn a_request_inside_a_window_takes_no_lock() {
        let dir = tempfile::tempdir().unwrap();
        let (_, file, _, mut c) = long_window(dir.path());
        c.request(&file, 10).unwrap();
        // The thread is in the first half of its window (300 s) by now.
        std::thread::sleep(Duration::from_millis(200));
        let shared = Arc::clone(&c.shared);
        let held = shared.lock();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let caller = std::thread::spawn(move || {
            c.request(&file, 20).unwrap();
            assert_eq!(c.failed(), None);
            assert_eq!(c.synced(), 0);
            done_tx.send(()).unwrap();
            c
        });
        // With the lock held elsewhere, the request still returns.
        let returned = done_rx.recv_timeout(Duration::from_secs(30));
        drop(held);
        let c = caller.join().unwrap();
        assert!(returned.is_ok(), "a request waited for the lock");
        drop(c);
    }

    #[test]
    fn a_request_after_the_thread_went_idle_always_wakes_it() {
        // Each round lets the thread sync everything and go idle, then asks for more:
        // a wake-up lost between the thread's check and its sleep would leave the
        // bytes unsynced for good.
        let dir = tempfile::tempdir().unwrap();
        let (_, file, _, mut c) = committer(dir.path(), Duration::from_millis(2));
        let mut len = 0;
        for round in 0..300u64 {
            for _ in 0..(round % 7) {
                len += 1;
                c.request(&file, len).unwrap();
            }
            len += 1;
            c.request(&file, len).unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while c.synced() < len {
                assert!(
                    std::time::Instant::now() < deadline,
                    "round {round}: {len} bytes asked, {} synced",
                    c.synced()
                );
                std::thread::yield_now();
            }
            if round % 3 == 0 {
                std::thread::sleep(Duration::from_micros(round * 10));
            }
        }
    }

    /// A sync of the thread's that fails is told by `failed()` (which the writer turns
    /// into a poisoned log), and nothing past it is claimed durable.
    #[test]
    fn a_failed_sync_of_the_thread_is_told() {
        let dir = tempfile::tempdir().unwrap();
        // `fdatasync` of a pipe fails (EINVAL).
        let (_reader, writer) = std::io::pipe().unwrap();
        let pipe = File::from(std::os::fd::OwnedFd::from(writer));
        let mut c = Committer::new(&dir.path().join("log"), 0, Duration::from_millis(2), None);
        assert_eq!(c.failed(), None);
        c.request(&pipe, 10).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let why = loop {
            if let Some(why) = c.failed() {
                break why;
            }
            assert!(std::time::Instant::now() < deadline, "never told");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(why.starts_with("fsync failed: "), "{why}");
        assert_eq!(c.synced(), 0);
        // Told again, and still nothing durable, after more is asked.
        c.request(&pipe, 20).unwrap();
        assert_eq!(c.failed(), Some(why));
        assert_eq!(c.synced(), 0);
    }

    #[test]
    fn a_request_for_what_is_already_durable_starts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let file = File::create(&log).unwrap();
        let mut c = Committer::new(&log, 100, Duration::from_millis(1), None);
        c.request(&file, 100).unwrap();
        c.request(&file, 40).unwrap();
        assert!(c.thread.is_none());
        assert_eq!(c.synced(), 100);
    }
}
