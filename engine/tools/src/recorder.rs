//! The recorder: the only writer of a session's log. Every event is appended, then
//! folded into the state, so the live state is always exactly the fold of the log.
//! It also places checkpoints and snapshots at their intervals, makes blobs durable
//! before the records that name them, and moves the largest fields of an event too long
//! for one record into blobs (`cairn_core::spill`): no record is ever too large.
//!
//! Every event goes through one redaction pass ([`cairn_core::scrub`]) before it is
//! written: whatever field a secret sits in, the log never holds it.
//!
//! An observer ([`Recorder::set_observer`]) sees every record as it is appended, so a
//! caller that shows a session live (the cli's view) never reads the log back. A sink
//! ([`Recorder::set_sink`]) sees them too, with the log's length after each, to work on
//! them off the call path (the search index's background indexer); the recorder tells
//! it when the writer is done, when it is dropped.

use std::borrow::Cow;
use std::path::PathBuf;

use cairn_store::{
    BlobRef, BlobStore, Durability, Hash, LogWriter, SnapshotMeta, SnapshotStore, now_ts,
};

use cairn_core::redact::Redactor;
use cairn_core::scrub::{self, SecretKey};

use crate::error::Result;
use crate::event::Event;
use crate::state::{Record, STATE_FORMAT_VERSION, State};

/// The most blobs made durable one by one before a record (an fsync of each, and of
/// each directory holding one); past it, one `syncfs` of the blob store's file system
/// makes them all durable at once (a manifest capture writes thousands). Below it
/// `syncfs` is avoided: it flushes everything any process wrote to the file system, so
/// on a busy machine one call of it can take tens of milliseconds.
pub const BLOB_FSYNCS_MAX: usize = 64;

/// Called with every record just after it is appended and folded.
pub type Observer = Box<dyn FnMut(&Record) + Send>;

/// Where each appended record goes to be worked on off the call path (the search
/// index's background indexer), and told when the session's writer is done.
pub trait RecordSink: Send {
    /// A record just appended and folded, and the log's length in bytes after it. It
    /// runs on the call path: it must neither block nor fail (a sink that cannot keep
    /// up drops what it cannot take, and says so where its work lands).
    fn record(&mut self, record: &Record, log_bytes: u64);

    /// [`RecordSink::record`] of a record handed over to keep: one the log held (see
    /// [`Recorder::hold`]), handed once written, which the recorder had to copy.
    fn record_owned(&mut self, record: Record, log_bytes: u64) {
        self.record(&record, log_bytes);
    }

    /// The writer is done: waits, for at most a bound of the sink's own, until what it
    /// was handed is worked off.
    fn finish(&mut self);
}

/// What starts the [`RecordSink`] of a session, given the session's folder, before its
/// first record is appended (the search index's background indexer of that session).
/// Its caller gives it: the engine knows no sink by name.
pub type SinkStart = std::sync::Arc<dyn Fn(&std::path::Path) -> Box<dyn RecordSink> + Send + Sync>;

/// Snapshots a session keeps besides its newest: each holds the whole state (which
/// grows with the conversation: 1,000 answers of 2 KB archive to 2 MB), so one kept
/// per interval grew the session's folder with the square of its length. One older
/// stands in when the newest is stale after a power loss.
pub const SNAPSHOTS_OLDER_KEPT: usize = 1;

/// The largest archive of the state (a checkpoint hashes one, a snapshot writes one)
/// taken again at every interval. A larger one is taken again only once the log has
/// grown by as many bytes as it holds: the archives then cost a session at most what
/// its log costs, where at every 1,000 records a state of 20 MB (10,000 answers of
/// 2 KB) stalled a call for 30 ms and wrote 20 MB.
pub const STATE_ARCHIVE_SPACED_BYTES_MIN: u64 = 1024 * 1024;

/// Log writer + state + blobs of one session.
pub struct Recorder {
    pub log: LogWriter,
    pub state: State,
    pub blobs: BlobStore,
    pub snapshots: SnapshotStore,
    pub durability: Durability,
    /// Records between snapshots (0: only at session end).
    pub snapshot_every: u64,
    /// Records between checkpoints (0: none).
    pub checkpoint_every: u64,
    /// The longest event JSON a record holds inline, in bytes (see
    /// `cairn_core::spill`); past it the event's largest fields go into blobs.
    pub event_inline_bytes_max: usize,
    /// Records between tree checkpoints (0: only when [`Recorder::tree_checkpoint`]
    /// is called, at the session's end).
    pub tree_checkpoint_every_records: u64,
    since_tree_checkpoint: u64,
    /// The log's origin line in its checkpoints.
    origin: String,
    /// The key that signs the checkpoints (none: they are recorded unsigned).
    signer: Option<cairn_tlog::Signer>,
    last_was_tree_checkpoint: bool,
    since_snapshot: u64,
    since_checkpoint: u64,
    /// The size of the state's last archive, and the log's length when it was taken
    /// (see [`STATE_ARCHIVE_SPACED_BYTES_MIN`]).
    archived_bytes: u64,
    archived_at_log_bytes: u64,
    /// The blobs stored since the last sync (new or already there: one already there
    /// may have been written without a sync, by an import), at most
    /// [`BLOB_FSYNCS_MAX`] + 1 of them.
    blobs_unsynced: Vec<Hash>,
    /// Blobs were written that [`Recorder::blobs_unsynced`] does not name
    /// ([`Recorder::note_blobs_written`]), or more than [`BLOB_FSYNCS_MAX`].
    blobs_unsynced_unnamed: bool,
    blob_root: PathBuf,
    /// The thread snapshots are written on, started with the first.
    snapshot_writer: Option<SnapshotWriter>,
    observer: Option<Observer>,
    sink: Option<Box<dyn RecordSink>>,
    /// Records the log holds and has not written yet (see [`Recorder::hold`]), each with
    /// the log's length after it: the sink is handed a record once it is in the file,
    /// so that what the sink keeps of a record (a search index's document) is never of
    /// one that a crash of the process kept out of the log.
    sink_pending: std::collections::VecDeque<(Record, u64)>,
    redactor: Redactor,
    secret_key: Option<SecretKey>,
}

/// The thread a session's snapshots are written on: started with the first snapshot and
/// kept until the recorder is dropped (a thread started per snapshot cost the call that
/// crossed the interval tens of microseconds). One snapshot at a time.
struct SnapshotWriter {
    jobs: Option<std::sync::mpsc::SyncSender<(SnapshotMeta, Vec<u8>)>>,
    done: std::sync::mpsc::Receiver<cairn_store::Result<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// A snapshot was handed over whose outcome was not taken yet.
    writing: bool,
}

/// A fault a test gives the snapshot thread of the recorders its own thread starts.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SnapshotFault {
    /// No thread starts.
    NoThread,
    /// The thread panics at its first snapshot.
    Panics,
}

#[cfg(test)]
thread_local! {
    static SNAPSHOT_FAULT: std::cell::Cell<Option<SnapshotFault>> =
        const { std::cell::Cell::new(None) };
}

impl SnapshotWriter {
    /// The writer of snapshots into `store`, or `None` when no thread could start.
    fn start(store: SnapshotStore) -> Option<SnapshotWriter> {
        #[cfg(test)]
        let fault = SNAPSHOT_FAULT.with(std::cell::Cell::get);
        #[cfg(test)]
        if fault == Some(SnapshotFault::NoThread) {
            return None;
        }
        let (jobs, todo) = std::sync::mpsc::sync_channel::<(SnapshotMeta, Vec<u8>)>(1);
        let (told, done) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("cairn-snapshots".into())
            .spawn(move || {
                // Never ahead of the engine's calls on their CPU.
                cairn_store::run_in_background();
                for (meta, bytes) in todo {
                    #[cfg(test)]
                    if fault == Some(SnapshotFault::Panics) {
                        panic!("the snapshot thread panics, as a test asked");
                    }
                    let saved = store
                        .save_keeping(&meta, &bytes, SNAPSHOTS_OLDER_KEPT)
                        .map(|_| ());
                    if told.send(saved).is_err() {
                        break;
                    }
                }
            })
            .ok()?;
        Some(SnapshotWriter {
            jobs: Some(jobs),
            done,
            thread: Some(thread),
            writing: false,
        })
    }

    /// Hands a snapshot over; the previous one must have been waited for.
    fn send(&mut self, meta: SnapshotMeta, bytes: Vec<u8>) {
        debug_assert!(
            !self.writing,
            "a snapshot handed over before the last was waited for"
        );
        if let Some(jobs) = &self.jobs
            && jobs.send((meta, bytes)).is_ok()
        {
            self.writing = true;
        }
    }

    /// Waits for the snapshot handed over, if any, and gives its outcome; a panic of
    /// the thread goes on here.
    fn wait(&mut self) -> cairn_store::Result<()> {
        if !std::mem::take(&mut self.writing) {
            return Ok(());
        }
        match self.done.recv() {
            Ok(saved) => saved,
            Err(_) => {
                self.jobs = None;
                match self.thread.take().map(|t| t.join()) {
                    Some(Err(panic)) => std::panic::resume_unwind(panic),
                    _ => Ok(()),
                }
            }
        }
    }
}

impl Drop for SnapshotWriter {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // A snapshot is a cache: one that failed is simply not there.
        let _ = self.wait_snapshot();
        // What the log holds is written now (its drop would write it after this).
        if self.log.write_held().is_ok() {
            self.hand_written_to_sink();
        }
        if let Some(sink) = &mut self.sink {
            sink.finish();
        }
    }
}

impl Recorder {
    pub fn new(
        log: LogWriter,
        state: State,
        blobs: BlobStore,
        snapshots: SnapshotStore,
        durability: Durability,
        snapshot_every: u64,
        checkpoint_every: u64,
    ) -> Recorder {
        let blob_root = blobs.root().to_path_buf();
        Recorder {
            log,
            state,
            blobs,
            snapshots,
            durability,
            snapshot_every,
            checkpoint_every,
            event_inline_bytes_max: cairn_core::spill::EVENT_INLINE_BYTES_MAX,
            tree_checkpoint_every_records: 0,
            since_tree_checkpoint: 0,
            origin: String::new(),
            signer: None,
            last_was_tree_checkpoint: false,
            since_snapshot: 0,
            since_checkpoint: 0,
            archived_bytes: 0,
            archived_at_log_bytes: 0,
            blobs_unsynced: Vec::new(),
            blobs_unsynced_unnamed: false,
            blob_root,
            snapshot_writer: None,
            observer: None,
            sink: None,
            sink_pending: std::collections::VecDeque::new(),
            redactor: Redactor::default(),
            secret_key: None,
        }
    }

    /// Sets the redactor every record goes through, and the project key of the keyed
    /// hashes of redacted command lines (none: no hash is kept). The default redactor
    /// knows the patterns only.
    pub fn set_redaction(&mut self, redactor: Redactor, secret_key: Option<SecretKey>) {
        self.redactor = redactor;
        self.secret_key = secret_key;
    }

    /// The project key of the keyed hashes, when one was set.
    pub fn secret_key(&self) -> Option<&SecretKey> {
        self.secret_key.as_ref()
    }

    /// Sets how tree checkpoints are made: every `every_records` records (0: only at
    /// the end), signed by `signer` when there is one. The origin is the log's, from
    /// where it lives (`cairn_tlog::log::origin_of`).
    pub fn set_tree_checkpoints(&mut self, every_records: u64, signer: Option<cairn_tlog::Signer>) {
        self.tree_checkpoint_every_records = every_records;
        self.signer = signer;
        self.origin = self
            .log
            .path()
            .parent()
            .map(cairn_tlog::log::origin_of)
            .unwrap_or_default();
    }

    /// Whether tree checkpoints are signed (a key was set).
    pub fn signs_checkpoints(&self) -> bool {
        self.signer.is_some()
    }

    /// Records a `tree_checkpoint` of every record so far, signed when a key is set,
    /// and writes the signed note beside the log (`checkpoints/<size>`) first. Nothing
    /// when the tree is empty or the last record is already such a checkpoint.
    pub fn tree_checkpoint(&mut self) -> Result<()> {
        self.since_tree_checkpoint = 0;
        let tree = &self.state.tree;
        let size = tree.size;
        if size == 0 || self.last_was_tree_checkpoint {
            return Ok(());
        }
        let checkpoint = cairn_tlog::Checkpoint {
            origin: self.origin.clone(),
            size,
            root: tree.root(),
            extensions: Vec::new(),
        };
        let note = match &self.signer {
            Some(s) => {
                let note = s.sign(&checkpoint.to_text())?;
                // Never a signed checkpoint of records not in the log's file yet (see
                // `save_snapshot`): a crash of the process would leave it ahead of the
                // log, which is how a cut log shows.
                self.log.write_out()?;
                if let Some(dir) = self.log.path().parent() {
                    cairn_tlog::log::write_checkpoint(dir, size, &note)?;
                }
                Some(note)
            }
            None => None,
        };
        self.append(&Event::TreeCheckpoint {
            size,
            root: cairn_store::Hash(checkpoint.root).to_hex(),
            origin: checkpoint.origin,
            note,
        })?;
        Ok(())
    }

    /// The redactor every record goes through.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Replaces the redactor; the key stays.
    pub fn set_redactor(&mut self, redactor: Redactor) {
        self.redactor = redactor;
    }

    /// Adds one value the redactor must know (see [`Redactor::add_value`]).
    pub fn add_secret(&mut self, name: &str, value: &str) {
        self.redactor.add_value(name, value);
    }

    /// Sets (or, with `None`, removes) the observer of appended records. It runs on
    /// the call path, inside the call: it should hand the record on, not work on it.
    pub fn set_observer(&mut self, observer: Option<Observer>) {
        self.observer = observer;
    }

    /// Sets (or, with `None`, removes) the sink of appended records; it is told when
    /// the recorder is dropped.
    pub fn set_sink(&mut self, sink: Option<Box<dyn RecordSink>>) {
        self.sink = sink;
    }

    /// Stores a blob without syncing it yet; it is synced before any record is.
    pub fn put_blob(&mut self, bytes: &[u8]) -> Result<BlobRef> {
        let blob = self.blobs.put(bytes)?;
        if !self.blobs_unsynced_unnamed && !self.blobs_unsynced.contains(&blob.hash) {
            if self.blobs_unsynced.len() < BLOB_FSYNCS_MAX {
                self.blobs_unsynced.push(blob.hash);
            } else {
                self.blobs_unsynced_unnamed = true;
            }
        }
        Ok(blob)
    }

    /// Says blobs were written straight into [`Recorder::blobs`] (not through
    /// [`Recorder::put_blob`]): the next sync makes the whole blob store durable.
    pub fn note_blobs_written(&mut self) {
        self.blobs_unsynced_unnamed = true;
    }

    /// Appends and folds one event, redacted; places checkpoints and snapshots. The
    /// state folds the redacted event itself: what the record moved into blobs is only
    /// where it is kept.
    pub fn append(&mut self, event: &Event) -> Result<Record> {
        self.append_checked(event, None)
    }

    /// [`Recorder::append`] of an event one of whose strings, `checked` (borrowed from
    /// the event itself), was found to hold no secret by this recorder's redactor: the
    /// redaction pass does not search it again (a call's answer, which the engine
    /// redacts itself to count what it redacted).
    pub fn append_checked(&mut self, event: &Event, checked: Option<&str>) -> Result<Record> {
        // The redaction pass checks the strings of the event's JSON as they are
        // serialized, with no tree of it built; only an event with a secret is rebuilt
        // redacted. Then the event is serialized once, to its text.
        let holds = match checked {
            Some(c) => self.redactor.holds_secret_but(event, c),
            None => self.redactor.holds_secret(event),
        };
        let scrubbed = match holds {
            true => scrub::event(&self.redactor, self.secret_key.as_ref(), event)?,
            false => None,
        };
        let (event, json) = match &scrubbed {
            Some((e, _)) => (e, serde_json::to_string(e)),
            None => (event, serde_json::to_string(event)),
        };
        let written = self.spill(json.map_err(|e| self.not_json(&e))?)?;
        // A record reaches the log only once every blob written before it is durable:
        // the group-commit thread may sync the log at any moment after the append.
        self.sync_blobs()?;
        let ts = now_ts();
        let appended = self.log.append_json_at(&ts, &written)?;
        let record = Record {
            seq: appended.seq,
            ts,
            hash: appended.hash,
            event: event.clone(),
        };
        self.state.apply(&record);
        // Before a checkpoint this append may add, so the observer sees the log's order.
        if let Some(observe) = &mut self.observer {
            observe(&record);
        }
        if let Some(sink) = &mut self.sink {
            let end = self.log.len_bytes();
            if self.sink_pending.is_empty() && self.log.written_bytes() == end {
                sink.record(&record, end);
            } else {
                self.sink_pending.push_back((record.clone(), end));
            }
        }
        self.last_was_tree_checkpoint = matches!(record.event, Event::TreeCheckpoint { .. });
        self.since_checkpoint += 1;
        self.since_snapshot += 1;
        self.since_tree_checkpoint += 1;
        let snapshot_due = |r: &Recorder| {
            r.snapshot_every > 0 && r.since_snapshot >= r.snapshot_every && r.may_archive()
        };
        if self.checkpoint_every > 0
            && self.since_checkpoint >= self.checkpoint_every
            && self.may_archive()
        {
            self.since_checkpoint = 0;
            // A snapshot due now is taken of the same state, at this record: archived
            // once (the archive grows with the session), not again after the checkpoint.
            let with_snapshot = snapshot_due(self);
            let bytes = self.archive();
            let state_hash = State::hash_of(&bytes);
            if with_snapshot {
                self.save_snapshot(bytes)?;
            }
            self.append(&Event::Checkpoint {
                state_hash,
                at_seq: appended.seq,
            })?;
        }
        if self.tree_checkpoint_every_records > 0
            && self.since_tree_checkpoint >= self.tree_checkpoint_every_records
        {
            self.tree_checkpoint()?;
        }
        if snapshot_due(self) {
            self.snapshot()?;
        }
        // A hold past its bound was written by this append.
        self.hand_written_to_sink();
        Ok(record)
    }

    /// Hands the sink the records held until now that the log has written since.
    fn hand_written_to_sink(&mut self) {
        let Some(sink) = &mut self.sink else {
            return;
        };
        let written = self.log.written_bytes();
        while let Some((record, end)) = self.sink_pending.pop_front_if(|(_, end)| *end <= written) {
            sink.record_owned(record, end);
        }
    }

    /// Whether the state may be archived at this interval: it is small, or the log
    /// has grown by as many bytes as its last archive held since it was taken.
    fn may_archive(&self) -> bool {
        self.archived_bytes <= STATE_ARCHIVE_SPACED_BYTES_MIN
            || self
                .log
                .len_bytes()
                .saturating_sub(self.archived_at_log_bytes)
                >= self.archived_bytes
    }

    /// The state archived now (for a checkpoint's hash or a snapshot), noted for
    /// [`Recorder::may_archive`].
    fn archive(&mut self) -> Vec<u8> {
        // Sized as the last archive, with room to grow: one allocation, no copy.
        let expected = usize::try_from(self.archived_bytes).unwrap_or(0);
        let bytes = self.state.to_bytes_sized(expected + expected / 8 + 1024);
        self.archived_bytes = bytes.len() as u64;
        self.archived_at_log_bytes = self.log.len_bytes();
        bytes
    }

    fn not_json(&self, e: &serde_json::Error) -> cairn_store::Error {
        cairn_store::Error::Format {
            path: self.log.path().to_path_buf(),
            what: format!("event does not serialize to JSON: {e}"),
        }
    }

    /// The event's JSON (`json`) as its record holds it: whole, or with its largest fields
    /// stored as blobs (synced before the record, as every blob) when it is longer than
    /// `event_inline_bytes_max`.
    fn spill(&mut self, json: String) -> Result<String> {
        let max = self.event_inline_bytes_max;
        Ok(
            match cairn_core::spill::spill(&json, max, |b| self.put_blob(b))? {
                Cow::Borrowed(_) => json,
                Cow::Owned(spilled) => spilled,
            },
        )
    }

    /// Saves the state as a snapshot at the current head.
    pub fn snapshot(&mut self) -> Result<()> {
        let bytes = self.archive();
        self.save_snapshot(bytes)
    }

    /// Saves `bytes`, the state archived at the current head, as its snapshot.
    fn save_snapshot(&mut self, bytes: Vec<u8>) -> Result<()> {
        self.since_snapshot = 0;
        if let Some(head) = self.log.head() {
            // Never a snapshot ahead of the log's file: a crash of the process then
            // loses no record the snapshot holds. A hold goes on after it.
            self.log.write_out()?;
            let meta = SnapshotMeta {
                format_version: STATE_FORMAT_VERSION,
                seq: head.seq,
                record_hash: head.hash,
            };
            // Written off the call path: a snapshot is a cache, and its fsyncs would
            // otherwise land on the call that happens to cross the interval. One at a
            // time: a snapshot that failed is told at the next.
            self.wait_snapshot()?;
            // Started with the first snapshot, and again after its thread died.
            if self
                .snapshot_writer
                .as_ref()
                .is_none_or(|w| w.jobs.is_none())
            {
                self.snapshot_writer = SnapshotWriter::start(self.snapshots.clone());
            }
            match &mut self.snapshot_writer {
                Some(w) => w.send(meta, bytes),
                // No thread could start: written here.
                None => {
                    self.snapshots
                        .save_keeping(&meta, &bytes, SNAPSHOTS_OLDER_KEPT)?;
                }
            }
        }
        Ok(())
    }

    /// Waits for the snapshot being written, if any.
    pub fn wait_snapshot(&mut self) -> Result<()> {
        if let Some(w) = &mut self.snapshot_writer {
            w.wait()?;
        }
        Ok(())
    }

    /// Makes every record appended so far durable before it returns (blobs first, then
    /// the log): call it before an action the records announce that cannot be taken
    /// back (a command, a request, a workspace write, a grant).
    pub fn sync(&mut self) -> Result<()> {
        self.sync_blobs()?;
        self.log.sync()?;
        self.hand_written_to_sink();
        Ok(())
    }

    /// Makes every blob and record written so far durable now, whatever the durability
    /// setting (see [`cairn_store::LogWriter::flush_durable`]): the end of a bulk write
    /// made with durability `none`, such as one pass of an import.
    pub fn flush_durable(&mut self) -> Result<()> {
        // Whatever was noted: with durability `none`, blobs may have been written by
        // means that note nothing.
        self.blobs_unsynced_unnamed = true;
        self.make_blobs_durable()?;
        self.log.flush_durable()?;
        self.hand_written_to_sink();
        Ok(())
    }

    /// Holds the records appended from now on, to be written with one `write` at the
    /// next [`commit`](Self::commit), [`sync`](Self::sync) or
    /// [`write_held`](Self::write_held) (see [`cairn_store::LogWriter::hold`]): the
    /// records of a call that only reads.
    pub fn hold(&mut self) {
        self.log.hold();
    }

    /// Writes the records held, if any, and ends the hold: before anything that may
    /// wait (a question to the user), so that a reader of the log sees what is awaited.
    pub fn write_held(&mut self) -> Result<()> {
        self.log.write_held()?;
        self.hand_written_to_sink();
        Ok(())
    }

    /// Asks for every record appended so far to be durable within the log's group-commit
    /// window, without waiting (see [`cairn_store::LogWriter::commit`]): the end of a call.
    pub fn commit(&mut self) -> Result<()> {
        self.sync_blobs()?;
        self.log.commit()?;
        self.hand_written_to_sink();
        Ok(())
    }

    fn sync_blobs(&mut self) -> Result<()> {
        if self.durability == Durability::None {
            self.blobs_unsynced.clear();
            self.blobs_unsynced_unnamed = false;
            return Ok(());
        }
        self.make_blobs_durable()
    }

    /// Makes the blobs stored since the last sync durable: each one named, with its
    /// directory and the store's (which holds the directory, maybe new), or the whole
    /// file system when some are not named.
    fn make_blobs_durable(&mut self) -> Result<()> {
        if self.blobs_unsynced_unnamed {
            syncfs(&self.blob_root)?;
        } else if !self.blobs_unsynced.is_empty() {
            let mut dirs: Vec<PathBuf> = vec![self.blob_root.clone()];
            for hash in &self.blobs_unsynced {
                let path = self.blobs.path(hash);
                fsync(&path)?;
                if let Some(dir) = path.parent()
                    && !dirs.iter().any(|d| d == dir)
                {
                    dirs.push(dir.to_path_buf());
                }
            }
            // Deepest first: a blob's directory before the store that names it.
            for dir in dirs.iter().rev() {
                fsync(dir)?;
            }
        }
        self.blobs_unsynced.clear();
        self.blobs_unsynced_unnamed = false;
        Ok(())
    }
}

/// Makes the file or directory at `path` durable (`fsync`).
fn fsync(path: &std::path::Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(crate::error::io_at(path))?;
    Ok(())
}

/// One `syncfs` makes every blob written since the last one durable: far cheaper than
/// an fsync per blob when a manifest stores thousands of files.
fn syncfs(dir: &std::path::Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(dir).map_err(crate::error::io_at(dir))?;
    // SAFETY: syncfs only reads the descriptor, which `f` keeps open for the call.
    let rc = unsafe { libc::syncfs(f.as_raw_fd()) };
    if rc != 0 {
        return Err(crate::error::io_at(dir)(std::io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use cairn_core::event::Event;
    use cairn_store::Options;

    /// A recorder of a new session with `durability`, its blobs under `dir/blobs`.
    fn recorder_with(dir: &std::path::Path, durability: Durability) -> Recorder {
        let session = dir.join("session");
        let options = Options {
            durability,
            ..Options::default()
        };
        let log = LogWriter::create(&session, options).unwrap();
        let blobs = BlobStore::open(&dir.join("blobs")).unwrap().without_sync();
        Recorder::new(
            log,
            State::default(),
            blobs,
            SnapshotStore::new(&session),
            durability,
            0,
            0,
        )
    }

    /// A recorder of a new session with durability `none` (as an import writes).
    fn recorder(dir: &std::path::Path) -> Recorder {
        recorder_with(dir, Durability::None)
    }

    /// A recorder of a new session with durability `always`.
    fn durable_recorder(dir: &std::path::Path) -> Recorder {
        recorder_with(dir, Durability::Always)
    }

    /// Stores `n` blobs (each twice: the second is already there) and removes the
    /// first one's file; then syncs. An fsync of each blob fails on the missing one,
    /// a `syncfs` of the store does not: which way the blobs were made durable.
    fn sync_with_a_blob_gone(n: usize) -> (Recorder, Result<()>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = durable_recorder(dir.path());
        let mut first = None;
        for i in 0..n {
            let bytes = format!("blob {i}");
            let blob = rec.put_blob(bytes.as_bytes()).unwrap();
            assert_eq!(rec.put_blob(bytes.as_bytes()).unwrap(), blob);
            first.get_or_insert(blob);
        }
        let first = first.unwrap();
        std::fs::remove_file(rec.blobs.path(&first.hash)).unwrap();
        let synced = rec.sync();
        (rec, synced, dir)
    }

    /// A recorder of a new session (see [`recorder`]) that takes a checkpoint every
    /// `checkpoint_every` records and a snapshot every `snapshot_every`.
    fn archiving(dir: &std::path::Path, checkpoint_every: u64, snapshot_every: u64) -> Recorder {
        let mut rec = recorder(dir);
        rec.checkpoint_every = checkpoint_every;
        rec.snapshot_every = snapshot_every;
        rec
    }

    /// Appends `n` notes (each grows the state by a few bytes).
    fn notes(rec: &mut Recorder, n: usize) {
        for i in 0..n {
            let text = format!("note {i}");
            rec.append(&Event::MemoryWritten { text }).unwrap();
        }
    }

    /// Appends answers of about 2.2 KB each to no call started (they change no size in
    /// the state) until the log holds `len` bytes.
    fn answers_until(rec: &mut Recorder, len: u64) {
        let mut i = 0;
        while rec.log.len_bytes() < len {
            let event: Event = serde_json::from_value(serde_json::json!({
                "type": "tool_finished", "call": format!("c{i}"), "status": "ok",
                "output": "o".repeat(2000), "elapsed_us": 1,
            }))
            .unwrap();
            rec.append(&event).unwrap();
            i += 1;
        }
    }

    /// The `checkpoint` records of `rec`'s session (`dir/session`), once its last
    /// snapshot is written: each one's `at_seq`, `state_hash` and offset in the log.
    fn checkpoints(
        rec: &mut Recorder,
        dir: &std::path::Path,
    ) -> Vec<(u64, serde_json::Value, u64)> {
        rec.wait_snapshot().unwrap();
        let session = dir.join("session");
        let records = cairn_store::LogReader::open(&session)
            .unwrap()
            .records_from(0)
            .unwrap();
        let mut out = Vec::new();
        for r in records {
            let r = r.unwrap();
            let json: serde_json::Value = serde_json::from_str(r.event.get()).unwrap();
            if json["type"] == "checkpoint" {
                out.push((
                    json["at_seq"].as_u64().unwrap(),
                    json["state_hash"].clone(),
                    r.offset,
                ));
            }
        }
        out
    }

    /// The seqs of the snapshots on disk of `rec`'s session, newest first, once the
    /// last is written.
    fn snapshot_seqs(rec: &mut Recorder, dir: &std::path::Path) -> Vec<u64> {
        rec.wait_snapshot().unwrap();
        let store = SnapshotStore::new(&dir.join("session"));
        store
            .list()
            .unwrap()
            .into_iter()
            .map(|(seq, _)| seq)
            .collect()
    }

    /// A snapshot is never of records not in the log's file yet (a crash of the process
    /// would leave it ahead of the log), and a hold goes on after it.
    #[test]
    fn a_snapshot_taken_in_a_hold_writes_what_is_held_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = archiving(dir.path(), 0, 3);
        let file_len = |rec: &Recorder| std::fs::metadata(rec.log.path()).unwrap().len();
        // The first record is never held: the log is born with it.
        notes(&mut rec, 1);
        let born = file_len(&rec);
        rec.hold();
        notes(&mut rec, 1);
        assert_eq!(file_len(&rec), born, "held");
        notes(&mut rec, 1);
        assert_eq!(snapshot_seqs(&mut rec, dir.path()), [2]);
        let at_snapshot = rec.log.len_bytes();
        assert_eq!(file_len(&rec), at_snapshot);
        notes(&mut rec, 1);
        assert_eq!(file_len(&rec), at_snapshot, "still held after the snapshot");
        rec.commit().unwrap();
        assert_eq!(file_len(&rec), rec.log.len_bytes());
    }

    /// A sink that notes, for each record handed to it, its seq, the log's length it is
    /// told and the length of the log's file then.
    struct FileLenSink {
        path: std::path::PathBuf,
        seen: Seen,
    }

    impl RecordSink for FileLenSink {
        fn record(&mut self, record: &Record, log_bytes: u64) {
            let file = std::fs::metadata(&self.path).unwrap().len();
            self.seen
                .lock()
                .unwrap()
                .push((record.seq, log_bytes, file));
        }
        fn finish(&mut self) {}
    }

    /// What a [`FileLenSink`] noted.
    type Seen = std::sync::Arc<std::sync::Mutex<Vec<(u64, u64, u64)>>>;

    /// A recorder with durability `batch` in `dir` and a [`FileLenSink`] of it.
    fn sinked(dir: &std::path::Path) -> (Recorder, Seen) {
        let mut rec = recorder_with(dir, Durability::Batch);
        let seen = Seen::default();
        rec.set_sink(Some(Box::new(FileLenSink {
            path: rec.log.path().to_path_buf(),
            seen: std::sync::Arc::clone(&seen),
        })));
        (rec, seen)
    }

    /// Asserts that each record of `seen` was in the file when it was handed.
    fn handed_once_written(seen: &[(u64, u64, u64)], what: &str) {
        for (seq, log_bytes, file) in seen {
            assert!(
                file >= log_bytes,
                "{what}: record {seq} handed at {log_bytes} bytes, the file had {file}"
            );
        }
    }

    /// The sink (a search index's live indexer) is handed a record only once it is in
    /// the log's file: a crash of the process loses what the log holds, and a document
    /// the index kept of it would be of a record the log never got. Each way a hold is
    /// written hands the sink what it wrote, in order.
    #[test]
    fn the_sink_is_handed_held_records_once_the_log_has_written_them() {
        type Write = fn(&mut Recorder);
        let ways: [(&str, Write); 5] = [
            ("commit", |r| r.commit().unwrap()),
            ("sync", |r| r.sync().unwrap()),
            ("write_held", |r| r.write_held().unwrap()),
            ("flush_durable", |r| r.flush_durable().unwrap()),
            ("drop", |r| {
                let dir = r.log.path().parent().unwrap().to_path_buf();
                let taken = std::mem::replace(r, recorder(&dir.join("other")));
                drop(taken);
            }),
        ];
        for (name, write) in ways {
            let dir = tempfile::tempdir().unwrap();
            let (mut rec, seen) = sinked(dir.path());
            notes(&mut rec, 1);
            assert_eq!(
                seen.lock().unwrap().len(),
                1,
                "{name}: not held, handed at once"
            );
            rec.hold();
            notes(&mut rec, 3);
            assert_eq!(seen.lock().unwrap().len(), 1, "{name}: held, not handed");
            write(&mut rec);
            let seen = seen.lock().unwrap().clone();
            assert_eq!(
                seen.iter().map(|s| s.0).collect::<Vec<_>>(),
                [0, 1, 2, 3],
                "{name}: every record, in order"
            );
            handed_once_written(&seen, name);
        }
    }

    /// A hold that passes its bound is written by the append that passes it, which
    /// hands the sink what it wrote.
    #[test]
    fn the_sink_is_handed_a_hold_written_past_its_bound_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let (mut rec, seen) = sinked(dir.path());
        // The first record is never held: the log is born with it.
        notes(&mut rec, 1);
        let born = rec.log.written_bytes();
        rec.hold();
        let mut appended = 1;
        while rec.log.written_bytes() == born {
            rec.append(&Event::MemoryWritten {
                text: "n".repeat(1000),
            })
            .unwrap();
            appended += 1;
        }
        assert!(
            rec.log.len_bytes() > 64 * 1024,
            "written by passing the bound"
        );
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), appended, "every record written is handed");
        handed_once_written(&seen, "past the bound");
    }

    /// A signed tree checkpoint, like a snapshot, is never of records not in the log's
    /// file yet.
    #[test]
    fn a_signed_tree_checkpoint_taken_in_a_hold_writes_what_is_held_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = recorder(dir.path());
        rec.set_tree_checkpoints(
            3,
            Some(cairn_tlog::Signer::from_seed("cairn.local", &[5; 32])),
        );
        let file_len = |rec: &Recorder| std::fs::metadata(rec.log.path()).unwrap().len();
        // The first record is never held: the log is born with it.
        notes(&mut rec, 1);
        let born = file_len(&rec);
        rec.hold();
        notes(&mut rec, 1);
        assert_eq!(file_len(&rec), born, "held");
        let before = rec.log.len_bytes();
        notes(&mut rec, 1);
        let files = cairn_tlog::log::checkpoint_files(&dir.path().join("session")).unwrap();
        assert_eq!(files.iter().map(|(size, _)| *size).collect::<Vec<_>>(), [3]);
        // The three records it covers are in the file; its own record is held.
        assert!(
            file_len(&rec) > before,
            "written before the checkpoint file"
        );
        assert!(file_len(&rec) < rec.log.len_bytes(), "the hold goes on");
        rec.commit().unwrap();
        assert_eq!(file_len(&rec), rec.log.len_bytes());
    }

    #[test]
    fn snapshots_are_written_on_one_thread_kept_for_the_session_and_a_failure_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = archiving(dir.path(), 0, 2);
        notes(&mut rec, 2);
        assert_eq!(snapshot_seqs(&mut rec, dir.path()), [1]);
        let thread = |rec: &Recorder| {
            let w = rec
                .snapshot_writer
                .as_ref()
                .expect("a writer once a snapshot is taken");
            w.thread.as_ref().unwrap().thread().id()
        };
        let first = thread(&rec);
        notes(&mut rec, 4);
        // The newest and one before it are kept (SNAPSHOTS_OLDER_KEPT).
        assert_eq!(snapshot_seqs(&mut rec, dir.path()), [5, 3]);
        assert_eq!(
            thread(&rec),
            first,
            "one thread for every snapshot of the session"
        );
        // The snapshots folder made a file: the next snapshot fails, and the wait
        // after it says so; the thread goes on.
        let folder = dir.path().join("session").join(cairn_store::SNAPSHOT_DIR);
        std::fs::rename(&folder, dir.path().join("kept")).unwrap();
        std::fs::write(&folder, "not a folder").unwrap();
        notes(&mut rec, 2);
        let failed = rec.wait_snapshot();
        assert!(failed.is_err(), "{failed:?}");
        assert!(rec.wait_snapshot().is_ok(), "told once");
        std::fs::remove_file(&folder).unwrap();
        std::fs::rename(dir.path().join("kept"), &folder).unwrap();
        notes(&mut rec, 2);
        assert_eq!(snapshot_seqs(&mut rec, dir.path()), [9, 5]);
        assert_eq!(thread(&rec), first);
        // Dropping the recorder ends the thread once the last snapshot is written.
        notes(&mut rec, 2);
        drop(rec);
        let store = SnapshotStore::new(&dir.path().join("session"));
        assert_eq!(store.list().unwrap()[0].0, 11);
    }

    /// A recorder that snapshots every 2 records, its snapshot thread given `fault`
    /// (this thread's setting, which the caller clears), after its first snapshot.
    fn snapshotted_with(fault: SnapshotFault) -> (tempfile::TempDir, Recorder) {
        SNAPSHOT_FAULT.with(|f| f.set(Some(fault)));
        let dir = tempfile::tempdir().unwrap();
        let mut rec = archiving(dir.path(), 0, 2);
        notes(&mut rec, 2);
        (dir, rec)
    }

    /// With no thread to start, a snapshot is written on the call: it is on the disk
    /// when the append that took it returns.
    #[test]
    fn a_snapshot_is_written_on_the_call_when_no_thread_starts() {
        let (dir, mut rec) = snapshotted_with(SnapshotFault::NoThread);
        assert!(rec.snapshot_writer.is_none(), "no thread started");
        let store = SnapshotStore::new(&dir.path().join("session"));
        assert_eq!(
            store.list().unwrap().len(),
            1,
            "written before the append returned"
        );
        notes(&mut rec, 2);
        assert_eq!(store.list().unwrap()[0].0, 3);
        SNAPSHOT_FAULT.with(|f| f.set(None));
    }

    /// A panic of the snapshot thread goes on at the next wait, on the caller's thread;
    /// the next snapshot starts a new thread.
    #[test]
    fn a_panic_of_the_snapshot_thread_goes_on_at_the_next_wait_and_a_new_thread_follows() {
        let (dir, mut rec) = snapshotted_with(SnapshotFault::Panics);
        SNAPSHOT_FAULT.with(|f| f.set(None));
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rec.wait_snapshot()));
        let panic = waited.expect_err("the thread's panic goes on at the wait");
        assert_eq!(
            panic.downcast_ref::<&str>(),
            Some(&"the snapshot thread panics, as a test asked")
        );
        assert!(rec.wait_snapshot().is_ok(), "told once");
        notes(&mut rec, 2);
        assert_eq!(snapshot_seqs(&mut rec, dir.path()), [3]);
    }

    /// Makes `rec`'s state archive to exactly `bytes` bytes, with one long memory.
    fn state_archived_to(rec: &mut Recorder, bytes: u64) {
        rec.state.memory = vec![String::new()];
        for _ in 0..16 {
            let now = rec.state.to_bytes().len() as u64;
            if now == bytes {
                return;
            }
            let len = rec.state.memory[0].len() as u64;
            rec.state.memory[0] = "m".repeat((len + bytes).saturating_sub(now) as usize);
        }
        panic!("no state archives to {bytes} bytes");
    }

    /// A checkpoint and a snapshot due at the same record archive the state once: the
    /// snapshot is of the state the checkpoint hashes, at the record it names, and a
    /// fold from that snapshot gives the state of the whole log. Only the newest
    /// snapshots are kept.
    #[test]
    fn a_checkpoint_and_a_snapshot_due_together_share_one_archive_of_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = archiving(dir.path(), 4, 4);
        notes(&mut rec, 12);
        let checkpoints = checkpoints(&mut rec, dir.path());
        let session = dir.path().join("session");
        let mut snapshots = SnapshotStore::new(&session).list().unwrap();
        snapshots.sort();
        assert_eq!(checkpoints.len(), 3, "{checkpoints:?}");
        // The newest snapshot and one older are kept (`SNAPSHOTS_OLDER_KEPT`).
        assert_eq!(snapshots.len(), 1 + SNAPSHOTS_OLDER_KEPT, "{snapshots:?}");
        for ((at_seq, hash, _), (seq, path)) in checkpoints[1..].iter().zip(&snapshots) {
            assert_eq!(at_seq, seq, "the snapshot is at the checkpoint's record");
            let snap = SnapshotStore::load(path).unwrap();
            assert_eq!(hash, &serde_json::json!(cairn_store::Hash::of(&snap.body)));
            assert_eq!(snap.meta.seq, *seq);
        }
        // The last snapshot, folded on to the log's end, is the recorder's state.
        let (seq, path) = snapshots.last().unwrap();
        let mut state = State::from_bytes(&SnapshotStore::load(path).unwrap().body).unwrap();
        let reader = cairn_store::LogReader::open(&session).unwrap();
        for r in reader.records_from(seq + 1).unwrap() {
            state.apply(&crate::fold::parse_in(&r.unwrap(), &rec.blobs).unwrap());
        }
        assert_eq!(state, rec.state);
    }

    /// A checkpoint takes a snapshot only when one is due.
    #[test]
    fn a_checkpoint_takes_no_snapshot_that_is_not_due() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = archiving(dir.path(), 2, 1000);
        notes(&mut rec, 10);
        // After the first, one a note: the checkpoint record counts toward the next.
        assert_eq!(checkpoints(&mut rec, dir.path()).len(), 9);
        let session = dir.path().join("session");
        assert!(SnapshotStore::new(&session).list().unwrap().is_empty());
    }

    /// A state archived to at most [`STATE_ARCHIVE_SPACED_BYTES_MIN`] may be archived
    /// again at once; one byte more, only once the log has grown by as many bytes.
    #[test]
    fn the_spacing_starts_one_byte_past_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = recorder(dir.path());
        let limit = STATE_ARCHIVE_SPACED_BYTES_MIN;
        answers_until(&mut rec, limit + 2);
        let len = rec.log.len_bytes();
        for (archived, at_log, may) in [
            (limit, len, true),
            (limit + 1, len, false),
            // Grown by one byte less than the archive, then by as many.
            (limit + 1, len - limit, false),
            (limit + 1, len - limit - 1, true),
        ] {
            rec.archived_bytes = archived;
            rec.archived_at_log_bytes = at_log;
            assert_eq!(
                rec.may_archive(),
                may,
                "archived {archived} at {at_log}, log {len}"
            );
        }
    }

    /// A state under the limit is archived at every interval, one over it is not.
    #[test]
    fn a_state_under_the_spacing_limit_is_archived_at_every_interval() {
        for (bytes, expected) in [
            (STATE_ARCHIVE_SPACED_BYTES_MIN - 4096, 19),
            (STATE_ARCHIVE_SPACED_BYTES_MIN + 4096, 1),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let mut rec = archiving(dir.path(), 2, 2);
            state_archived_to(&mut rec, bytes);
            // 20 answers, far fewer bytes than the archive.
            for _ in 0..20 {
                let len = rec.log.len_bytes();
                answers_until(&mut rec, len + 1);
            }
            let found = checkpoints(&mut rec, dir.path()).len();
            assert_eq!(found, expected, "a state archived to {bytes} bytes");
        }
    }

    /// A state archived larger than [`STATE_ARCHIVE_SPACED_BYTES_MIN`] is archived
    /// again (checkpoint and snapshot) only once the log has grown by its size, and
    /// then at once; the state of each interval stays the same size here.
    #[test]
    fn a_large_state_is_archived_again_only_once_the_log_has_grown_by_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = archiving(dir.path(), 2, 2);
        // Over the limit, as a long conversation makes it.
        state_archived_to(&mut rec, STATE_ARCHIVE_SPACED_BYTES_MIN + 4096);
        let archive = rec.state.to_bytes().len() as u64;
        answers_until(&mut rec, 3 * archive + archive / 2);
        let at: Vec<u64> = checkpoints(&mut rec, dir.path())
            .into_iter()
            .map(|c| c.2)
            .collect();
        assert_eq!(
            at.len(),
            4,
            "checkpoints at {at:?}, the archive is {archive} bytes"
        );
        assert!(at[0] < 10_000, "the first is not spaced: {at:?}");
        // The next archive is the first record past the log's growth by the archive's
        // size (a record of this log is about 2.2 KB).
        for w in at.windows(2) {
            let grown = w[1] - w[0];
            assert!(
                grown >= archive && grown < archive + 3 * 2300,
                "{at:?}, {archive}"
            );
        }
        let session = dir.path().join("session");
        assert_eq!(SnapshotStore::new(&session).list().unwrap().len(), 2);
    }

    /// The event's JSON tree and the event give the same text (the map keeps the
    /// fields' order), and the redaction pass's check of the event, made without the
    /// tree, answers as the check of the tree: with the patterns alone, and with a
    /// secret value that some of the events' strings hold and others do not.
    #[test]
    fn the_probe_answers_as_the_tree_s_check_on_the_sample_logs() {
        let patterns = Redactor::default();
        let mut values = Redactor::default();
        values.add_value("GREETER_TOKEN", "demo/greeter");
        values.add_value("OTHER_TOKEN", "tool_finished");
        let mut holding = [0; 2];
        let logs = [
            include_str!(
                "../../../tests/data/sample-home/projects/work-wt-parity-.sample-tmp-demo-greeter-thndrs-054059ad/sessions/20261130T173004.936780-5e3749/events.jsonl"
            ),
            include_str!(
                "../../../tests/data/sample-home/projects/work-wt-parity-.sample-tmp-demo-greeter-thoth-8b6efcd6/sessions/20261130T173004.343112-7d52a3/events.jsonl"
            ),
        ];
        let mut checked = 0;
        for line in logs.iter().flat_map(|l| l.lines()) {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            let event: Event = serde_json::from_value(record["event"].clone()).unwrap();
            let direct = serde_json::to_string(&event).unwrap();
            let via_tree = serde_json::to_string(&serde_json::to_value(&event).unwrap()).unwrap();
            assert_eq!(via_tree, direct);
            let tree = serde_json::to_value(&event).unwrap();
            for (k, r) in [&patterns, &values].into_iter().enumerate() {
                let held = r.holds_secret(&event);
                assert_eq!(held, r.json_holds_secret(&tree), "{direct}");
                holding[k] += usize::from(held);
            }
            checked += 1;
        }
        assert!(checked > 100, "{checked} events");
        // Both answers were given.
        assert!(
            holding[1] > 0 && holding[1] < checked,
            "{holding:?} of {checked}"
        );
    }

    #[test]
    fn blobs_up_to_the_fsync_limit_are_fsynced_one_by_one_and_past_it_with_syncfs() {
        let (rec, synced, _dir) = sync_with_a_blob_gone(BLOB_FSYNCS_MAX);
        let err = synced.unwrap_err().to_string();
        assert!(err.contains("blobs"), "{err}");
        assert_eq!(rec.blobs_unsynced.len(), BLOB_FSYNCS_MAX);
        let (rec, synced, _dir) = sync_with_a_blob_gone(BLOB_FSYNCS_MAX + 1);
        synced.unwrap();
        assert!(rec.blobs_unsynced.is_empty() && !rec.blobs_unsynced_unnamed);
    }

    #[test]
    fn a_record_is_appended_after_its_blobs_are_fsynced() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = durable_recorder(dir.path());
        note(&mut rec, "first");
        let blob = rec.put_blob(b"output").unwrap();
        std::fs::remove_file(rec.blobs.path(&blob.hash)).unwrap();
        let len = std::fs::metadata(rec.log.path()).unwrap().len();
        assert!(
            rec.append(&Event::UserMessage {
                at: None,
                text: "x".into(),
                text_hash: None,
            })
            .is_err()
        );
        // The blob could not be made durable: no record after it.
        assert_eq!(std::fs::metadata(rec.log.path()).unwrap().len(), len);
        // Still not durable: neither is any later record.
        rec.put_blob(b"output 2").unwrap();
        assert!(
            rec.append(&Event::UserMessage {
                at: None,
                text: "y".into(),
                text_hash: None,
            })
            .is_err()
        );
        assert_eq!(std::fs::metadata(rec.log.path()).unwrap().len(), len);
        assert_eq!(rec.blobs_unsynced.len(), 2);
    }

    #[test]
    fn blobs_fsynced_one_by_one_are_synced_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = durable_recorder(dir.path());
        let blob = rec.put_blob(b"output").unwrap();
        note(&mut rec, "one");
        assert!(rec.blobs_unsynced.is_empty() && !rec.blobs_unsynced_unnamed);
        // Gone after its sync: the next record does not sync it again.
        std::fs::remove_file(rec.blobs.path(&blob.hash)).unwrap();
        note(&mut rec, "two");
    }

    fn note(rec: &mut Recorder, text: &str) {
        rec.append(&Event::UserMessage {
            at: None,
            text: text.into(),
            text_hash: None,
        })
        .unwrap();
    }

    #[test]
    fn flush_durable_makes_blobs_and_records_of_durability_none_durable() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = recorder(dir.path());
        let blob = rec.put_blob(b"file content").unwrap();
        note(&mut rec, "one");
        note(&mut rec, "two");
        // With `none`, the call path's sync leaves everything in the page cache.
        rec.sync().unwrap();
        assert_eq!(rec.log.durable_len(), 0);
        rec.flush_durable().unwrap();
        let len = std::fs::metadata(rec.log.path()).unwrap().len();
        assert_eq!(rec.log.durable_len(), len);
        assert!(rec.blobs_unsynced.is_empty() && !rec.blobs_unsynced_unnamed);
        assert_eq!(rec.blobs.get(&blob.hash).unwrap(), b"file content");
    }

    #[test]
    fn flush_durable_fails_on_blobs_it_cannot_sync_before_touching_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = recorder(dir.path());
        rec.put_blob(b"file content").unwrap();
        note(&mut rec, "one");
        std::fs::remove_dir_all(dir.path().join("blobs")).unwrap();
        let err = rec.flush_durable().unwrap_err().to_string();
        assert!(err.contains("blobs"), "{err}");
        // Blobs first: a record is never durable before the blobs it names.
        assert_eq!(rec.log.durable_len(), 0);
    }
}
