//! The reader: streaming iteration stops at a torn tail with one error, and random
//! access by seq (`get`, `records_from`) gives the log's records whatever state its
//! index cache is in: missing, stale after a repair, or garbage.

use std::path::Path;

use cairn_store::{Error, Hash, INDEX_FILE, LogReader, Options, TailState, log_path};
use cairn_tests::{make_line, message_after_path, ts_of, write_sample_log};
use serde_json::json;

/// What a reader must find for one record: seq, hash and the event's exact text.
type Expected = (u64, Hash, String);

/// Every record of the log at `dir`, by a plain scan that does not use the index.
fn scan(dir: &Path) -> Vec<Expected> {
    LogReader::open(&log_path(dir))
        .map(|r| {
            r.records()
                .unwrap()
                .map(|r| {
                    let r = r.unwrap();
                    (r.seq, r.hash, r.event.get().to_string())
                })
                .collect()
        })
        .unwrap()
}

/// `get` and `records_from` for every seq, and past the end, against `expected`.
fn check_random_access(dir: &Path, expected: &[Expected]) {
    let reader = LogReader::open(dir).unwrap();
    for (seq, want) in (0..).zip(expected) {
        let got = reader
            .get(seq)
            .unwrap_or_else(|e| panic!("get({seq}): {e}"))
            .map(|r| (r.seq, r.hash, r.event.get().to_string()));
        assert_eq!(got.as_ref(), Some(want), "get({seq})");
    }
    let end = expected.len() as u64;
    assert!(
        reader.get(end).unwrap().is_none(),
        "get({end}) past the head"
    );
    for seq in 0..end {
        let got: Vec<Expected> = reader
            .records_from(seq)
            .unwrap_or_else(|e| panic!("records_from({seq}): {e}"))
            .map(|r| {
                let r = r.unwrap_or_else(|e| panic!("records_from({seq}): {e}"));
                (r.seq, r.hash, r.event.get().to_string())
            })
            .collect();
        assert_eq!(got, expected[seq as usize..], "records_from({seq})");
    }
}

fn append_notes(dir: &Path, from: u64, sizes: &[usize]) {
    let mut log = cairn_tests::open_writer(dir, Options::default()).unwrap().0;
    for (i, &size) in (from..).zip(sizes) {
        log.append_at(&ts_of(i), &json!({"type": "note", "pad": "y".repeat(size)}))
            .unwrap();
    }
}

/// Cuts the log to `len` bytes and lets the writer repair it; returns the new head seq.
fn cut_and_repair(dir: &Path, len: u64) -> Option<u64> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(log_path(dir))
        .unwrap()
        .set_len(len)
        .unwrap();
    let (_, recovery) = cairn_tests::open_writer(dir, Options::default()).unwrap();
    recovery.head.map(|h| h.seq)
}

#[test]
fn writer_lines_are_the_documented_format() {
    let tmp = tempfile::tempdir().unwrap();
    let sample = write_sample_log(tmp.path(), 24);
    let mut prev = Hash::ZERO;
    let mut by_hand = Vec::new();
    for (seq, event) in (0..).zip(&sample.events) {
        let (line, hash) = make_line(&prev, seq, &ts_of(seq), &serde_json::to_vec(event).unwrap());
        by_hand.extend_from_slice(&line);
        prev = hash;
    }
    assert_eq!(
        String::from_utf8_lossy(&sample.bytes),
        String::from_utf8_lossy(&by_hand)
    );
}

#[test]
fn torn_tail_ends_the_stream_with_one_corruption_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sample = write_sample_log(dir, 24);
    let last = *sample.heads.last().unwrap();
    let (next_line, _) = make_line(
        &last.hash,
        24,
        &ts_of(24),
        br#"{"type":"cut","text":"short"}"#,
    );
    let torn = &next_line[..next_line.len() / 2];
    let mut bytes = sample.bytes.clone();
    bytes.extend_from_slice(torn);
    std::fs::write(log_path(dir), &bytes).unwrap();

    let reader = LogReader::open(dir).unwrap();
    let mut records = reader.records().unwrap();
    let good: Vec<Expected> = records
        .by_ref()
        .take(24)
        .map(|r| {
            let r = r.unwrap();
            (r.seq, r.hash, r.event.get().to_string())
        })
        .collect();
    let expected: Vec<Expected> = (0..)
        .zip(&sample.events)
        .map(|(seq, e)| (seq, sample.heads[seq as usize].hash, e.to_string()))
        .collect();
    assert_eq!(good, expected);
    match records.next() {
        Some(Err(Error::Corruption {
            path,
            seq,
            line,
            offset,
            what,
        })) => assert_eq!(
            (path, seq, line, offset, what),
            (
                log_path(dir),
                Some(24),
                25,
                sample.bytes.len() as u64,
                format!("torn tail: {} bytes without a newline", torn.len())
            )
        ),
        other => panic!("expected one corruption error, got {other:?}"),
    }
    assert!(
        records.next().is_none(),
        "the stream goes on after its error"
    );
    assert_eq!(
        reader.tail().unwrap(),
        TailState {
            head: Some(last),
            torn_bytes: torn.len() as u64,
            log_bytes: bytes.len() as u64
        }
    );
    // Random access to the good records is not disturbed by the torn tail.
    assert_eq!(reader.get(23).unwrap().map(|r| r.hash), Some(last.hash));
    // The reader repairs nothing.
    assert_eq!(std::fs::read(log_path(dir)).unwrap(), bytes);
}

#[test]
fn random_access_without_an_index() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_sample_log(dir, 24);
    let expected = scan(dir);
    assert!(!dir.join(INDEX_FILE).exists());
    check_random_access(dir, &expected);
    // The index it built is used next time, and deleting it is harmless.
    assert!(dir.join(INDEX_FILE).exists());
    check_random_access(dir, &expected);
    std::fs::remove_file(dir.join(INDEX_FILE)).unwrap();
    check_random_access(dir, &expected);
}

#[test]
fn records_from_past_the_head_is_an_error_naming_the_seq() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_sample_log(dir, 3);
    let err = LogReader::open(dir).unwrap().records_from(3).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    assert_eq!(
        message_after_path(&err, &log_path(dir)),
        "the log has no record with seq 3"
    );
}

#[test]
fn random_access_with_an_index_made_stale_by_a_repair() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sample = write_sample_log(dir, 24);
    check_random_access(dir, &scan(dir));
    // A crash tore record 15; the repair cut the log back to 14 and new records followed.
    assert_eq!(
        cut_and_repair(dir, sample.lines[15].start as u64 + 40),
        Some(14)
    );
    check_random_access(dir, &scan(dir));
    append_notes(dir, 15, &[10, 500, 3, 77, 1000, 0, 20, 20, 20, 20, 300, 1]);
    let expected = scan(dir);
    assert_eq!(expected.len(), 27);
    check_random_access(dir, &expected);
    // Cut back further than the index reaches, then grow again.
    assert_eq!(cut_and_repair(dir, sample.lines[3].end as u64 - 1), Some(2));
    append_notes(dir, 3, &[1, 2, 3]);
    check_random_access(dir, &scan(dir));
}

/// Regression: the index was trusted when its last entry pointed at the right line,
/// though entries before it could point into the middle of other lines (after a
/// repair and new records of other sizes that end where the old ones did), and `get`
/// then failed with a corruption error on a sound log.
#[test]
fn stale_index_whose_last_entry_still_fits_is_not_trusted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // An empty log to open: a writer born with its first record would need no open.
    std::fs::write(log_path(dir), b"").unwrap();
    append_notes(dir, 0, &[5, 5, 5, 5, 5, 5, 5, 10, 200, 30]);
    let before = scan(dir);
    check_random_access(dir, &before);
    // Cut records 7.. off, then write 7 and 8 with their sizes swapped: record 9 starts
    // where it did, but record 8 does not.
    let offsets: Vec<u64> = LogReader::open(dir)
        .unwrap()
        .records()
        .unwrap()
        .map(|r| r.unwrap().offset)
        .collect();
    assert_eq!(cut_and_repair(dir, offsets[7]), Some(6));
    append_notes(dir, 7, &[200, 10, 30]);
    let after = scan(dir);
    let new_offsets: Vec<u64> = LogReader::open(&log_path(dir))
        .unwrap()
        .records()
        .unwrap()
        .map(|r| r.unwrap().offset)
        .collect();
    assert_eq!(new_offsets[9], offsets[9]);
    assert_ne!(new_offsets[8], offsets[8]);
    check_random_access(dir, &after);
}

#[test]
fn random_access_with_a_garbage_index() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sample = write_sample_log(dir, 24);
    let expected = scan(dir);
    let idx = dir.join(INDEX_FILE);
    let entries = |offsets: &[u64]| -> Vec<u8> {
        let mut bytes = b"CAIRNIX1".to_vec();
        for o in offsets {
            bytes.extend_from_slice(&o.to_le_bytes());
        }
        bytes
    };
    let right: Vec<u64> = sample.lines.iter().map(|l| l.start as u64).collect();
    let mut wrong_middle = right.clone();
    wrong_middle[10] += 17;
    wrong_middle[11] = 0;
    let garbage: Vec<(&str, Vec<u8>)> = vec![
        ("text", b"this is not an index at all\n".to_vec()),
        ("empty", Vec::new()),
        ("magic only, cut short", b"CAIRN".to_vec()),
        ("zero entries", entries(&[0; 24])),
        ("huge entries", entries(&[u64::MAX; 24])),
        (
            "entries past the end of the log",
            entries(&[1 << 40, 1 << 41, 1 << 42]),
        ),
        (
            "every entry off by one",
            entries(&right.iter().map(|o| o + 1).collect::<Vec<_>>()),
        ),
        (
            "a partial entry at the end",
            [entries(&right[..5]), vec![1, 2, 3]].concat(),
        ),
        (
            "more entries than records",
            entries(&[right.clone(), vec![99_999; 5]].concat()),
        ),
        (
            "right last entry, wrong middle ones",
            entries(&wrong_middle),
        ),
    ];
    for (name, bytes) in garbage {
        std::fs::write(&idx, &bytes).unwrap();
        let result = std::panic::catch_unwind(|| check_random_access(dir, &expected));
        assert!(result.is_ok(), "with an index that is {name}");
    }
}
