//! The workspace manifest: every regular file the ignore rules admit, with size, mode
//! and BLAKE3, each file's content stored as a blob — except credential files (the
//! session's `credential_files`), which are hashed by streaming and marked withheld:
//! their bytes never reach the home. FIFOs, sockets and devices are left out unread
//! (opening a FIFO would wait for a writer). A per-project cache keyed on path, size
//! and mtime (like git's index) saves re-hashing files that did not change.
//!
//! What is kept of a file (its BLAKE3 is always recorded, read from the file):
//! - git-backed (`git`: its blob id; capture `git`, the session-start scan only): a
//!   file git holds unchanged (see [`crate::git::CleanFiles`]) is read back from the
//!   repository's object store, not copied into the blob store;
//! - not kept (`not_kept`): a file over `capture_file_bytes_max` bytes, or a sparse
//!   file (one with a hole): hash and size only, never copied (so never densified);
//! - otherwise, and always with capture `full` (except credential files): a blob.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use cairn_core::permission::CredentialFiles;
use cairn_store::{BlobRef, BlobStore, Hash};
use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result, io_at};
use crate::git::{CleanFiles, GitOid};
use crate::open::open_regular;

/// How a session captures its workspace: `git` (the default) records files git
/// holds unchanged by their blob id; `full` copies every file into the blob store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capture {
    #[default]
    Git,
    Full,
}

impl std::str::FromStr for Capture {
    type Err = cairn_store::ParseNameError;
    fn from_str(s: &str) -> std::result::Result<Capture, cairn_store::ParseNameError> {
        match s {
            "git" => Ok(Capture::Git),
            "full" => Ok(Capture::Full),
            _ => Err(cairn_store::ParseNameError {
                what: "capture",
                name: s.to_string(),
                expected: &["git", "full"],
            }),
        }
    }
}

impl Capture {
    /// What a configuration recorded before there was a choice captured: everything.
    pub fn before_git() -> Capture {
        Capture::Full
    }
}

/// A special file of the workspace: recorded by kind and mode, never opened (opening a
/// FIFO waits for a writer; a device or socket has no content to keep).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Special {
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

impl Special {
    /// The kind of a file of type `ft`; `None` for a regular file, a directory or a
    /// symlink.
    pub fn of(ft: std::fs::FileType) -> Option<Special> {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            Some(Special::Fifo)
        } else if ft.is_socket() {
            Some(Special::Socket)
        } else if ft.is_char_device() {
            Some(Special::CharDevice)
        } else if ft.is_block_device() {
            Some(Special::BlockDevice)
        } else {
            None
        }
    }
}

/// Why a file's content was not kept (recorded by hash and size only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotKept {
    /// Larger than `capture_file_bytes_max`.
    TooLarge,
    /// A sparse file (it has a hole): copying it would write its holes out densely.
    Sparse,
}

impl NotKept {
    /// The reason, as a person reads it.
    pub fn reason(self) -> &'static str {
        match self {
            NotKept::TooLarge => {
                "larger than capture_file_bytes_max: recorded by hash and size only"
            }
            NotKept::Sparse => "a sparse file: recorded by hash and size only, never densified",
        }
    }
}

/// One file of the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// Workspace-relative, `/`-separated.
    pub path: String,
    pub size: u64,
    /// Unix permission bits.
    pub mode: u32,
    /// The content's BLAKE3. Absent only for a git-backed file recorded at a session's
    /// start without being read (`git` names its content exactly): found from the
    /// repository's object when first needed (see [`ManifestEntry::content_hash`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<Hash>,
    /// A credential file: recorded by hash, size and mode only, its content never
    /// stored as a blob. Absent (false) in manifests written before files were
    /// withheld, and in every entry that is not withheld.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub withheld: bool,
    /// Git-backed: the content is this git blob of the workspace's repository, not a
    /// blob of the store (`hash`, when present, is its BLAKE3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitOid>,
    /// The content was not kept, and why: no blob, no git object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_kept: Option<NotKept>,
    /// A special file (FIFO, socket, device): its kind, no hash, size 0; no checkout
    /// writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub special: Option<Special>,
}

impl ManifestEntry {
    /// Its content is a blob of the store.
    pub fn has_blob(&self) -> bool {
        !self.withheld && self.git.is_none() && self.not_kept.is_none() && self.special.is_none()
    }

    /// The content's BLAKE3: recorded, or (a git-backed entry recorded without it)
    /// computed from the git object in `objects`, checked against its id and size.
    /// `None` when neither is possible: the repository no longer has the object.
    pub fn content_hash(&self, objects: &crate::git::Objects) -> Option<Hash> {
        if let Some(h) = self.hash {
            return Some(h);
        }
        let (hash, len) = objects.content_hash(self.git.as_deref()?)?;
        (len == self.size).then_some(hash)
    }

    /// Whether `self` and `other` name the same content, when that can be told without
    /// reading anything: `Some(true)` for equal hashes, or the same git blob and size;
    /// `Some(false)` for different ones; `None` when only one side has a hash.
    pub fn same_content(&self, other: &ManifestEntry) -> Option<bool> {
        match (self.hash, other.hash, &self.git, &other.git) {
            (Some(a), Some(b), _, _) => Some(a == b),
            (_, _, Some(a), Some(b)) if a == b && self.size == other.size => Some(true),
            (None, None, Some(_), Some(_)) => Some(false),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct CacheEntry {
    path: String,
    size: u64,
    mtime_ns: i64,
    /// Compared as well as the mtime: a same-size rewrite whose mtime was set back
    /// still moves it. Absent (0) in caches written before: those entries are hashed
    /// once more.
    #[serde(default)]
    ctime_ns: i64,
    mode: u32,
    /// Absent for a git-backed file recorded without being read (as in the manifest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hash: Option<Hash>,
    /// The file was hashed without being stored: the cache vouches for its hash, not
    /// for a blob.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    withheld: bool,
    /// Hashed without being stored: git holds it (this blob id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    git: Option<GitOid>,
    /// Hashed without being stored: not kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    not_kept: Option<NotKept>,
}

/// The mtime a cache entry gets when it must be hashed again next time.
const SMUDGED: i64 = i64::MIN;

/// A project's manifest cache, read once and then kept in memory by a session that
/// scans again and again (after every command): parsing it is most of a no-change
/// scan's cost otherwise. It goes with the session's credential files: the files a
/// scan withholds.
#[derive(Debug)]
pub struct ScanCache {
    file: std::path::PathBuf,
    entries: Option<HashMap<String, CacheEntry>>,
    withheld: CredentialFiles,
    /// The directories and files of the last walk, reused while their stamps hold.
    listing: Option<crate::walk::Listing>,
    /// Which files of the last walk are credential files, in its order.
    withheld_of_listing: Vec<bool>,
    /// The listing saved beside the cache was looked for.
    listing_loaded: bool,
    /// The last walk reused the listing (tests look).
    listing_reused: bool,
    capture: Capture,
    file_bytes_max: u64,
    /// The last scan stored blobs (files it had to hash).
    pub stored_blobs: bool,
    /// The blobs the last scan stored, and a session start's manifest blob
    /// ([`start_manifest`]): what must be made durable before a record names them,
    /// each by its own `fsync` when they are few.
    pub stored: Vec<Hash>,
    /// The BLAKE3 of the saved listing as this session last read or wrote it (`None`:
    /// none saved or loaded).
    listing_digest: Option<Hash>,
    /// The same of the saved stamps (see [`crate::stamps`]): what `last` is, when set.
    last_digest: Option<Hash>,
    /// The last scan took the last scan's stamps and manifest from the saved file
    /// (tests look).
    stamps_loaded: bool,
    /// The last scan moved nothing: the listing held, every file's stamp matched its
    /// cache entry, nothing was hashed, the cache was not rewritten. Its manifest is
    /// then a function of the two files' contents and the session's settings.
    unmoved: bool,
    /// The last [`start_manifest`] named the manifest blob the start before recorded.
    manifest_reused: bool,
    /// The last scan's manifest, by rank of the listing, with each file's stamp: a
    /// rescan takes the entry of every file whose stamp holds without looking it up.
    last: Option<Last>,
    /// A rescan changed `entries` and `last` without writing them: they are written by
    /// [`ScanCache::save`], at the latest when the cache is dropped (the session's end).
    unsaved: bool,
}

/// A scan's manifest with one entry per file of the listing, in its order, and each
/// file's stamp (smudged when it changed too close to the scan to be vouched for).
#[derive(Debug)]
struct Last {
    stamps: Vec<crate::walk::FileStamp>,
    manifest: Vec<ManifestEntry>,
}

impl ScanCache {
    /// The cache kept in `file` (read on first use), for a session whose credential
    /// files are `withheld`.
    pub fn new(file: std::path::PathBuf, withheld: CredentialFiles) -> ScanCache {
        ScanCache {
            file,
            entries: None,
            withheld,
            listing: None,
            withheld_of_listing: Vec::new(),
            listing_loaded: false,
            listing_reused: false,
            capture: Capture::Full,
            file_bytes_max: u64::MAX,
            stored_blobs: false,
            stored: Vec::new(),
            listing_digest: None,
            last_digest: None,
            stamps_loaded: false,
            unmoved: false,
            manifest_reused: false,
            last: None,
            unsaved: false,
        }
    }

    /// The same cache for a session capturing with `capture`, keeping no file larger
    /// than `file_bytes_max` bytes.
    pub fn with_capture(mut self, capture: Capture, file_bytes_max: u64) -> ScanCache {
        self.capture = capture;
        self.file_bytes_max = file_bytes_max;
        self
    }
}

impl ScanCache {
    /// The file beside the cache whose name is the cache's with `suffix`.
    fn beside(&self, suffix: &str) -> std::path::PathBuf {
        let mut name = self.file.file_name().unwrap_or_default().to_os_string();
        name.push(suffix);
        self.file.with_file_name(name)
    }

    /// Where the last walk's listing is saved for the next session.
    fn listing_file(&self) -> std::path::PathBuf {
        self.beside(".listing")
    }

    /// The last scan took its files from the listing, without walking the tree.
    pub fn listing_reused(&self) -> bool {
        self.listing_reused
    }

    /// The last walk's listing is kept for the next (nothing in it was too recent).
    pub fn has_listing(&self) -> bool {
        self.listing.is_some()
    }

    /// The last scan moved nothing: its manifest is the one of the scan before (or,
    /// for a session's first, the one its cache and listing make).
    pub fn unmoved(&self) -> bool {
        self.unmoved
    }

    /// The last [`start_manifest`] reused the manifest blob of the start before: it
    /// neither serialised nor hashed the manifest.
    pub fn manifest_reused(&self) -> bool {
        self.manifest_reused
    }

    /// Where the start record is kept.
    fn start_file(&self) -> std::path::PathBuf {
        self.beside(".start")
    }

    /// The last scan took its stamps and manifest from the file the session before
    /// saved, without reading the cache.
    pub fn stamps_loaded(&self) -> bool {
        self.stamps_loaded
    }

    /// Where the last scan's stamps and manifest are saved.
    fn stamps_file(&self) -> std::path::PathBuf {
        self.beside(".stamps")
    }

    /// What a scan's entries depend on besides the files: the capture settings and
    /// the credential-file patterns, as bytes.
    fn settings(&self) -> Vec<u8> {
        let mut h = match self.capture {
            Capture::Git => b"git\0".to_vec(),
            Capture::Full => b"full".to_vec(),
        };
        h.extend_from_slice(&self.file_bytes_max.to_le_bytes());
        for p in self.withheld.patterns() {
            h.extend_from_slice(&(p.len() as u64).to_le_bytes());
            h.extend_from_slice(p.as_bytes());
        }
        h
    }

    /// What the manifest of the last scan is a function of, when it is one: the
    /// listing's and the saved stamps' bytes (the entries by rank), the session's
    /// settings, and `context` (what the caller filters out); `None` when either file
    /// is unknown.
    fn start_key(&self, context: &str) -> Option<Hash> {
        let (last, listing) = (self.last_digest?, self.listing_digest?);
        let mut h = b"cairn start manifest 2\0".to_vec();
        h.extend_from_slice(&last.0);
        h.extend_from_slice(&listing.0);
        h.extend_from_slice(&self.settings());
        h.extend_from_slice(&(context.len() as u64).to_le_bytes());
        h.extend_from_slice(context.as_bytes());
        Some(Hash::of(&h))
    }

    /// The stamps and manifest the session before saved, for the listing just
    /// loaded; `None` when there are none fit for it.
    fn load_last(&mut self) -> Option<Last> {
        let listing = self.listing.as_ref()?;
        let bytes = std::fs::read(self.stamps_file()).ok()?;
        let settings = Hash::of(&self.settings());
        let (stamps, manifest) =
            crate::stamps::decode(&bytes, listing, self.listing_digest.as_ref()?, &settings)?;
        self.last_digest = Some(crate::stamps::digest(&bytes));
        Some(Last { stamps, manifest })
    }

    /// Saves `last` for the next session's start (or removes the file when there is
    /// nothing to save); whether it saved them.
    fn save_last(&mut self) -> Result<bool> {
        let file = self.stamps_file();
        let settings = Hash::of(&self.settings());
        let bytes = match (&self.last, &self.listing_digest) {
            (Some(last), Some(listing)) => {
                crate::stamps::encode(listing, &settings, &last.stamps, &last.manifest)
            }
            _ => None,
        };
        self.last_digest = match bytes {
            Some(bytes) => {
                write_whole(&file, &bytes)?;
                Some(crate::stamps::digest(&bytes))
            }
            None => {
                remove_if_there(&file)?;
                None
            }
        };
        Ok(self.last_digest.is_some())
    }

    /// The cache's entries when none are in memory: the cache file's, and the last
    /// scan's by path (what a cache file written with it would hold: a scan that
    /// saves its stamps writes no cache file).
    fn entries_with(&self, last: Option<&Last>) -> HashMap<String, CacheEntry> {
        let mut cache = read_cache(&self.file);
        if let (Some(listing), Some(last)) = (&self.listing, last) {
            cache.reserve(last.manifest.len());
            for (rank, path, special) in listing.files_by_rank() {
                let r = rank as usize;
                let (Some(m), Some(st)) = (last.manifest.get(r), last.stamps.get(r)) else {
                    continue;
                };
                if special.is_some() || m.path != path {
                    continue;
                }
                cache.insert(
                    m.path.clone(),
                    CacheEntry {
                        path: m.path.clone(),
                        size: st.size,
                        // A racy file's stamp is smudged as its cache entry would be.
                        mtime_ns: st.mtime_ns,
                        ctime_ns: st.ctime_ns,
                        mode: st.mode,
                        hash: m.hash,
                        withheld: m.withheld,
                        git: m.git.clone(),
                        not_kept: m.not_kept,
                    },
                );
            }
        }
        cache
    }
}

impl ScanCache {
    /// Writes what rescans changed and left unwritten: the cache and the last scan's
    /// stamps and manifest, for the next session's start. A rescan (after a command)
    /// does not write them, to keep ~15 MB of writes at 50,000 files off the command's
    /// path; the session's end does. Both files are only ever a hint checked against
    /// every file's stat, so a session that dies before this leaves older ones, which
    /// cost the next start some hashing and are never wrong.
    pub fn save(&mut self) -> Result<()> {
        if !self.unsaved {
            return Ok(());
        }
        // With the stamps saved, the cache is theirs (`entries_with`): no file.
        if self.save_last()? {
            remove_if_there(&self.file)?;
        } else if let Some(entries) = &self.entries {
            let mut sorted: Vec<&CacheEntry> = entries.values().collect();
            sorted.sort_unstable_by(|a, b| a.path.cmp(&b.path));
            write_cache(&self.file, sorted.into_iter())?;
        }
        self.unsaved = false;
        Ok(())
    }
}

impl Drop for ScanCache {
    /// Saves what is unsaved; a failure only costs the next start some hashing.
    fn drop(&mut self) {
        let _ = self.save();
    }
}

/// The layout of a start record; a file of another version is not read.
const START_VERSION: u32 = 1;

/// What a session's start stored as its manifest, and what that manifest was made from
/// (its key: see [`ScanCache::start_key`]).
#[derive(Debug, Serialize, Deserialize)]
struct StartRecord {
    version: u32,
    key: Hash,
    manifest: BlobRef,
    files: u64,
}

/// The manifest blob of a session's start for `files`, the result of the start's scan
/// with `cache` (less what `context` names the caller filtered out). When that scan
/// moved nothing and the start before recorded a manifest made from the same cache,
/// listing and settings, `files` is that manifest: its blob is named again, neither
/// serialised nor hashed. Otherwise the manifest is stored and recorded for the next.
pub fn start_manifest(
    blobs: &BlobStore,
    cache: &mut ScanCache,
    files: &[ManifestEntry],
    context: &str,
) -> Result<BlobRef> {
    let key = cache.start_key(context);
    let record_file = cache.start_file();
    cache.manifest_reused = false;
    if cache.unmoved
        && let Some(key) = key
        && let Some(r) = std::fs::read(&record_file)
            .ok()
            .and_then(|b| serde_json::from_slice::<StartRecord>(&b).ok())
        && r.version == START_VERSION
        && r.key == key
        && r.files == files.len() as u64
        && blobs.has(&r.manifest.hash)
    {
        cache.manifest_reused = true;
        return Ok(r.manifest);
    }
    let manifest = blobs.put(&to_jsonl(files))?;
    cache.stored.push(manifest.hash);
    match key {
        Some(key) => {
            let record = StartRecord {
                version: START_VERSION,
                key,
                manifest,
                files: files.len() as u64,
            };
            let bytes = serde_json::to_vec(&record).map_err(|e| io_at(&record_file)(e.into()))?;
            write_whole(&record_file, &bytes)?;
        }
        None => remove_if_there(&record_file)?,
    }
    Ok(manifest)
}

/// A session's start: the workspace scanned as `cache` captures it ([`scan_start`]),
/// less the cairn home when it lies inside (`home_inner`, relative to `root`), and the
/// manifest blob of what is left ([`start_manifest`]).
pub fn capture_start(
    root: &Path,
    blobs: &BlobStore,
    cache: &mut ScanCache,
    home_inner: Option<&str>,
) -> Result<(Vec<ManifestEntry>, BlobRef)> {
    let mut files = scan_start(root, blobs, cache)?;
    if let Some(inner) = home_inner {
        files.retain(|f| !f.path.starts_with(inner));
    }
    let manifest = start_manifest(blobs, cache, &files, home_inner.unwrap_or(""))?;
    Ok((files, manifest))
}

/// Removes `path`; one that is not there is no error.
fn remove_if_there(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_at(path)(e)),
        _ => Ok(()),
    }
}

/// Writes `bytes` to `path` whole: a temporary file renamed over it.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_at(dir))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io_at(dir))?;
    tmp.write_all(bytes).map_err(io_at(path))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .map_err(io_at(path))?;
    Ok(())
}

/// Scans the workspace: hashes (and stores as blobs) what the cache does not vouch
/// for, rewrites the cache, and returns the manifest sorted by path. Files matching
/// `withheld` are hashed by streaming and never stored.
pub fn scan(
    root: &Path,
    blobs: &BlobStore,
    cache_file: &Path,
    withheld: &CredentialFiles,
) -> Result<Vec<ManifestEntry>> {
    scan_cached(
        root,
        blobs,
        &mut ScanCache::new(cache_file.to_path_buf(), withheld.clone()),
    )
}

/// The BLAKE3 and length of what `reader` yields, streaming, nothing stored: how a
/// withheld file is hashed.
pub fn hash_len(reader: impl std::io::Read) -> std::io::Result<(Hash, u64)> {
    struct Counting<R> {
        inner: R,
        len: u64,
    }
    impl<R: std::io::Read> std::io::Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.len += n as u64;
            Ok(n)
        }
    }
    let mut counting = Counting {
        inner: reader,
        len: 0,
    };
    let hash = cairn_store::hash_reader(&mut counting)?;
    Ok((hash, counting.len))
}

/// The scan at a session's start: [`scan_cached`], and with capture `git` every file
/// it has to hash that git holds unchanged is recorded by its blob id, not stored.
pub fn scan_start(
    root: &Path,
    blobs: &BlobStore,
    cache_state: &mut ScanCache,
) -> Result<Vec<ManifestEntry>> {
    scan_with(root, blobs, cache_state, true)
}

/// [`scan`] with a cache kept in memory between calls. It looks nothing up in git
/// (the rescan after a command: what a command changed is stored), but keeps a cache
/// entry that git backs when the file did not change.
pub fn scan_cached(
    root: &Path,
    blobs: &BlobStore,
    cache_state: &mut ScanCache,
) -> Result<Vec<ManifestEntry>> {
    scan_with(root, blobs, cache_state, false)
}

/// A sparse file: fewer blocks allocated than its size and, to be sure (compressed or
/// inline-data file systems allocate fewer blocks too), a hole before its end.
fn is_sparse(file: &std::fs::File, meta: &std::fs::Metadata) -> bool {
    meta.blocks().saturating_mul(512) < meta.len()
        && rustix::fs::seek(file, rustix::fs::SeekFrom::Hole(0)).is_ok_and(|at| at < meta.len())
}

/// A session's first scan starts from the listing the session before saved: a warm
/// start then stats the listed files instead of walking the tree; and from the
/// stamps and manifest it saved: then only what moved is looked up in the cache.
fn load_saved_start(cache_state: &mut ScanCache, listing_file: &Path) {
    if cache_state.listing_loaded {
        return;
    }
    cache_state.listing_loaded = true;
    if cache_state.listing.is_none() {
        let loaded = crate::walk::Listing::load(listing_file);
        cache_state.listing_digest = loaded.as_ref().map(|(_, digest)| *digest);
        cache_state.listing = loaded.map(|(listing, _)| listing);
        if cache_state.last.is_none() {
            cache_state.last = cache_state.load_last();
            cache_state.stamps_loaded = cache_state.last.is_some();
        }
    }
}

/// Saves a fresh walk's listing for the next session, and gives its digest.
fn save_listing(
    listing: Option<&crate::walk::Listing>,
    listing_file: &Path,
) -> Result<Option<Hash>> {
    Ok(match listing {
        Some(l) => Some(l.save(listing_file).map_err(io_at(listing_file))?),
        // Too recent to be trusted: the next session walks the tree.
        None => {
            remove_if_there(listing_file)?;
            None
        }
    })
}

/// The entries the cache still vouches for (and special files), by position in
/// `seen`, and the positions of the files left to look at.
fn from_cache_all(
    seen: &[crate::walk::Seen],
    cache: &HashMap<String, CacheEntry>,
    withheld: &[bool],
    capture: Capture,
    file_bytes_max: u64,
) -> (Vec<Option<ManifestEntry>>, Vec<usize>) {
    let mut entries: Vec<Option<ManifestEntry>> = vec![None; seen.len()];
    let mut todo = Vec::new();
    for (i, s) in seen.iter().enumerate() {
        if let Some(kind) = s.special {
            entries[i] = Some(special_entry(s, kind));
            continue;
        }
        match cache
            .get(&s.path)
            .and_then(|c| from_cache(c, s, withheld[i], capture, file_bytes_max))
        {
            Some(entry) => entries[i] = Some(entry),
            None => todo.push(i),
        }
    }
    (entries, todo)
}

/// A file git holds unchanged is recorded by its blob id from its stat alone: not
/// opened, not read, not hashed (its BLAKE3 is found from the object when first
/// needed); it leaves `todo`.
fn from_git_index(
    root: &Path,
    seen: &[crate::walk::Seen],
    withheld: &[bool],
    entries: &mut [Option<ManifestEntry>],
    todo: &mut Vec<usize>,
) {
    let Some(clean) = CleanFiles::open(root) else {
        return;
    };
    todo.retain(|&i| {
        let s = &seen[i];
        let oid = (!withheld[i]).then(|| clean.oid(&s.path, s)).flatten();
        let Some(oid) = oid else { return true };
        entries[i] = Some(ManifestEntry {
            path: s.path.clone(),
            size: s.size,
            mode: s.mode,
            hash: None,
            withheld: false,
            git: Some(oid),
            not_kept: None,
            special: None,
        });
        false
    });
}

/// What the next rescan starts from: one entry per listed file (none vanished), a
/// racy file's stamp smudged so that it is looked at again.
fn last_scan(
    listing: Option<&crate::walk::Listing>,
    seen: &[crate::walk::Seen],
    manifest: &[ManifestEntry],
    started_ns: i64,
) -> Option<Last> {
    (listing.is_some_and(|l| l.files() == seen.len()) && manifest.len() == seen.len()).then(|| {
        Last {
            stamps: seen
                .iter()
                .map(|s| {
                    if s.racy(started_ns) {
                        s.stamp().smudged()
                    } else {
                        s.stamp()
                    }
                })
                .collect(),
            manifest: manifest.to_vec(),
        }
    })
}

fn scan_with(
    root: &Path,
    blobs: &BlobStore,
    cache_state: &mut ScanCache,
    git_lookup: bool,
) -> Result<Vec<ManifestEntry>> {
    let started_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(i64::MAX, |d| {
            i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
        });
    cache_state.unmoved = false;
    cache_state.stamps_loaded = false;
    // A session's first scan starts from the listing the session before saved: a warm
    // start then stats the listed files instead of walking the tree; and from the
    // stamps and manifest it saved: then only what moved is looked up in the cache.
    let listing_file = cache_state.listing_file();
    load_saved_start(cache_state, &listing_file);
    let last = cache_state.last.take();
    let moved = match (&last, &cache_state.listing) {
        (Some(last), Some(listing)) => crate::walk::moved(root, listing, &last.stamps),
        _ => None,
    };
    // The cache a look-up starts from, when none is in memory: read before the walk
    // replaces the listing the last scan's stamps are ranked by.
    let mut read = None;
    let (seen, reused) = match (moved, last) {
        // Every file's stamp holds: the manifest is the last scan's.
        (Some(moved), Some(last)) if moved.is_empty() => {
            cache_state.listing_reused = true;
            cache_state.stored_blobs = false;
            cache_state.stored.clear();
            cache_state.unmoved = true;
            let manifest = last.manifest.clone();
            cache_state.last = Some(last);
            return Ok(manifest);
        }
        // A rescan where only some files moved: the last scan's manifest and stamps
        // with theirs put right, without a pass over every file.
        (Some(moved), Some(last)) if !git_lookup => {
            return patch(root, blobs, cache_state, last, moved, started_ns);
        }
        // Only the files that moved are looked at as a walk's would be; the others
        // are what the last scan saw.
        (Some(moved), Some(last)) => {
            if cache_state.entries.is_none() {
                read = Some(cache_state.entries_with(Some(&last)));
            }
            (since(last, moved), true)
        }
        (_, last) => {
            if cache_state.entries.is_none() {
                read = Some(cache_state.entries_with(last.as_ref()));
            }
            crate::walk::walk(root, &mut cache_state.listing, started_ns)
        }
    };
    let cache = match cache_state.entries.take() {
        Some(c) => c,
        None => read.unwrap_or_default(),
    };
    cache_state.listing_reused = reused;
    if !reused {
        cache_state.listing_digest = save_listing(cache_state.listing.as_ref(), &listing_file)?;
    }
    // A reused listing has the paths of the walk before, in its order: so has the
    // answer of the credential-file patterns (a few hundred nanoseconds a path).
    if !reused || cache_state.withheld_of_listing.len() != seen.len() {
        cache_state.withheld_of_listing = withheld_of(&seen, &cache_state.withheld);
    }
    let withheld = &cache_state.withheld_of_listing;
    let (capture, file_bytes_max) = (cache_state.capture, cache_state.file_bytes_max);
    let (mut entries, mut todo) = from_cache_all(&seen, &cache, withheld, capture, file_bytes_max);
    // Read only when some file has to be hashed: a warm start reads no index.
    if git_lookup && capture == Capture::Git && !todo.is_empty() {
        from_git_index(root, &seen, withheld, &mut entries, &mut todo);
    }
    let results = look_up_all(root, blobs, &todo, &seen, withheld, file_bytes_max);
    for (i, r) in results {
        // An error (the blob store cannot write) fails the scan: a file left out of the
        // manifest would make checkout and replay silently inexact.
        entries[i] = r?;
    }
    cache_state.stored = manifest_stored(&todo, &entries);
    cache_state.stored_blobs = !cache_state.stored.is_empty();
    let manifest: Vec<ManifestEntry> = entries.into_iter().flatten().collect();
    // Special files have no cache entry.
    let cached = manifest.iter().filter(|m| m.special.is_none()).count();
    cache_state.last = last_scan(cache_state.listing.as_ref(), &seen, &manifest, started_ns);
    // A session's start writes what it found at once (the start is what the next one
    // reuses); a rescan leaves it to `save`.
    let defer = !git_lookup;
    // With its stamps saved, a start's cache is theirs (`entries_with`): no file.
    let stamps_saved = if defer {
        cache_state.unsaved = true;
        // `last` is no longer what the saved file holds.
        cache_state.last_digest = None;
        false
    } else {
        cache_state.save_last()?
    };
    if todo.is_empty() && cache.len() == cached && !seen.iter().any(|s| s.racy(started_ns)) {
        // Nothing moved: the cache is already right.
        cache_state.entries = Some(cache);
        cache_state.unmoved = reused;
        return Ok(manifest);
    }
    if stamps_saved {
        remove_if_there(&cache_state.file)?;
        cache_state.entries = None;
    } else {
        fresh_cache(cache_state, &seen, &manifest, started_ns, !defer)?;
    }
    Ok(manifest)
}

/// Whether each file of `seen` is one of the session's credential files, the files
/// shared between the cores past a few thousand.
fn withheld_of(seen: &[crate::walk::Seen], withheld: &CredentialFiles) -> Vec<bool> {
    const SHARED_FROM: usize = 4096;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if seen.len() < SHARED_FROM || threads < 2 {
        return seen.iter().map(|s| withheld.matches(&s.path)).collect();
    }
    let part = seen.len().div_ceil(threads.min(8));
    std::thread::scope(|scope| {
        let handles: Vec<_> = seen
            .chunks(part)
            .map(|c| {
                let h = scope.spawn(move || c.iter().map(|s| withheld.matches(&s.path)).collect());
                (c.len(), h)
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|(n, h)| {
                // A thread that panicked answered nothing: its files count as
                // credential files (withheld, never stored), not as ordinary ones.
                h.join().unwrap_or_else(|_| vec![true; n])
            })
            .collect::<Vec<bool>>()
    })
}

/// Makes the cache anew from a scan's manifest (and writes it, with `write`).
fn fresh_cache(
    cache_state: &mut ScanCache,
    seen: &[crate::walk::Seen],
    manifest: &[ManifestEntry],
    started_ns: i64,
    write: bool,
) -> Result<()> {
    let by_path: HashMap<&str, &crate::walk::Seen> =
        seen.iter().map(|s| (s.path.as_str(), s)).collect();
    let fresh: Vec<CacheEntry> = manifest
        .iter()
        .filter(|m| m.special.is_none())
        .filter_map(|m| {
            by_path
                .get(m.path.as_str())
                .map(|s| cache_entry(m, s, started_ns))
        })
        .collect();
    if write {
        write_cache(&cache_state.file, fresh.iter())?;
    }
    cache_state.entries = Some(fresh.into_iter().map(|e| (e.path.clone(), e)).collect());
    Ok(())
}

/// The manifest entry the cache's entry `c` vouches for, for the file `s` seen now
/// (`withheld`: a credential file of the session), or `None` when the file must be
/// read again.
fn from_cache(
    c: &CacheEntry,
    s: &crate::walk::Seen,
    withheld: bool,
    capture: Capture,
    file_bytes_max: u64,
) -> Option<ManifestEntry> {
    // Blobs are never deleted, so a cache hit needs no look at the blob store; but an
    // entry hashed without its blob (withheld by this or another session's list,
    // git-backed, not kept) vouches for no blob, and a file this session keeps needs
    // one.
    let has_blob = !c.withheld && c.git.is_none() && c.not_kept.is_none();
    let kept_elsewhere = !c.withheld
        && match (&c.git, c.not_kept) {
            (Some(_), _) => capture == Capture::Git,
            (_, Some(NotKept::TooLarge)) => s.size > file_bytes_max,
            (_, Some(NotKept::Sparse)) => true,
            _ => false,
        };
    let holds = c.size == s.size
        && c.mtime_ns == s.mtime_ns
        && c.ctime_ns == s.ctime_ns
        && c.mode == s.mode
        && (withheld || has_blob || kept_elsewhere);
    holds.then(|| ManifestEntry {
        path: s.path.clone(),
        size: s.size,
        mode: s.mode,
        hash: c.hash,
        withheld,
        git: c.git.clone().filter(|_| !withheld),
        not_kept: c.not_kept.filter(|_| !withheld),
        special: None,
    })
}

/// Reads, hashes and (unless withheld, sparse or too large) stores the files of `seen`
/// ranked in `todo`, shared between the cores: each with its entry, or `None` for a
/// file that vanished, cannot be opened, or was swapped for a FIFO or a device since
/// it was seen (the workspace no longer has it as a readable file).
fn look_up_all(
    root: &Path,
    blobs: &BlobStore,
    todo: &[usize],
    seen: &[crate::walk::Seen],
    withheld: &[bool],
    file_bytes_max: u64,
) -> Vec<(usize, Result<Option<ManifestEntry>>)> {
    if todo.is_empty() {
        return Vec::new();
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8)
        .min(todo.len());
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    todo.iter()
                        .skip(t)
                        .step_by(threads)
                        .map(|&i| {
                            (
                                i,
                                look_up(root, blobs, &seen[i], withheld[i], file_bytes_max),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        // A hashing thread that panicked is a bug: it fails the scan loudly rather
        // than leaving its share of the files out of the manifest.
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// One file of [`look_up_all`].
fn look_up(
    root: &Path,
    blobs: &BlobStore,
    s: &crate::walk::Seen,
    withheld: bool,
    file_bytes_max: u64,
) -> Result<Option<ManifestEntry>> {
    let path = root.join(&s.path);
    let Ok((file, meta)) = open_regular(&path) else {
        return Ok(None);
    };
    let entry = |hash, size, git: Option<GitOid>, not_kept| ManifestEntry {
        path: s.path.clone(),
        size,
        mode: s.mode,
        hash: Some(hash),
        withheld,
        git,
        not_kept,
        special: None,
    };
    let elsewhere = if withheld {
        Some((None, None))
    } else if is_sparse(&file, &meta) {
        Some((None, Some(NotKept::Sparse)))
    } else if meta.len() > file_bytes_max {
        Some((None, Some(NotKept::TooLarge)))
    } else {
        None
    };
    if let Some((git, not_kept)) = elsewhere {
        hash_len(file)
            .map(|(hash, len)| Some(entry(hash, len, git, not_kept)))
            .map_err(io_at(&path))
    } else {
        blobs
            .put_reader(file)
            .map(|b| Some(entry(b.hash, b.len, None, None)))
            .map_err(EngineError::from)
    }
}

/// The entry of a FIFO, socket or device: recorded by kind, never opened.
fn special_entry(s: &crate::walk::Seen, kind: Special) -> ManifestEntry {
    ManifestEntry {
        path: s.path.clone(),
        size: 0,
        mode: s.mode,
        hash: None,
        withheld: false,
        git: None,
        not_kept: None,
        special: Some(kind),
    }
}

/// The cache's entry for `m`, the entry of the file seen as `s` by a scan that started
/// at `started_ns` (smudged when the file changed too close to it to be vouched for).
fn cache_entry(m: &ManifestEntry, s: &crate::walk::Seen, started_ns: i64) -> CacheEntry {
    CacheEntry {
        path: m.path.clone(),
        size: m.size,
        mtime_ns: if s.racy(started_ns) {
            SMUDGED
        } else {
            s.mtime_ns
        },
        ctime_ns: s.ctime_ns,
        mode: m.mode,
        hash: m.hash,
        withheld: m.withheld,
        git: m.git.clone(),
        not_kept: m.not_kept,
    }
}

/// A rescan's scan when the listing held and only the files of `moved` (rank, as seen
/// now) have another stamp than `last`'s: `last`'s manifest and stamps with those
/// files' entries put right (taken from the cache, or read and hashed) and the cache's
/// entries for them. It gives what a pass over every file gives (a test compares),
/// at the cost of the files that moved; the rest is left for [`ScanCache::save`].
fn patch(
    root: &Path,
    blobs: &BlobStore,
    cache_state: &mut ScanCache,
    mut last: Last,
    moved: Vec<(u32, crate::walk::Seen)>,
    started_ns: i64,
) -> Result<Vec<ManifestEntry>> {
    cache_state.listing_reused = true;
    cache_state.unmoved = false;
    let read = cache_state
        .entries
        .is_none()
        .then(|| cache_state.entries_with(Some(&last)));
    let cache = cache_state
        .entries
        .get_or_insert_with(|| read.unwrap_or_default());
    if cache_state.withheld_of_listing.len() != last.manifest.len() {
        cache_state.withheld_of_listing = last
            .manifest
            .iter()
            .map(|m| cache_state.withheld.matches(&m.path))
            .collect();
    }
    let (ranks, seen): (Vec<usize>, Vec<crate::walk::Seen>) =
        moved.into_iter().map(|(r, s)| (r as usize, s)).unzip();
    let withheld: Vec<bool> = ranks
        .iter()
        .map(|&r| cache_state.withheld_of_listing[r])
        .collect();
    let (capture, file_bytes_max) = (cache_state.capture, cache_state.file_bytes_max);
    let mut entries: Vec<Option<ManifestEntry>> = vec![None; seen.len()];
    let mut todo = Vec::new();
    for (i, s) in seen.iter().enumerate() {
        entries[i] = match s.special {
            Some(kind) => Some(special_entry(s, kind)),
            None => cache
                .get(&s.path)
                .and_then(|c| from_cache(c, s, withheld[i], capture, file_bytes_max)),
        };
        if entries[i].is_none() {
            todo.push(i);
        }
    }
    for (i, r) in look_up_all(root, blobs, &todo, &seen, &withheld, file_bytes_max) {
        // As in a full scan: an error fails the scan.
        entries[i] = r?;
    }
    cache_state.stored = manifest_stored(&todo, &entries);
    cache_state.stored_blobs = !cache_state.stored.is_empty();
    let mut vanished = Vec::new();
    for ((rank, s), entry) in ranks.into_iter().zip(&seen).zip(entries) {
        match entry {
            Some(m) => {
                if m.special.is_none() {
                    cache.insert(m.path.clone(), cache_entry(&m, s, started_ns));
                } else {
                    cache.remove(&m.path);
                }
                last.stamps[rank] = if s.racy(started_ns) {
                    s.stamp().smudged()
                } else {
                    s.stamp()
                };
                last.manifest[rank] = m;
            }
            None => {
                cache.remove(&s.path);
                vanished.push(rank);
            }
        }
    }
    cache_state.unsaved = true;
    cache_state.last_digest = None;
    if vanished.is_empty() {
        let manifest = last.manifest.clone();
        cache_state.last = Some(last);
        return Ok(manifest);
    }
    // A file went while it was read: no entry for it, and no last scan to build on
    // (the next rescan walks), as in a full scan.
    let mut vanished = vanished.into_iter().peekable();
    Ok(last
        .manifest
        .into_iter()
        .enumerate()
        .filter(|(rank, _)| vanished.next_if_eq(rank).is_none())
        .map(|(_, m)| m)
        .collect())
}

/// The files of the last scan's listing, with those that `moved` (by rank, in rank
/// order) as they are now and the others as the last scan saw them.
fn since(last: Last, moved: Vec<(u32, crate::walk::Seen)>) -> Vec<crate::walk::Seen> {
    let mut moved = moved.into_iter().peekable();
    let mut seen = Vec::with_capacity(last.manifest.len());
    for (rank, (m, stamp)) in last.manifest.into_iter().zip(last.stamps).enumerate() {
        match moved.next_if(|(r, _)| *r as usize == rank) {
            Some((_, s)) => seen.push(s),
            None => seen.push(crate::walk::Seen::of(m.path, stamp, m.special)),
        }
    }
    assert!(moved.next().is_none(), "a moved file beyond the listing");
    seen
}

/// Whether the files hashed (`todo`) stored any blob.
fn manifest_stored(todo: &[usize], entries: &[Option<ManifestEntry>]) -> Vec<Hash> {
    todo.iter()
        .filter_map(|&i| entries[i].as_ref().filter(|e| e.has_blob())?.hash)
        .collect()
}

/// The manifest as JSON Lines (what is stored as the manifest blob).
pub fn to_jsonl(manifest: &[ManifestEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in manifest {
        if serde_json::to_writer(&mut out, e).is_ok() {
            out.push(b'\n');
        }
    }
    out
}

/// Parses a manifest blob. An entry without a hash must name its git blob.
pub fn from_jsonl(bytes: &[u8]) -> Result<Vec<ManifestEntry>> {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| {
            let bad = |source| EngineError::BadManifest {
                line: i + 1,
                source,
            };
            let e: ManifestEntry = serde_json::from_slice(l).map_err(bad)?;
            if e.hash.is_none() && e.git.is_none() && e.special.is_none() {
                return Err(bad(<serde_json::Error as serde::de::Error>::custom(
                    "an entry without `hash` must have `git` (its content's blob id) or `special` (its kind)",
                )));
            }
            Ok(e)
        })
        .collect()
}

/// The cache's entries by path (none when there is no cache).
fn read_cache(path: &Path) -> HashMap<String, CacheEntry> {
    let Ok(bytes) = std::fs::read(path) else {
        return HashMap::new();
    };
    bytes
        .split(|&b| b == b'\n')
        .filter_map(|l| serde_json::from_slice::<CacheEntry>(l).ok())
        .map(|e| (e.path.clone(), e))
        .collect()
}

/// Writes the cache whole.
fn write_cache<'a>(path: &Path, entries: impl Iterator<Item = &'a CacheEntry>) -> Result<()> {
    let mut bytes = Vec::new();
    for e in entries {
        serde_json::to_writer(&mut bytes, e).map_err(|e| io_at(path)(e.into()))?;
        bytes.push(b'\n');
    }
    write_whole(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
        let ws = tempfile::tempdir().unwrap();
        for (p, body) in files {
            std::fs::write(ws.path().join(p), body).unwrap();
        }
        ws
    }

    // Guards the split of the credential-file patterns between threads: past the
    // size it is shared from, every file keeps its own answer, in order.
    #[test]
    fn credential_files_are_told_apart_in_order_when_the_match_is_shared() {
        let withheld = CredentialFiles::defaults();
        for n in [4095, 4096, 4097, 10_001] {
            let seen: Vec<crate::walk::Seen> = (0..n)
                .map(|i| {
                    let path = match i % 7 {
                        0 => format!("d{i}/.env"),
                        3 => format!("d{i}/id_rsa"),
                        _ => format!("d{i}/f.rs"),
                    };
                    crate::walk::Seen::of(
                        path,
                        crate::walk::FileStamp {
                            size: 1,
                            mtime_ns: 1,
                            ctime_ns: 1,
                            mode: 0o644,
                            ino: 1,
                        },
                        None,
                    )
                })
                .collect();
            let serial: Vec<bool> = seen.iter().map(|s| withheld.matches(&s.path)).collect();
            assert_eq!(withheld_of(&seen, &withheld), serial, "{n} files");
            let credentials = (0..n).filter(|i| i % 7 == 0 || i % 7 == 3).count();
            assert_eq!(
                serial.iter().filter(|w| **w).count(),
                credentials,
                "{n} files"
            );
        }
    }

    #[test]
    fn special_files_are_recorded_by_kind_unread() {
        let ws = workspace(&[("a.txt", "a")]);
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            ws.path().join("fifo"),
            rustix::fs::Mode::from(0o600),
        )
        .unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(ws.path().join("sock")).unwrap();
        let home = tempfile::tempdir().unwrap();
        let blobs = BlobStore::open(&home.path().join("blobs")).unwrap();
        let m = scan(
            ws.path(),
            &blobs,
            &home.path().join("cache"),
            &CredentialFiles::defaults(),
        )
        .unwrap();
        let kinds: Vec<(&str, Option<Special>, bool)> = m
            .iter()
            .map(|e| (e.path.as_str(), e.special, e.hash.is_some()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("a.txt", None, true),
                ("fifo", Some(Special::Fifo), false),
                ("sock", Some(Special::Socket), false)
            ]
        );
    }

    #[test]
    fn scan_keeps_every_file() {
        let ws = workspace(&[("a.txt", "a"), ("b.txt", "b")]);
        let home = tempfile::tempdir().unwrap();
        let blobs = BlobStore::open(&home.path().join("blobs")).unwrap();
        let m = scan(
            ws.path(),
            &blobs,
            &home.path().join("cache"),
            &CredentialFiles::defaults(),
        )
        .unwrap();
        let paths: Vec<&str> = m.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["a.txt", "b.txt"]);
    }

    /// What a start stored is named, so that the recorder fsyncs those blobs and not
    /// the file system: the files it had to keep (not a withheld one), then the
    /// manifest.
    #[test]
    fn a_start_names_the_blobs_it_stored() {
        let ws = workspace(&[("a.txt", "a"), ("b.txt", "b"), (".env", "K=v")]);
        let home = tempfile::tempdir().unwrap();
        let blobs = BlobStore::open(&home.path().join("blobs")).unwrap();
        let mut cache = ScanCache::new(home.path().join("cache"), CredentialFiles::defaults());
        let (files, manifest) = capture_start(ws.path(), &blobs, &mut cache, None).unwrap();
        let kept: Vec<Hash> = ["a", "b"].iter().map(|b| Hash::of(b.as_bytes())).collect();
        assert_eq!(cache.stored, [kept[0], kept[1], manifest.hash]);
        assert!(files.iter().any(|f| f.path == ".env" && f.withheld));
    }

    // Regression: a blob that could not be written left its file out of the manifest,
    // silently, which made checkout and replay inexact.
    #[test]
    fn a_blob_write_failure_fails_the_scan() {
        let ws = workspace(&[("a.txt", "a")]);
        let home = tempfile::tempdir().unwrap();
        let blobs = BlobStore::open(&home.path().join("blobs")).unwrap();
        // The blob store's temporary folder is a file: every blob write fails (as root,
        // permissions would not stop it).
        let tmp = home.path().join("blobs/tmp");
        std::fs::remove_dir_all(&tmp).unwrap();
        std::fs::write(&tmp, "not a folder").unwrap();
        let err = scan(
            ws.path(),
            &blobs,
            &home.path().join("cache"),
            &CredentialFiles::defaults(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("blobs/tmp"), "{err}");
    }

    fn blob_count(blobs: &BlobStore) -> usize {
        let mut n = 0;
        for d in std::fs::read_dir(blobs.root()).unwrap() {
            let d = d.unwrap();
            if d.file_name() != "tmp" && d.path().is_dir() {
                n += std::fs::read_dir(d.path()).unwrap().count();
            }
        }
        n
    }

    #[test]
    fn credential_files_are_hashed_and_withheld_never_stored() {
        let ws = workspace(&[
            ("a.txt", "a"),
            (".env", "TOKEN=abcdefgh"),
            ("id_rsa", "key"),
        ]);
        let home = tempfile::tempdir().unwrap();
        let blobs = BlobStore::open(&home.path().join("blobs")).unwrap();
        let cache = home.path().join("cache");
        let files = CredentialFiles::defaults();
        let expected = vec![
            ManifestEntry {
                path: ".env".into(),
                size: 14,
                mode: 0o644,
                hash: Some(Hash::of(b"TOKEN=abcdefgh")),
                withheld: true,
                git: None,
                not_kept: None,
                special: None,
            },
            ManifestEntry {
                path: "a.txt".into(),
                size: 1,
                mode: 0o644,
                hash: Some(Hash::of(b"a")),
                withheld: false,
                git: None,
                not_kept: None,
                special: None,
            },
            ManifestEntry {
                path: "id_rsa".into(),
                size: 3,
                mode: 0o644,
                hash: Some(Hash::of(b"key")),
                withheld: true,
                git: None,
                not_kept: None,
                special: None,
            },
        ];
        let mut m = scan(ws.path(), &blobs, &cache, &files).unwrap();
        for e in &mut m {
            e.mode = 0o644;
        }
        assert_eq!(m, expected);
        assert!(blobs.has(&Hash::of(b"a")));
        assert!(!blobs.has(&Hash::of(b"TOKEN=abcdefgh")));
        assert!(!blobs.has(&Hash::of(b"key")));
        assert_eq!(blob_count(&blobs), 1);
        // The cache vouches for the hash of a withheld file the next time, still
        // without a blob.
        let again = scan(ws.path(), &blobs, &cache, &files).unwrap();
        assert_eq!(
            again
                .iter()
                .map(|e| (e.hash, e.withheld))
                .collect::<Vec<_>>(),
            expected
                .iter()
                .map(|e| (e.hash, e.withheld))
                .collect::<Vec<_>>()
        );
        assert_eq!(blob_count(&blobs), 1);
    }

    // Regression guard: a cache entry hashed without its blob (withheld) must not
    // vouch for a blob when a session with another list keeps the file.
    #[test]
    fn a_file_withheld_before_is_stored_when_a_session_keeps_it() {
        let ws = workspace(&[(".env", "TOKEN=abcdefgh")]);
        let home = tempfile::tempdir().unwrap();
        let blobs = BlobStore::open(&home.path().join("blobs")).unwrap();
        let cache = home.path().join("cache");
        scan(ws.path(), &blobs, &cache, &CredentialFiles::defaults()).unwrap();
        assert!(!blobs.has(&Hash::of(b"TOKEN=abcdefgh")));
        let none = CredentialFiles::new(&[]).unwrap();
        let m = scan(ws.path(), &blobs, &cache, &none).unwrap();
        assert!(!m[0].withheld);
        assert!(blobs.has(&Hash::of(b"TOKEN=abcdefgh")));
    }

    #[test]
    fn old_manifest_entries_read_as_kept_and_kept_entries_write_as_before() {
        let h = Hash::of(b"a");
        let old = format!(r#"{{"path":"a.txt","size":1,"mode":420,"hash":"{h}"}}"#);
        let entries = from_jsonl(format!("{old}\n").as_bytes()).unwrap();
        assert_eq!(
            entries,
            vec![ManifestEntry {
                path: "a.txt".into(),
                size: 1,
                mode: 0o644,
                hash: Some(h),
                withheld: false,
                git: None,
                not_kept: None,
                special: None,
            }]
        );
        // A kept entry is written byte for byte as before (manifests of sessions
        // without credential files keep their hash); a withheld one says so.
        assert_eq!(to_jsonl(&entries), format!("{old}\n").into_bytes());
        let withheld = ManifestEntry {
            withheld: true,
            git: None,
            not_kept: None,
            special: None,
            ..entries[0].clone()
        };
        assert_eq!(
            String::from_utf8(to_jsonl(&[withheld])).unwrap(),
            format!(r#"{{"path":"a.txt","size":1,"mode":420,"hash":"{h}","withheld":true}}"#)
                + "\n"
        );
    }
}
