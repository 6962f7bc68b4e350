//! Shared helpers: demo sessions in temp dirs, and normalising what differs between
//! runs (ids, times, temp paths, record hashes, elapsed times) for snapshots.

use std::path::{Path, PathBuf};

use cairn_engine::Home;

/// Both demo sessions (thoth, thndrs) in a fresh home; the temp dirs live as long as it.
pub struct Demo {
    pub home: tempfile::TempDir,
    pub base: tempfile::TempDir,
    /// (catalog name, session folder)
    pub sessions: Vec<(String, PathBuf)>,
}

pub fn demo() -> Demo {
    let home = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let h = Home::at(home.path());
    let runs = cairn_engine::demo::run(&h, base.path(), |_, _| {}).unwrap();
    let sessions = runs
        .iter()
        .map(|r| {
            let ws = r.workspace.canonicalize().unwrap();
            let dir = h.project(&ws).session_dir(&r.session);
            (r.catalog.name().to_string(), dir)
        })
        .collect();
    Demo {
        home,
        base,
        sessions,
    }
}

/// Replaces what changes from run to run with placeholders.
pub fn normalise(text: &str, paths: &[&Path]) -> String {
    let mut t = text.to_string();
    for p in paths {
        if let Ok(c) = p.canonicalize() {
            t = t.replace(&c.to_string_lossy().to_string(), "<tmp>");
        }
        t = t.replace(&p.to_string_lossy().to_string(), "<tmp>");
    }
    let rules = [
        (r"\d{8}T\d{6}\.\d{6}-[0-9a-f]{6}", "<session>"),
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "<ts>"),
        (r"\b[0-9a-f]{64}\b", "<hash>"),
        (r"\b\d+(\.\d+)?(µs|ms|s)\b", "<t>"),
        (r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", "<time>"),
    ];
    for (re, to) in rules {
        t = regex::Regex::new(re)
            .unwrap()
            .replace_all(&t, to)
            .into_owned();
    }
    t
}
