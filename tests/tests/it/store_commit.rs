//! Batch durability's group commit as the log writer offers it: `commit` makes the
//! records durable within the window without waiting, `sync` before it returns; `always`
//! syncs each append, `none` never.

use std::time::{Duration, Instant};

use cairn_store::{Durability, LogWriter, Options};
use serde_json::json;

fn writer(dir: &std::path::Path, durability: Durability) -> LogWriter {
    LogWriter::create(
        dir,
        Options {
            durability,
            commit_window_ms: 2,
            ..Options::default()
        },
    )
    .unwrap()
}

fn append(w: &mut LogWriter, n: usize) {
    for i in 0..n {
        w.append(&json!({"type": "note", "i": i})).unwrap();
    }
}

#[test]
fn a_batch_commit_becomes_durable_within_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), Durability::Batch);
    for round in 1..=5 {
        append(&mut w, 20);
        w.commit().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while w.durable_len() < w.len_bytes() {
            assert!(Instant::now() < deadline, "round {round}: never durable");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(w.durable_len(), w.len_bytes());
    }
}

#[test]
fn a_batch_sync_returns_with_every_record_durable() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), Durability::Batch);
    // The first record is synced as the log is born with it; the appends after are not.
    append(&mut w, 1);
    let born = w.len_bytes();
    assert_eq!(w.durable_len(), born);
    append(&mut w, 3);
    assert_eq!(w.durable_len(), born, "batch appends do not sync");
    w.sync().unwrap();
    assert_eq!(w.durable_len(), w.len_bytes());
    append(&mut w, 1);
    w.commit().unwrap();
    w.sync().unwrap();
    assert_eq!(w.durable_len(), w.len_bytes());
}

#[test]
fn always_is_durable_at_each_append_and_none_never_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(&dir.path().join("always"), Durability::Always);
    for _ in 0..3 {
        append(&mut w, 1);
        assert_eq!(w.durable_len(), w.len_bytes());
    }
    let mut w = writer(&dir.path().join("none"), Durability::None);
    append(&mut w, 3);
    w.commit().unwrap();
    w.sync().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(w.durable_len(), 0);
}
