//! The last scan's stamps and manifest, saved beside the manifest cache
//! (`manifest-cache.jsonl.stamps`) for the next session's start: one fixed-size
//! record per file of the saved listing, by its rank, read with one `read` and no
//! parse. A start whose listing holds and whose files' stamps all match takes its
//! manifest from here without reading the cache's JSON (docs/FORMAT.md).
//!
//! The file names the listing it goes with (the BLAKE3 of the listing file's bytes)
//! and the settings its entries were made with (capture, size limit, credential-file
//! patterns), and ends with the BLAKE3 of everything before it: a file of another
//! version, length, listing or settings, or a damaged one, is not used (the start
//! takes the cache's path instead).

use cairn_store::Hash;

use crate::manifest::{ManifestEntry, NotKept, Special};
use crate::walk::{FileStamp, Listing};

/// The layout's version; a file of another is not read.
pub(crate) const STAMPS_VERSION: u32 = 1;
const MAGIC: [u8; 8] = *b"cairnstp";
/// Magic, version, record size, files, listing digest, settings digest.
const HEADER_BYTES: usize = 8 + 4 + 4 + 8 + 32 + 32;
/// One file: its stamp (size, mtime, ctime, inode, mode), its entry's flags, special
/// kind, not-kept reason, git id length, size, BLAKE3 and git id.
const RECORD_BYTES: usize = 8 + 8 + 8 + 8 + 4 + 1 + 1 + 1 + 1 + 8 + 32 + 32;
const SUM_BYTES: usize = 32;

const HAS_HASH: u8 = 1;
const WITHHELD: u8 = 2;

fn special_code(s: Option<Special>) -> u8 {
    match s {
        None => 0,
        Some(Special::Fifo) => 1,
        Some(Special::Socket) => 2,
        Some(Special::CharDevice) => 3,
        Some(Special::BlockDevice) => 4,
    }
}

fn special_of(code: u8) -> Option<Option<Special>> {
    Some(match code {
        0 => None,
        1 => Some(Special::Fifo),
        2 => Some(Special::Socket),
        3 => Some(Special::CharDevice),
        4 => Some(Special::BlockDevice),
        _ => return None,
    })
}

fn not_kept_of(code: u8) -> Option<Option<NotKept>> {
    Some(match code {
        0 => None,
        1 => Some(NotKept::TooLarge),
        2 => Some(NotKept::Sparse),
        _ => return None,
    })
}

/// A git id as bytes: lowercase hex of 40 (SHA-1) or 64 (SHA-256) digits, else `None`.
fn oid_bytes(oid: &str) -> Option<([u8; 32], u8)> {
    if oid.len() != 40 && oid.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    let len = oid.len() / 2;
    cairn_store::decode_lower_hex(oid.as_bytes(), &mut out[..len]).then_some((out, len as u8))
}

fn oid_hex(bytes: &[u8]) -> String {
    let mut out = vec![0u8; 2 * bytes.len()];
    cairn_store::encode_lower_hex(bytes, &mut out);
    // Hex digits are ASCII.
    String::from_utf8(out).unwrap_or_default()
}

/// The file's bytes for `stamps` and `manifest` (one each per file of the listing
/// whose digest is `listing`, by rank), made with `settings`; `None` when an entry
/// cannot be written in this layout (a git id that is not lowercase hex of a SHA-1 or
/// SHA-256): then no file is kept.
pub(crate) fn encode(
    listing: &Hash,
    settings: &Hash,
    stamps: &[FileStamp],
    manifest: &[ManifestEntry],
) -> Option<Vec<u8>> {
    assert_eq!(stamps.len(), manifest.len(), "one stamp per entry");
    let mut out = Vec::with_capacity(HEADER_BYTES + stamps.len() * RECORD_BYTES + SUM_BYTES);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&STAMPS_VERSION.to_le_bytes());
    out.extend_from_slice(&(RECORD_BYTES as u32).to_le_bytes());
    out.extend_from_slice(&(stamps.len() as u64).to_le_bytes());
    out.extend_from_slice(&listing.0);
    out.extend_from_slice(&settings.0);
    for (s, e) in stamps.iter().zip(manifest) {
        // The entry's mode is the stamp's (the scan takes it from the stat).
        if e.mode != s.mode {
            return None;
        }
        let (git, git_len) = match &e.git {
            Some(oid) => oid_bytes(oid)?,
            None => ([0; 32], 0),
        };
        out.extend_from_slice(&s.size.to_le_bytes());
        out.extend_from_slice(&s.mtime_ns.to_le_bytes());
        out.extend_from_slice(&s.ctime_ns.to_le_bytes());
        out.extend_from_slice(&s.ino.to_le_bytes());
        out.extend_from_slice(&s.mode.to_le_bytes());
        let flags =
            if e.hash.is_some() { HAS_HASH } else { 0 } | if e.withheld { WITHHELD } else { 0 };
        out.push(flags);
        out.push(special_code(e.special));
        out.push(match e.not_kept {
            None => 0,
            Some(NotKept::TooLarge) => 1,
            Some(NotKept::Sparse) => 2,
        });
        out.push(git_len);
        out.extend_from_slice(&e.size.to_le_bytes());
        out.extend_from_slice(&e.hash.map_or([0; 32], |h| h.0));
        out.extend_from_slice(&git);
    }
    let sum = Hash::of(&out);
    out.extend_from_slice(&sum.0);
    Some(out)
}

/// The stamps and manifest in `bytes`, for `listing` (whose file's digest is
/// `listing_digest`) and `settings`; `None` when the file is not one [`encode`] made
/// for them: another version or record size, a length or count that does not match,
/// another listing or settings, a checksum that does not hold, or a record no scan
/// could have made (an unknown kind, a special file the listing does not name as one,
/// an entry with neither hash nor git id).
pub(crate) fn decode(
    bytes: &[u8],
    listing: &Listing,
    listing_digest: &Hash,
    settings: &Hash,
) -> Option<(Vec<FileStamp>, Vec<ManifestEntry>)> {
    let files = listing.files();
    if bytes.len() != HEADER_BYTES + files.checked_mul(RECORD_BYTES)? + SUM_BYTES {
        return None;
    }
    let (body, sum) = bytes.split_at(bytes.len() - SUM_BYTES);
    let u32_at = |at: usize| u32::from_le_bytes(body[at..at + 4].try_into().unwrap_or([0; 4]));
    let u64_at =
        |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
    let ok = body[..8] == MAGIC
        && u32_at(8) == STAMPS_VERSION
        && u32_at(12) == RECORD_BYTES as u32
        && u64_at(body, 16) == files as u64
        && body[24..56] == listing_digest.0
        && body[56..88] == settings.0
        && Hash::of(body).0 == sum;
    if !ok {
        return None;
    }
    let records = &body[HEADER_BYTES..];
    let mode_at = |r: &[u8]| u32::from_le_bytes(r[32..36].try_into().unwrap_or([0; 4]));
    let stamps: Vec<FileStamp> = records
        .chunks_exact(RECORD_BYTES)
        .map(|r| FileStamp {
            size: u64_at(r, 0),
            mtime_ns: u64_at(r, 8) as i64,
            ctime_ns: u64_at(r, 16) as i64,
            ino: u64_at(r, 24),
            mode: mode_at(r),
        })
        .collect();
    let mut manifest: Vec<Option<ManifestEntry>> = Vec::with_capacity(files);
    manifest.resize_with(files, || None);
    for (rank, path, listed_special) in listing.files_by_rank() {
        let r = &records[rank as usize * RECORD_BYTES..][..RECORD_BYTES];
        let (flags, special, not_kept, git_len) = (r[36], r[37], r[38], r[39]);
        let special = special_of(special)?;
        if flags & !(HAS_HASH | WITHHELD) != 0 || special != listed_special {
            return None;
        }
        let git = match git_len {
            0 => None,
            20 | 32 => Some(oid_hex(&r[80..80 + usize::from(git_len)])),
            _ => return None,
        };
        let hash = (flags & HAS_HASH != 0).then(|| Hash(r[48..80].try_into().unwrap_or([0; 32])));
        if special.is_none() && hash.is_none() && git.is_none() {
            return None;
        }
        manifest[rank as usize] = Some(ManifestEntry {
            path: path.to_string(),
            size: u64_at(r, 40),
            mode: mode_at(r),
            hash,
            withheld: flags & WITHHELD != 0,
            git,
            not_kept: not_kept_of(not_kept)?,
            special,
        });
    }
    // The listing's ranks are each file's place: every slot is filled once.
    let manifest: Option<Vec<ManifestEntry>> = manifest.into_iter().collect();
    Some((stamps, manifest?))
}

/// What identifies a file [`encode`] made: its checksum, the BLAKE3 of what precedes it.
pub(crate) fn digest(bytes: &[u8]) -> Hash {
    let at = bytes.len().saturating_sub(SUM_BYTES);
    Hash(bytes[at..].try_into().unwrap_or([0; SUM_BYTES]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_ids_of_sha1_and_sha256_round_trip_and_others_are_refused() {
        let sha1 = "0123456789abcdef0123456789abcdef01234567";
        let sha256 = "a5".repeat(32);
        for id in [sha1, sha256.as_str()] {
            let (bytes, len) = oid_bytes(id).unwrap();
            assert_eq!(usize::from(len), id.len() / 2);
            assert!(
                bytes[usize::from(len)..].iter().all(|&b| b == 0),
                "zero-padded"
            );
            assert_eq!(oid_hex(&bytes[..usize::from(len)]), id);
        }
        for bad in [
            sha1.to_uppercase(),
            sha1[..38].to_string(),
            format!("{sha1}0"),
            sha1.replace('a', "g"),
            String::new(),
        ] {
            assert!(oid_bytes(&bad).is_none(), "{bad}");
        }
    }
}
