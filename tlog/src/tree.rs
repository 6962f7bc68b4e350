//! The RFC 6962 Merkle tree over a log's records (RFC 9162 §2.1): SHA-256, a leaf
//! hashed as `SHA-256(0x00 ‖ leaf)`, an inner node as `SHA-256(0x01 ‖ left ‖ right)`.
//!
//! A cairn log's leaf `seq` is [`leaf_data`]: `b"cairn-record-v1\0" ‖ seq (u64
//! big-endian) ‖ the record's 32-byte hash`, so a leaf names its place as well as its
//! record. [`CompactRange`] keeps a growing tree's head in O(log n) space: the roots of
//! its perfect subtrees, left to right. Proofs are built from the list of leaf hashes
//! (a reader streams a log into it) and checked with the RFC 9162 algorithms, which
//! need only the proof.

use sha2::{Digest, Sha256};

/// A SHA-256 hash.
pub type Hash32 = [u8; 32];

/// The domain separation prefix of a cairn record leaf.
pub const LEAF_PREFIX: &[u8; 16] = b"cairn-record-v1\0";

/// The most hashes a proof may hold: a tree of at most 2^64 leaves needs at most 64
/// for inclusion and 63 for consistency (`tlog-witness` caps a request at 63).
pub const PROOF_HASHES_MAX: usize = 64;

/// The leaf of record `seq` whose record hash is `record_hash`.
pub fn leaf_data(seq: u64, record_hash: &Hash32) -> [u8; 56] {
    let mut out = [0u8; 56];
    out[..16].copy_from_slice(LEAF_PREFIX);
    out[16..24].copy_from_slice(&seq.to_be_bytes());
    out[24..].copy_from_slice(record_hash);
    out
}

/// `SHA-256(0x00 ‖ leaf)`.
pub fn leaf_hash(leaf: &[u8]) -> Hash32 {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(leaf);
    h.finalize().into()
}

/// The leaf hash of record `seq` with record hash `record_hash`.
pub fn record_leaf_hash(seq: u64, record_hash: &Hash32) -> Hash32 {
    leaf_hash(&leaf_data(seq, record_hash))
}

/// `SHA-256(0x01 ‖ left ‖ right)`.
pub fn node_hash(left: &Hash32, right: &Hash32) -> Hash32 {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The root of the empty tree: SHA-256 of nothing.
pub fn empty_root() -> Hash32 {
    Sha256::digest([]).into()
}

/// A tree head kept incrementally: the roots of the perfect subtrees that make up the
/// first `size` leaves, largest (leftmost) first — one per set bit of `size`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactRange {
    size: u64,
    stack: Vec<Hash32>,
}

impl CompactRange {
    /// The empty tree.
    pub fn new() -> CompactRange {
        CompactRange::default()
    }

    /// A range from its parts, as [`CompactRange::parts`] gave them; `None` when the
    /// stack does not have one root per set bit of `size`.
    pub fn from_parts(size: u64, stack: Vec<Hash32>) -> Option<CompactRange> {
        (stack.len() == size.count_ones() as usize).then_some(CompactRange { size, stack })
    }

    /// The size and the subtree roots.
    pub fn parts(&self) -> (u64, &[Hash32]) {
        (self.size, &self.stack)
    }

    /// [`CompactRange::parts`], owned: the stack is handed back, not copied.
    pub fn into_parts(self) -> (u64, Vec<Hash32>) {
        (self.size, self.stack)
    }

    /// The number of leaves.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends a leaf by its leaf hash: O(log n) hashes at worst, one on average.
    pub fn push(&mut self, leaf_hash: Hash32) {
        let mut h = leaf_hash;
        // Each trailing one bit of the old size is a subtree of the new leaf's size,
        // which merges with it.
        let mut merges = self.size.trailing_ones();
        while merges > 0 {
            let left = self.stack.pop();
            debug_assert!(left.is_some(), "compact range shorter than its size says");
            if let Some(left) = left {
                h = node_hash(&left, &h);
            }
            merges -= 1;
        }
        self.stack.push(h);
        self.size += 1;
        assert_eq!(self.stack.len(), self.size.count_ones() as usize);
    }

    /// The tree's root hash (the empty tree's for size 0).
    pub fn root(&self) -> Hash32 {
        let mut it = self.stack.iter().rev();
        let Some(last) = it.next() else {
            return empty_root();
        };
        it.fold(*last, |acc, left| node_hash(left, &acc))
    }
}

/// The largest power of two smaller than `n` (n ≥ 2).
fn split(n: usize) -> usize {
    debug_assert!(n >= 2);
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
}

/// MTH(D[n]): the root of the tree over `leaves` (leaf hashes).
pub fn root_of(leaves: &[Hash32]) -> Hash32 {
    match leaves.len() {
        0 => empty_root(),
        1 => leaves[0],
        n => {
            let k = split(n);
            node_hash(&root_of(&leaves[..k]), &root_of(&leaves[k..]))
        }
    }
}

/// PATH(index, D[n]) (RFC 6962 §2.1.1): the inclusion proof of leaf `index` in the tree
/// of `leaves`, from the leaf's sibling up. `None` when `index` is not a leaf.
pub fn inclusion_proof(leaves: &[Hash32], index: u64) -> Option<Vec<Hash32>> {
    let index = usize::try_from(index).ok()?;
    if index >= leaves.len() {
        return None;
    }
    let mut out = Vec::new();
    path(index, leaves, &mut out);
    Some(out)
}

fn path(m: usize, d: &[Hash32], out: &mut Vec<Hash32>) {
    if d.len() <= 1 {
        return;
    }
    let k = split(d.len());
    if m < k {
        path(m, &d[..k], out);
        out.push(root_of(&d[k..]));
    } else {
        path(m - k, &d[k..], out);
        out.push(root_of(&d[..k]));
    }
}

/// PROOF(m, D[n]) (RFC 6962 §2.1.2): the consistency proof from the tree of the first
/// `old_size` leaves to the tree of all `leaves`. Empty when `old_size` is 0 or the
/// whole tree; `None` when `old_size` is past the end.
pub fn consistency_proof(leaves: &[Hash32], old_size: u64) -> Option<Vec<Hash32>> {
    let m = usize::try_from(old_size).ok()?;
    if m > leaves.len() {
        return None;
    }
    let mut out = Vec::new();
    if m > 0 && m < leaves.len() {
        subproof(m, leaves, true, &mut out);
    }
    Some(out)
}

fn subproof(m: usize, d: &[Hash32], whole: bool, out: &mut Vec<Hash32>) {
    let n = d.len();
    if m == n {
        if !whole {
            out.push(root_of(d));
        }
        return;
    }
    let k = split(n);
    if m <= k {
        subproof(m, &d[..k], whole, out);
        out.push(root_of(&d[k..]));
    } else {
        subproof(m - k, &d[k..], false, out);
        out.push(root_of(&d[..k]));
    }
}

/// Why a proof does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("index {index} is not a leaf of a tree of size {size}")]
    IndexPastEnd { index: u64, size: u64 },
    #[error("old size {old} is larger than the new size {new}")]
    OldPastNew { old: u64, new: u64 },
    #[error("the proof has {got} hashes where the tree sizes need {want}")]
    WrongLength { got: usize, want: usize },
    #[error("the proof does not lead to the root hash")]
    RootMismatch,
    #[error("equal tree sizes with different root hashes: the log forked")]
    Fork,
}

/// Checks an inclusion proof (RFC 9162 §2.1.3.2).
pub fn verify_inclusion(
    index: u64,
    size: u64,
    leaf_hash: &Hash32,
    proof: &[Hash32],
    root: &Hash32,
) -> Result<(), ProofError> {
    if index >= size {
        return Err(ProofError::IndexPastEnd { index, size });
    }
    let want = inclusion_len(index, size);
    if proof.len() != want {
        return Err(ProofError::WrongLength {
            got: proof.len(),
            want,
        });
    }
    let (mut f, mut s) = (index, size - 1);
    let mut r = *leaf_hash;
    for p in proof {
        if f & 1 == 1 || f == s {
            r = node_hash(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    if s != 0 || r != *root {
        return Err(ProofError::RootMismatch);
    }
    Ok(())
}

/// The length of an inclusion proof of `index` in a tree of `size` leaves.
fn inclusion_len(index: u64, size: u64) -> usize {
    // The inner levels where index and the last leaf part, plus one per right border
    // subtree above.
    let inner = (u64::BITS - (index ^ (size - 1)).leading_zeros()) as usize;
    let border = (index >> inner).count_ones() as usize;
    inner + border
}

/// Checks a consistency proof from (`old_size`, `old_root`) to (`new_size`,
/// `new_root`) (RFC 9162 §2.1.4.2; an old size of 0 is consistent with every tree
/// and needs an empty proof, as `tlog-witness` asks).
pub fn verify_consistency(
    old_size: u64,
    new_size: u64,
    old_root: &Hash32,
    new_root: &Hash32,
    proof: &[Hash32],
) -> Result<(), ProofError> {
    if old_size > new_size {
        return Err(ProofError::OldPastNew {
            old: old_size,
            new: new_size,
        });
    }
    if old_size == 0 || old_size == new_size {
        if !proof.is_empty() {
            return Err(ProofError::WrongLength {
                got: proof.len(),
                want: 0,
            });
        }
        if old_size == new_size && old_root != new_root {
            return Err(ProofError::Fork);
        }
        return Ok(());
    }
    if proof.is_empty() || proof.len() > PROOF_HASHES_MAX {
        return Err(ProofError::WrongLength {
            got: proof.len(),
            want: consistency_len(old_size, new_size),
        });
    }
    let mut path: Vec<Hash32> = Vec::with_capacity(proof.len() + 1);
    if old_size.is_power_of_two() {
        path.push(*old_root);
    }
    path.extend_from_slice(proof);
    let (mut f, mut s) = (old_size - 1, new_size - 1);
    while f & 1 == 1 {
        f >>= 1;
        s >>= 1;
    }
    let (mut fr, mut sr) = (path[0], path[0]);
    for c in &path[1..] {
        if s == 0 {
            return Err(ProofError::WrongLength {
                got: proof.len(),
                want: consistency_len(old_size, new_size),
            });
        }
        if f & 1 == 1 || f == s {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f >>= 1;
        s >>= 1;
    }
    if s != 0 {
        return Err(ProofError::WrongLength {
            got: proof.len(),
            want: consistency_len(old_size, new_size),
        });
    }
    if fr != *old_root || sr != *new_root {
        return Err(ProofError::RootMismatch);
    }
    Ok(())
}

/// The length of a consistency proof between two sizes (0 < old < new), by building
/// the shape of one: used only to word an error.
fn consistency_len(old: u64, new: u64) -> usize {
    fn walk(m: u64, n: u64, whole: bool) -> usize {
        if m == n {
            return usize::from(!whole);
        }
        let k = 1u64 << (u64::BITS - 1 - (n - 1).leading_zeros());
        if m <= k {
            walk(m, k, whole) + 1
        } else {
            walk(m - k, n - k, false) + 1
        }
    }
    if old == 0 || old >= new {
        0
    } else {
        walk(old, new, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(n: u64) -> Vec<Hash32> {
        (0..n)
            .map(|i| record_leaf_hash(i, &Sha256::digest(i.to_be_bytes()).into()))
            .collect()
    }

    /// The reference: MTH by the definition, one level at a time from the leaves up,
    /// written differently from `root_of` (bottom-up, carrying a lone last node).
    fn brute_root(leaves: &[Hash32]) -> Hash32 {
        if leaves.is_empty() {
            return empty_root();
        }
        // RFC 6962's split tree equals the bottom-up pairing where an odd node is
        // promoted unchanged.
        let mut level = leaves.to_vec();
        while level.len() > 1 {
            level = level
                .chunks(2)
                .map(|c| {
                    if c.len() == 2 {
                        node_hash(&c[0], &c[1])
                    } else {
                        c[0]
                    }
                })
                .collect();
        }
        level[0]
    }

    #[test]
    fn the_compact_range_agrees_with_the_definition_at_every_size_up_to_130() {
        let all = leaves(130);
        let mut range = CompactRange::new();
        assert_eq!(range.root(), empty_root());
        for n in 1..=130usize {
            range.push(all[n - 1]);
            assert_eq!(range.size(), n as u64);
            assert_eq!(range.root(), brute_root(&all[..n]), "size {n}");
            assert_eq!(root_of(&all[..n]), brute_root(&all[..n]), "size {n}");
            let (size, stack) = range.parts();
            assert_eq!(
                CompactRange::from_parts(size, stack.to_vec()).as_ref(),
                Some(&range)
            );
        }
        assert_eq!(CompactRange::from_parts(3, vec![[0; 32]]), None);
    }

    #[test]
    fn every_inclusion_proof_up_to_64_leaves_verifies_and_a_changed_one_does_not() {
        let all = leaves(64);
        for n in 1..=64usize {
            let d = &all[..n];
            let root = brute_root(d);
            for i in 0..n as u64 {
                let proof = inclusion_proof(d, i).unwrap();
                assert_eq!(proof.len(), inclusion_len(i, n as u64));
                verify_inclusion(i, n as u64, &d[i as usize], &proof, &root)
                    .unwrap_or_else(|e| panic!("size {n} index {i}: {e}"));
                // Another leaf, another index, a flipped hash, a shorter proof: refused.
                let other = (i + 1) % n as u64;
                if other != i {
                    assert!(
                        verify_inclusion(i, n as u64, &d[other as usize], &proof, &root).is_err()
                    );
                    assert!(
                        verify_inclusion(other, n as u64, &d[i as usize], &proof, &root).is_err()
                    );
                }
                for j in 0..proof.len() {
                    let mut bad = proof.clone();
                    bad[j][0] ^= 1;
                    assert_eq!(
                        verify_inclusion(i, n as u64, &d[i as usize], &bad, &root),
                        Err(ProofError::RootMismatch)
                    );
                }
                if !proof.is_empty() {
                    let short = &proof[..proof.len() - 1];
                    assert!(verify_inclusion(i, n as u64, &d[i as usize], short, &root).is_err());
                }
            }
            assert_eq!(inclusion_proof(d, n as u64), None);
            assert_eq!(
                verify_inclusion(n as u64, n as u64, &d[0], &[], &root),
                Err(ProofError::IndexPastEnd {
                    index: n as u64,
                    size: n as u64
                })
            );
        }
    }

    #[test]
    fn every_consistency_proof_up_to_64_leaves_verifies_and_a_rewritten_tree_does_not() {
        let all = leaves(64);
        for n in 1..=64usize {
            let d = &all[..n];
            let new_root = brute_root(d);
            for m in 0..=n {
                let old_root = brute_root(&d[..m]);
                let proof = consistency_proof(d, m as u64).unwrap();
                if m > 0 && m < n {
                    assert_eq!(proof.len(), consistency_len(m as u64, n as u64));
                }
                verify_consistency(m as u64, n as u64, &old_root, &new_root, &proof)
                    .unwrap_or_else(|e| panic!("{m} -> {n}: {e}"));
                if m == 0 {
                    continue;
                }
                // The same old size with one of its leaves rewritten: not consistent.
                let mut forged = d[..m].to_vec();
                forged[m - 1][0] ^= 1;
                let forged_root = brute_root(&forged);
                assert!(
                    verify_consistency(m as u64, n as u64, &forged_root, &new_root, &proof)
                        .is_err(),
                    "{m} -> {n}"
                );
                for j in 0..proof.len() {
                    let mut bad = proof.clone();
                    bad[j][31] ^= 0x80;
                    assert!(
                        verify_consistency(m as u64, n as u64, &old_root, &new_root, &bad).is_err()
                    );
                }
            }
            assert_eq!(consistency_proof(d, n as u64 + 1), None);
        }
        assert_eq!(
            verify_consistency(3, 2, &[0; 32], &[0; 32], &[]),
            Err(ProofError::OldPastNew { old: 3, new: 2 })
        );
        assert_eq!(
            verify_consistency(2, 2, &[0; 32], &[1; 32], &[]),
            Err(ProofError::Fork)
        );
    }

    #[test]
    fn the_leaf_is_the_prefix_the_seq_and_the_record_hash() {
        let leaf = leaf_data(0x0102, &[0xab; 32]);
        assert_eq!(&leaf[..16], b"cairn-record-v1\0");
        assert_eq!(&leaf[16..24], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(&leaf[24..], &[0xab; 32]);
    }
}
