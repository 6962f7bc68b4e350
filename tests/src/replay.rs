//! Helpers of the replay tests: recorded sessions to check, and a log rewriter that
//! edits records and writes the log again with valid hashes and chain, so that only the
//! deep checks (not the integrity check) can catch the edit.

use std::path::{Path, PathBuf};

use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_store::{Durability, Hash, LogReader};
use serde_json::Value;

/// One record as the rewriter sees it: timestamp and event.
#[derive(Debug, Clone, PartialEq)]
pub struct Rec {
    pub ts: String,
    pub event: Value,
}

/// The records of a session's log.
pub fn read_records(dir: &Path) -> Vec<Rec> {
    LogReader::open(dir)
        .unwrap_or_else(|e| panic!("open {}: {e}", dir.display()))
        .records()
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|r| {
            let r = r.unwrap_or_else(|e| panic!("record: {e}"));
            Rec {
                ts: r.ts.clone(),
                event: serde_json::from_str(r.event.get()).unwrap_or_else(|e| panic!("{e}")),
            }
        })
        .collect()
}

/// Lets `edit` change the records, then writes the log again, renumbered, with fresh
/// hashes and chain; removes the index and snapshots (caches of the old log), as a
/// forger would.
pub fn rewrite(dir: &Path, edit: impl FnOnce(&mut Vec<Rec>)) {
    let mut recs = read_records(dir);
    edit(&mut recs);
    rechain(dir, &recs);
    let _ = std::fs::remove_dir_all(dir.join(cairn_store::SNAPSHOT_DIR));
}

/// Writes `recs` as the session's log, numbered from 0, each line hashed and chained
/// to the one before (BLAKE3 derive-key over the line up to its hash, `prev` the
/// previous hash), and drops the index; snapshots are left as they are.
pub fn rechain(dir: &Path, recs: &[Rec]) {
    let mut out = Vec::new();
    let mut prev = Hash::ZERO;
    for (seq, r) in recs.iter().enumerate() {
        let event = serde_json::to_vec(&r.event).unwrap_or_else(|e| panic!("{e}"));
        let (line, hash) = crate::make_line(&prev, seq as u64, &r.ts, &event);
        out.extend_from_slice(&line);
        prev = hash;
    }
    write_raw(dir, &out);
}

/// Replaces a session's log with `bytes` as they are (no re-hashing) and drops the index.
pub fn write_raw(dir: &Path, bytes: &[u8]) {
    let log = cairn_store::log_path(dir);
    std::fs::write(&log, bytes).unwrap_or_else(|e| panic!("write {}: {e}", log.display()));
    let _ = std::fs::remove_file(dir.join(cairn_store::INDEX_FILE));
}

/// The raw lines of a session's log, newline included.
pub fn raw_lines(dir: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(cairn_store::log_path(dir)).unwrap_or_else(|e| panic!("{e}"));
    bytes
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// The index of the first record of `kind` for which `pred` holds.
pub fn find(recs: &[Rec], kind: &str, pred: impl Fn(&Value) -> bool) -> usize {
    recs.iter()
        .position(|r| r.event["type"] == kind && pred(&r.event))
        .unwrap_or_else(|| panic!("no {kind} record matches"))
}

/// A home, a base folder for workspaces, and the demo sessions recorded in them.
pub struct Demo {
    pub tmp: tempfile::TempDir,
    pub home: Home,
    /// Session folders: thoth, then thndrs.
    pub sessions: Vec<PathBuf>,
}

/// Records the two demo sessions in a fresh home.
pub fn demo() -> Demo {
    let tmp = crate::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    let runs = cairn_engine::demo::run(&home, &tmp.path().join("ws"), |_, _| {})
        .unwrap_or_else(|e| panic!("demo: {e}"));
    let sessions = runs
        .iter()
        .map(|r| {
            cairn_engine::find_session(&home, &r.session, None)
                .unwrap_or_else(|e| panic!("{e}"))
                .dir
        })
        .collect();
    Demo {
        tmp,
        home,
        sessions,
    }
}

/// A configuration without fsyncs (tests) for `catalog`.
pub fn quick_config(catalog: Catalog) -> EngineConfig {
    let mut c = EngineConfig::new(catalog);
    c.durability = Durability::None;
    c
}

/// Writes `files` into a new workspace `root`, runs `steps` (tool, input) through a
/// new session, ends it and returns its folder.
pub fn record(
    home: &Home,
    root: &Path,
    files: &[(&str, &str)],
    config: EngineConfig,
    steps: &[(&str, Value)],
) -> PathBuf {
    for (path, content) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap_or(root)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&p, content).unwrap_or_else(|e| panic!("{e}"));
    }
    let mut engine = Engine::start(home, root, config).unwrap_or_else(|e| panic!("{e}"));
    for (tool, input) in steps {
        engine
            .call(tool, input.clone())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let dir = engine.dir().to_path_buf();
    engine.end("test").unwrap_or_else(|e| panic!("{e}"));
    dir
}
