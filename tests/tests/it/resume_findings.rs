//! Each finding of a resume's reconciliation, and the ways a session is resumed:
//! twice, after it ended (allowed: `session_resumed` reopens it), as a fork, and not
//! at all while another process holds its log.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cairn_engine::event::{Event, ExecStatus, FileWrite, Rule, Status, WriteOp, WriteStatus};
use cairn_engine::shell::ChangeKind;
use cairn_engine::state::ProcessStatus;
use cairn_engine::{
    Catalog, Engine, EngineConfig, Finding, Home, InterruptedOutcome, ResumeOptions,
};
use cairn_store::{BlobStore, Options};
use serde_json::json;

const RESUME_HELPER: &str = env!("CARGO_BIN_EXE_resume_helper");
const STORE_HELPER: &str = env!("CARGO_BIN_EXE_store_helper");

struct Ws {
    _tmp: tempfile::TempDir,
    home: Home,
    root: PathBuf,
}

fn ws() -> Ws {
    let tmp = cairn_tests::ram_tempdir();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(root.join("b.txt"), "bee\n").unwrap();
    Ws {
        home: Home::at(&base.join("home")),
        root,
        _tmp: tmp,
    }
}

fn start(w: &Ws) -> Engine {
    Engine::start(&w.home, &w.root, EngineConfig::new(Catalog::Thoth)).unwrap()
}

fn resume(w: &Ws, dir: &Path) -> (Engine, cairn_engine::ResumeReport) {
    cairn_tests::wait_unlocked(dir);
    Engine::resume(&w.home, dir, ResumeOptions::default()).unwrap()
}

fn verify_clean(dir: &Path) {
    let (_, problems) = cairn_replay::verify(dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}

/// A session that read both files and ended; returns its folder.
fn read_both(w: &Ws) -> PathBuf {
    let mut e = start(w);
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    e.call("read_file", json!({"path": "b.txt"})).unwrap();
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    dir
}

#[test]
fn an_edited_file_loses_its_read_coverage() {
    let w = ws();
    let dir = read_both(&w);
    std::fs::write(w.root.join("a.txt"), "changed\n").unwrap();
    let (mut e, report) = resume(&w, &dir);
    assert!(report.was_ended);
    assert_eq!(
        report.findings,
        vec![Finding::FileChanged {
            path: "a.txt".into(),
            what: ChangeKind::Changed
        }]
    );
    assert_eq!(e.state().files["a.txt"].read_hash, None);
    let out = e
        .call(
            "edit_file",
            json!({"path": "a.txt", "old_string": "changed", "new_string": "x"}),
        )
        .unwrap();
    assert_eq!(out.refusal.map(|r| r.rule), Some(Rule::ReadBeforeEdit));
    // b.txt did not change: its coverage holds.
    let out = e
        .call(
            "edit_file",
            json!({"path": "b.txt", "old_string": "bee", "new_string": "bea"}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    e.end("done").unwrap();
    verify_clean(&dir);
}

#[test]
fn a_deleted_file_is_recorded_as_deleted() {
    let w = ws();
    let dir = read_both(&w);
    std::fs::remove_file(w.root.join("b.txt")).unwrap();
    let (e, report) = resume(&w, &dir);
    assert_eq!(
        report.findings,
        vec![Finding::FileChanged {
            path: "b.txt".into(),
            what: ChangeKind::Deleted
        }]
    );
    assert_eq!(e.state().files["b.txt"].hash, None);
    e.end("done").unwrap();
    verify_clean(&dir);
}

/// Starts `resume_helper bg`, waits until its background `sleep 30` runs, kills the
/// helper; returns the session folder.
fn crash_with_background(w: &Ws) -> PathBuf {
    let mut child = Command::new(RESUME_HELPER)
        .arg("bg")
        .arg(&w.home.root)
        .arg(&w.root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut session = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(s) = line.strip_prefix("session ") {
            session = s.to_string();
        }
        if line == "ready" {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    w.home.project(&w.root).session_dir(&session)
}

#[test]
fn a_running_background_process_is_adopted_and_stopped_by_end() {
    let w = ws();
    let dir = crash_with_background(&w);
    let (e, report) = resume(&w, &dir);
    let p = e.state().processes["p1"].clone();
    let (pid, t) = (p.pid.unwrap(), p.start_time.unwrap());
    assert_eq!(
        report.findings,
        vec![Finding::ProcessAdopted {
            id: "p1".into(),
            pid
        }]
    );
    assert!(cairn_engine::shell::alive(pid, t));
    assert!(e.state().processes["p1"].is_running());
    e.end("done").unwrap();
    assert!(!cairn_engine::shell::alive(pid, t), "sleep 30 left running");
    let state = cairn_engine::fold::fold_all(&dir).unwrap().state;
    assert_eq!(
        state.processes["p1"].status,
        ProcessStatus::Ended(ExecStatus::Cancelled)
    );
    verify_clean(&dir);
}

#[test]
fn a_dead_background_process_is_recorded_as_lost() {
    let w = ws();
    let dir = crash_with_background(&w);
    let p = cairn_engine::fold::fold_all(&dir).unwrap().state.processes["p1"].clone();
    // SAFETY: kill sends a signal to the process group the crashed session started.
    unsafe {
        libc::killpg(p.pid.unwrap() as libc::pid_t, libc::SIGKILL);
    }
    while cairn_engine::shell::alive(p.pid.unwrap(), p.start_time.unwrap()) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let (e, report) = resume(&w, &dir);
    assert_eq!(
        report.findings,
        vec![Finding::ProcessLost {
            id: "p1".into(),
            pid: p.pid
        }]
    );
    assert_eq!(
        e.state().processes["p1"].status,
        ProcessStatus::Ended(ExecStatus::Lost)
    );
    e.end("done").unwrap();
    verify_clean(&dir);
}

/// A session that read a.txt, then a crafted crash in the middle of an edit of it:
/// `tool_started` and the write's intent, nothing after. `disk` is what the file holds
/// at resume.
fn interrupted_write(disk: Option<&str>) -> (Ws, Engine, cairn_engine::ResumeReport) {
    let w = ws();
    let mut e = start(&w);
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    let dir = e.dir().to_path_buf();
    let blobs = BlobStore::open(&e.project().blobs_dir()).unwrap();
    drop(e);
    let before = blobs.put(b"one\ntwo\n").unwrap();
    let after = blobs.put(b"ONE\ntwo\n").unwrap();
    let (mut log, _) = cairn_tests::open_writer(&dir, Options::default()).unwrap();
    log.append(&Event::ToolStarted {
        at: None,
        call: "c2".into(),
        tool: "edit_file".into(),
        input: json!({"path": "a.txt", "old_string": "one", "new_string": "ONE"}),
        input_hash: None,
        mcp: None,
        observed: None,
    })
    .unwrap();
    log.append(&Event::FileWrite(FileWrite {
        call: Some("c2".into()),
        op: WriteOp::Edit,
        path: "a.txt".into(),
        before: Some(before),
        after: Some(after),
        lines_after: 2,
        mode: Some(0o644),
        status: WriteStatus::Intent,
        withheld: false,
        unknown: false,
        diff: None,
    }))
    .unwrap();
    log.sync().unwrap();
    drop(log);
    if let Some(text) = disk {
        std::fs::write(w.root.join("a.txt"), text).unwrap();
    }
    let (e, report) = resume(&w, &dir);
    (w, e, report)
}

fn outcome(report: &cairn_engine::ResumeReport) -> InterruptedOutcome {
    match &report.findings[0] {
        Finding::CallInterrupted { call, outcome, .. } => {
            assert_eq!(call, "c2");
            *outcome
        }
        other => panic!("{other:?}"),
    }
}

fn finished_output(dir: &Path, call: &str) -> (Status, String) {
    let mut found = None;
    for r in cairn_store::LogReader::open(dir)
        .unwrap()
        .records()
        .unwrap()
    {
        if let Ok(rec) = cairn_engine::fold::parse(&r.unwrap())
            && let Event::ToolFinished(f) = rec.event
            && f.call == call
        {
            found = Some((f.status, f.output));
        }
    }
    found.unwrap()
}

#[test]
fn a_write_interrupted_before_its_install_is_not_applied() {
    let (_w, e, report) = interrupted_write(None);
    assert_eq!(outcome(&report), InterruptedOutcome::NotApplied);
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    let dir = e.dir().to_path_buf();
    assert!(e.state().open_calls.is_empty());
    e.end("done").unwrap();
    let (status, output) = finished_output(&dir, "c2");
    assert_eq!(status, Status::Interrupted);
    assert!(output.contains("was not installed"), "{output}");
    verify_clean(&dir);
}

#[test]
fn a_write_interrupted_after_its_install_is_applied_and_recorded() {
    let (_w, mut e, report) = interrupted_write(Some("ONE\ntwo\n"));
    assert_eq!(outcome(&report), InterruptedOutcome::Applied);
    // Installed and recorded as the call's write: no external change, coverage kept.
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    let out = e
        .call(
            "edit_file",
            json!({"path": "a.txt", "old_string": "two", "new_string": "TWO"}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    assert!(finished_output(&dir, "c2").1.contains("was installed"));
    verify_clean(&dir);
}

#[test]
fn a_write_interrupted_with_other_content_on_disk_is_unknown() {
    let (_w, e, report) = interrupted_write(Some("something else\n"));
    assert_eq!(outcome(&report), InterruptedOutcome::Unknown);
    assert!(report.findings.contains(&Finding::FileChanged {
        path: "a.txt".into(),
        what: ChangeKind::Changed
    }));
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    verify_clean(&dir);
}

#[test]
fn a_session_resumes_twice_and_each_resume_is_recorded() {
    let w = ws();
    let dir = read_both(&w);
    let (e, _) = resume(&w, &dir);
    let head1 = e.end("first").unwrap();
    let (e, report) = resume(&w, &dir);
    assert_eq!(report.previous_head.unwrap(), head1);
    assert!(report.was_ended);
    e.end("second").unwrap();
    let mut resumed = 0;
    for r in cairn_store::LogReader::open(&dir)
        .unwrap()
        .records()
        .unwrap()
    {
        if let Ok(rec) = cairn_engine::fold::parse(&r.unwrap())
            && let Event::SessionResumed { .. } = rec.event
        {
            resumed += 1;
        }
    }
    assert_eq!(resumed, 2);
    verify_clean(&dir);
}

#[test]
fn a_resumed_session_folds_to_its_live_state() {
    let w = ws();
    let dir = read_both(&w);
    std::fs::write(w.root.join("c.txt"), "new\n").unwrap();
    let (mut e, _) = resume(&w, &dir);
    e.call("read_file", json!({"path": "c.txt"})).unwrap();
    let live = e.state().clone();
    drop(e);
    assert_eq!(cairn_engine::fold::fold_all(&dir).unwrap().state, live);
    assert_eq!(
        cairn_engine::fold::fold_with_snapshot(&dir).unwrap().state,
        live
    );
}

#[test]
fn a_log_locked_by_a_live_process_is_refused_naming_its_pid() {
    let w = ws();
    let dir = read_both(&w);
    cairn_tests::wait_unlocked(&dir);
    let mut child = Command::new(STORE_HELPER)
        .arg("hold-lock")
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let line = cairn_tests::first_line(&mut child);
    assert!(line.starts_with("ready"), "{line}");
    let err = Engine::resume(&w.home, &dir, ResumeOptions::default())
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(
        text.contains(&format!("locked by process {}", child.id())),
        "{text}"
    );
    drop(child.stdin.take());
    child.wait().unwrap();
}

#[test]
fn a_forked_session_resumes() {
    let w = ws();
    let dir = read_both(&w);
    let dest = w.root.parent().unwrap().join("fork");
    let (fork, report) = cairn_replay::fork(&w.home, &dir, 2, &dest, None).unwrap();
    assert_eq!(report.at_seq, 2);
    let fork_dir = fork.dir().to_path_buf();
    fork.end("forked").unwrap();
    let (mut e, report) = resume(&w, &fork_dir);
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    // The read of a.txt (seq 2 at the latest) carried over into the fork.
    let out = e
        .call(
            "edit_file",
            json!({"path": "a.txt", "old_string": "one", "new_string": "1"}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    e.end("done").unwrap();
    verify_clean(&fork_dir);
}
