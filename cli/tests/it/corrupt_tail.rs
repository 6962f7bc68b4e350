//! A complete record that fails is corruption, never a torn tail, and a session that
//! never started is never an interrupted one: the `cairn` binary as a process, on a real
//! home. A last line with its newline and a bad hash, in the project's allow log or in a
//! session's log, stops every command that opens that log (`run`, `resume`, `allow
//! list`, a hook) with exit 2 and a message naming the file, the seq, the line and the
//! byte offset, and the log is left byte for byte as it was (nothing quarantined). A log
//! an older cairn left empty is listed by no listing, taken for `last` by nothing, and
//! `verify` and `resume` say it never started.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::json;

use crate::signals::{Setup, setup};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `cairn ARGS` in `s`'s home, from its workspace.
fn cairn(s: &Setup, args: &[&str]) -> Output {
    s.cairn(args).current_dir(&s.ws).output().unwrap()
}

/// `cairn hook claude` given `input` on stdin.
fn hook(s: &Setup, input: &serde_json::Value) -> Output {
    let mut child = s
        .cairn(&["hook", "claude", "--approve", "always"])
        .env_remove("CLAUDE_PROJECT_DIR")
        .current_dir(&s.ws)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A hook that refuses early may close its end before it read everything.
    let _ = stdin.write_all(&serde_json::to_vec(input).unwrap());
    drop(stdin);
    child.wait_with_output().unwrap()
}

fn hook_event(s: &Setup, session: &str, name: &str) -> serde_json::Value {
    json!({
        "session_id": session,
        "transcript_path": s.ws.join("no-transcript.jsonl"),
        "cwd": s.ws,
        "hook_event_name": name,
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "tool_use_id": "t1",
    })
}

/// Runs a one-call script in the workspace; returns the session's folder.
fn run_once(s: &Setup) -> PathBuf {
    std::fs::write(s.ws.join("a.txt"), "one\n").unwrap();
    let script = s.home.parent().unwrap().join("s.jsonl");
    std::fs::write(
        &script,
        "{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n",
    )
    .unwrap();
    let out = cairn(s, &["run", "--script", script.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let id = text(&out.stdout).lines().next().unwrap().trim().to_string();
    project_dir(s).join("sessions").join(id)
}

fn project_dir(s: &Setup) -> PathBuf {
    cairn_engine::Home::at(&s.home).project(&s.ws).dir
}

/// Flips a hex digit of the hash of the log's last line, which keeps its newline; returns
/// the line's byte offset and the log's bytes after the change.
fn damage_last_hash(log: &Path) -> (u64, Vec<u8>) {
    let mut bytes = std::fs::read(log).unwrap();
    assert_eq!(bytes.last(), Some(&b'\n'));
    let start = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let i = bytes.len() - 4;
    bytes[i] = if bytes[i] == b'0' { b'1' } else { b'0' };
    std::fs::write(log, &bytes).unwrap();
    (start as u64, bytes)
}

/// What `out` must be when a command met the damaged line: exit 2, and a message naming
/// the log, the seq, the line and the byte offset, and what to do.
fn check_refused(what: &str, out: &Output, log: &Path, seq: u64, offset: u64) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    let place = format!(
        "{}: corrupt log at seq {seq}, line {}, byte offset {offset}: record hash does not match its content",
        log.display(),
        seq + 1
    );
    assert!(err.contains(&place), "{what}: {err}\nexpected {place}");
    assert!(err.contains("the log is left as it is"), "{what}: {err}");
}

/// Every file name under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            }
            out.push(
                e.path()
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    out.sort();
    out
}

/// Guards against a complete allow-log record with a bad hash, in last place, being
/// taken for a torn tail and moved aside by `run` without a word.
#[test]
fn a_complete_allow_log_record_that_fails_stops_every_command_and_is_left_as_it_is() {
    let s = setup();
    run_once(&s);
    for _ in 0..2 {
        let out = cairn(&s, &["allow", "reset"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let allow = project_dir(&s).join("allow");
    let log = allow.join("events.jsonl");
    let (offset, damaged) = damage_last_hash(&log);
    let sessions = tree(&project_dir(&s).join("sessions"));
    let allow_files = tree(&allow);
    let script = s.home.parent().unwrap().join("s.jsonl");
    // (`resume` reads the allow log only when an answer grants a key for good.)
    let runs: [(&str, Output); 4] = [
        (
            "run",
            cairn(&s, &["run", "--script", script.to_str().unwrap()]),
        ),
        ("allow list", cairn(&s, &["allow", "list"])),
        ("allow revoke", cairn(&s, &["allow", "revoke", "shell:ls"])),
        (
            "hook",
            hook(&s, &hook_event(&s, "0b1e-allow-test", "PreToolUse")),
        ),
    ];
    for (what, out) in &runs {
        check_refused(what, out, &log, 1, offset);
        assert_eq!(std::fs::read(&log).unwrap(), damaged, "{what}");
        assert_eq!(tree(&allow), allow_files, "{what}: nothing quarantined");
        // The run refused made no session, not even an empty one.
        assert_eq!(tree(&project_dir(&s).join("sessions")), sessions, "{what}");
    }
    // `verify` on the allow log reports the record, not a torn tail.
    let out = cairn(&s, &["verify", log.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<&str> = report["report"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["bad_record"], "{report}");
}

/// Guards against a complete session record with a bad hash, in last place, being cut
/// off as a torn tail when the session is opened again.
#[test]
fn a_complete_session_record_that_fails_stops_resume_and_its_hook_and_is_left_as_it_is() {
    let s = setup();
    let session = run_once(&s);
    let log = session.join("events.jsonl");
    let records = std::fs::read(&log).unwrap().split(|&b| b == b'\n').count() as u64 - 1;
    let (offset, damaged) = damage_last_hash(&log);
    let files = tree(&session);
    let out = cairn(&s, &["resume", session.to_str().unwrap()]);
    check_refused("resume", &out, &log, records - 1, offset);
    assert_eq!(std::fs::read(&log).unwrap(), damaged);
    assert_eq!(tree(&session), files, "nothing quarantined");
    let out = cairn(&s, &["verify", session.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &v["problems"][0];
    assert_eq!(
        (first["seq"].as_u64(), first["offset"].as_u64()),
        (Some(records - 1), Some(offset))
    );
    assert!(
        first["what"]
            .as_str()
            .unwrap()
            .starts_with("bad_record: record hash does not match"),
        "{v}"
    );

    // A session a hook records: its next event opens the log again.
    let agent = "0b1e-session-test";
    let out = hook(&s, &hook_event(&s, agent, "SessionStart"));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let hooked = cairn_engine::find_session(&cairn_engine::Home::at(&s.home), "last", None)
        .unwrap()
        .dir;
    assert_ne!(hooked, session);
    let log = hooked.join("events.jsonl");
    let records = std::fs::read(&log).unwrap().split(|&b| b == b'\n').count() as u64 - 1;
    let (offset, damaged) = damage_last_hash(&log);
    let out = hook(&s, &hook_event(&s, agent, "PreToolUse"));
    check_refused("hook", &out, &log, records - 1, offset);
    assert_eq!(std::fs::read(&log).unwrap(), damaged);
    assert!(!hooked.join("quarantine").exists());
}

/// Guards against a session an older cairn left with an empty log (killed while it
/// created it) being listed `interrupted 0 calls` for ever, taken for `last`, and
/// refused by `resume` as a log it cannot read.
#[test]
fn a_log_left_empty_is_a_session_that_never_started() {
    let s = setup();
    let session = run_once(&s);
    let empty = project_dir(&s)
        .join("sessions")
        .join("29991231T235959.999999-e0e0e0");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("events.jsonl"), "").unwrap();
    std::fs::write(empty.join("events.lock"), "12345").unwrap();
    let id = session.file_name().unwrap().to_str().unwrap();

    let out = cairn(&s, &["sessions", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [id]);
    let note = text(&out.stderr);
    assert!(
        note.contains("1 session never started") && note.contains(&empty.display().to_string()),
        "{note}"
    );
    let out = cairn(&s, &["sessions"]);
    assert!(
        !text(&out.stdout).contains("interrupted"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        !text(&out.stdout).contains("e0e0e0"),
        "{}",
        text(&out.stdout)
    );

    // Not `last`, nor found by a part of its id; by its folder it is named for what it is.
    let out = cairn(&s, &["verify", "last"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("head seq"));
    let out = cairn(&s, &["resume", "e0e0e0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no session matches 'e0e0e0'"));
    let out = cairn(&s, &["resume", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("the session never started: its log holds no record"),
        "{}",
        text(&out.stderr)
    );
    let out = cairn(&s, &["verify", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stdout);
    assert!(
        said.contains("never started") && !said.contains("interrupted"),
        "{said}"
    );
    // Nothing wrote into it.
    assert_eq!(tree(&empty), ["events.jsonl", "events.lock"]);
    assert_eq!(std::fs::read(empty.join("events.jsonl")).unwrap(), b"");
}
