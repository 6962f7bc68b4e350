//! Pulling a session back: its log written line by line as the archive holds it (each
//! line checked: its own hash, its seq, its link to the one before), its blobs into the
//! project's blob store (each re-hashed), its checkpoints beside it. The log goes to a
//! temporary file first and replaces the local one only when that one is missing or a
//! prefix of it, so nothing local is lost.

use std::io::Write;
use std::path::{Path, PathBuf};

use cairn_store::{BlobStore, Hash, check_line};
use postgres::fallible_iterator::FallibleIterator;

use crate::{Archive, ArchiveError, io_at};

/// What a pull wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Pulled {
    pub session: String,
    pub project: String,
    /// The session's folder.
    pub dir: PathBuf,
    pub records: u64,
    /// Records the local log did not hold before.
    pub records_new: u64,
    pub blobs: u64,
    pub blobs_new: u64,
    pub checkpoints: u64,
}

impl Archive {
    /// Pulls session `id` into `home` (`projects/<project>/sessions/<id>`, the
    /// project's `blobs/`), durably: every file and folder synced.
    pub fn pull(&mut self, id: &str, home: &Path) -> Result<Pulled, ArchiveError> {
        self.pull_synced(id, home, true)
    }

    /// [`Archive::pull`] into a scratch home that does not outlive its process (a
    /// worker's): checked as a pull always is, but nothing synced, since a crash throws
    /// the home away anyway.
    pub fn pull_scratch(&mut self, id: &str, home: &Path) -> Result<Pulled, ArchiveError> {
        self.pull_synced(id, home, false)
    }

    fn pull_synced(&mut self, id: &str, home: &Path, sync: bool) -> Result<Pulled, ArchiveError> {
        let row = self
            .client
            .query_opt("select project from sessions where id = $1", &[&id])?
            .ok_or_else(|| ArchiveError::NoSession(id.to_string()))?;
        let project: String = row.get(0);
        let project_dir = home.join("projects").join(&project);
        let sessions = project_dir.join("sessions");
        let target = sessions.join(id);
        // A session new to this home is pulled under a name no reader lists and renamed
        // into place whole: a pull that dies half-way leaves no half session.
        let fresh = std::fs::symlink_metadata(&target).is_err();
        let dir = if fresh {
            sessions.join(cairn_store::unborn_name(std::ffi::OsStr::new(id)))
        } else {
            target.clone()
        };
        cairn_store::private::create_dir_all(&dir).map_err(io_at(&dir))?;
        let mut pulled = Pulled {
            session: id.to_string(),
            project: project.clone(),
            dir: target.clone(),
            ..Pulled::default()
        };

        // Blobs first, as a recorder writes them: a log never names a missing blob.
        self.pull_blobs(id, &project_dir, sync, &mut pulled)?;
        self.pull_log(id, &dir, &target, sync, &mut pulled)?;
        cairn_store::written::mark(&target, sync)?;
        self.pull_checkpoints(id, &dir, &mut pulled)?;
        if fresh {
            std::fs::rename(&dir, &target).map_err(io_at(&target))?;
            if sync {
                std::fs::File::open(&sessions)
                    .and_then(|d| d.sync_all())
                    .map_err(io_at(&sessions))?;
            }
            cairn_store::written::mark(&target, sync)?;
        }
        Ok(pulled)
    }

    /// The session's blobs into the project's store, each checked against its hash.
    fn pull_blobs(
        &mut self,
        id: &str,
        project_dir: &Path,
        sync: bool,
        pulled: &mut Pulled,
    ) -> Result<(), ArchiveError> {
        let store = BlobStore::open(&project_dir.join("blobs"))?;
        let store = if sync { store } else { store.without_sync() };
        let mut rows = self.client.query_raw(
            "select b.hash, b.content from session_blobs s join blobs b using (hash)
             where s.session = $1 order by b.hash",
            &[&id],
        )?;
        while let Some(r) = rows.next()? {
            let hash: String = r.get(0);
            let content: &[u8] = r.get(1);
            pulled.blobs += 1;
            let want = Hash::from_hex(hash.as_bytes());
            if want.is_some_and(|h| store.has(&h)) {
                continue;
            }
            let put = store.put(content)?;
            if Some(put.hash) != want {
                return Err(ArchiveError::BadBlob {
                    session: id.to_string(),
                    hash,
                    what: format!(
                        "the archived content hashes to {}: the archive was altered",
                        put.hash
                    ),
                });
            }
            pulled.blobs_new += 1;
        }
        drop(rows);
        Ok(())
    }

    /// The session's log, written whole to a temporary file with every record's seq
    /// and chain checked, then put in place unless the local log already holds it (a
    /// local log that is not a prefix of it is refused).
    fn pull_log(
        &mut self,
        id: &str,
        dir: &Path,
        target: &Path,
        sync: bool,
        pulled: &mut Pulled,
    ) -> Result<(), ArchiveError> {
        let log = cairn_store::log_path(dir);
        // The log is replaced without the writer lock: marked before (a pull that dies
        // half-way) and after (a catch-up that cleared the mark meanwhile).
        cairn_store::written::mark(target, sync)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".pull-")
            .tempfile_in(dir)
            .map_err(io_at(dir))?;
        {
            let mut out = std::io::BufWriter::new(tmp.as_file_mut());
            let mut rows = self.client.query_raw(
                "select seq, line from records where session = $1 order by seq",
                &[&id],
            )?;
            let mut prev = Hash::ZERO;
            while let Some(r) = rows.next()? {
                let seq = r.get::<_, i64>(0) as u64;
                let line: &[u8] = r.get(1);
                let bad = |what: String| ArchiveError::BadArchivedRecord {
                    session: id.to_string(),
                    seq,
                    what,
                };
                let f = check_line(line).map_err(|e| bad(e.what))?;
                if f.seq != seq || seq != pulled.records {
                    return Err(bad(format!(
                        "expected seq {}, the line says {}",
                        pulled.records, f.seq
                    )));
                }
                if f.prev != prev {
                    return Err(bad("its prev is not the hash of the record before".into()));
                }
                prev = f.hash;
                out.write_all(line).map_err(io_at(&log))?;
                out.write_all(b"\n").map_err(io_at(&log))?;
                pulled.records += 1;
            }
            out.flush().map_err(io_at(&log))?;
        }
        if sync {
            tmp.as_file().sync_all().map_err(io_at(&log))?;
        }
        let fresh_len = tmp.as_file().metadata().map_err(io_at(&log))?.len();
        match std::fs::read(&log) {
            Ok(old) => {
                let fresh = std::fs::read(tmp.path()).map_err(io_at(tmp.path()))?;
                if !fresh.starts_with(&old) {
                    return Err(ArchiveError::LocalDiffers { path: log });
                }
                pulled.records_new =
                    pulled.records - old.iter().filter(|b| **b == b'\n').count() as u64;
                if old.len() as u64 != fresh_len {
                    tmp.persist(&log).map_err(|e| io_at(&log)(e.error))?;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                pulled.records_new = pulled.records;
                tmp.persist(&log).map_err(|e| io_at(&log)(e.error))?;
            }
            Err(e) => return Err(io_at(&log)(e)),
        }
        Ok(())
    }

    /// Checkpoints: the archive's note, unless the local file already holds more
    /// (cosignatures added here since).
    fn pull_checkpoints(
        &mut self,
        id: &str,
        dir: &Path,
        pulled: &mut Pulled,
    ) -> Result<(), ArchiveError> {
        let cps = self.client.query(
            "select c.size, c.text, coalesce(string_agg(s.line, '' order by s.n), '')
             from checkpoints c left join checkpoint_signatures s using (session, size)
             where c.session = $1 group by c.size, c.text order by c.size",
            &[&id],
        )?;
        for r in cps {
            let size = r.get::<_, i64>(0) as u64;
            let text: String = r.get(1);
            let sigs: String = r.get(2);
            let note = format!("{text}\n{sigs}");
            let path = dir
                .join(cairn_tlog::log::CHECKPOINT_DIR)
                .join(size.to_string());
            // Written when missing, or when the archive's holds more signatures; a
            // local file with signatures of its own is kept as it is.
            let write = match std::fs::read_to_string(&path) {
                Ok(local) => local != note && note.starts_with(&local),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
                Err(e) => return Err(io_at(&path)(e)),
            };
            if write {
                cairn_tlog::log::write_checkpoint(dir, size, &note)?;
            }
            pulled.checkpoints += 1;
        }
        Ok(())
    }
}
