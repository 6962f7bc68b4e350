//! Permissions: which calls ask first, who answers, and the per-project allow list.
//!
//! A call either runs at once (`Need::Auto`) or needs an answer for a key: the program
//! for a shell command (`shell:git`), the host for a fetch (`web_fetch:example.org`),
//! the tool for a write (`edit_file`), or `tool@folder` for a path outside the
//! workspace. "Always" is scoped to that key. Guarded command lines (destructive git
//! operations, `rm -rf` of the workspace or home) always ask, even when allowed.
//!
//! The allow list outlives sessions: a hash-chained project log (the store's format)
//! records grants and resets; `allow.json` is its projection, rewritten atomically and
//! rebuilt from the log when missing or edited by hand.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use cairn_store::{LogReader, LogWriter, Options};
use serde::{Deserialize, Serialize};

use crate::event::Answer;
pub use cairn_core::permission::*;
use cairn_tools::{Result, io_at};

/// A question to whoever answers permission requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub call: String,
    pub tool: String,
    pub key: String,
    pub detail: String,
    pub guarded: bool,
    /// Every key an "always" grants (each program of a command line).
    pub keys: Vec<String>,
    /// Why no "always" can cover the call: then only yes or no may be answered.
    pub reasons: Vec<String>,
    /// The guarded commands the line matched.
    pub guards: Vec<String>,
}

impl Request {
    /// True when "always" may be answered: nothing in the call is beyond its keys and
    /// it is not guarded. Otherwise only once or deny.
    pub fn always_offered(&self) -> bool {
        self.reasons.is_empty() && !self.guarded && !self.keys.is_empty()
    }

    /// The programs a command line runs (its `shell:` keys without the prefix).
    pub fn programs(&self) -> Vec<&str> {
        self.keys
            .iter()
            .filter_map(|k| k.strip_prefix("shell:"))
            .collect()
    }

    /// What a prompt says above the detail, line by line: who asks for what, the
    /// programs a command runs, what is guarded and why "always" is not offered.
    pub fn headline(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let programs = self.programs();
        if programs.is_empty() {
            lines.push(format!("{} {} asks for {}", self.call, self.tool, self.key));
        } else {
            lines.push(format!(
                "{} {} asks to run {}",
                self.call,
                self.tool,
                programs.join(", ")
            ));
        }
        for g in &self.guards {
            lines.push(format!("guarded ({g}): asks every time, even when allowed"));
        }
        if self.guarded && self.guards.is_empty() {
            lines.push("guarded: asks every time, even when allowed".to_string());
        }
        for r in &self.reasons {
            lines.push(format!("asks every time: {r}"));
        }
        lines
    }

    /// The answers offered, as a prompt shows them.
    pub fn choices(&self) -> String {
        if self.always_offered() {
            format!(
                "[y] once   [a] always ({} from now on)   [n] deny",
                self.keys.join(", ")
            )
        } else {
            "[y] once   [n] deny   (always is not offered for this call)".to_string()
        }
    }
}

/// Answers permission requests (a terminal prompt, a policy, a script).
pub trait Approver: Send {
    /// The answer, and whether a person gave it (`true`) or a policy did.
    fn answer(&mut self, request: &Request) -> (Answer, bool);
}

/// A fixed policy: `--approve always` or `--approve never`, or the library default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Every request allowed once (nothing is added to the allow list).
    AllowAll,
    /// Every request denied.
    DenyAll,
    /// Everything inside the workspace allowed once; nothing outside it (`tool@dir`
    /// keys denied, so the call runs confined). The engine's default.
    Workspace,
}

impl Approver for Policy {
    fn answer(&mut self, r: &Request) -> (Answer, bool) {
        match self {
            Policy::AllowAll => (Answer::Once, false),
            Policy::DenyAll => (Answer::Deny, false),
            Policy::Workspace if r.key.starts_with(&format!("{}@", r.tool)) => {
                (Answer::Deny, false)
            }
            Policy::Workspace => (Answer::Once, false),
        }
    }
}

/// The allow list of one project.
#[derive(Debug, Clone)]
pub struct AllowList {
    dir: PathBuf,
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
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Projection {
    keys: Vec<String>,
}

impl AllowList {
    /// The allow list kept in project folder `project_dir`.
    pub fn new(project_dir: &Path) -> AllowList {
        AllowList {
            dir: project_dir.to_path_buf(),
        }
    }

    fn log_dir(&self) -> PathBuf {
        self.dir.join("allow")
    }

    /// The projection's path.
    pub fn json_path(&self) -> PathBuf {
        self.dir.join("allow.json")
    }

    /// The keys allowed now, folded from the project log; `allow.json` is rewritten
    /// when it is missing or differs.
    pub fn load(&self) -> Result<BTreeSet<String>> {
        let keys = self.fold()?;
        self.project(&keys)?;
        Ok(keys)
    }

    fn fold(&self) -> Result<BTreeSet<String>> {
        let mut keys = BTreeSet::new();
        if !cairn_store::log_path(&self.log_dir()).is_file() {
            return Ok(keys);
        }
        for r in LogReader::open(&self.log_dir())?.records()? {
            match serde_json::from_str::<AllowEvent>(r?.event.get()) {
                Ok(AllowEvent::Grant { key, .. }) => {
                    keys.insert(key);
                }
                Ok(AllowEvent::Reset) => keys.clear(),
                Err(_) => {}
            }
        }
        Ok(keys)
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
        std::fs::create_dir_all(&self.dir).map_err(io_at(&self.dir))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io_at(&self.dir))?;
        serde_json::to_writer_pretty(tmp.as_file_mut(), &want)
            .map_err(|e| io_at(&path)(e.into()))?;
        tmp.as_file().sync_all().map_err(io_at(&path))?;
        tmp.persist(&path)
            .map_err(|e| e.error)
            .map_err(io_at(&path))?;
        Ok(())
    }

    fn append(&self, event: &AllowEvent) -> Result<BTreeSet<String>> {
        let dir = self.log_dir();
        let options = Options {
            durability: cairn_store::Durability::Always,
            ..Options::default()
        };
        // Another session of the project may hold the log for a moment: wait a little.
        let mut tries = 0;
        let mut log = loop {
            let opened = if cairn_store::log_path(&dir).is_file() {
                LogWriter::open(&dir, options).map(|(w, _)| w)
            } else {
                LogWriter::create(&dir, options)
            };
            match opened {
                Err(cairn_store::Error::Locked { .. }) if tries < 50 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => break other?,
            }
        };
        log.append(event)?;
        log.close()?;
        let keys = self.fold()?;
        self.project(&keys)?;
        Ok(keys)
    }

    /// Records an "always" answer.
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
}
