//! Snapshot files: opaque bytes (the engine puts its archived state there) tagged with
//! the format version, the seq and record hash they belong to, and a checksum of the
//! body. A snapshot is a cache: a corrupt, foreign, or stale one is skipped with a
//! warning and the caller folds from further back.
//!
//! Layout of `snapshots/<seq>.rkyv` (integers little-endian, 96-byte header so the body
//! starts 16-byte aligned):
//!
//! ```text
//! 0  8  magic "CAIRNSNP"
//! 8  4  header version (1)
//! 12 4  format version (the engine's)
//! 16 8  seq
//! 24 32 record hash at seq
//! 56 8  body length
//! 64 32 BLAKE3 of the body
//! 96 .. body
//! ```

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, IoContext, Result};
use crate::hash::Hash;
use crate::log::sync_dir;
use crate::reader::LogReader;

/// The snapshot folder inside a session directory.
pub const SNAPSHOT_DIR: &str = "snapshots";
const MAGIC: &[u8; 8] = b"CAIRNSNP";
const HEADER_VERSION: u32 = 1;
const HEADER_BYTES: usize = 96;

/// What a snapshot belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SnapshotMeta {
    pub format_version: u32,
    pub seq: u64,
    pub record_hash: Hash,
}

/// A loaded snapshot.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub meta: SnapshotMeta,
    pub body: Vec<u8>,
    pub path: PathBuf,
}

/// Why a snapshot file was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SnapshotWarning {
    pub path: PathBuf,
    pub what: String,
}

impl std::fmt::Display for SnapshotWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: snapshot skipped: {}",
            self.path.display(),
            self.what
        )
    }
}

/// The snapshots of one session.
#[derive(Debug, Clone)]
pub struct SnapshotStore {
    dir: PathBuf,
}

impl SnapshotStore {
    /// The snapshot folder of session directory `session_dir`.
    pub fn new(session_dir: &Path) -> SnapshotStore {
        SnapshotStore {
            dir: session_dir.join(SNAPSHOT_DIR),
        }
    }

    /// Writes a snapshot (temporary file, fsync, rename).
    pub fn save(&self, meta: &SnapshotMeta, body: &[u8]) -> Result<PathBuf> {
        self.write(meta, body, true)
    }

    /// [`SnapshotStore::save`], then removes the snapshots older than this one but the
    /// newest `older_kept` of them: a session that snapshots as it goes keeps a few,
    /// not one per interval (each holds the whole state, which grows with the session).
    /// One taken after this one (left by a log since cut short, which it reveals) is
    /// kept. The older ones kept stand in when the newest turns out stale after a power
    /// loss (the log's last records were still in the group commit's window).
    pub fn save_keeping(
        &self,
        meta: &SnapshotMeta,
        body: &[u8],
        older_kept: usize,
    ) -> Result<PathBuf> {
        let dest = self.save(meta, body)?;
        let older = self.list()?.into_iter().filter(|(seq, _)| *seq < meta.seq);
        for (_, path) in older.skip(older_kept) {
            remove_if_there(&path)?;
        }
        Ok(dest)
    }

    /// Writes a snapshot without waiting for the disk (temporary file, rename; no
    /// fsync), then removes every other snapshot of the session: the one cache of a
    /// session appended to by short-lived processes (an agent's hooks), rewritten by
    /// each. After a crash it may be missing, empty or torn; [`SnapshotStore::load`]
    /// tells by its checksum and the state is folded from the log instead.
    pub fn save_only_cache(&self, meta: &SnapshotMeta, body: &[u8]) -> Result<PathBuf> {
        let dest = self.write(meta, body, false)?;
        for (seq, path) in self.list()? {
            if seq != meta.seq {
                remove_if_there(&path)?;
            }
        }
        Ok(dest)
    }

    fn write(&self, meta: &SnapshotMeta, body: &[u8], durable: bool) -> Result<PathBuf> {
        crate::private::create_dir_all(&self.dir).at(&self.dir)?;
        let mut header = Vec::with_capacity(HEADER_BYTES);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&HEADER_VERSION.to_le_bytes());
        header.extend_from_slice(&meta.format_version.to_le_bytes());
        header.extend_from_slice(&meta.seq.to_le_bytes());
        header.extend_from_slice(&meta.record_hash.0);
        header.extend_from_slice(&(body.len() as u64).to_le_bytes());
        header.extend_from_slice(blake3::hash(body).as_bytes());
        let dest = self.dir.join(format!("{}.rkyv", meta.seq));
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).at(&self.dir)?;
        tmp.write_all(&header).at(tmp.path())?;
        tmp.write_all(body).at(tmp.path())?;
        if durable {
            tmp.as_file().sync_all().at(tmp.path())?;
        }
        tmp.persist(&dest).map_err(|e| e.error).at(&dest)?;
        if durable {
            sync_dir(&self.dir)?;
        }
        Ok(dest)
    }

    /// Reads and checks one snapshot file (magic, header version, checksum).
    pub fn load(path: &Path) -> Result<Snapshot> {
        let bytes = fs::read(path).at(path)?;
        let format = |what: &str| Error::Format {
            path: path.to_path_buf(),
            what: what.to_string(),
        };
        if bytes.len() < HEADER_BYTES || &bytes[..8] != MAGIC {
            return Err(format("not a cairn snapshot"));
        }
        let u32_at =
            |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[o..o + 8]);
            u64::from_le_bytes(b)
        };
        if u32_at(8) != HEADER_VERSION {
            return Err(format("snapshot header of another version"));
        }
        let mut record_hash = [0u8; 32];
        record_hash.copy_from_slice(&bytes[24..56]);
        let meta = SnapshotMeta {
            format_version: u32_at(12),
            seq: u64_at(16),
            record_hash: Hash(record_hash),
        };
        let body_len = u64_at(56);
        if body_len != (bytes.len() - HEADER_BYTES) as u64 {
            return Err(format("snapshot is truncated or has trailing bytes"));
        }
        if blake3::hash(&bytes[HEADER_BYTES..]).as_bytes()[..] != bytes[64..96] {
            return Err(format("snapshot body does not match its checksum"));
        }
        Ok(Snapshot {
            meta,
            body: bytes[HEADER_BYTES..].to_vec(),
            path: path.to_path_buf(),
        })
    }

    /// Snapshot files, newest seq first.
    pub fn list(&self) -> Result<Vec<(u64, PathBuf)>> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).at(&self.dir),
        };
        let mut out = Vec::new();
        for entry in entries {
            let path = entry.at(&self.dir)?.path();
            let seq = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".rkyv"))
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(seq) = seq {
                out.push((seq, path));
            }
        }
        out.sort_by_key(|e| std::cmp::Reverse(e.0));
        Ok(out)
    }

    /// The newest snapshot of `format_version` whose seq and record hash are in `log`;
    /// every file skipped on the way is named in the warnings.
    pub fn latest_valid(
        &self,
        format_version: u32,
        log: &LogReader,
    ) -> Result<(Option<Snapshot>, Vec<SnapshotWarning>)> {
        let mut warnings = Vec::new();
        for (seq, path) in self.list()? {
            let warn = |what: String| SnapshotWarning {
                path: path.clone(),
                what,
            };
            let snap = match SnapshotStore::load(&path) {
                Ok(s) => s,
                Err(e) => {
                    warnings.push(warn(error_what(&e)));
                    continue;
                }
            };
            if snap.meta.seq != seq {
                warnings.push(warn(format!(
                    "named for seq {seq} but holds seq {}",
                    snap.meta.seq
                )));
                continue;
            }
            if snap.meta.format_version != format_version {
                warnings.push(warn(format!(
                    "format version {} (this cairn reads {format_version})",
                    snap.meta.format_version
                )));
                continue;
            }
            match log.get(seq) {
                Ok(Some(r)) if r.hash == snap.meta.record_hash => {
                    return Ok((Some(snap), warnings));
                }
                Ok(Some(_)) => warnings.push(warn(format!(
                    "stale: record {seq} of the log has another hash"
                ))),
                Ok(None) => warnings.push(warn(format!("stale: the log has no record {seq}"))),
                Err(e) => warnings.push(warn(format!(
                    "the log could not be read at seq {seq}: {}",
                    error_what(&e)
                ))),
            }
        }
        Ok((None, warnings))
    }
}

fn error_what(e: &Error) -> String {
    match e {
        Error::Format { what, .. } => what.clone(),
        other => other.to_string(),
    }
}

/// Removes the file at `path`; one already gone is not an error.
fn remove_if_there(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).at(path),
    }
}
