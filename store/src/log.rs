//! The session log writer and the recovery that runs when a log is opened.
//!
//! Opening reads from the end: it skips trailing zero bytes, finds the last complete
//! line, checks its own hash and that it chains to the line before, and treats what
//! follows it as a torn tail. The cost does not depend on the size of the log. A torn
//! tail is only ever bytes after the last newline (a last line cut short, or zero
//! bytes): it is moved to `quarantine/` and cut off. A complete line, newline and all,
//! that fails its hash, its JSON or the chain was written whole and changed since: that
//! is corruption, wherever it is, and is refused.
//!
//! A new log is born whole: [`LogWriter::create`] makes it in a folder beside its own,
//! under a name every reader ignores ([`is_unborn`]), and renames that folder into
//! place once the first record is written (and synced, unless the durability is
//! `none`). A log folder is never seen empty, whatever moment a crash picks.

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
    /// The folder the log lives in until its first record is written and it is
    /// renamed to its own (see [`LogWriter::create`]); `None` once born.
    unborn: Option<PathBuf>,
    /// Born with durability `none`: the folder's rename is not known to be durable
    /// until [`LogWriter::flush_durable`] syncs the folders.
    birth_unsynced: bool,
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
    /// Creates a new log in folder `dir`, born whole: until its first record the log
    /// lives in a folder beside `dir` named so that every reader ignores it
    /// ([`is_unborn`]); the first [`append`](Self::append) writes the record, syncs it
    /// (unless the durability is `none`) and renames that folder to `dir`. Dropped
    /// before its first record, the writer removes the folder: `dir` never appears
    /// without a record. [`LogWriter::path`] names the log where it will be.
    ///
    /// `dir` must not exist, or be an empty folder (replaced at birth); a folder that
    /// holds a log is refused.
    pub fn create(dir: &Path, options: Options) -> Result<LogWriter> {
        let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
            return Err(Error::Format {
                path: dir.to_path_buf(),
                what: "a log needs a folder of its own, inside another".into(),
            });
        };
        crate::private::create_dir_all(parent).at(parent)?;
        check_can_be_born_at(dir)?;
        let unborn = parent.join(unborn_name(name));
        crate::private::create_dir(&unborn).at(&unborn)?;
        let made = (|| {
            let lock = WriterLock::acquire(&unborn.join(LOCK_FILE))?;
            // The mark names the folder the log will have; under the lock, before
            // anything is written (see `written`), and again at birth.
            crate::written::mark(dir, options.durability != Durability::None)?;
            let unborn_log = log_path(&unborn);
            let file = crate::private::options()
                .append(true)
                .read(true)
                .create_new(true)
                .open(&unborn_log)
                .at(&unborn_log)?;
            Ok((lock, file))
        })();
        let (lock, file) = match made {
            Ok(made) => made,
            Err(e) => {
                // Nothing of it can be wanted: it was never born.
                let _ = fs::remove_dir_all(&unborn);
                return Err(e);
            }
        };
        let mut writer = LogWriter::new(log_path(dir), file, lock, options, None, 0, 0);
        writer.unborn = Some(unborn);
        Ok(writer)
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
            unborn: None,
            birth_unsynced: false,
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
        // The first record is never held: the log is born with it.
        if !self.holding || self.line_buf.len() > HELD_BYTES_MAX || self.unborn.is_some() {
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
        if self.unborn.is_some() {
            self.be_born()?;
        }
        if self.options.durability == Durability::Always && self.committer.synced() < self.len {
            self.sync_now()?;
        }
        Ok(appended)
    }

    /// Renames the folder of a log whose first record was just written into place:
    /// the record synced first (and the folder, for its entries), the parent folder
    /// after (for the new name), unless the durability is `none`. A failure stops the
    /// writer, which then removes the folder when dropped: the log was never born.
    fn be_born(&mut self) -> Result<()> {
        let Some(unborn) = self.unborn.clone() else {
            return Ok(());
        };
        debug_assert_eq!(self.next_seq, 1, "a log is born with its first record");
        let durable = self.options.durability != Durability::None;
        let dir = self
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let born = (|| {
            if durable {
                self.sync_now()?;
                sync_dir(&unborn)?;
            }
            fs::rename(&unborn, &dir).map_err(|e| match e.raw_os_error() {
                Some(libc::ENOTEMPTY | libc::EEXIST) if log_path(&dir).exists() => {
                    Error::CreatedElsewhere {
                        path: log_path(&dir),
                    }
                }
                Some(libc::ENOTEMPTY | libc::EEXIST) => Error::Format {
                    path: dir.clone(),
                    what: "files appeared in the log's folder while the log was being created"
                        .into(),
                },
                _ => Error::Io {
                    path: dir.clone(),
                    source: e,
                },
            })?;
            // Renamed: the folder is the log's now, whatever follows.
            self.unborn = None;
            self.birth_unsynced = !durable;
            if durable && let Some(parent) = dir.parent() {
                sync_dir(parent)?;
            }
            // Again after the rename: a reader that cleared the mark while the log
            // was not in place yet found nothing to keep it for.
            crate::written::mark(&dir, durable)
        })();
        if let Err(e) = &born
            && self.failed.is_none()
        {
            self.failed = Some(format!("the log's birth failed: {e}"));
        }
        born
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
        self.sync_now()?;
        if self.birth_unsynced {
            // Born with durability `none`: its folder and its name are made durable too.
            let dir = self
                .path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            sync_dir(&dir)?;
            if let Some(parent) = dir.parent() {
                sync_dir(parent)?;
            }
            self.birth_unsynced = false;
        }
        Ok(())
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
    /// What is held is written (the committer, dropped next, then syncs it). A log
    /// never born is removed with its folder.
    fn drop(&mut self) {
        if let Some(unborn) = self.unborn.take() {
            // A folder that cannot be removed now is removed by the next
            // `remove_unborn` of its parent.
            let _ = fs::remove_dir_all(&unborn);
            return;
        }
        if self.failed.is_none() {
            let _ = self.write_held();
        }
    }
}

/// The start of the name of a log's folder before its birth (see [`LogWriter::create`]):
/// `.unborn.<pid>.<nanos>.<name>`.
pub const UNBORN_PREFIX: &str = ".unborn.";

/// True when `name` is the name of a log folder not born yet (see
/// [`LogWriter::create`]): every reader that lists log folders skips it.
pub fn is_unborn(name: &std::ffi::OsStr) -> bool {
    use std::os::unix::ffi::OsStrExt;
    name.as_bytes().starts_with(UNBORN_PREFIX.as_bytes())
}

/// The name of the folder a log named `name` is born in, by this process (see
/// [`LogWriter::create`]): a folder made under it and renamed to `name` once whole is
/// never seen half-made, and [`remove_unborn`] cleans it up after a crash.
pub fn unborn_name(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut out = std::ffi::OsString::from(format!(
        "{UNBORN_PREFIX}{}.{}.",
        std::process::id(),
        jiff::Timestamp::now().as_nanosecond()
    ));
    out.push(name);
    out
}

/// The process that made the unborn folder `name`.
fn unborn_pid(name: &std::ffi::OsStr) -> Option<u32> {
    use std::os::unix::ffi::OsStrExt;
    let rest = name.as_bytes().strip_prefix(UNBORN_PREFIX.as_bytes())?;
    let digits = rest.split(|&b| b == b'.').next()?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Refuses to create a log in `dir` when it holds anything (a log above all).
fn check_can_be_born_at(dir: &Path) -> Result<()> {
    let mut entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).at(dir),
    };
    if entries.next().is_none() {
        return Ok(());
    }
    let path = log_path(dir);
    Err(Error::Format {
        what: if path.exists() {
            "a log already exists here; open it instead of creating it".into()
        } else {
            "not an empty folder: a new log is made in a new or empty folder".into()
        },
        path,
    })
}

/// Removes the folders of logs that were never born in folder `parent` (a session's
/// `sessions/`): left by a process killed before its log's first record. Only those
/// whose process is gone and whose writer lock no process holds (see [`writer_pid`]);
/// none when that cannot be told (no `/proc`). Returns the folders removed.
///
/// [`writer_pid`]: crate::writer_pid
pub fn remove_unborn(parent: &Path) -> Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(parent) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).at(parent),
    };
    let mut removed = Vec::new();
    if !Path::new("/proc/self").exists() {
        return Ok(removed);
    }
    let mut locks = None;
    for e in entries {
        let e = e.at(parent)?;
        let name = e.file_name();
        if !is_unborn(&name) {
            continue;
        }
        // Its maker may be between making the folder and locking it: a live maker's
        // folder is left alone (a pid used again only delays the cleaning).
        let alive = unborn_pid(&name).is_none_or(|pid| {
            pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists()
        });
        let path = e.path();
        if alive
            || locks
                .get_or_insert_with(crate::written::Locks::read)
                .may_be_written(&path)
        {
            continue;
        }
        match fs::remove_dir_all(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).at(&path),
        }
    }
    Ok(removed)
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

/// The largest block a log is read backwards in.
const BACK_BLOCK: u64 = 64 * 1024;

/// The first block a log is read backwards in: a record is a few hundred bytes, so what
/// a reader looks for at a log's end (its last two records, or the few after a
/// snapshot) is nearly always in it. Each next block is twice the last, up to
/// [`BACK_BLOCK`]: a hook's process reads its log's end a few times, and 64 KiB each
/// time was most of the bytes it copied.
const FIRST_BACK_BLOCK: u64 = 4 * 1024;

/// The windows `[start, end)` that read the first `end` bytes of a file backwards, the
/// first [`FIRST_BACK_BLOCK`] bytes long and each next twice the last, up to
/// [`BACK_BLOCK`].
pub(crate) fn back_windows(end: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut end = end;
    let mut size = FIRST_BACK_BLOCK;
    std::iter::from_fn(move || {
        (end > 0).then(|| {
            let window = (end.saturating_sub(size), end);
            end = window.0;
            size = (size * 2).min(BACK_BLOCK);
            window
        })
    })
}

/// Finds the last good record of the first `len` bytes of `file` by reading backwards.
pub(crate) fn scan_tail(
    file: &File,
    path: &Path,
    len: u64,
    record_bytes_max: usize,
) -> Result<Tail> {
    // Zero-filled space after a crash: skip it first.
    let mut end = 0;
    let mut buf = Vec::new();
    for (start, window_end) in back_windows(len) {
        buf.resize((window_end - start) as usize, 0);
        file.read_exact_at(&mut buf, start).at(path)?;
        if let Some(i) = buf.iter().rposition(|&b| b != 0) {
            end = start + i as u64 + 1;
            break;
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
    // Only bytes after the last newline can be torn: one `write` of a line that a
    // crash cut short. A complete line that fails is corruption, wherever it is.
    let cut = if last[0] == b'\n' {
        end
    } else {
        line_ending_at(file, path, end, max)?.0
    };
    if cut == 0 {
        return Ok(Tail {
            good_len: 0,
            head: None,
        });
    }
    let (s1, l1) = line_ending_at(file, path, cut - 1, max)?;
    let f1 = match record::check_line(&l1) {
        Ok(f1) => f1,
        Err(bad) => return Err(corruption(file, path, s1, bad.seq, &bad.what)),
    };
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
    Ok(Tail {
        good_len: cut,
        head: Some(Head {
            seq: f1.seq,
            hash: f1.hash,
        }),
    })
}

/// The line whose bytes end at `end` (exclusive, newline not included): its start and
/// its bytes. Fails when no line start is found within `max` bytes.
fn line_ending_at(file: &File, path: &Path, end: u64, max: u64) -> Result<(u64, Vec<u8>)> {
    let mut bytes: Vec<u8> = Vec::new();
    for (start, window_end) in back_windows(end) {
        let mut block = vec![0u8; (window_end - start) as usize];
        file.read_exact_at(&mut block, start).at(path)?;
        if let Some(i) = memchr::memrchr(b'\n', &block) {
            let line_start = start + i as u64 + 1;
            block.drain(..=i);
            block.extend_from_slice(&bytes);
            return Ok((line_start, block));
        }
        block.extend_from_slice(&bytes);
        bytes = block;
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
    Ok((0, bytes))
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

    /// The names in folder `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Guards against a session folder seen empty (a crash while a session was being
    /// created left a log with no record, listed as interrupted for ever): the folder
    /// appears only with its first record, and a writer dropped before leaves nothing.
    #[test]
    fn a_log_folder_appears_only_with_its_first_record() {
        for durability in [Durability::Always, Durability::Batch, Durability::None] {
            let tmp = tempfile::tempdir().unwrap();
            let sessions = tmp.path().join("sessions");
            let dir = sessions.join("s1");
            let options = Options {
                durability,
                ..Options::default()
            };
            let mut w = LogWriter::create(&dir, options).unwrap();
            assert!(!dir.exists(), "{durability:?}");
            assert_eq!(w.path(), log_path(&dir));
            let unborn = names(&sessions);
            assert_eq!(unborn.len(), 1);
            assert!(is_unborn(std::ffi::OsStr::new(&unborn[0])), "{unborn:?}");
            assert!(unborn[0].ends_with(".s1"), "{unborn:?}");
            assert_eq!(
                unborn_pid(std::ffi::OsStr::new(&unborn[0])),
                Some(std::process::id())
            );
            // Held or not, the first record is written, and the log born with it.
            w.hold();
            note(&mut w, 0);
            assert_eq!(names(&sessions), ["s1"], "{durability:?}");
            assert_eq!(fs::metadata(log_path(&dir)).unwrap().len(), w.len_bytes());
            if durability != Durability::None {
                assert_eq!(w.durable_len(), w.len_bytes(), "{durability:?}");
            }
            note(&mut w, 0);
            drop(w);
            let (w, recovery) = LogWriter::open(&dir, options).unwrap();
            assert_eq!((w.next_seq(), recovery.quarantined_bytes), (2, 0));
            drop(w);

            // Dropped before its first record: nothing is left.
            let w = LogWriter::create(&sessions.join("s2"), options).unwrap();
            assert_eq!(names(&sessions).len(), 2);
            drop(w);
            assert_eq!(names(&sessions), ["s1"], "{durability:?}");
        }
    }

    #[test]
    fn create_takes_a_new_or_empty_folder_and_refuses_one_holding_anything() {
        let tmp = tempfile::tempdir().unwrap();
        let empty = tmp.path().join("empty");
        fs::create_dir(&empty).unwrap();
        let mut w = LogWriter::create(&empty, durability_none()).unwrap();
        note(&mut w, 0);
        drop(w);
        assert_eq!(names(&empty), [LOG_FILE, LOCK_FILE]);
        let err = LogWriter::create(&empty, durability_none()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: a log already exists here; open it instead of creating it",
                log_path(&empty).display()
            )
        );
        let busy = tmp.path().join("busy");
        fs::create_dir(&busy).unwrap();
        fs::write(busy.join("notes"), "x").unwrap();
        assert!(matches!(
            LogWriter::create(&busy, durability_none()),
            Err(Error::Format { what, .. }) if what.starts_with("not an empty folder")
        ));
        // Files that appear in the folder before the birth: the log is not born.
        let late = tmp.path().join("late");
        let mut w = LogWriter::create(&late, durability_none()).unwrap();
        fs::create_dir(&late).unwrap();
        fs::write(late.join("notes"), "x").unwrap();
        assert!(matches!(
            w.append(&serde_json::json!({"type": "note"})),
            Err(Error::Format { what, .. }) if what.starts_with("files appeared")
        ));
        assert!(matches!(w.sync(), Err(Error::Poisoned { .. })));
        drop(w);
        assert_eq!(names(tmp.path()), ["busy", "empty", "late"]);
        assert_eq!(names(&late), ["notes"]);
        // Two writers create one log of a fixed name at once: the first born wins, the
        // other is told to open it, and nothing of it is left.
        let fixed = tmp.path().join("fixed");
        let mut first = LogWriter::create(&fixed, durability_none()).unwrap();
        let mut second = LogWriter::create(&fixed, durability_none()).unwrap();
        note(&mut first, 0);
        assert!(matches!(
            second.append(&serde_json::json!({"type": "note"})),
            Err(Error::CreatedElsewhere { path }) if path == log_path(&fixed)
        ));
        drop(second);
        drop(first);
        assert_eq!(names(tmp.path()), ["busy", "empty", "fixed", "late"]);
        let (w, _) = LogWriter::open(&fixed, durability_none()).unwrap();
        assert_eq!(w.next_seq(), 1);
    }

    /// A process that is gone: a child that ended and was reaped.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn remove_unborn_removes_only_folders_no_live_process_may_still_make() {
        let tmp = tempfile::tempdir().unwrap();
        let sessions = tmp.path().join("sessions");
        let born = sessions.join("s-born");
        let mut w = LogWriter::create(&born, durability_none()).unwrap();
        note(&mut w, 0);
        drop(w);
        let dead = dead_pid();
        let unborn = |pid: u32, name: &str| {
            let d = sessions.join(format!("{UNBORN_PREFIX}{pid}.1.{name}"));
            fs::create_dir(&d).unwrap();
            fs::write(d.join(LOCK_FILE), pid.to_string()).unwrap();
            fs::write(log_path(&d), "").unwrap();
            d
        };
        // Left by a crash: removed.
        let left = unborn(dead, "s-left");
        // Its maker is gone, but a process (a child it forked, say) holds its lock.
        let locked = unborn(dead, "s-locked");
        let lock = WriterLock::acquire(&locked.join(LOCK_FILE)).unwrap();
        // A live process's: it may be about to lock it.
        let live = unborn(std::process::id(), "s-live");
        // A writer of this process, not born yet.
        let w = LogWriter::create(&sessions.join("s-new"), durability_none()).unwrap();
        let removed = remove_unborn(&sessions).unwrap();
        assert_eq!(removed.as_slice(), std::slice::from_ref(&left));
        assert!(!left.exists() && locked.exists() && live.exists() && born.exists());
        assert_eq!(names(&sessions).len(), 4);
        drop(lock);
        assert_eq!(remove_unborn(&sessions).unwrap(), [locked]);
        drop(w);
        assert_eq!(remove_unborn(&sessions).unwrap(), Vec::<PathBuf>::new());
        assert_eq!(
            remove_unborn(&tmp.path().join("none")).unwrap(),
            Vec::<PathBuf>::new()
        );
        assert!(live.exists());
    }

    /// `tail` written after three good records, opened for append: `Ok(bytes
    /// quarantined)` when it is a torn tail, `Err((offset, seq, what))` of the
    /// corruption refused, the log then left byte for byte as it was.
    fn check_tail(
        tail: impl Fn(&[u8]) -> Vec<u8>,
        expected: Result<u64, (u64, Option<u64>, &str)>,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let mut w = LogWriter::create(&dir, durability_none()).unwrap();
        for i in 0..3 {
            w.append_at("2026-11-29T12:00:00.000000Z", &serde_json::json!({"i": i}))
                .unwrap();
        }
        let good = w.len_bytes();
        drop(w);
        let bytes = fs::read(log_path(&dir)).unwrap();
        let mut damaged = bytes.clone();
        let last_start = bytes[..bytes.len() - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        damaged.truncate(last_start);
        damaged.extend(tail(&bytes[last_start..]));
        fs::write(log_path(&dir), &damaged).unwrap();
        let got = LogWriter::open(&dir, durability_none()).map(|(_, r)| r.quarantined_bytes);
        match (got, expected) {
            (Ok(q), Ok(want)) => {
                assert_eq!(q, want);
                let len = fs::metadata(log_path(&dir)).unwrap().len();
                assert!(len == good || len == last_start as u64, "{len}");
            }
            (
                Err(Error::Corruption {
                    offset, seq, what, ..
                }),
                Err(want),
            ) => {
                assert_eq!((offset, seq, what.as_str()), want);
                assert_eq!(fs::read(log_path(&dir)).unwrap(), damaged, "left as it was");
                assert!(!dir.join(QUARANTINE_DIR).exists());
                // A reader's view of the end says the same.
                assert!(matches!(
                    crate::LogReader::open(&dir).unwrap().tail(),
                    Err(Error::Corruption { offset: o, .. }) if o == offset
                ));
            }
            (got, want) => panic!("got {got:?}, expected {want:?}"),
        }
    }

    /// The windows a log is read backwards in cover its bytes once each, end first,
    /// growing from 4 KiB to 64 KiB.
    #[test]
    fn a_log_is_read_backwards_in_growing_windows() {
        for end in [0, 1, 4095, 4096, 4097, 12_288, 12_289, 200_000, 1 << 20] {
            let windows: Vec<(u64, u64)> = back_windows(end).collect();
            let mut at = end;
            for (i, &(start, window_end)) in windows.iter().enumerate() {
                assert_eq!(window_end, at, "{end}: {windows:?}");
                let size = (FIRST_BACK_BLOCK << i.min(4)).min(BACK_BLOCK);
                assert!(
                    window_end - start == size || start == 0,
                    "{end}: {windows:?}"
                );
                assert!(start < window_end);
                at = start;
            }
            assert_eq!(at, 0, "{end}: {windows:?}");
        }
        assert_eq!(back_windows(0).count(), 0);
    }

    /// Records longer than the first window, followed by zeros longer than several
    /// windows (space a crash left): the log opens at its last good record, the zeros
    /// moved aside, and the record of a snapshot is found counted back from the end.
    #[test]
    fn records_and_zeros_longer_than_a_window_are_read_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let mut w = LogWriter::create(&dir, durability_none()).unwrap();
        for i in 0..6 {
            let text = "x".repeat(3000 * (i + 1));
            w.append_at(
                "2026-11-29T12:00:00.000000Z",
                &serde_json::json!({"i": i, "text": text}),
            )
            .unwrap();
        }
        let good = w.len_bytes();
        let head = w.head();
        drop(w);
        let mut bytes = fs::read(log_path(&dir)).unwrap();
        bytes.extend(std::iter::repeat_n(0u8, 150_000));
        fs::write(log_path(&dir), &bytes).unwrap();
        let (w, recovery) = LogWriter::open(&dir, durability_none()).unwrap();
        assert_eq!(recovery.quarantined_bytes, 150_000);
        assert_eq!(w.len_bytes(), good);
        assert_eq!(w.head(), head);
        drop(w);
        let reader = crate::LogReader::open(&dir).unwrap();
        for seq in 0..6 {
            let r = reader.records_from(seq).unwrap().next().unwrap().unwrap();
            assert_eq!(r.seq, seq);
        }
    }

    /// Guards against a complete last record that fails being cut off as a torn tail
    /// (moved aside without a word): only bytes after the last newline are torn.
    #[test]
    fn only_bytes_after_the_last_newline_are_a_torn_tail() {
        let flip_hash = |last: &[u8]| {
            let mut l = last.to_vec();
            let i = l.len() - 4;
            l[i] = if l[i] == b'0' { b'1' } else { b'0' };
            l
        };
        // Seq 2 starts after two lines; its offset is what the error names.
        let tmp = tempfile::tempdir().unwrap();
        let probe = tmp.path().join("p");
        let mut w = LogWriter::create(&probe, durability_none()).unwrap();
        let mut offsets = Vec::new();
        for i in 0..3 {
            offsets.push(
                w.append_at("2026-11-29T12:00:00.000000Z", &serde_json::json!({"i": i}))
                    .unwrap()
                    .offset,
            );
        }
        let last_line_len = w.len_bytes() - offsets[2];
        let at2 = offsets[2];
        drop(w);
        // Torn: without its newline, cut short, zero-filled after, or nothing but zeros.
        check_tail(|l| l[..l.len() - 1].to_vec(), Ok(last_line_len - 1));
        check_tail(|l| l[..10].to_vec(), Ok(10));
        check_tail(|l| [&l[..10], &[0u8; 300][..]].concat(), Ok(310));
        check_tail(|l| [l, &[0u8; 300][..]].concat(), Ok(300));
        check_tail(|l| [l, b"{\"prev\":\"01"].concat(), Ok(11));
        check_tail(
            |l| [&flip_hash(l)[..l.len() - 1], &[0u8; 9][..]].concat(),
            Ok(last_line_len + 8),
        );
        // Corrupt: a complete line, newline and all, that fails its hash or its layout.
        check_tail(
            flip_hash,
            Err((at2, Some(2), "record hash does not match its content")),
        );
        check_tail(
            |l| {
                let mut l = flip_hash(l);
                l.extend_from_slice(&[0u8; 50]);
                l
            },
            Err((at2, Some(2), "record hash does not match its content")),
        );
        check_tail(
            |_| b"garbage\n".to_vec(),
            Err((at2, None, "not a log record (expected {\"prev\":\"…)")),
        );
        check_tail(
            |l| {
                let mut l = l.to_vec();
                l[30] = 0;
                l
            },
            Err((at2, Some(2), "record hash does not match its content")),
        );
        // Well-formed and hashed, but not chained to the record before.
        check_tail(
            |l| {
                let mut line = Vec::new();
                let event = br#"{"i":2}"#;
                record::encode(
                    &Hash([7; 32]),
                    2,
                    "2026-11-29T12:00:00.000000Z",
                    event,
                    &mut line,
                );
                assert_eq!(line.len(), l.len());
                line
            },
            Err((
                at2,
                Some(2),
                "the last record does not chain to the one before it",
            )),
        );
        // Well-formed and hashed, but its event is not JSON.
        check_tail(
            |_| {
                let mut line = Vec::new();
                record::encode(
                    &Hash::ZERO,
                    2,
                    "2026-11-29T12:00:00.000000Z",
                    b"{nope",
                    &mut line,
                );
                line
            },
            Err((at2, Some(2), "event is not a well-formed JSON object")),
        );
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
        note(&mut w, 0);
        let born = w.len_bytes();
        w.hold();
        note(&mut w, 0);
        note(&mut w, 0);
        assert_eq!(file_len(&w), born);
        let len = w.len_bytes();
        drop(w);
        assert_eq!(std::fs::metadata(log_path(&session)).unwrap().len(), len);
        let (w, recovery) = LogWriter::open(&session, Options::default()).unwrap();
        assert_eq!(recovery.quarantined_bytes, 0);
        assert_eq!(w.next_seq(), 3);
    }

    #[test]
    fn write_out_writes_what_is_held_and_holds_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = LogWriter::create(&dir.path().join("session"), durability_none()).unwrap();
        note(&mut w, 0);
        let born = w.len_bytes();
        w.hold();
        note(&mut w, 0);
        note(&mut w, 0);
        assert_eq!(file_len(&w), born);
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
            // The first record is never held: the log is born with it.
            note(&mut w, 0);
            w.hold();
            note(&mut w, 0);
            // Held: exactly HELD_BYTES_MAX, or one byte more.
            note(&mut w, HELD_BYTES_MAX - 2 * bare + over);
            assert_eq!(w.len_bytes() as usize, bare + HELD_BYTES_MAX + over);
            let want = if over == 0 {
                bare as u64
            } else {
                w.len_bytes()
            };
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
        note(&mut w, 0);
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
