//! The writer lock: one writer per log, held as an OS file lock on `events.lock`, with
//! the holder's pid written inside so that a refused writer can name it. The lock dies
//! with its process, so a crash never leaves a session locked.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{Error, IoContext, Result};

/// Held for as long as the writer lives.
#[derive(Debug)]
pub(crate) struct WriterLock {
    _file: File,
}

/// How long a writer waits for a log's lock that this same process's last writer
/// held, in milliseconds (see [`WriterLock::acquire`]).
const SELF_LOCK_WAIT_MS: u64 = 500;

impl WriterLock {
    pub(crate) fn acquire(path: &Path) -> Result<WriterLock> {
        let mut file = crate::private::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .at(path)?;
        let since = std::time::Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {
                    let mut text = String::new();
                    let _ = file.rewind();
                    let _ = file.read_to_string(&mut text);
                    let pid: Option<u32> = text.trim().parse().ok();
                    // The lock file names this very process: a writer of another thread
                    // that has just closed it, whose descriptor a child forked at that
                    // moment (before its exec) still holds. Wait that out; any other
                    // holder is refused at once.
                    if pid == Some(std::process::id())
                        && since.elapsed().as_millis() < u128::from(SELF_LOCK_WAIT_MS)
                    {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                        continue;
                    }
                    return Err(Error::Locked {
                        path: path.to_path_buf(),
                        pid,
                    });
                }
                Err(TryLockError::Error(e)) => return Err(e).at(path),
            }
        }
        file.set_len(0).at(path)?;
        file.seek(SeekFrom::Start(0)).at(path)?;
        write!(file, "{}", std::process::id()).at(path)?;
        Ok(WriterLock { _file: file })
    }
}

/// The pid of the writer holding the lock of the log in `dir`, if a live process holds
/// it. Read from `/proc/locks` without taking the lock, so that looking never makes a
/// writer starting at that moment fail: the lock file's inode must be locked there by
/// the pid the file names. `None` where `/proc/locks` cannot be read.
pub fn writer_pid(dir: &Path) -> Option<u32> {
    let path = dir.join(crate::LOCK_FILE);
    let file = LockedFile::of(&std::fs::metadata(&path).ok()?);
    let pid: u32 = std::fs::read_to_string(&path).ok()?.trim().parse().ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks
        .lines()
        .any(|line| held_by(line, file, pid))
        .then_some(pid)
}

/// A file as `/proc/locks` names it: its device's major and minor numbers and its
/// inode (an inode number alone repeats across file systems).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LockedFile {
    major: u32,
    minor: u32,
    ino: u64,
}

impl LockedFile {
    pub(crate) fn of(meta: &std::fs::Metadata) -> LockedFile {
        use std::os::unix::fs::MetadataExt;
        LockedFile {
            major: rustix::fs::major(meta.dev()),
            minor: rustix::fs::minor(meta.dev()),
            ino: meta.ino(),
        }
    }

    /// The file of a `/proc/locks` field `MAJ:MIN:INODE` (major and minor in hex).
    fn parse(field: &str) -> Option<LockedFile> {
        let mut parts = field.split(':');
        let major = u32::from_str_radix(parts.next()?, 16).ok()?;
        let minor = u32::from_str_radix(parts.next()?, 16).ok()?;
        let ino = parts.next()?.parse().ok()?;
        parts
            .next()
            .is_none()
            .then_some(LockedFile { major, minor, ino })
    }
}

/// True when a `/proc/locks` line is a lock of `file` held (not waited for) by any
/// process.
pub(crate) fn locks_file(line: &str, file: LockedFile) -> bool {
    holder(line, file).is_some()
}

/// True when a `/proc/locks` line is a lock of `file` held by `pid`.
fn held_by(line: &str, file: LockedFile, pid: u32) -> bool {
    holder(line, file) == Some(i64::from(pid))
}

/// The pid holding the lock a `/proc/locks` line describes, when it is a lock of
/// `file` held, not waited for: `1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF` (an
/// open file description's lock shows -1).
fn holder(line: &str, file: LockedFile) -> Option<i64> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    // `->` marks a process waiting for the lock, not one holding it.
    if fields.get(1) == Some(&"->") {
        return None;
    }
    let at = fields.iter().position(|f| *f == "WRITE" || *f == "READ")?;
    let pid = fields.get(at + 1)?.parse::<i64>().ok()?;
    (LockedFile::parse(fields.get(at + 2)?)? == file).then_some(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock this process's writer still holds is waited for up to
    /// `SELF_LOCK_WAIT_MS`: taken when it is let go within that time, refused naming
    /// this process when it is not. A holder of another process is refused at once.
    #[test]
    fn a_lock_held_by_this_process_is_waited_for_up_to_its_limit() {
        #![allow(clippy::unwrap_used)]
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("events.lock");
        let first = WriterLock::acquire(&path).unwrap();
        let let_go = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(SELF_LOCK_WAIT_MS / 5));
            drop(first);
        });
        WriterLock::acquire(&path).unwrap();
        let_go.join().unwrap();

        let _held = WriterLock::acquire(&path).unwrap();
        let since = std::time::Instant::now();
        match WriterLock::acquire(&path) {
            Err(Error::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("{other:?}"),
        }
        assert!(since.elapsed().as_millis() >= u128::from(SELF_LOCK_WAIT_MS));

        // The file names another process: no wait.
        std::fs::write(&path, "1").unwrap();
        let since = std::time::Instant::now();
        match WriterLock::acquire(&path) {
            Err(Error::Locked { pid, .. }) => assert_eq!(pid, Some(1)),
            other => panic!("{other:?}"),
        }
        assert!(since.elapsed().as_millis() < u128::from(SELF_LOCK_WAIT_MS));
    }

    #[test]
    fn a_proc_locks_line_names_its_holder_and_file() {
        let file = |major, minor, ino| LockedFile { major, minor, ino };
        let f = file(0xfd, 1, 5678);
        let line = "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF";
        assert!(held_by(line, f, 1234));
        assert!(!held_by(line, f, 1235));
        assert!(!held_by(line, file(0xfd, 1, 5679), 1234));
        // The same inode number on another file system is another file.
        assert!(!held_by(line, file(0xfd, 2, 5678), 1234));
        assert!(!held_by(line, file(0xfe, 1, 5678), 1234));
        assert!(!held_by("2: POSIX  ADVISORY  WRITE", f, 1234));
        let blocked = "1: -> FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF";
        assert!(!held_by(blocked, f, 1234), "a waiter does not hold it");
        // Any holder's lock of the file, an open file description's (pid -1) too.
        assert!(locks_file(line, f));
        assert!(locks_file(
            "3: OFDLCK ADVISORY  WRITE -1 fd:01:5678 0 EOF",
            f
        ));
        assert!(!locks_file(line, file(0xfd, 1, 5679)));
        assert!(!locks_file(blocked, f));
        // Numbers past two hex digits; fields that are not MAJ:MIN:INODE.
        assert!(locks_file(
            "4: FLOCK  ADVISORY  WRITE 9 103:1a2:77 0 EOF",
            file(0x103, 0x1a2, 77)
        ));
        for bad in ["5678", "fd:5678", "fd:01:56:78", "zz:01:5678", "fd:01:-1"] {
            let l = format!("5: FLOCK  ADVISORY  WRITE 1234 {bad} 0 EOF");
            assert!(!locks_file(&l, f), "{bad}");
        }
    }

    // What this process's lock of a real file looks like in /proc/locks is what
    // `LockedFile::of` names (device included).
    #[test]
    fn a_real_lock_is_found_by_its_device_and_inode() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(crate::LOCK_FILE);
        let _lock = WriterLock::acquire(&path).unwrap_or_else(|e| panic!("{e}"));
        let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
            return;
        };
        let f = LockedFile::of(&std::fs::metadata(&path).unwrap_or_else(|e| panic!("{e}")));
        assert!(
            locks.lines().any(|l| held_by(l, f, std::process::id())),
            "{f:?} in {locks}"
        );
        let other_device = LockedFile {
            minor: f.minor + 1,
            ..f
        };
        assert!(!locks.lines().any(|l| locks_file(l, other_device)));
    }

    #[test]
    fn a_held_lock_names_its_writer_and_a_released_one_none() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let lock = WriterLock::acquire(&dir.path().join(crate::LOCK_FILE))
            .unwrap_or_else(|e| panic!("{e}"));
        // Where /proc/locks is readable (Linux), the holder is this process.
        if std::path::Path::new("/proc/locks").exists() {
            assert_eq!(writer_pid(dir.path()), Some(std::process::id()));
        }
        drop(lock);
        assert_eq!(writer_pid(dir.path()), None);
    }
}
