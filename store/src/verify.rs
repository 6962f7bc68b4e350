//! Integrity verification of a log: every record's own hash, the chain, seq continuity
//! and that every event is well-formed JSON. Every problem is reported, not the first,
//! each with its seq, line and byte offset. Nothing is ever written.
//!
//! Hashing and parsing a line need nothing from other lines, so each chunk of the file
//! is split between threads that summarise their lines; only the chain and seq checks,
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
    let mut v = Verifier::new(*options);
    let mut buf: Vec<u8> = Vec::with_capacity(options.chunk_bytes + options.record_bytes_max);
    // Small logs get small buffers; big ones a full chunk.
    let file_len = file.metadata().at(path)?.len();
    let chunk_bytes = options
        .chunk_bytes
        .max(1)
        .min(usize::try_from(file_len).unwrap_or(usize::MAX).max(1));
    // A reader thread keeps the next chunk coming while the workers hash this one.
    // Buffers go back and forth, so reading never allocates or zeroes after the first two.
    let (tx, rx) = std::sync::mpsc::sync_channel::<std::io::Result<(Vec<u8>, usize)>>(2);
    let (back_tx, back_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let report = std::thread::scope(|s| -> Result<VerifyReport> {
        s.spawn(move || {
            loop {
                let mut chunk = back_rx
                    .try_recv()
                    .unwrap_or_else(|_| vec![0u8; chunk_bytes]);
                let mut filled = 0;
                let result = loop {
                    match file.read(&mut chunk[filled..]) {
                        Ok(0) => break Ok(()),
                        Ok(n) => {
                            filled += n;
                            if filled == chunk.len() {
                                break Ok(());
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => break Err(e),
                    }
                };
                let end = filled == 0 || result.is_err();
                if tx.send(result.map(|()| (chunk, filled))).is_err() || end {
                    return;
                }
            }
        });
        for chunk in rx {
            let (chunk, filled) = chunk.at(path)?;
            if filled == 0 {
                break;
            }
            v.push(&mut buf, &chunk[..filled]);
            let _ = back_tx.send(chunk);
        }
        Ok(v.finish(&buf))
    })?;
    if report.head.is_none() && report.bytes > 0 {
        // Not one good record: tell "not a log at all" apart from a damaged log.
        crate::log::check_is_log_file(path)?;
    }
    Ok(report)
}

/// Verifies a log held in memory.
pub fn verify_bytes(bytes: &[u8], options: &VerifyOptions) -> VerifyReport {
    let mut v = Verifier::new(*options);
    let mut buf = Vec::new();
    for chunk in bytes.chunks(options.chunk_bytes.max(1)) {
        v.push(&mut buf, chunk);
    }
    v.finish(&buf)
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
    /// Bytes of an over-long line being skipped.
    skipping: Option<u64>,
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
            skipping: None,
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

    /// Adds `data` to the carried bytes in `buf` and checks every complete line.
    fn push(&mut self, carry: &mut Vec<u8>, mut data: &[u8]) {
        self.report.bytes += data.len() as u64;
        if let Some(skipped) = self.skipping {
            match data.iter().position(|&b| b == b'\n') {
                None => {
                    self.skipping = Some(skipped + data.len() as u64);
                    return;
                }
                Some(i) => {
                    self.skipped_line(skipped + i as u64 + 1);
                    data = &data[i + 1..];
                }
            }
        }
        // Lines are checked where they lie in `data`; only a line cut by the chunk
        // boundary is copied, into `carry`.
        let max = self.options.record_bytes_max;
        if !carry.is_empty() {
            match memchr::memchr(b'\n', data) {
                None => {
                    carry.extend_from_slice(data);
                    if carry.len() > max {
                        self.skipping = Some(carry.len() as u64);
                        carry.clear();
                    }
                    return;
                }
                Some(i) => {
                    carry.extend_from_slice(&data[..=i]);
                    let line = std::mem::take(carry);
                    self.lines(&line);
                    data = &data[i + 1..];
                }
            }
        }
        let rest = match memchr::memrchr(b'\n', data) {
            Some(last) => {
                self.lines(&data[..=last]);
                &data[last + 1..]
            }
            None => data,
        };
        if rest.len() > max {
            self.skipping = Some(rest.len() as u64);
        } else {
            carry.extend_from_slice(rest);
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
        self.skipping = None;
    }

    fn next_line(&mut self, len: u64) {
        self.report.records += 1;
        self.line += 1;
        self.offset += len;
    }

    /// Checks a region of complete lines, each ending with `\n`.
    fn lines(&mut self, region: &[u8]) {
        let threads = if region.len() < 256 * 1024 {
            1
        } else {
            self.options.threads.max(1)
        };
        let mut parts = Vec::with_capacity(threads);
        let mut start = 0;
        for t in 1..=threads {
            let mut end = region.len() * t / threads;
            if t < threads {
                end = match memchr::memchr(b'\n', &region[end.max(start)..]) {
                    Some(i) => end.max(start) + i + 1,
                    None => region.len(),
                };
            }
            let end = end.max(start);
            parts.push(&region[start..end]);
            start = end;
        }
        let max = self.options.record_bytes_max;
        let summaries: Vec<Vec<(u32, Summary)>> = if threads == 1 {
            vec![summarise(region, max)]
        } else {
            // This thread takes the first part itself.
            std::thread::scope(|s| {
                let handles: Vec<_> = parts[1..]
                    .iter()
                    .map(|p| s.spawn(move || summarise(p, max)))
                    .collect();
                let mut all = vec![summarise(parts[0], max)];
                all.extend(
                    handles
                        .into_iter()
                        .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))),
                );
                all
            })
        };
        for (len, summary) in summaries.into_iter().flatten() {
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

    fn finish(&mut self, rest: &[u8]) -> VerifyReport {
        if let Some(skipped) = self.skipping {
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
