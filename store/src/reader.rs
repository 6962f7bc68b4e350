//! Reading a log: a streaming iterator whose memory is bounded by the largest record,
//! whatever the size of the log, and random access by seq through `events.idx`, an
//! index that is only a cache (checked on use, extended or rebuilt when stale).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde_json::value::RawValue;

use crate::error::{Error, IoContext, Result};
use crate::hash::Hash;
use crate::log::{Head, back_windows, check_is_log_file, log_path, scan_tail};
use crate::record::{self, RECORD_BYTES_MAX};

/// The index file inside a session directory.
pub const INDEX_FILE: &str = "events.idx";

const INDEX_MAGIC: &[u8; 8] = b"CAIRNIX1";
/// The bytes read at a time by a reader of many records.
const STREAM_READ_BYTES: usize = 256 * 1024;
/// The bytes read at a time by a reader of one record (a longer one takes more reads):
/// a stream's buffer, allocated and filled, cost a hook's process page faults and a
/// copy of 256 KiB of a long log for one line.
const ONE_READ_BYTES: usize = 16 * 1024;

/// One record, checked and parsed.
#[derive(Debug, Clone)]
pub struct Record {
    pub seq: u64,
    pub ts: String,
    pub prev: Hash,
    pub hash: Hash,
    /// The event object exactly as written.
    pub event: Box<RawValue>,
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the line.
    pub offset: u64,
}

impl Record {
    /// The event's `type` field, if it has one.
    pub fn event_type(&self) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Typed {
            #[serde(rename = "type")]
            kind: Option<String>,
        }
        serde_json::from_str::<Typed>(self.event.get()).ok()?.kind
    }
}

/// What the end of a log looks like to a reader (which repairs nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailState {
    pub head: Option<Head>,
    /// Bytes after the last good record (a torn tail that opening for append would cut).
    pub torn_bytes: u64,
    pub log_bytes: u64,
}

/// A read-only view of a session log.
#[derive(Debug)]
pub struct LogReader {
    /// The index cache, kept only beside a session's `events.jsonl`.
    index: Option<PathBuf>,
    path: PathBuf,
    record_bytes_max: usize,
}

impl LogReader {
    /// Opens a log for reading: `path` is a session directory (its `events.jsonl`) or a
    /// log file. Random access keeps an index beside a session's log; other log files
    /// are scanned.
    pub fn open(path: &Path) -> Result<LogReader> {
        let (path, index) = if path.is_dir() {
            (log_path(path), Some(path.join(INDEX_FILE)))
        } else {
            let index = (path.file_name() == Some(std::ffi::OsStr::new(crate::log::LOG_FILE)))
                .then(|| path.with_file_name(INDEX_FILE));
            (path.to_path_buf(), index)
        };
        check_is_log_file(&path)?;
        Ok(LogReader {
            index,
            path,
            record_bytes_max: RECORD_BYTES_MAX,
        })
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last good record, found by reading from the end; repairs nothing.
    pub fn tail(&self) -> Result<TailState> {
        let file = File::open(&self.path).at(&self.path)?;
        let len = file.metadata().at(&self.path)?.len();
        let tail = scan_tail(&file, &self.path, len, self.record_bytes_max)?;
        Ok(TailState {
            head: tail.head,
            torn_bytes: len - tail.good_len,
            log_bytes: len,
        })
    }

    /// Every record from the first, checked (own hash, chain, seq) as it is read.
    /// Stops after the first error, which it yields.
    pub fn records(&self) -> Result<Records> {
        self.records_at(0, 0, 1, Some(Hash::ZERO), STREAM_READ_BYTES)
    }

    /// The first record, if the log has one: read with a buffer of its size, not a
    /// stream's (a hook's process reads the `session_started` of a long session).
    pub fn first(&self) -> Result<Option<Record>> {
        self.records_at(0, 0, 1, Some(Hash::ZERO), ONE_READ_BYTES)?
            .next()
            .transpose()
    }

    /// Every record from `seq` on, found through the index.
    pub fn records_from(&self, seq: u64) -> Result<Records> {
        if seq == 0 {
            return self.records();
        }
        match self.offset_of(seq)? {
            Some(offset) => self.records_at(offset, seq, seq + 1, None, STREAM_READ_BYTES),
            None => Err(Error::Format {
                path: self.path.clone(),
                what: format!("the log has no record with seq {seq}"),
            }),
        }
    }

    /// The record with `seq`, if the log has it.
    pub fn get(&self, seq: u64) -> Result<Option<Record>> {
        match self.offset_of(seq)? {
            Some(offset) => self
                .records_at(offset, seq, seq + 1, None, ONE_READ_BYTES)?
                .next()
                .transpose(),
            None => Ok(None),
        }
    }

    fn records_at(
        &self,
        offset: u64,
        seq: u64,
        line: u64,
        prev: Option<Hash>,
        read_bytes: usize,
    ) -> Result<Records> {
        let mut file = File::open(&self.path).at(&self.path)?;
        file.seek(SeekFrom::Start(offset)).at(&self.path)?;
        Ok(Records {
            reader: BufReader::with_capacity(read_bytes, file),
            path: self.path.clone(),
            buf: Vec::with_capacity(4096),
            offset,
            line,
            next_seq: seq,
            prev,
            record_bytes_max: self.record_bytes_max,
            done: false,
        })
    }

    /// Byte offset of record `seq`, through the index (extended or rebuilt as needed;
    /// a cache that cannot be written falls back to a scan). Its line is `seq + 1`.
    fn offset_of(&self, seq: u64) -> Result<Option<u64>> {
        let Some(idx_path) = &self.index else {
            return self.scan_for(seq);
        };
        let idx_path = idx_path.as_path();
        let log = File::open(&self.path).at(&self.path)?;
        let log_len = log.metadata().at(&self.path)?.len();
        let mut entries = valid_index_entries(idx_path, &log, log_len);
        if seq >= entries
            && let Some(offset) = self.offset_back(&log, log_len, seq, entries)?
        {
            return Ok(Some(offset));
        }
        if seq >= entries {
            let (start_seq, start_offset) = match entries {
                0 => (0, 0),
                n => {
                    let off = read_entry(idx_path, n - 1).unwrap_or(0);
                    let mut end = [0u8; 1];
                    let mut o = off;
                    // Skip the indexed line itself.
                    loop {
                        if log.read_exact_at(&mut end, o).is_err() {
                            break;
                        }
                        o += 1;
                        if end[0] == b'\n' {
                            break;
                        }
                    }
                    (n, o)
                }
            };
            let mut appended = Vec::new();
            let prev = if start_seq == 0 {
                Some(Hash::ZERO)
            } else {
                None
            };
            let mut records = self.records_at(
                start_offset,
                start_seq,
                start_seq + 1,
                prev,
                STREAM_READ_BYTES,
            )?;
            for r in records.by_ref() {
                let r = r?;
                appended.extend_from_slice(&r.offset.to_le_bytes());
                if r.seq >= seq {
                    break;
                }
            }
            if !appended.is_empty() {
                if write_entries(idx_path, entries, &appended).is_err() {
                    // A read-only place: scan instead of caching.
                    return self.scan_for(seq);
                }
                entries += appended.len() as u64 / 8;
            }
        }
        if seq >= entries {
            return Ok(None);
        }
        match read_entry(idx_path, seq) {
            // Only the last entry was checked: one before it can be stale (a repair, then
            // records of other sizes) and point into the middle of another line.
            Some(offset) if is_line_of(&log, offset, seq) => Ok(Some(offset)),
            Some(_) => {
                let _ = std::fs::remove_file(idx_path);
                self.scan_for(seq)
            }
            None => self.scan_for(seq),
        }
    }

    /// Byte offset of record `seq` counted back from the log's last good record, when
    /// it lies nearer that end than the index's (`indexed` entries): the record of a
    /// snapshot at resume, found by reading the log's tail backwards in blocks instead
    /// of indexing (or scanning) the whole log from the start. `None` when it lies
    /// nearer the start, or when the count does not land on a line of that seq (a log
    /// whose lines are not one seq each): the index then finds it.
    fn offset_back(&self, log: &File, log_len: u64, seq: u64, indexed: u64) -> Result<Option<u64>> {
        let tail = scan_tail(log, &self.path, log_len, self.record_bytes_max)?;
        let Some(head) = tail.head else {
            return Ok(None);
        };
        if seq > head.seq || head.seq - seq >= seq - indexed {
            return Ok(None);
        }
        // The line of `seq` starts after the newline that ends the line before it: the
        // (head.seq - seq + 1)-th newline before the head's own, or at 0 for seq 0.
        let mut wanted = head.seq - seq + 1;
        let mut buf = Vec::new();
        for (start, end) in back_windows(tail.good_len.saturating_sub(1)) {
            buf.resize((end - start) as usize, 0);
            log.read_exact_at(&mut buf, start).at(&self.path)?;
            for i in memchr::memrchr_iter(b'\n', &buf) {
                wanted -= 1;
                if wanted == 0 {
                    let offset = start + i as u64 + 1;
                    return Ok(is_line_of(log, offset, seq).then_some(offset));
                }
            }
        }
        Ok((wanted == 1 && is_line_of(log, 0, seq)).then_some(0))
    }

    fn scan_for(&self, seq: u64) -> Result<Option<u64>> {
        for r in self.records()? {
            let r = r?;
            if r.seq == seq {
                return Ok(Some(r.offset));
            }
        }
        Ok(None)
    }
}

/// How many leading entries of the index can be trusted: the last one must point at a
/// line that parses with the right seq; otherwise the index is thrown away.
fn valid_index_entries(idx_path: &Path, log: &File, log_len: u64) -> u64 {
    let Ok(file) = File::open(idx_path) else {
        return 0;
    };
    let Ok(meta) = file.metadata() else { return 0 };
    let mut magic = [0u8; 8];
    if meta.len() < 8 || file.read_exact_at(&mut magic, 0).is_err() || &magic != INDEX_MAGIC {
        let _ = std::fs::remove_file(idx_path);
        return 0;
    }
    let stored = (meta.len() - 8) / 8;
    let mut n = stored;
    // Entries past the end of a truncated log are dropped from the end.
    while n > 0 {
        let Some(off) = entry_at(&file, n - 1) else {
            return 0;
        };
        if off < log_len {
            break;
        }
        n -= 1;
    }
    if n == 0 {
        return 0;
    }
    let Some(off) = entry_at(&file, n - 1) else {
        return 0;
    };
    if is_line_of(log, off, n - 1) {
        // Only a cache that lost entries is rewritten: reading stays read-only.
        if n < stored
            && let Ok(f) = OpenOptions::new().write(true).open(idx_path)
        {
            let _ = f.set_len(8 + n * 8);
        }
        n
    } else {
        let _ = std::fs::remove_file(idx_path);
        0
    }
}

/// Entry `i` of an open index file.
fn entry_at(file: &File, i: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    file.read_exact_at(&mut b, 8 + i * 8).ok()?;
    Some(u64::from_le_bytes(b))
}

/// True when a line of `log` starts at `off` and holds record `seq`.
fn is_line_of(log: &File, off: u64, seq: u64) -> bool {
    let mut line = vec![0u8; 128];
    let got = log.read_at(&mut line, off).unwrap_or(0);
    line.truncate(got);
    let expected = format!("\",\"seq\":{seq},");
    (off == 0 || {
        let mut b = [0u8; 1];
        log.read_exact_at(&mut b, off - 1).is_ok() && b[0] == b'\n'
    }) && line.starts_with(record::PREFIX)
        && line.get(73..73 + expected.len()) == Some(expected.as_bytes())
}

fn read_entry(idx_path: &Path, i: u64) -> Option<u64> {
    entry_at(&File::open(idx_path).ok()?, i)
}

fn write_entries(idx_path: &Path, existing: u64, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = crate::private::options()
        .create(true)
        .append(true)
        .open(idx_path)?;
    if existing == 0 {
        file.set_len(0)?;
        file.write_all(INDEX_MAGIC)?;
    }
    file.write_all(bytes)
}

/// The streaming iterator of [`LogReader::records`].
#[derive(Debug)]
pub struct Records {
    reader: BufReader<File>,
    path: PathBuf,
    buf: Vec<u8>,
    offset: u64,
    line: u64,
    next_seq: u64,
    prev: Option<Hash>,
    record_bytes_max: usize,
    done: bool,
}

impl Records {
    /// The byte offset of the next line: where a reader that stops at a length the
    /// writer has reached (a live tail of the log) goes on from once the log grows.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn fail(&mut self, what: String, seq: Option<u64>) -> Option<Result<Record>> {
        self.done = true;
        Some(Err(Error::Corruption {
            path: self.path.clone(),
            seq,
            line: self.line,
            offset: self.offset,
            what,
        }))
    }
}

/// Reads one line into `buf` (newline dropped), reading at most `max` bytes of it.
/// Returns the bytes consumed (0 at the end), and whether a newline ended the line.
pub(crate) fn read_line_bounded(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<(u64, bool, bool)> {
    buf.clear();
    let mut consumed = 0u64;
    let mut too_long = false;
    loop {
        let avail = reader.fill_buf()?;
        if avail.is_empty() {
            return Ok((consumed, false, too_long));
        }
        let (take, found) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        let body = if found {
            &avail[..take - 1]
        } else {
            &avail[..take]
        };
        if buf.len() + body.len() <= max {
            buf.extend_from_slice(body);
        } else {
            too_long = true;
        }
        reader.consume(take);
        consumed += take as u64;
        if found {
            return Ok((consumed, true, too_long));
        }
    }
}

impl Iterator for Records {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Result<Record>> {
        if self.done {
            return None;
        }
        // The limit counts the newline, which `read_line_bounded` leaves out.
        let body_max = self.record_bytes_max.saturating_sub(1);
        let (consumed, newline, too_long) =
            match read_line_bounded(&mut self.reader, &mut self.buf, body_max) {
                Ok(r) => r,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e).at(&self.path));
                }
            };
        if consumed == 0 {
            self.done = true;
            return None;
        }
        let seq = self.next_seq;
        if too_long {
            return self.fail(
                format!(
                    "record is longer than record_bytes_max ({} bytes)",
                    self.record_bytes_max
                ),
                Some(seq),
            );
        }
        if !newline {
            return self.fail(
                format!("torn tail: {consumed} bytes without a newline"),
                Some(seq),
            );
        }
        let fields = match record::check_line(&self.buf) {
            Ok(f) => f,
            Err(bad) => return self.fail(bad.what, Some(seq)),
        };
        if fields.seq != seq {
            return self.fail(
                format!("expected seq {seq}, found {}", fields.seq),
                Some(seq),
            );
        }
        if let Some(prev) = self.prev
            && prev != fields.prev
        {
            return self.fail(
                "prev does not match the hash of the record before".into(),
                Some(seq),
            );
        }
        let event = match RawValue::from_string(String::from_utf8_lossy(fields.event).into_owned())
        {
            Ok(e) => e,
            Err(e) => return self.fail(format!("event is not JSON: {e}"), Some(seq)),
        };
        let record = Record {
            seq,
            ts: fields.ts.to_string(),
            prev: fields.prev,
            hash: fields.hash,
            event,
            line: self.line,
            offset: self.offset,
        };
        self.prev = Some(record.hash);
        self.next_seq += 1;
        self.offset += consumed;
        self.line += 1;
        Some(Ok(record))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{Durability, LogWriter, Options};

    // Guards against the one-record read cutting a record longer than its buffer: a
    // first record of twice its size comes back whole, as does one got by seq; an empty
    // log has no first record.
    #[test]
    fn one_record_reads_take_a_record_longer_than_their_buffer_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        std::fs::create_dir(&dir).unwrap();
        let mut w = LogWriter::create(
            &dir,
            Options {
                durability: Durability::None,
                ..Options::default()
            },
        )
        .unwrap();
        let pad = "y".repeat(ONE_READ_BYTES * 2 + 123);
        w.append(&serde_json::json!({"type": "note", "pad": pad}))
            .unwrap();
        w.append(&serde_json::json!({"type": "note", "pad": pad, "i": 1}))
            .unwrap();
        w.close().unwrap();
        let reader = LogReader::open(&dir).unwrap();
        for (seq, r) in [(0, reader.first()), (1, reader.get(1))] {
            let r = r.unwrap().unwrap();
            assert_eq!(r.seq, seq);
            let v: serde_json::Value = serde_json::from_str(r.event.get()).unwrap();
            assert_eq!(v["pad"].as_str().unwrap().len(), pad.len());
        }
        let empty = tmp.path().join("e");
        std::fs::create_dir(&empty).unwrap();
        std::fs::write(empty.join(crate::log::LOG_FILE), "").unwrap();
        assert!(LogReader::open(&empty).unwrap().first().unwrap().is_none());
    }

    fn log_of(dir: &Path, records: u64) {
        let mut w = LogWriter::create(
            dir,
            Options {
                durability: Durability::None,
                ..Options::default()
            },
        )
        .unwrap();
        for i in 0..records {
            // Lines of different lengths, so that a wrong count lands mid-line.
            let pad = "x".repeat((i % 7 * 50) as usize);
            w.append(&serde_json::json!({"type": "note", "i": i, "pad": pad}))
                .unwrap();
        }
        w.close().unwrap();
    }

    /// A record near the end is found by counting lines back from the head, without
    /// building the index; one near the start goes through the index; both are the
    /// record asked for, at every seq around the block size of the backward read.
    #[test]
    fn a_record_near_the_end_is_found_backwards_without_indexing_the_log() {
        let tmp = tempfile::tempdir().unwrap();
        let records = 3_000;
        log_of(tmp.path(), records);
        let reader = LogReader::open(tmp.path()).unwrap();
        let idx = tmp.path().join(INDEX_FILE);
        for seq in [records - 1, records - 2, records - 300, records / 2 + 1] {
            let r = reader.get(seq).unwrap().unwrap();
            assert_eq!(r.seq, seq);
            assert!(!idx.exists(), "seq {seq} was found through the index");
        }
        let r = reader.get(5).unwrap().unwrap();
        assert_eq!(r.seq, 5);
        assert!(idx.exists(), "a record near the start builds the index");
        assert!(reader.get(records).unwrap().is_none());
        // With the index there, records past it near the end are still found.
        for seq in (0..records).step_by(97) {
            assert_eq!(reader.get(seq).unwrap().unwrap().seq, seq);
        }
    }

    /// A torn tail after the last good record does not shift the count.
    #[test]
    fn a_torn_tail_does_not_shift_the_backward_count() {
        let tmp = tempfile::tempdir().unwrap();
        log_of(tmp.path(), 200);
        let log = log_path(tmp.path());
        let mut f = OpenOptions::new().append(true).open(&log).unwrap();
        f.write_all(b"{\"hash\":\"torn").unwrap();
        let reader = LogReader::open(tmp.path()).unwrap();
        for seq in [199, 198, 150] {
            assert_eq!(reader.get(seq).unwrap().unwrap().seq, seq);
        }
        assert!(!tmp.path().join(INDEX_FILE).exists());
    }
}
