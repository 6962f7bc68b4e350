//! The 32-byte BLAKE3 digest used for records, blobs and snapshots, written as 64
//! lowercase hex digits wherever it is persisted.

use std::fmt;
use std::str::FromStr;

/// Most contents [`Hash::of_recent`] remembers per thread.
pub const RECENT_CONTENTS_MAX: usize = 8;

/// Longest content [`Hash::of_recent`] remembers: one longer is hashed and forgotten
/// (a comparison saves little against a read that long, and the memory is per thread).
pub const RECENT_CONTENT_BYTES_MAX: usize = 256 * 1024;

thread_local! {
    /// [`Hash::of_recent`]'s contents and their hashes, the last used at the back.
    static RECENT: std::cell::RefCell<Vec<(Hash, Vec<u8>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// A BLAKE3 digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Hash(pub [u8; 32]);

impl Hash {
    /// The `prev` of the first record.
    pub const ZERO: Hash = Hash([0; 32]);

    /// The plain BLAKE3 hash of `bytes` (what `b3sum` prints), used for blobs and files.
    pub fn of(bytes: &[u8]) -> Hash {
        Hash(*blake3::hash(bytes).as_bytes())
    }

    /// [`Hash::of`] `bytes`, a file's contents as read, remembered for the contents
    /// read last on this thread: contents equal byte for byte to remembered ones take
    /// their hash with one comparison (several times faster than hashing them), and
    /// any other are hashed. An agent reads the same files again and again (a range,
    /// then the next), and every read hashes the whole file. Keyed on the bytes
    /// themselves, not on a file's name or times, so no change can be missed.
    ///
    /// At most [`RECENT_CONTENTS_MAX`] contents of at most [`RECENT_CONTENT_BYTES_MAX`]
    /// bytes each are remembered, the oldest forgotten first.
    pub fn of_recent(bytes: &[u8]) -> Hash {
        if bytes.len() > RECENT_CONTENT_BYTES_MAX {
            return Hash::of(bytes);
        }
        RECENT.with_borrow_mut(|recent| {
            if let Some(at) = recent.iter().position(|(_, b)| b.as_slice() == bytes) {
                // The one found moves to the back: the last forgotten.
                let kept = recent.remove(at);
                let hash = kept.0;
                recent.push(kept);
                return hash;
            }
            let hash = Hash::of(bytes);
            if recent.len() >= RECENT_CONTENTS_MAX {
                recent.remove(0);
            }
            recent.push((hash, bytes.to_vec()));
            hash
        })
    }

    /// How many contents [`Hash::of_recent`] remembers on this thread.
    #[cfg(test)]
    fn recent_contents() -> usize {
        RECENT.with_borrow(Vec::len)
    }

    /// Lowercase hex, 64 digits.
    pub fn to_hex(&self) -> String {
        self.with_hex(str::to_string)
    }

    /// `f` of [`Hash::to_hex`], written on the stack: serializing a hash (twice a
    /// record) allocates nothing.
    fn with_hex<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        let mut out = [0u8; 64];
        encode_lower_hex(&self.0, &mut out);
        // Hex digits are ASCII: always valid, and checked at the cost of a short scan.
        match std::str::from_utf8(&out) {
            Ok(hex) => f(hex),
            Err(e) => panic!("hex digits are ASCII: {e}"),
        }
    }

    /// Parses exactly 64 lowercase hex digits.
    pub fn from_hex(hex: &[u8]) -> Option<Hash> {
        if hex.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        decode_lower_hex(hex, &mut out).then_some(Hash(out))
    }

    /// The first `n` hex digits, for display.
    pub fn short(&self, n: usize) -> String {
        let mut hex = self.to_hex();
        hex.truncate(n);
        hex
    }
}

/// Writes `bytes` as lowercase hex digits into `out`, which must be twice as long.
#[inline]
pub fn encode_lower_hex(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    assert_eq!(out.len(), 2 * bytes.len(), "two hex digits a byte");
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[(b >> 4) as usize];
        pair[1] = DIGITS[(b & 0xf) as usize];
    }
}

/// Parses the lowercase hex digits `hex` into `out`, which must be half as long;
/// `false` when any is not one (an uppercase digit is not: what is persisted is
/// lowercase, so that it round-trips byte for byte).
#[inline]
pub fn decode_lower_hex(hex: &[u8], out: &mut [u8]) -> bool {
    assert_eq!(hex.len(), 2 * out.len(), "two hex digits a byte");
    // A table lookup per digit, checked once at the end: this runs twice per record
    // in verify, so it must not branch per character.
    let mut bad = 0u8;
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let (hi, lo) = (HEX_VALUE[pair[0] as usize], HEX_VALUE[pair[1] as usize]);
        bad |= (hi | lo) & 0x80;
        *o = (hi << 4) | (lo & 0x0f);
    }
    bad == 0
}

const HEX_VALUE: [u8; 256] = {
    let mut t = [0x80u8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with_hex(|hex| f.write_str(hex))
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({})", self.short(16))
    }
}

/// The error of parsing a [`Hash`] from text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a hash: expected 64 lowercase hex digits")]
pub struct ParseHashError;

impl FromStr for Hash {
    type Err = ParseHashError;
    fn from_str(s: &str) -> Result<Hash, ParseHashError> {
        Hash::from_hex(s.as_bytes()).ok_or(ParseHashError)
    }
}

impl serde::Serialize for Hash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.with_hex(|hex| s.serialize_str(hex))
    }
}

impl<'de> serde::Deserialize<'de> for Hash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Hash, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A hash is 64 lowercase hex digits in JSON (the event schema, `docs/event.schema.json`).
impl schemars::JsonSchema for Hash {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Hash".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A BLAKE3 digest: 64 lowercase hex digits.",
            "type": "string",
            "pattern": "^[0-9a-f]{64}$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Whatever was remembered before, the hash of contents is their hash: contents
        /// of equal length that differ (in any byte) are told apart.
        #[test]
        fn a_remembered_hash_is_the_hash_of_the_contents(
            reads in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(vec![b'a', b'b']), 0..6),
                1..40,
            ),
        ) {
            for bytes in &reads {
                proptest::prop_assert_eq!(Hash::of_recent(bytes), Hash::of(bytes));
            }
        }
    }

    #[test]
    fn recent_contents_are_bounded_in_number_and_in_length() {
        // A thread of its own: the memory is per thread.
        std::thread::spawn(|| {
            let at_max = vec![b'x'; RECENT_CONTENT_BYTES_MAX];
            assert_eq!(Hash::of_recent(&at_max), Hash::of(&at_max));
            assert_eq!(Hash::recent_contents(), 1, "contents at the limit are kept");
            let past = vec![b'x'; RECENT_CONTENT_BYTES_MAX + 1];
            assert_eq!(Hash::of_recent(&past), Hash::of(&past));
            assert_eq!(
                Hash::recent_contents(),
                1,
                "contents past the limit are not"
            );
            // The same contents again are found, not added.
            assert_eq!(Hash::of_recent(&at_max), Hash::of(&at_max));
            assert_eq!(Hash::recent_contents(), 1);
            for i in 0..2 * RECENT_CONTENTS_MAX {
                let bytes = i.to_string().into_bytes();
                assert_eq!(Hash::of_recent(&bytes), Hash::of(&bytes));
                assert!(Hash::recent_contents() <= RECENT_CONTENTS_MAX);
            }
            assert_eq!(Hash::recent_contents(), RECENT_CONTENTS_MAX);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn hex_round_trip_and_rejects() {
        let h = Hash::of(b"abc");
        assert_eq!(h.to_hex(), blake3::hash(b"abc").to_hex().as_str());
        assert_eq!(h.to_hex().parse::<Hash>(), Ok(h));
        assert_eq!("ABC".parse::<Hash>(), Err(ParseHashError));
        let upper = h.to_hex().to_uppercase();
        assert_eq!(upper.parse::<Hash>(), Err(ParseHashError));
    }

    #[test]
    fn hex_of_any_length_round_trips_lowercase_only() {
        let bytes: Vec<u8> = (0..=255u8).collect();
        for n in [0, 1, 20, 32, 256] {
            let mut hex = vec![0u8; 2 * n];
            encode_lower_hex(&bytes[..n], &mut hex);
            let mut back = vec![0u8; n];
            assert!(decode_lower_hex(&hex, &mut back), "{n}");
            assert_eq!(back, &bytes[..n]);
        }
        let mut hex = [0u8; 4];
        encode_lower_hex(&[0xab, 0x0f], &mut hex);
        assert_eq!(&hex, b"ab0f");
        let mut out = [0u8; 2];
        for bad in [&b"AB0F"[..], b"ab0g", b"ab0 ", b"\xff\xffab"] {
            assert!(!decode_lower_hex(bad, &mut out), "{bad:?}");
        }
    }
}
