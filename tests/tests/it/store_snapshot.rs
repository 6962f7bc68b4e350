//! Snapshot files are a cache: `latest_valid` returns the newest one that belongs to
//! the log, and skips every corrupt, truncated, foreign or stale one with a warning
//! that says why, falling back to an older valid snapshot.

use std::path::{Path, PathBuf};

use cairn_store::{
    Hash, LogReader, LogWriter, Options, SNAPSHOT_DIR, Snapshot, SnapshotMeta, SnapshotStore,
    SnapshotWarning,
};
use cairn_tests::ts_of;
use serde_json::json;

const FORMAT: u32 = 1;

/// A session with a log of `records` records; returns the hash of each.
fn session(dir: &Path, records: u64) -> Vec<Hash> {
    let mut log = LogWriter::create(dir, Options::default()).unwrap();
    let hashes = (0..records)
        .map(|i| {
            log.append_at(&ts_of(i), &json!({"type": "note", "i": i}))
                .unwrap()
                .hash
        })
        .collect();
    log.close().unwrap();
    hashes
}

fn meta(seq: u64, hash: Hash) -> SnapshotMeta {
    SnapshotMeta {
        format_version: FORMAT,
        seq,
        record_hash: hash,
    }
}

fn body(seq: u64) -> Vec<u8> {
    format!("state folded up to seq {seq}")
        .into_bytes()
        .repeat(10)
}

/// A loaded snapshot as a comparable value: its meta, body and file.
type Found = (SnapshotMeta, Vec<u8>, PathBuf);

/// What `latest_valid` found, and the warnings.
fn latest(dir: &Path) -> (Option<Found>, Vec<SnapshotWarning>) {
    let reader = LogReader::open(dir).unwrap();
    let (snap, warnings) = SnapshotStore::new(dir)
        .latest_valid(FORMAT, &reader)
        .unwrap();
    (snap.map(|s: Snapshot| (s.meta, s.body, s.path)), warnings)
}

fn warning(path: &Path, what: &str) -> SnapshotWarning {
    SnapshotWarning {
        path: path.to_path_buf(),
        what: what.to_string(),
    }
}

#[test]
fn saved_snapshot_is_the_latest_valid() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let hashes = session(dir, 10);
    let store = SnapshotStore::new(dir);
    let older = store.save(&meta(3, hashes[3]), &body(3)).unwrap();
    let newest = store.save(&meta(7, hashes[7]), &body(7)).unwrap();
    assert_eq!(newest, dir.join(SNAPSHOT_DIR).join("7.rkyv"));
    assert_eq!(store.list().unwrap(), vec![(7, newest.clone()), (3, older)]);
    assert_eq!(
        latest(dir),
        (Some((meta(7, hashes[7]), body(7), newest)), vec![])
    );
}

#[test]
fn a_snapshot_saved_keeping_a_few_removes_the_older_ones_and_keeps_one_ahead_of_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let hashes = session(dir, 10);
    let store = SnapshotStore::new(dir);
    // One ahead of the snapshots to come, as a log later cut short leaves it.
    store.save(&meta(9, hashes[9]), &body(9)).unwrap();
    for seq in 1..=4 {
        store
            .save_keeping(&meta(seq, hashes[seq as usize]), &body(seq), 1)
            .unwrap();
        let seqs: Vec<u64> = store.list().unwrap().into_iter().map(|(s, _)| s).collect();
        let kept: Vec<u64> = [9, seq]
            .into_iter()
            .chain((seq > 1).then_some(seq - 1))
            .collect();
        assert_eq!(seqs, kept, "after the snapshot at {seq}");
    }
    // Keeping none of the older ones, and a file already gone, are fine.
    std::fs::remove_file(dir.join(SNAPSHOT_DIR).join("3.rkyv")).unwrap();
    store
        .save_keeping(&meta(5, hashes[5]), &body(5), 0)
        .unwrap();
    let seqs: Vec<u64> = store.list().unwrap().into_iter().map(|(s, _)| s).collect();
    assert_eq!(seqs, vec![9, 5]);
    // What is kept still loads (this log has a record 9, so that one is the newest).
    assert_eq!(latest(dir).0.map(|f| f.0.seq), Some(9));
}

#[test]
fn no_snapshot_is_none_without_warnings() {
    let tmp = tempfile::tempdir().unwrap();
    session(tmp.path(), 3);
    assert_eq!(latest(tmp.path()), (None, vec![]));
}

/// One way to spoil the newest snapshot, and the reason its warning must give.
struct Spoil {
    name: &'static str,
    /// Writes the spoilt snapshot at seq 7 (or elsewhere) and returns its path.
    make: fn(&SnapshotStore, &[Hash]) -> PathBuf,
    what: &'static str,
}

fn flip_body_byte(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let last = bytes.len() - 1;
    bytes[last - 10] ^= 0x01;
    std::fs::write(path, bytes).unwrap();
}

fn cut(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn spoils() -> Vec<Spoil> {
    vec![
        Spoil {
            name: "corrupt body",
            make: |s, h| {
                let p = s.save(&meta(7, h[7]), &body(7)).unwrap();
                flip_body_byte(&p);
                p
            },
            what: "snapshot body does not match its checksum",
        },
        Spoil {
            name: "truncated body",
            make: |s, h| {
                let p = s.save(&meta(7, h[7]), &body(7)).unwrap();
                cut(&p, std::fs::metadata(&p).unwrap().len() - 5);
                p
            },
            what: "snapshot is truncated or has trailing bytes",
        },
        Spoil {
            name: "truncated header",
            make: |s, h| {
                let p = s.save(&meta(7, h[7]), &body(7)).unwrap();
                cut(&p, 40);
                p
            },
            what: "not a cairn snapshot",
        },
        Spoil {
            name: "trailing bytes",
            make: |s, h| {
                let p = s.save(&meta(7, h[7]), &body(7)).unwrap();
                let mut bytes = std::fs::read(&p).unwrap();
                bytes.push(0);
                std::fs::write(&p, bytes).unwrap();
                p
            },
            what: "snapshot is truncated or has trailing bytes",
        },
        Spoil {
            name: "foreign format version",
            make: |s, h| {
                let foreign = SnapshotMeta {
                    format_version: FORMAT + 1,
                    ..meta(7, h[7])
                };
                s.save(&foreign, &body(7)).unwrap()
            },
            what: "format version 2 (this cairn reads 1)",
        },
        Spoil {
            name: "stale: record hash not in the log",
            make: |s, _| {
                s.save(&meta(7, Hash::of(b"a record of another log")), &body(7))
                    .unwrap()
            },
            what: "stale: record 7 of the log has another hash",
        },
        Spoil {
            name: "stale: seq past the head",
            make: |s, h| s.save(&meta(12, h[9]), &body(12)).unwrap(),
            what: "stale: the log has no record 12",
        },
        Spoil {
            name: "file named for another seq",
            make: |s, h| {
                let p = s.save(&meta(5, h[5]), &body(5)).unwrap();
                let renamed = p.with_file_name("8.rkyv");
                std::fs::rename(&p, &renamed).unwrap();
                renamed
            },
            what: "named for seq 8 but holds seq 5",
        },
        Spoil {
            name: "not a snapshot at all",
            make: |s, h| {
                let p = s.save(&meta(7, h[7]), &body(7)).unwrap();
                std::fs::write(&p, "{\"not\": \"a snapshot\"}\n".repeat(10)).unwrap();
                p
            },
            what: "not a cairn snapshot",
        },
    ]
}

#[test]
fn spoilt_snapshot_is_skipped_with_its_reason_for_an_older_valid_one() {
    for spoil in spoils() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let hashes = session(dir, 10);
        let store = SnapshotStore::new(dir);
        let older = store.save(&meta(3, hashes[3]), &body(3)).unwrap();
        let spoilt = (spoil.make)(&store, &hashes);
        assert_eq!(
            latest(dir),
            (
                Some((meta(3, hashes[3]), body(3), older.clone())),
                vec![warning(&spoilt, spoil.what)]
            ),
            "{}",
            spoil.name
        );
        // Without the older one, nothing is returned, with the same warning.
        std::fs::remove_file(&older).unwrap();
        let (snap, warnings) = latest(dir);
        assert_eq!(
            (snap, warnings.clone()),
            (None, vec![warning(&spoilt, spoil.what)]),
            "{}",
            spoil.name
        );
        assert_eq!(
            warnings[0].to_string(),
            format!("{}: snapshot skipped: {}", spoilt.display(), spoil.what),
            "{}",
            spoil.name
        );
    }
}

#[test]
fn every_spoilt_snapshot_is_named_newest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let hashes = session(dir, 10);
    let store = SnapshotStore::new(dir);
    let valid = store.save(&meta(2, hashes[2]), &body(2)).unwrap();
    let stale = store.save(&meta(12, hashes[9]), &body(12)).unwrap();
    let foreign = store
        .save(
            &SnapshotMeta {
                format_version: 9,
                ..meta(6, hashes[6])
            },
            &body(6),
        )
        .unwrap();
    let corrupt = store.save(&meta(4, hashes[4]), &body(4)).unwrap();
    flip_body_byte(&corrupt);
    // Files that are not named `<seq>.rkyv` are not snapshots and are not looked at.
    std::fs::write(dir.join(SNAPSHOT_DIR).join("notes.txt"), "x").unwrap();
    assert_eq!(
        latest(dir),
        (
            Some((meta(2, hashes[2]), body(2), valid)),
            vec![
                warning(&stale, "stale: the log has no record 12"),
                warning(&foreign, "format version 9 (this cairn reads 1)"),
                warning(&corrupt, "snapshot body does not match its checksum"),
            ]
        )
    );
}

/// Guards against trusting a snapshot taken before the log was cut back and written
/// again (a torn tail repaired, then other records appended): its seq exists again, but
/// holds another record.
#[test]
fn snapshot_of_a_rewritten_seq_is_stale() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let hashes = session(dir, 10);
    let store = SnapshotStore::new(dir);
    let older = store.save(&meta(4, hashes[4]), &body(4)).unwrap();
    let newer = store.save(&meta(8, hashes[8]), &body(8)).unwrap();
    // Keep records 0..=5 and cut record 6 short, as a crash would.
    let log = cairn_store::log_path(dir);
    let lines: Vec<u64> = LogReader::open(dir)
        .unwrap()
        .records()
        .unwrap()
        .map(|r| r.unwrap().offset)
        .collect();
    cut(&log, lines[6] + 30);
    let (mut w, recovery) = cairn_tests::open_writer(dir, Options::default()).unwrap();
    assert_eq!(recovery.head.map(|h| h.seq), Some(5));
    for i in 6..10 {
        w.append_at(&ts_of(i), &json!({"type": "note", "i": i, "again": true}))
            .unwrap();
    }
    drop(w);
    assert_eq!(
        latest(dir),
        (
            Some((meta(4, hashes[4]), body(4), older)),
            vec![warning(
                &newer,
                "stale: record 8 of the log has another hash"
            )]
        )
    );
}
