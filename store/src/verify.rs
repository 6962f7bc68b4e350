//! Integrity verification of a log: every record's own hash, the chain, seq continuity
//! and that every event is well-formed JSON. Every problem is reported, not the first,
//! each with its seq, line and byte offset. Nothing is ever written.
//!
//! Hashing and parsing a line need nothing from other lines, so whole chunks of the
//! file go to worker threads that summarise their lines; only the chain and seq checks,
//! which are cheap, run in order over the summaries.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use serde::Serialize;

use crate::error::{Error, IoContext, Result};
use crate::hash::Hash;
use crate::log::Head;
use crate::record::{self, RECORD_BYTES_MAX};

/// Settings of a verification.
#[derive(Debug, Clone, Copy)]
pub struct VerifyOptions {
    /// Worker threads (default: the number of cores).
    pub threads: usize,
    /// Bytes read per step.
    pub chunk_bytes: usize,
    pub record_bytes_max: usize,
    /// Problems kept in the report; the rest are only counted.
    pub problems_max: usize,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            chunk_bytes: 4 << 20,
            record_bytes_max: RECORD_BYTES_MAX,
            problems_max: 10_000,
        }
    }
}

/// The kind of a [`Problem`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// A line that is not a valid record (layout, own hash, JSON).
    BadRecord,
    /// A seq that does not follow the one before.
    SeqGap,
    /// A `prev` that is not the hash of the record before.
    BrokenChain,
    /// Bytes at the end without a newline.
    TornTail,
    /// A line longer than the record limit.
    TooLong,
    /// No records at all.
    Empty,
}

/// One thing wrong with a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The record's seq: as written for a record whose hash holds, otherwise the seq
    /// the position implies.
    pub seq: Option<u64>,
    /// 1-based line number.
    pub line: u64,
    pub offset: u64,
    pub kind: ProblemKind,
    pub what: String,
}

/// The outcome of verifying a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Lines seen (good or bad).
    pub records: u64,
    pub bytes: u64,
    /// The last good record.
    pub head: Option<Head>,
    pub problems: Vec<Problem>,
    /// Problems past `problems_max`, counted only.
    pub problems_omitted: u64,
}

impl VerifyReport {
    /// True when nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty() && self.problems_omitted == 0
    }

    /// Every problem, kept or omitted.
    pub fn problem_count(&self) -> u64 {
        self.problems.len() as u64 + self.problems_omitted
    }
}

/// Verifies the log file at `path`. An error means it could not run (missing file, a
/// directory, an I/O error); problems with the log are in the report.
pub fn verify_path(path: &Path, options: &VerifyOptions) -> Result<VerifyReport> {
    if std::fs::metadata(path).at(path)?.is_dir() {
        return Err(Error::Format {
            path: path.to_path_buf(),
            what: "is a directory, not a log file".into(),
        });
    }
    let mut file = File::open(path).at(path)?;
    let file_len = file.metadata().at(path)?.len();
    let file_len = usize::try_from(file_len).unwrap_or(usize::MAX);
    // Small logs get small buffers; big ones a full chunk.
    let chunk_bytes = options.chunk_bytes.max(1).min(file_len.max(1));
    let read = move |buf: &mut [u8]| file.read(buf);
    let report = if file_len <= chunk_bytes {
        verify_in_order(read, options, chunk_bytes, file_len)
    } else {
        verify_pipelined(read, options, chunk_bytes, file_len)
    }
    .at(path)?;
    if report.head.is_none() && report.bytes > 0 {
        // Not one good record: tell "not a log at all" apart from a damaged log.
        crate::log::check_is_log_file(path)?;
    }
    Ok(report)
}

/// Verifies a log held in memory, on this thread alone.
pub fn verify_bytes(bytes: &[u8], options: &VerifyOptions) -> VerifyReport {
    let chunk_bytes = options.chunk_bytes.min(bytes.len()).max(1);
    let mut rest = bytes;
    let read = move |buf: &mut [u8]| rest.read(buf);
    // Reading from memory cannot fail.
    verify_in_order(read, options, chunk_bytes, bytes.len())
        .unwrap_or_else(|e| unreachable!("reading from memory failed: {e}"))
}

/// Cuts what is read into chunks of whole lines: the line the chunk before cut is
/// carried to the start of the next, and a line longer than `record_bytes_max` that
/// spans chunks is only counted, never kept.
struct Splitter {
    chunk_bytes: usize,
    record_bytes_max: usize,
    /// The start of the line the last chunk cut (never longer than the limit).
    tail: Vec<u8>,
    /// Bytes of an over-long line being skipped.
    skipping: Option<u64>,
    bytes: u64,
    /// Bytes a chunk buffer holds: a carried line and a chunk read.
    buf_bytes: usize,
}

/// What a chunk holds for the checks, in order.
struct Piece {
    /// An over-long line that ended in this chunk, with its length.
    skipped: Option<u64>,
    /// The complete lines, each ending with `\n`.
    lines: std::ops::Range<usize>,
}

impl Splitter {
    fn new(options: &VerifyOptions, chunk_bytes: usize, len_hint: usize) -> Splitter {
        Splitter {
            chunk_bytes,
            record_bytes_max: options.record_bytes_max,
            tail: Vec::new(),
            skipping: None,
            bytes: 0,
            buf_bytes: chunk_bytes.saturating_add(options.record_bytes_max.min(len_hint)),
        }
    }

    /// Fills `buf` with the carried line and the next chunk read; `None` at the end.
    fn next(
        &mut self,
        buf: &mut Vec<u8>,
        read: &mut impl FnMut(&mut [u8]) -> std::io::Result<usize>,
    ) -> std::io::Result<Option<Piece>> {
        let t = self.tail.len();
        let end = t + self.chunk_bytes;
        if buf.len() < end {
            // Zeroed once, then reused: a chunk's pages are touched only as it is read.
            buf.resize(end.max(self.buf_bytes), 0);
        }
        buf[..t].copy_from_slice(&self.tail);
        let mut filled = t;
        while filled < end {
            match read(&mut buf[filled..end]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let n = filled - t;
        if n == 0 {
            return Ok(None);
        }
        self.bytes += n as u64;
        self.tail.clear();
        let mut start = 0;
        let mut skipped = None;
        if let Some(s) = self.skipping {
            // Nothing is carried while a line is skipped.
            match memchr::memchr(b'\n', &buf[..filled]) {
                None => {
                    self.skipping = Some(s + n as u64);
                    return Ok(Some(Piece {
                        skipped: None,
                        lines: 0..0,
                    }));
                }
                Some(i) => {
                    skipped = Some(s + i as u64 + 1);
                    self.skipping = None;
                    start = i + 1;
                }
            }
        }
        let lines_end = match memchr::memrchr(b'\n', &buf[start..filled]) {
            Some(last) => start + last + 1,
            None => start,
        };
        let rest = &buf[lines_end..filled];
        if rest.len() > self.record_bytes_max {
            self.skipping = Some(rest.len() as u64);
        } else {
            self.tail.extend_from_slice(rest);
        }
        Ok(Some(Piece {
            skipped,
            lines: start..lines_end,
        }))
    }
}

/// Reads, summarises and steps on this thread: for logs of one chunk, and for
/// [`verify_bytes`] (called thousands of times by the tests, it spawns nothing).
fn verify_in_order(
    mut read: impl FnMut(&mut [u8]) -> std::io::Result<usize>,
    options: &VerifyOptions,
    chunk_bytes: usize,
    len_hint: usize,
) -> std::io::Result<VerifyReport> {
    let mut v = Verifier::new(*options);
    let mut split = Splitter::new(options, chunk_bytes, len_hint);
    let mut buf = Vec::new();
    while let Some(piece) = split.next(&mut buf, &mut read)? {
        let summaries = summarise(&buf[piece.lines], options.record_bytes_max);
        v.piece(piece.skipped, summaries);
    }
    Ok(v.finish(&split))
}

/// Reads on one thread, summarises whole chunks on `threads` workers, and steps
/// through their summaries in file order on this one. Each stage runs while the others
/// do: the workers never wait for a spawn, a read or the in-order steps. Buffers go
/// round (reader → worker → here → reader), so at most `2 × threads + 1` are ever
/// allocated, and none after the first round.
fn verify_pipelined(
    mut read: impl FnMut(&mut [u8]) -> std::io::Result<usize> + Send,
    options: &VerifyOptions,
    chunk_bytes: usize,
    len_hint: usize,
) -> std::io::Result<VerifyReport> {
    use std::sync::mpsc;
    type Done = (
        u64,
        Vec<u8>,
        Option<u64>,
        std::thread::Result<Vec<(u32, Summary)>>,
    );
    let workers = options.threads.max(1);
    let in_flight = 2 * workers + 1;
    let max = options.record_bytes_max;
    let (job_tx, job_rx) = mpsc::sync_channel::<(u64, Vec<u8>, Piece)>(in_flight);
    let job_rx = std::sync::Mutex::new(job_rx);
    let (done_tx, done_rx) = mpsc::channel::<Done>();
    let (back_tx, back_rx) = mpsc::channel::<Vec<u8>>();
    for _ in 0..in_flight {
        let _ = back_tx.send(Vec::new());
    }
    std::thread::scope(|s| {
        let mut split = Splitter::new(options, chunk_bytes, len_hint);
        let reader = s.spawn(move || -> std::io::Result<Splitter> {
            let mut n = 0u64;
            // Ends when every buffer is lost (this thread's consumer panicked), at the
            // end of the file, or on a read error; dropping `job_tx` stops the workers.
            while let Ok(mut buf) = back_rx.recv() {
                let Some(piece) = split.next(&mut buf, &mut read)? else {
                    break;
                };
                if job_tx.send((n, buf, piece)).is_err() {
                    break;
                }
                n += 1;
            }
            Ok(split)
        });
        for _ in 0..workers {
            let done_tx = done_tx.clone();
            let job_rx = &job_rx;
            s.spawn(move || {
                loop {
                    let job = job_rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok((n, buf, piece)) = job else { return };
                    // A panic is a bug: it is carried to the stepping thread, which
                    // raises it again, rather than leaving the pipeline waiting.
                    let summaries = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        summarise(&buf[piece.lines], max)
                    }));
                    if done_tx.send((n, buf, piece.skipped, summaries)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);
        let back_tx = back_tx;
        let mut v = Verifier::new(*options);
        let mut pending = std::collections::BTreeMap::new();
        let mut next = 0u64;
        for (n, buf, skipped, summaries) in done_rx {
            let summaries = summaries.unwrap_or_else(|p| std::panic::resume_unwind(p));
            pending.insert(n, (buf, skipped, summaries));
            while let Some((buf, skipped, summaries)) = pending.remove(&next) {
                v.piece(skipped, summaries);
                // The reader is gone once the file is read.
                let _ = back_tx.send(buf);
                next += 1;
            }
        }
        assert!(
            pending.is_empty(),
            "a chunk was summarised but never stepped"
        );
        let split = reader
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        Ok(v.finish(&split))
    })
}

enum Summary {
    Good { seq: u64, prev: Hash, hash: Hash },
    Bad { kind: ProblemKind, what: String },
}

struct Verifier {
    options: VerifyOptions,
    line: u64,
    offset: u64,
    expected_seq: u64,
    last_hash: Hash,
    after_bad: bool,
    last_good_seq: Option<u64>,
    report: VerifyReport,
}

impl Verifier {
    fn new(options: VerifyOptions) -> Verifier {
        Verifier {
            options,
            line: 1,
            offset: 0,
            expected_seq: 0,
            last_hash: Hash::ZERO,
            after_bad: false,
            last_good_seq: None,
            report: VerifyReport {
                records: 0,
                bytes: 0,
                head: None,
                problems: Vec::new(),
                problems_omitted: 0,
            },
        }
    }

    fn problem(&mut self, seq: Option<u64>, kind: ProblemKind, what: String) {
        if self.report.problems.len() < self.options.problems_max {
            self.report.problems.push(Problem {
                seq,
                line: self.line,
                offset: self.offset,
                kind,
                what,
            });
        } else {
            self.report.problems_omitted += 1;
        }
    }

    fn skipped_line(&mut self, len: u64) {
        let seq = self.expected_seq;
        self.problem(
            Some(seq),
            ProblemKind::TooLong,
            format!(
                "line of {len} bytes is longer than record_bytes_max ({} bytes)",
                self.options.record_bytes_max
            ),
        );
        self.next_line(len);
        self.expected_seq += 1;
        self.after_bad = true;
    }

    fn next_line(&mut self, len: u64) {
        self.report.records += 1;
        self.line += 1;
        self.offset += len;
    }

    /// Steps through a chunk: the over-long line that ended in it, then its lines.
    fn piece(&mut self, skipped: Option<u64>, summaries: Vec<(u32, Summary)>) {
        if let Some(len) = skipped {
            self.skipped_line(len);
        }
        for (len, summary) in summaries {
            self.step(u64::from(len), summary);
        }
    }

    fn step(&mut self, len: u64, summary: Summary) {
        match summary {
            Summary::Good { seq, prev, hash } => {
                if self.after_bad {
                    // The record before was unreadable: resynchronise on this one.
                    if let Some(g) = self.last_good_seq
                        && seq <= g
                    {
                        self.problem(
                            Some(seq),
                            ProblemKind::SeqGap,
                            format!("seq {seq} does not follow seq {g}"),
                        );
                    }
                } else {
                    if seq != self.expected_seq {
                        self.problem(
                            Some(seq),
                            ProblemKind::SeqGap,
                            format!("expected seq {}, found {seq}", self.expected_seq),
                        );
                    }
                    if prev != self.last_hash {
                        let what = if self.report.records == 0 {
                            "the first record's prev must be 64 zeros".to_string()
                        } else {
                            "prev does not match the hash of the record before".to_string()
                        };
                        self.problem(Some(seq), ProblemKind::BrokenChain, what);
                    }
                }
                self.expected_seq = seq.saturating_add(1);
                self.last_hash = hash;
                self.after_bad = false;
                self.last_good_seq = Some(seq);
                self.report.head = Some(Head { seq, hash });
            }
            Summary::Bad { kind, what } => {
                let seq = self.expected_seq;
                self.problem(Some(seq), kind, what);
                self.expected_seq += 1;
                self.after_bad = true;
            }
        }
        self.next_line(len);
    }

    fn finish(&mut self, split: &Splitter) -> VerifyReport {
        self.report.bytes = split.bytes;
        let rest = &split.tail;
        if let Some(skipped) = split.skipping {
            let seq = self.expected_seq;
            self.problem(Some(seq), ProblemKind::TooLong, format!("a final line of {skipped} bytes without a newline is longer than record_bytes_max"));
        } else if !rest.is_empty() {
            let seq = self.expected_seq;
            let what = if rest.iter().all(|&b| b == 0) {
                format!("torn tail: {} zero bytes after the last record", rest.len())
            } else {
                format!("torn tail: {} bytes without a newline", rest.len())
            };
            self.problem(Some(seq), ProblemKind::TornTail, what);
        }
        if self.report.bytes == 0 {
            self.problem(None, ProblemKind::Empty, "empty log: no records".into());
        }
        std::mem::replace(&mut self.report, Verifier::new(self.options).report)
    }
}

fn summarise(region: &[u8], record_bytes_max: usize) -> Vec<(u32, Summary)> {
    let mut lines = Vec::with_capacity(region.len() / 256 + 1);
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', region) {
        lines.push(&region[start..=nl]);
        start = nl + 1;
    }
    // Every record hash first, many at once in SIMD lanes; then the checks.
    let hashed: Vec<&[u8]> = lines
        .iter()
        .map(|l| {
            let body = &l[..l.len() - 1];
            match record::hashed_part(body) {
                Some(h) if l.len() <= record_bytes_max => h,
                _ => &[],
            }
        })
        .collect();
    let mut hashes = vec![Hash::ZERO; hashed.len()];
    crate::lanes::record_hashes(&hashed, &mut hashes);
    let mut out = Vec::with_capacity(lines.len());
    for (line, computed) in lines.into_iter().zip(hashes) {
        let body = &line[..line.len() - 1];
        let summary = if line.len() > record_bytes_max {
            Summary::Bad {
                kind: ProblemKind::TooLong,
                what: format!(
                    "line of {} bytes is longer than record_bytes_max ({record_bytes_max} bytes)",
                    line.len()
                ),
            }
        } else {
            match record::check_line_hashed(body, Some(computed)) {
                Ok(f) => Summary::Good {
                    seq: f.seq,
                    prev: f.prev,
                    hash: f.hash,
                },
                Err(bad) => Summary::Bad {
                    kind: ProblemKind::BadRecord,
                    what: bad.what,
                },
            }
        };
        out.push((u32::try_from(line.len()).unwrap_or(u32::MAX), summary));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{LogWriter, Options, log_path};

    /// A log of `records` records with every kind of damage verify reports: a flipped
    /// byte, a broken line, an over-long line, a missing record and a torn tail.
    fn damaged_log(dir: &Path, records: usize) -> Vec<u8> {
        let mut log = LogWriter::create(dir, Options::default()).unwrap();
        for i in 0..records {
            let pad = "x".repeat(i % 97);
            log.append(&serde_json::json!({"type": "note", "i": i, "pad": pad}))
                .unwrap();
        }
        drop(log);
        let bytes = std::fs::read(log_path(dir)).unwrap();
        let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
        let mut out = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            match i {
                // A record gone: a seq gap and a broken chain.
                30 => {}
                // A flipped byte in the event.
                50 => {
                    let mut l = line.to_vec();
                    l[100] ^= 1;
                    out.extend_from_slice(&l);
                }
                // A line over the limit of the test (500 bytes), spanning small chunks.
                70 => {
                    out.extend_from_slice(&[b'y'; 1300]);
                    out.push(b'\n');
                }
                // Not a record at all.
                90 => out.extend_from_slice(b"garbage\n"),
                _ => out.extend_from_slice(line),
            }
        }
        out.extend_from_slice(b"{\"prev\":\"torn");
        out
    }

    // Regression guard for the pipeline: reading, summarising whole chunks on workers
    // and stepping in order must report exactly what one thread reading the same bytes
    // reports, whatever the chunk size (lines and over-long lines cut anywhere) and
    // however many workers there are.
    #[test]
    fn pipelined_verify_reports_exactly_what_in_order_verify_reports() {
        let tmp = tempfile::tempdir().unwrap();
        let bytes = damaged_log(tmp.path(), 300);
        let path = tmp.path().join("damaged.jsonl");
        std::fs::write(&path, &bytes).unwrap();
        let base = VerifyOptions {
            record_bytes_max: 500,
            ..VerifyOptions::default()
        };
        let expected = verify_bytes(&bytes, &base);
        let kinds: Vec<ProblemKind> = expected.problems.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            [
                ProblemKind::SeqGap,
                ProblemKind::BrokenChain,
                ProblemKind::BadRecord,
                ProblemKind::TooLong,
                ProblemKind::BadRecord,
                ProblemKind::TornTail,
            ],
            "{:?}",
            expected.problems
        );
        assert_eq!(expected.bytes, bytes.len() as u64);
        for chunk_bytes in [7, 64, 499, 500, 501, 4096] {
            for threads in [1, 2, 3, 8] {
                let options = VerifyOptions {
                    chunk_bytes,
                    threads,
                    ..base
                };
                let got = verify_path(&path, &options).unwrap();
                assert_eq!(
                    got, expected,
                    "chunks of {chunk_bytes} bytes, {threads} threads"
                );
                assert_eq!(
                    verify_bytes(&bytes, &options),
                    expected,
                    "in memory, chunks of {chunk_bytes} bytes"
                );
            }
        }
    }

    #[test]
    fn an_over_long_final_line_spanning_chunks_is_too_long_not_torn() {
        let tmp = tempfile::tempdir().unwrap();
        let mut bytes = damaged_log(tmp.path(), 20);
        bytes.truncate(bytes.len() - 13);
        bytes.extend_from_slice(&[b'z'; 700]);
        let path = tmp.path().join("tail.jsonl");
        std::fs::write(&path, &bytes).unwrap();
        let options = VerifyOptions {
            record_bytes_max: 500,
            chunk_bytes: 64,
            threads: 2,
            ..VerifyOptions::default()
        };
        let report = verify_path(&path, &options).unwrap();
        let last = report.problems.last().unwrap();
        assert_eq!(
            (last.kind, last.what.as_str()),
            (
                ProblemKind::TooLong,
                "a final line of 700 bytes without a newline is longer than record_bytes_max"
            )
        );
        assert_eq!(report, verify_bytes(&bytes, &options));
    }
}
