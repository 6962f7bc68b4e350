//! The session log writer and the recovery that runs when a log is opened.
//!
//! Opening reads from the end: it finds the last complete line, checks its own hash and
//! that it chains to the line before, and treats what follows as a torn tail. The cost
//! does not depend on the size of the log. A torn tail (a last line cut short,
//! zero-filled, without its newline, or failing its own hash) is moved to
//! `quarantine/` and cut off; anything worse is corruption and is refused.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::commit::Committer;
use crate::error::{Error, IoContext, Result};
use crate::hash::Hash;
use crate::lock::WriterLock;
use crate::record::{self, PREFIX, RECORD_BYTES_MAX};

/// The log file inside a session directory.
pub const LOG_FILE: &str = "events.jsonl";
/// The writer lock file inside a session directory.
pub const LOCK_FILE: &str = "events.lock";
/// Where torn tails go, inside a session directory.
pub const QUARANTINE_DIR: &str = "quarantine";

/// When appended records reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// `fdatasync` after every record.
    Always,
    /// Durable within a bounded window: [`LogWriter::commit`] hands the records to a
    /// group-commit thread that runs one `fdatasync` for all written in the window
    /// (`commit_window_ms`); [`LogWriter::sync`] makes them durable before it returns.
    #[default]
    Batch,
    /// Never synced by cairn; the operating system writes it back when it likes.
    None,
}

impl std::str::FromStr for Durability {
    type Err = crate::ParseNameError;
    fn from_str(s: &str) -> Result<Self, crate::ParseNameError> {
        match s {
            "always" => Ok(Durability::Always),
            "batch" => Ok(Durability::Batch),
            "none" => Ok(Durability::None),
            _ => Err(crate::ParseNameError {
                what: "durability",
                name: s.to_string(),
                expected: &["always", "batch", "none"],
            }),
        }
    }
}

/// Settings of a log.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub durability: Durability,
    /// The largest record accepted, newline included.
    pub record_bytes_max: usize,
    /// With `batch`, the longest the group-commit thread waits before the `fdatasync`
    /// that makes a [`LogWriter::commit`] durable: it lets records gather for the first
    /// half, then starts at the next commit or when the window ends (see `commit.rs`).
    pub commit_window_ms: u64,
}

/// The group-commit window of `batch` durability, unless configured.
pub const COMMIT_WINDOW_MS_DEFAULT: u64 = 2;

impl Default for Options {
    fn default() -> Self {
        Options {
            durability: Durability::Batch,
            record_bytes_max: RECORD_BYTES_MAX,
            commit_window_ms: COMMIT_WINDOW_MS_DEFAULT,
        }
    }
}

/// The last record of a log: enough to anchor it elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub seq: u64,
    pub hash: Hash,
}

/// What one append wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub seq: u64,
    pub hash: Hash,
    /// Byte offset of the line in the log.
    pub offset: u64,
}

/// What opening a log for append found and repaired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recovery {
    pub head: Option<Head>,
    /// Bytes moved to quarantine (0 when the tail was clean).
    pub quarantined_bytes: u64,
    pub quarantine_file: Option<PathBuf>,
    /// The log's length after repair.
    pub log_bytes: u64,
}

/// The one writer of a session log.
#[derive(Debug)]
pub struct LogWriter {
    /// First, so that it is dropped (and syncs what was committed) while the lock is held.
    committer: Committer,
    path: PathBuf,
    file: File,
    _lock: WriterLock,
    options: Options,
    next_seq: u64,
    prev: Hash,
    len: u64,
    failed: Option<String>,
    event_buf: Vec<u8>,
    /// Records encoded and not written yet: only while [`LogWriter::hold`] holds them
    /// (else each is written as it is appended).
    line_buf: Vec<u8>,
    /// Whether appends are held (see [`LogWriter::hold`]).
    holding: bool,
}

/// The most bytes of records [`LogWriter::hold`] keeps back: past it, they are written.
pub const HELD_BYTES_MAX: usize = 64 * 1024;

/// The path of the log file of session directory `dir`.
pub fn log_path(dir: &Path) -> PathBuf {
    dir.join(LOG_FILE)
}

/// The current time as the log writes it: RFC 3339, UTC, microseconds.
pub fn now_ts() -> String {
    ts_of(jiff::Timestamp::now())
}

/// `format!("{:.6}", t)`, with the date and time up to the second formatted once a
/// second (per thread), not once a record.
fn ts_of(t: jiff::Timestamp) -> String {
    thread_local! {
        /// The second last formatted, and its text up to the `.` before the fraction.
        static SECOND: std::cell::RefCell<(i64, String)> =
            const { std::cell::RefCell::new((i64::MIN, String::new())) };
    }
    let (second, nanos) = (t.as_second(), t.subsec_nanosecond());
    if nanos < 0 {
        // Before 1970: not a clock's time today, formatted whole.
        return format!("{t:.6}");
    }
    SECOND.with_borrow_mut(|(cached, prefix)| {
        if *cached != second {
            let whole = format!("{t:.6}");
            // `….uuuuuuZ`: the fraction and the zone are the last eight bytes.
            let Some(head) = whole.strip_suffix('Z').and_then(|w| w.get(..w.len() - 7)) else {
                return whole;
            };
            *cached = second;
            *prefix = head.to_string();
        }
        let micros = nanos / 1000;
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(micros);
        let mut out = String::with_capacity(prefix.len() + 8);
        out.push_str(prefix);
        out.push('.');
        for _ in digits.len()..6 {
            out.push('0');
        }
        out.push_str(digits);
        out.push('Z');
        out
    })
}

impl LogWriter {
    /// Creates a new, empty log in `dir` (created if needed). Fails if one exists.
    pub fn create(dir: &Path, options: Options) -> Result<LogWriter> {
        crate::private::create_dir_all(dir).at(dir)?;
        let lock = WriterLock::acquire(&dir.join(LOCK_FILE))?;
        // Under the lock, before anything is written (see `written`).
        crate::written::mark(dir, options.durability != Durability::None)?;
        let path = log_path(dir);
        let file = crate::private::options()
            .append(true)
            .read(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => Error::Format {
                    path: path.clone(),
                    what: "a log already exists here; open it instead of creating it".into(),
                },
                _ => Error::Io {
                    path: path.clone(),
                    source: e,
                },
            })?;
        sync_dir(dir)?;
        Ok(LogWriter::new(path, file, lock, options, None, 0, 0))
    }

    /// Opens an existing log for append, repairing a torn tail (see the module docs).
    pub fn open(dir: &Path, options: Options) -> Result<(LogWriter, Recovery)> {
        let path = log_path(dir);
        check_is_log_file(&path)?;
        let lock = WriterLock::acquire(&dir.join(LOCK_FILE))?;
        crate::written::mark(dir, options.durability != Durability::None)?;
        let file = OpenOptions::new()
            .append(true)
            .read(true)
            .open(&path)
            .at(&path)?;
        let len = file.metadata().at(&path)?.len();
        let tail = scan_tail(&file, &path, len, options.record_bytes_max)?;
        let mut recovery = Recovery {
            head: tail.head,
            quarantined_bytes: 0,
            quarantine_file: None,
            log_bytes: tail.good_len,
        };
        if tail.good_len < len {
            let qdir = dir.join(QUARANTINE_DIR);
            crate::private::create_dir_all(&qdir).at(&qdir)?;
            let mut bytes = vec![0; usize::try_from(len - tail.good_len).unwrap_or(usize::MAX)];
            file.read_exact_at(&mut bytes, tail.good_len).at(&path)?;
            let qpath = qdir.join(format!(
                "{}-{}.tail",
                tail.good_len,
                jiff::Timestamp::now().as_nanosecond()
            ));
            let mut q = crate::private::create_new(&qpath).at(&qpath)?;
            q.write_all(&bytes).at(&qpath)?;
            q.sync_all().at(&qpath)?;
            sync_dir(&qdir)?;
            file.set_len(tail.good_len).at(&path)?;
            file.sync_all().at(&path)?;
            recovery.quarantined_bytes = len - tail.good_len;
            recovery.quarantine_file = Some(qpath);
        }
        // What a writer before this one left may still be only in the page cache, so
        // nothing counts as durable yet (unless the repair just synced it): the first
        // sync's `fdatasync` covers it too. Not synced here: a writer that appends
        // syncs anyway (a hook process did both, twice per event), and one that
        // appends nothing claims nothing.
        let durable = if recovery.quarantined_bytes > 0 {
            tail.good_len
        } else {
            0
        };
        let writer = LogWriter::new(path, file, lock, options, tail.head, tail.good_len, durable);
        Ok((writer, recovery))
    }

    fn new(
        path: PathBuf,
        file: File,
        lock: WriterLock,
        options: Options,
        head: Option<Head>,
        len: u64,
        durable: u64,
    ) -> LogWriter {
        debug_assert!(durable <= len, "durable {durable} past the log's end {len}");
        LogWriter {
            committer: Committer::new(
                &path,
                durable,
                std::time::Duration::from_millis(options.commit_window_ms),
                crate::commit::trace_file(),
            ),
            path,
            file,
            _lock: lock,
            options,
            next_seq: head.map_or(0, |h| h.seq + 1),
            prev: head.map_or(Hash::ZERO, |h| h.hash),
            len,
            failed: None,
            event_buf: Vec::with_capacity(1024),
            line_buf: Vec::with_capacity(1024),
            holding: false,
        }
    }

    /// Appends `event` (which must serialize to a JSON object) stamped with the current time.
    pub fn append<T: Serialize + ?Sized>(&mut self, event: &T) -> Result<Appended> {
        self.append_at(&now_ts(), event)
    }

    /// Appends `event` with the given timestamp (RFC 3339).
    pub fn append_at<T: Serialize + ?Sized>(&mut self, ts: &str, event: &T) -> Result<Appended> {
        if let Some(what) = &self.failed {
            return Err(Error::Poisoned {
                path: self.path.clone(),
                what: what.clone(),
            });
        }
        self.event_buf.clear();
        serde_json::to_writer(&mut self.event_buf, event).map_err(|e| Error::Format {
            path: self.path.clone(),
            what: format!("event does not serialize to JSON: {e}"),
        })?;
        self.append_buf(ts)
    }

    /// Appends an event already serialized: `json` must be one compact JSON object, as
    /// `serde_json::to_string` writes one (a raw newline is refused; other malformed JSON
    /// would be a record every reader refuses). Saves serializing an event twice when
    /// the caller needed its JSON anyway.
    pub fn append_json_at(&mut self, ts: &str, json: &str) -> Result<Appended> {
        if let Some(what) = &self.failed {
            return Err(Error::Poisoned {
                path: self.path.clone(),
                what: what.clone(),
            });
        }
        if json.as_bytes().contains(&b'\n') {
            return Err(Error::Format {
                path: self.path.clone(),
                what: "an event must be compact JSON, without a raw newline".into(),
            });
        }
        debug_assert!(serde_json::from_str::<serde::de::IgnoredAny>(json).is_ok());
        self.event_buf.clear();
        self.event_buf.extend_from_slice(json.as_bytes());
        self.append_buf(ts)
    }

    /// Appends the event in `event_buf`.
    fn append_buf(&mut self, ts: &str) -> Result<Appended> {
        if self.event_buf.first() != Some(&b'{') {
            return Err(Error::Format {
                path: self.path.clone(),
                what: "an event must be a JSON object".into(),
            });
        }
        if ts.is_empty() || !ts.bytes().all(crate::record::is_ts_byte) {
            return Err(Error::Format {
                path: self.path.clone(),
                what: format!("timestamp {ts:?} is not RFC 3339"),
            });
        }
        let start = self.line_buf.len();
        let hash = record::encode(
            &self.prev,
            self.next_seq,
            ts,
            &self.event_buf,
            &mut self.line_buf,
        );
        let n = self.line_buf.len() - start;
        if n > self.options.record_bytes_max {
            self.line_buf.truncate(start);
            return Err(Error::Format {
                path: self.path.clone(),
                what: format!(
                    "record of {} bytes is over record_bytes_max ({} bytes); store large payloads as blobs",
                    n, self.options.record_bytes_max
                ),
            });
        }
        if !self.holding || self.line_buf.len() > HELD_BYTES_MAX {
            self.write_lines()?;
        }
        let appended = Appended {
            seq: self.next_seq,
            hash,
            offset: self.len,
        };
        self.len += n as u64;
        self.next_seq += 1;
        self.prev = hash;
        if self.options.durability == Durability::Always {
            self.sync_now()?;
        }
        Ok(appended)
    }

    /// Makes every appended record durable before it returns (a no-op with durability
    /// `none`). Call it before an action the records announce and that cannot be taken
    /// back: a command run, a request sent.
    pub fn sync(&mut self) -> Result<()> {
        self.check_failed()?;
        self.write_held()?;
        if self.options.durability != Durability::None && self.committer.synced() < self.len {
            self.sync_now()?;
        }
        Ok(())
    }

    /// Makes the whole log durable now, whatever the durability setting: the one flush
    /// that ends a bulk write made with durability `none` (an import), which no
    /// per-record sync slowed down. Always syncs: with `none`, what a writer before this
    /// one left is not known to be on the disk either.
    pub fn flush_durable(&mut self) -> Result<()> {
        self.check_failed()?;
        self.write_held()?;
        self.sync_now()
    }

    /// Asks for every appended record to be durable within the group-commit window
    /// (`commit_window_ms`), without waiting for the disk: the boundary of a call that
    /// changed nothing outside the log. With `always` they already are; with `none`,
    /// nothing is asked.
    pub fn commit(&mut self) -> Result<()> {
        self.check_failed()?;
        self.write_held()?;
        if self.options.durability == Durability::Batch
            && self.committer.request(&self.file, self.len).is_err()
        {
            // No thread could start to sync later: sync now.
            return self.sync_now();
        }
        Ok(())
    }

    /// The bytes of the log known to be on the disk (all of them with `always`).
    pub fn durable_len(&self) -> u64 {
        self.committer.synced()
    }

    /// Holds the records appended from now on in memory, to be written together with
    /// one `write` at the next [`commit`](Self::commit), [`sync`](Self::sync) or
    /// [`write_held`](Self::write_held) (or once they pass [`HELD_BYTES_MAX`]), which
    /// ends the hold: the records of a call that only reads, so that its few records
    /// cost one system call, not one each. Until then no reader sees them, and a crash
    /// of the process loses them (a power loss could lose them anyway until the commit
    /// has synced them). With durability `always` nothing is held.
    pub fn hold(&mut self) {
        self.holding = self.options.durability != Durability::Always;
    }

    /// Writes the records held, if any, and ends the hold: what is appended next is
    /// written as it is appended.
    pub fn write_held(&mut self) -> Result<()> {
        self.holding = false;
        self.write_lines()
    }

    /// Writes the records held, if any, holding on: what is appended next is held
    /// again (a snapshot about to be taken of the records so far).
    pub fn write_out(&mut self) -> Result<()> {
        self.write_lines()
    }

    /// Writes the records encoded and not written yet with one `write`.
    fn write_lines(&mut self) -> Result<()> {
        if self.line_buf.is_empty() {
            return Ok(());
        }
        let written = self.file.write_all(&self.line_buf);
        self.line_buf.clear();
        if let Err(e) = written {
            self.failed = Some(format!("write failed: {e}"));
            return Err(e).at(&self.path);
        }
        Ok(())
    }

    fn check_failed(&mut self) -> Result<()> {
        if self.failed.is_none() {
            self.failed = self.committer.failed();
        }
        match &self.failed {
            Some(what) => Err(Error::Poisoned {
                path: self.path.clone(),
                what: what.clone(),
            }),
            None => Ok(()),
        }
    }

    fn sync_now(&mut self) -> Result<()> {
        if let Err(e) = self.file.sync_data() {
            // What reached the disk is unknown after a failed fsync: never retry.
            self.failed = Some(format!("fsync failed: {e}"));
            return Err(e).at(&self.path);
        }
        self.committer.note_synced(self.len);
        Ok(())
    }

    /// The last record written, if any.
    pub fn head(&self) -> Option<Head> {
        self.next_seq.checked_sub(1).map(|seq| Head {
            seq,
            hash: self.prev,
        })
    }

    /// The seq the next append gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The length of the log in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.len
    }

    /// The length of the log's file as this writer wrote it: [`LogWriter::len_bytes`]
    /// less the records held (see [`LogWriter::hold`]), which no reader sees yet.
    pub fn written_bytes(&self) -> u64 {
        self.len - self.line_buf.len() as u64
    }

    /// Syncs and releases the lock.
    pub fn close(mut self) -> Result<()> {
        self.sync()
    }
}

impl Drop for LogWriter {
    /// What is held is written (the committer, dropped next, then syncs it).
    fn drop(&mut self) {
        if self.failed.is_none() {
            let _ = self.write_held();
        }
    }
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).at(dir)
}

/// Refuses directories, missing files and files that are plainly not logs.
pub(crate) fn check_is_log_file(path: &Path) -> Result<()> {
    let meta = fs::metadata(path).at(path)?;
    if meta.is_dir() {
        return Err(Error::Format {
            path: path.to_path_buf(),
            what: "is a directory, not a log file".into(),
        });
    }
    let file = File::open(path).at(path)?;
    let mut first = [0u8; 9];
    let n = read_some_at(&file, &mut first, 0).at(path)?;
    let first = &first[..n];
    if first.iter().any(|&b| b != 0) && !PREFIX.starts_with(first) {
        return Err(Error::Format {
            path: path.to_path_buf(),
            what: "not a cairn log: the first line does not start with {\"prev\":\"".into(),
        });
    }
    Ok(())
}

fn read_some_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64)? {
            0 => break,
            n => done += n,
        }
    }
    Ok(done)
}

/// What the end of a log looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tail {
    /// Length of the log up to and including the last good record.
    pub good_len: u64,
    pub head: Option<Head>,
}

const BACK_BLOCK: u64 = 64 * 1024;

/// Finds the last good record of the first `len` bytes of `file` by reading backwards.
pub(crate) fn scan_tail(
    file: &File,
    path: &Path,
    len: u64,
    record_bytes_max: usize,
) -> Result<Tail> {
    // Zero-filled space after a crash: skip it first.
    let mut end = len;
    let mut buf = Vec::new();
    while end > 0 {
        let n = end.min(BACK_BLOCK);
        buf.resize(n as usize, 0);
        file.read_exact_at(&mut buf, end - n).at(path)?;
        match buf.iter().rposition(|&b| b != 0) {
            Some(i) => {
                end = end - n + i as u64 + 1;
                break;
            }
            None => end -= n,
        }
    }
    if end == 0 {
        return Ok(Tail {
            good_len: 0,
            head: None,
        });
    }
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, end - 1).at(path)?;
    let max = record_bytes_max as u64;
    let (mut cut, mut dropped) = if last[0] == b'\n' {
        (end, false)
    } else {
        let (start, _) = line_ending_at(file, path, end, max)?;
        (start, true)
    };
    loop {
        if cut == 0 {
            return Ok(Tail {
                good_len: 0,
                head: None,
            });
        }
        let (s1, l1) = line_ending_at(file, path, cut - 1, max)?;
        match record::check_line(&l1) {
            Ok(f1) => {
                if s1 == 0 {
                    if f1.seq != 0 || f1.prev != Hash::ZERO {
                        return Err(corruption(
                            file,
                            path,
                            s1,
                            Some(f1.seq),
                            "the first record must have seq 0 and a zero prev",
                        ));
                    }
                } else {
                    let (s0, l0) = line_ending_at(file, path, s1 - 1, max)?;
                    match record::check_line(&l0) {
                        Ok(f0) if f0.hash == f1.prev && f0.seq.checked_add(1) == Some(f1.seq) => {}
                        Ok(_) => {
                            return Err(corruption(
                                file,
                                path,
                                s1,
                                Some(f1.seq),
                                "the last record does not chain to the one before it",
                            ));
                        }
                        Err(bad) => return Err(corruption(file, path, s0, bad.seq, &bad.what)),
                    }
                }
                return Ok(Tail {
                    good_len: cut,
                    head: Some(Head {
                        seq: f1.seq,
                        hash: f1.hash,
                    }),
                });
            }
            Err(bad) if dropped => {
                // One crash tears at most one record: a second bad one is corruption.
                return Err(corruption(file, path, s1, bad.seq, &bad.what));
            }
            Err(_) => {
                dropped = true;
                cut = s1;
            }
        }
    }
}

/// The line whose bytes end at `end` (exclusive, newline not included): its start and
/// its bytes. Fails when no line start is found within `max` bytes.
fn line_ending_at(file: &File, path: &Path, end: u64, max: u64) -> Result<(u64, Vec<u8>)> {
    let mut start = end;
    let mut bytes: Vec<u8> = Vec::new();
    loop {
        if start == 0 {
            return Ok((0, bytes));
        }
        let n = start.min(BACK_BLOCK);
        let mut block = vec![0u8; n as usize];
        file.read_exact_at(&mut block, start - n).at(path)?;
        if let Some(i) = block.iter().rposition(|&b| b == b'\n') {
            let line_start = start - n + i as u64 + 1;
            block.drain(..=i);
            block.extend_from_slice(&bytes);
            return Ok((line_start, block));
        }
        block.extend_from_slice(&bytes);
        bytes = block;
        start -= n;
        if end - start > max {
            return Err(corruption(
                file,
                path,
                start,
                None,
                &format!("a line is longer than record_bytes_max ({max} bytes)"),
            ));
        }
    }
}

/// A corruption error at byte `offset`, with its line number (counted: an error path).
fn corruption(file: &File, path: &Path, offset: u64, seq: Option<u64>, what: &str) -> Error {
    let mut line = 1u64;
    let mut pos = 0u64;
    let mut block = vec![0u8; 1 << 20];
    while pos < offset {
        let n = (offset - pos).min(block.len() as u64) as usize;
        if file.read_exact_at(&mut block[..n], pos).is_err() {
            break;
        }
        line += block[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        pos += n as u64;
    }
    Error::Corruption {
        path: path.to_path_buf(),
        seq,
        line,
        offset,
        what: what.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn durability_none() -> Options {
        Options {
            durability: Durability::None,
            ..Options::default()
        }
    }

    /// A writer of a new log with durability `none`, its syncs traced to `trace`.
    fn writer(dir: &Path, trace: &Path) -> LogWriter {
        let mut w = LogWriter::create(&dir.join("session"), durability_none()).unwrap();
        w.committer.trace_to(File::create(trace).unwrap());
        w
    }

    #[test]
    fn a_timestamp_reads_as_jiff_writes_it_from_one_second_to_the_next() {
        use jiff::Timestamp;
        let direct = |t: Timestamp| format!("{t:.6}");
        let nanos = [
            0,
            1,
            999,
            1_000,
            1_001,
            9_999,
            123_456_789,
            999_999_000,
            999_999_999,
        ];
        // Seconds around a year's, a day's and a minute's end, and today's.
        let seconds = [
            1_798_761_599, // 2026-12-31T23:59:59Z
            1_798_761_600,
            1_764_547_199,
            1_764_547_200,
            0,
            59,
            60,
            Timestamp::now().as_second(),
            253_402_207_199, // jiff's last second, 9999-12-30T21:59:59Z
        ];
        // In every order, so the per-second cache is both reused and replaced.
        for &s in seconds.iter().chain(seconds.iter().rev()) {
            for &n in nanos.iter().chain(nanos.iter().rev()) {
                let t = Timestamp::new(s, n).unwrap();
                assert_eq!(ts_of(t), direct(t), "{s} s {n} ns");
            }
        }
        // Before 1970 the fraction counts back: written whole.
        let t = Timestamp::new(-1, -5_000).unwrap();
        assert_eq!(ts_of(t), direct(t));
        assert!(now_ts().ends_with('Z') && now_ts().len() == "2026-12-01T20:37:20.123456Z".len());
    }

    #[test]
    fn flush_durable_makes_records_written_with_durability_none_durable() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace");
        let mut w = writer(dir.path(), &trace);
        for i in 0..3 {
            w.append(&serde_json::json!({"type": "note", "i": i}))
                .unwrap();
            // With `none`, the call path's syncs and commits do nothing.
            w.sync().unwrap();
            w.commit().unwrap();
        }
        assert_eq!(w.durable_len(), 0);
        assert_eq!(std::fs::read_to_string(&trace).unwrap(), "");
        w.flush_durable().unwrap();
        let len = std::fs::metadata(w.path()).unwrap().len();
        assert!(len > 0);
        assert_eq!(w.durable_len(), len);
        assert_eq!(
            std::fs::read_to_string(&trace).unwrap(),
            format!("synced {} {len}\n", w.path().display())
        );
        // Nothing new: it syncs again all the same (a writer before this one may have
        // left bytes only in the page cache), and says so.
        w.flush_durable().unwrap();
        assert_eq!(std::fs::read_to_string(&trace).unwrap().lines().count(), 2);
    }

    /// Guards against a sync at open (a hook process opened, appended and synced its
    /// session's log: two `fdatasync`s an event where one does): nothing counts as
    /// durable after open, and the first sync covers what the writer before left.
    #[test]
    fn open_does_not_sync_and_the_first_sync_covers_what_the_writer_before_left() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("session");
        let mut w = LogWriter::create(&session, durability_none()).unwrap();
        w.append(&serde_json::json!({"type": "note", "i": 0}))
            .unwrap();
        let left = w.len_bytes();
        drop(w);
        let (mut w, _) = LogWriter::open(&session, Options::default()).unwrap();
        let trace = dir.path().join("trace");
        w.committer.trace_to(File::create(&trace).unwrap());
        assert_eq!(w.durable_len(), 0);
        // Nothing appended by this writer: its sync still makes the earlier bytes durable.
        w.sync().unwrap();
        assert_eq!(w.durable_len(), left);
        w.append(&serde_json::json!({"type": "note", "i": 1}))
            .unwrap();
        w.sync().unwrap();
        let len = w.len_bytes();
        assert_eq!(w.durable_len(), len);
        assert_eq!(
            std::fs::read_to_string(&trace).unwrap(),
            format!(
                "synced {path} {left}\nsynced {path} {len}\n",
                path = w.path().display()
            )
        );
    }

    /// The bytes of `w`'s log file now.
    fn file_len(w: &LogWriter) -> u64 {
        std::fs::metadata(w.path()).unwrap().len()
    }

    fn note(w: &mut LogWriter, pad: usize) {
        w.append(&serde_json::json!({"type": "note", "pad": "x".repeat(pad)}))
            .unwrap();
    }

    #[test]
    fn held_records_are_written_together_by_each_of_commit_sync_write_held_and_drop() {
        type End = fn(&mut LogWriter);
        let ends: [(&str, End); 4] = [
            ("commit", |w| w.commit().unwrap()),
            ("sync", |w| w.sync().unwrap()),
            ("write_held", |w| w.write_held().unwrap()),
            ("flush_durable", |w| w.flush_durable().unwrap()),
        ];
        for (name, end) in ends {
            let dir = tempfile::tempdir().unwrap();
            let mut w = LogWriter::create(&dir.path().join("session"), Options::default()).unwrap();
            note(&mut w, 0);
            let before = w.len_bytes();
            assert_eq!(file_len(&w), before, "{name}: not held, written at once");
            w.hold();
            for _ in 0..3 {
                note(&mut w, 10);
            }
            assert_eq!(file_len(&w), before, "{name}: held");
            assert!(w.len_bytes() > before);
            end(&mut w);
            assert_eq!(file_len(&w), w.len_bytes(), "{name}: written");
            // The hold ended: the next record is written as it is appended.
            note(&mut w, 0);
            assert_eq!(file_len(&w), w.len_bytes(), "{name}: the hold ended");
            drop(w);
            let records = crate::reader::LogReader::open(&dir.path().join("session"))
                .unwrap()
                .records()
                .unwrap()
                .map(|r| r.unwrap().seq)
                .collect::<Vec<_>>();
            assert_eq!(records, [0, 1, 2, 3, 4], "{name}");
        }
        // Dropped while holding: what is held is written.
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("session");
        let mut w = LogWriter::create(&session, Options::default()).unwrap();
        w.hold();
        note(&mut w, 0);
        note(&mut w, 0);
        assert_eq!(file_len(&w), 0);
        let len = w.len_bytes();
        drop(w);
        assert_eq!(std::fs::metadata(log_path(&session)).unwrap().len(), len);
        let (w, recovery) = LogWriter::open(&session, Options::default()).unwrap();
        assert_eq!(recovery.quarantined_bytes, 0);
        assert_eq!(w.next_seq(), 2);
    }

    #[test]
    fn write_out_writes_what_is_held_and_holds_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = LogWriter::create(&dir.path().join("session"), durability_none()).unwrap();
        w.hold();
        note(&mut w, 0);
        note(&mut w, 0);
        assert_eq!(file_len(&w), 0);
        w.write_out().unwrap();
        let out = w.len_bytes();
        assert_eq!(file_len(&w), out);
        note(&mut w, 0);
        assert_eq!(file_len(&w), out, "still holding");
        w.commit().unwrap();
        assert_eq!(file_len(&w), w.len_bytes());
    }

    #[test]
    fn a_hold_writes_what_it_holds_one_byte_past_held_bytes_max_and_holds_on() {
        // A record's size without its pad, at seqs of one digit.
        let dir = tempfile::tempdir().unwrap();
        let mut w = LogWriter::create(&dir.path().join("probe"), durability_none()).unwrap();
        note(&mut w, 0);
        let bare = w.len_bytes() as usize;
        drop(w);
        for over in [0, 1] {
            let dir = tempfile::tempdir().unwrap();
            let mut w = LogWriter::create(&dir.path().join("session"), durability_none()).unwrap();
            w.hold();
            note(&mut w, 0);
            // Held: exactly HELD_BYTES_MAX, or one byte more.
            note(&mut w, HELD_BYTES_MAX - 2 * bare + over);
            assert_eq!(w.len_bytes() as usize, HELD_BYTES_MAX + over);
            let want = if over == 0 { 0 } else { w.len_bytes() };
            assert_eq!(file_len(&w), want, "{over} byte(s) past the limit");
            // Still holding either way.
            let before = file_len(&w);
            note(&mut w, 0);
            if over == 1 {
                assert_eq!(file_len(&w), before, "the hold goes on after a write");
            } else {
                assert_eq!(file_len(&w), w.len_bytes(), "past the limit now");
            }
        }
    }

    #[test]
    fn durability_always_holds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            durability: Durability::Always,
            ..Options::default()
        };
        let mut w = LogWriter::create(&dir.path().join("session"), options).unwrap();
        w.hold();
        note(&mut w, 0);
        assert_eq!(file_len(&w), w.len_bytes());
        assert_eq!(w.durable_len(), w.len_bytes());
    }

    #[test]
    fn a_held_write_that_fails_is_an_error_and_poisons_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace");
        let mut w = writer(dir.path(), &trace);
        w.hold();
        note(&mut w, 0);
        // A descriptor open for reading only: the write fails (EBADF).
        w.file = File::open("/dev/null").unwrap();
        let err = w.commit().unwrap_err();
        assert!(
            matches!(&err, Error::Io { path, .. } if path == w.path()),
            "{err:?}"
        );
        assert!(matches!(
            w.append(&serde_json::json!({"type": "note"})),
            Err(Error::Poisoned { what, .. }) if what.starts_with("write failed")
        ));
        assert!(matches!(w.commit(), Err(Error::Poisoned { .. })));
    }

    #[test]
    fn flush_durable_that_fails_is_an_error_and_poisons_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace");
        let mut w = writer(dir.path(), &trace);
        w.append(&serde_json::json!({"type": "note"})).unwrap();
        // fdatasync on a character device fails (EINVAL): the disk refusing a sync.
        w.file = OpenOptions::new().write(true).open("/dev/null").unwrap();
        let err = w.flush_durable().unwrap_err();
        assert!(
            matches!(&err, Error::Io { path, .. } if path == w.path()),
            "{err:?}"
        );
        assert_eq!(w.durable_len(), 0);
        assert_eq!(std::fs::read_to_string(&trace).unwrap(), "");
        // What reached the disk is unknown now: the writer refuses to go on, and never
        // retries the sync.
        assert!(
            matches!(w.flush_durable(), Err(Error::Poisoned { what, .. }) if what.starts_with("fsync failed")),
        );
        assert!(matches!(
            w.append(&serde_json::json!({"type": "note"})),
            Err(Error::Poisoned { .. })
        ));
    }
}
