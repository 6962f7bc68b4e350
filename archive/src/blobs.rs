//! Which blobs a session needs, found without knowing an event kind: a blob is needed
//! when a record, or a blob already needed, names its hash (a run of exactly 64
//! lowercase hex digits) and the project's blob store holds it. A workspace manifest
//! is a blob naming the files' blobs, so the search follows blobs into blobs. A 64-hex
//! run that names no blob (a record's own hash, its prev) is passed over; one that
//! names a blob by chance only costs that blob's upload.

use std::collections::BTreeSet;

use cairn_store::{BlobStore, Hash};

use crate::ArchiveError;

/// Calls `f` with every run of exactly 64 lowercase hex digits in `bytes`.
pub(crate) fn hex_runs(bytes: &[u8], mut f: impl FnMut(Hash)) {
    let is_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    let mut i = 0;
    while i < bytes.len() {
        if !is_hex(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_hex(bytes[i]) {
            i += 1;
        }
        if i - start == 64
            && let Some(h) = Hash::from_hex(&bytes[start..i])
        {
            f(h);
        }
    }
}

/// The blobs named by `seeds` and, transitively, by the blobs found, in `store`.
pub(crate) fn referenced<'a>(
    store: &BlobStore,
    seeds: impl IntoIterator<Item = &'a [u8]>,
) -> Result<BTreeSet<Hash>, ArchiveError> {
    let mut found = BTreeSet::new();
    let mut queue = Vec::new();
    let consider = |h: Hash, found: &mut BTreeSet<Hash>, queue: &mut Vec<Hash>| {
        if !found.contains(&h) && store.has(&h) {
            found.insert(h);
            queue.push(h);
        }
    };
    for s in seeds {
        hex_runs(s, |h| consider(h, &mut found, &mut queue));
    }
    while let Some(h) = queue.pop() {
        let bytes = store.get(&h)?;
        hex_runs(&bytes, |h| consider(h, &mut found, &mut queue));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        hex_runs(text.as_bytes(), |h| out.push(h.to_hex()));
        out
    }

    #[test]
    fn only_runs_of_exactly_64_lowercase_hex_digits_count() {
        let h = "ab".repeat(32);
        assert_eq!(runs(&format!("{{\"hash\":\"{h}\"}}")), vec![h.clone()]);
        assert_eq!(runs(&format!("{h}0")), Vec::<String>::new(), "65 digits");
        assert_eq!(runs(&h[1..]), Vec::<String>::new(), "63 digits");
        assert_eq!(runs(&h.to_uppercase()), Vec::<String>::new(), "upper case");
        assert_eq!(runs(&format!("{h} {h}")), vec![h.clone(), h]);
    }
}
