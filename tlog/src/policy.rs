//! Witness policies (`c2sp.org/tlog-policy`): which log keys sign checkpoints, which
//! witnesses cosign them, and the quorum of cosignatures a checkpoint needs.
//!
//! ```text
//! log <vkey> [<url>]
//! witness <name> <vkey> [<url>]
//! group <name> all|any|<k> <member>...
//! quorum <name>|none
//! ```

use std::collections::{BTreeMap, BTreeSet};

use crate::checkpoint::{Checkpoint, key_covers};
use crate::note::{Note, NoteError, TYPE_COSIGNATURE, TYPE_ED25519, Verifier};

/// The longest policy file read, in lines.
pub const POLICY_LINES_MAX: usize = 1_000;

/// A parsed policy.
#[derive(Debug, Clone)]
pub struct Policy {
    pub logs: Vec<Verifier>,
    pub witnesses: BTreeMap<String, Verifier>,
    groups: BTreeMap<String, (usize, Vec<String>)>,
    /// The name the quorum refers to (`none`: no cosignature needed).
    pub quorum: String,
}

/// What a policy said of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub checkpoint: Checkpoint,
    /// The witnesses whose cosignature verified.
    pub cosigned_by: Vec<String>,
}

/// Why a policy or a checkpoint under it fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("policy line {line}: {what}")]
    Syntax { line: usize, what: String },
    #[error("the policy has {lines} lines, more than the {max} read")]
    TooLong { lines: usize, max: usize },
    #[error("the checkpoint: {0}")]
    Note(#[from] NoteError),
    #[error("no log of the policy signs {origin:?}")]
    UnknownLog { origin: String },
    #[error("quorum {quorum} not met: cosigned by {}", if cosigned_by.is_empty() { "no known witness".to_string() } else { cosigned_by.join(", ") })]
    NoQuorum {
        quorum: String,
        cosigned_by: Vec<String>,
    },
}

/// A policy being read, line by line; each line's error is what it says is wrong.
#[derive(Default)]
struct Reading {
    logs: Vec<Verifier>,
    witnesses: BTreeMap<String, Verifier>,
    groups: BTreeMap<String, (usize, Vec<String>)>,
    quorum: Option<String>,
    keys_seen: BTreeSet<[u8; 32]>,
}

impl Reading {
    fn line(&mut self, raw: &str) -> Result<(), String> {
        let words: Vec<&str> = raw.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
        let Some(first) = words.first() else {
            return Ok(());
        };
        if first.starts_with('#') {
            return Ok(());
        }
        match (*first, &words[1..]) {
            ("log", [vkey] | [vkey, _]) => self.log(vkey),
            ("witness", [name, vkey] | [name, vkey, _]) => self.witness(name, vkey),
            ("group", [name, k, members @ ..]) if !members.is_empty() => {
                self.group(name, k, members)
            }
            ("quorum", [name]) => self.quorum(name),
            _ => Err(format!(
                "expected `log VKEY`, `witness NAME VKEY`, `group NAME K MEMBER...` or `quorum NAME`, found {raw:?}"
            )),
        }
    }

    fn defined(&self, name: &str) -> bool {
        self.witnesses.contains_key(name) || self.groups.contains_key(name)
    }

    fn log(&mut self, vkey: &str) -> Result<(), String> {
        let v = Verifier::parse(vkey).map_err(|e| e.to_string())?;
        if v.kind != TYPE_ED25519 {
            return Err("a log key is an Ed25519 note key (type 0x01)".into());
        }
        if !self.keys_seen.insert(v.public_key()) {
            return Err("this key is listed twice".into());
        }
        self.logs.push(v);
        Ok(())
    }

    fn witness(&mut self, name: &str, vkey: &str) -> Result<(), String> {
        if name == "none" || self.defined(name) {
            return Err(format!("the name {name} is already taken"));
        }
        let v = Verifier::parse(vkey).map_err(|e| e.to_string())?;
        if v.kind != TYPE_COSIGNATURE {
            return Err(
                "a witness key is a cosignature key (type 0x04): `cairn key show --cosigner` prints it"
                    .into(),
            );
        }
        if !self.keys_seen.insert(v.public_key()) {
            return Err("this key is listed twice".into());
        }
        self.witnesses.insert(name.to_string(), v);
        Ok(())
    }

    /// A group met when `k` of its members are (`all`, `any` or a number).
    fn group(&mut self, name: &str, k: &str, members: &[&str]) -> Result<(), String> {
        if name == "none" || self.defined(name) {
            return Err(format!("the name {name} is already taken"));
        }
        let mut seen = BTreeSet::new();
        for m in members {
            if !self.defined(m) {
                return Err(format!("{m} is not a witness or group defined above"));
            }
            if !seen.insert(*m) {
                return Err(format!("{m} is listed twice"));
            }
        }
        let n = members.len();
        let k = match k {
            "all" => n,
            "any" => 1,
            k => k
                .parse::<usize>()
                .ok()
                .filter(|k| (1..=n).contains(k))
                .ok_or_else(|| format!("threshold {k:?} is not all, any or 1..={n}"))?,
        };
        self.groups.insert(
            name.to_string(),
            (k, members.iter().map(|m| m.to_string()).collect()),
        );
        Ok(())
    }

    fn quorum(&mut self, name: &str) -> Result<(), String> {
        if self.quorum.is_some() {
            return Err("a second quorum line".into());
        }
        if name != "none" && !self.defined(name) {
            return Err(format!("{name} is not a witness or group defined above"));
        }
        self.quorum = Some(name.to_string());
        Ok(())
    }
}

impl Policy {
    /// Reads a policy file.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() > POLICY_LINES_MAX {
            return Err(PolicyError::TooLong {
                lines: lines.len(),
                max: POLICY_LINES_MAX,
            });
        }
        let mut read = Reading::default();
        for (i, raw) in lines.iter().enumerate() {
            read.line(raw)
                .map_err(|what| PolicyError::Syntax { line: i + 1, what })?;
        }
        let quorum = read.quorum.ok_or(PolicyError::Syntax {
            line: lines.len(),
            what: "no quorum line (`quorum none` asks for no cosignature)".into(),
        })?;
        Ok(Policy {
            logs: read.logs,
            witnesses: read.witnesses,
            groups: read.groups,
            quorum,
        })
    }

    fn met(&self, name: &str, cosigned: &BTreeSet<String>) -> bool {
        if name == "none" {
            return true;
        }
        if let Some((k, members)) = self.groups.get(name) {
            return members.iter().filter(|m| self.met(m, cosigned)).count() >= *k;
        }
        cosigned.contains(name)
    }

    /// Checks a signed checkpoint: signed by one of the policy's logs for its origin,
    /// every known cosignature valid, and the quorum met.
    pub fn check(&self, note_text: &str) -> Result<Verdict, PolicyError> {
        let note = Note::parse(note_text)?;
        let checkpoint = Checkpoint::parse(&note.text)?;
        let logs: Vec<Verifier> = self
            .logs
            .iter()
            .filter(|l| key_covers(&l.name, &checkpoint.origin))
            .cloned()
            .collect();
        if logs.is_empty() {
            return Err(PolicyError::UnknownLog {
                origin: checkpoint.origin,
            });
        }
        note.verify(&logs)?;
        let known: Vec<Verifier> = self.witnesses.values().cloned().collect();
        let cosigned: BTreeSet<String> = match note.verify(&known) {
            Ok(signed) => signed
                .into_iter()
                .filter_map(|(v, _)| {
                    self.witnesses
                        .iter()
                        .find(|(_, w)| **w == v)
                        .map(|(n, _)| n.clone())
                })
                .collect(),
            Err(NoteError::Unverified { .. }) => BTreeSet::new(),
            Err(e) => return Err(e.into()),
        };
        let cosigned_by: Vec<String> = cosigned.iter().cloned().collect();
        if !self.met(&self.quorum, &cosigned) {
            return Err(PolicyError::NoQuorum {
                quorum: self.quorum.clone(),
                cosigned_by,
            });
        }
        Ok(Verdict {
            checkpoint,
            cosigned_by,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::Signer;
    use crate::tree;

    #[test]
    fn a_quorum_of_two_of_three_needs_two_cosignatures() {
        let log = Signer::from_seed("cairn.local", &[1; 32]);
        let w: Vec<Signer> = (0..3)
            .map(|i| Signer::from_seed(&format!("w{i}.test"), &[10 + i; 32]))
            .collect();
        let policy = Policy::parse(&format!(
            "# a test policy\nlog {}\nwitness A {}\nwitness B {}\n\twitness C {} http://c.test\ngroup G 2 A B C\nquorum G\n",
            log.vkey(),
            w[0].cosigner_vkey(),
            w[1].cosigner_vkey(),
            w[2].cosigner_vkey()
        ))
        .unwrap();
        let cp = Checkpoint {
            origin: "cairn.local/p/s".into(),
            size: 1,
            root: tree::record_leaf_hash(0, &[0; 32]),
            extensions: vec![],
        }
        .to_text();
        let signed = log.sign(&cp).unwrap();
        let one = format!("{signed}{}", w[0].cosign_line(&cp, 5));
        assert_eq!(
            policy.check(&one),
            Err(PolicyError::NoQuorum {
                quorum: "G".into(),
                cosigned_by: vec!["A".into()]
            })
        );
        let two = format!("{one}{}", w[2].cosign_line(&cp, 6));
        assert_eq!(policy.check(&two).unwrap().cosigned_by, vec!["A", "C"]);
        // A cosignature of another checkpoint pasted on: the note is refused.
        let other = cp.replace("\n1\n", "\n2\n");
        let pasted = format!("{one}{}", w[1].cosign_line(&other, 7));
        assert!(matches!(
            policy.check(&pasted),
            Err(PolicyError::Note(NoteError::BadSignature { .. }))
        ));
        // Another log's checkpoint.
        let stranger = Checkpoint::parse(&cp).map(|mut c| {
            c.origin = "elsewhere.test/log".into();
            c.to_text()
        });
        assert!(matches!(
            policy.check(&log.sign(&stranger.unwrap()).unwrap()),
            Err(PolicyError::UnknownLog { .. })
        ));
    }

    #[test]
    fn policy_mistakes_name_their_line() {
        let log = Signer::from_seed("cairn.local", &[1; 32]);
        for (text, line, what) in [
            ("quorum A\n".to_string(), 1, "not a witness"),
            (format!("log {}\n", log.vkey()), 1, "no quorum"),
            (
                format!("witness A {}\nquorum A\n", log.vkey()),
                1,
                "cosignature key",
            ),
            (
                format!("witness A {}\ngroup G 2 A\nquorum G\n", log.cosigner_vkey()),
                2,
                "threshold",
            ),
            ("quorum none\nquorum none\n".to_string(), 2, "second quorum"),
            ("frobnicate\n".to_string(), 1, "expected"),
        ] {
            match Policy::parse(&text) {
                Err(PolicyError::Syntax { line: l, what: w }) => {
                    assert_eq!(l, line, "{text}");
                    assert!(w.contains(what), "{text}: {w}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        let at = format!("{}quorum none\n", "# c\n".repeat(POLICY_LINES_MAX - 1));
        assert!(Policy::parse(&at).is_ok());
        let past = format!("# c\n{at}");
        assert_eq!(
            Policy::parse(&past).unwrap_err(),
            PolicyError::TooLong {
                lines: POLICY_LINES_MAX + 1,
                max: POLICY_LINES_MAX
            }
        );
    }
}
