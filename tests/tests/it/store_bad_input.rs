//! What the store does with input that is not a good log: each entry point
//! (`verify_path`, `LogReader::open`, `LogWriter::open`) refuses it with the right error
//! variant and a lowercase message that names the file, or reports it as a problem, and
//! never changes the file it was given.

use std::path::Path;
use std::process::{Command, Stdio};

use cairn_store::{
    Error, Hash, LOCK_FILE, LogReader, LogWriter, Options, Problem, ProblemKind, QUARANTINE_DIR,
    RECORD_BYTES_MAX, Recovery, TailState, VerifyOptions, log_path, verify_path,
};
use cairn_tests::{make_line, message_after_path, sigkill, ts_of};
use serde_json::json;

const HELPER: &str = env!("CARGO_BIN_EXE_store_helper");

/// A session directory whose log file holds `bytes`.
fn session_with(bytes: &[u8]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(log_path(tmp.path()), bytes).unwrap();
    tmp
}

fn assert_untouched(dir: &Path, bytes: &[u8]) {
    assert_eq!(std::fs::read(log_path(dir)).unwrap(), bytes);
    assert!(
        !dir.join(QUARANTINE_DIR).exists(),
        "something was quarantined"
    );
}

/// The three entry points on `dir` must each fail with `Error::Format` and `what`.
fn assert_all_refuse_with_format(dir: &Path, file: &Path, what: &str) {
    let verify = verify_path(file, &VerifyOptions::default()).unwrap_err();
    let read = LogReader::open(dir).unwrap_err();
    let write = cairn_tests::open_writer(dir, Options::default()).unwrap_err();
    for (name, err) in [
        ("verify_path", verify),
        ("LogReader::open", read),
        ("LogWriter::open", write),
    ] {
        assert!(matches!(err, Error::Format { .. }), "{name}: {err:?}");
        assert_eq!(message_after_path(&err, file), what, "{name}");
    }
}

#[test]
fn text_file_is_not_a_log() {
    let text = b"hello, this is a text file\nnot a log at all\n";
    let tmp = session_with(text);
    let dir = tmp.path();
    assert_all_refuse_with_format(
        dir,
        &log_path(dir),
        "not a cairn log: the first line does not start with {\"prev\":\"",
    );
    assert_untouched(dir, text);
}

#[test]
fn empty_file_is_an_empty_log() {
    let tmp = session_with(b"");
    let dir = tmp.path();
    let path = log_path(dir);
    let report = verify_path(&path, &VerifyOptions::default()).unwrap();
    assert_eq!(
        report.problems,
        vec![Problem {
            seq: None,
            line: 1,
            offset: 0,
            kind: ProblemKind::Empty,
            what: "empty log: no records".into(),
        }]
    );
    let reader = LogReader::open(dir).unwrap();
    assert_eq!(reader.records().unwrap().count(), 0);
    assert_eq!(
        reader.tail().unwrap(),
        TailState {
            head: None,
            torn_bytes: 0,
            log_bytes: 0
        }
    );
    assert!(reader.get(0).unwrap().is_none());
    assert_untouched(dir, b"");

    let (mut log, recovery) = cairn_tests::open_writer(dir, Options::default()).unwrap();
    assert_eq!(
        recovery,
        Recovery {
            head: None,
            quarantined_bytes: 0,
            quarantine_file: None,
            log_bytes: 0
        }
    );
    assert_eq!(log.append(&json!({"type": "first"})).unwrap().seq, 0);
    drop(log);
    assert!(
        verify_path(&path, &VerifyOptions::default())
            .unwrap()
            .is_clean()
    );
}

#[test]
fn directory_is_not_a_log_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(log_path(dir)).unwrap();
    assert_all_refuse_with_format(dir, &log_path(dir), "is a directory, not a log file");
    // The session directory given where a log file is expected.
    let err = verify_path(dir, &VerifyOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    assert_eq!(
        message_after_path(&err, dir),
        "is a directory, not a log file"
    );
}

#[test]
fn missing_log_is_an_io_error_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let path = log_path(dir);
    let errors = [
        verify_path(&path, &VerifyOptions::default()).unwrap_err(),
        LogReader::open(dir).unwrap_err(),
        cairn_tests::open_writer(dir, Options::default()).unwrap_err(),
    ];
    for err in errors {
        assert!(
            matches!(&err, Error::Io { path: p, source } if *p == path && source.kind() == std::io::ErrorKind::NotFound),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with(&format!("{}: ", path.display())),
            "{err}"
        );
    }
}

/// The length of the line that `{"pad":"<k x>"}` makes at seq 0 or 1 with a fixed
/// timestamp is this plus `k`.
fn line_bytes_without_pad() -> usize {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = LogWriter::create(tmp.path(), Options::default()).unwrap();
    log.append_at(&ts_of(0), &json!({"pad": ""})).unwrap();
    log.len_bytes() as usize
}

fn padded(k: usize) -> serde_json::Value {
    json!({"pad": "x".repeat(k)})
}

#[test]
fn record_at_record_bytes_max_is_accepted_and_one_past_it_refused() {
    const LIMIT: usize = 300;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let options = Options {
        record_bytes_max: LIMIT,
        ..Options::default()
    };
    let mut log = LogWriter::create(dir, options).unwrap();
    let at_limit = LIMIT - line_bytes_without_pad();
    log.append_at(&ts_of(0), &padded(at_limit)).unwrap();
    assert_eq!(log.len_bytes(), LIMIT as u64);

    let err = log.append_at(&ts_of(1), &padded(at_limit + 1)).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    assert_eq!(
        message_after_path(&err, &log_path(dir)),
        "record of 301 bytes is over record_bytes_max (300 bytes); store large payloads as blobs"
    );
    // The refused record left no trace and did not stop the writer.
    assert_eq!(log.len_bytes(), LIMIT as u64);
    assert_eq!(log.append_at(&ts_of(1), &padded(10)).unwrap().seq, 1);
    drop(log);
    assert!(
        verify_path(&log_path(dir), &VerifyOptions::default())
            .unwrap()
            .is_clean()
    );
}

/// `append_json_at` (an event serialized by the caller) writes the bytes `append_at`
/// writes, under the same limit, and refuses what is not one line of a JSON object.
#[test]
fn an_event_given_as_json_is_written_as_append_at_writes_it() {
    const LIMIT: usize = 300;
    let options = Options {
        record_bytes_max: LIMIT,
        ..Options::default()
    };
    let at_limit = LIMIT - line_bytes_without_pad();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut by_value = LogWriter::create(a.path(), options).unwrap();
    let mut by_json = LogWriter::create(b.path(), options).unwrap();
    for (i, k) in [3, at_limit].into_iter().enumerate() {
        by_value.append_at(&ts_of(i as u64), &padded(k)).unwrap();
        let json = padded(k).to_string();
        by_json.append_json_at(&ts_of(i as u64), &json).unwrap();
    }
    let past = by_json
        .append_json_at(&ts_of(2), &padded(at_limit + 1).to_string())
        .unwrap_err();
    assert_eq!(
        message_after_path(&past, &log_path(b.path())),
        "record of 301 bytes is over record_bytes_max (300 bytes); store large payloads as blobs"
    );
    for (json, what) in [
        (
            "{\"a\":\n1}",
            "an event must be compact JSON, without a raw newline",
        ),
        ("[1]", "an event must be a JSON object"),
    ] {
        let err = by_json.append_json_at(&ts_of(2), json).unwrap_err();
        assert_eq!(message_after_path(&err, &log_path(b.path())), what);
    }
    drop((by_value, by_json));
    assert_eq!(
        std::fs::read(log_path(a.path())).unwrap(),
        std::fs::read(log_path(b.path())).unwrap()
    );
}

/// A log of three valid records, the middle one `middle_bytes` long (newline
/// included), written by a writer whose limit lets it through. Returns the log and the
/// middle line's offset.
fn log_with_long_middle_record(middle_bytes: usize) -> (Vec<u8>, u64) {
    let tmp = tempfile::tempdir().unwrap();
    let options = Options {
        record_bytes_max: usize::MAX,
        ..Options::default()
    };
    let mut log = LogWriter::create(tmp.path(), options).unwrap();
    log.append_at(&ts_of(0), &padded(5)).unwrap();
    let middle = log
        .append_at(&ts_of(1), &padded(middle_bytes - line_bytes_without_pad()))
        .unwrap();
    assert_eq!(log.len_bytes() - middle.offset, middle_bytes as u64);
    log.append_at(&ts_of(2), &padded(5)).unwrap();
    drop(log);
    (std::fs::read(log_path(tmp.path())).unwrap(), middle.offset)
}

/// Regression: verify reported a line over the limit as `BadRecord` when the line
/// arrived within one read, and as `TooLong` only when it spanned reads.
#[test]
fn over_long_line_is_too_long_however_the_file_is_read() {
    const LIMIT: usize = 300;
    let (bytes, offset) = log_with_long_middle_record(400);
    let tmp = session_with(&bytes);
    let expected = vec![Problem {
        seq: Some(1),
        line: 2,
        offset,
        kind: ProblemKind::TooLong,
        what: "line of 400 bytes is longer than record_bytes_max (300 bytes)".into(),
    }];
    for chunk_bytes in [1 << 20, 64, 7] {
        let options = VerifyOptions {
            record_bytes_max: LIMIT,
            chunk_bytes,
            ..VerifyOptions::default()
        };
        let report = verify_path(&log_path(tmp.path()), &options).unwrap();
        assert_eq!(
            report.problems, expected,
            "read {chunk_bytes} bytes at a time"
        );
    }
}

/// Regression: the reader let through a record one byte over `RECORD_BYTES_MAX`
/// (its limit left out the newline), which the writer refuses and verify reports.
#[test]
fn reader_and_verify_agree_on_record_bytes_max() {
    // At the limit: written by the default writer, read, and verified clean.
    let tmp = tempfile::tempdir().unwrap();
    let mut log = LogWriter::create(tmp.path(), Options::default()).unwrap();
    log.append_at(
        &ts_of(0),
        &padded(RECORD_BYTES_MAX - line_bytes_without_pad()),
    )
    .unwrap();
    assert_eq!(log.len_bytes(), RECORD_BYTES_MAX as u64);
    drop(log);
    assert_eq!(
        LogReader::open(tmp.path())
            .unwrap()
            .records()
            .unwrap()
            .count(),
        1
    );
    assert!(
        verify_path(&log_path(tmp.path()), &VerifyOptions::default())
            .unwrap()
            .is_clean()
    );

    // One byte past it: refused by the default writer...
    let mut log = cairn_tests::open_writer(tmp.path(), Options::default())
        .unwrap()
        .0;
    let err = log
        .append_at(
            &ts_of(1),
            &padded(RECORD_BYTES_MAX + 1 - line_bytes_without_pad()),
        )
        .unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    drop(log);

    // ...and, if a writer with a larger limit wrote it, reported by verify and the reader.
    let (bytes, offset) = log_with_long_middle_record(RECORD_BYTES_MAX + 1);
    let tmp = session_with(&bytes);
    let report = verify_path(&log_path(tmp.path()), &VerifyOptions::default()).unwrap();
    let kinds: Vec<_> = report.problems.iter().map(|p| (p.seq, p.kind)).collect();
    assert_eq!(kinds, vec![(Some(1), ProblemKind::TooLong)]);
    let read: Vec<_> = LogReader::open(tmp.path())
        .unwrap()
        .records()
        .unwrap()
        .collect();
    // Seqs only: the record itself is a megabyte.
    let seqs: Vec<_> = read
        .iter()
        .map(|r| r.as_ref().map(|r| r.seq).ok())
        .collect();
    assert_eq!(seqs, vec![Some(0), None]);
    match &read[1] {
        Err(Error::Corruption {
            seq,
            line,
            offset: o,
            what,
            ..
        }) => assert_eq!(
            (*seq, *line, *o, what.as_str()),
            (
                Some(1),
                2,
                offset,
                "record is longer than record_bytes_max (1048576 bytes)"
            )
        ),
        other => panic!("expected a corruption error at seq 1, got {other:?}"),
    }
}

#[test]
fn line_far_over_record_bytes_max_is_refused_by_every_entry_point() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut log = LogWriter::create(dir, Options::default()).unwrap();
    let first = log.append_at(&ts_of(0), &padded(5)).unwrap();
    drop(log);
    let path = log_path(dir);
    let good_len = std::fs::metadata(&path).unwrap().len();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend(std::iter::repeat_n(b'x', 2 * RECORD_BYTES_MAX));
    bytes.push(b'\n');
    std::fs::write(&path, &bytes).unwrap();

    let report = verify_path(&path, &VerifyOptions::default()).unwrap();
    let found: Vec<_> = report
        .problems
        .iter()
        .map(|p| (p.seq, p.line, p.offset, p.kind))
        .collect();
    assert_eq!(found, vec![(Some(1), 2, good_len, ProblemKind::TooLong)]);
    let read: Vec<_> = LogReader::open(dir).unwrap().records().unwrap().collect();
    let seqs: Vec<_> = read
        .iter()
        .map(|r| r.as_ref().map(|r| r.seq).ok())
        .collect();
    assert_eq!(seqs, vec![Some(first.seq), None]);
    assert!(
        matches!(&read[1], Err(Error::Corruption { seq: Some(1), what, .. }) if what.contains("record_bytes_max")),
        "{:?}",
        read[1].as_ref().err()
    );
    let err = cairn_tests::open_writer(dir, Options::default()).unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err:?}");
    assert!(
        message_after_path(&err, &path)
            .contains("a line is longer than record_bytes_max (1048576 bytes)"),
        "{err}"
    );
    assert_untouched(dir, &bytes);
}

/// Three records chained by hand, the middle one's event holding a byte that is not
/// UTF-8 inside a string, with a correct hash: a writer wrote it, and it is still bad.
fn log_with_non_utf8_middle_record() -> (Vec<u8>, u64) {
    let (l0, h0) = make_line(
        &Hash::ZERO,
        0,
        &ts_of(0),
        br#"{"type":"note","text":"fine"}"#,
    );
    let (l1, h1) = make_line(
        &h0,
        1,
        &ts_of(1),
        b"{\"type\":\"note\",\"text\":\"caf\xe9 \xff\"}",
    );
    let (l2, _) = make_line(&h1, 2, &ts_of(2), br#"{"type":"note","text":"fine again"}"#);
    ([l0.clone(), l1, l2].concat(), l0.len() as u64)
}

/// Regression: a record whose event held bytes that are not UTF-8, under a correct
/// hash, passed verify and the writer's check, and the reader handed out the event with
/// those bytes replaced by U+FFFD: not the bytes that were hashed.
#[test]
fn non_utf8_event_under_a_valid_hash_is_corruption_not_rewritten() {
    let (bytes, offset) = log_with_non_utf8_middle_record();
    let tmp = session_with(&bytes);
    let dir = tmp.path();
    let path = log_path(dir);
    let what = "event is not a well-formed JSON object";

    let report = verify_path(&path, &VerifyOptions::default()).unwrap();
    assert_eq!(
        report.problems,
        vec![Problem {
            seq: Some(1),
            line: 2,
            offset,
            kind: ProblemKind::BadRecord,
            what: what.into(),
        }]
    );

    let read: Vec<_> = LogReader::open(dir).unwrap().records().unwrap().collect();
    assert_eq!(read.len(), 2, "{read:?}");
    assert_eq!(read[0].as_ref().unwrap().seq, 0);
    assert!(
        matches!(&read[1], Err(Error::Corruption { seq: Some(1), line: 2, offset: o, what: w, .. }) if *o == offset && w == what),
        "{:?}",
        read[1]
    );

    let err = cairn_tests::open_writer(dir, Options::default()).unwrap_err();
    assert!(
        matches!(&err, Error::Corruption { seq: Some(1), line: 2, offset: o, what: w, .. } if *o == offset && w == what),
        "{err:?}"
    );
    assert_eq!(
        message_after_path(&err, &path),
        format!("corrupt log at seq 1, line 2, byte offset {offset}: {what}")
    );
    assert_untouched(dir, &bytes);
}

#[test]
fn non_utf8_byte_written_over_a_record_is_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut log = LogWriter::create(dir, Options::default()).unwrap();
    let mut offsets = Vec::new();
    for i in 0..3 {
        offsets.push(
            log.append_at(&ts_of(i), &json!({"type": "note", "text": "plain text"}))
                .unwrap()
                .offset,
        );
    }
    drop(log);
    let path = log_path(dir);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = offsets[1] as usize + 150;
    bytes[at] = 0xff;
    std::fs::write(&path, &bytes).unwrap();

    let report = verify_path(&path, &VerifyOptions::default()).unwrap();
    let found: Vec<_> = report
        .problems
        .iter()
        .map(|p| (p.seq, p.line, p.offset, p.kind))
        .collect();
    assert_eq!(
        found,
        vec![(Some(1), 2, offsets[1], ProblemKind::BadRecord)]
    );
    let err = cairn_tests::open_writer(dir, Options::default()).unwrap_err();
    assert!(
        matches!(err, Error::Corruption { seq: Some(1), line: 2, offset, .. } if offset == offsets[1]),
        "{err:?}"
    );
    let read: Vec<_> = LogReader::open(dir).unwrap().records().unwrap().collect();
    assert!(
        matches!(
            read.as_slice(),
            [Ok(_), Err(Error::Corruption { seq: Some(1), .. })]
        ),
        "{read:?}"
    );
    assert_untouched(dir, &bytes);
}

#[test]
fn log_locked_by_another_process_names_its_pid() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut log = LogWriter::create(dir, Options::default()).unwrap();
    log.append(&json!({"type": "note"})).unwrap();
    drop(log);

    cairn_tests::wait_unlocked(dir);
    let mut child = Command::new(HELPER)
        .args(["hold-lock", dir.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = cairn_tests::first_line(&mut child);
    assert_eq!(ready.trim(), format!("ready {}", child.id()));

    let lock = dir.join(LOCK_FILE);
    // (Creating is refused before any lock is looked at: a log is there.)
    assert!(matches!(
        LogWriter::create(dir, Options::default()),
        Err(Error::Format { what, .. }) if what.starts_with("a log already exists")
    ));
    let refused = [LogWriter::open(dir, Options::default())
        .map(|_| ())
        .unwrap_err()];
    for err in refused {
        assert!(
            matches!(&err, Error::Locked { path, pid: Some(pid) } if *path == lock && *pid == child.id()),
            "{err:?}"
        );
        assert_eq!(
            message_after_path(&err, &lock),
            format!(
                "locked by process {} (one writer per session: wait for it to end, or stop it)",
                child.id()
            )
        );
    }
    // Readers need no lock.
    assert_eq!(LogReader::open(dir).unwrap().records().unwrap().count(), 1);
    assert!(
        verify_path(&log_path(dir), &VerifyOptions::default())
            .unwrap()
            .is_clean()
    );

    // The lock dies with its holder.
    sigkill(&mut child).unwrap();
    let (mut log, recovery) = cairn_tests::open_writer(dir, Options::default()).unwrap();
    assert_eq!(recovery.head.map(|h| h.seq), Some(0));
    assert_eq!(log.append(&json!({"type": "note"})).unwrap().seq, 1);
}

#[test]
fn second_writer_in_the_same_process_is_locked_out() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut first = LogWriter::create(dir, Options::default()).unwrap();
    first.append(&json!({"type": "note"})).unwrap();
    let err = LogWriter::open(dir, Options::default()).unwrap_err();
    assert!(
        matches!(err, Error::Locked { pid: Some(pid), .. } if pid == std::process::id()),
        "{err:?}"
    );
}

/// Regression: in one test binary, a test reopening its own log was refused as "locked
/// by process <itself>" because a child another thread was starting still held the
/// closed writer's lock. `open_writer` waits for that child's exec.
#[test]
fn a_closed_writer_stays_locked_until_a_child_forked_meanwhile_execs() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut writer = LogWriter::create(dir, Options::default()).unwrap();
    writer.append(&json!({"type": "note"})).unwrap();
    let (mut forked, tell) = std::io::pipe().unwrap();
    let tell_fd = tell.as_raw_fd();
    let starter = std::thread::spawn(move || {
        let mut cmd = Command::new("true");
        // SAFETY: between fork and exec the hook calls only write(2) and nanosleep(2),
        // both async-signal-safe, and allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                libc::write(tell_fd, b"f".as_ptr().cast(), 1);
                std::thread::sleep(Duration::from_millis(1000));
                Ok(())
            });
        }
        let status = cmd.status().unwrap();
        drop(tell);
        status
    });
    let mut byte = [0u8; 1];
    forked.read_exact(&mut byte).unwrap();
    // The child holds a copy of the writer's open lock file, as a child of any other
    // test thread can at any moment.
    drop(writer);
    let refused = LogWriter::open(dir, Options::default()).unwrap_err();
    assert!(
        matches!(refused, Error::Locked { pid: Some(pid), .. } if pid == std::process::id()),
        "{refused:?}"
    );
    let t = Instant::now();
    let (mut log, _) = cairn_tests::open_writer(dir, Options::default()).unwrap();
    assert!(
        t.elapsed() > Duration::from_millis(100),
        "{:?}",
        t.elapsed()
    );
    log.append(&json!({"type": "note"})).unwrap();
    assert!(starter.join().unwrap().success());
}
