//! Listing the workspace's files with their size, mtime and ctime: the walk under
//! every scan, and the part of a no-change rescan that costs most.
//!
//! The first walk of a session runs the `ignore` crate's parallel walker (the ignore
//! rules are its business) and keeps, for every directory it entered, the directory's
//! stamp (inode, mtime, ctime) and the files it admitted; and the stamp of every
//! ignore-rule file (`.gitignore`, `.ignore` in each directory, `.git/info/exclude`).
//! The next walks reuse that listing when every stamp is unchanged: a directory's
//! entries change only with its mtime and ctime (creating, removing or renaming an
//! entry updates both; only mtime can be set back, ctime cannot), and the rules
//! change only with their files. Then each listed file is `fstatat`ed relative to its
//! directory's descriptor (opened with `openat2`, beneath the root, no symlinks), the
//! directories shared between the cores. Any stamp that moved, any listed file that is
//! no longer a regular file, and any error sends the walk back to the full walker.
//!
//! A stamp taken within [`RACY_NS`] of the walk that recorded it (or after) is not
//! trusted: a change in the same clock tick as the listing would leave it unchanged
//! (git's "racily clean" rule, applied to directories).

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

/// A file or directory whose mtime or ctime is this close to a scan's start (or after
/// it) may change again within the same tick of the file system's clock (a few ms)
/// without its times moving: the next scan must not vouch for it.
pub(crate) const RACY_NS: i64 = 100_000_000;

/// One file the walk found.
pub(crate) struct Seen {
    pub path: String,
    pub size: u64,
    pub mtime_ns: i64,
    /// The inode change time: it moves with every write, rename or `touch -d`, and
    /// cannot be set back, so a same-size rewrite with its mtime restored still shows.
    pub ctime_ns: i64,
    pub mode: u32,
    /// The inode number (git's index records it: a file git holds unchanged has it).
    pub ino: u64,
    /// A FIFO, socket or device (never opened); `None` for a regular file.
    pub special: Option<crate::manifest::Special>,
}

impl Seen {
    /// Changed too close to `started_ns` for its times to prove it unchanged later.
    pub fn racy(&self, started_ns: i64) -> bool {
        self.mtime_ns.max(self.ctime_ns) >= started_ns.saturating_sub(RACY_NS)
    }

    /// A file at `path` with `stamp`, as a walk would have seen it.
    pub fn of(path: String, stamp: FileStamp, special: Option<crate::manifest::Special>) -> Seen {
        Seen {
            path,
            size: stamp.size,
            mtime_ns: stamp.mtime_ns,
            ctime_ns: stamp.ctime_ns,
            mode: stamp.mode,
            ino: stamp.ino,
            special,
        }
    }

    /// What a rescan compares of it.
    pub fn stamp(&self) -> FileStamp {
        FileStamp {
            size: self.size,
            mtime_ns: self.mtime_ns,
            ctime_ns: self.ctime_ns,
            mode: self.mode,
            ino: self.ino,
        }
    }
}

/// What a rescan compares of a file: equal to the scan before's, the file is what it
/// was then (the manifest cache's rule: size, mtime, ctime and mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileStamp {
    pub(crate) size: u64,
    pub(crate) mtime_ns: i64,
    pub(crate) ctime_ns: i64,
    pub(crate) mode: u32,
    pub(crate) ino: u64,
}

impl FileStamp {
    /// A stamp no file has: the file is looked at again next time (it changed too
    /// close to the scan that saw it).
    pub fn smudged(self) -> FileStamp {
        FileStamp {
            mtime_ns: i64::MIN,
            ..self
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Stamp {
    ino: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl Stamp {
    fn of(st: &rustix::fs::Stat) -> Stamp {
        Stamp {
            ino: st.st_ino,
            mtime_ns: ns(st.st_mtime, st.st_mtime_nsec),
            ctime_ns: ns(st.st_ctime, st.st_ctime_nsec),
        }
    }
}

fn ns(s: i64, n: impl TryInto<i64>) -> i64 {
    s.saturating_mul(1_000_000_000)
        .saturating_add(n.try_into().unwrap_or(0))
}

/// One directory of the listing: its stamp, the stamps of its ignore-rule files
/// (`None`: absent) and the files it admitted.
struct Dir {
    /// Relative to the root, `/`-separated; empty for the root.
    rel: String,
    stamp: Stamp,
    rules: [Option<Stamp>; 2],
    /// The admitted files, in name order.
    files: Vec<Listed>,
}

/// One file of the listing.
struct Listed {
    /// Relative to the root, `/`-separated: the path a walk reports.
    path: String,
    /// Where the file's name starts in `path`.
    name_at: usize,
    /// Its place in the walk's output, which is sorted by path: a rescan puts each
    /// file there without comparing paths again.
    rank: u32,
    /// The kind of a special file.
    special: Option<crate::manifest::Special>,
}

const RULE_FILES: [&str; 2] = [".gitignore", ".ignore"];

/// The listing of the last full walk, reused while nothing in it moved.
#[derive(Default)]
pub(crate) struct Listing {
    dirs: Vec<Dir>,
    /// Files in all the directories.
    files: usize,
    /// `.git/info/exclude` of the root.
    exclude: Option<Stamp>,
}

impl Listing {
    /// Files in all the directories.
    pub(crate) fn files(&self) -> usize {
        self.files
    }

    /// Every listed file: its rank, path and special kind, in the listing's order
    /// (by folder).
    pub(crate) fn files_by_rank(
        &self,
    ) -> impl Iterator<Item = (u32, &str, Option<crate::manifest::Special>)> {
        self.dirs
            .iter()
            .flat_map(|d| d.files.iter())
            .map(|f| (f.rank, f.path.as_str(), f.special))
    }
}

impl std::fmt::Debug for Listing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Listing({} dirs)", self.dirs.len())
    }
}

/// The layout of a saved listing; a file of another version is not read.
const LISTING_VERSION: u32 = 1;

/// A listing as saved between sessions: each file as `[name, rank, special]`.
#[derive(serde::Serialize, serde::Deserialize)]
struct Saved {
    version: u32,
    exclude: Option<Stamp>,
    dirs: Vec<SavedDir>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct SavedDir {
    rel: String,
    stamp: Stamp,
    rules: [Option<Stamp>; 2],
    files: Vec<(String, u32, Option<crate::manifest::Special>)>,
}

impl Listing {
    /// The listing saved at `path` by an earlier session, to be checked like any
    /// other (every stamp, every file): `None` when there is none, or it is of
    /// another version or not a listing a walk could have made (a name that is not
    /// one path component, ranks that do not order the paths). With it, the BLAKE3 of
    /// the file's bytes.
    pub(crate) fn load(path: &Path) -> Option<(Listing, cairn_store::Hash)> {
        let bytes = std::fs::read(path).ok()?;
        let saved: Saved = serde_json::from_slice(&bytes).ok()?;
        if saved.version != LISTING_VERSION {
            return None;
        }
        let files: usize = saved.dirs.iter().map(|d| d.files.len()).sum();
        // Each rank's file, as (folder, file) of `dirs`: every rank once.
        let mut by_rank: Vec<Option<(u32, u32)>> = vec![None; files];
        let mut dirs = Vec::with_capacity(saved.dirs.len());
        for (di, d) in saved.dirs.into_iter().enumerate() {
            if d.rel.starts_with('/') || d.rel.split('/').any(|c| c == ".." || c == ".") {
                return None;
            }
            let mut listed = Vec::with_capacity(d.files.len());
            for (fi, (name, rank, special)) in d.files.into_iter().enumerate() {
                if name.is_empty() || name == "." || name == ".." || name.contains('/') {
                    return None;
                }
                let (path, name_at) = if d.rel.is_empty() {
                    (name, 0)
                } else {
                    let mut path = String::with_capacity(d.rel.len() + 1 + name.len());
                    path.push_str(&d.rel);
                    path.push('/');
                    path.push_str(&name);
                    (path, d.rel.len() + 1)
                };
                let slot = by_rank.get_mut(rank as usize)?;
                if slot.is_some() {
                    return None;
                }
                *slot = Some((u32::try_from(di).ok()?, u32::try_from(fi).ok()?));
                listed.push(Listed {
                    path,
                    name_at,
                    rank,
                    special,
                });
            }
            dirs.push(Dir {
                rel: d.rel,
                stamp: d.stamp,
                rules: d.rules,
                files: listed,
            });
        }
        // The ranks must be the order by path, as the walk sorts it (as many distinct
        // ranks below `files` as files: every slot is filled).
        let path = |slot: &Option<(u32, u32)>| {
            slot.map(|(d, f)| dirs[d as usize].files[f as usize].path.as_str())
        };
        let sorted = by_rank
            .iter()
            .zip(by_rank.iter().skip(1))
            .all(|(a, b)| path(a) < path(b));
        sorted.then_some((
            Listing {
                dirs,
                files,
                exclude: saved.exclude,
            },
            cairn_store::Hash::of(&bytes),
        ))
    }

    /// Saves the listing at `path` (written whole, then renamed over the old one);
    /// returns the BLAKE3 of the bytes written.
    pub(crate) fn save(&self, path: &Path) -> std::io::Result<cairn_store::Hash> {
        let saved = Saved {
            version: LISTING_VERSION,
            exclude: self.exclude,
            dirs: self
                .dirs
                .iter()
                .map(|d| SavedDir {
                    rel: d.rel.clone(),
                    stamp: d.stamp,
                    rules: d.rules,
                    files: d
                        .files
                        .iter()
                        .map(|f| (f.path[f.name_at..].to_string(), f.rank, f.special))
                        .collect(),
                })
                .collect(),
        };
        let bytes = serde_json::to_vec(&saved)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        std::io::Write::write_all(&mut tmp, &bytes)?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(cairn_store::Hash::of(&bytes))
    }
}

/// Lists the files of `root` the ignore rules admit (hidden files included, `.git`
/// left out), sorted by path, without hashing them; from `listing` when nothing in it
/// moved, which is then replaced by what this walk saw.
/// Also says whether the listing was reused: then the paths are those of the walk
/// before, in the same order.
pub(crate) fn walk(
    root: &Path,
    listing: &mut Option<Listing>,
    started_ns: i64,
) -> (Vec<Seen>, bool) {
    if let Some(l) = listing.as_ref()
        && let Some(seen) = rescan(root, l)
    {
        return (seen, true);
    }
    let (seen, fresh) = full_walk(root, started_ns);
    *listing = fresh;
    (seen, false)
}

fn stat_at(dir: impl AsFd, name: &str) -> Option<rustix::fs::Stat> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()
}

fn open_dir(root: impl AsFd, rel: &str) -> Option<OwnedFd> {
    let rel = if rel.is_empty() { "." } else { rel };
    rustix::fs::openat2(
        root,
        rel,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
    )
    .ok()
}

/// The files of `listing`, stat'ed again; `None` when the listing no longer holds.
fn rescan(root: &Path, listing: &Listing) -> Option<Vec<Seen>> {
    let parts = restat(root, listing, None)?;
    // Each file goes to its rank: the order of the full walk (by path), without
    // comparing a path.
    let mut slots: Vec<Option<Seen>> = Vec::with_capacity(listing.files);
    slots.resize_with(listing.files, || None);
    for (rank, s) in parts.into_iter().flatten() {
        let slot = &mut slots[rank as usize];
        assert!(slot.is_none(), "two listed files share rank {rank}");
        *slot = Some(s);
    }
    let seen: Vec<Seen> = slots.into_iter().flatten().collect();
    assert_eq!(
        seen.len(),
        listing.files,
        "a rank of the listing was left empty"
    );
    Some(seen)
}

/// The files of `listing` whose stamp is no longer the one in `before` (the scan
/// before's, by rank), with their ranks, in rank order: what a rescan must look at
/// again. `None` when the listing no longer holds (then walk the tree).
pub(crate) fn moved(
    root: &Path,
    listing: &Listing,
    before: &[FileStamp],
) -> Option<Vec<(u32, Seen)>> {
    assert_eq!(before.len(), listing.files, "one stamp per listed file");
    let mut moved: Vec<(u32, Seen)> = restat(root, listing, Some(before))?
        .into_iter()
        .flatten()
        .collect();
    moved.sort_unstable_by_key(|(rank, _)| *rank);
    Some(moved)
}

/// Stats every directory and file of `listing` again, the directories shared between
/// the cores; each directory's files (all, or with `before` only those whose stamp
/// moved), with their ranks. `None` when the listing no longer holds.
fn restat(
    root: &Path,
    listing: &Listing,
    before: Option<&[FileStamp]>,
) -> Option<Vec<Vec<(u32, Seen)>>> {
    let root_fd = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let exclude = stat_at(&root_fd, ".git/info/exclude").map(|s| Stamp::of(&s));
    if exclude != listing.exclude {
        return None;
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let next = AtomicUsize::new(0);
    let failed = std::sync::atomic::AtomicBool::new(false);
    // Directories are taken a few at a time by whichever thread is free.
    const STEP: usize = 16;
    let parts: Mutex<Vec<Vec<(u32, Seen)>>> = Mutex::new(Vec::new());
    let work = || {
        let mut mine = Vec::new();
        loop {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            let first = next.fetch_add(STEP, Ordering::Relaxed);
            if first >= listing.dirs.len() {
                break;
            }
            for dir in &listing.dirs[first..(first + STEP).min(listing.dirs.len())] {
                match rescan_dir(&root_fd, dir, before, &mut mine) {
                    Some(()) => {}
                    None => {
                        failed.store(true, Ordering::Relaxed);
                        return;
                    }
                }
            }
        }
        if let Ok(mut p) = parts.lock() {
            p.push(mine);
        }
    };
    std::thread::scope(|s| {
        // The calling thread takes a share too: one thread fewer to start.
        for _ in 1..threads {
            s.spawn(work);
        }
        work();
    });
    if failed.into_inner() {
        return None;
    }
    parts.into_inner().ok()
}

/// Stats `dir` and its files again, pushing to `out` each file (with `before`: each
/// whose stamp moved) with its rank; `None` when the directory or a file is no longer
/// what the listing says.
fn rescan_dir(
    root_fd: &OwnedFd,
    dir: &Dir,
    before: Option<&[FileStamp]>,
    out: &mut Vec<(u32, Seen)>,
) -> Option<()> {
    let fd = open_dir(root_fd, &dir.rel)?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if Stamp::of(&st) != dir.stamp {
        return None;
    }
    for (name, want) in RULE_FILES.iter().zip(&dir.rules) {
        if stat_at(&fd, name).map(|s| Stamp::of(&s)) != *want {
            return None;
        }
    }
    for f in &dir.files {
        let special = &f.special;
        let stamp = file_stamp(&fd, &f.path[f.name_at..], *special)?;
        if before.is_some_and(|b| b[f.rank as usize] == stamp) {
            continue;
        }
        out.push((f.rank, Seen::of(f.path.clone(), stamp, *special)));
    }
    Some(())
}

/// The `ignore` crate's walk, and the listing it makes (`None` when a stamp could not
/// be taken or is too recent to be trusted).
///
/// The walker only lists: the names its rules admit and their kinds, from the
/// directories' entries. Every stamp (each directory's, its rule files', each file's)
/// is then taken beneath the directory's descriptor, the directories shared between
/// the cores: one path component a lookup instead of a whole path, and no second pass
/// over the directories. A stamp taken after the walker read its directory is as good
/// as one taken at once: a change in between is recent, and a recent stamp is not
/// trusted.
fn full_walk(root: &Path, started_ns: i64) -> (Vec<Seen>, Option<Listing>) {
    struct Found {
        files: Vec<(String, Option<crate::manifest::Special>)>,
        dirs: Vec<String>,
        trusted: bool,
    }
    let found = Mutex::new(Found {
        files: Vec::new(),
        dirs: Vec::new(),
        trusted: true,
    });
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(true)
        .require_git(false)
        .parents(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build_parallel()
        .run(|| {
            let found = &found;
            Box::new(move |entry| {
                let Ok(entry) = entry else {
                    // A directory that could not be read: its listing is unknown.
                    if let Ok(mut f) = found.lock() {
                        f.trusted = false;
                    }
                    return ignore::WalkState::Continue;
                };
                let Some(ft) = entry.file_type() else {
                    return ignore::WalkState::Continue;
                };
                let Ok(rel) = entry.path().strip_prefix(root) else {
                    return ignore::WalkState::Continue;
                };
                let rel = rel.to_string_lossy().replace('\\', "/");
                let special = crate::manifest::Special::of(ft);
                if ft.is_dir() {
                    if let Ok(mut f) = found.lock() {
                        f.dirs.push(rel);
                    }
                } else if (ft.is_file() || special.is_some())
                    && let Ok(mut f) = found.lock()
                {
                    f.files.push((rel, special));
                }
                ignore::WalkState::Continue
            })
        });
    let Ok(mut found) = found.into_inner() else {
        return (Vec::new(), None);
    };
    found.files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let Some(root_fd) = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok() else {
        return (Vec::new(), None);
    };
    let recent = |s: &Stamp| s.mtime_ns.max(s.ctime_ns) >= started_ns.saturating_sub(RACY_NS);
    let exclude = stat_at(&root_fd, ".git/info/exclude").map(|s| Stamp::of(&s));
    let (mut dirs, orphans) = unstamped(found.dirs, &found.files);
    let (seen, stamped) = stamp_all(&root_fd, &mut dirs, found.files.len(), &recent);
    let trusted = found.trusted && orphans == 0 && stamped && !exclude.as_ref().is_some_and(recent);
    let listing = trusted.then_some(Listing {
        dirs,
        files: seen.len(),
        exclude,
    });
    (seen, listing)
}

/// The directories of a walk with the files it admitted under each, ranked by path
/// (`files` is sorted), their stamps not yet taken; and how many files lie in no
/// listed directory (none, from a walker that lists each directory it enters).
fn unstamped(
    mut rels: Vec<String>,
    files: &[(String, Option<crate::manifest::Special>)],
) -> (Vec<Dir>, usize) {
    rels.sort_unstable();
    let index: std::collections::HashMap<&str, usize> = rels
        .iter()
        .enumerate()
        .map(|(i, rel)| (rel.as_str(), i))
        .collect();
    let mut listed: Vec<Vec<Listed>> = Vec::with_capacity(rels.len());
    listed.resize_with(rels.len(), Vec::new);
    let mut orphans = 0;
    for (rank, (path, special)) in files.iter().enumerate() {
        let (dir, name_at) = match path.rfind('/') {
            Some(i) => (&path[..i], i + 1),
            None => ("", 0),
        };
        match (index.get(dir), u32::try_from(rank)) {
            (Some(&d), Ok(rank)) => listed[d].push(Listed {
                path: path.clone(),
                name_at,
                rank,
                special: *special,
            }),
            _ => orphans += 1,
        }
    }
    let unknown = Stamp {
        ino: 0,
        mtime_ns: i64::MIN,
        ctime_ns: i64::MIN,
    };
    let dirs = rels
        .into_iter()
        .zip(listed)
        .map(|(rel, files)| Dir {
            rel,
            stamp: unknown,
            rules: [None, None],
            files,
        })
        .collect();
    (dirs, orphans)
}

/// Takes the stamps of `dirs` (each directory's, its rule files', its files'), the
/// directories shared between the cores: the files seen, in rank order, and whether
/// every stamp was taken and none is `recent` (else the listing is not to be trusted;
/// a file that vanished or changed kind since the walk is left out).
fn stamp_all(
    root_fd: &OwnedFd,
    dirs: &mut [Dir],
    files: usize,
    recent: &(dyn Fn(&Stamp) -> bool + Sync),
) -> (Vec<Seen>, bool) {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    // Directories are taken a few at a time by whichever thread is free.
    const STEP: usize = 16;
    let chunks = Mutex::new(dirs.chunks_mut(STEP));
    let work = || {
        let (mut mine, mut held) = (Vec::new(), true);
        loop {
            let chunk = match chunks.lock() {
                Ok(mut c) => c.next(),
                Err(_) => None,
            };
            let Some(chunk) = chunk else { break };
            for dir in chunk {
                held &= stamp_dir(root_fd, dir, recent, &mut mine);
            }
        }
        (mine, held)
    };
    let parts: Vec<(Vec<(u32, Seen)>, bool)> = std::thread::scope(|s| {
        // The calling thread takes a share too: one thread fewer to start.
        let handles: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
        let mut parts = vec![work()];
        parts.extend(handles.into_iter().map(|h| h.join().unwrap_or_default()));
        parts
    });
    let mut held = true;
    let mut slots: Vec<Option<Seen>> = Vec::with_capacity(files);
    slots.resize_with(files, || None);
    for (part, h) in parts {
        held &= h;
        for (rank, s) in part {
            slots[rank as usize] = Some(s);
        }
    }
    let seen: Vec<Seen> = slots.into_iter().flatten().collect();
    let all = seen.len() == files;
    (seen, held && all)
}

/// Takes the stamps of `dir`, its rule files and its files beneath its descriptor,
/// pushing each file still of its kind with its rank; whether all were taken and
/// none is `recent`.
fn stamp_dir(
    root_fd: &OwnedFd,
    dir: &mut Dir,
    recent: &(dyn Fn(&Stamp) -> bool + Sync),
    out: &mut Vec<(u32, Seen)>,
) -> bool {
    let Some(fd) = open_dir(root_fd, &dir.rel) else {
        return false;
    };
    let Ok(st) = rustix::fs::fstat(&fd) else {
        return false;
    };
    dir.stamp = Stamp::of(&st);
    dir.rules = RULE_FILES.map(|name| stat_at(&fd, name).map(|s| Stamp::of(&s)));
    let mut held = !recent(&dir.stamp) && !dir.rules.iter().flatten().any(recent);
    for f in &dir.files {
        match file_stamp(&fd, &f.path[f.name_at..], f.special) {
            Some(stamp) => out.push((f.rank, Seen::of(f.path.clone(), stamp, f.special))),
            None => held = false,
        }
    }
    held
}

/// The stamp of the file `name` beneath `fd`, if it is still of the kind `special`
/// says (a regular file for `None`).
fn file_stamp(
    fd: &OwnedFd,
    name: &str,
    special: Option<crate::manifest::Special>,
) -> Option<FileStamp> {
    let st = stat_at(fd, name)?;
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => None,
        FileType::Fifo => Some(crate::manifest::Special::Fifo),
        FileType::Socket => Some(crate::manifest::Special::Socket),
        FileType::CharacterDevice => Some(crate::manifest::Special::CharDevice),
        FileType::BlockDevice => Some(crate::manifest::Special::BlockDevice),
        _ => return None,
    };
    (kind == special).then(|| FileStamp {
        size: u64::try_from(st.st_size).unwrap_or(0),
        mtime_ns: ns(st.st_mtime, st.st_mtime_nsec),
        ctime_ns: ns(st.st_ctime, st.st_ctime_nsec),
        mode: st.st_mode & 0o7777,
        ino: st.st_ino,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use cairn_core::permission::CredentialFiles;
    use cairn_store::{BlobStore, Hash};

    use crate::manifest::{ManifestEntry, ScanCache, scan_cached, scan_start, start_manifest};

    /// Sets the mtime of `path` to `secs` (past the racy window: the cache trusts it).
    fn set_mtime(path: &Path, secs: i64) {
        let t = rustix::fs::Timespec {
            tv_sec: secs,
            tv_nsec: 0,
        };
        rustix::fs::utimensat(
            rustix::fs::CWD,
            path,
            &rustix::fs::Timestamps {
                last_access: t,
                last_modification: t,
            },
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .unwrap();
    }

    struct Fixture {
        ws: tempfile::TempDir,
        home: tempfile::TempDir,
        blobs: BlobStore,
        cache: ScanCache,
    }

    impl Fixture {
        fn new() -> Fixture {
            let ws = tempfile::tempdir().unwrap();
            let home = tempfile::tempdir().unwrap();
            let blobs = BlobStore::open(&home.path().join("blobs")).unwrap();
            let cache = ScanCache::new(home.path().join("cache"), CredentialFiles::defaults());
            Fixture {
                ws,
                home,
                blobs,
                cache,
            }
        }
        fn write(&self, rel: &str, body: &str) {
            let p = self.ws.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        /// Rewrites `rel` with `body`, its mtime set back to what it was.
        fn rewrite_keeping_mtime(&self, rel: &str, body: &str) {
            let p = self.ws.path().join(rel);
            let mtime = std::fs::metadata(&p).unwrap().modified().unwrap();
            self.write(rel, body);
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
        }
        /// A new session's cache on the same file: nothing kept in memory.
        fn reopen(&mut self) {
            self.cache =
                ScanCache::new(self.home.path().join("cache"), CredentialFiles::defaults());
        }
        fn scan(&mut self) -> Vec<ManifestEntry> {
            scan_cached(self.ws.path(), &self.blobs, &mut self.cache).unwrap()
        }
        /// A session's start: its scan and the manifest blob it records.
        fn start(&mut self) -> (Vec<ManifestEntry>, cairn_store::BlobRef) {
            let files = scan_start(self.ws.path(), &self.blobs, &mut self.cache).unwrap();
            let blob = start_manifest(&self.blobs, &mut self.cache, &files, "").unwrap();
            (files, blob)
        }
        /// Scans until the cache trusts every stamp (the racy window has passed),
        /// so that the next scan takes the fast path.
        fn settle(&mut self) {
            std::thread::sleep(Duration::from_millis(2 * super::RACY_NS as u64 / 1_000_000));
            self.scan();
            self.scan();
            assert!(
                self.cache.has_listing(),
                "the listing is reused once settled"
            );
        }
        /// What the workspace holds: every file's path and hash, read from disk.
        fn truth(&self) -> Vec<(String, Hash)> {
            let mut out = Vec::new();
            for e in walkdir(self.ws.path(), self.ws.path()) {
                out.push(e);
            }
            out.sort();
            out
        }
    }

    fn walkdir(root: &Path, dir: &Path) -> Vec<(String, Hash)> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                out.extend(walkdir(root, &p));
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, Hash::of(&std::fs::read(&p).unwrap())));
            }
        }
        out
    }

    fn hashes(m: &[ManifestEntry]) -> Vec<(String, Hash)> {
        m.iter()
            .map(|e| (e.path.clone(), e.hash.unwrap()))
            .collect()
    }

    // Regression guard: same size, same mtime, other content (the mtime set back, as
    // `touch -r` or an archive extraction does) must not be vouched for by the cache.
    #[test]
    fn a_same_size_rewrite_with_its_mtime_set_back_is_caught() {
        let mut f = Fixture::new();
        f.write("d/a.txt", "aaaa");
        set_mtime(&f.ws.path().join("d/a.txt"), 1_600_000_000);
        f.settle();
        f.write("d/a.txt", "bbbb");
        set_mtime(&f.ws.path().join("d/a.txt"), 1_600_000_000);
        assert_eq!(
            hashes(&f.scan()),
            vec![("d/a.txt".into(), Hash::of(b"bbbb"))]
        );
    }

    // Regression guard: a file created in a listed folder whose mtime was then set back
    // (only its ctime moved) must still be found.
    #[test]
    fn a_file_created_in_a_folder_with_its_mtime_set_back_is_found() {
        let mut f = Fixture::new();
        f.write("d/a.txt", "a");
        set_mtime(&f.ws.path().join("d"), 1_600_000_000);
        f.settle();
        f.write("d/b.txt", "b");
        set_mtime(&f.ws.path().join("d"), 1_600_000_000);
        assert_eq!(f.scan().len(), 2);
        assert_eq!(hashes(&f.scan()), f.truth());
    }

    #[test]
    fn a_change_within_one_tick_of_the_scan_before_is_caught() {
        let mut f = Fixture::new();
        f.settle();
        // Written, scanned and rewritten with the same size and mtime at once: the
        // times cannot tell the two contents apart, the racy rule must.
        f.write("a.txt", "1111");
        f.scan();
        f.rewrite_keeping_mtime("a.txt", "2222");
        assert_eq!(hashes(&f.scan()), vec![("a.txt".into(), Hash::of(b"2222"))]);
    }

    #[test]
    fn an_ignore_file_edited_in_place_is_seen() {
        let mut f = Fixture::new();
        f.write(".gitignore", "x.log\n");
        f.write("x.log", "x");
        f.write("y.log", "y");
        let d = f.ws.path().to_path_buf();
        set_mtime(&d, 1_600_000_000);
        f.settle();
        let paths = |m: Vec<ManifestEntry>| m.into_iter().map(|e| e.path).collect::<Vec<_>>();
        assert_eq!(paths(f.scan()), [".gitignore", "y.log"]);
        // Same size, the folder's mtime untouched: only the rule file's stamp moves.
        f.write(".gitignore", "y.log\n");
        assert_eq!(paths(f.scan()), [".gitignore", "x.log"]);
    }

    #[test]
    fn changes_made_during_scans_are_all_caught_by_the_next() {
        let mut f = Fixture::new();
        for i in 0..200 {
            f.write(&format!("d{}/f{i}.txt", i % 10), "0000");
        }
        f.settle();
        let root = f.ws.path().to_path_buf();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut n = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    // Same size, new content, mtime set back; now and then a new file
                    // and a removed one.
                    let p = root.join(format!("d{}/f{}.txt", n % 10, n % 200));
                    std::fs::write(&p, format!("{:04}", n % 10_000)).unwrap();
                    set_mtime(&p, 1_600_000_000);
                    if n.is_multiple_of(7) {
                        std::fs::write(root.join(format!("d{}/new{n}.txt", n % 10)), "n").unwrap();
                        let _ = std::fs::remove_file(root.join(format!(
                            "d{}/new{}.txt",
                            n % 10,
                            n - 7
                        )));
                    }
                }
            });
            for _ in 0..30 {
                f.scan();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        assert_eq!(hashes(&f.scan()), f.truth());
        // And after the racy window, from the fast path.
        f.settle();
        assert_eq!(hashes(&f.scan()), f.truth());
    }

    // Regression guard: a listing saved by one session is only a hint to the next,
    // which must check it like its own: a file created (the folder's mtime set back)
    // and a same-size rewrite (the file's mtime set back) between two sessions.
    #[test]
    fn a_listing_saved_by_a_session_is_reused_and_checked_by_the_next() {
        let mut f = Fixture::new();
        f.write("d/a.txt", "aaaa");
        f.write("e/c.txt", "cccc");
        set_mtime(&f.ws.path().join("d/a.txt"), 1_600_000_000);
        set_mtime(&f.ws.path().join("d"), 1_600_000_000);
        f.settle();
        f.reopen();
        assert_eq!(hashes(&f.scan()), f.truth());
        assert!(
            f.cache.listing_reused(),
            "a warm start stats the listed files"
        );
        f.reopen();
        f.write("d/a.txt", "bbbb");
        set_mtime(&f.ws.path().join("d/a.txt"), 1_600_000_000);
        assert_eq!(hashes(&f.scan()), f.truth());
        f.settle();
        f.reopen();
        f.write("d/b.txt", "b");
        set_mtime(&f.ws.path().join("d"), 1_600_000_000);
        assert_eq!(hashes(&f.scan()), f.truth());
        assert!(!f.cache.listing_reused(), "the folder's ctime moved");
        assert_eq!(f.truth().len(), 3);
    }

    // Regression guard: a saved listing no walk could have made (a name that climbs
    // out of its folder, ranks out of path order, not JSON) is not used at all.
    #[test]
    fn a_saved_listing_no_walk_could_make_is_not_used() {
        let mut f = Fixture::new();
        f.write("d/a.txt", "a");
        f.write("d/b.txt", "b");
        f.settle();
        let file = f.home.path().join("cache.listing");
        let good = std::fs::read_to_string(&file).unwrap();
        assert!(
            good.contains(r#"["a.txt",0,null],["b.txt",1,null]"#),
            "{good}"
        );
        for bad in [
            good.replace(r#""a.txt""#, r#""../d/a.txt""#),
            good.replace(
                r#"["a.txt",0,null],["b.txt",1,null]"#,
                r#"["a.txt",1,null],["b.txt",0,null]"#,
            ),
            good.replace(r#"["b.txt",1,null]"#, r#"["b.txt",0,null]"#),
            "not json".to_string(),
        ] {
            assert_ne!(bad, good);
            std::fs::write(&file, &bad).unwrap();
            f.reopen();
            assert_eq!(hashes(&f.scan()), f.truth(), "{bad}");
            assert!(!f.cache.listing_reused(), "{bad}");
        }
        f.reopen();
        std::fs::write(&file, &good).unwrap();
        f.scan();
        assert!(f.cache.listing_reused(), "the good listing is used");
    }

    #[test]
    fn a_warm_start_where_nothing_moved_names_the_manifest_of_the_start_before() {
        let mut f = Fixture::new();
        f.write("d/a.txt", "aaaa");
        f.write("e/b.txt", "bb");
        f.settle();
        f.reopen();
        let (files, first) = f.start();
        assert!(!f.cache.manifest_reused(), "no start recorded one yet");
        assert_eq!(first.hash, Hash::of(&crate::manifest::to_jsonl(&files)));
        f.reopen();
        let (again, second) = f.start();
        assert!(f.cache.manifest_reused(), "neither serialised nor hashed");
        assert_eq!((again, second), (files, first));
    }

    /// Files in the blob store.
    fn blob_files(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                if e.file_type().unwrap().is_dir() {
                    blob_files(&e.path())
                } else {
                    1
                }
            })
            .sum()
    }

    #[test]
    fn a_warm_start_where_nothing_moved_takes_the_saved_stamps_and_stores_nothing() {
        let mut f = Fixture::new();
        f.write("d/a.txt", "aaaa");
        f.write("e/b.txt", "bb");
        f.write("e/.env", "TOKEN=1");
        f.settle();
        f.reopen();
        let (files, first) = f.start();
        let blobs = blob_files(f.blobs.root());
        // No cache file is written: the saved stamps vouch for every file.
        assert!(!f.home.path().join("cache").exists());
        f.reopen();
        let (again, second) = f.start();
        assert!(f.cache.stamps_loaded());
        assert!(f.cache.manifest_reused());
        assert_eq!((again, second), (files.clone(), first));
        assert_eq!(blob_files(f.blobs.root()), blobs, "no new manifest blob");
        assert!(files.iter().any(|e| e.path == "e/.env" && e.withheld));
    }

    // Regression guard: a stamps file that is damaged, cut short, of another version,
    // or holds a record no scan makes (its checksum made to hold) is not used: the
    // start takes the cache's path and is still right.
    #[test]
    fn a_damaged_truncated_or_old_stamps_file_is_not_used() {
        let mut f = Fixture::new();
        f.write("d/a.txt", "aaaa");
        f.write("d/b.txt", "bbbb");
        f.settle();
        f.reopen();
        let (files, _) = f.start();
        let file = f.home.path().join("cache.stamps");
        let good = std::fs::read(&file).unwrap();
        // Header 88 bytes, two records of 112, the checksum.
        assert_eq!(good.len(), 88 + 2 * 112 + 32);
        let resummed = |mut b: Vec<u8>| {
            let at = b.len() - 32;
            let sum = Hash::of(&b[..at]);
            b[at..].copy_from_slice(&sum.0);
            b
        };
        let mut flipped = good.clone();
        // The first record's BLAKE3 (the file stays the same length).
        flipped[88 + 48] ^= 1;
        let mut old = good.clone();
        old[8] = 0;
        let mut strange = good.clone();
        // A special kind no scan records.
        strange[88 + 37] = 9;
        let mut other_listing = good.clone();
        other_listing[24] ^= 1;
        for (what, bad) in [
            ("flipped", flipped.clone()),
            ("cut", good[..good.len() - 1].to_vec()),
            ("longer", [&good[..], &[0]].concat()),
            ("old version", resummed(old)),
            ("unknown kind", resummed(strange)),
            ("another listing", resummed(other_listing)),
            ("empty", Vec::new()),
        ] {
            std::fs::write(&file, &bad).unwrap();
            f.reopen();
            let (again, blob) = f.start();
            assert!(!f.cache.stamps_loaded(), "{what}");
            assert_eq!(again, files, "{what}");
            assert_eq!(blob.hash, Hash::of(&crate::manifest::to_jsonl(&again)));
            // The start saved good stamps again.
            assert_eq!(std::fs::read(&file).unwrap(), good, "{what}");
        }
        f.reopen();
        assert_eq!(f.start().0, files);
        assert!(f.cache.stamps_loaded());
        // Stamps saved with other credential files are not used.
        f.cache = ScanCache::new(
            f.home.path().join("cache"),
            CredentialFiles::new(&[]).unwrap(),
        );
        f.start();
        assert!(!f.cache.stamps_loaded());
    }

    // Regression guard: a rescan after a command that changed files writes neither the
    // cache nor the stamps (~15 MB at 50,000 files, off the command's path); the
    // session's end (its cache dropped) writes the stamps, and the next start takes
    // them. A session that dies before its end leaves the files of its start, and the
    // next start still sees every change. With the stamps saved, no cache file is
    // written (the stamps and their manifest are the cache).
    #[test]
    fn a_rescan_leaves_its_writes_to_the_sessions_end_and_a_dead_session_loses_no_change() {
        let mut f = Fixture::new();
        f.write("d/a.txt", "a");
        f.write("d/b.txt", "b");
        f.settle();
        f.reopen();
        f.start();
        let read = |p: &Path| std::fs::read(p).ok();
        let (cache, stamps) = (
            f.home.path().join("cache"),
            f.home.path().join("cache.stamps"),
        );
        let at_start = (read(&cache), read(&stamps));
        assert_eq!(at_start.0, None, "no cache file beside the stamps");
        assert!(at_start.1.is_some(), "the start saved its stamps");
        f.write("d/a.txt", "changed");
        f.write("d/c.txt", "new");
        let rescanned = f.scan();
        assert_eq!(hashes(&rescanned), f.truth());
        assert_eq!(
            (read(&cache), read(&stamps)),
            at_start,
            "a rescan writes neither"
        );
        // Past the racy window, so that the start keeps a listing and stamps.
        let past_racy =
            || std::thread::sleep(Duration::from_millis(2 * super::RACY_NS as u64 / 1_000_000));
        past_racy();
        // The session dies: its cache is never dropped.
        let dead = std::mem::replace(
            &mut f.cache,
            ScanCache::new(f.home.path().join("cache"), CredentialFiles::defaults()),
        );
        std::mem::forget(dead);
        let (after_death, _) = f.start();
        assert_eq!(after_death, rescanned);
        let at_second_start = (read(&cache), read(&stamps));
        assert_ne!(at_second_start, at_start, "a start writes at once");
        // A session that ends: dropping its cache saves what its rescans found.
        f.write("d/b.txt", "b, changed");
        past_racy();
        let ended = f.scan();
        assert_eq!(hashes(&ended), f.truth());
        assert_eq!((read(&cache), read(&stamps)), at_second_start);
        f.reopen();
        let at_end = (read(&cache), read(&stamps));
        assert_eq!(at_end.0, None, "no cache file beside the stamps");
        assert!(at_end.1.is_some());
        assert_ne!(at_end.1, at_second_start.1, "the end wrote the stamps");
        let (next, _) = f.start();
        assert!(
            f.cache.stamps_loaded(),
            "the next start takes the saved stamps"
        );
        assert_eq!(next, ended);
    }

    // Regression guard: a rescan where only some files' stamps moved puts the last
    // scan's manifest right file by file; after every change of a long run (contents
    // of every length, a same-size rewrite with its mtime set back, a mode change, a
    // credential file, changes within the racy window and after it) it must equal a
    // full scan with a cache of its own, and the truth on disk; and what the session
    // saves at its end must give the next start the same.
    #[test]
    fn a_rescan_of_files_that_moved_equals_a_full_scan_after_every_change() {
        use std::os::unix::fs::PermissionsExt;
        let mut f = Fixture::new();
        let names: Vec<String> = (0..24).map(|i| format!("d{}/f{i}.txt", i % 3)).collect();
        for n in &names {
            f.write(n, n);
        }
        f.write("d0/.env", "TOKEN=1");
        f.settle();
        let full = |f: &Fixture, k: usize| {
            let mut own = ScanCache::new(
                f.home.path().join(format!("full-{k}")),
                CredentialFiles::defaults(),
            );
            scan_cached(f.ws.path(), &f.blobs, &mut own).unwrap()
        };
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..60usize {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let name = &names[(x % names.len() as u64) as usize];
            let path = f.ws.path().join(name);
            match (x >> 8) % 6 {
                0 => f.write(name, &"y".repeat((x >> 16) as usize % 40)),
                1 => {
                    f.rewrite_keeping_mtime(name, &format!("{:>width$}", step, width = name.len()))
                }
                2 => {
                    let mode = std::fs::metadata(&path).unwrap().permissions().mode() ^ 0o100;
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
                }
                3 => f.write("d0/.env", &format!("TOKEN={step}")),
                4 => {
                    f.write(name, "");
                    f.write(
                        &names[(x >> 20) as usize % names.len()],
                        &format!("step {step}"),
                    );
                }
                _ => {}
            }
            if step % 20 == 19 {
                std::thread::sleep(Duration::from_millis(2 * super::RACY_NS as u64 / 1_000_000));
            }
            let rescanned = f.scan();
            assert!(f.cache.listing_reused(), "step {step}: no folder changed");
            assert_eq!(rescanned, full(&f, step), "step {step}");
            assert_eq!(hashes(&rescanned), f.truth(), "step {step}");
        }
        let last = f.scan();
        f.reopen();
        assert_eq!(f.start().0, last, "the next start, from what the end saved");
    }

    // Regression guard: a file added to a folder (its mtime set back) and one removed
    // between two sessions must be seen though the saved stamps are loaded.
    #[test]
    fn a_warm_start_from_saved_stamps_sees_a_file_added_and_one_removed() {
        let mut f = Fixture::new();
        f.write("d/a.txt", "a");
        f.write("e/c.txt", "c");
        f.write("e/k.txt", "k");
        f.settle();
        f.reopen();
        f.start();
        f.write("d/n.txt", "n");
        set_mtime(&f.ws.path().join("d"), 1_600_000_000);
        std::fs::remove_file(f.ws.path().join("e/c.txt")).unwrap();
        set_mtime(&f.ws.path().join("e"), 1_600_000_000);
        f.reopen();
        let (files, blob) = f.start();
        assert!(f.cache.stamps_loaded());
        assert!(!f.cache.manifest_reused());
        assert_eq!(hashes(&files), f.truth());
        assert_eq!(f.truth().len(), 3);
        assert_eq!(blob.hash, Hash::of(&crate::manifest::to_jsonl(&files)));
    }

    // Regression guard: a file rewritten with the same size and its mtime set back
    // between two sessions must not be hidden by the reused manifest.
    #[test]
    fn a_warm_start_sees_a_same_size_rewrite_with_its_mtime_set_back() {
        let mut f = Fixture::new();
        f.write("d/a.txt", "aaaa");
        set_mtime(&f.ws.path().join("d/a.txt"), 1_600_000_000);
        f.settle();
        f.reopen();
        let (_, first) = f.start();
        f.write("d/a.txt", "bbbb");
        set_mtime(&f.ws.path().join("d/a.txt"), 1_600_000_000);
        f.reopen();
        let (files, second) = f.start();
        assert!(f.cache.stamps_loaded(), "the saved stamps were compared");
        assert!(!f.cache.manifest_reused());
        assert_eq!(hashes(&files), vec![("d/a.txt".into(), Hash::of(b"bbbb"))]);
        assert_ne!(second, first);
        assert_eq!(second.hash, Hash::of(&crate::manifest::to_jsonl(&files)));
    }

    // Regression guard: a file changed within one clock tick of a start (same size,
    // same mtime) is hashed again by the next start, not vouched for.
    #[test]
    fn a_warm_start_sees_a_change_within_one_tick_of_the_start_before() {
        let mut f = Fixture::new();
        f.settle();
        f.write("a.txt", "1111");
        f.reopen();
        f.start();
        f.rewrite_keeping_mtime("a.txt", "2222");
        f.reopen();
        let (files, _) = f.start();
        assert!(!f.cache.manifest_reused());
        assert_eq!(hashes(&files), vec![("a.txt".into(), Hash::of(b"2222"))]);
    }

    // Regression guard: a start record that is damaged, made with other settings, or
    // names a blob no longer there sends the start down the full path.
    #[test]
    fn a_damaged_or_stale_start_record_is_not_used() {
        let mut f = Fixture::new();
        f.write("d/.env", "TOKEN=1");
        f.write("d/a.txt", "a");
        f.settle();
        f.reopen();
        let (files, first) = f.start();
        let record = f.home.path().join("cache.start");
        assert!(record.exists());
        let check = |f: &mut Fixture, reused: bool| {
            let (again, blob) = f.start();
            assert_eq!(f.cache.manifest_reused(), reused);
            assert_eq!(blob.hash, Hash::of(&crate::manifest::to_jsonl(&again)));
            again
        };
        std::fs::write(&record, b"{not json").unwrap();
        f.reopen();
        assert_eq!(check(&mut f, false), files);
        f.reopen();
        check(&mut f, true);
        // Other credential files: `.env` is no longer withheld.
        f.cache = ScanCache::new(
            f.home.path().join("cache"),
            CredentialFiles::new(&[]).unwrap(),
        );
        let kept = check(&mut f, false);
        assert!(kept.iter().all(|e| !e.withheld));
        // Back to the defaults: recorded anew, then reused, until the blob it names
        // is gone.
        f.reopen();
        assert_eq!(check(&mut f, false), files);
        f.reopen();
        check(&mut f, true);
        std::fs::remove_file(f.blobs.path(&first.hash)).unwrap();
        f.reopen();
        check(&mut f, false);
    }

    // Regression guard: a rescan takes the last scan's entry of every file whose stamp
    // holds; each kind of change to one file among many must still be seen.
    #[test]
    fn a_rescan_looks_again_at_what_moved_and_sees_every_change() {
        use std::os::unix::fs::PermissionsExt;
        let mut f = Fixture::new();
        for i in 0..60 {
            f.write(&format!("d{}/f{i}.txt", i % 3), "0000");
            set_mtime(
                &f.ws.path().join(format!("d{}/f{i}.txt", i % 3)),
                1_600_000_000,
            );
        }
        f.settle();
        let before = f.scan();
        assert!(f.cache.unmoved(), "nothing moved since the scan before");
        let a = f.ws.path().join("d1/f7.txt");
        // Same size, mtime set back.
        f.write("d1/f7.txt", "1111");
        set_mtime(&a, 1_600_000_000);
        assert_eq!(hashes(&f.scan()), f.truth());
        assert!(!f.cache.unmoved());
        // Rewritten again within the same tick: still seen.
        f.write("d1/f7.txt", "2222");
        set_mtime(&a, 1_600_000_000);
        assert_eq!(hashes(&f.scan()), f.truth());
        // Its mode only.
        std::fs::set_permissions(
            f.ws.path().join("d2/f8.txt"),
            PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let m = f.scan();
        assert_eq!(
            m.iter().find(|e| e.path == "d2/f8.txt").unwrap().mode,
            0o755
        );
        assert_eq!(hashes(&m), f.truth());
        // Settled again: the manifest of the scan before, every change in it.
        f.settle();
        let after = f.scan();
        assert!(f.cache.unmoved());
        assert_eq!(hashes(&after), f.truth());
        assert_ne!(after, before);
        assert_eq!(after.len(), before.len());
    }
}
