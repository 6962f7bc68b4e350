//! C2SP signed notes (`c2sp.org/signed-note`) with Ed25519 keys, and the timestamped
//! Ed25519 cosignatures of `c2sp.org/tlog-cosignature` (`cosignature/v1`).
//!
//! A note is a text ending in a newline, a blank line, then one or more lines
//! `— <name> base64(key id ‖ signature)`. A key is known by its name and its key ID
//! (`SHA-256(name ‖ 0x0A ‖ type ‖ public key)[:4]`, type 0x01 for a log's Ed25519 key,
//! 0x04 for a cosigner's). A verifier key ("vkey") is `name+hex(key id)+base64(type ‖
//! public key)`; a signing key is stored as `PRIVATE+KEY+name+hex(key id)+base64(0x01 ‖
//! seed)`, the layout of Go's `golang.org/x/mod/sumdb/note`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use sha2::{Digest, Sha256};

/// Signature type of an Ed25519 note signature.
pub const TYPE_ED25519: u8 = 0x01;
/// Signature type of a timestamped Ed25519 cosignature (`cosignature/v1`).
pub const TYPE_COSIGNATURE: u8 = 0x04;

/// The most signature lines a note may carry (the spec asks to accept at least 16).
pub const NOTE_SIGNATURES_MAX: usize = 64;
/// The longest note read, in bytes.
pub const NOTE_BYTES_MAX: usize = 65_536;

/// What is wrong with a key, a note or a signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    #[error("malformed key: {0}")]
    Key(String),
    #[error("malformed note: {0}")]
    Malformed(String),
    #[error("the note has {count} signatures, more than the {max} read")]
    TooManySignatures { count: usize, max: usize },
    #[error("the note is {len} bytes, more than the {max} read")]
    TooLong { len: usize, max: usize },
    #[error("the signature of {name} ({id:08x}) does not verify: the note was changed or forged")]
    BadSignature { name: String, id: u32 },
    #[error("no signature by a known key (signed by: {signers})")]
    Unverified { signers: String },
}

/// `SHA-256(name ‖ 0x0A ‖ type ‖ key)[:4]` as a big-endian u32.
pub fn key_id(name: &str, kind: u8, public: &[u8]) -> u32 {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', kind]);
    h.update(public);
    let d = h.finalize();
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

fn check_name(name: &str) -> Result<(), NoteError> {
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '+') {
        return Err(NoteError::Key(format!(
            "key name {name:?} must be non-empty, with no space and no '+'"
        )));
    }
    Ok(())
}

/// An Ed25519 signing key with its name: a log's (type 0x01) key, which can also
/// cosign as a witness (type 0x04, another key ID).
#[derive(Clone)]
pub struct Signer {
    name: String,
    key: SigningKey,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signer({})", self.vkey())
    }
}

impl Signer {
    /// A new key from the operating system's random source.
    pub fn generate(name: &str) -> Result<Signer, NoteError> {
        check_name(name)?;
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed)
            .map_err(|e| NoteError::Key(format!("no random bytes for a key: {e}")))?;
        Ok(Signer::from_seed(name, &seed))
    }

    /// The key of a 32-byte Ed25519 seed (RFC 8032 private key).
    pub fn from_seed(name: &str, seed: &[u8; 32]) -> Signer {
        Signer {
            name: name.to_string(),
            key: SigningKey::from_bytes(seed),
        }
    }

    /// Reads `PRIVATE+KEY+name+hex id+base64(0x01 ‖ seed)`.
    pub fn parse(text: &str) -> Result<Signer, NoteError> {
        let text = text.trim_end_matches('\n');
        let rest = text
            .strip_prefix("PRIVATE+KEY+")
            .ok_or_else(|| NoteError::Key("a signing key starts with PRIVATE+KEY+".into()))?;
        let (name, id, material) = split_key(rest)?;
        let material = B64
            .decode(material)
            .map_err(|e| NoteError::Key(format!("key material is not base64: {e}")))?;
        let [TYPE_ED25519, seed @ ..] = material.as_slice() else {
            return Err(NoteError::Key(
                "not an Ed25519 signing key (type 0x01)".into(),
            ));
        };
        let seed: [u8; 32] = seed
            .try_into()
            .map_err(|_| NoteError::Key(format!("seed is {} bytes, not 32", seed.len())))?;
        let signer = Signer::from_seed(name, &seed);
        if signer.key_id() != id {
            return Err(NoteError::Key(format!(
                "key ID {id:08x} does not match the key ({:08x})",
                signer.key_id()
            )));
        }
        Ok(signer)
    }

    /// The text [`Signer::parse`] reads back (a secret: store it with mode 0600).
    pub fn to_private_text(&self) -> String {
        let mut material = vec![TYPE_ED25519];
        material.extend_from_slice(self.key.as_bytes());
        format!(
            "PRIVATE+KEY+{}+{:08x}+{}",
            self.name,
            self.key_id(),
            B64.encode(material)
        )
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key ID of its note signatures (type 0x01).
    pub fn key_id(&self) -> u32 {
        key_id(
            &self.name,
            TYPE_ED25519,
            self.key.verifying_key().as_bytes(),
        )
    }

    /// The verifier key of its note signatures.
    pub fn vkey(&self) -> String {
        vkey_text(
            &self.name,
            TYPE_ED25519,
            self.key.verifying_key().as_bytes(),
        )
    }

    /// The verifier key of its cosignatures (type 0x04).
    pub fn cosigner_vkey(&self) -> String {
        vkey_text(
            &self.name,
            TYPE_COSIGNATURE,
            self.key.verifying_key().as_bytes(),
        )
    }

    /// The signature line of `text` (a note's text, ending in a newline).
    pub fn sign_line(&self, text: &str) -> String {
        let sig = self.key.sign(text.as_bytes());
        let mut bytes = self.key_id().to_be_bytes().to_vec();
        bytes.extend_from_slice(&sig.to_bytes());
        format!("— {} {}\n", self.name, B64.encode(bytes))
    }

    /// `text` signed: the text, a blank line, its signature line.
    pub fn sign(&self, text: &str) -> Result<String, NoteError> {
        check_text(text)?;
        Ok(format!("{text}\n{}", self.sign_line(text)))
    }

    /// The cosignature line (`cosignature/v1`) of a checkpoint's text at `timestamp`
    /// (POSIX seconds).
    pub fn cosign_line(&self, text: &str, timestamp: u64) -> String {
        let message = cosigned_message(text, timestamp);
        let sig = self.key.sign(message.as_bytes());
        let id = key_id(
            &self.name,
            TYPE_COSIGNATURE,
            self.key.verifying_key().as_bytes(),
        );
        let mut bytes = id.to_be_bytes().to_vec();
        bytes.extend_from_slice(&timestamp.to_be_bytes());
        bytes.extend_from_slice(&sig.to_bytes());
        format!("— {} {}\n", self.name, B64.encode(bytes))
    }
}

fn cosigned_message(text: &str, timestamp: u64) -> String {
    format!("cosignature/v1\ntime {timestamp}\n{text}")
}

fn vkey_text(name: &str, kind: u8, public: &[u8]) -> String {
    let mut material = vec![kind];
    material.extend_from_slice(public);
    format!(
        "{name}+{:08x}+{}",
        key_id(name, kind, public),
        B64.encode(material)
    )
}

fn split_key(text: &str) -> Result<(&str, u32, &str), NoteError> {
    let mut parts = text.splitn(3, '+');
    let (Some(name), Some(id), Some(material)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(NoteError::Key(
            "expected name+keyid+base64 (three parts joined by '+')".into(),
        ));
    };
    check_name(name)?;
    if id.len() != 8 {
        return Err(NoteError::Key(format!("key ID {id:?} is not 8 hex digits")));
    }
    let id = u32::from_str_radix(id, 16)
        .map_err(|_| NoteError::Key(format!("key ID {id:?} is not 8 hex digits")))?;
    Ok((name, id, material))
}

/// A verifier key: a log's Ed25519 key (signatures on the note text) or a witness's
/// cosignature key (signatures on `cosignature/v1`, a timestamp and the text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verifier {
    pub name: String,
    pub id: u32,
    pub kind: u8,
    key: VerifyingKey,
}

impl Verifier {
    /// Reads a vkey: `name+hex(key id)+base64(type ‖ public key)`, type 0x01 or 0x04.
    pub fn parse(text: &str) -> Result<Verifier, NoteError> {
        let (name, id, material) = split_key(text.trim())?;
        let material = B64
            .decode(material)
            .map_err(|e| NoteError::Key(format!("key material is not base64: {e}")))?;
        let [kind, public @ ..] = material.as_slice() else {
            return Err(NoteError::Key("empty key material".into()));
        };
        if *kind != TYPE_ED25519 && *kind != TYPE_COSIGNATURE {
            return Err(NoteError::Key(format!(
                "signature type 0x{kind:02x} is not Ed25519 (0x01) or an Ed25519 cosignature (0x04)"
            )));
        }
        let public: [u8; 32] = public
            .try_into()
            .map_err(|_| NoteError::Key(format!("public key is {} bytes, not 32", public.len())))?;
        let key = VerifyingKey::from_bytes(&public)
            .map_err(|e| NoteError::Key(format!("not an Ed25519 public key: {e}")))?;
        if key_id(name, *kind, &public) != id {
            return Err(NoteError::Key(format!(
                "key ID {id:08x} does not match the key ({:08x})",
                key_id(name, *kind, &public)
            )));
        }
        Ok(Verifier {
            name: name.to_string(),
            id,
            kind: *kind,
            key,
        })
    }

    /// The raw public key.
    pub fn public_key(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    /// Whether `sig` (the bytes after the key ID) signs `text`; for a cosignature, the
    /// timestamp it signed.
    fn check(&self, text: &str, sig: &[u8]) -> Option<Option<u64>> {
        match self.kind {
            TYPE_COSIGNATURE => {
                let (ts, sig) = sig.split_at_checked(8)?;
                let ts = u64::from_be_bytes(ts.try_into().ok()?);
                let sig = Signature::from_slice(sig).ok()?;
                self.key
                    .verify(cosigned_message(text, ts).as_bytes(), &sig)
                    .ok()
                    .map(|_| Some(ts))
            }
            _ => {
                let sig = Signature::from_slice(sig).ok()?;
                self.key.verify(text.as_bytes(), &sig).ok().map(|_| None)
            }
        }
    }
}

/// One signature line of a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigLine {
    pub name: String,
    pub id: u32,
    /// The signature bytes after the key ID.
    pub sig: Vec<u8>,
    /// The line as written, with its newline.
    pub line: String,
}

/// A note split into its text and its signature lines, not yet verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The text, ending in a newline.
    pub text: String,
    pub sigs: Vec<SigLine>,
}

fn check_text(text: &str) -> Result<(), NoteError> {
    if !text.ends_with('\n') {
        return Err(NoteError::Malformed(
            "the text must end with a newline".into(),
        ));
    }
    if let Some(c) = text.chars().find(|c| c.is_control() && *c != '\n') {
        return Err(NoteError::Malformed(format!(
            "control character {c:?} in the text"
        )));
    }
    Ok(())
}

/// Parses one signature line (without its newline).
pub fn parse_sig_line(line: &str) -> Result<SigLine, NoteError> {
    let rest = line.strip_prefix("— ").ok_or_else(|| {
        NoteError::Malformed(format!(
            "signature line {line:?} does not start with \"— \""
        ))
    })?;
    let (name, b64) = rest
        .split_once(' ')
        .ok_or_else(|| NoteError::Malformed(format!("signature line {line:?} has no signature")))?;
    check_name(name).map_err(|e| NoteError::Malformed(e.to_string()))?;
    let bytes = B64
        .decode(b64)
        .map_err(|e| NoteError::Malformed(format!("signature of {name} is not base64: {e}")))?;
    if bytes.len() < 5 {
        return Err(NoteError::Malformed(format!(
            "signature of {name} is {} bytes, too short for a key ID and a signature",
            bytes.len()
        )));
    }
    Ok(SigLine {
        name: name.to_string(),
        id: u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
        sig: bytes[4..].to_vec(),
        line: format!("{line}\n"),
    })
}

impl Note {
    /// Splits a signed note at its last blank line; checks the layout, not the
    /// signatures.
    pub fn parse(note: &str) -> Result<Note, NoteError> {
        if note.len() > NOTE_BYTES_MAX {
            return Err(NoteError::TooLong {
                len: note.len(),
                max: NOTE_BYTES_MAX,
            });
        }
        if !note.ends_with('\n') {
            return Err(NoteError::Malformed("a note ends with a newline".into()));
        }
        let split = note
            .rfind("\n\n")
            .ok_or_else(|| NoteError::Malformed("no blank line before the signatures".into()))?;
        let text = &note[..split + 1];
        check_text(text)?;
        let sigs_text = &note[split + 2..];
        let lines: Vec<&str> = sigs_text.lines().collect();
        if lines.is_empty() {
            return Err(NoteError::Malformed("no signature line".into()));
        }
        if lines.len() > NOTE_SIGNATURES_MAX {
            return Err(NoteError::TooManySignatures {
                count: lines.len(),
                max: NOTE_SIGNATURES_MAX,
            });
        }
        let sigs = lines
            .into_iter()
            .map(parse_sig_line)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Note {
            text: text.to_string(),
            sigs,
        })
    }

    /// The note as text.
    pub fn to_text(&self) -> String {
        let mut out = format!("{}\n", self.text);
        for s in &self.sigs {
            out.push_str(&s.line);
        }
        out
    }

    /// Checks the signatures of the known keys: every one present must verify, and at
    /// least one must be there. Returns the keys that signed (with a cosignature's
    /// timestamp). Unknown signatures are ignored, as the spec asks.
    pub fn verify(&self, known: &[Verifier]) -> Result<Vec<(Verifier, Option<u64>)>, NoteError> {
        let mut signed = Vec::new();
        for s in &self.sigs {
            let Some(v) = known.iter().find(|v| v.name == s.name && v.id == s.id) else {
                continue;
            };
            match v.check(&self.text, &s.sig) {
                Some(ts) => signed.push((v.clone(), ts)),
                None => {
                    return Err(NoteError::BadSignature {
                        name: s.name.clone(),
                        id: s.id,
                    });
                }
            }
        }
        if signed.is_empty() {
            let signers: Vec<String> = self
                .sigs
                .iter()
                .map(|s| format!("{} ({:08x})", s.name, s.id))
                .collect();
            return Err(NoteError::Unverified {
                signers: if signers.is_empty() {
                    "nobody".into()
                } else {
                    signers.join(", ")
                },
            });
        }
        Ok(signed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The example of c2sp.org/signed-note ("Verifier keys" → "Example"), copied from
    // signed-note.md in the C2SP/C2SP repository.
    const SPEC_VKEY: &str = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";
    const SPEC_NOTE: &str = "This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n";

    #[test]
    fn the_signed_note_spec_vector_verifies() {
        let v = Verifier::parse(SPEC_VKEY).unwrap();
        assert_eq!(v.name, "example.com/foo");
        assert_eq!(v.id, 0x530d903a);
        assert_eq!(v.kind, TYPE_ED25519);
        // The key ID is the one the spec's formula gives.
        assert_eq!(key_id(&v.name, TYPE_ED25519, &v.public_key()), 0x530d903a);
        let note = Note::parse(SPEC_NOTE).unwrap();
        assert_eq!(note.text, "This is an example message.\n");
        assert_eq!(note.to_text(), SPEC_NOTE);
        let signed = note.verify(std::slice::from_ref(&v)).unwrap();
        assert_eq!(signed, vec![(v.clone(), None)]);
        // One changed byte of the text: refused.
        let changed = SPEC_NOTE.replacen("example", "exemple", 1);
        assert_eq!(
            Note::parse(&changed)
                .unwrap()
                .verify(std::slice::from_ref(&v)),
            Err(NoteError::BadSignature {
                name: "example.com/foo".into(),
                id: 0x530d903a
            })
        );
    }

    #[test]
    fn a_generated_key_signs_and_cosigns_and_reads_back() {
        let s = Signer::from_seed("cairn.local/test", &[7; 32]);
        let again = Signer::parse(&s.to_private_text()).unwrap();
        assert_eq!(again.vkey(), s.vkey());
        let text = "cairn.local/p/s\n3\nAAAA\n";
        let note = Note::parse(&s.sign(text).unwrap()).unwrap();
        let v = Verifier::parse(&s.vkey()).unwrap();
        assert_eq!(note.verify(std::slice::from_ref(&v)).unwrap().len(), 1);
        // A cosignature verifies with the cosigner vkey only, and carries its time.
        let cv = Verifier::parse(&s.cosigner_vkey()).unwrap();
        assert_ne!(cv.id, v.id);
        let cosigned =
            Note::parse(&format!("{text}\n{}", s.cosign_line(text, 1_700_000_000))).unwrap();
        assert_eq!(
            cosigned.verify(std::slice::from_ref(&cv)).unwrap(),
            vec![(cv.clone(), Some(1_700_000_000))]
        );
        assert!(matches!(
            cosigned.verify(std::slice::from_ref(&v)),
            Err(NoteError::Unverified { .. })
        ));
    }

    #[test]
    fn malformed_keys_and_notes_say_what_is_wrong() {
        let s = Signer::from_seed("a", &[1; 32]);
        let vkey = s.vkey();
        let wrong_id = format!("a+00000000+{}", vkey.rsplit('+').next().unwrap());
        assert!(
            matches!(Verifier::parse(&wrong_id), Err(NoteError::Key(m)) if m.contains("does not match"))
        );
        assert!(matches!(
            Verifier::parse("a b+530d903a+AA=="),
            Err(NoteError::Key(_))
        ));
        assert!(
            matches!(Signer::parse(&vkey), Err(NoteError::Key(m)) if m.contains("PRIVATE+KEY+"))
        );
        assert!(matches!(
            Note::parse("text\n"),
            Err(NoteError::Malformed(_))
        ));
        assert!(matches!(
            Note::parse("text\n\n— a !!\n"),
            Err(NoteError::Malformed(_))
        ));
        assert!(matches!(s.sign("no newline"), Err(NoteError::Malformed(_))));
    }

    #[test]
    fn a_note_holds_at_most_note_signatures_max_signatures() {
        let s = Signer::from_seed("a", &[1; 32]);
        let text = "t\n";
        let line = s.sign_line(text);
        let at = format!("{text}\n{}", line.repeat(NOTE_SIGNATURES_MAX));
        assert_eq!(Note::parse(&at).unwrap().sigs.len(), NOTE_SIGNATURES_MAX);
        let past = format!("{text}\n{}", line.repeat(NOTE_SIGNATURES_MAX + 1));
        assert_eq!(
            Note::parse(&past),
            Err(NoteError::TooManySignatures {
                count: NOTE_SIGNATURES_MAX + 1,
                max: NOTE_SIGNATURES_MAX
            })
        );
        let long_at = format!("{}\n\n{line}", "x".repeat(NOTE_BYTES_MAX - 2 - line.len()));
        assert_eq!(long_at.len(), NOTE_BYTES_MAX);
        assert!(Note::parse(&long_at).is_ok());
        let long_past = format!("x{long_at}");
        assert_eq!(
            Note::parse(&long_past),
            Err(NoteError::TooLong {
                len: NOTE_BYTES_MAX + 1,
                max: NOTE_BYTES_MAX
            })
        );
    }
}
