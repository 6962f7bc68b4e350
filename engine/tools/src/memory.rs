//! Project memory: facts saved with `remember`, kept per project like the allow list, in
//! a hash-chained project log (`projects/<key>/memory/events.jsonl`) of remember and
//! forget records. The list is the fold of that log.
//!
//! Nothing from web pages goes into memory: [`overlap`] compares a fact with the texts
//! a session fetched, by word shingles, so a copied sentence is caught even when it was
//! re-cased, re-punctuated or cut.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use cairn_store::{LogReader, LogWriter, Options};
use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};

/// Words in one shingle.
pub const SHINGLE_WORDS: usize = 5;
/// A fact is refused when at least this share (percent) of its shingles appear in a
/// fetched text.
pub const OVERLAP_PERCENT_MAX: usize = 30;
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
        let mut log = loop {
            let opened = if cairn_store::log_path(&self.dir).is_file() {
                LogWriter::open(&self.dir, options).map(|(w, _)| w)
            } else {
                LogWriter::create(&self.dir, options)
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
        Ok(())
    }
}

fn text_hash(text: &str) -> String {
    cairn_store::Hash::of(text.as_bytes()).short(32)
}

/// Lowercase words of letters and digits.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .collect()
}

/// How many of the fact's shingles appear in `source`, of how many. A fact shorter
/// than a shingle (but of 3 words or more) counts as one shingle: found or not as a
/// whole.
pub fn overlap(fact: &str, source: &str) -> (usize, usize) {
    let f = words(fact);
    let s = words(source);
    if f.len() < SHINGLE_WORDS {
        if f.len() < 3 {
            return (0, 0);
        }
        let found = s.windows(f.len()).any(|w| w == f.as_slice());
        return (usize::from(found), 1);
    }
    let source_shingles: HashSet<&[String]> = s.windows(SHINGLE_WORDS).collect();
    let fact_shingles: Vec<&[String]> = f.windows(SHINGLE_WORDS).collect();
    let shared = fact_shingles
        .iter()
        .filter(|w| source_shingles.contains(*w))
        .count();
    (shared, fact_shingles.len())
}

/// True when `overlap` is at or past [`OVERLAP_PERCENT_MAX`].
pub fn too_close((shared, total): (usize, usize)) -> bool {
    shared > 0 && shared * 100 >= total * OVERLAP_PERCENT_MAX
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_by_shingles_at_and_past_the_threshold() {
        let page = "The quick brown fox jumps over the lazy dog near the river bank today.";
        // Re-cased and re-punctuated copy: every shingle matches.
        assert!(too_close(overlap(
            "the QUICK brown fox, jumps over the lazy dog",
            page
        )));
        // 10 words → 6 shingles; 2 shared = 33% ≥ 30%.
        let two = overlap(
            "quick brown fox jumps over the alpha beta gamma delta",
            page,
        );
        assert_eq!(two, (2, 6));
        assert!(too_close(two));
        // 1 of 6 = 16%: kept.
        let one = overlap("brown fox jumps over the zeta alpha beta gamma delta", page);
        assert_eq!(one, (1, 6));
        assert!(!too_close(one));
        assert!(!too_close(overlap("tests run with cargo nextest", page)));
        assert!(too_close(overlap("lazy dog near", page)));
    }
}
