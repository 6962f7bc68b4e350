//! The blob store: content addressing, concurrent puts, damage found by `verify`, and
//! streaming a large blob in small memory (in a child process, so that its peak memory
//! is its own). `CAIRN_BLOB_TEST_BYTES` sets the size of the large blob (default 1 GiB).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier};

use cairn_store::{BlobCheck, BlobRef, BlobStore, Hash};
use cairn_tests::{PatternReader, Rng, env_u64};

const HELPER: &str = env!("CARGO_BIN_EXE_store_helper");

/// Every file under `root`, relative to it, sorted.
fn files_under(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    Rng::new(seed).fill(&mut bytes);
    bytes
}

/// The name of a blob is its plain BLAKE3 hash (what `b3sum` prints), split 2/62.
fn blob_file(hash: &Hash) -> PathBuf {
    let hex = hash.to_hex();
    PathBuf::from(&hex[..2]).join(&hex[2..])
}

#[test]
fn put_stores_content_under_its_blake3_name() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BlobStore::open(tmp.path()).unwrap();
    let blob = store.put(b"hello blobs\n").unwrap();
    let hash = Hash(*blake3::hash(b"hello blobs\n").as_bytes());
    assert_eq!(blob, BlobRef { hash, len: 12 });
    assert_eq!(files_under(tmp.path()), vec![blob_file(&hash)]);
    assert_eq!(store.get(&hash).unwrap(), b"hello blobs\n");
    assert_eq!(store.verify(&hash).unwrap(), BlobCheck::Ok);
}

#[test]
fn concurrent_puts_of_the_same_content_make_one_blob() {
    const THREADS: usize = 8;
    let tmp = tempfile::tempdir().unwrap();
    let store = BlobStore::open(tmp.path()).unwrap();
    // Large enough that the puts overlap: each writes its own temporary file.
    let content = Arc::new(random_bytes(8, 4 << 20));
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let (store, content, barrier) = (store.clone(), content.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                // Half go through `put`, half through `put_reader`, which never skips
                // the copy.
                if i % 2 == 0 {
                    store.put(&content)
                } else {
                    store.put_reader(&content[..])
                }
            })
        })
        .collect();
    let results: Vec<BlobRef> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    let expected = BlobRef {
        hash: Hash::of(&content),
        len: content.len() as u64,
    };
    assert_eq!(results, vec![expected; THREADS]);
    // One blob, and no temporary file left behind.
    assert_eq!(files_under(tmp.path()), vec![blob_file(&expected.hash)]);
    assert_eq!(store.get(&expected.hash).unwrap(), *content);
    assert_eq!(store.verify(&expected.hash).unwrap(), BlobCheck::Ok);
}

#[test]
fn put_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BlobStore::open(tmp.path()).unwrap();
    let content = random_bytes(3, 100_000);
    let first = store.put(&content).unwrap();
    let mtime = || {
        std::fs::metadata(store.path(&first.hash))
            .unwrap()
            .modified()
            .unwrap()
    };
    let written_at = mtime();
    assert_eq!(store.put(&content).unwrap(), first);
    assert_eq!(store.put_reader(&content[..]).unwrap(), first);
    assert_eq!(store.put_file(&store.path(&first.hash)).unwrap(), first);
    assert_eq!(files_under(tmp.path()), vec![blob_file(&first.hash)]);
    assert_eq!(store.get(&first.hash).unwrap(), content);
    // `put` of content already there does not write it again.
    assert_eq!(mtime(), written_at);
}

#[test]
fn empty_blob_is_a_blob() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BlobStore::open(tmp.path()).unwrap();
    let blob = store.put(b"").unwrap();
    assert_eq!(
        blob,
        BlobRef {
            hash: Hash::of(b""),
            len: 0
        }
    );
    assert_eq!(store.get(&blob.hash).unwrap(), Vec::<u8>::new());
    assert_eq!(store.verify(&blob.hash).unwrap(), BlobCheck::Ok);
}

#[test]
fn verify_finds_a_flipped_byte_and_a_missing_blob() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BlobStore::open(tmp.path()).unwrap();
    let content = random_bytes(5, 300_000);
    let blob = store.put(&content).unwrap();
    let other = store.put(b"another blob").unwrap();
    assert_eq!(store.verify(&blob.hash).unwrap(), BlobCheck::Ok);

    let path = store.path(&blob.hash);
    let mut damaged = content.clone();
    damaged[123_456] ^= 0x01;
    std::fs::write(&path, &damaged).unwrap();
    assert_eq!(
        store.verify(&blob.hash).unwrap(),
        BlobCheck::Mismatch {
            actual: Hash::of(&damaged)
        }
    );
    // Damage to one blob says nothing about another.
    assert_eq!(store.verify(&other.hash).unwrap(), BlobCheck::Ok);

    std::fs::remove_file(&path).unwrap();
    assert_eq!(store.verify(&blob.hash).unwrap(), BlobCheck::Missing);
    assert!(!store.has(&blob.hash));
    assert_eq!(
        store.verify(&Hash::of(b"never stored")).unwrap(),
        BlobCheck::Missing
    );
}

/// The lines `key value` a child printed, as a lookup.
fn field<'a>(output: &'a str, key: &str) -> &'a str {
    output
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {key} line in {output:?}"))
}

#[test]
fn a_large_blob_streams_in_small_memory() {
    const PEAK_RSS_KIB_MAX: u64 = 64 * 1024;
    let bytes = env_u64("CAIRN_BLOB_TEST_BYTES", 1 << 30);
    let seed = 0xb10b;
    let tmp = tempfile::tempdir().unwrap();
    // The expected hash, over the same generated stream, computed here while the child
    // stores it (the child's peak memory is its own).
    let expected = std::thread::spawn(move || {
        let mut hasher = blake3::Hasher::new();
        let mut reader = PatternReader::new(seed, bytes);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = reader.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        Hash(*hasher.finalize().as_bytes())
    });
    let output = Command::new(HELPER)
        .args([
            "blob",
            tmp.path().to_str().unwrap(),
            &bytes.to_string(),
            &seed.to_string(),
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "blob child failed: {}",
        output.status
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let expected = expected.join().unwrap();

    let hash: Hash = field(&text, "hash").parse().unwrap();
    let len: u64 = field(&text, "len").parse().unwrap();
    let peak: u64 = field(&text, "peak_rss_kib").parse().unwrap();
    assert_eq!(
        BlobRef { hash, len },
        BlobRef {
            hash: expected,
            len: bytes
        }
    );
    assert!(
        peak < PEAK_RSS_KIB_MAX,
        "put_reader of {bytes} bytes peaked at {peak} KiB of memory (limit {PEAK_RSS_KIB_MAX} KiB)"
    );
    let store = BlobStore::open(tmp.path()).unwrap();
    assert_eq!(std::fs::metadata(store.path(&hash)).unwrap().len(), bytes);
    assert_eq!(store.verify(&hash).unwrap(), BlobCheck::Ok);
    eprintln!("{bytes} bytes stored with a peak of {peak} KiB");
}
