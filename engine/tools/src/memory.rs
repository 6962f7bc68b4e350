//! Project memory: facts saved with `remember`, kept per project like the allow list, in
//! a hash-chained project log (`projects/<key>/memory/events.jsonl`) of remember and
//! forget records. The list is the fold of that log.
//!
//! Nothing from web pages goes into memory: the rule is
//! [`cairn_core::decide::web_to_memory`].

use std::path::{Path, PathBuf};

use cairn_store::{LogReader, LogWriter, Options};
use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};

pub use cairn_core::decide::{OVERLAP_PERCENT_MAX, SHINGLE_WORDS};
/// Characters of one fact.
pub const FACT_CHARS_MAX: usize = 2_000;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum MemoryEvent {
    Remember {
        text: String,
        #[serde(default)]
        session: String,
        #[serde(default)]
        call: String,
    },
    /// Forgets the first fact with this text hash.
    Forget { hash: String },
}

/// One remembered fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fact {
    /// 1-based position in the list.
    pub n: usize,
    pub text: String,
    pub session: String,
    pub ts: String,
}

/// The memory of one project.
#[derive(Debug, Clone)]
pub struct ProjectMemory {
    dir: PathBuf,
}

impl ProjectMemory {
    /// The memory kept in project folder `project_dir`.
    pub fn new(project_dir: &Path) -> ProjectMemory {
        ProjectMemory {
            dir: project_dir.join("memory"),
        }
    }

    /// The facts, oldest first.
    pub fn list(&self) -> Result<Vec<Fact>> {
        let mut facts: Vec<Fact> = Vec::new();
        if !cairn_store::log_path(&self.dir).is_file() {
            return Ok(facts);
        }
        for r in LogReader::open(&self.dir)?.records()? {
            let r = r?;
            match serde_json::from_str::<MemoryEvent>(r.event.get()) {
                Ok(MemoryEvent::Remember { text, session, .. }) => facts.push(Fact {
                    n: 0,
                    text,
                    session,
                    ts: r.ts.clone(),
                }),
                Ok(MemoryEvent::Forget { hash }) => {
                    if let Some(i) = facts.iter().position(|f| text_hash(&f.text) == hash) {
                        facts.remove(i);
                    }
                }
                Err(_) => {}
            }
        }
        for (i, f) in facts.iter_mut().enumerate() {
            f.n = i + 1;
        }
        Ok(facts)
    }

    /// Appends a fact.
    pub fn remember(&self, text: &str, session: &str, call: &str) -> Result<()> {
        self.append(&MemoryEvent::Remember {
            text: text.to_string(),
            session: session.to_string(),
            call: call.to_string(),
        })
    }

    /// Forgets fact `n` (1-based, as listed); returns it.
    pub fn forget(&self, n: usize) -> Result<Fact> {
        let facts = self.list()?;
        let Some(f) = n.checked_sub(1).and_then(|i| facts.get(i)).cloned() else {
            return Err(EngineError::NoFact {
                n,
                facts: facts.len(),
            });
        };
        self.append(&MemoryEvent::Forget {
            hash: text_hash(&f.text),
        })?;
        Ok(f)
    }

    fn append(&self, event: &MemoryEvent) -> Result<()> {
        let options = Options {
            durability: cairn_store::Durability::Always,
            ..Options::default()
        };
        let mut tries = 0;
        // Another process may hold the log for a moment, or create it at the same time.
        let log = loop {
            let appended = if cairn_store::log_path(&self.dir).is_file() {
                LogWriter::open(&self.dir, options).map(|(w, _)| w)
            } else {
                LogWriter::create(&self.dir, options)
            }
            .and_then(|mut log| log.append(event).map(|_| log));
            match appended {
                Err(
                    cairn_store::Error::Locked { .. } | cairn_store::Error::CreatedElsewhere { .. },
                ) if tries < 50 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => break other?,
            }
        };
        log.close()?;
        Ok(())
    }
}

fn text_hash(text: &str) -> String {
    cairn_store::Hash::of(text.as_bytes()).short(32)
}
