//! Record hashes of many lines at once, in SIMD lanes.
//!
//! A record is its own BLAKE3 message of a few hundred bytes: one chunk, about ten
//! 64-byte blocks compressed one after the other. Hashed one at a time, the
//! compression of one message cannot be spread over SIMD lanes (that is what makes
//! `b3sum` fast on one big input: sixteen chunks side by side). Here sixteen (or eight)
//! *records* are compressed side by side instead, each in its own 32-bit lane: the
//! same idea as BLAKE3's own `hash_many`, applied to independent messages. Records are
//! grouped by their number of blocks so that lanes rarely idle.
//!
//! Only records of one chunk (at most 1,024 hashed bytes) take this path; longer ones
//! are hashed by the `blake3` crate. The result equals [`record_hash`] for every input
//! (a property test checks it against the crate).

use crate::hash::Hash;
use crate::record::{HASH_CONTEXT, record_hash};

const IV: [u32; 8] = [
    0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19,
];

const MSG_SCHEDULE: [[usize; 16]; 7] = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8],
    [3, 4, 10, 12, 13, 2, 7, 14, 6, 5, 9, 0, 11, 15, 8, 1],
    [10, 7, 12, 9, 14, 3, 13, 15, 4, 0, 11, 2, 5, 8, 1, 6],
    [12, 13, 9, 11, 15, 10, 14, 8, 7, 2, 5, 3, 0, 1, 6, 4],
    [9, 14, 11, 5, 8, 12, 15, 1, 13, 3, 0, 10, 2, 6, 4, 7],
    [11, 15, 5, 0, 1, 9, 8, 6, 14, 10, 2, 12, 3, 4, 7, 13],
];

const CHUNK_START: u32 = 1 << 0;
const CHUNK_END: u32 = 1 << 1;
const ROOT: u32 = 1 << 3;
const DERIVE_KEY_MATERIAL: u32 = 1 << 6;

const BLOCK_BYTES: usize = 64;
/// The longest message hashed in lanes: one BLAKE3 chunk.
pub const LANE_MESSAGE_BYTES_MAX: usize = 1024;

/// The record hashes of `messages` (each the hashed part of a line) into `out`, which
/// must be as long.
pub fn record_hashes(messages: &[&[u8]], out: &mut [Hash]) {
    assert_eq!(messages.len(), out.len(), "one hash per message");
    let key = context_key();
    // Sorted by block count: a batch of messages of equal length wastes no lane.
    let mut order: Vec<(u8, u32)> = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        if m.len() <= LANE_MESSAGE_BYTES_MAX {
            let blocks = m.len().div_ceil(BLOCK_BYTES).max(1) as u8;
            order.push((blocks, i as u32));
        } else {
            out[i] = record_hash(m);
        }
    }
    order.sort_unstable();
    let mut batch: Vec<&[u8]> = Vec::with_capacity(16);
    let mut idx: Vec<u32> = Vec::with_capacity(16);
    let mut hashes = [[0u32; 8]; 16];
    for group in order.chunks(16) {
        batch.clear();
        idx.clear();
        for &(_, i) in group {
            batch.push(messages[i as usize]);
            idx.push(i);
        }
        hash_batch(&key, &batch, &mut hashes);
        for (lane, &i) in idx.iter().enumerate() {
            let mut bytes = [0u8; 32];
            for (w, word) in hashes[lane].iter().enumerate() {
                bytes[4 * w..4 * w + 4].copy_from_slice(&word.to_le_bytes());
            }
            out[i as usize] = Hash(bytes);
        }
    }
}

fn context_key() -> [u32; 8] {
    static KEY: std::sync::LazyLock<[u32; 8]> = std::sync::LazyLock::new(|| {
        let bytes = blake3::hazmat::hash_derive_key_context(HASH_CONTEXT);
        let mut words = [0u32; 8];
        for (w, c) in words.iter_mut().zip(bytes.chunks_exact(4)) {
            *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        words
    });
    *KEY
}

/// Hashes up to 16 one-chunk messages; `out[lane]` gets the hash words of `batch[lane]`.
fn hash_batch(key: &[u32; 8], batch: &[&[u8]], out: &mut [[u32; 8]; 16]) {
    debug_assert!(batch.len() <= 16);
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has the feature the function is compiled for.
            return unsafe { hash_batch_avx512(key, batch, out) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            for (part, lanes) in batch.chunks(8).zip(out.chunks_mut(8)) {
                let mut o = [[0u32; 8]; 8];
                // SAFETY: the CPU has the feature the function is compiled for.
                unsafe { hash_batch_avx2(key, part, &mut o) };
                lanes.copy_from_slice(&o[..lanes.len()]);
            }
            return;
        }
    }
    for (part, lanes) in batch.chunks(4).zip(out.chunks_mut(4)) {
        let mut o = [[0u32; 8]; 4];
        hash_lanes::<4>(key, part, &mut o);
        lanes.copy_from_slice(&o[..lanes.len()]);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
fn hash_batch_avx512(key: &[u32; 8], batch: &[&[u8]], out: &mut [[u32; 8]; 16]) {
    hash_lanes::<16>(key, batch, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn hash_batch_avx2(key: &[u32; 8], batch: &[&[u8]], out: &mut [[u32; 8]; 8]) {
    hash_lanes::<8>(key, batch, out);
}

type V<const N: usize> = [u32; N];

#[inline(always)]
fn add<const N: usize>(a: &mut V<N>, b: &V<N>) {
    for i in 0..N {
        a[i] = a[i].wrapping_add(b[i]);
    }
}

#[inline(always)]
fn xor_rot<const N: usize>(a: &mut V<N>, b: &V<N>, r: u32) {
    for i in 0..N {
        a[i] = (a[i] ^ b[i]).rotate_right(r);
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn g<const N: usize>(
    s: &mut [V<N>; 16],
    a: usize,
    b: usize,
    c: usize,
    d: usize,
    x: &V<N>,
    y: &V<N>,
) {
    let (mut va, mut vb, mut vc, mut vd) = (s[a], s[b], s[c], s[d]);
    add(&mut va, &vb);
    add(&mut va, x);
    xor_rot(&mut vd, &va, 16);
    add(&mut vc, &vd);
    xor_rot(&mut vb, &vc, 12);
    add(&mut va, &vb);
    add(&mut va, y);
    xor_rot(&mut vd, &va, 8);
    add(&mut vc, &vd);
    xor_rot(&mut vb, &vc, 7);
    s[a] = va;
    s[b] = vb;
    s[c] = vc;
    s[d] = vd;
}

#[inline(always)]
fn compress<const N: usize>(
    cv: &[V<N>; 8],
    m: &[V<N>; 16],
    block_len: &V<N>,
    flags: &V<N>,
) -> [V<N>; 8] {
    let mut s = [[0u32; N]; 16];
    s[..8].copy_from_slice(cv);
    for i in 0..4 {
        s[8 + i] = [IV[i]; N];
    }
    // Counter 0 (a one-chunk message), in words 12 and 13.
    s[14] = *block_len;
    s[15] = *flags;
    for sched in &MSG_SCHEDULE {
        g(&mut s, 0, 4, 8, 12, &m[sched[0]], &m[sched[1]]);
        g(&mut s, 1, 5, 9, 13, &m[sched[2]], &m[sched[3]]);
        g(&mut s, 2, 6, 10, 14, &m[sched[4]], &m[sched[5]]);
        g(&mut s, 3, 7, 11, 15, &m[sched[6]], &m[sched[7]]);
        g(&mut s, 0, 5, 10, 15, &m[sched[8]], &m[sched[9]]);
        g(&mut s, 1, 6, 11, 12, &m[sched[10]], &m[sched[11]]);
        g(&mut s, 2, 7, 8, 13, &m[sched[12]], &m[sched[13]]);
        g(&mut s, 3, 4, 9, 14, &m[sched[14]], &m[sched[15]]);
    }
    let mut next = [[0u32; N]; 8];
    for i in 0..8 {
        for l in 0..N {
            next[i][l] = s[i][l] ^ s[8 + i][l];
        }
    }
    next
}

/// Hashes up to `N` one-chunk messages side by side, lane `l` holding `batch[l]`;
/// unused lanes hash an empty message and are not read.
#[inline(always)]
fn hash_lanes<const N: usize>(key: &[u32; 8], batch: &[&[u8]], out: &mut [[u32; 8]; N]) {
    let mut cv = [[0u32; N]; 8];
    for (i, k) in key.iter().enumerate() {
        cv[i] = [*k; N];
    }
    let mut blocks = [1usize; N];
    for (l, msg) in batch.iter().enumerate() {
        debug_assert!(msg.len() <= LANE_MESSAGE_BYTES_MAX);
        blocks[l] = msg.len().div_ceil(BLOCK_BYTES).max(1);
    }
    let rounds = blocks.iter().copied().max().unwrap_or(1);
    for b in 0..rounds {
        let mut m = [[0u32; N]; 16];
        let mut block_len = [0u32; N];
        let mut flags = [DERIVE_KEY_MATERIAL; N];
        let mut active = [false; N];
        for l in 0..N {
            if b >= blocks[l] {
                continue;
            }
            active[l] = true;
            let msg = batch.get(l).copied().unwrap_or(&[]);
            let start = b * BLOCK_BYTES;
            let bytes = &msg[start.min(msg.len())..(start + BLOCK_BYTES).min(msg.len())];
            block_len[l] = bytes.len() as u32;
            if b == 0 {
                flags[l] |= CHUNK_START;
            }
            if b + 1 == blocks[l] {
                flags[l] |= CHUNK_END | ROOT;
            }
            if bytes.len() == BLOCK_BYTES {
                for (w, c) in bytes.chunks_exact(4).enumerate() {
                    m[w][l] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            } else {
                let mut padded = [0u8; BLOCK_BYTES];
                padded[..bytes.len()].copy_from_slice(bytes);
                for (w, c) in padded.chunks_exact(4).enumerate() {
                    m[w][l] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
        }
        let next = compress(&cv, &m, &block_len, &flags);
        for i in 0..8 {
            for l in 0..N {
                if active[l] {
                    cv[i][l] = next[i][l];
                }
            }
        }
    }
    for (l, o) in out.iter_mut().enumerate() {
        for (i, w) in o.iter_mut().enumerate() {
            *w = cv[i][l];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(messages: &[Vec<u8>]) {
        let refs: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
        let mut got = vec![Hash::ZERO; refs.len()];
        record_hashes(&refs, &mut got);
        let want: Vec<Hash> = refs.iter().map(|m| record_hash(m)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn every_length_at_block_and_chunk_boundaries() {
        // 0, one block, at and past one chunk (past it: the crate's path).
        let lens = [0, 1, 63, 64, 65, 127, 128, 500, 1023, 1024, 1025, 3000];
        let messages: Vec<Vec<u8>> = lens
            .iter()
            .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
            .collect();
        check(&messages);
    }

    #[test]
    fn the_portable_lanes_equal_the_crate() {
        let messages: Vec<Vec<u8>> = (0..4).map(|n| vec![n as u8; 100 * n + 3]).collect();
        let refs: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
        let mut out = [[0u32; 8]; 4];
        hash_lanes::<4>(&context_key(), &refs, &mut out);
        for (o, m) in out.iter().zip(&refs) {
            let bytes: Vec<u8> = o.iter().flat_map(|w| w.to_le_bytes()).collect();
            assert_eq!(bytes, record_hash(m).0);
        }
    }

    proptest! {
        #[test]
        fn lanes_equal_one_at_a_time(
            messages in proptest::collection::vec(
                proptest::collection::vec(any::<u8>(), 0..1200), 0..70)
        ) {
            check(&messages);
        }
    }
}
