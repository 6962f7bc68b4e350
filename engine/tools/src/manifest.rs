//! The workspace manifest: every regular file the ignore rules admit, with size, mode
//! and BLAKE3, each file's content stored as a blob — except credential files (the
//! session's `credential_files`), which are hashed by streaming and marked withheld:
//! their bytes never reach the home. FIFOs, sockets and devices are left out unread
//! (opening a FIFO would wait for a writer). A per-project cache keyed on path, size
//! and mtime (like git's index) saves re-hashing files that did not change.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use cairn_core::permission::CredentialFiles;
use cairn_store::{BlobStore, Hash};
use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result, io_at};
use crate::open::open_regular;

/// One file of the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// Workspace-relative, `/`-separated.
    pub path: String,
    pub size: u64,
    /// Unix permission bits.
    pub mode: u32,
    pub hash: Hash,
    /// A credential file: recorded by hash, size and mode only, its content never
    /// stored as a blob. Absent (false) in manifests written before files were
    /// withheld, and in every entry that is not withheld.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub withheld: bool,
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
    hash: Hash,
    /// The file was hashed without being stored: the cache vouches for its hash, not
    /// for a blob.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    withheld: bool,
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
    /// The last scan stored blobs (files it had to hash).
    pub stored_blobs: bool,
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
            stored_blobs: false,
        }
    }
}

impl ScanCache {
    /// The last walk's listing is kept for the next (nothing in it was too recent).
    pub fn has_listing(&self) -> bool {
        self.listing.is_some()
    }
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

/// [`scan`] with a cache kept in memory between calls.
pub fn scan_cached(
    root: &Path,
    blobs: &BlobStore,
    cache_state: &mut ScanCache,
) -> Result<Vec<ManifestEntry>> {
    let started_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(i64::MAX, |d| {
            i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
        });
    let cache_file = cache_state.file.clone();
    let cache = match cache_state.entries.take() {
        Some(c) => c,
        None => read_cache(&cache_file),
    };
    let seen = crate::walk::walk(root, &mut cache_state.listing, started_ns);
    // Matched at every scan (a few hundred nanoseconds a path): cheap beside the walk.
    let withheld: Vec<bool> = seen
        .iter()
        .map(|s| cache_state.withheld.matches(&s.path))
        .collect();
    let mut entries: Vec<Option<ManifestEntry>> = vec![None; seen.len()];
    let mut todo = Vec::new();
    for (i, s) in seen.iter().enumerate() {
        match cache.get(&s.path) {
            // Blobs are never deleted, so a cache hit needs no look at the blob store;
            // but an entry hashed without its blob (withheld by this or another
            // session's list) vouches for no blob, and a file this session keeps
            // needs one.
            Some(c)
                if c.size == s.size
                    && c.mtime_ns == s.mtime_ns
                    && c.ctime_ns == s.ctime_ns
                    && (withheld[i] || !c.withheld) =>
            {
                entries[i] = Some(ManifestEntry {
                    path: s.path.clone(),
                    size: s.size,
                    mode: s.mode,
                    hash: c.hash,
                    withheld: withheld[i],
                });
            }
            _ => todo.push(i),
        }
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let results: Vec<(usize, Result<Option<ManifestEntry>>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let todo = &todo;
                let seen = &seen;
                let withheld = &withheld;
                scope.spawn(move || {
                    todo.iter()
                        .skip(t)
                        .step_by(threads)
                        .map(|&i| {
                            let s = &seen[i];
                            // A file that vanished, cannot be opened, or was swapped for
                            // a FIFO or a device since the walk is left out (`None`):
                            // the workspace no longer has it as a readable file.
                            let path = root.join(&s.path);
                            let Ok((file, _)) = open_regular(&path) else {
                                return (i, Ok(None));
                            };
                            let entry = |hash, size| ManifestEntry {
                                path: s.path.clone(),
                                size,
                                mode: s.mode,
                                hash,
                                withheld: withheld[i],
                            };
                            let r = if withheld[i] {
                                hash_len(file)
                                    .map(|(hash, len)| Some(entry(hash, len)))
                                    .map_err(io_at(&path))
                            } else {
                                blobs
                                    .put_reader(file)
                                    .map(|b| Some(entry(b.hash, b.len)))
                                    .map_err(EngineError::from)
                            };
                            (i, r)
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
    });
    for (i, r) in results {
        // An error (the blob store cannot write) fails the scan: a file left out of the
        // manifest would make checkout and replay silently inexact.
        entries[i] = r?;
    }
    cache_state.stored_blobs = !todo.is_empty();
    let manifest: Vec<ManifestEntry> = entries.into_iter().flatten().collect();
    if todo.is_empty() && cache.len() == manifest.len() && !seen.iter().any(|s| s.racy(started_ns))
    {
        // Nothing moved: the cache is already right.
        cache_state.entries = Some(cache);
        return Ok(manifest);
    }
    let by_path: HashMap<&str, &crate::walk::Seen> =
        seen.iter().map(|s| (s.path.as_str(), s)).collect();
    let fresh: Vec<CacheEntry> = manifest
        .iter()
        .filter_map(|m| {
            by_path.get(m.path.as_str()).map(|s| CacheEntry {
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
            })
        })
        .collect();
    write_cache(&cache_file, fresh.iter().cloned())?;
    cache_state.entries = Some(fresh.into_iter().map(|e| (e.path.clone(), e)).collect());
    Ok(manifest)
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

/// Parses a manifest blob.
pub fn from_jsonl(bytes: &[u8]) -> Result<Vec<ManifestEntry>> {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| {
            serde_json::from_slice(l).map_err(|source| EngineError::BadManifest {
                line: i + 1,
                source,
            })
        })
        .collect()
}

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

fn write_cache(path: &Path, entries: impl Iterator<Item = CacheEntry>) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_at(dir))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io_at(dir))?;
    {
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        for e in entries {
            serde_json::to_writer(&mut w, &e).map_err(|e| io_at(path)(e.into()))?;
            w.write_all(b"\n").map_err(io_at(path))?;
        }
        w.flush().map_err(io_at(path))?;
    }
    tmp.persist(path)
        .map_err(|e| e.error)
        .map_err(io_at(path))?;
    Ok(())
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

    #[test]
    fn special_files_are_left_out_unread() {
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
        let paths: Vec<&str> = m.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["a.txt"]);
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
                hash: Hash::of(b"TOKEN=abcdefgh"),
                withheld: true,
            },
            ManifestEntry {
                path: "a.txt".into(),
                size: 1,
                mode: 0o644,
                hash: Hash::of(b"a"),
                withheld: false,
            },
            ManifestEntry {
                path: "id_rsa".into(),
                size: 3,
                mode: 0o644,
                hash: Hash::of(b"key"),
                withheld: true,
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
                hash: h,
                withheld: false,
            }]
        );
        // A kept entry is written byte for byte as before (manifests of sessions
        // without credential files keep their hash); a withheld one says so.
        assert_eq!(to_jsonl(&entries), format!("{old}\n").into_bytes());
        let withheld = ManifestEntry {
            withheld: true,
            ..entries[0].clone()
        };
        assert_eq!(
            String::from_utf8(to_jsonl(&[withheld])).unwrap(),
            format!(r#"{{"path":"a.txt","size":1,"mode":420,"hash":"{h}","withheld":true}}"#)
                + "\n"
        );
    }
}
