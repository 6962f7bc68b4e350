//! Git-backed capture: which workspace files git already holds unchanged, and reading
//! them back from the repository's object store. Read in-process with `gix` (the
//! index, HEAD's tree, loose objects and packs): no subprocess, no `git` binary.
//!
//! A file is git-backed when it is tracked, its index entry is stat-clean (size, mtime
//! to the nanosecond and inode as the index recorded them, and not "racily clean": its
//! mtime is older than the index file's, as git decides it) and its blob id is the one
//! HEAD's tree has at that path. Such a file's content is the object HEAD holds, kept
//! alive by the history rather than by cairn. It is judged from its stat alone (not
//! opened, not hashed); HEAD's tree is read only when the index's tree cache does not
//! already say that the index is HEAD's tree. Reading an object back checks it
//! against its id.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A git blob id, as hex (40 digits for SHA-1 repositories).
pub type GitOid = String;

/// The stat-clean files of a repository's index that HEAD holds unchanged, by
/// workspace-relative path.
pub struct CleanFiles {
    by_path: HashMap<String, Clean>,
    /// The index file's mtime, in nanoseconds: entries modified at or after it are racy.
    index_mtime_ns: i64,
}

struct Clean {
    oid: gix::ObjectId,
    size: u32,
    mtime_s: u32,
    mtime_ns: u32,
    ino: u32,
    executable: bool,
}

impl CleanFiles {
    /// Reads the index and HEAD's tree of the repository `root` is in (the workspace
    /// may be a folder of it). `None` when there is no repository, no index or no HEAD
    /// (a repository without a commit): then nothing is git-backed.
    pub fn open(root: &Path) -> Option<CleanFiles> {
        let repo = gix::discover(root).ok()?;
        let workdir = repo.workdir()?.canonicalize().ok()?;
        // The workspace's place in the work tree, as a prefix of index paths.
        let prefix = root
            .strip_prefix(&workdir)
            .ok()?
            .to_string_lossy()
            .into_owned();
        let prefix = if prefix.is_empty() {
            prefix
        } else {
            format!("{prefix}/")
        };
        let index = repo.open_index().ok()?;
        let index_meta = std::fs::metadata(index.path()).ok()?;
        let index_mtime_ns = index_meta
            .mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(index_meta.mtime_nsec());
        let head_tree = repo.head_tree_id().ok()?.detach();
        let skip = gix::index::entry::Flags::INTENT_TO_ADD
            | gix::index::entry::Flags::SKIP_WORKTREE
            | gix::index::entry::Flags::ASSUME_VALID;
        // The index's tree cache, when its root is valid, names the tree the index's
        // entries make: equal to HEAD's tree, every entry is HEAD's, and HEAD's tree
        // need not be read (on a checkout of 17,000 files, reading it is most of this
        // function's cost). Otherwise HEAD's tree is walked and each entry compared.
        let entries = index.entries().len();
        let cache_is_head = index.tree().is_some_and(|t| {
            t.id == head_tree
                && t.num_entries.and_then(|n| usize::try_from(n).ok()) == Some(entries)
        }) && index
            .entries()
            .iter()
            .all(|e| e.stage_raw() == 0 && !e.flags.intersects(skip));
        let mut recorder = gix::traverse::tree::Recorder::default();
        if !cache_is_head {
            repo.find_tree(head_tree)
                .ok()?
                .traverse()
                .breadthfirst(&mut recorder)
                .ok()?;
        }
        let head: HashMap<&[u8], gix::ObjectId> = recorder
            .records
            .iter()
            .filter(|e| e.mode.is_blob())
            .map(|e| (e.filepath.as_slice(), e.oid))
            .collect();
        let mut by_path = HashMap::new();
        for e in index.entries() {
            if e.stage_raw() != 0 || e.flags.intersects(skip) {
                continue;
            }
            let executable = match e.mode {
                gix::index::entry::Mode::FILE => false,
                gix::index::entry::Mode::FILE_EXECUTABLE => true,
                // Symlinks and submodules are no regular files of the manifest.
                _ => continue,
            };
            let path: &[u8] = e.path(&index);
            if !cache_is_head && head.get(path) != Some(&e.id) {
                continue;
            }
            let Some(rel) = path.strip_prefix(prefix.as_bytes()) else {
                continue;
            };
            let Ok(rel) = std::str::from_utf8(rel) else {
                continue;
            };
            by_path.insert(
                rel.to_string(),
                Clean {
                    oid: e.id,
                    size: e.stat.size,
                    mtime_s: e.stat.mtime.secs,
                    mtime_ns: e.stat.mtime.nsecs,
                    ino: e.stat.ino,
                    executable,
                },
            );
        }
        Some(CleanFiles {
            by_path,
            index_mtime_ns,
        })
    }

    /// The blob id of workspace file `rel` when git holds it unchanged, given the
    /// file's stat now (size, mtime, inode, mode: no need to open the file).
    pub(crate) fn oid(&self, rel: &str, s: &crate::walk::Seen) -> Option<GitOid> {
        let c = self.by_path.get(rel)?;
        let (secs, nsecs) = (
            s.mtime_ns.div_euclid(1_000_000_000),
            s.mtime_ns.rem_euclid(1_000_000_000),
        );
        // The index stores stat fields truncated to 32 bits, as git does.
        let clean = u64::from(c.size) == s.size & 0xffff_ffff
            && i64::from(c.mtime_s) == secs & 0xffff_ffff
            && i64::from(c.mtime_ns) == nsecs
            && u64::from(c.ino) == s.ino & 0xffff_ffff
            && c.executable == (s.mode & 0o111 != 0)
            && s.mtime_ns < self.index_mtime_ns;
        clean.then(|| c.oid.to_string())
    }

    /// How many files the index and HEAD hold unchanged (stat not yet compared).
    pub fn len(&self) -> usize {
        self.by_path.len()
    }

    /// True when no file is a candidate.
    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }
}

/// A repository's object store, opened to read git-backed files back.
pub struct Objects {
    repo: Option<gix::Repository>,
}

impl Objects {
    /// The repository `workspace` is in; a folder that is not in one (any more)
    /// reads no object.
    pub fn open(workspace: &Path) -> Objects {
        Objects {
            repo: gix::discover(workspace).ok(),
        }
    }

    /// The content of blob `oid`, checked against its id; `None` when the repository
    /// does not have it (or there is no repository, or `oid` is no blob id, or what
    /// the store holds under that id has another content).
    pub fn blob(&self, oid: &str) -> Option<Vec<u8>> {
        let repo = self.repo.as_ref()?;
        let id = gix::ObjectId::from_hex(oid.as_bytes()).ok()?;
        let obj = repo.try_find_object(id).ok()??;
        if obj.kind != gix::object::Kind::Blob {
            return None;
        }
        let data = obj.detach().data;
        let actual = gix::objs::compute_hash(id.kind(), gix::object::Kind::Blob, &data).ok()?;
        (actual == id).then_some(data)
    }

    /// The BLAKE3 and length of blob `oid` (see [`Objects::blob`]): how the hash of a
    /// git-backed file recorded without one is found when it is first needed.
    pub fn content_hash(&self, oid: &str) -> Option<(cairn_store::Hash, u64)> {
        let data = self.blob(oid)?;
        Some((cairn_store::Hash::of(&data), data.len() as u64))
    }
}
