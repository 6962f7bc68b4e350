//! The live export: a session's writer tells a [`LiveExporter`] (a
//! [`cairn_tools::RecordSink`]) how far its log is written and goes on; a thread of its
//! own reads the log's new records from the file, maps them to spans ([`Mapper`]) and
//! sends them in batches.
//!
//! Exporting never slows or fails a session. The call path only stores the log's length
//! and, once, the first seq handed, in two atomics, and wakes the thread only at the
//! first record after it went idle (it had read all there was): no record is copied, no
//! memory taken, so nothing is dropped however far the thread falls behind
//! (the log holds what it has not read, and it reads only up to a length the writer has
//! reached, so never a line half written). The live spans are those of the records the
//! log holds, read as `cairn export otel` reads them: the same spans, with the same ids.
//! The thread sends every [`super::OTEL_BATCH_SPANS_MAX`] spans or
//! [`OTEL_LIVE_BATCH_MS`] after the first one waiting, each request bounded by the
//! configured timeout; the first request that fails (a collector down, slow or refusing)
//! is one note and the end of the session's live export (what it would have sent, `cairn
//! export otel` sends later, with the same ids). The writer waits at its end for at most
//! [`OTEL_DRAIN_MS`].
//!
//! A session resumed (or a hook's process, which appends a few records to a session
//! already written) hands records from a seq past 0: the thread folds the log's records
//! before it without sending their spans, so that the calls they opened and the
//! session's own span are whole. The session's span is sent when the writer is done
//! after a `session_ended` (a session still going, such as another agent's between two
//! hooks, sends it at its end); calls still open then are sent as interrupted.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use cairn_core::Record;
use cairn_core::event::Event;
use opentelemetry_sdk::trace::SpanData;

use super::map::Mapper;
use super::send::{OTEL_BATCH_SPANS_MAX, OtelConfig, Sender};
use crate::session::SessionLog;

/// How long, in milliseconds, the writer must hand nothing for the thread to read what
/// it wrote: it works while the session is quiet (a model's turn, a user's message), not
/// beside a burst of calls, whose CPU it would share on a small machine.
pub const OTEL_QUIET_MS: u64 = 20;

/// How long, in milliseconds, a span waits before it is sent at most (when fewer than
/// [`super::OTEL_BATCH_SPANS_MAX`] come); a writer that is never quiet has what it
/// wrote read this long after the thread last read.
pub const OTEL_LIVE_BATCH_MS: u64 = 1_000;

/// How long, in milliseconds, a writer that is done waits for the thread to send what
/// it wrote; past it the thread is left to finish on its own (or die with the process:
/// `cairn export otel` sends the session again from its log).
pub const OTEL_DRAIN_MS: u64 = 5_000;

/// No record handed yet.
const NO_SEQ: u64 = u64::MAX;

/// What the writer tells the thread.
struct Signals {
    /// The log's length in bytes after the last record handed: every line before it is
    /// whole in the file. Unchanged over a quiet interval, the writer is quiet.
    written: AtomicU64,
    /// The seq of the first record handed ([`NO_SEQ`] before): the records before it
    /// were sent by the writer that wrote them.
    first_seq: AtomicU64,
    /// The writer is done: read to the end, send, stop.
    done: AtomicBool,
    /// The thread had read all the writer wrote when it last parked, perhaps for a whole
    /// batch interval: the writer's next record wakes it (and clears this).
    idle: AtomicBool,
}

/// The live exporter's limits (the constants above by default; tests make them tiny).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveLimits {
    /// [`OTEL_LIVE_BATCH_MS`].
    pub batch_ms: u64,
    /// [`OTEL_DRAIN_MS`].
    pub drain_ms: u64,
    /// [`OTEL_QUIET_MS`].
    pub quiet_ms: u64,
}

impl Default for LiveLimits {
    fn default() -> LiveLimits {
        LiveLimits {
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
    /// Why the session's live export stopped, if it did.
    pub failed: Option<String>,
}

/// Where the live exporter's notes go (the cli prints them on stderr): at most one
/// per session for a failed collector or an unreadable log.
pub type Note = Arc<dyn Fn(&str) + Send + Sync>;

/// The live exporter of one session's writer.
pub struct LiveExporter {
    /// The thread, woken when it is idle and a record comes, and when the writer is
    /// done (a wake per record cost a futex call on the call path); otherwise it looks
    /// on its own.
    thread: Option<std::thread::Thread>,
    done: Receiver<LiveReport>,
    limits: LiveLimits,
    signals: Arc<Signals>,
    report: Option<LiveReport>,
    finished: bool,
}

impl LiveExporter {
    /// Starts the thread that sends the spans of session folder `dir` as `config` says.
    pub fn start(dir: &Path, config: OtelConfig, limits: LiveLimits, note: Note) -> LiveExporter {
        let (done_tx, done) = std::sync::mpsc::channel();
        let signals = Arc::new(Signals {
            written: AtomicU64::new(0),
            first_seq: AtomicU64::new(NO_SEQ),
            done: AtomicBool::new(false),
            // It has read nothing, and there is nothing yet.
            idle: AtomicBool::new(true),
        });
        let (dir, s) = (dir.to_path_buf(), signals.clone());
        let spawned = std::thread::Builder::new()
            .name("cairn-otel".into())
            .spawn(move || {
                // The writer may have given up waiting: nobody to tell then.
                let _ = done_tx.send(run(&dir, &config, limits, &s, &note));
            });
        LiveExporter {
            // A thread that could not start sends nothing: `cairn export otel` will.
            thread: spawned.as_ref().ok().map(|h| h.thread().clone()),
            done,
            limits,
            signals,
            report: None,
            finished: false,
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

    /// The writer wrote record `seq`, and its log is `log_bytes` long after it.
    fn wrote(&mut self, seq: u64, log_bytes: u64) {
        if self.signals.first_seq.load(Ordering::Relaxed) == NO_SEQ {
            // Only this writer stores it: stored once, at the first record (the thread
            // that sees the length stored after it sees it too).
            self.signals.first_seq.store(seq, Ordering::Relaxed);
        }
        // SeqCst, as the thread's store of `idle` and load of `written` before it
        // parks: either this sees it idle, or it sees this length and does not park
        // for long.
        self.signals.written.store(log_bytes, Ordering::SeqCst);
        if self.signals.idle.load(Ordering::SeqCst)
            && self.signals.idle.swap(false, Ordering::SeqCst)
            && let Some(t) = &self.thread
        {
            // The thread may be parked for a whole batch interval: woken, it looks
            // every quiet interval while records come.
            t.unpark();
        }
    }
}

impl cairn_tools::RecordSink for LiveExporter {
    fn record(&mut self, record: &Record, log_bytes: u64) {
        self.wrote(record.seq, log_bytes);
    }

    fn record_owned(&mut self, record: Record, log_bytes: u64) {
        self.wrote(record.seq, log_bytes);
    }

    fn finish(&mut self) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        let Some(thread) = &self.thread else {
            return;
        };
        self.signals.done.store(true, Ordering::Release);
        thread.unpark();
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

/// The events the mapper uses, by their `type`; the others only move the session's
/// span on (their place and time), so the thread does not parse them (nor read the
/// blobs their spilled fields are in).
const MAPPED_TYPES: [&str; 9] = [
    "session_started",
    "user_message",
    "model_turn",
    "tool_started",
    "permission_requested",
    "permission_decided",
    "tool_finished",
    "session_resumed",
    "session_ended",
];

/// The thread's state: the log as far as read, the mapper, the spans waiting.
struct Worker<'a> {
    dir: PathBuf,
    config: &'a OtelConfig,
    sender: Option<Sender>,
    /// The log and its records from where the thread stopped reading (opened at the
    /// first read), and the mapper that has folded what was read.
    log: Option<(SessionLog, cairn_store::Records, Mapper)>,
    waiting: Vec<SpanData>,
    since: Option<Instant>,
    report: LiveReport,
    note: &'a Note,
    /// The last record mapped was a `session_ended`.
    ended: bool,
}

impl Worker<'_> {
    fn session(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The live export stops for `why`: one note, nothing more sent.
    fn fail(&mut self, why: String) {
        if self.report.failed.is_some() {
            return;
        }
        let session = self.session();
        (self.note)(&format!(
            "cairn: note: {why}; the rest of session {session} is not exported live: `cairn export otel {session}` sends it later"
        ));
        self.report.failed = Some(why);
        self.waiting.clear();
    }

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
        let n = spans.len() as u64;
        self.report.requests += n.div_ceil(OTEL_BATCH_SPANS_MAX as u64);
        match sender.send(spans) {
            Ok(()) => self.report.spans_sent += n,
            Err(e) => self.fail(e.to_string()),
        }
    }

    /// Reads and maps the log's records up to byte `written`, a length the writer has
    /// reached; the spans of those from `first_seq` on wait to be sent.
    fn read_to(&mut self, written: u64, first_seq: u64) {
        if self.report.failed.is_some() || written == 0 {
            return;
        }
        if self.log.is_none() {
            let opened = SessionLog::open(&self.dir).and_then(|log| {
                let records = log.records()?;
                Ok((log, records))
            });
            match opened {
                Ok((log, records)) => {
                    let mapper = Mapper::new(&log.session, self.config.capture_content, "live");
                    self.log = Some((log, records, mapper));
                }
                Err(e) => return self.fail(format!("reading the log: {e}")),
            }
        }
        let mut discard = Vec::new();
        let mut failed = None;
        if let Some((log, records, mapper)) = self.log.as_mut() {
            while records.offset() < written {
                let raw = match records.next() {
                    Some(Ok(r)) => r,
                    Some(Err(e)) => {
                        failed = Some(format!("reading the log: {e}"));
                        break;
                    }
                    None => break,
                };
                let kind = raw.event_type().unwrap_or_default();
                if !Event::KINDS.contains(&kind.as_str()) {
                    // A type this version does not know: skipped, as the batch export
                    // skips it.
                    continue;
                }
                let rec = if MAPPED_TYPES.contains(&kind.as_str()) {
                    let Some(rec) = log.parse(&raw) else {
                        continue;
                    };
                    if rec.seq >= first_seq {
                        self.ended = matches!(rec.event, Event::SessionEnded { .. });
                    }
                    rec
                } else {
                    // Only its place and time move the session's span on.
                    Record {
                        seq: raw.seq,
                        ts: raw.ts,
                        hash: raw.hash,
                        event: Event::MemoryWritten {
                            text: String::new(),
                        },
                    }
                };
                let before = self.waiting.len();
                if rec.seq < first_seq {
                    // Sent by the writer that wrote it.
                    mapper.push(&rec, &mut discard);
                    discard.clear();
                } else {
                    mapper.push(&rec, &mut self.waiting);
                }
                if self.waiting.len() > before && self.since.is_none() {
                    self.since = Some(Instant::now());
                }
                if self.waiting.len() >= OTEL_BATCH_SPANS_MAX {
                    break;
                }
            }
        }
        if let Some(why) = failed {
            self.fail(why);
        }
    }

    /// The writer is done: the session's span when it ended, then what waits.
    fn end(&mut self) {
        if self.ended
            && let Some((_, _, mapper)) = self.log.take()
        {
            mapper.finish(&mut self.waiting);
        }
        self.flush();
    }
}

fn run(
    dir: &Path,
    config: &OtelConfig,
    limits: LiveLimits,
    signals: &Signals,
    note: &Note,
) -> LiveReport {
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
        log: None,
        waiting: Vec::new(),
        since: None,
        report: LiveReport::default(),
        note,
        ended: false,
    };
    let batch = Duration::from_millis(limits.batch_ms);
    // The thread reads what the writer wrote when the writer is quiet, when it is done,
    // or a batch interval after it last read: the call path never wakes it otherwise,
    // and it does not work beside a burst of calls.
    let tick = batch.max(Duration::from_millis(1));
    let quiet = Duration::from_millis(limits.quiet_ms).min(tick);
    let (mut read, mut looked, mut last_read) = (0u64, 0u64, Instant::now());
    loop {
        // Awake: the writer need not wake it.
        signals.idle.store(false, Ordering::Relaxed);
        // Done first: a writer that is done has stored its last length before.
        let done = signals.done.load(Ordering::Acquire);
        let written = signals.written.load(Ordering::Acquire);
        if done || written == looked || last_read.elapsed() >= batch {
            let first_seq = signals.first_seq.load(Ordering::Relaxed);
            // A full batch stops a read: send it, read on.
            loop {
                w.read_to(written, first_seq);
                let full = w.waiting.len() >= OTEL_BATCH_SPANS_MAX;
                if full {
                    w.flush();
                }
                if !full || w.report.failed.is_some() {
                    break;
                }
            }
            read = written;
            last_read = Instant::now();
            if done {
                break;
            }
        }
        looked = written;
        if w.since.is_some_and(|t| t.elapsed() >= batch) {
            w.flush();
        }
        // Records wait: look again once the writer may have gone quiet. None: idle
        // until the next batch is due, unless the writer's next record wakes it.
        let unread = || signals.written.load(Ordering::SeqCst) > read;
        let wait = if unread() {
            quiet
        } else {
            signals.idle.store(true, Ordering::SeqCst);
            if unread() {
                // A record came meanwhile: its writer may not have seen the thread idle.
                quiet
            } else {
                match w.since {
                    Some(t) => batch
                        .saturating_sub(t.elapsed())
                        .max(Duration::from_millis(1)),
                    None => tick,
                }
            }
        };
        // The writer's wake at its end may have been taken by a request's own wait (the
        // HTTP client parks this thread too): done is looked at again before parking.
        if signals.done.load(Ordering::Acquire) {
            continue;
        }
        std::thread::park_timeout(wait);
    }
    w.end();
    w.report
}

#[cfg(test)]
mod tests {
    use super::*;

    // Guards against a misspelt type, whose records the thread would then pass over as
    // unmapped: each is an event type this version knows.
    #[test]
    fn every_mapped_type_is_an_event_type() {
        for kind in MAPPED_TYPES {
            assert!(Event::KINDS.contains(&kind), "{kind} is not an event type");
        }
    }
}
