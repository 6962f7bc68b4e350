//! Checking out a session: the workspace as it was after any record, written into a
//! folder. Every blob needed is checked first (the error lists the missing ones), the
//! files are written into a temporary folder beside the destination and renamed into
//! place at the end, so a failure leaves nothing half-written.
//!
//! A withheld file (a credential file, recorded by hash only) has no blob: its content
//! is copied from the session's own workspace when the file there still has the
//! recorded BLAKE3, and the report says so; when it does not, the file is listed with
//! the missing blobs and nothing is written, as for a missing blob.
//!
//! A git-backed file (the manifest's `git`) is read from the object store of the
//! session's workspace repository and checked against its recorded BLAKE3; a
//! repository without the object lists it with the missing blobs. A file recorded by
//! hash and size only (`not_kept`: too large, sparse) is not written: the report lists
//! it as not restorable, with the reason.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use cairn_store::Hash;
use serde::Serialize;

use crate::error::{ReplayError, Result, io_at};
use crate::session::{FileAt, Session};

/// What a checkout wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckoutReport {
    pub session: String,
    pub at_seq: u64,
    pub files: u64,
    pub bytes: u64,
    /// The withheld files written, each copied from the session's workspace.
    pub withheld: Vec<WithheldFile>,
    /// Files whose content at that point is not known (an imported session's change
    /// given as a diff only): not written.
    pub unknown: Vec<String>,
    /// Files read from the workspace's git repository (git-backed).
    pub from_git: u64,
    /// Files recorded by hash and size only: not written.
    pub not_restorable: Vec<NotRestorable>,
}

/// A file a checkout could not write: its content was never kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotRestorable {
    /// Workspace path.
    pub path: String,
    pub hash: Hash,
    pub bytes: u64,
    /// Why its content was not kept.
    pub reason: String,
}

/// A withheld file written by a checkout or a replay: its content is not in the blob
/// store, so it was copied from the session's workspace, where the file still has the
/// recorded BLAKE3.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WithheldFile {
    /// Workspace path.
    pub path: String,
    /// The recorded BLAKE3 (which the copy has).
    pub hash: Hash,
    /// The file it was copied from.
    pub copied_from: PathBuf,
}

/// The content of the files a checkout or a replay writes, all found before anything
/// is written: every blob there and intact, every withheld file in the session's
/// workspace with its recorded content; otherwise one error lists everything missing.
pub(crate) struct Contents {
    /// Withheld files' content, by hash.
    live: HashMap<Hash, Vec<u8>>,
    pub(crate) withheld: Vec<WithheldFile>,
    /// Git-backed contents: BLAKE3 → git blob id (from the manifest).
    git: HashMap<Hash, String>,
    objects: Option<cairn_tools::git::Objects>,
    pub(crate) from_git: u64,
}

impl Contents {
    pub(crate) fn gather<'a>(
        session: &Session,
        files: impl IntoIterator<Item = (&'a String, &'a FileAt)>,
    ) -> Result<Contents> {
        let workspace = Path::new(&session.started.workspace);
        let mut missing = Vec::new();
        let mut withheld_missing = Vec::new();
        let git: HashMap<Hash, String> = session
            .manifest()?
            .into_iter()
            .filter_map(|e| Some((e.hash?, e.git?)))
            .collect();
        let objects = (!git.is_empty()).then(|| cairn_tools::git::Objects::open(workspace));
        let mut contents = Contents {
            live: HashMap::new(),
            withheld: Vec::new(),
            git,
            objects,
            from_git: 0,
        };
        for (path, f) in files {
            if f.not_kept.is_some() {
                continue;
            }
            if f.withheld {
                let copied_from = workspace.join(path);
                match session.live_content(path, f) {
                    Some(bytes) => {
                        contents.live.insert(f.hash, bytes);
                        contents.withheld.push(WithheldFile {
                            path: path.clone(),
                            hash: f.hash,
                            copied_from,
                        });
                    }
                    None => {
                        withheld_missing.push((copied_from.to_string_lossy().into_owned(), f.hash))
                    }
                }
            } else if session
                .blobs
                .verify(&f.hash)
                .map_or(true, |c| c != cairn_store::BlobCheck::Ok)
            {
                // Not in the store: the repository may hold it (read once, checked).
                match contents.read_repository(f) {
                    Some(bytes) => {
                        contents.from_git += 1;
                        contents.live.insert(f.hash, bytes);
                    }
                    None => missing.push((path.clone(), f.hash)),
                }
            }
        }
        if !missing.is_empty() || !withheld_missing.is_empty() {
            return Err(ReplayError::MissingBlobs {
                missing,
                withheld: withheld_missing,
            });
        }
        Ok(contents)
    }

    /// The content of git-backed `f` from the workspace's repository, when the
    /// object is there and has the recorded BLAKE3 and length.
    fn read_repository(&self, f: &FileAt) -> Option<Vec<u8>> {
        let oid = self.git.get(&f.hash)?;
        let bytes = self.objects.as_ref()?.blob(oid)?;
        (bytes.len() as u64 == f.len && Hash::of(&bytes) == f.hash).then_some(bytes)
    }

    /// The content of `path` (`f`, one of the files gathered).
    pub(crate) fn bytes(&self, session: &Session, path: &str, f: &FileAt) -> Result<Cow<'_, [u8]>> {
        if !f.withheld && !self.live.contains_key(&f.hash) {
            return session.blob(&f.hash, path).map(Cow::Owned);
        }
        // Gathered first: a withheld file not there was an error then.
        match self.live.get(&f.hash) {
            Some(bytes) => Ok(Cow::Borrowed(bytes)),
            None => Err(ReplayError::MissingBlobs {
                missing: Vec::new(),
                withheld: vec![(path.to_string(), f.hash)],
            }),
        }
    }
}

/// Writes the workspace of the session at `session_dir` as it was after record
/// `at_seq` into `dest`, which must be empty or absent.
pub fn checkout(session_dir: &Path, at_seq: u64, dest: &Path) -> Result<CheckoutReport> {
    let session = Session::load(session_dir)?;
    let files: BTreeMap<String, FileAt> = session.workspace_at(Some(at_seq))?;
    let existed = dest.exists();
    if existed
        && std::fs::read_dir(dest)
            .map_err(io_at(dest))?
            .next()
            .is_some()
    {
        return Err(ReplayError::NotEmpty(dest.to_path_buf()));
    }
    let contents = Contents::gather(&session, &files)?;
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io_at(&parent))?;
    let tmp = tempfile::Builder::new()
        .prefix(".cairn-checkout-")
        .tempdir_in(&parent)
        .map_err(io_at(&parent))?;
    let mut bytes = 0u64;
    let out = Dest::open(tmp.path())?;
    let mut not_restorable = Vec::new();
    for (path, f) in &files {
        if let Some(why) = f.not_kept {
            not_restorable.push(NotRestorable {
                path: path.clone(),
                hash: f.hash,
                bytes: f.len,
                reason: why.reason().to_string(),
            });
            continue;
        }
        let content = contents.bytes(&session, path, f)?;
        bytes += content.len() as u64;
        out.write(path, &content, f.mode)?;
    }
    if existed {
        std::fs::remove_dir(dest).map_err(io_at(dest))?;
    }
    let kept = tmp.keep();
    std::fs::rename(&kept, dest).map_err(|e| {
        let _ = std::fs::remove_dir_all(&kept);
        io_at(dest)(e)
    })?;
    let unknown = session.unknown_at(Some(at_seq));
    Ok(CheckoutReport {
        session: session.id,
        at_seq,
        files: files.len() as u64 - not_restorable.len() as u64,
        bytes,
        withheld: contents.withheld,
        unknown,
        from_git: contents.from_git,
        not_restorable,
    })
}

/// The folder a checkout or a replay writes the workspace into, opened once: every
/// file goes in beneath its descriptor (`cairn_tools::Root`), through a temporary
/// file renamed in its folder, so that no path of a log — checked first by
/// `Session::check_write_paths` — nor a symlink planted meanwhile can lead a write
/// outside it.
pub(crate) struct Dest {
    root: cairn_tools::Root,
}

impl Dest {
    pub(crate) fn open(dir: &Path) -> Result<Dest> {
        let canonical = dir.canonicalize().map_err(io_at(dir))?;
        // No cairn home lives in a folder being written from a log: the name below is
        // the only one refused as "the home", and no workspace path is that.
        let no_home = canonical.join(".cairn-home-is-elsewhere");
        let root = cairn_tools::Root::open(&canonical, &no_home).map_err(io_at(dir))?;
        Ok(Dest { root })
    }

    /// Writes `bytes` to workspace path `rel` (folders made as needed), with `mode`
    /// when known (else 0o644).
    pub(crate) fn write(&self, rel: &str, bytes: &[u8], mode: Option<u32>) -> Result<()> {
        let abs = self.root.path().join(rel);
        let ws = cairn_tools::WsPath {
            abs: abs.clone(),
            rel: rel.to_string(),
        };
        let parent = self.root.parent(&ws, true).map_err(|e| {
            io_at(&abs)(match e {
                cairn_tools::open::OpenError::Io(e) => e,
                other => std::io::Error::other(format!("{other:?}")),
            })
        })?;
        if let Err(e) = parent.replace(bytes, mode.unwrap_or(0o644)) {
            parent.undo();
            return Err(io_at(&abs)(e));
        }
        Ok(())
    }

    /// Removes workspace path `rel` (a recorded delete); absent is fine. Only a re-run
    /// (the `run` feature) deletes.
    #[cfg(feature = "run")]
    pub(crate) fn remove(&self, rel: &str) -> Result<()> {
        let path = self.root.path().join(rel);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_at(&path)(e)),
            _ => Ok(()),
        }
    }
}
