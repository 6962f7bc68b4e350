//! The content-addressed blob store: `blobs/<2 hex>/<62 hex>`, named by the plain
//! BLAKE3 hash of the content (what `b3sum` prints). A blob is written to a temporary
//! file, synced, then renamed into place, so a reader never sees half a blob and
//! concurrent puts of the same content are harmless. Everything streams: a blob of any
//! size is hashed and copied through a fixed buffer.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{IoContext, Result};
use crate::hash::Hash;
use crate::log::sync_dir;

const COPY_BUF_BYTES: usize = 256 * 1024;

/// A reference to a blob: its hash and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BlobRef {
    pub hash: Hash,
    pub len: u64,
}

/// The result of re-hashing a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum BlobCheck {
    Ok,
    Missing,
    /// The content no longer hashes to the blob's name.
    Mismatch {
        actual: Hash,
    },
}

/// A directory of blobs.
#[derive(Debug, Clone)]
pub struct BlobStore {
    root: PathBuf,
    sync: bool,
}

impl BlobStore {
    /// Opens (creating if needed) the blob store at `root`.
    pub fn open(root: &Path) -> Result<BlobStore> {
        crate::private::create_dir_all(&root.join("tmp")).at(root)?;
        Ok(BlobStore {
            root: root.to_path_buf(),
            sync: true,
        })
    }

    /// Turns fsync of new blobs off (for durability `none`).
    pub fn without_sync(mut self) -> BlobStore {
        self.sync = false;
        self
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the blob named `hash` lives.
    pub fn path(&self, hash: &Hash) -> PathBuf {
        let hex = hash.to_hex();
        self.root.join(&hex[..2]).join(&hex[2..])
    }

    /// True when the blob exists.
    pub fn has(&self, hash: &Hash) -> bool {
        self.path(hash).is_file()
    }

    /// Stores `bytes`; storing content that is already there costs only its hash.
    pub fn put(&self, bytes: &[u8]) -> Result<BlobRef> {
        let blob = BlobRef {
            hash: Hash::of(bytes),
            len: bytes.len() as u64,
        };
        if self.has(&blob.hash) {
            return Ok(blob);
        }
        // Hashed once: the bytes are written as they are, not read back and hashed.
        let mut tmp = self.tmp_file()?;
        tmp.write_all(bytes).at(tmp.path())?;
        self.persist(tmp, blob)
    }

    /// A new temporary file beside the blobs, to be persisted under its hash.
    fn tmp_file(&self) -> Result<tempfile::NamedTempFile> {
        let tmp_dir = self.root.join("tmp");
        tempfile::NamedTempFile::new_in(&tmp_dir).at(&tmp_dir)
    }

    /// Stores what `reader` yields, streaming.
    pub fn put_reader(&self, mut reader: impl Read) -> Result<BlobRef> {
        let mut tmp = self.tmp_file()?;
        let mut hasher = blake3::Hasher::new();
        let mut buf = vec![0u8; COPY_BUF_BYTES];
        let mut len = 0u64;
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).at(tmp.path()),
            };
            hasher.update(&buf[..n]);
            tmp.write_all(&buf[..n]).at(tmp.path())?;
            len += n as u64;
        }
        let blob = BlobRef {
            hash: Hash(*hasher.finalize().as_bytes()),
            len,
        };
        self.persist(tmp, blob)
    }

    /// Moves `tmp`, holding the content of `blob`, to the blob's name (synced when the
    /// store syncs); a blob already there is kept and `tmp` removed.
    fn persist(&self, tmp: tempfile::NamedTempFile, blob: BlobRef) -> Result<BlobRef> {
        let dest = self.path(&blob.hash);
        if dest.is_file() {
            return Ok(blob);
        }
        if self.sync {
            tmp.as_file().sync_all().at(tmp.path())?;
        }
        let dir = dest.parent().unwrap_or(&self.root).to_path_buf();
        crate::private::create_dir_all(&dir).at(&dir)?;
        tmp.persist(&dest).map_err(|e| e.error).at(&dest)?;
        if self.sync {
            sync_dir(&dir)?;
        }
        Ok(blob)
    }

    /// Stores the content of the file at `path`, streaming.
    pub fn put_file(&self, path: &Path) -> Result<BlobRef> {
        let file = File::open(path).at(path)?;
        self.put_reader(file)
    }

    /// Opens a blob for streaming reads.
    pub fn open_blob(&self, hash: &Hash) -> Result<File> {
        let path = self.path(hash);
        File::open(&path).at(&path)
    }

    /// Reads a whole blob into memory; for small blobs only.
    pub fn get(&self, hash: &Hash) -> Result<Vec<u8>> {
        let path = self.path(hash);
        fs::read(&path).at(&path)
    }

    /// Re-hashes a blob, streaming.
    pub fn verify(&self, hash: &Hash) -> Result<BlobCheck> {
        let path = self.path(hash);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BlobCheck::Missing),
            Err(e) => return Err(e).at(&path),
        };
        let actual = hash_reader(file).at(&path)?;
        Ok(if actual == *hash {
            BlobCheck::Ok
        } else {
            BlobCheck::Mismatch { actual }
        })
    }
}

/// The BLAKE3 hash and length of everything `reader` yields, through a fixed buffer.
pub fn hash_reader(mut reader: impl Read) -> io::Result<Hash> {
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; COPY_BUF_BYTES];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(Hash(*hasher.finalize().as_bytes()))
}
