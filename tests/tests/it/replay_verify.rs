//! Deep verify: the demo sessions verify clean; each kind of tampering is reported at
//! the seq where it is, including edits re-hashed so that the integrity check passes
//! and only the deep checks (fold, decisions, blobs) can catch them.

use std::path::Path;

use cairn_replay::{Problem, ProblemKind, VerifyOptions, verify, verify_with};
use cairn_tests::replay::{Rec, demo, find, raw_lines, read_records, rewrite, write_raw};
use serde_json::{Value, json};

fn problems(dir: &Path) -> Vec<Problem> {
    let (_, problems) = verify(dir).unwrap();
    problems
}

/// The first problem, asserted to be of `kind` at `seq`.
fn check_first(dir: &Path, kind: ProblemKind, seq: u64) -> Vec<Problem> {
    let p = problems(dir);
    assert!(!p.is_empty(), "no problem found");
    assert_eq!((p[0].kind, p[0].seq), (kind, Some(seq)), "{p:#?}");
    p
}

#[test]
fn demo_sessions_verify_clean() {
    let d = demo();
    for dir in &d.sessions {
        let (report, problems) = verify(dir).unwrap();
        assert_eq!(problems, vec![], "{}", dir.display());
        assert!(report.ended);
        assert!(report.interrupted.is_empty());
        assert_eq!(report.problems, 0);
        assert!(report.decisions_checked >= report.calls, "{report:?}");
        assert!(report.blobs_checked > 5, "{report:?}");
        assert_eq!(report.decisions_unchecked, 0);
        let head = report.head.unwrap();
        assert_eq!(head.seq + 1, report.records);
    }
}

#[test]
fn an_edited_hash_line_of_an_output_is_reported_at_its_record() {
    let d = demo();
    let dir = &d.sessions[0];
    let mut at = 0;
    rewrite(dir, |recs: &mut Vec<Rec>| {
        // The first successful read_file's output.
        let started = find(recs, "tool_started", |e| e["tool"] == "read_file");
        let call = recs[started].event["call"].clone();
        at = find(recs, "tool_finished", |e| e["call"] == call);
        let out = recs[at].event["output"].as_str().unwrap().to_string();
        let i = out.rfind("hash: ").unwrap();
        let forged = format!("{}hash: {}", &out[..i], "ab".repeat(32));
        recs[at].event["output"] = Value::String(forged);
    });
    check_first(dir, ProblemKind::Decision, at as u64);
}

#[test]
fn a_deleted_record_is_reported_by_integrity_at_its_seq() {
    let d = demo();
    let dir = &d.sessions[0];
    let mut lines = raw_lines(dir);
    lines.remove(5);
    write_raw(dir, &lines.concat());
    // Reported where seq 5 should be: line 6, holding seq 6.
    let p = problems(dir);
    assert_eq!(
        (p[0].kind, p[0].line),
        (ProblemKind::Integrity, 6),
        "{p:#?}"
    );
    assert_eq!(p[0].what, "seq_gap: expected seq 5, found 6");
}

#[test]
fn a_deleted_read_rechained_makes_the_next_edit_a_broken_rule() {
    // The read that lost its record ended ok without it; and without the read, the
    // fold says the edit that followed it was not allowed.
    let d = demo();
    let dir = &d.sessions[0];
    let (mut read_end, mut intent) = (0, 0);
    rewrite(dir, |recs| {
        let read = find(recs, "file_read", |e| e["path"] == "src/lib.rs");
        let call = recs[read].event["call"].clone();
        recs.remove(read);
        read_end = find(recs, "tool_finished", |e| e["call"] == call);
        intent = find(recs, "file_write", |e| {
            e["path"] == "src/lib.rs" && e["status"] == "intent"
        });
    });
    let p = check_first(dir, ProblemKind::Decision, read_end as u64);
    assert!(p[0].what.contains("ended ok without a file_read"), "{p:#?}");
    assert!(
        p.iter().any(|p| p.seq == Some(intent as u64)
            && p.kind == ProblemKind::Decision
            && p.what.contains("read-before-edit")),
        "{p:#?}"
    );
}

#[test]
fn two_swapped_records_are_reported_at_the_first() {
    let d = demo();
    let dir = &d.sessions[0];
    let mut lines = raw_lines(dir);
    lines.swap(3, 4);
    write_raw(dir, &lines.concat());
    check_first(dir, ProblemKind::Integrity, 3);
    // Re-chained: a read moved before its call starts is outside any call.
    let d = demo();
    let dir = &d.sessions[0];
    let mut read = 0;
    rewrite(dir, |recs| {
        read = find(recs, "file_read", |_| true);
        recs.swap(read - 1, read);
        read -= 1;
    });
    let p = check_first(dir, ProblemKind::Structure, read as u64);
    assert!(p[0].what.contains("outside its call"), "{p:#?}");
}

#[test]
fn a_blocked_call_turned_ok_is_reported_at_its_tool_finished() {
    let d = demo();
    let dir = &d.sessions[0];
    let mut at = 0;
    rewrite(dir, |recs| {
        at = find(recs, "tool_finished", |e| e["status"] == "blocked");
        let e = recs[at].event.as_object_mut().unwrap();
        e.insert("status".into(), json!("ok"));
        e.shift_remove("refusal");
    });
    let p = check_first(dir, ProblemKind::Decision, at as u64);
    assert!(p[0].what.contains("should have been blocked"), "{p:#?}");
}

#[test]
fn problems_past_problems_max_are_counted_and_the_first_in_order_kept() {
    // A deep problem early (a blocked call turned ok, re-chained), and a damaged line
    // near the end, which the integrity check finds before the deep checks run: kept
    // in report order, not in the order found.
    let d = demo();
    let dir = &d.sessions[0];
    rewrite(dir, |recs| {
        let at = find(recs, "tool_finished", |e| e["status"] == "blocked");
        let e = recs[at].event.as_object_mut().unwrap();
        e.insert("status".into(), json!("ok"));
        e.shift_remove("refusal");
    });
    let mut lines = raw_lines(dir);
    let damaged = lines.len() - 2;
    let hex = lines[damaged].len() - 3;
    lines[damaged][hex] = if lines[damaged][hex] == b'0' {
        b'1'
    } else {
        b'0'
    };
    write_raw(dir, &lines.concat());
    let with = |problems_max| {
        let options = VerifyOptions {
            problems_max,
            ..VerifyOptions::default()
        };
        verify_with(dir, &options).unwrap()
    };
    let (report, all) = with(usize::MAX);
    let n = all.len();
    assert_eq!(
        (report.problems, report.problems_shown),
        (n as u64, n as u64)
    );
    assert_ne!(all[0].kind, ProblemKind::Integrity, "{all:#?}");
    assert!(
        all.iter().any(|p| p.kind == ProblemKind::Integrity),
        "{all:#?}"
    );
    for max in [0, 1, n - 1, n, n + 1] {
        let (report, kept) = with(max);
        let shown = max.min(n);
        assert_eq!(
            (report.problems, report.problems_shown, kept.as_slice()),
            (n as u64, shown as u64, &all[..shown]),
            "problems_max {max}"
        );
    }
}

#[test]
fn an_ok_call_turned_blocked_is_reported_at_its_tool_finished() {
    let d = demo();
    let dir = &d.sessions[0];
    let mut at = 0;
    rewrite(dir, |recs| {
        at = find(recs, "tool_finished", |e| e["status"] == "ok");
        recs[at].event["status"] = json!("blocked");
        recs[at].event["refusal"] = json!({"rule": "repeat", "path": null});
    });
    let p = check_first(dir, ProblemKind::Decision, at as u64);
    assert!(
        p.iter().any(|p| p.what.contains("blocked as a repeat")),
        "{p:#?}"
    );
}

#[test]
fn a_removed_read_before_edit_refusal_is_reported_at_its_tool_finished() {
    let d = demo();
    let dir = &d.sessions[0];
    let mut at = 0;
    rewrite(dir, |recs| {
        at = find(recs, "tool_finished", |e| {
            e["refusal"]["rule"] == "read_before_edit"
        });
        let e = recs[at].event.as_object_mut().unwrap();
        e.insert("status".into(), json!("ok"));
        e.shift_remove("refusal");
    });
    let p = check_first(dir, ProblemKind::Decision, at as u64);
    assert!(
        p.iter()
            .any(|p| p.what.contains("ended ok without a file_write ok")),
        "{p:#?}"
    );
}

#[test]
fn a_refusal_the_fold_does_not_support_is_reported() {
    // A read-before-overwrite refusal of a file read in full at that content.
    let d = demo();
    let dir = &d.sessions[0];
    let mut at = 0;
    rewrite(dir, |recs| {
        let ok_write = find(recs, "file_write", |e| {
            e["path"] == "notes.txt" && e["op"] == "replace" && e["status"] == "ok"
        });
        let before = recs[ok_write].event["before"]["hash"].clone();
        let intent = ok_write - 1;
        recs.drain(intent..=ok_write);
        at = intent; // the call's tool_finished now sits where the intent was
        recs[at].event["status"] = json!("error");
        recs[at].event["refusal"] =
            json!({"rule": "read_before_overwrite", "path": "notes.txt", "observed": before});
    });
    let p = check_first(dir, ProblemKind::Decision, at as u64);
    assert!(p[0].what.contains("every line"), "{p:#?}");
}

#[test]
fn a_corrupted_blob_is_reported_at_every_record_naming_it() {
    let d = demo();
    let dir = &d.sessions[0];
    let recs = read_records(dir);
    let intent = find(&recs, "file_write", |e| e["status"] == "intent");
    let after = recs[intent].event["after"]["hash"].as_str().unwrap();
    let blobs = cairn_replay::blob_store_of(dir).unwrap();
    let path = blobs.path(&cairn_store::Hash::from_hex(after.as_bytes()).unwrap());
    std::fs::write(&path, b"not what it was\n").unwrap();
    let p = check_first(dir, ProblemKind::Blob, intent as u64);
    assert!(p[0].what.contains("damaged"), "{p:#?}");
    assert!(p.iter().any(|x| x.seq == Some(intent as u64 + 1)), "{p:#?}");
    std::fs::remove_file(&path).unwrap();
    let p = check_first(dir, ProblemKind::Blob, intent as u64);
    assert!(p[0].what.contains("missing"), "{p:#?}");
}

#[test]
fn a_changed_after_hash_is_reported_at_its_write() {
    let d = demo();
    let dir = &d.sessions[0];
    let mut at = 0;
    rewrite(dir, |recs| {
        at = find(recs, "file_write", |e| e["status"] == "ok");
        recs[at].event["after"]["hash"] = json!("cd".repeat(32));
    });
    let p = check_first(dir, ProblemKind::Blob, at as u64);
    assert!(p[0].what.contains("missing"), "{p:#?}");
    // The output's hash line no longer matches the write either.
    assert!(
        p.iter()
            .any(|x| x.kind == ProblemKind::Decision && x.seq == Some(at as u64 + 1)),
        "{p:#?}"
    );
}

#[test]
fn a_log_truncated_at_a_line_boundary_is_reported_by_the_end_snapshot() {
    let d = demo();
    let dir = &d.sessions[0];
    let mut lines = raw_lines(dir);
    let total = lines.len();
    lines.truncate(total - 4);
    write_raw(dir, &lines.concat());
    let (report, p) = verify(dir).unwrap();
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_eq!(
        (p[0].kind, p[0].seq),
        (ProblemKind::Truncated, Some(total as u64 - 4))
    );
    assert!(!report.ended);
}

#[test]
fn a_log_cut_mid_record_is_a_torn_tail_and_its_call_is_interrupted() {
    let d = demo();
    let dir = &d.sessions[0];
    let _ = std::fs::remove_dir_all(dir.join(cairn_store::SNAPSHOT_DIR));
    let recs = read_records(dir);
    let started = find(&recs, "tool_started", |e| e["tool"] == "grep");
    let mut lines = raw_lines(dir);
    lines.truncate(started + 2);
    let half = lines[started + 1].len() / 2;
    lines[started + 1].truncate(half);
    write_raw(dir, &lines.concat());
    let (report, p) = verify(dir).unwrap();
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_eq!(
        (p[0].kind, p[0].seq),
        (ProblemKind::Integrity, Some(started as u64 + 1))
    );
    assert!(p[0].what.starts_with("torn_tail"), "{p:#?}");
    assert_eq!(report.interrupted.len(), 1);
    assert_eq!(report.interrupted[0].seq, started as u64);
    // Without the torn bytes it is a plain crash: interrupted, not corruption.
    lines.pop();
    write_raw(dir, &lines.concat());
    let (report, p) = verify(dir).unwrap();
    assert_eq!(p, vec![]);
    assert_eq!(report.interrupted.len(), 1);
}

#[test]
fn an_unknown_event_type_is_reported_as_such() {
    let d = demo();
    let dir = &d.sessions[1];
    rewrite(dir, |recs| {
        let ts = recs[2].ts.clone();
        recs.insert(
            2,
            Rec {
                ts,
                event: json!({"type": "telepathy", "what": "from the future"}),
            },
        );
    });
    let p = check_first(dir, ProblemKind::UnknownEvent, 2);
    assert!(p[0].what.contains("telepathy"), "{p:#?}");
}

#[test]
fn checkpoints_are_checked_against_the_fold() {
    let tmp = cairn_tests::ram_tempdir();
    let home = cairn_engine::Home::at(&tmp.path().join("home"));
    let mut config = cairn_tests::replay::quick_config(cairn_engine::Catalog::Thoth);
    config.checkpoint_every = 3;
    let dir = cairn_tests::replay::record(
        &home,
        &tmp.path().join("ws"),
        &[("a.txt", "one\ntwo\n")],
        config,
        &[
            ("read_file", json!({"path": "a.txt"})),
            (
                "edit_file",
                json!({"path": "a.txt", "old_string": "one", "new_string": "1"}),
            ),
            ("read_file", json!({"path": "a.txt"})),
        ],
    );
    let (report, p) = verify(&dir).unwrap();
    assert_eq!(p, vec![]);
    assert!(report.checkpoints >= 2, "{report:?}");
    // A read range widened: the fold differs from the next checkpoint's.
    let mut checkpoint = 0;
    rewrite(&dir, |recs| {
        let read = find(recs, "file_read", |_| true);
        recs[read].event["ranges"] = json!([[1, 9]]);
        checkpoint = read + find(&recs[read..], "checkpoint", |_| true);
    });
    check_first(&dir, ProblemKind::Checkpoint, checkpoint as u64);
}
