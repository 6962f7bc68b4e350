//! A witness (`c2sp.org/tlog-witness`): it keeps the latest checkpoint it cosigned for
//! each log it knows, and cosigns a new one only when a consistency proof shows that it
//! extends that one. Two different checkpoints of the same size — a forked history —
//! are never both cosigned.
//!
//! [`Witness::add_checkpoint`] is the protocol's logic, a function of the state and
//! the request; [`serve`] puts it behind `POST /add-checkpoint` and keeps the state in
//! a file (written and synced before the answer, under one lock, as the spec asks);
//! [`add_checkpoint`] is the client side.
//!
//! cairn's extension, outside the spec (which has no way to read a witness):
//! `GET /latest-checkpoint/<origin>` answers the latest checkpoint the witness cosigned
//! for that log, as a note with the witness's cosignature of it (made with the time it
//! was first cosigned, so the same line the log was given), or 404 when it cosigned
//! none. An auditor compares a log with it ([`latest_checkpoint`] is the client): a log
//! shorter than that, or whose first records have another root, lost or rewrote
//! records after the witness saw them.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::checkpoint::{Checkpoint, b64, hash_b64};
use crate::note::{Note, NoteError, Signer, Verifier};
use crate::tree::{self, Hash32};

/// The longest request body the witness reads, in bytes.
pub const REQUEST_BYTES_MAX: usize = 65_536;
/// The most consistency proof lines a request may carry (the spec's 63).
pub const PROOF_LINES_MAX: usize = 63;
/// The path prefix of cairn's read endpoint; the origin follows, percent-encoded
/// where it holds anything but letters, digits and `-._~/`.
pub const LATEST_PATH: &str = "/latest-checkpoint/";
/// How the read endpoint's 404 begins when the witness cosigned nothing of the log
/// (any other 404 is a witness without the endpoint).
const NONE_COSIGNED: &str = "no checkpoint cosigned of";

/// A refusal: the HTTP status and the body to answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub body: String,
}

fn refuse(status: u16, body: impl Into<String>) -> Refusal {
    let mut body = body.into();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    Refusal { status, body }
}

/// A witness: its key, the logs it trusts, and what it last cosigned for each.
#[derive(Debug)]
pub struct Witness {
    signer: Signer,
    logs: Vec<Verifier>,
    /// origin → the latest checkpoint cosigned.
    seen: BTreeMap<String, Seen>,
}

/// The latest checkpoint cosigned for a log: its size and root, and when it was
/// cosigned (unknown for a state written before the time was kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    size: u64,
    root: Hash32,
    at: Option<u64>,
}

/// An add-checkpoint request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub old_size: u64,
    pub proof: Vec<Hash32>,
    /// The signed checkpoint note.
    pub checkpoint: String,
}

impl Request {
    /// The request body.
    pub fn to_text(&self) -> String {
        let mut out = format!("old {}\n", self.old_size);
        for h in &self.proof {
            out.push_str(&b64(h));
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&self.checkpoint);
        out
    }

    /// Reads a request body; a malformed one is a 400.
    pub fn parse(body: &str) -> Result<Request, Refusal> {
        let (head, checkpoint) = body
            .split_once("\n\n")
            .ok_or_else(|| refuse(400, "no blank line before the checkpoint"))?;
        let mut lines = head.split('\n');
        let old = lines
            .next()
            .and_then(|l| l.strip_prefix("old "))
            .ok_or_else(|| refuse(400, "the first line must be \"old N\""))?;
        let old_size: u64 = old
            .parse()
            .ok()
            .filter(|_| old == "0" || !old.starts_with('0'))
            .ok_or_else(|| refuse(400, format!("old size {old:?} is not a decimal number")))?;
        let proof = lines
            .map(|l| hash_b64(l).map_err(|e| refuse(400, format!("proof line {e}"))))
            .collect::<Result<Vec<_>, _>>()?;
        if proof.len() > PROOF_LINES_MAX {
            return Err(refuse(
                400,
                format!("{} proof lines, more than {PROOF_LINES_MAX}", proof.len()),
            ));
        }
        Ok(Request {
            old_size,
            proof,
            checkpoint: checkpoint.to_string(),
        })
    }
}

impl Witness {
    /// A witness with no history.
    pub fn new(signer: Signer, logs: Vec<Verifier>) -> Witness {
        Witness {
            signer,
            logs,
            seen: BTreeMap::new(),
        }
    }

    /// The size and root last cosigned for `origin`.
    pub fn latest(&self, origin: &str) -> Option<(u64, Hash32)> {
        self.seen.get(origin).map(|s| (s.size, s.root))
    }

    /// The latest checkpoint cosigned for `origin` as a note: the checkpoint's text
    /// and the witness's cosignature of it, made with the time it was cosigned (`now`
    /// when the state does not know it). None when it cosigned none.
    pub fn latest_note(&self, origin: &str, now: u64) -> Option<String> {
        let seen = self.seen.get(origin)?;
        let text = Checkpoint {
            origin: origin.to_string(),
            size: seen.size,
            root: seen.root,
            extensions: Vec::new(),
        }
        .to_text();
        let line = self.signer.cosign_line(&text, seen.at.unwrap_or(now));
        Some(format!("{text}\n{line}"))
    }

    /// The state as text: one `origin size base64(root) time` line per log.
    pub fn state_text(&self) -> String {
        self.seen
            .iter()
            .map(|(o, s)| match s.at {
                Some(t) => format!("{o} {} {} {t}\n", s.size, b64(&s.root)),
                None => format!("{o} {} {}\n", s.size, b64(&s.root)),
            })
            .collect()
    }

    /// Restores the state [`Witness::state_text`] wrote (lines without a time, as
    /// older witnesses wrote them, too).
    pub fn load_state(&mut self, text: &str) -> Result<(), String> {
        for (n, line) in text.lines().enumerate() {
            let mut parts = line.split(' ');
            let (Some(o), Some(s), Some(r), t, None) = (
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
            ) else {
                return Err(format!(
                    "line {}: expected \"origin size root [time]\"",
                    n + 1
                ));
            };
            let size = s
                .parse()
                .map_err(|_| format!("line {}: size {s:?} is not a number", n + 1))?;
            let root = hash_b64(r).map_err(|e| format!("line {}: root {e}", n + 1))?;
            let at = t
                .map(|t| {
                    t.parse()
                        .map_err(|_| format!("line {}: time {t:?} is not a number", n + 1))
                })
                .transpose()?;
            self.seen.insert(o.to_string(), Seen { size, root, at });
        }
        Ok(())
    }

    /// The protocol: checks the request against the log keys and what was cosigned
    /// before; on success records the new checkpoint and returns the cosignature line.
    pub fn add_checkpoint(&mut self, body: &str, now: u64) -> Result<String, Refusal> {
        let req = Request::parse(body)?;
        let note = Note::parse(&req.checkpoint).map_err(|e| refuse(400, e.to_string()))?;
        let cp = Checkpoint::parse(&note.text).map_err(|e| refuse(400, e.to_string()))?;
        let keys: Vec<Verifier> = self
            .logs
            .iter()
            .filter(|k| crate::checkpoint::key_covers(&k.name, &cp.origin))
            .cloned()
            .collect();
        if keys.is_empty() {
            return Err(refuse(404, format!("unknown log {:?}", cp.origin)));
        }
        match note.verify(&keys) {
            Ok(_) => {}
            Err(e @ (NoteError::BadSignature { .. } | NoteError::Unverified { .. })) => {
                return Err(refuse(403, e.to_string()));
            }
            Err(e) => return Err(refuse(400, e.to_string())),
        }
        if req.old_size > cp.size {
            return Err(refuse(
                400,
                format!(
                    "old size {} is past the checkpoint's {}",
                    req.old_size, cp.size
                ),
            ));
        }
        let (seen_size, seen_root) = self.latest(&cp.origin).unwrap_or((0, tree::empty_root()));
        if req.old_size != seen_size {
            return Err(refuse(409, format!("{seen_size}")));
        }
        if cp.size == 0 && cp.root != tree::empty_root() {
            return Err(refuse(
                422,
                "a checkpoint of size 0 must have the empty tree's root",
            ));
        }
        tree::verify_consistency(req.old_size, cp.size, &seen_root, &cp.root, &req.proof)
            .map_err(|e| refuse(422, format!("not consistent with size {seen_size}: {e}")))?;
        self.seen.insert(
            cp.origin.clone(),
            Seen {
                size: cp.size,
                root: cp.root,
                at: Some(now),
            },
        );
        Ok(self.signer.cosign_line(&note.text, now))
    }
}

/// The witness's file-backed state: loaded at start, rewritten (tmp, sync, rename)
/// before each cosignature is answered.
struct Served {
    witness: Witness,
    state_file: PathBuf,
}

fn save(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Loads a witness's state from `state_file` (none yet: no history).
pub fn load(signer: Signer, logs: Vec<Verifier>, state_file: &Path) -> Result<Witness, String> {
    let mut w = Witness::new(signer, logs);
    match std::fs::read_to_string(state_file) {
        Ok(text) => w
            .load_state(&text)
            .map_err(|e| format!("{}: {e}", state_file.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", state_file.display())),
    }
    Ok(w)
}

/// Serves `POST /add-checkpoint` (and cairn's `GET /latest-checkpoint/<origin>`) on
/// `server` until it is unblocked, keeping the state in `state_file`. Requests are answered one at a time, so checking the old size and
/// saving the new one are one step.
pub fn serve(server: &tiny_http::Server, witness: Witness, state_file: &Path) {
    let served = Mutex::new(Served {
        witness,
        state_file: state_file.to_path_buf(),
    });
    for mut request in server.incoming_requests() {
        let (status, body, content_type) = handle(&served, &mut request);
        let header = |v: &str| {
            tiny_http::Header::from_bytes(&b"Content-Type"[..], v.as_bytes())
                .unwrap_or_else(|()| unreachable!("a static header is valid"))
        };
        let response = tiny_http::Response::from_string(body)
            .with_status_code(status)
            .with_header(header(content_type));
        // A client that went away misses its answer; the witness goes on.
        if let Err(e) = request.respond(response) {
            eprintln!("witness: answering failed: {e}");
        }
    }
}

fn handle(served: &Mutex<Served>, request: &mut tiny_http::Request) -> (u16, String, &'static str) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if let Some(origin) = request.url().strip_prefix(LATEST_PATH) {
        if *request.method() != tiny_http::Method::Get {
            return (405, "GET only\n".into(), "text/plain");
        }
        let Some(origin) = percent_decode(origin) else {
            return (
                400,
                "the origin is not percent-encoded UTF-8\n".into(),
                "text/plain",
            );
        };
        let s = served.lock().unwrap_or_else(|p| p.into_inner());
        return match s.witness.latest_note(&origin, now) {
            Some(note) => (200, note, "text/plain; charset=utf-8"),
            None => (404, format!("{NONE_COSIGNED} {origin:?}\n"), "text/plain"),
        };
    }
    if request.url() != "/add-checkpoint" {
        return (
            404,
            format!("no such endpoint (POST /add-checkpoint, GET {LATEST_PATH}<origin>)\n"),
            "text/plain",
        );
    }
    if *request.method() != tiny_http::Method::Post {
        return (405, "POST only\n".into(), "text/plain");
    }
    let mut body = String::new();
    let read = request
        .as_reader()
        .take(REQUEST_BYTES_MAX as u64 + 1)
        .read_to_string(&mut body);
    if read.is_err() {
        return (400, "the body is not UTF-8 text\n".into(), "text/plain");
    }
    if body.len() > REQUEST_BYTES_MAX {
        return (
            413,
            format!("the body is longer than {REQUEST_BYTES_MAX} bytes\n"),
            "text/plain",
        );
    }
    let mut s = served.lock().unwrap_or_else(|p| p.into_inner());
    let before = s.witness.seen.clone();
    match s.witness.add_checkpoint(&body, now) {
        Ok(line) => {
            if let Err(e) = save(&s.state_file, &s.witness.state_text()) {
                // Not persisted: not cosigned.
                s.witness.seen = before;
                return (
                    500,
                    format!("saving the witness state failed: {e}\n"),
                    "text/plain",
                );
            }
            (200, line, "text/plain")
        }
        Err(r) if r.status == 409 => (409, r.body, "text/x.tlog.size"),
        Err(r) => (r.status, r.body, "text/plain"),
    }
}

/// What went wrong asking a witness: pushing a checkpoint, or reading its latest.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("{url}: {what}")]
    Http { url: String, what: String },
    #[error("{url} refused the checkpoint ({status}): {body}")]
    Refused {
        url: String,
        status: u16,
        body: String,
    },
}

/// Sends an add-checkpoint request to the witness at `url` (its submission prefix) and
/// returns the cosignature lines it answered.
pub fn add_checkpoint(url: &str, request: &Request) -> Result<String, PushError> {
    let endpoint = format!("{}/add-checkpoint", url.trim_end_matches('/'));
    let http = |what: String| PushError::Http {
        url: endpoint.clone(),
        what,
    };
    let client = reqwest::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| http(e.to_string()))?;
    let response = client
        .post(&endpoint)
        .body(request.to_text())
        .send()
        .map_err(|e| http(e.to_string()))?;
    let status = response.status().as_u16();
    let body = response.text().map_err(|e| http(e.to_string()))?;
    if status != 200 {
        return Err(PushError::Refused {
            url: endpoint,
            status,
            body: body.trim_end().to_string(),
        });
    }
    Ok(body)
}

/// The origin in a URL path: letters, digits, `-._~/` as they are, every other byte
/// as `%XX`.
pub fn percent_encode(origin: &str) -> String {
    let mut out = String::with_capacity(origin.len());
    for b in origin.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The origin of a URL path; None when a `%` is not followed by two hex digits or the
/// bytes are not UTF-8.
pub fn percent_decode(path: &str) -> Option<String> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Asks the witness at `url` (its submission prefix) for the latest checkpoint it
/// cosigned for `origin` (cairn's `GET /latest-checkpoint/<origin>`): the note, or None
/// when it cosigned none of that log.
pub fn latest_checkpoint(url: &str, origin: &str) -> Result<Option<String>, PushError> {
    let endpoint = format!(
        "{}{LATEST_PATH}{}",
        url.trim_end_matches('/'),
        percent_encode(origin)
    );
    let http = |what: String| PushError::Http {
        url: endpoint.clone(),
        what,
    };
    let client = reqwest::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| http(e.to_string()))?;
    let response = client
        .get(&endpoint)
        .send()
        .map_err(|e| http(e.to_string()))?;
    let status = response.status().as_u16();
    let body = response.text().map_err(|e| http(e.to_string()))?;
    match status {
        200 => Ok(Some(body)),
        404 if body.starts_with(NONE_COSIGNED) => Ok(None),
        404 => Err(PushError::Refused {
            url: endpoint,
            status,
            body: format!(
                "{} (a witness without cairn's GET {LATEST_PATH}<origin> cannot be asked)",
                body.trim_end()
            ),
        }),
        _ => Err(PushError::Refused {
            url: endpoint,
            status,
            body: body.trim_end().to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint(log: &Signer, leaves: &[Hash32]) -> String {
        let cp = Checkpoint {
            origin: log.name().to_string(),
            size: leaves.len() as u64,
            root: tree::root_of(leaves),
            extensions: vec![],
        };
        log.sign(&cp.to_text()).unwrap()
    }

    #[test]
    fn the_witness_cosigns_an_extension_and_refuses_a_fork_a_stale_size_and_a_stranger() {
        let log = Signer::from_seed("cairn.local/p/s", &[1; 32]);
        let w_key = Signer::from_seed("witness.test/w1", &[2; 32]);
        let mut w = Witness::new(w_key.clone(), vec![Verifier::parse(&log.vkey()).unwrap()]);
        let leaves: Vec<Hash32> = (0..10u64)
            .map(|i| tree::record_leaf_hash(i, &[i as u8; 32]))
            .collect();
        let first = Request {
            old_size: 0,
            proof: vec![],
            checkpoint: checkpoint(&log, &leaves[..4]),
        };
        let line = w.add_checkpoint(&first.to_text(), 1_700_000_000).unwrap();
        let cosigned = Note::parse(&format!("{}{line}", first.checkpoint)).unwrap();
        let cv = Verifier::parse(&w_key.cosigner_vkey()).unwrap();
        assert_eq!(cosigned.verify(&[cv]).unwrap()[0].1, Some(1_700_000_000));
        // The same request again: its old size is no longer what the witness saw.
        assert_eq!(
            w.add_checkpoint(&first.to_text(), 1).unwrap_err(),
            Refusal {
                status: 409,
                body: "4\n".into()
            }
        );
        // An extension with its consistency proof: cosigned.
        let next = Request {
            old_size: 4,
            proof: tree::consistency_proof(&leaves, 4).unwrap(),
            checkpoint: checkpoint(&log, &leaves),
        };
        assert!(w.add_checkpoint(&next.to_text(), 2).is_ok());
        assert_eq!(w.latest("cairn.local/p/s").map(|l| l.0), Some(10));
        // A fork: another history of the same size 10.
        let mut forked = leaves.clone();
        forked[2][0] ^= 1;
        let fork = Request {
            old_size: 10,
            proof: vec![],
            checkpoint: checkpoint(&log, &forked),
        };
        assert_eq!(
            w.add_checkpoint(&fork.to_text(), 3).unwrap_err().status,
            422
        );
        // A stranger's log, and a checkpoint not signed by the log's key.
        let stranger = Signer::from_seed("other.test/log", &[5; 32]);
        let r = Request {
            old_size: 0,
            proof: vec![],
            checkpoint: checkpoint(&stranger, &leaves),
        };
        assert_eq!(w.add_checkpoint(&r.to_text(), 4).unwrap_err().status, 404);
        let impostor = Signer::from_seed("cairn.local/p/s", &[6; 32]);
        let r = Request {
            old_size: 10,
            proof: vec![],
            checkpoint: checkpoint(&impostor, &leaves),
        };
        assert_eq!(w.add_checkpoint(&r.to_text(), 5).unwrap_err().status, 403);
        // The state reads back.
        let mut again = Witness::new(w_key.clone(), vec![]);
        again.load_state(&w.state_text()).unwrap();
        assert_eq!(again.latest("cairn.local/p/s"), w.latest("cairn.local/p/s"));
        // The latest checkpoint reads back as the note the log was given: its text and
        // the same cosignature line (made with the time it was cosigned), after a
        // restart too.
        let cosigned_next = w.add_checkpoint(
            &Request {
                old_size: 10,
                proof: vec![],
                checkpoint: checkpoint(&log, &leaves),
            }
            .to_text(),
            9,
        );
        assert!(
            cosigned_next.is_ok(),
            "the same checkpoint again is cosigned"
        );
        let mut restarted = Witness::new(w_key.clone(), vec![]);
        restarted.load_state(&w.state_text()).unwrap();
        let text = Note::parse(&checkpoint(&log, &leaves)).unwrap().text;
        let expected = format!("{text}\n{}", cosigned_next.unwrap());
        assert_eq!(
            w.latest_note("cairn.local/p/s", 100),
            Some(expected.clone())
        );
        assert_eq!(
            restarted.latest_note("cairn.local/p/s", 100),
            Some(expected)
        );
        assert_eq!(w.latest_note("cairn.local/p/other", 100), None);
        // A state line without a time (an older witness's): cosigned at the time asked.
        let mut old = Witness::new(w_key.clone(), vec![]);
        old.load_state(&format!(
            "cairn.local/p/s 10 {}\n",
            b64(&tree::root_of(&leaves))
        ))
        .unwrap();
        let note = Note::parse(&old.latest_note("cairn.local/p/s", 77).unwrap()).unwrap();
        let cv = Verifier::parse(&w_key.cosigner_vkey()).unwrap();
        assert_eq!(note.verify(&[cv]).unwrap()[0].1, Some(77));
        assert_eq!(note.text, text);
    }

    #[test]
    fn an_origin_goes_into_a_url_path_and_back() {
        for origin in ["cairn.local/p-1a2b/20261130T120000.000000-abcdef", "a b/ü%"] {
            assert_eq!(
                percent_decode(&percent_encode(origin)).as_deref(),
                Some(origin)
            );
        }
        assert_eq!(percent_encode("a b/ü"), "a%20b/%C3%BC");
        assert_eq!(percent_decode("a%2"), None);
        assert_eq!(percent_decode("%FF"), None);
    }

    #[test]
    fn a_request_holds_at_most_proof_lines_max_proof_lines() {
        let line = format!("{}\n", b64(&[0; 32]));
        let at = format!("old 1\n{}\nx\n", line.repeat(PROOF_LINES_MAX));
        assert_eq!(Request::parse(&at).unwrap().proof.len(), PROOF_LINES_MAX);
        let past = format!("old 1\n{}\nx\n", line.repeat(PROOF_LINES_MAX + 1));
        assert_eq!(Request::parse(&past).unwrap_err().status, 400);
    }
}
