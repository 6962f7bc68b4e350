//! The allow list of one project: the "always" answers that outlive their session.
//!
//! Grants and resets are records of a hash-chained log in `<project>/allow/` (the
//! store's format, so it is repaired and verified as a session log is); `allow.json`
//! is its projection, rewritten atomically and rebuilt from the log when missing or
//! edited by hand.
//!
//! The log is not trusted on its own word: a grant names the session and the call that
//! answered "always", and it is honoured only when that session's log, in this
//! project, records the answer — a `permission_decided` of that call with answer
//! `always` given by a user or a policy, for a request whose keys hold the grant's key
//! and that nothing kept from being allowed for good. A grant that fails the check (a
//! hand-written one, rechained so that the log verifies; one written before grants
//! named their origin; one naming a session since deleted) is refused and reported,
//! never honoured. A grant cleared by a reset stays cleared: the same answer cannot
//! back it again.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use cairn_store::{Durability, LogReader, LogWriter, Options, Recovery};
use serde::{Deserialize, Serialize};

use crate::event::{Answer, AnswerSource};
use cairn_tools::{Result, io_at};

/// The allow list of one project.
#[derive(Debug, Clone)]
pub struct AllowList {
    dir: PathBuf,
    /// Signs a checkpoint of the allow log after each record, when set.
    signer: Option<cairn_tlog::Signer>,
}

/// A grant as the allow log records it: a key, and the answer that granted it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Grant {
    pub key: String,
    /// The session that recorded the "always" answer (empty in grants written before
    /// grants named their origin).
    pub session: String,
    /// The call of that session the answer was given for.
    pub call: String,
}

/// A grant of the allow log that is not honoured, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedGrant {
    #[serde(flatten)]
    pub grant: Grant,
    pub why: Unproven,
}

/// Why a grant is not honoured: what its session's log says, or fails to say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Unproven {
    /// The grant names no session or no call.
    Unnamed,
    /// The project has no session of that id (or the id is not one: a path, say).
    NoSession,
    /// The session's log does not read back (what the store said).
    Unreadable { what: String },
    /// The call recorded no "always" answer given by a user or a policy.
    NoAnswer,
    /// The call's "always" answer was for other keys.
    OtherKeys { keys: Vec<String> },
    /// The call's request could never be allowed for good, and its "always" granted
    /// nothing.
    Uncoverable { reasons: Vec<String> },
    /// A reset cleared this grant; the answer behind it cannot grant it again.
    Reset,
}

impl std::fmt::Display for RefusedGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Grant { key, session, call } = &self.grant;
        write!(f, "grant of {key} ")?;
        match &self.why {
            Unproven::Unnamed => write!(
                f,
                "names no session and call (written by hand, or by a cairn before grants named their origin)"
            ),
            Unproven::NoSession => {
                write!(
                    f,
                    "names session {session}, which this project does not have"
                )
            }
            Unproven::Unreadable { what } => write!(
                f,
                "names session {session}, whose log does not read back: {what}"
            ),
            Unproven::NoAnswer => write!(
                f,
                "names session {session} call {call}, which recorded no such always answer"
            ),
            Unproven::OtherKeys { keys } => write!(
                f,
                "names session {session} call {call}, whose always answer was for {}",
                keys.join(", ")
            ),
            Unproven::Uncoverable { reasons } => write!(
                f,
                "names session {session} call {call}, whose request no always answer covers ({})",
                reasons.join("; ")
            ),
            Unproven::Reset => write!(
                f,
                "names session {session} call {call}, whose grant of it was reset since"
            ),
        }
    }
}

/// The allow list checked: what is honoured, what is refused, what was repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Audit {
    /// The keys allowed now: those of the grants whose answer the sessions record.
    pub keys: BTreeSet<String>,
    /// Grants since the last reset that are not honoured, in log order.
    pub refused: Vec<RefusedGrant>,
    /// The torn tail cut off the log on this load (a crash in the middle of a grant).
    pub repaired: Option<Recovery>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum AllowEvent {
    Grant {
        key: String,
        #[serde(default)]
        session: String,
        #[serde(default)]
        call: String,
    },
    Reset,
    /// One key taken off the list: its grants are cleared, as a reset clears all.
    Revoke {
        key: String,
    },
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Projection {
    keys: Vec<String>,
}

/// How long a load or a grant waits for another process appending to the allow log.
const LOCK_TRIES_MAX: u32 = 50;
const LOCK_WAIT_MS: u64 = 20;

impl AllowList {
    /// The allow list kept in project folder `project_dir` (its sessions are in
    /// `<project_dir>/sessions/`).
    pub fn new(project_dir: &Path) -> AllowList {
        AllowList {
            dir: project_dir.to_path_buf(),
            signer: None,
        }
    }

    /// Signs a tree checkpoint of the allow log (written beside it, in
    /// `allow/checkpoints/<size>`, origin `cairn.local/<project key>/allow`) after each
    /// record it appends, so that its history can be proven as a session's.
    pub fn with_signer(mut self, signer: Option<cairn_tlog::Signer>) -> AllowList {
        self.signer = signer;
        self
    }

    fn log_dir(&self) -> PathBuf {
        self.dir.join("allow")
    }

    /// The projection's path.
    pub fn json_path(&self) -> PathBuf {
        self.dir.join("allow.json")
    }

    /// The keys allowed now (see [`AllowList::audit`], whose refused grants count for
    /// nothing here).
    pub fn load(&self) -> Result<BTreeSet<String>> {
        Ok(self.audit()?.keys)
    }

    /// Folds the project log (cutting off a torn tail first, as opening a session log
    /// does), checks every grant since the last reset against the session it names,
    /// and rewrites `allow.json` when it is missing or differs. Each session named is
    /// read once.
    pub fn audit(&self) -> Result<Audit> {
        let repaired = self.repair()?;
        let mut audit = self.check(self.grants()?);
        audit.repaired = repaired;
        self.project(&audit.keys)?;
        Ok(audit)
    }

    /// Cuts off a torn tail, if the log has one and no other process is appending to
    /// it (then what looks torn may be the record being written: it is left alone and
    /// only the complete records are read).
    fn repair(&self) -> Result<Option<Recovery>> {
        let dir = self.log_dir();
        if !cairn_store::log_path(&dir).is_file() || LogReader::open(&dir)?.tail()?.torn_bytes == 0
        {
            return Ok(None);
        }
        match LogWriter::open(&dir, options()) {
            Ok((log, recovery)) => {
                log.close()?;
                Ok((recovery.quarantined_bytes > 0).then_some(recovery))
            }
            Err(cairn_store::Error::Locked { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The grants since the last reset, in log order, and those a reset cleared.
    fn grants(&self) -> Result<Folded> {
        let mut folded = Folded::default();
        let dir = self.log_dir();
        if !cairn_store::log_path(&dir).is_file() {
            return Ok(folded);
        }
        let reader = LogReader::open(&dir)?;
        // The complete records only: a writer may be appending after them.
        let Some(head) = reader.tail()?.head else {
            return Ok(folded);
        };
        for r in reader.records()? {
            let r = r?;
            match serde_json::from_str::<AllowEvent>(r.event.get()) {
                Ok(AllowEvent::Grant { key, session, call }) => {
                    folded.live.push(Grant { key, session, call });
                }
                Ok(AllowEvent::Reset) => folded.cleared.append(&mut folded.live),
                Ok(AllowEvent::Revoke { key }) => {
                    let (gone, kept) = std::mem::take(&mut folded.live)
                        .into_iter()
                        .partition(|g| g.key == key);
                    folded.live = kept;
                    folded.cleared.extend::<Vec<Grant>>(gone);
                }
                // An event of a later version: not a grant this version can honour.
                Err(_) => {}
            }
            if r.seq >= head.seq {
                break;
            }
        }
        Ok(folded)
    }

    /// Checks each live grant against the log of the session it names.
    fn check(&self, folded: Folded) -> Audit {
        let cleared: BTreeSet<&Grant> = folded.cleared.iter().collect();
        let mut calls: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for g in &folded.live {
            if !g.session.is_empty() && !g.call.is_empty() && !cleared.contains(g) {
                calls.entry(&g.session).or_default().insert(&g.call);
            }
        }
        let sessions: BTreeMap<&str, Result<BTreeMap<String, Vec<Always>>, Unproven>> = calls
            .into_iter()
            .map(|(session, calls)| (session, self.answers(session, &calls)))
            .collect();
        let mut audit = Audit::default();
        for g in &folded.live {
            let why = if g.session.is_empty() || g.call.is_empty() {
                Some(Unproven::Unnamed)
            } else if cleared.contains(g) {
                Some(Unproven::Reset)
            } else {
                match &sessions[g.session.as_str()] {
                    Err(why) => Some(why.clone()),
                    Ok(answers) => proof(answers.get(&g.call).map_or(&[], Vec::as_slice), &g.key),
                }
            };
            match why {
                None => {
                    audit.keys.insert(g.key.clone());
                }
                Some(why) => audit.refused.push(RefusedGrant {
                    grant: g.clone(),
                    why,
                }),
            }
        }
        audit
    }

    /// The "always" answers a user or a policy gave to `calls` in session `id`.
    fn answers(
        &self,
        id: &str,
        calls: &BTreeSet<&str>,
    ) -> Result<BTreeMap<String, Vec<Always>>, Unproven> {
        // An id is a folder name: anything else could name a log outside the project.
        if id == "." || id == ".." || id.contains(['/', '\0']) {
            return Err(Unproven::NoSession);
        }
        let dir = self.dir.join("sessions").join(id);
        if !cairn_store::log_path(&dir).is_file() {
            return Err(Unproven::NoSession);
        }
        let unreadable = |e: cairn_store::Error| Unproven::Unreadable {
            what: e.to_string(),
        };
        let reader = LogReader::open(&cairn_store::log_path(&dir)).map_err(unreadable)?;
        // A live session may be appending: its complete records are the log.
        let Some(head) = reader.tail().map_err(unreadable)?.head else {
            return Err(Unproven::NoSession);
        };
        let blobs = cairn_tools::fold::project_blobs(&dir);
        let mut requested: BTreeMap<String, Requested> = BTreeMap::new();
        let mut answers: BTreeMap<String, Vec<Always>> = BTreeMap::new();
        for r in reader.records().map_err(unreadable)? {
            let r = r.map_err(unreadable)?;
            let raw = r.event.get();
            // Most records are neither: skip them unparsed.
            if r.seq == 0 || raw.contains("\"permission_") {
                // A record too long for the log had fields moved into blobs: read back.
                let loaded = cairn_core::spill::load(raw, |b| {
                    cairn_tools::fold::read_blob(blobs.as_ref(), b)
                })
                .map_err(|what| Unproven::Unreadable { what })?;
                let seen = match loaded {
                    None => serde_json::from_str::<Seen>(raw),
                    Some(whole) => serde_json::from_value::<Seen>(whole),
                };
                match seen {
                    Ok(Seen::SessionStarted { id: started }) if r.seq == 0 && started == id => {}
                    // A log that is not this session's (copied or moved in).
                    _ if r.seq == 0 => return Err(Unproven::NoSession),
                    Ok(Seen::PermissionRequested {
                        call,
                        key,
                        keys,
                        reasons,
                    }) if calls.contains(call.as_str()) => {
                        let keys = if keys.is_empty() { vec![key] } else { keys };
                        requested.insert(call, Requested { keys, reasons });
                    }
                    Ok(Seen::PermissionDecided {
                        call,
                        key,
                        answer: Answer::Always,
                        source: AnswerSource::User | AnswerSource::Policy,
                        grants,
                    }) if calls.contains(call.as_str()) => {
                        // An answer is to the request of its call just before it. It
                        // grants what it records it granted (none for a guarded line or
                        // one no "always" covers); older logs: the request's keys.
                        if let Some(req) = requested.remove(&call) {
                            let keys = match grants {
                                Some(g) => g,
                                None => {
                                    let mut keys = req.keys;
                                    if !keys.contains(&key) {
                                        keys.push(key);
                                    }
                                    keys
                                }
                            };
                            answers.entry(call).or_default().push(Always {
                                keys,
                                reasons: req.reasons,
                            });
                        }
                    }
                    _ => {}
                }
            }
            if r.seq >= head.seq {
                break;
            }
        }
        Ok(answers)
    }

    fn project(&self, keys: &BTreeSet<String>) -> Result<()> {
        let want = Projection {
            keys: keys.iter().cloned().collect(),
        };
        let path = self.json_path();
        let current = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Projection>(&b).ok());
        if current.as_ref() == Some(&want) {
            return Ok(());
        }
        cairn_store::private::create_dir_all(&self.dir).map_err(io_at(&self.dir))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io_at(&self.dir))?;
        let bytes = serde_json::to_vec_pretty(&want).map_err(|e| io_at(&path)(e.into()))?;
        // Not synced: a projection a crash left empty or stale does not read as the
        // log's, and the next audit writes it again.
        tmp.write_all(&bytes).map_err(io_at(&path))?;
        tmp.persist(&path)
            .map_err(|e| e.error)
            .map_err(io_at(&path))?;
        Ok(())
    }

    fn append(&self, event: &AllowEvent) -> Result<BTreeSet<String>> {
        let dir = self.log_dir();
        // Another session of the project may hold the log for a moment, or create it
        // at the same time: wait a little. Opening repairs a torn tail.
        let mut tries = 0;
        let log = loop {
            let appended = if cairn_store::log_path(&dir).is_file() {
                LogWriter::open(&dir, options()).map(|(w, _)| w)
            } else {
                LogWriter::create(&dir, options())
            }
            .and_then(|mut log| log.append(event).map(|_| log));
            match appended {
                Err(
                    cairn_store::Error::Locked { .. } | cairn_store::Error::CreatedElsewhere { .. },
                ) if tries < LOCK_TRIES_MAX => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(LOCK_WAIT_MS));
                }
                other => break other?,
            }
        };
        log.close()?;
        if let Some(signer) = &self.signer {
            // The allow log is small and folded whole at every load anyway: its tree
            // is computed from the file, not kept.
            let leaves = cairn_tlog::log::leaves(&dir)?;
            let checkpoint = cairn_tlog::Checkpoint {
                origin: cairn_tlog::log::origin_of(&dir),
                size: leaves.len() as u64,
                root: cairn_tlog::tree::root_of(&leaves),
                extensions: Vec::new(),
            };
            let note = signer.sign(&checkpoint.to_text())?;
            cairn_tlog::log::write_checkpoint(&dir, checkpoint.size, &note)?;
        }
        self.load()
    }

    /// Records an "always" answer: `key` was allowed for good by call `call` of
    /// session `session`, whose log must already hold the answer (durably: a grant
    /// that outlives its answer in a crash is refused). Returns the keys allowed now.
    pub fn grant(&self, key: &str, session: &str, call: &str) -> Result<BTreeSet<String>> {
        self.append(&AllowEvent::Grant {
            key: key.to_string(),
            session: session.to_string(),
            call: call.to_string(),
        })
    }

    /// Clears the allow list (recorded, so the history stays).
    pub fn reset(&self) -> Result<BTreeSet<String>> {
        self.append(&AllowEvent::Reset)
    }

    /// Takes `key` off the allow list (recorded like a grant): every grant of it so far
    /// is cleared for good, as a reset clears them all. A key the list does not hold
    /// (honoured or refused) is an error, and nothing is recorded.
    pub fn revoke(&self, key: &str) -> Result<BTreeSet<String>> {
        let audit = self.audit()?;
        let held = audit.keys.contains(key) || audit.refused.iter().any(|r| r.grant.key == key);
        if !held {
            return Err(cairn_tools::EngineError::NotFound(format!(
                "{key} is not on the allow list{}",
                if audit.keys.is_empty() {
                    " (it is empty)".to_string()
                } else {
                    format!(
                        " (it holds {})",
                        audit.keys.iter().cloned().collect::<Vec<_>>().join(", ")
                    )
                }
            )));
        }
        self.append(&AllowEvent::Revoke {
            key: key.to_string(),
        })
    }
}

fn options() -> Options {
    Options {
        durability: Durability::Always,
        ..Options::default()
    }
}

/// The allow log folded: grants since the last reset, and grants a reset cleared.
#[derive(Default)]
struct Folded {
    live: Vec<Grant>,
    cleared: Vec<Grant>,
}

/// A request of a call, waiting for its answer.
struct Requested {
    keys: Vec<String>,
    reasons: Vec<String>,
}

/// An "always" answer a user or a policy gave, with what its request named.
struct Always {
    /// Every key the answer grants (the request's keys, or its one key).
    keys: Vec<String>,
    /// Why the request could not be allowed for good (none when it could).
    reasons: Vec<String>,
}

/// `None` when one of the call's answers grants `key`; otherwise why none does.
fn proof(answers: &[Always], key: &str) -> Option<Unproven> {
    let mut why = Unproven::NoAnswer;
    for a in answers {
        if !a.keys.iter().any(|k| k == key) {
            if why == Unproven::NoAnswer {
                why = Unproven::OtherKeys {
                    keys: a.keys.clone(),
                };
            }
        } else if a.reasons.is_empty() {
            return None;
        } else {
            why = Unproven::Uncoverable {
                reasons: a.reasons.clone(),
            };
        }
    }
    Some(why)
}

/// The events of a session log the check reads; the rest are skipped.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Seen {
    SessionStarted {
        id: String,
    },
    PermissionRequested {
        call: String,
        key: String,
        #[serde(default)]
        keys: Vec<String>,
        #[serde(default)]
        reasons: Vec<String>,
    },
    PermissionDecided {
        call: String,
        key: String,
        answer: Answer,
        source: AnswerSource,
        #[serde(default)]
        grants: Option<Vec<String>>,
    },
    #[serde(other)]
    Other,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const S: &str = "20260101T000000.000000-abcdef";

    /// A project whose session `S` recorded `events` (after its `session_started`).
    fn project(events: &[Value]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogWriter::create(&dir.path().join("sessions").join(S), options()).unwrap();
        log.append(&json!({"type": "session_started", "id": S}))
            .unwrap();
        for e in events {
            log.append(e).unwrap();
        }
        log.close().unwrap();
        dir
    }

    fn requested(call: &str, key: &str, keys: &[&str], reasons: &[&str]) -> Value {
        json!({"type": "permission_requested", "call": call, "key": key, "detail": "",
               "tool": "shell", "keys": keys, "reasons": reasons})
    }

    fn decided(call: &str, key: &str, answer: &str, source: &str) -> Value {
        json!({"type": "permission_decided", "call": call, "key": key, "answer": answer,
               "source": source})
    }

    /// Grants `(key, session, call)` in a project whose session `S` recorded `events`:
    /// the grant is honoured (`None`) or refused for `why`.
    fn check(events: &[Value], grant: (&str, &str, &str), why: Option<Unproven>) {
        let dir = project(events);
        let list = AllowList::new(dir.path());
        let (key, session, call) = grant;
        list.grant(key, session, call).unwrap();
        let audit = list.audit().unwrap();
        let want = match why {
            None => Audit {
                keys: [key.to_string()].into(),
                ..Audit::default()
            },
            Some(why) => Audit {
                refused: vec![RefusedGrant {
                    grant: Grant {
                        key: key.into(),
                        session: session.into(),
                        call: call.into(),
                    },
                    why,
                }],
                ..Audit::default()
            },
        };
        assert_eq!(audit, want, "{events:?} {grant:?}");
    }

    #[test]
    #[expect(
        clippy::too_many_lines,
        reason = "a data table: each log and grant, and why it is not proven, checked by one loop"
    )]
    fn a_grant_is_honoured_only_when_its_session_recorded_the_always_answer() {
        let ls = requested("c1", "shell:ls", &[], &[]);
        let pipe = requested("c1", "shell:ls", &["shell:ls", "shell:wc"], &[]);
        let subst = requested("c1", "shell:ls", &["shell:ls"], &["command substitution"]);
        let always = decided("c1", "shell:ls", "always", "user");
        let up = format!("../sessions/{S}");
        let other_keys = |keys: &[&str]| {
            Some(Unproven::OtherKeys {
                keys: keys.iter().map(|k| k.to_string()).collect(),
            })
        };
        type Case<'a> = (Vec<Value>, (&'a str, &'a str, &'a str), Option<Unproven>);
        let cases: Vec<Case> = vec![
            (
                vec![ls.clone(), always.clone()],
                ("shell:ls", S, "c1"),
                None,
            ),
            (
                vec![ls.clone(), decided("c1", "shell:ls", "always", "policy")],
                ("shell:ls", S, "c1"),
                None,
            ),
            // Every key of the request, not only the first.
            (
                vec![pipe.clone(), always.clone()],
                ("shell:wc", S, "c1"),
                None,
            ),
            (
                vec![pipe.clone(), always.clone()],
                ("shell:rm", S, "c1"),
                other_keys(&["shell:ls", "shell:wc"]),
            ),
            (
                vec![ls.clone(), always.clone()],
                ("shell:rm", S, "c1"),
                other_keys(&["shell:ls"]),
            ),
            (
                vec![subst.clone(), always.clone()],
                ("shell:ls", S, "c1"),
                Some(Unproven::Uncoverable {
                    reasons: vec!["command substitution".into()],
                }),
            ),
            // Answers that grant nothing.
            (
                vec![ls.clone(), decided("c1", "shell:ls", "once", "user")],
                ("shell:ls", S, "c1"),
                Some(Unproven::NoAnswer),
            ),
            (
                vec![
                    ls.clone(),
                    decided("c1", "shell:ls", "always", "allow_list"),
                ],
                ("shell:ls", S, "c1"),
                Some(Unproven::NoAnswer),
            ),
            (
                vec![always.clone()],
                ("shell:ls", S, "c1"),
                Some(Unproven::NoAnswer),
            ),
            // Another call's answer.
            (
                vec![ls.clone(), always.clone()],
                ("shell:ls", S, "c2"),
                Some(Unproven::NoAnswer),
            ),
            (
                vec![
                    requested("c2", "shell:ls", &[], &[]),
                    decided("c2", "shell:ls", "deny", "user"),
                    ls.clone(),
                    always.clone(),
                ],
                ("shell:ls", S, "c2"),
                Some(Unproven::NoAnswer),
            ),
            // Sessions that are not there, or not named.
            (
                vec![ls.clone(), always.clone()],
                ("shell:ls", "20260101T000000.000000-000000", "c1"),
                Some(Unproven::NoSession),
            ),
            (
                vec![ls.clone(), always.clone()],
                ("shell:ls", &up, "c1"),
                Some(Unproven::NoSession),
            ),
            (
                vec![ls.clone(), always.clone()],
                ("shell:ls", "..", "c1"),
                Some(Unproven::NoSession),
            ),
            (
                vec![ls.clone(), always.clone()],
                ("shell:ls", "", ""),
                Some(Unproven::Unnamed),
            ),
            (
                vec![ls.clone(), always.clone()],
                ("shell:ls", S, ""),
                Some(Unproven::Unnamed),
            ),
        ];
        for (events, grant, why) in cases {
            check(&events, grant, why);
        }
    }

    #[test]
    fn a_session_log_holding_another_session_backs_no_grant() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogWriter::create(&dir.path().join("sessions").join(S), options()).unwrap();
        log.append(&json!({"type": "session_started", "id": "elsewhere"}))
            .unwrap();
        log.append(&requested("c1", "shell:ls", &[], &[])).unwrap();
        log.append(&decided("c1", "shell:ls", "always", "user"))
            .unwrap();
        log.close().unwrap();
        let list = AllowList::new(dir.path());
        list.grant("shell:ls", S, "c1").unwrap();
        let audit = list.audit().unwrap();
        assert!(audit.keys.is_empty());
        assert_eq!(audit.refused[0].why, Unproven::NoSession);
    }

    #[test]
    fn a_request_whose_keys_were_spilled_into_a_blob_backs_its_grant() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = cairn_store::BlobStore::open(&dir.path().join("blobs")).unwrap();
        let keys: Vec<String> = (0..40).map(|i| format!("shell:prog{i:02}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let request = requested("c1", "shell:prog00", &keys, &[]).to_string();
        // A limit small enough that the keys (the one field worth moving) spill.
        let spilled = cairn_core::spill::spill(&request, 200, |b| blobs.put(b)).unwrap();
        assert!(spilled.contains(r#""spilled":{"keys":"#), "{spilled}");
        let mut log = LogWriter::create(&dir.path().join("sessions").join(S), options()).unwrap();
        log.append(&json!({"type": "session_started", "id": S}))
            .unwrap();
        log.append_json_at(&cairn_store::now_ts(), &spilled)
            .unwrap();
        log.append(&decided("c1", "shell:prog00", "always", "user"))
            .unwrap();
        log.close().unwrap();
        let list = AllowList::new(dir.path());
        list.grant("shell:prog39", S, "c1").unwrap();
        assert_eq!(
            list.audit().unwrap().keys,
            ["shell:prog39".to_string()].into()
        );

        // Without its blob the request does not read back, and proves nothing.
        let hash = cairn_store::Hash::of(serde_json::to_string(&keys).unwrap().as_bytes());
        std::fs::remove_file(blobs.path(&hash)).unwrap();
        assert_eq!(
            list.audit().unwrap().refused[0].why,
            Unproven::Unreadable {
                what: format!("spilled field `keys`: blob {hash} is missing")
            }
        );
    }

    #[test]
    fn a_reset_grant_cannot_be_granted_again_by_the_same_answer() {
        let dir = project(&[
            requested("c1", "shell:ls", &[], &[]),
            decided("c1", "shell:ls", "always", "user"),
        ]);
        let list = AllowList::new(dir.path());
        assert_eq!(
            list.grant("shell:ls", S, "c1").unwrap(),
            ["shell:ls".to_string()].into()
        );
        list.reset().unwrap();
        // Written again by hand after the reset: the answer behind it was spent.
        assert_eq!(list.grant("shell:ls", S, "c1").unwrap(), BTreeSet::new());
        assert_eq!(list.audit().unwrap().refused[0].why, Unproven::Reset);
    }

    /// Guards against a complete grant with a bad hash, in last place, being taken for
    /// a torn tail and moved aside at the next load: the allow log's loader follows the
    /// store's one rule, where only bytes after the last newline are torn.
    #[test]
    fn a_complete_last_record_that_fails_is_corruption_and_a_cut_one_is_torn() {
        let dir = project(&[
            requested("c1", "shell:ls", &[], &[]),
            decided("c1", "shell:ls", "always", "user"),
        ]);
        let list = AllowList::new(dir.path());
        list.reset().unwrap();
        list.grant("shell:ls", S, "c1").unwrap();
        let log = cairn_store::log_path(&list.log_dir());
        let good = std::fs::read(&log).unwrap();
        let second = good.iter().position(|&b| b == b'\n').unwrap() as u64 + 1;
        let mut damaged = good.clone();
        let i = damaged.len() - 4;
        damaged[i] = if damaged[i] == b'0' { b'1' } else { b'0' };
        std::fs::write(&log, &damaged).unwrap();
        for _ in 0..2 {
            match list.audit() {
                Err(cairn_tools::EngineError::Store(cairn_store::Error::Corruption {
                    path,
                    seq,
                    line,
                    offset,
                    ..
                })) => assert_eq!((path, seq, line, offset), (log.clone(), Some(1), 2, second)),
                other => panic!("{other:?}"),
            }
            assert!(list.grant("shell:wc", S, "c1").is_err());
            assert_eq!(std::fs::read(&log).unwrap(), damaged, "left as it is");
            assert!(!list.log_dir().join(cairn_store::QUARANTINE_DIR).exists());
        }
        // The same record without its newline is a torn tail: cut off, and reported.
        std::fs::write(&log, &good[..good.len() - 1]).unwrap();
        let audit = list.audit().unwrap();
        assert_eq!(audit.keys, BTreeSet::new());
        let repaired = audit.repaired.unwrap();
        assert_eq!(repaired.quarantined_bytes, good.len() as u64 - 1 - second);
        assert_eq!(std::fs::read(&log).unwrap(), good[..second as usize]);
    }

    #[test]
    fn refusals_say_what_the_session_lacks() {
        let refused = |why| {
            RefusedGrant {
                grant: Grant {
                    key: "shell:rm".into(),
                    session: "S1".into(),
                    call: "c3".into(),
                },
                why,
            }
            .to_string()
        };
        assert_eq!(
            refused(Unproven::NoAnswer),
            "grant of shell:rm names session S1 call c3, which recorded no such always answer"
        );
        assert_eq!(
            refused(Unproven::NoSession),
            "grant of shell:rm names session S1, which this project does not have"
        );
        assert_eq!(
            refused(Unproven::OtherKeys {
                keys: vec!["shell:ls".into(), "shell:wc".into()]
            }),
            "grant of shell:rm names session S1 call c3, whose always answer was for shell:ls, shell:wc"
        );
    }
}
