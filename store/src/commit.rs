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
//!
//! While the thread's `fdatasync` runs, an append to the same file can wait for it in
//! the kernel (ext4 holds writes to a file being synced: measured, one `write` in a
//! hundred took a millisecond or more, against 4 µs otherwise). So the records appended
//! meanwhile are held in memory ([`Committer::write_or_hold`]) and the thread writes
//! them, in order, as soon as its sync returns; at most [`HELD_BYTES_MAX`] are held,
//! past it the writer waits for the sync as it did in the kernel. A writer that must
//! know its records are in the file or on the disk waits for the held ones first.

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

/// The most bytes of records held in memory while the group-commit thread syncs; an
/// append past it waits for the sync to end.
pub const HELD_BYTES_MAX: usize = 1 << 20;

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
    /// The thread is syncing, or writing what was held meanwhile: appends are held.
    syncing: bool,
    /// Records appended while the thread syncs, to be written by it after the sync.
    held: Vec<u8>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// Notified when the thread stops syncing (what it held is in the file).
    synced: Condvar,
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

    /// Appends `bytes` to `file`, or holds them for the thread to write after the sync
    /// it is running (see the module docs). Fails, writing nothing, when the thread's
    /// last write or sync failed.
    pub(crate) fn write_or_hold(&self, file: &File, bytes: &[u8]) -> std::io::Result<()> {
        let mut s = self.shared.lock();
        if s.syncing && s.held.len() + bytes.len() <= HELD_BYTES_MAX {
            s.held.extend_from_slice(bytes);
            return Ok(());
        }
        // Held records go first: wait until the thread wrote them.
        s = self.wait_written(s);
        if let Some(what) = &s.failed {
            return Err(std::io::Error::other(what.clone()));
        }
        drop(s);
        // The thread may start a sync meanwhile: it claims only what was asked for
        // before, which this write is not part of.
        (&*file).write_all(bytes)
    }

    /// Waits until nothing is held (every record appended is in the file).
    pub(crate) fn wait_written_all(&self) {
        drop(self.wait_written(self.shared.lock()));
    }

    fn wait_written<'a>(&'a self, mut s: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        while s.syncing {
            s = (self.shared.synced.wait(s)).unwrap_or_else(PoisonError::into_inner);
        }
        s
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
        // Nothing is held here (the last sync wrote what it held before it ended), so
        // every byte asked for is in the file.
        let target = s.wanted;
        s.syncing = true;
        drop(s);
        let result = file.sync_data();
        let mut s = shared.lock();
        match result {
            Ok(()) => s.synced = s.synced.max(target),
            Err(e) => s.failed = Some(format!("fsync failed: {e}")),
        }
        if end_sync(shared, s, file) {
            return;
        }
        trace(trace_to, path, target);
    }
}

/// Ends a sync: writes what was held meanwhile, in order (appends wait), then lets
/// appends go to the file again. True when a write or the sync failed.
fn end_sync<'a>(shared: &'a Shared, mut s: MutexGuard<'a, State>, file: &File) -> bool {
    while s.failed.is_none() && !s.held.is_empty() {
        let held = std::mem::take(&mut s.held);
        drop(s);
        let written = (&*file).write_all(&held);
        s = shared.lock();
        if let Err(e) = written {
            s.failed = Some(format!("write failed: {e}"));
        }
    }
    s.syncing = false;
    let failed = s.failed.is_some();
    drop(s);
    shared.synced.notify_all();
    failed
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

    /// A committer whose thread is (as far as appends can tell) in the middle of a sync.
    fn syncing(dir: &Path) -> (PathBuf, File, Committer) {
        let log = dir.join("log");
        let file = File::create(&log).unwrap();
        let c = Committer::new(&log, 0, Duration::from_secs(600), None);
        c.shared.lock().syncing = true;
        (log, file, c)
    }

    #[test]
    fn records_appended_during_a_sync_are_written_after_it_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (log, file, c) = syncing(dir.path());
        c.write_or_hold(&file, b"one\n").unwrap();
        c.write_or_hold(&file, b"two\n").unwrap();
        assert_eq!(std::fs::read(&log).unwrap(), b"");
        assert!(!end_sync(&c.shared, c.shared.lock(), &file));
        c.write_or_hold(&file, b"three\n").unwrap();
        assert_eq!(std::fs::read(&log).unwrap(), b"one\ntwo\nthree\n");
    }

    #[test]
    fn past_held_bytes_max_an_append_waits_for_the_sync_and_keeps_the_order() {
        let dir = tempfile::tempdir().unwrap();
        let (log, file, c) = syncing(dir.path());
        let at_limit = vec![b'a'; HELD_BYTES_MAX];
        c.write_or_hold(&file, &at_limit).unwrap();
        assert_eq!(
            std::fs::metadata(&log).unwrap().len(),
            0,
            "held at the limit"
        );
        let shared = Arc::clone(&c.shared);
        let f = file.try_clone().unwrap();
        let ender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            end_sync(&shared, shared.lock(), &f)
        });
        // One byte past: waits until the held bytes are written, then goes after them.
        c.write_or_hold(&file, b"b").unwrap();
        assert!(!ender.join().unwrap());
        let mut want = at_limit;
        want.push(b'b');
        assert_eq!(std::fs::read(&log).unwrap(), want);
    }

    #[test]
    fn appends_racing_real_syncs_reach_the_file_whole_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let mut c = Committer::new(&log, 0, Duration::ZERO, None);
        let mut want = Vec::new();
        for i in 0..3000 {
            let line = format!("record {i}\n");
            c.write_or_hold(&file, line.as_bytes()).unwrap();
            want.extend_from_slice(line.as_bytes());
            c.request(&file, want.len() as u64).unwrap();
        }
        drop(c);
        assert_eq!(std::fs::read(&log).unwrap(), want);
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
