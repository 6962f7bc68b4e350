//! Proofs that a cairn log was not rewritten, in the formats of the transparency-log
//! world: an RFC 6962 Merkle tree over a log's records ([`tree`]), C2SP signed notes
//! with Ed25519 keys ([`note`]), tlog-checkpoints ([`checkpoint`]), tlog-proof files and
//! consistency checks against a log on disk ([`log`]), witnesses speaking tlog-witness
//! ([`witness`]), tlog-policy quorums ([`policy`]), and a log checked against the
//! checkpoints others hold and a signed session's end ([`held`]).
//!
//! The hash chain shows a log is intact; it cannot show it was not rewritten whole.
//! A checkpoint signed by the log's key and seen by someone else (a witness, an
//! auditor keeping the file) can: any later tree must extend it, which a consistency
//! proof checks.
//!
//! ```
//! use cairn_tlog::{checkpoint::Checkpoint, note::{Note, Signer, Verifier}, tree};
//! let key = Signer::from_seed("cairn.local", &[7; 32]);
//! let mut range = tree::CompactRange::new();
//! range.push(tree::record_leaf_hash(0, &[1; 32]));
//! let cp = Checkpoint { origin: "cairn.local/p/s".into(), size: range.size(), root: range.root(), extensions: vec![] };
//! let note = key.sign(&cp.to_text())?;
//! let signed = Note::parse(&note)?.verify(&[Verifier::parse(&key.vkey())?])?;
//! assert_eq!(signed.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod checkpoint;
pub mod held;
#[cfg(feature = "files")]
pub mod log;
pub mod note;
pub mod policy;
pub mod tree;
#[cfg(feature = "http")]
pub mod witness;

pub use checkpoint::Checkpoint;
pub use held::{Against, Held, HeldProblem, Role};
#[cfg(feature = "files")]
pub use log::{Proof, TlogError};
pub use note::{Note, NoteError, Signer, Verifier};
pub use policy::Policy;
pub use tree::{CompactRange, Hash32};
