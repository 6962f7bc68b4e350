//! The tree of a cairn log on disk (a session's `events.jsonl`, or a project's allow
//! log): its leaves, its checkpoint files, the proofs of its records, and the check of
//! an older checkpoint against it.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use cairn_store::{LogReader, check_line};

use crate::checkpoint::{Checkpoint, b64, hash_b64};
use crate::note::{Note, NoteError, Verifier};
use crate::tree::{self, Hash32, ProofError};

/// The folder beside a log that holds its checkpoints, one file per tree size.
pub const CHECKPOINT_DIR: &str = "checkpoints";

/// The first line of a tlog-proof file.
pub const PROOF_HEADER: &str = "c2sp.org/tlog-proof@v1";

/// What went wrong with a log, a checkpoint or a proof.
#[derive(Debug, thiserror::Error)]
pub enum TlogError {
    #[error(transparent)]
    Store(#[from] cairn_store::Error),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Note(#[from] NoteError),
    #[error("malformed proof: {0}")]
    MalformedProof(String),
    #[error("the log has {size} records, none with seq {seq}")]
    NoRecord { seq: u64, size: u64 },
    #[error(
        "no checkpoint of this log covers seq {seq} (the latest is of size {latest}); a checkpoint is signed at the session's end and every few thousand records when a key exists"
    )]
    NoCheckpoint { seq: u64, latest: u64 },
    #[error("the checkpoint is of {origin:?}, not of this log ({want:?})")]
    WrongOrigin { origin: String, want: String },
    #[error("the checkpoint has {size} records but the log only {log} now: records were removed")]
    Shrunk { size: u64, log: u64 },
    #[error(
        "the log's first {size} records do not match the checkpoint ({what}): its history was rewritten"
    )]
    Rewritten { size: u64, what: ProofError },
    #[error(
        "no key given signs {origin:?} (keys: {names}); a key signs the origins below its name"
    )]
    NoKeyFor { origin: String, names: String },
    #[error("the proof does not hold: {0}")]
    Proof(ProofError),
    #[error("the proven record is not a cairn record: {0}")]
    BadRecord(String),
}

/// `cairn.local/<project key>/<log name>`: the origin of the log in `dir`
/// (`<project>/sessions/<id>` → the session id; `<project>/allow` → `allow`).
pub fn origin_of(dir: &Path) -> String {
    let name = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "unknown".into())
    };
    let log = name(Some(dir));
    let parent = dir.parent();
    let project = if parent.and_then(Path::file_name) == Some(std::ffi::OsStr::new("sessions")) {
        name(parent.and_then(Path::parent))
    } else {
        name(parent)
    };
    format!("cairn.local/{project}/{log}")
}

/// Every leaf hash of the log in `dir`, in order, each record checked as it is read.
pub fn leaves(dir: &Path) -> Result<Vec<Hash32>, TlogError> {
    let mut out = Vec::new();
    for r in LogReader::open(dir)?.records()? {
        let r = r?;
        out.push(tree::record_leaf_hash(r.seq, &r.hash.0));
    }
    Ok(out)
}

/// The line of record `seq` as the log holds it (without its newline).
fn record_line(dir: &Path, seq: u64) -> Result<Option<String>, TlogError> {
    let Some(r) = LogReader::open(dir)?.get(seq)? else {
        return Ok(None);
    };
    Ok(Some(format!(
        "{{\"prev\":\"{}\",\"seq\":{},\"ts\":\"{}\",\"event\":{},\"hash\":\"{}\"}}",
        r.prev.to_hex(),
        r.seq,
        r.ts,
        r.event.get(),
        r.hash.to_hex()
    )))
}

/// Writes a checkpoint note beside the log: `checkpoints/<size>` (tmp, sync, rename),
/// replacing one of the same size.
pub fn write_checkpoint(dir: &Path, size: u64, note: &str) -> Result<PathBuf, TlogError> {
    let cdir = dir.join(CHECKPOINT_DIR);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TlogError::Io { path, source }
    };
    cairn_store::private::create_dir_all(&cdir).map_err(io(&cdir))?;
    let path = cdir.join(size.to_string());
    let mut tmp = tempfile::NamedTempFile::new_in(&cdir).map_err(io(&cdir))?;
    std::io::Write::write_all(&mut tmp, note.as_bytes()).map_err(io(&path))?;
    tmp.as_file().sync_all().map_err(io(&path))?;
    tmp.persist(&path).map_err(|e| io(&path)(e.error))?;
    Ok(path)
}

/// The checkpoint files beside a log, by size, smallest first.
pub fn checkpoint_files(dir: &Path) -> Result<Vec<(u64, PathBuf)>, TlogError> {
    let cdir = dir.join(CHECKPOINT_DIR);
    let entries = match std::fs::read_dir(&cdir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(TlogError::Io { path: cdir, source }),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(|source| TlogError::Io {
            path: cdir.clone(),
            source,
        })?;
        if let Some(size) = e.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) {
            out.push((size, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn read(path: &Path) -> Result<String, TlogError> {
    std::fs::read_to_string(path).map_err(|source| TlogError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// A tlog-proof: the record's index, its inclusion path, the checkpoint note, and the
/// record's line as the extra data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proof {
    pub extra: Option<Vec<u8>>,
    pub index: u64,
    pub path: Vec<Hash32>,
    /// The signed checkpoint, verbatim.
    pub checkpoint: String,
}

impl Proof {
    /// The proof file's text.
    pub fn to_text(&self) -> String {
        let mut out = format!("{PROOF_HEADER}\n");
        if let Some(extra) = &self.extra {
            out.push_str(&format!("extra {}\n", B64.encode(extra)));
        }
        out.push_str(&format!("index {}\n", self.index));
        for h in &self.path {
            out.push_str(&b64(h));
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&self.checkpoint);
        out
    }

    /// Reads a proof file.
    pub fn parse(text: &str) -> Result<Proof, TlogError> {
        let bad = |s: String| TlogError::MalformedProof(s);
        let (head, checkpoint) = text
            .split_once("\n\n")
            .ok_or_else(|| bad("no blank line before the checkpoint".into()))?;
        let mut lines = head.split('\n');
        if lines.next() != Some(PROOF_HEADER) {
            return Err(bad(format!("the first line must be {PROOF_HEADER}")));
        }
        let mut line = lines.next();
        let mut extra = None;
        if let Some(e) = line.and_then(|l| l.strip_prefix("extra ")) {
            extra = Some(
                B64.decode(e)
                    .map_err(|e| bad(format!("extra data is not base64: {e}")))?,
            );
            line = lines.next();
        }
        let index_text = line
            .and_then(|l| l.strip_prefix("index "))
            .ok_or_else(|| bad("no \"index N\" line".into()))?;
        let index: u64 = index_text
            .parse()
            .ok()
            .filter(|_| index_text == "0" || !index_text.starts_with('0'))
            .ok_or_else(|| bad(format!("index {index_text:?} is not a decimal number")))?;
        let path = lines
            .map(|l| hash_b64(l).map_err(|e| bad(format!("inclusion proof line {e}"))))
            .collect::<Result<Vec<_>, _>>()?;
        if path.len() > tree::PROOF_HASHES_MAX {
            return Err(bad(format!(
                "{} proof lines, more than the {} of any tree",
                path.len(),
                tree::PROOF_HASHES_MAX
            )));
        }
        Ok(Proof {
            extra,
            index,
            path,
            checkpoint: checkpoint.to_string(),
        })
    }
}

/// Builds the proof of record `seq` of the log in `dir` against the smallest of its
/// checkpoint files that covers it.
pub fn prove(dir: &Path, seq: u64) -> Result<Proof, TlogError> {
    let leaves = leaves(dir)?;
    let size = leaves.len() as u64;
    if seq >= size {
        return Err(TlogError::NoRecord { seq, size });
    }
    let files = checkpoint_files(dir)?;
    let latest = files.last().map_or(0, |(s, _)| *s);
    let Some((_, path)) = files.into_iter().find(|(s, _)| *s > seq) else {
        return Err(TlogError::NoCheckpoint { seq, latest });
    };
    let note_text = read(&path)?;
    let note = Note::parse(&note_text)?;
    let cp = Checkpoint::parse(&note.text)?;
    let want = origin_of(dir);
    if cp.origin != want {
        return Err(TlogError::WrongOrigin {
            origin: cp.origin,
            want,
        });
    }
    if cp.size > size {
        return Err(TlogError::Shrunk {
            size: cp.size,
            log: size,
        });
    }
    let covered = &leaves[..cp.size as usize];
    if tree::root_of(covered) != cp.root {
        return Err(TlogError::Rewritten {
            size: cp.size,
            what: ProofError::RootMismatch,
        });
    }
    let path = tree::inclusion_proof(covered, seq).ok_or(TlogError::NoRecord { seq, size })?;
    let line = record_line(dir, seq)?.ok_or(TlogError::NoRecord { seq, size })?;
    Ok(Proof {
        extra: Some(line.into_bytes()),
        index: seq,
        path,
        checkpoint: note_text,
    })
}

/// The keys that may sign checkpoints of `origin` (see [`crate::checkpoint::key_covers`]).
fn keys_for(keys: &[Verifier], origin: &str) -> Result<Vec<Verifier>, TlogError> {
    let covering: Vec<Verifier> = keys
        .iter()
        .filter(|k| crate::checkpoint::key_covers(&k.name, origin))
        .cloned()
        .collect();
    if covering.is_empty() {
        let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
        return Err(TlogError::NoKeyFor {
            origin: origin.to_string(),
            names: names.join(", "),
        });
    }
    Ok(covering)
}

/// What a proof proves once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proven {
    pub checkpoint: Checkpoint,
    pub index: u64,
    /// The record's line.
    pub line: String,
    /// The log keys that signed the checkpoint, then the witnesses that cosigned it.
    pub signers: Vec<(Verifier, Option<u64>)>,
}

/// Checks a proof offline: the checkpoint is signed by one of `keys` (and every known
/// signature on it holds), the extra data is a cairn record whose own hash holds and
/// whose seq is the index, and the inclusion path leads from its leaf to the root.
pub fn verify_proof(text: &str, keys: &[Verifier]) -> Result<Proven, TlogError> {
    let proof = Proof::parse(text)?;
    let note = Note::parse(&proof.checkpoint)?;
    let checkpoint = Checkpoint::parse(&note.text)?;
    let signers = note.verify(&keys_for(keys, &checkpoint.origin)?)?;
    let extra = proof.extra.ok_or_else(|| {
        TlogError::BadRecord("the proof carries no record (no extra line)".into())
    })?;
    let line = String::from_utf8(extra)
        .map_err(|_| TlogError::BadRecord("the extra data is not UTF-8".into()))?;
    let fields = check_line(line.as_bytes()).map_err(|b| TlogError::BadRecord(b.what))?;
    if fields.seq != proof.index {
        return Err(TlogError::BadRecord(format!(
            "the record has seq {} but the proof is for index {}",
            fields.seq, proof.index
        )));
    }
    let leaf = tree::record_leaf_hash(fields.seq, &fields.hash.0);
    tree::verify_inclusion(
        proof.index,
        checkpoint.size,
        &leaf,
        &proof.path,
        &checkpoint.root,
    )
    .map_err(TlogError::Proof)?;
    Ok(Proven {
        checkpoint,
        index: proof.index,
        line,
        signers,
    })
}

/// The log's tree now and how an older checkpoint relates to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consistent {
    pub old_size: u64,
    pub size: u64,
    pub root: Hash32,
    /// The consistency proof from the old tree to this one (RFC 6962 §2.1.2).
    pub proof: Vec<Hash32>,
}

/// Checks that the log in `dir` extends the tree of an older checkpoint note (its
/// signatures are checked against `keys` when some are given): builds the consistency
/// proof from the checkpoint's size to the log's and verifies it against both roots.
/// A history rewritten before the checkpoint's size fails, whatever hashes were
/// recomputed.
pub fn verify_since(
    dir: &Path,
    note_text: &str,
    keys: &[Verifier],
) -> Result<Consistent, TlogError> {
    let note = Note::parse(note_text)?;
    let old = Checkpoint::parse(&note.text)?;
    if !keys.is_empty() {
        note.verify(&keys_for(keys, &old.origin)?)?;
    }
    let want = origin_of(dir);
    if old.origin != want {
        return Err(TlogError::WrongOrigin {
            origin: old.origin,
            want,
        });
    }
    let leaves = leaves(dir)?;
    let size = leaves.len() as u64;
    let root = tree::root_of(&leaves);
    let proof = tree::consistency_proof(&leaves, old.size).ok_or(TlogError::Shrunk {
        size: old.size,
        log: size,
    })?;
    tree::verify_consistency(old.size, size, &old.root, &root, &proof).map_err(|what| {
        TlogError::Rewritten {
            size: old.size,
            what,
        }
    })?;
    Ok(Consistent {
        old_size: old.size,
        size,
        root,
        proof,
    })
}

/// The newest checkpoint note beside the log, if any: (size, path, text).
pub fn latest_checkpoint(dir: &Path) -> Result<Option<(u64, PathBuf, String)>, TlogError> {
    match checkpoint_files(dir)?.pop() {
        Some((size, path)) => {
            let text = read(&path)?;
            Ok(Some((size, path, text)))
        }
        None => Ok(None),
    }
}

/// What one witness answered a push.
#[cfg(feature = "http")]
#[derive(Debug)]
pub struct Pushed {
    pub url: String,
    /// The cosignature lines added to the checkpoint, or why there are none.
    pub result: Result<Vec<String>, crate::witness::PushError>,
}

/// Sends the newest checkpoint of the log in `dir` to each witness (tlog-witness
/// `add-checkpoint`), and adds the cosignature lines they answer to its file. A
/// witness that saw another size first answers 409 with that size; the push then
/// sends the consistency proof from it, built from the log. (Feature `http`.)
#[cfg(feature = "http")]
pub fn push_checkpoint(dir: &Path, witnesses: &[String]) -> Result<(u64, Vec<Pushed>), TlogError> {
    let Some((size, _, text)) = latest_checkpoint(dir)? else {
        return Err(TlogError::NoCheckpoint { seq: 0, latest: 0 });
    };
    let note = Note::parse(&text)?;
    let leaves = leaves(dir)?;
    if size > leaves.len() as u64 {
        return Err(TlogError::Shrunk {
            size,
            log: leaves.len() as u64,
        });
    }
    let covered = &leaves[..size as usize];
    let mut results = Vec::new();
    let mut added: Vec<String> = Vec::new();
    for url in witnesses {
        let mut request = crate::witness::Request {
            old_size: 0,
            proof: Vec::new(),
            checkpoint: text.clone(),
        };
        let mut answer = crate::witness::add_checkpoint(url, &request);
        if let Err(crate::witness::PushError::Refused {
            status: 409, body, ..
        }) = &answer
            && let Ok(old) = body.trim().parse::<u64>()
            && old != 0
            && old <= size
        {
            request.old_size = old;
            request.proof = tree::consistency_proof(covered, old).unwrap_or_default();
            answer = crate::witness::add_checkpoint(url, &request);
        }
        let result = answer.map(|body| {
            body.lines()
                .filter(|l| crate::note::parse_sig_line(l).is_ok())
                .map(|l| format!("{l}\n"))
                .collect::<Vec<_>>()
        });
        if let Ok(lines) = &result {
            added.extend(lines.iter().cloned());
        }
        results.push(Pushed {
            url: url.clone(),
            result,
        });
    }
    if !added.is_empty() {
        let mut all = note;
        for line in added {
            if !all.sigs.iter().any(|s| s.line == line) {
                all.sigs
                    .push(crate::note::parse_sig_line(line.trim_end_matches('\n'))?);
            }
        }
        write_checkpoint(dir, size, &all.to_text())?;
    }
    Ok((size, results))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::Signer;

    #[test]
    fn a_proof_of_a_record_verifies_offline_and_a_forged_one_does_not() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("proj").join("sessions").join("s1");
        let mut log = cairn_store::LogWriter::create(&dir, Default::default()).unwrap();
        for i in 0..7 {
            log.append(&serde_json::json!({"type": "note", "i": i}))
                .unwrap();
        }
        log.sync().unwrap();
        drop(log);
        assert_eq!(origin_of(&dir), "cairn.local/proj/s1");
        let signer = Signer::from_seed("cairn.local", &[3; 32]);
        let leaves = leaves(&dir).unwrap();
        let cp = Checkpoint {
            origin: origin_of(&dir),
            size: 7,
            root: tree::root_of(&leaves),
            extensions: vec![],
        };
        write_checkpoint(&dir, 7, &signer.sign(&cp.to_text()).unwrap()).unwrap();
        let key = Verifier::parse(&signer.vkey()).unwrap();
        for seq in 0..7 {
            let text = prove(&dir, seq).unwrap().to_text();
            assert_eq!(Proof::parse(&text).unwrap().to_text(), text);
            let proven = verify_proof(&text, std::slice::from_ref(&key)).unwrap();
            assert_eq!(proven.index, seq);
            assert!(proven.line.contains(&format!("\"i\":{seq}")));
        }
        // The record's line changed (and its hash recomputed): the leaf moves, the
        // inclusion path no longer leads to the signed root.
        let proof = prove(&dir, 2).unwrap();
        let line = String::from_utf8(proof.extra.clone().unwrap()).unwrap();
        let hashed_end = line.len() - cairn_store::SUFFIX_BYTES;
        let forged_hashed = line[..hashed_end].replace("\"i\":2", "\"i\":9");
        let forged_line = format!(
            "{forged_hashed},\"hash\":\"{}\"}}",
            cairn_store::record_hash(forged_hashed.as_bytes()).to_hex()
        );
        let forged = Proof {
            extra: Some(forged_line.into_bytes()),
            ..proof.clone()
        };
        assert!(matches!(
            verify_proof(&forged.to_text(), std::slice::from_ref(&key)),
            Err(TlogError::Proof(ProofError::RootMismatch))
        ));
        // Another index for the same record: refused.
        let moved = Proof {
            index: 3,
            ..proof.clone()
        };
        assert!(matches!(
            verify_proof(&moved.to_text(), std::slice::from_ref(&key)),
            Err(TlogError::BadRecord(_))
        ));
        // Signed by someone else: refused.
        let other = Verifier::parse(&Signer::from_seed("cairn.local", &[4; 32]).vkey()).unwrap();
        assert!(matches!(
            verify_proof(&proof.to_text(), &[other]),
            Err(TlogError::Note(NoteError::Unverified { .. }))
        ));
        // No checkpoint covers a record past it.
        let mut log = cairn_store::LogWriter::open(&dir, Default::default())
            .unwrap()
            .0;
        log.append(&serde_json::json!({"type": "note"})).unwrap();
        log.sync().unwrap();
        drop(log);
        assert!(matches!(
            prove(&dir, 7),
            Err(TlogError::NoCheckpoint { seq: 7, latest: 7 })
        ));
        let since = verify_since(&dir, &read(&dir.join("checkpoints/7")).unwrap(), &[key]).unwrap();
        assert_eq!((since.old_size, since.size), (7, 8));
    }
}
