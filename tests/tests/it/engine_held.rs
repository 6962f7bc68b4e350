//! When a call's records reach the log's file: a call that only reads has them written
//! together as it ends (one `write`); a call that runs a command has them written, and
//! synced, before the command starts, and what the command's run records is written as
//! it is appended; a question to the user is in the file before it is awaited. Seen
//! from the engine's observer, which runs as each record is appended, by the size of
//! the file then.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cairn_engine::event::{Answer, Status};
use cairn_engine::permission::{Approver, Policy, Request};
use cairn_engine::{Catalog, Engine, EngineConfig, Home, Record};
use cairn_store::Durability;
use serde_json::json;

/// Each record observed: its seq, its event's type and the file's size then.
type Seen = Arc<Mutex<Vec<(u64, String, u64)>>>;

fn file_len(log: &Path) -> u64 {
    std::fs::metadata(log).unwrap().len()
}

/// A batch session over `ws` whose observer notes what [`Seen`] holds.
fn session(home: &Path, ws: &Path) -> (Engine, PathBuf, Seen) {
    let mut cfg = EngineConfig::new(Catalog::Thoth);
    cfg.durability = Durability::Batch;
    let mut e = Engine::start(&Home::at(home), ws, cfg).unwrap();
    let log = e.dir().join("events.jsonl");
    let seen: Seen = Arc::default();
    let (s, l) = (seen.clone(), log.clone());
    e.set_observer(Box::new(move |r: &Record| {
        let kind = serde_json::to_value(&r.event).unwrap()["type"]
            .as_str()
            .unwrap()
            .to_string();
        s.lock().unwrap().push((r.seq, kind, file_len(&l)));
    }));
    (e, log, seen)
}

/// Where each record of the log at `log` starts and ends, by seq.
fn extents(log: &Path) -> Vec<(u64, u64)> {
    let bytes = std::fs::read(log).unwrap();
    let mut at = 0u64;
    bytes
        .split_inclusive(|b| *b == b'\n')
        .map(|line| {
            let start = at;
            at += line.len() as u64;
            (start, at)
        })
        .collect()
}

#[test]
fn a_reading_call_is_written_as_it_ends_and_a_command_call_before_the_command_runs() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\ntwo\n").unwrap();
    let (mut e, log, seen) = session(home.path(), ws.path());
    e.set_approver(Box::new(Policy::AllowAll));
    let out = e.call("read_file", json!({"path": "a.txt"})).unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    let read: Vec<_> = std::mem::take(&mut *seen.lock().unwrap());
    let after_read = file_len(&log);
    let out = e.call("shell", json!({"command": "echo hi"})).unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    let shell: Vec<_> = std::mem::take(&mut *seen.lock().unwrap());
    let ext = extents(&log);
    let extent = |seq: u64| ext[usize::try_from(seq).unwrap()];

    // The read: none of its records is in the file while the call runs, all are after.
    let kinds: Vec<&str> = read.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"tool_started"), "{kinds:?}");
    assert!(kinds.contains(&"tool_finished"), "{kinds:?}");
    let call_start = extent(read[0].0).0;
    for (seq, kind, len) in &read {
        assert_eq!(
            *len, call_start,
            "{kind} (seq {seq}) was written before the call ended"
        );
    }
    assert_eq!(after_read, extent(read.last().unwrap().0).1);

    // The command: its start is held until the sync before the command, and the
    // records of its run are written as they are appended.
    let started = shell
        .iter()
        .find(|(_, k, _)| k == "shell_exec")
        .expect("the command's run is recorded");
    assert_eq!(shell[0].1, "tool_started");
    assert_eq!(
        started.2,
        extent(started.0).1,
        "the command's start is in the file once it is recorded"
    );
    assert!(started.2 > extent(shell[0].0).1);
    assert_eq!(file_len(&log), ext.last().unwrap().1);
}

/// Allows once, noting whether the question's record was in the log's file when asked.
struct Checking {
    log: PathBuf,
    in_file: Arc<Mutex<Vec<bool>>>,
}

impl Approver for Checking {
    fn answer(&mut self, r: &Request) -> (Answer, bool) {
        let text = std::fs::read_to_string(&self.log).unwrap();
        let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        let event = &last["event"];
        self.in_file
            .lock()
            .unwrap()
            .push(event["type"] == "permission_requested" && event["key"] == r.key.as_str());
        (Answer::Once, true)
    }
}

#[test]
fn a_question_is_in_the_file_before_it_is_awaited() {
    let home = tempfile::tempdir().unwrap();
    let (_base, ws, _) = crate::engine_permissions::beside_the_workspace();
    let (mut e, log, _) = session(home.path(), &ws);
    let in_file = Arc::new(Mutex::new(Vec::new()));
    e.set_approver(Box::new(Checking {
        log: log.clone(),
        in_file: in_file.clone(),
    }));
    // A read outside the workspace asks, in the middle of a call that only reads.
    let out = e
        .call("read_file", json!({"path": "../other/notes.txt"}))
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    assert!(out.output.contains("far away"));
    assert_eq!(*in_file.lock().unwrap(), [true]);
    assert_eq!(file_len(&log), extents(&log).last().unwrap().1);
}
