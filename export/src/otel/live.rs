//! The live export: a session's writer hands each record to a [`LiveExporter`] (a
//! [`cairn_tools::RecordSink`]) and goes on; a thread of its own maps them to spans
//! ([`Mapper`]) and sends them in batches.
//!
//! Exporting never slows or fails a session. The call path only clones a record into a
//! bounded queue of [`OTEL_QUEUE_RECORDS_MAX`] records and never blocks: when the queue
//! is full the record is dropped and counted, nothing more is handed, and when the
//! writer is done the thread sends what the live spans missed from the log itself. The
//! thread sends every [`super::OTEL_BATCH_SPANS_MAX`] spans or [`OTEL_LIVE_BATCH_MS`]
//! after the first one waiting, each request bounded by the configured timeout; the
//! first request that fails (a collector down, slow or refusing) is one note and the
//! end of the session's live export (what it would have sent, `cairn export otel`
//! sends later, with the same ids). The writer waits at its end for at most
//! [`OTEL_DRAIN_MS`].
//!
//! A session resumed (or a hook's process, which appends a few records to a session
//! already written) hands records from a seq past 0: the thread first folds the log's
//! records before it, so that the calls they opened and the session's own span are
//! whole. The session's span is sent when the writer is done after a `session_ended`
//! (a session still going, such as another agent's between two hooks, sends it at its
//! end); calls still open then are sent as interrupted.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};
use std::time::{Duration, Instant};

use cairn_core::Record;
use cairn_core::event::Event;
use opentelemetry::trace::SpanId;
use opentelemetry_sdk::trace::SpanData;

use super::map::Mapper;
use super::send::{OTEL_BATCH_SPANS_MAX, OtelConfig, Sender};

/// The most records waiting in a session's queue; one more is dropped, and the rest
/// of the session is sent from its log when the writer is done.
pub const OTEL_QUEUE_RECORDS_MAX: usize = 16_384;

/// How long, in milliseconds, the writer must hand nothing for the thread to take what
/// waits: it works while the session is quiet (a model's turn, a user's message), not
/// beside a burst of calls, whose CPU it would share on a small machine.
pub const OTEL_QUIET_MS: u64 = 20;

/// How long, in milliseconds, a span waits before it is sent at most (when fewer than
/// [`super::OTEL_BATCH_SPANS_MAX`] come).
pub const OTEL_LIVE_BATCH_MS: u64 = 1_000;

/// How long, in milliseconds, a writer that is done waits for the thread to send what
/// it was handed; past it the thread is left to finish on its own (or die with the
/// process: `cairn export otel` sends the session again from its log).
pub const OTEL_DRAIN_MS: u64 = 5_000;

/// Records handed between two wakes of the thread by the writer: half the queue, so
/// that a writer that is never quiet does not fill it. Otherwise the thread takes what
/// waits once the writer has been quiet for [`OTEL_QUIET_MS`], or a batch interval
/// after it last did: woken every 256 records, its work (mapping, encoding, sending)
/// took the CPU the engine's next call wanted once in ~85 trivial calls on two cores,
/// which showed in their p99.
fn wake_records(queue_records_max: usize) -> u64 {
    (queue_records_max as u64 / 2).max(1)
}

/// What the writer tells the thread besides the records.
#[derive(Default)]
struct Signals {
    /// Records handed so far: unchanged over a quiet interval, the writer is quiet.
    handed: std::sync::atomic::AtomicU64,
    /// Take what waits at once: the queue is half full, or the writer is done.
    urgent: std::sync::atomic::AtomicBool,
}

/// The live exporter's limits (the constants above by default; tests make them tiny).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveLimits {
    pub queue_records_max: usize,
    pub batch_ms: u64,
    pub drain_ms: u64,
    /// [`OTEL_QUIET_MS`].
    pub quiet_ms: u64,
}

impl Default for LiveLimits {
    fn default() -> LiveLimits {
        LiveLimits {
            queue_records_max: OTEL_QUEUE_RECORDS_MAX,
            batch_ms: OTEL_LIVE_BATCH_MS,
            drain_ms: OTEL_DRAIN_MS,
            quiet_ms: OTEL_QUIET_MS,
        }
    }
}

/// What the thread did, once the writer is done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveReport {
    /// Spans the collector accepted.
    pub spans_sent: u64,
    /// Requests made.
    pub requests: u64,
    /// Records dropped because the queue was full.
    pub dropped_records: u64,
    /// Why the session's live export stopped, if it did.
    pub failed: Option<String>,
}

/// Where the live exporter's notes go (the cli prints them on stderr): at most one
/// per session for a failed collector, one for dropped records.
pub type Note = Arc<dyn Fn(&str) + Send + Sync>;

/// What the writer hands the thread.
enum Msg {
    /// A record the mapper uses.
    Record(Box<Record>),
    /// Another record: only its place and time move the session's span on.
    Mark {
        seq: u64,
        ts: String,
        hash: cairn_store::Hash,
    },
}

/// Whether the mapper uses a record's event (the others only move the position on).
fn mapped(event: &Event) -> bool {
    matches!(
        event,
        Event::SessionStarted(_)
            | Event::UserMessage { .. }
            | Event::ModelTurn { .. }
            | Event::ToolStarted { .. }
            | Event::PermissionRequested { .. }
            | Event::PermissionDecided { .. }
            | Event::ToolFinished(_)
            | Event::SessionResumed { .. }
            | Event::SessionEnded { .. }
    )
}

/// The live exporter of one session's writer.
pub struct LiveExporter {
    tx: Option<SyncSender<Msg>>,
    /// The thread, woken every [`wake_records`] records and when the writer is done
    /// (a wake per record cost a futex call on the call path).
    thread: Option<std::thread::Thread>,
    sent: u64,
    done: Receiver<LiveReport>,
    limits: LiveLimits,
    dropped: Arc<std::sync::atomic::AtomicU64>,
    signals: Arc<Signals>,
    report: Option<LiveReport>,
}

impl LiveExporter {
    /// Starts the thread that sends the spans of session folder `dir` as `config` says.
    pub fn start(dir: &Path, config: OtelConfig, limits: LiveLimits, note: Note) -> LiveExporter {
        let (tx, rx) = std::sync::mpsc::sync_channel(limits.queue_records_max);
        let (done_tx, done) = std::sync::mpsc::channel();
        let dropped = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let signals = Arc::new(Signals::default());
        let (dir, d, s) = (dir.to_path_buf(), dropped.clone(), signals.clone());
        let spawned = std::thread::Builder::new()
            .name("cairn-otel".into())
            .spawn(move || {
                // The writer may have given up waiting: nobody to tell then.
                let _ = done_tx.send(run(&dir, &config, &rx, limits, (&d, &s), &note));
            });
        let thread = spawned.as_ref().ok().map(|h| h.thread().clone());
        LiveExporter {
            // A thread that could not start takes nothing: every record is dropped.
            tx: spawned.is_ok().then_some(tx),
            thread,
            sent: 0,
            done,
            limits,
            dropped,
            signals,
            report: None,
        }
    }

    /// What starts, for each session folder it is given, a live exporter to `config`
    /// (the export sink a writer's home is given, `cairn_engine::Home::with_export`).
    pub fn start_for(config: OtelConfig, limits: LiveLimits, note: Note) -> cairn_tools::SinkStart {
        Arc::new(move |dir: &Path| {
            Box::new(LiveExporter::start(
                dir,
                config.clone(),
                limits,
                note.clone(),
            )) as Box<dyn cairn_tools::RecordSink>
        })
    }

    /// What the thread did, once [`cairn_tools::RecordSink::finish`] saw it done.
    pub fn report(&self) -> Option<&LiveReport> {
        self.report.as_ref()
    }

    fn take(&mut self, msg: impl FnOnce() -> Msg) {
        use std::sync::atomic::Ordering;
        let Some(tx) = &self.tx else {
            return;
        };
        if self.dropped.load(Ordering::Relaxed) > 0 {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match tx.try_send(msg()) {
            Ok(()) => {
                self.sent += 1;
                self.signals.handed.store(self.sent, Ordering::Relaxed);
                if self
                    .sent
                    .is_multiple_of(wake_records(self.limits.queue_records_max))
                    && let Some(t) = &self.thread
                {
                    self.signals.urgent.store(true, Ordering::Release);
                    t.unpark();
                }
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl cairn_tools::RecordSink for LiveExporter {
    fn record(&mut self, record: &Record, _log_bytes: u64) {
        if mapped(&record.event) {
            self.take(|| Msg::Record(Box::new(record.clone())));
        } else {
            self.take(|| Msg::Mark {
                seq: record.seq,
                ts: record.ts.clone(),
                hash: record.hash,
            });
        }
    }

    fn record_owned(&mut self, record: Record, _log_bytes: u64) {
        if mapped(&record.event) {
            self.take(|| Msg::Record(Box::new(record)));
        } else {
            self.take(|| Msg::Mark {
                seq: record.seq,
                ts: record.ts,
                hash: record.hash,
            });
        }
    }

    fn finish(&mut self) {
        let Some(tx) = self.tx.take() else {
            return;
        };
        // The thread sends what waits and stops once the sender is gone.
        drop(tx);
        if let Some(t) = &self.thread {
            self.signals
                .urgent
                .store(true, std::sync::atomic::Ordering::Release);
            t.unpark();
        }
        self.report = self
            .done
            .recv_timeout(Duration::from_millis(self.limits.drain_ms))
            .ok();
    }
}

impl Drop for LiveExporter {
    fn drop(&mut self) {
        cairn_tools::RecordSink::finish(self);
    }
}

/// The thread's state: the mapper, the spans waiting, what was sent.
struct Worker<'a> {
    dir: PathBuf,
    config: &'a OtelConfig,
    sender: Option<Sender>,
    mapper: Option<Mapper>,
    waiting: Vec<SpanData>,
    since: Option<Instant>,
    sent: HashSet<SpanId>,
    report: LiveReport,
    note: &'a Note,
    ended: bool,
}

impl Worker<'_> {
    /// Sends what waits, unless the export already failed (then it is dropped).
    fn flush(&mut self) {
        self.since = None;
        let spans = std::mem::take(&mut self.waiting);
        if spans.is_empty() || self.report.failed.is_some() {
            return;
        }
        let Some(sender) = &self.sender else {
            return;
        };
        let ids: Vec<SpanId> = spans.iter().map(|s| s.span_context.span_id()).collect();
        let n = spans.len() as u64;
        self.report.requests += n.div_ceil(OTEL_BATCH_SPANS_MAX as u64);
        match sender.send(spans) {
            Ok(()) => {
                self.report.spans_sent += n;
                self.sent.extend(ids);
            }
            Err(e) => {
                let session = self
                    .dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned());
                let session = session.unwrap_or_default();
                (self.note)(&format!(
                    "cairn: note: {e}; the rest of session {session} is not exported live: `cairn export otel {session}` sends it later"
                ));
                self.report.failed = Some(e.to_string());
            }
        }
    }

    fn push(&mut self, msg: Msg) {
        if self.mapper.is_none() {
            let first = match &msg {
                Msg::Record(r) => r.seq,
                Msg::Mark { seq, .. } => *seq,
            };
            self.mapper = Some(self.catch_up(first));
        }
        let Some(mapper) = self.mapper.as_mut() else {
            return;
        };
        let before = self.waiting.len();
        match msg {
            Msg::Record(r) => {
                self.ended = matches!(r.event, Event::SessionEnded { .. });
                mapper.push(&r, &mut self.waiting);
            }
            Msg::Mark { seq, ts, hash } => {
                let r = Record {
                    seq,
                    ts,
                    hash,
                    // An event the mapper passes over: only the position moves.
                    event: Event::MemoryWritten {
                        text: String::new(),
                    },
                };
                mapper.push(&r, &mut self.waiting);
            }
        }
        if self.waiting.len() > before && self.since.is_none() {
            self.since = Some(Instant::now());
        }
        if self.waiting.len() >= OTEL_BATCH_SPANS_MAX {
            self.flush();
        }
    }

    /// A mapper that has folded the log's records before `seq` (none when `seq` is
    /// 0), their spans taken as sent by the writer that wrote them.
    fn catch_up(&self, seq: u64) -> Mapper {
        let session = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let mut mapper = Mapper::new(
            &session.unwrap_or_default(),
            self.config.capture_content,
            "live",
        );
        if seq == 0 {
            return mapper;
        }
        let blobs = self
            .dir
            .parent()
            .and_then(Path::parent)
            .map(|p| p.join("blobs"))
            .and_then(|b| cairn_store::BlobStore::open(&b).ok());
        let mut discard = Vec::new();
        if let Ok(reader) = cairn_store::LogReader::open(&self.dir)
            && let Ok(records) = reader.records()
        {
            for r in records {
                let Ok(r) = r else { break };
                if r.seq >= seq {
                    break;
                }
                if let Ok(rec) = cairn_tools::fold::parse_maybe_in(&r, blobs.as_ref()) {
                    mapper.push(&rec, &mut discard);
                    discard.clear();
                }
            }
        }
        mapper
    }

    /// The writer is done: the session's span when it ended, then, after dropped
    /// records, what the log holds that was not sent.
    fn end(&mut self) {
        if self.report.dropped_records > 0 {
            (self.note)(&format!(
                "cairn: note: the live OpenTelemetry export dropped {} records of session {} (its queue was full); they are sent from the log",
                self.report.dropped_records,
                self.dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ));
            self.flush();
            if self.report.failed.is_none()
                && let Ok(all) = super::batch::spans_of(&self.dir, self.config.capture_content)
            {
                let sent = &self.sent;
                self.waiting = all
                    .spans
                    .into_iter()
                    .filter(|s| !sent.contains(&s.span_context.span_id()))
                    .collect();
            }
        } else if self.ended
            && let Some(mapper) = self.mapper.take()
        {
            mapper.finish(&mut self.waiting);
        }
        self.flush();
    }
}

fn run(
    dir: &Path,
    config: &OtelConfig,
    rx: &Receiver<Msg>,
    limits: LiveLimits,
    (dropped, signals): (&std::sync::atomic::AtomicU64, &Signals),
    note: &Note,
) -> LiveReport {
    use std::sync::atomic::Ordering;
    let sender = match Sender::new(config) {
        Ok(s) => Some(s),
        Err(e) => {
            note(&format!("cairn: note: {e}; sessions are not exported live"));
            None
        }
    };
    let mut w = Worker {
        dir: dir.to_path_buf(),
        config,
        sender,
        mapper: None,
        waiting: Vec::new(),
        since: None,
        sent: HashSet::new(),
        report: LiveReport::default(),
        note,
        ended: false,
    };
    let batch = Duration::from_millis(limits.batch_ms);
    // The thread takes what waits when the writer is quiet, when told to (the queue
    // half full, the writer done), or a batch interval after it last took: the call
    // path never wakes it otherwise, and it does not work beside a burst of calls.
    let tick = batch.max(Duration::from_millis(1));
    let quiet = Duration::from_millis(limits.quiet_ms).min(tick);
    let (mut taken, mut looked, mut last_take) = (0u64, 0u64, Instant::now());
    'run: loop {
        let handed = signals.handed.load(Ordering::Relaxed);
        let urgent = signals.urgent.swap(false, Ordering::Acquire);
        if urgent || handed == looked || last_take.elapsed() >= batch {
            loop {
                match rx.try_recv() {
                    Ok(msg) => {
                        taken += 1;
                        w.push(msg);
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => break 'run,
                }
            }
            last_take = Instant::now();
        }
        looked = handed;
        if w.since.is_some_and(|t| t.elapsed() >= batch) {
            w.flush();
        }
        // Records wait: look again once the writer may have gone quiet.
        let wait = if signals.handed.load(Ordering::Relaxed) > taken {
            quiet
        } else {
            match w.since {
                Some(t) => batch
                    .saturating_sub(t.elapsed())
                    .max(Duration::from_millis(1)),
                None => tick,
            }
        };
        std::thread::park_timeout(wait);
    }
    w.report.dropped_records = dropped.load(std::sync::atomic::Ordering::Relaxed);
    w.end();
    w.report
}
