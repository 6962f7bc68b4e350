//! The home's written set: which session logs were opened for writing since a reader
//! that keeps a cache of the logs (the search index's catch-up) last found them
//! complete, so that reader need not look at every log of the home.
//!
//! A log folder laid out as a home's session, `<home>/projects/<p>/sessions/<id>`, has
//! its mark `<home>/written/<p>+<id>`: an empty file made when a writer opens the log
//! (under the writer lock, before it appends anything; [`mark`]), or around a write
//! that takes no lock (an archive pull). Logs elsewhere (an allow list, a test's
//! folder) have none. A mark is made once per opening, not per append: when it already
//! exists, marking is one failed `open`. A new mark is made durable (its folder synced)
//! unless the writer's durability is `none`, so a log never holds durable records its
//! mark does not cover.
//!
//! The reader clears a mark with [`Written::clear`] once it holds everything the log
//! does: the mark is removed first, then the log must have no writer and the length
//! the reader holds; otherwise the mark is made again. A writer marks after taking the
//! lock, so it either marks after the removal or holds the lock when the reader looks:
//! no record escapes. [`Written::is_complete`] says whether a reader has listed the
//! whole home once since marks began to be kept; until then the set is not all there is.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};

/// The folder of the marks, in the home.
pub const WRITTEN_DIR: &str = "written";

/// The file in [`WRITTEN_DIR`] that says a reader listed the whole home since marks
/// began to be kept.
pub const WRITTEN_COMPLETE_FILE: &str = ".complete";

/// The home and the mark's name of a log folder laid out as a home's session.
fn mark_of(dir: &Path) -> Option<(&Path, String)> {
    let id = dir.file_name()?.to_str()?;
    let sessions = dir.parent()?;
    let project_dir = sessions.parent()?;
    let project = project_dir.file_name()?.to_str()?;
    let projects = project_dir.parent()?;
    let home = projects.parent()?;
    let named = |p: &Path, n: &str| p.file_name().is_some_and(|f| f == n);
    // A project key never holds '+' (it is made of [A-Za-z0-9._-]): the first '+'
    // splits a name back.
    (named(sessions, "sessions") && named(projects, "projects") && !project.contains('+'))
        .then(|| (home, format!("{project}+{id}")))
}

/// Marks the log in folder `dir` as opened for writing, when `dir` is a home's session
/// folder; `sync` makes a new mark durable before this returns.
pub fn mark(dir: &Path, sync: bool) -> Result<()> {
    let Some((home, name)) = mark_of(dir) else {
        return Ok(());
    };
    let marks = home.join(WRITTEN_DIR);
    let path = marks.join(&name);
    let made = match crate::private::create_new(&path) {
        Ok(_) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            crate::private::create_dir_all(&marks).at(&marks)?;
            if sync {
                crate::log::sync_dir(home)?;
            }
            match crate::private::create_new(&path) {
                Ok(_) => true,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
                Err(e) => return Err(e).at(&path),
            }
        }
        Err(e) => return Err(e).at(&path),
    };
    if made && sync {
        crate::log::sync_dir(&marks)?;
    }
    Ok(())
}

/// The written set of a home.
#[derive(Debug, Clone)]
pub struct Written {
    home: PathBuf,
}

/// What the kernel says of file locks (`/proc/locks`), read once for many checks.
#[derive(Debug, Clone)]
pub struct Locks(Option<String>);

impl Locks {
    /// Reads the locks held now.
    pub fn read() -> Locks {
        Locks(std::fs::read_to_string("/proc/locks").ok())
    }

    /// Whether a process may hold the writer lock of the log in `dir`: true when the
    /// locks could not be read.
    pub fn may_be_written(&self, dir: &Path) -> bool {
        let Some(locks) = &self.0 else {
            return true;
        };
        let file = match std::fs::metadata(dir.join(crate::LOCK_FILE)) {
            Ok(m) => crate::lock::LockedFile::of(&m),
            Err(e) => return e.kind() != io::ErrorKind::NotFound,
        };
        locks.lines().any(|l| crate::lock::locks_file(l, file))
    }
}

impl Written {
    /// The written set of the home at `home`.
    pub fn at(home: &Path) -> Written {
        Written {
            home: home.to_path_buf(),
        }
    }

    fn dir(&self) -> PathBuf {
        self.home.join(WRITTEN_DIR)
    }

    /// Whether a reader listed the whole home since marks began to be kept.
    pub fn is_complete(&self) -> bool {
        self.dir().join(WRITTEN_COMPLETE_FILE).is_file()
    }

    /// Makes the marks' folder, before a reader lists the whole home: every writer
    /// that opens a log after this marks it.
    pub fn begin(&self) -> Result<()> {
        let dir = self.dir();
        crate::private::create_dir_all(&dir).at(&dir)
    }

    /// Says a reader has listed the whole home (after [`Written::begin`]).
    pub fn set_complete(&self) -> Result<()> {
        let path = self.dir().join(WRITTEN_COMPLETE_FILE);
        match crate::private::create_new(&path) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(e).at(&path),
        }
    }

    /// The session folders marked, in no order.
    pub fn list(&self) -> Result<Vec<PathBuf>> {
        let dir = self.dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).at(&dir),
        };
        let mut out = Vec::new();
        for e in entries {
            let e = e.at(&dir)?;
            let name = e.file_name();
            let Some((project, id)) = name.to_str().and_then(|n| n.split_once('+')) else {
                continue;
            };
            out.push(
                self.home
                    .join("projects")
                    .join(project)
                    .join("sessions")
                    .join(id),
            );
        }
        Ok(out)
    }

    /// Removes the mark of session folder `dir` when the reader holds everything its log
    /// does: `held_bytes`, the log's length the reader holds (`None`: nothing). The mark
    /// stays when a writer may have the log open or the log's length is another; a
    /// folder without a log loses its mark. Returns whether it was removed.
    pub fn clear(&self, dir: &Path, held_bytes: Option<u64>, locks: &Locks) -> Result<bool> {
        let Some((_, name)) = mark_of(dir) else {
            return Ok(false);
        };
        let path = self.dir().join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e).at(&path),
        }
        // Removed first: a writer that opens the log from now on marks it again, and
        // one that opened it before still holds the lock.
        let log = crate::log_path(dir);
        let len = match std::fs::metadata(&log) {
            Ok(m) => Some(m.len()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).at(&log),
        };
        let done = match len {
            None => !locks.may_be_written(dir),
            Some(len) => held_bytes == Some(len) && !locks.may_be_written(dir),
        };
        if !done {
            mark(dir, false)?;
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LogWriter, Options};

    #[test]
    fn only_a_homes_session_folders_have_marks() {
        for (dir, want) in [
            ("/h/projects/p-1/sessions/s1", Some(("/h", "p-1+s1"))),
            ("/h/projects/p-1/sessions/s+1", Some(("/h", "p-1+s+1"))),
            ("/h/projects/p+1/sessions/s1", None),
            ("/h/projects/p-1/allow", None),
            ("/h/other/p-1/sessions/s1", None),
            ("/h/projects/p-1/session/s1", None),
            ("sessions/s1", None),
        ] {
            let got = mark_of(Path::new(dir));
            assert_eq!(
                got.as_ref().map(|(h, n)| (h.to_str().unwrap(), n.as_str())),
                want,
                "{dir}"
            );
        }
    }

    #[test]
    fn a_writer_marks_its_log_and_a_reader_clears_it_only_when_it_holds_all_of_it() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().canonicalize().unwrap();
        let dir = home.join("projects/p-1/sessions/s1");
        let w = Written::at(&home);
        assert!(!w.is_complete());
        assert_eq!(w.list().unwrap(), Vec::<PathBuf>::new());
        let mut log = LogWriter::create(&dir, Options::default()).unwrap();
        log.append(&serde_json::json!({"type": "x"})).unwrap();
        assert_eq!(w.list().unwrap(), vec![dir.clone()]);
        let len = log.len_bytes();
        // The writer holds the lock: the mark stays, whatever the reader holds.
        assert!(!w.clear(&dir, Some(len), &Locks::read()).unwrap());
        assert_eq!(w.list().unwrap(), vec![dir.clone()]);
        log.close().unwrap();
        // No writer, but the reader holds less than the log.
        assert!(!w.clear(&dir, Some(len - 1), &Locks::read()).unwrap());
        assert!(!w.clear(&dir, None, &Locks::read()).unwrap());
        assert_eq!(w.list().unwrap(), vec![dir.clone()]);
        // Locks that cannot be read keep it too.
        assert!(!w.clear(&dir, Some(len), &Locks(None)).unwrap());
        assert!(w.clear(&dir, Some(len), &Locks::read()).unwrap());
        assert_eq!(w.list().unwrap(), Vec::<PathBuf>::new());
        // Opening the log again marks it again.
        let (log, _) = LogWriter::open(&dir, Options::default()).unwrap();
        assert_eq!(w.list().unwrap(), vec![dir.clone()]);
        drop(log);
        w.set_complete().unwrap();
        assert!(w.is_complete());
        assert_eq!(w.list().unwrap(), vec![dir.clone()]);
    }
}
