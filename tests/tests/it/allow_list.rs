//! The project allow list through the real engine: a grant is honoured only when the
//! session it names recorded the "always" answer behind it (a forged grant, rechained
//! so that the log verifies, is refused and reported), and the allow log survives a
//! torn tail as a session log does, without losing a grant, where a complete line that
//! fails is corruption that stops the next session.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use cairn_engine::event::{Answer, Status};
use cairn_engine::permission::{
    AllowList, Approver, Audit, Grant, Policy, RefusedGrant, Request, Unproven,
};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_store::{Durability, Options};
use serde_json::json;

/// Answers "always" to everything.
struct Always;

impl Approver for Always {
    fn answer(&mut self, _: &Request) -> (Answer, bool) {
        (Answer::Always, true)
    }
}

fn engine(home: &Path, ws: &Path) -> Engine {
    Engine::start(&Home::at(home), ws, EngineConfig::new(Catalog::Thoth)).unwrap()
}

/// Runs one session that writes `file`, answering "always": a real grant of
/// `write_file`. Returns the project folder and the session id.
fn grant_write_file(home: &Path, ws: &Path, file: &str) -> (PathBuf, String) {
    let mut e = engine(home, ws);
    e.set_approver(Box::new(Always));
    let out = e
        .call("write_file", json!({"path": file, "content": "x\n"}))
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    let (project, id) = (e.project().dir.clone(), e.id().to_string());
    e.end("done").unwrap();
    (project, id)
}

fn keys(keys: &[&str]) -> BTreeSet<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

/// The allow log's path in `project`.
fn allow_log(project: &Path) -> PathBuf {
    project.join("allow").join(cairn_store::LOG_FILE)
}

/// Appends `event` to the allow log as cairn would: rechained, so the log verifies.
fn append_by_hand(project: &Path, event: serde_json::Value) {
    let (mut log, _) = cairn_tests::open_writer(
        &project.join("allow"),
        Options {
            durability: Durability::Always,
            ..Options::default()
        },
    )
    .unwrap();
    log.append(&event).unwrap();
    log.close().unwrap();
}

fn appended_bytes(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn an_always_answered_through_the_engine_is_honoured_by_the_next_session() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut e = engine(home.path(), ws.path());
    e.set_approver(Box::new(Always));
    let out = e
        .call("write_file", json!({"path": "a.txt", "content": "x\n"}))
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    // Checked while the session is still writing its log, as another process would.
    let list = AllowList::new(&e.project().dir);
    assert_eq!(
        list.audit().unwrap(),
        Audit {
            keys: keys(&["write_file"]),
            ..Audit::default()
        }
    );
    e.end("done").unwrap();

    let mut e = engine(home.path(), ws.path());
    e.set_approver(Box::new(Policy::DenyAll));
    assert!(e.refused_grants().is_empty());
    let out = e
        .call("write_file", json!({"path": "b.txt", "content": "y\n"}))
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
}

#[test]
fn a_forged_grant_rechained_by_hand_is_refused_and_reported() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (project, id) = grant_write_file(home.path(), ws.path(), "a.txt");
    // Grants naming a real session and call that answered for another key, a session
    // the project does not have, and nothing (the format before grants named a call).
    let forged = [
        ("shell:rm", id.as_str(), "c1"),
        ("shell:rm", id.as_str(), "c3"),
        ("edit_file", "20250101T000000.000000-000000", "c1"),
        ("shell:curl", "", ""),
    ];
    for (key, session, call) in forged {
        append_by_hand(
            &project,
            json!({"type": "grant", "key": key, "session": session, "call": call}),
        );
    }
    // The log itself is sound: the forgery is in what it says, not in its chain.
    let report = cairn_store::verify_path(&allow_log(&project), &Default::default()).unwrap();
    assert!(report.is_clean());
    let refused = |(key, session, call): (&str, &str, &str), why| RefusedGrant {
        grant: Grant {
            key: key.into(),
            session: session.into(),
            call: call.into(),
        },
        why,
    };
    cairn_tests::wait_unlocked(&project.join("allow"));
    assert_eq!(
        AllowList::new(&project).audit().unwrap(),
        Audit {
            keys: keys(&["write_file"]),
            refused: vec![
                refused(
                    forged[0],
                    Unproven::OtherKeys {
                        keys: vec!["write_file".into()]
                    }
                ),
                refused(forged[1], Unproven::NoAnswer),
                refused(forged[2], Unproven::NoSession),
                refused(forged[3], Unproven::Unnamed),
            ],
            repaired: None,
        }
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(project.join("allow.json")).unwrap())
            .unwrap();
    assert_eq!(json, json!({"keys": ["write_file"]}));
    // The next session honours none of them.
    let mut e = engine(home.path(), ws.path());
    e.set_approver(Box::new(Policy::DenyAll));
    assert_eq!(e.refused_grants().len(), 4);
    assert!(!e.state().allow.contains_key("edit_file"));
    let out = e
        .call(
            "edit_file",
            json!({"path": "a.txt", "old_string": "x", "new_string": "y"}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Denied, "{}", out.output);
}

#[test]
fn a_torn_tail_of_the_allow_log_is_cut_off_and_no_grant_is_lost() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (project, _) = grant_write_file(home.path(), ws.path(), "a.txt");
    let log = allow_log(&project);
    let good = std::fs::read(&log).unwrap();
    // A crash in the middle of a grant: half a record, no newline.
    let torn = br#"{"prev":"5f3a","seq":1,"ts":"2026-"#;
    appended_bytes(&log, torn);
    let list = AllowList::new(&project);
    cairn_tests::wait_unlocked(&project.join("allow"));
    let audit = list.audit().unwrap();
    assert_eq!(audit.keys, keys(&["write_file"]));
    let repaired = audit.repaired.unwrap();
    assert_eq!(repaired.quarantined_bytes, torn.len() as u64);
    assert_eq!(
        std::fs::read(repaired.quarantine_file.unwrap()).unwrap(),
        torn
    );
    assert_eq!(std::fs::read(&log).unwrap(), good);

    // A whole line of garbage after the last record, newline and all, is no torn tail
    // but corruption: no session starts on it, and it is left as it is.
    appended_bytes(&log, b"garbage\n");
    cairn_tests::wait_unlocked(&project.join("allow"));
    let refused = Engine::start(
        &Home::at(home.path()),
        ws.path(),
        EngineConfig::new(Catalog::Thoth),
    )
    .err()
    .unwrap();
    assert!(
        matches!(
            &refused,
            cairn_engine::EngineError::Store(cairn_store::Error::Corruption { path, line: 2, offset, .. })
                if *path == log && *offset == good.len() as u64
        ),
        "{refused}"
    );
    assert_eq!(
        std::fs::read(&log).unwrap(),
        [&good[..], b"garbage\n"].concat()
    );
    // The line moved aside by hand, as the message says, the next session starts,
    // answers, and grants again.
    std::fs::write(&log, &good).unwrap();
    let mut e = engine(home.path(), ws.path());
    assert!(e.state().allow.contains_key("write_file"));
    e.set_approver(Box::new(Always));
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    let out = e
        .call(
            "edit_file",
            json!({"path": "a.txt", "old_string": "x", "new_string": "y"}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    e.end("done").unwrap();
    assert_eq!(list.load().unwrap(), keys(&["write_file", "edit_file"]));
    let report = cairn_store::verify_path(&log, &Default::default()).unwrap();
    assert!(report.is_clean());
}

#[test]
fn a_grant_cut_in_the_middle_of_its_record_is_lost_alone() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    grant_write_file(home.path(), ws.path(), "a.txt");
    let mut e = engine(home.path(), ws.path());
    e.set_approver(Box::new(Always));
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    let out = e
        .call(
            "edit_file",
            json!({"path": "a.txt", "old_string": "x", "new_string": "y"}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    let project = e.project().dir.clone();
    e.end("done").unwrap();
    let log = allow_log(&project);
    let len = std::fs::metadata(&log).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    cairn_tests::wait_unlocked(&project.join("allow"));
    let list = AllowList::new(&project);
    // The record cut short never completed: its grant is the only one lost.
    assert_eq!(list.load().unwrap(), keys(&["write_file"]));
    grant_write_file(home.path(), ws.path(), "b.txt");
    let mut e = engine(home.path(), ws.path());
    e.set_approver(Box::new(Always));
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    let out = e
        .call(
            "edit_file",
            json!({"path": "a.txt", "old_string": "y", "new_string": "z"}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    e.end("done").unwrap();
    assert_eq!(list.load().unwrap(), keys(&["write_file", "edit_file"]));
}

#[test]
fn a_record_being_appended_by_another_writer_is_not_cut_off() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (project, _) = grant_write_file(home.path(), ws.path(), "a.txt");
    let log = allow_log(&project);
    // Another process holds the log and has written half of its record.
    let (writer, _) = cairn_tests::open_writer(&project.join("allow"), Options::default()).unwrap();
    appended_bytes(&log, br#"{"prev":"5f3a","seq":1"#);
    let len = std::fs::metadata(&log).unwrap().len();
    let audit = AllowList::new(&project).audit().unwrap();
    assert_eq!(audit.keys, keys(&["write_file"]));
    assert_eq!(audit.repaired, None);
    assert_eq!(std::fs::metadata(&log).unwrap().len(), len);
    drop(writer);
}
