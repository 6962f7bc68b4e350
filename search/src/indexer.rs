//! The background indexer: a session's writer hands it each record as it is appended
//! ([`cairn_tools::RecordSink`]) and goes on; a thread of its own adds the documents
//! to the embedded index in batches, off the call path.
//!
//! The call path only clones a record that makes or feeds a document (a message, a
//! model's text, a call's input and output, a command's end) into a bounded queue of
//! [`SEARCH_QUEUE_DOCS_MAX`] records; it never blocks. When the queue is full the
//! record is dropped and nothing more of the session is handed: the index is left at
//! the last record before the drop, and the next catch-up (`cairn search`) reads the
//! rest from the log. The thread commits every [`SEARCH_BATCH_DOCS_MAX`] records or
//! [`SEARCH_BATCH_MS`] after the first one waiting, whichever comes first, and when
//! the writer is done ([`cairn_tools::RecordSink::finish`]: at session end, or when
//! the recorder is dropped), within [`SEARCH_DRAIN_MS`]. A process that dies before a
//! commit loses nothing: the index is a cache, the catch-up reads what it lacks.
//!
//! A position may fall between a command's end (`shell_exec` finished) and its call's
//! `tool_finished` (a batch ends there, then a drop or a crash): the index keeps the
//! output blobs of such open commands with the position
//! ([`crate::SessionDocs::open_commands`]), so whoever goes on from it (a catch-up,
//! or the next batch) indexes that call's output from the command's own stdout and
//! stderr, as a read of the whole log does.
//!
//! Each batch is one transaction that reads the session's position first: what a
//! catch-up added meanwhile is not added twice, and what the index lacks before the
//! first record handed (a resumed session never indexed) is read from the log.

use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cairn_core::Record;

use crate::doc::needed;
use crate::sqlite::Index;

/// The most records waiting in the queue of a session's indexer; one more and the
/// session is left to the catch-up.
pub const SEARCH_QUEUE_DOCS_MAX: usize = 4096;

/// The records one commit of the indexer adds at most.
pub const SEARCH_BATCH_DOCS_MAX: usize = 512;

/// How long, in milliseconds, a record handed waits before it is committed at most
/// (when fewer than [`SEARCH_BATCH_DOCS_MAX`] come).
pub const SEARCH_BATCH_MS: u64 = 1_000;

/// How long, in milliseconds, a writer that is done waits for the indexer to commit
/// what it was handed; past it the thread is left to finish on its own (or die with
/// the process: the catch-up reads what it did not commit).
pub const SEARCH_DRAIN_MS: u64 = 5_000;

/// The indexer's limits (the constants above by default; tests make them tiny).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexerLimits {
    pub queue_docs_max: usize,
    pub batch_docs_max: usize,
    pub batch_ms: u64,
    pub drain_ms: u64,
}

impl Default for IndexerLimits {
    fn default() -> IndexerLimits {
        IndexerLimits {
            queue_docs_max: SEARCH_QUEUE_DOCS_MAX,
            batch_docs_max: SEARCH_BATCH_DOCS_MAX,
            batch_ms: SEARCH_BATCH_MS,
            drain_ms: SEARCH_DRAIN_MS,
        }
    }
}

/// What the writer side and the thread share.
#[derive(Default)]
struct Shared {
    /// The seq of the first record handed.
    from: OnceLock<u64>,
    /// The position after the writer's last record (first seq after it, log length),
    /// set when it is done and nothing was dropped.
    end: Mutex<Option<(u64, u64)>>,
}

/// What the thread did, once it is done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexerReport {
    /// Documents it added.
    pub docs: u64,
    /// Commits it made.
    pub commits: u64,
    /// Why it stopped adding the session's documents, if it did (the catch-up adds
    /// them).
    pub failed: Option<String>,
}

/// The background indexer of one session's writer.
pub struct Indexer {
    tx: Option<SyncSender<(Record, u64)>>,
    /// The thread, woken when a batch is waiting and when the writer is done.
    thread: std::thread::Thread,
    /// Records sent so far.
    sent: usize,
    done: Receiver<IndexerReport>,
    shared: Arc<Shared>,
    limits: IndexerLimits,
    /// The position after the last record handed.
    last: Option<(u64, u64)>,
    /// Records dropped because the queue was full (then nothing more is handed).
    dropped: u64,
    report: Option<IndexerReport>,
}

impl Indexer {
    /// Starts the thread that indexes session folder `dir` into the index at `index`.
    pub fn start(index: &Path, dir: &Path, limits: IndexerLimits) -> Indexer {
        let (tx, rx) = std::sync::mpsc::sync_channel(limits.queue_docs_max);
        let (done_tx, done) = std::sync::mpsc::channel();
        let shared = Arc::new(Shared::default());
        let (index, dir, s) = (index.to_path_buf(), dir.to_path_buf(), shared.clone());
        let thread = std::thread::spawn(move || {
            // The writer may have given up waiting: nobody to tell then.
            let _ = done_tx.send(run(&index, &dir, &rx, &s, limits));
        })
        .thread()
        .clone();
        Indexer {
            tx: Some(tx),
            thread,
            sent: 0,
            done,
            shared,
            limits,
            last: None,
            dropped: 0,
            report: None,
        }
    }

    /// What starts, for each session folder it is given, an indexer into the embedded
    /// index of the home at `home` (its [`crate::sqlite::INDEX_FILE`]): the sink start
    /// a writer's home is given (`cairn_engine::Home::with_sink`), so that sessions whose
    /// configuration says `search_index` are indexed as they are written.
    pub fn start_in_home(home: &Path, limits: IndexerLimits) -> cairn_tools::SinkStart {
        let index = home.join(crate::sqlite::INDEX_FILE);
        Arc::new(move |dir: &Path| {
            Box::new(Indexer::start(&index, dir, limits)) as Box<dyn cairn_tools::RecordSink>
        })
    }

    /// Whether a record with this event is handed to the thread (it makes or feeds a
    /// document); the others only move the position on.
    pub fn takes(event: &cairn_core::event::Event) -> bool {
        needed(event)
    }

    /// Records dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// What the thread did, once [`cairn_tools::RecordSink::finish`] saw it done.
    pub fn report(&self) -> Option<&IndexerReport> {
        self.report.as_ref()
    }
}

impl cairn_tools::RecordSink for Indexer {
    fn record(&mut self, record: &Record, log_bytes: u64) {
        self.take(
            record.seq,
            needed(&record.event),
            || record.clone(),
            log_bytes,
        );
    }

    fn record_owned(&mut self, record: Record, log_bytes: u64) {
        let (seq, needed) = (record.seq, needed(&record.event));
        self.take(seq, needed, || record, log_bytes);
    }

    fn finish(&mut self) {
        self.end();
    }
}

impl Indexer {
    /// Takes the record of `seq` (sent to the thread if it is `needed`, as `record`
    /// gives it) and the log's length after it.
    fn take(&mut self, seq: u64, needed: bool, record: impl FnOnce() -> Record, log_bytes: u64) {
        if self.dropped > 0 {
            return;
        }
        let Some(tx) = &self.tx else {
            return;
        };
        // Set before anything is sent: the thread reads it after it receives.
        let _ = self.shared.from.set(seq);
        if needed {
            match tx.try_send((record(), log_bytes)) {
                Ok(()) => {
                    self.sent += 1;
                    if self.sent.is_multiple_of(self.limits.batch_docs_max.max(1)) {
                        self.thread.unpark();
                    }
                }
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                    self.dropped += 1;
                    return;
                }
            }
        }
        self.last = Some((seq + 1, log_bytes));
    }

    /// The writer is done (see [`cairn_tools::RecordSink::finish`]).
    fn end(&mut self) {
        let Some(tx) = self.tx.take() else {
            return;
        };
        if self.dropped == 0
            && let Ok(mut end) = self.shared.end.lock()
        {
            *end = self.last;
        }
        // The thread drains the queue, commits and stops once the sender is gone.
        drop(tx);
        self.thread.unpark();
        self.report = self
            .done
            .recv_timeout(Duration::from_millis(self.limits.drain_ms))
            .ok();
    }
}

impl Drop for Indexer {
    fn drop(&mut self) {
        cairn_tools::RecordSink::finish(self);
    }
}

/// The thread: batches of what `rx` brings, committed by size and by time, until the
/// writer is done.
fn run(
    index_path: &Path,
    dir: &Path,
    rx: &Receiver<(Record, u64)>,
    shared: &Shared,
    limits: IndexerLimits,
) -> IndexerReport {
    let mut report = IndexerReport::default();
    // Opened at the first commit, not when the session starts: the calls of a short
    // session do not run beside SQLite's open and schema check (on a 2-core machine
    // that slowed each call of a 10-call session by ~15 %).
    let mut index: Option<std::result::Result<Index, String>> = None;
    let mut maker = None;
    let mut batch: Vec<(Record, u64)> = Vec::new();
    let batch_max = limits.batch_docs_max.max(1);
    loop {
        // The first record of a batch wakes the thread; the others are taken without
        // waking it (a wake per record would put a syscall on the call path): when
        // the batch's time is up, or when the writer says a batch is waiting or it is
        // done (`unpark`).
        let mut done = match rx.recv() {
            Ok(r) => {
                batch.push(r);
                false
            }
            Err(_) => true,
        };
        let deadline = Instant::now() + Duration::from_millis(limits.batch_ms);
        while !done && batch.len() < batch_max {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(TryRecvError::Disconnected) => done = true,
                Err(TryRecvError::Empty) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    std::thread::park_timeout(left);
                }
            }
        }
        let end = match done {
            true => shared.end.lock().ok().and_then(|mut e| e.take()),
            false => None,
        };
        if let Some(from) = shared.from.get()
            && (!batch.is_empty() || end.is_some())
        {
            let opened =
                index.get_or_insert_with(|| Index::open(index_path).map_err(|e| e.to_string()));
            let added = match opened {
                Ok(idx) => idx
                    .add_handed(dir, &mut maker, *from, &batch, end)
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.clone()),
            };
            match added {
                Ok(n) => {
                    report.docs += n;
                    report.commits += 1;
                }
                Err(e) => {
                    // Left to the catch-up, which reads the log from where the index
                    // is; nothing more is tried.
                    index = Some(Err(e.clone()));
                    report.failed = Some(e);
                }
            }
        }
        batch.clear();
        if done {
            return report;
        }
    }
}
