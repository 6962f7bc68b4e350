//! The group commit of `batch` durability: a thread that makes a log durable within a
//! bounded window, so that recording a call does not wait for the disk.
//!
//! [`LogWriter::commit`](crate::LogWriter::commit) asks for every byte written so far to
//! reach the disk; the thread waits [`Options::commit_window_ms`](crate::Options) for
//! more to gather, then runs one `fdatasync` for all of them. A caller that must know the
//! records are on the disk before it acts (a command is about to run, a request about to
//! leave) calls [`LogWriter::sync`](crate::LogWriter::sync) instead, which returns only
//! once they are. A failed `fdatasync` poisons the writer, as on the call path: what
//! reached the disk is unknown after it.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The environment variable naming a file where every log sync is traced as a line
/// `synced <log path> <bytes>` once its `fdatasync` returned. For tests and debugging:
/// it lets a test check, from outside, that a log was durable up to a record before an
/// action the record announces was taken.
pub const SYNC_TRACE_ENV: &str = "CAIRN_SYNC_TRACE";

#[derive(Debug, Default)]
struct State {
    /// Bytes asked to be durable.
    wanted: u64,
    /// Bytes known to be durable.
    synced: u64,
    failed: Option<String>,
    stop: bool,
    /// The thread waits for a request (not inside a window): a request must wake it.
    idle: bool,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a few integers, consistent after any panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
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
        {
            let mut s = shared.lock();
            s.synced = synced;
            s.wanted = synced;
        }
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
        self.shared.lock().synced
    }

    /// Why the thread's last sync failed, if it did.
    pub(crate) fn failed(&self) -> Option<String> {
        self.shared.lock().failed.clone()
    }

    /// Traces this log's syncs to `file` (as [`SYNC_TRACE_ENV`] does for every log),
    /// without the process-wide environment that tests running in parallel share.
    #[cfg(test)]
    pub(crate) fn trace_to(&mut self, file: File) {
        self.trace = Some(Arc::new(Mutex::new(file)));
    }

    /// Records that the first `len` bytes were made durable on the caller's thread.
    pub(crate) fn note_synced(&self, len: u64) {
        let mut s = self.shared.lock();
        s.synced = s.synced.max(len);
        s.wanted = s.wanted.max(len);
        drop(s);
        trace(self.trace.as_deref(), &self.path, len);
    }

    /// Asks for the first `len` bytes of `file` to be made durable within the window;
    /// starts the thread on first use.
    pub(crate) fn request(&mut self, file: &File, len: u64) -> std::io::Result<()> {
        let idle = {
            let mut s = self.shared.lock();
            if len <= s.wanted {
                return Ok(());
            }
            s.wanted = len;
            s.idle
        };
        if self.thread.is_none() {
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
        } else if idle {
            // Inside a window the thread is not woken per request: it syncs all of
            // them when the window ends.
            self.shared.wake.notify_all();
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

fn run(
    shared: &Shared,
    file: &File,
    window: Duration,
    path: &Path,
    trace_to: Option<&Mutex<File>>,
) {
    loop {
        let mut s = shared.lock();
        while !s.stop && s.wanted <= s.synced && s.failed.is_none() {
            s.idle = true;
            s = shared.wake.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        s.idle = false;
        if s.failed.is_some() || s.wanted <= s.synced {
            return;
        }
        // Let the records of the next few milliseconds join this sync; a drop of the
        // committer ends the window at once (it waits for this sync).
        let end = Instant::now() + window;
        while !s.stop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = (shared.wake.wait_timeout(s, left))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let target = s.wanted;
        drop(s);
        let result = file.sync_data();
        let mut s = shared.lock();
        match result {
            Ok(()) => {
                s.synced = s.synced.max(target);
                drop(s);
                trace(trace_to, path, target);
            }
            Err(e) => {
                s.failed = Some(format!("fsync failed: {e}"));
                return;
            }
        }
    }
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

    /// A log in `dir`, its file, its trace file and a committer with a window far
    /// longer than a test: only a drop can make it sync in time.
    fn long_window(dir: &Path) -> (PathBuf, File, PathBuf, Committer) {
        let log = dir.join("log");
        let file = File::create(&log).unwrap();
        let (trace_path, trace_file) = traced(dir);
        let c = Committer::new(&log, 0, Duration::from_secs(600), Some(trace_file));
        (log, file, trace_path, c)
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
        let log = dir.path().join("log");
        let file = File::create(&log).unwrap();
        let (trace_path, trace_file) = traced(dir.path());
        let mut c = Committer::new(&log, 0, Duration::from_millis(300), Some(trace_file));
        for len in 1..=50 {
            c.request(&file, len).unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while c.synced() < 50 {
            assert!(std::time::Instant::now() < deadline, "never synced");
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(c);
        let trace = std::fs::read_to_string(trace_path).unwrap();
        assert_eq!(trace, format!("synced {} 50\n", log.display()));
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
