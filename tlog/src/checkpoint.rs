//! C2SP tlog-checkpoints (`c2sp.org/tlog-checkpoint`): the note text `origin\nsize\n
//! base64(root)\n` and optional extension lines.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use crate::note::NoteError;
use crate::tree::Hash32;

/// A tree head of a named log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub origin: String,
    pub size: u64,
    pub root: Hash32,
    /// Extension lines, each non-empty (cairn writes none).
    pub extensions: Vec<String>,
}

/// Decodes one base64 SHA-256 hash.
pub fn hash_b64(text: &str) -> Result<Hash32, String> {
    let bytes = B64
        .decode(text)
        .map_err(|e| format!("{text:?} is not base64: {e}"))?;
    bytes
        .as_slice()
        .try_into()
        .map_err(|_| format!("{text:?} is {} bytes, not a 32-byte hash", bytes.len()))
}

/// Encodes a hash in base64.
pub fn b64(hash: &Hash32) -> String {
    B64.encode(hash)
}

/// Whether a log key named `name` may sign checkpoints of `origin`. One cairn key signs
/// many logs (one per session, one per project's allow list), so a key covers the
/// origin of its own name and every origin below it: `cairn.local` covers
/// `cairn.local/<project>/<session>`. (The spec asks that the name match the origin;
/// cairn reads "match" as this prefix rule.)
pub fn key_covers(name: &str, origin: &str) -> bool {
    origin == name
        || origin
            .strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('/') || name.ends_with('/'))
}

impl Checkpoint {
    /// The note text.
    pub fn to_text(&self) -> String {
        let mut out = format!("{}\n{}\n{}\n", self.origin, self.size, b64(&self.root));
        for e in &self.extensions {
            out.push_str(e);
            out.push('\n');
        }
        out
    }

    /// Reads a checkpoint's note text (the part before the signatures).
    pub fn parse(text: &str) -> Result<Checkpoint, NoteError> {
        let bad = |what: String| NoteError::Malformed(format!("checkpoint: {what}"));
        let body = text
            .strip_suffix('\n')
            .ok_or_else(|| bad("the text must end with a newline".into()))?;
        let mut lines = body.split('\n');
        let origin = lines.next().unwrap_or_default();
        if origin.is_empty() {
            return Err(bad("the first line (the origin) is empty".into()));
        }
        let size_text = lines
            .next()
            .ok_or_else(|| bad("no tree size line".into()))?;
        let size: u64 = size_text
            .parse()
            .ok()
            .filter(|_| size_text == "0" || !size_text.starts_with('0'))
            .filter(|_| size_text.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| bad(format!("tree size {size_text:?} is not a decimal number")))?;
        let root = hash_b64(
            lines
                .next()
                .ok_or_else(|| bad("no root hash line".into()))?,
        )
        .map_err(|e| bad(format!("root hash {e}")))?;
        let extensions: Vec<String> = lines.map(str::to_string).collect();
        if extensions.iter().any(String::is_empty) {
            return Err(bad("an extension line is empty".into()));
        }
        Ok(Checkpoint {
            origin: origin.to_string(),
            size,
            root,
            extensions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_checkpoint_reads_and_writes_back() {
        // The example of c2sp.org/tlog-checkpoint.
        let text =
            "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
        let c = Checkpoint::parse(text).unwrap();
        assert_eq!(c.origin, "example.com/behind-the-sofa");
        assert_eq!(c.size, 20852163);
        assert_eq!(c.to_text(), text);
    }

    #[test]
    fn a_bad_checkpoint_says_which_line() {
        for (text, what) in [
            (
                "o\n012\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
                "tree size",
            ),
            ("o\n12\nAAAA\n", "root hash"),
            (
                "\n12\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
                "origin",
            ),
            ("o\n12\n", "root hash"),
            (
                "o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\nx\n",
                "extension",
            ),
        ] {
            let e = Checkpoint::parse(text).unwrap_err().to_string();
            assert!(e.contains(what), "{text:?}: {e}");
        }
    }
}
