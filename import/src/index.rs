//! Which source files the home holds imports of, and how far each was read: built once
//! per import run from the sessions' own records (`session_started.imported`,
//! `session_resumed.imported`, `session_ended.imported`), so it can never disagree
//! with them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use cairn_core::event::{Event, ImportProgress};
use cairn_engine::Home;
use cairn_store::Hash;

use crate::error::Result;

/// The last pass over one source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The session it went into.
    pub id: String,
    pub dir: PathBuf,
    pub progress: ImportProgress,
}

/// The imports a home holds.
#[derive(Debug, Default)]
pub struct Index {
    by_path: HashMap<PathBuf, Entry>,
    /// Main sessions by source session id: (session, seq and hash of its last record).
    mains: HashMap<String, (String, u64, Hash)>,
}

impl Index {
    /// Reads every imported session of `home` (a session that is not imported is
    /// left after its first record).
    pub fn load(home: &Home) -> Index {
        let mut index = Index::default();
        for project in home.projects() {
            for id in project.sessions() {
                index.read(&project.session_dir(&id), &id);
            }
        }
        index
    }

    fn read(&mut self, dir: &Path, id: &str) {
        let Ok(reader) = cairn_store::LogReader::open(dir) else {
            return;
        };
        let Ok(records) = reader.records() else {
            return;
        };
        let mut file: Option<PathBuf> = None;
        let mut main: Option<String> = None;
        for raw in records {
            let Ok(raw) = raw else { return };
            let kind = raw.event_type();
            let kind = kind.as_deref().unwrap_or("");
            if raw.seq == 0 && kind != "session_started" {
                return;
            }
            if !matches!(
                kind,
                "session_started" | "session_resumed" | "session_ended"
            ) {
                continue;
            }
            let Ok(rec) = cairn_core::fold::parse(&raw) else {
                continue;
            };
            match rec.event {
                Event::SessionStarted(s) => match s.imported {
                    Some(i) => {
                        file = Some(PathBuf::from(&i.file.path));
                        if i.branch == "main" {
                            main = Some(i.source_id);
                        }
                    }
                    None => return,
                },
                Event::SessionResumed {
                    imported: Some(f), ..
                } => file = Some(PathBuf::from(&f.path)),
                Event::SessionEnded {
                    imported: Some(progress),
                    ..
                } => {
                    if let Some(f) = &file {
                        self.by_path.insert(
                            f.clone(),
                            Entry {
                                id: id.to_string(),
                                dir: dir.to_path_buf(),
                                progress,
                            },
                        );
                    }
                    if let Some(m) = &main {
                        self.mains
                            .insert(m.clone(), (id.to_string(), raw.seq, raw.hash));
                    }
                }
                _ => {}
            }
        }
    }

    /// The last import of the file at `path` (canonical).
    pub fn get(&self, path: &Path) -> Option<&Entry> {
        self.by_path.get(path)
    }

    /// The main session imported from source session `source_id`, and its end.
    pub fn main_of(&self, source_id: &str) -> Option<(String, u64, Hash)> {
        self.mains.get(source_id).cloned()
    }

    /// Notes a pass just written, ending at `head`.
    pub fn add(
        &mut self,
        path: &Path,
        entry: Entry,
        main_of: Option<&str>,
        head: (u64, Hash),
    ) -> Result<()> {
        if let Some(source) = main_of {
            self.mains
                .insert(source.to_string(), (entry.id.clone(), head.0, head.1));
        }
        self.by_path.insert(path.to_path_buf(), entry);
        Ok(())
    }
}
